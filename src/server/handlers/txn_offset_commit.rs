//! TxnOffsetCommit, versions 0–3: a transactional producer commits a
//! group's offsets inside its transaction. They go to the group's
//! coordinator, which appends them to the group's `__consumer_offsets`
//! partition as the producer's transactional batch and keeps them pending,
//! invisible to OffsetFetch, until the transaction's marker lands there
//! (AddOffsetsToTxn put that partition in the transaction). A producer
//! older than one the group coordinator has seen is fenced (PRODUCER_FENCED
//! from v3, INVALID_PRODUCER_EPOCH before).

use std::rc::Rc;

use kafka_protocol::messages::{
    txn_offset_commit_response::{TxnOffsetCommitResponsePartition, TxnOffsetCommitResponseTopic},
    TxnOffsetCommitRequest, TxnOffsetCommitResponse,
};

use crate::groups::{records::partition_for, CommitTxnOffsets, OFFSETS_TOPIC};
use crate::protocol::errors::{self, ErrorCode};
use crate::server::handlers::txn_route;
use crate::shard::{router, Shard};

pub async fn handle(shard: &Rc<Shard>, request: TxnOffsetCommitRequest, version: i16) -> TxnOffsetCommitResponse {
    let group = request.group_id.0.to_string();
    let partition = partition_for(&group, shard.settings.groups.offsets_partitions);
    let owner = router::owner(&shard.topics(), OFFSETS_TOPIC, partition, shard.count);
    let refused = |error: ErrorCode, request: &TxnOffsetCommitRequest| {
        let mut resp = TxnOffsetCommitResponse::default();
        for t in &request.topics {
            let mut rt = TxnOffsetCommitResponseTopic::default();
            rt.name = t.name.clone();
            for p in &t.partitions {
                let mut rp = TxnOffsetCommitResponsePartition::default();
                rp.partition_index = p.partition_index;
                rp.error_code = error;
                rt.partitions.push(rp);
            }
            resp.topics.push(rt);
        }
        resp
    };
    if group.is_empty() {
        return refused(errors::INVALID_GROUP_ID, &request);
    }
    let Some(owner) = owner else {
        let code = match router::no_owner_error(&shard.topics(), OFFSETS_TOPIC, partition) {
            errors::NOT_LEADER_OR_FOLLOWER => errors::NOT_COORDINATOR,
            _ => errors::COORDINATOR_NOT_AVAILABLE,
        };
        return refused(code, &request);
    };
    let copy = request.clone();
    match shard.ask(owner, CommitTxnOffsets { request }).await {
        Ok(Some(mut resp)) => {
            for p in resp.topics.iter_mut().flat_map(|t| t.partitions.iter_mut()) {
                p.error_code = txn_route::fenced_as(p.error_code, version, 3);
            }
            resp
        }
        // Its offsets partition moved away as the call went there.
        Ok(None) => refused(errors::NOT_COORDINATOR, &copy),
        Err(_) => refused(errors::COORDINATOR_NOT_AVAILABLE, &copy),
    }
}
