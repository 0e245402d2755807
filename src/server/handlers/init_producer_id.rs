//! InitProducerId, versions 0–4. Idempotent producers (no transactional
//! id) get a producer id (unique for the life of the data directory) and
//! epoch 0; a producer that presents its id and epoch (v3+, KIP-360) gets
//! the next epoch, which starts its sequences again. A transactional id
//! goes to its transaction coordinator, which bumps the id's epoch and so
//! fences every older producer of it (PRODUCER_FENCED from v4, before that
//! INVALID_PRODUCER_EPOCH).

use std::rc::Rc;

use kafka_protocol::messages::{InitProducerIdRequest, InitProducerIdResponse};

use crate::protocol::errors;
use crate::server::handlers::txn_route;
use crate::shard::{messages::AllocateProducerId, router, Shard};
use crate::txn::InitTxnProducer;

pub async fn handle(shard: &Rc<Shard>, req: InitProducerIdRequest, version: i16) -> InitProducerIdResponse {
    let mut resp = InitProducerIdResponse::default();
    resp.producer_id = (-1).into();
    resp.producer_epoch = -1;
    let (given_id, given_epoch) = (req.producer_id.0, req.producer_epoch);
    if let Some(id) = req.transactional_id.as_ref().map(|id| id.0.to_string()).filter(|id| !id.is_empty()) {
        let call = InitTxnProducer {
            transactional_id: id.clone(),
            timeout_ms: req.transaction_timeout_ms,
            producer_id: given_id,
            producer_epoch: given_epoch,
        };
        match txn_route::call(shard, &id, call).await {
            Some(answer) => {
                resp.error_code = txn_route::fenced_as(answer.error, version, 4);
                resp.producer_id = answer.producer_id.into();
                resp.producer_epoch = answer.producer_epoch;
            }
            None => resp.error_code = txn_route::no_coordinator(shard, &id),
        }
        return resp;
    }
    if given_id >= 0 && (0..i16::MAX - 1).contains(&given_epoch) {
        resp.producer_id = given_id.into();
        resp.producer_epoch = given_epoch + 1;
        return resp;
    }
    match shard.ask(router::CONTROLLER, AllocateProducerId).await {
        Ok(Ok(id)) => {
            resp.producer_id = id.into();
            resp.producer_epoch = 0;
        }
        Ok(Err(e)) => {
            log::warn!("cannot allocate a producer id: {e}");
            resp.error_code = errors::COORDINATOR_NOT_AVAILABLE;
        }
        Err(_) => resp.error_code = errors::COORDINATOR_NOT_AVAILABLE,
    }
    resp
}
