//! AddOffsetsToTxn, versions 0–3: the group's `__consumer_offsets`
//! partition joins the producer's open transaction, so its commit or abort
//! marker reaches the group coordinator holding the TxnOffsetCommit.

use std::rc::Rc;

use kafka_protocol::messages::{AddOffsetsToTxnRequest, AddOffsetsToTxnResponse};

use crate::groups::{records::partition_for, OFFSETS_TOPIC};
use crate::protocol::errors;
use crate::server::handlers::txn_route;
use crate::shard::Shard;
use crate::txn::AddTxnPartitions;

pub async fn handle(shard: &Rc<Shard>, req: AddOffsetsToTxnRequest, version: i16) -> AddOffsetsToTxnResponse {
    let id = req.transactional_id.0.to_string();
    let group = req.group_id.0.to_string();
    let mut resp = AddOffsetsToTxnResponse::default();
    if group.is_empty() {
        resp.error_code = errors::INVALID_GROUP_ID;
        return resp;
    }
    let partition = partition_for(&group, shard.settings.groups.offsets_partitions);
    let call = AddTxnPartitions {
        transactional_id: id.clone(),
        producer_id: req.producer_id.0,
        producer_epoch: req.producer_epoch,
        partitions: vec![(OFFSETS_TOPIC.to_string(), partition)],
    };
    resp.error_code = match txn_route::call(shard, &id, call).await {
        Some(answers) => answers.first().map_or(errors::NONE, |(_, _, e)| txn_route::fenced_as(*e, version, 2)),
        None => txn_route::no_coordinator(shard, &id),
    };
    resp
}
