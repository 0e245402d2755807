//! What the transaction APIs share: finding the shard that coordinates a
//! transactional id, and answering a fenced producer in the words its
//! request version knows.

use std::rc::Rc;

use crate::{
    protocol::errors::{self, ErrorCode},
    shard::{router, CrossShard, Shard, ShardId},
    txn::{partition_for, TXN_TOPIC},
};

/// The shard coordinating `transactional_id` (the owner of its
/// `__transaction_state` partition), if that topic exists.
pub fn coordinator_of(shard: &Shard, transactional_id: &str) -> Option<ShardId> {
    let partition = partition_for(transactional_id, shard.settings.txn.partitions);
    router::owner(&shard.topics(), TXN_TOPIC, partition, shard.count)
}

/// What a transaction request is told when this broker cannot coordinate
/// its id: NOT_COORDINATOR when another broker of the quorum leads the id's
/// `__transaction_state` partition (the client finds it again), else
/// COORDINATOR_NOT_AVAILABLE (retriable).
pub fn no_coordinator(shard: &Shard, transactional_id: &str) -> ErrorCode {
    let partition = partition_for(transactional_id, shard.settings.txn.partitions);
    match router::no_owner_error(&shard.topics(), TXN_TOPIC, partition) {
        errors::NOT_LEADER_OR_FOLLOWER => errors::NOT_COORDINATOR,
        _ => errors::COORDINATOR_NOT_AVAILABLE,
    }
}

/// Sends a transaction call to its coordinator; `None` when none is
/// reachable, or the shard it went to no longer coordinates the id (the
/// caller answers with `no_coordinator`).
pub async fn call<R, C: CrossShard<Reply = Option<R>>>(
    shard: &Rc<Shard>,
    transactional_id: &str,
    call: C,
) -> Option<R> {
    let owner = coordinator_of(shard, transactional_id)?;
    shard.ask(owner, call).await.ok().flatten()
}

/// PRODUCER_FENCED exists for clients from the version given (KIP-588:
/// InitProducerId 4, AddPartitionsToTxn 2, AddOffsetsToTxn 2, EndTxn 2,
/// TxnOffsetCommit 3); older ones are told INVALID_PRODUCER_EPOCH, which
/// they treat as fatal in the same way.
pub fn fenced_as(error: ErrorCode, version: i16, knows_fenced_from: i16) -> ErrorCode {
    if error == errors::PRODUCER_FENCED && version < knows_fenced_from {
        errors::INVALID_PRODUCER_EPOCH
    } else {
        error
    }
}
