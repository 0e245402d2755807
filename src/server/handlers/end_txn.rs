//! EndTxn, versions 0–3: commit or abort the producer's open transaction.
//! Answered once the outcome is durable in `__transaction_state` and the
//! markers were written (v5's epoch bump, KIP-890, is not offered).

use std::rc::Rc;

use kafka_protocol::messages::{EndTxnRequest, EndTxnResponse};

use crate::server::handlers::txn_route;
use crate::shard::Shard;
use crate::txn::EndTxn;

pub async fn handle(shard: &Rc<Shard>, req: EndTxnRequest, version: i16) -> EndTxnResponse {
    let id = req.transactional_id.0.to_string();
    let call = EndTxn {
        transactional_id: id.clone(),
        producer_id: req.producer_id.0,
        producer_epoch: req.producer_epoch,
        commit: req.committed,
    };
    let mut resp = EndTxnResponse::default();
    resp.error_code = match txn_route::call(shard, &id, call).await {
        Some(error) => txn_route::fenced_as(error, version, 2),
        None => txn_route::no_coordinator(shard, &id),
    };
    resp
}
