//! The seam between the group coordinator and the shard it runs on: what
//! the coordinator needs from a runtime, and nothing else. The shard
//! implements it (`shard::group_glue`); the unit tests implement it with a
//! fake clock, a queue of timers and an in-memory log, and drive the state
//! machine without glommio.

use std::{future::Future, pin::Pin, time::Instant};

use super::{GroupSettings, StoreError};

/// A future the coordinator hands the host to run on this shard's thread.
pub type LocalTask = Pin<Box<dyn Future<Output = ()> + 'static>>;

/// A record for `__consumer_offsets`: its key and value (`None`: a
/// tombstone).
pub type OffsetsRecord = (Vec<u8>, Option<Vec<u8>>);

/// What a timer re-checks when it fires ([`super::Coordinator::fire`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Timer {
    /// The rebalance numbered `seq` of `group` may be over (its deadline or
    /// the end of the initial delay).
    Rebalance { group: String, seq: u64 },
    /// `member`'s session may have expired.
    Session { group: String, member: String },
}

/// What the coordinator asks of the shard that owns it.
pub trait GroupHost {
    /// Group coordination settings, fixed at start.
    fn settings(&self) -> &GroupSettings;

    /// Monotonic time, for sessions and rebalance deadlines.
    fn now(&self) -> Instant;

    /// Wall-clock milliseconds since the epoch, for what is stored and shown
    /// (commit and state timestamps, expiry).
    fn now_ms(&self) -> i64;

    /// Whether `partition` of `topic` exists (a commit for anything else is
    /// refused with UNKNOWN_TOPIC_OR_PARTITION).
    fn partition_exists(&self, topic: &str, partition: i32) -> bool;

    /// Appends `records` to partition `partition` of `__consumer_offsets` as
    /// one batch and resolves once they are durable.
    fn append(
        &self,
        partition: i32,
        records: Vec<OffsetsRecord>,
    ) -> Pin<Box<dyn Future<Output = Result<(), StoreError>>>>;

    /// Appends `records` to partition `partition` of `__consumer_offsets`
    /// as one transactional batch of `producer_id` at `producer_epoch`
    /// (TxnOffsetCommit), and resolves once they are durable.
    fn append_transactional(
        &self,
        partition: i32,
        records: Vec<OffsetsRecord>,
        producer_id: i64,
        producer_epoch: i16,
    ) -> Pin<Box<dyn Future<Output = Result<(), StoreError>>>>;

    /// Calls `Coordinator::fire(timer)` once `after` has passed.
    ///
    /// **Contract:** never calls back before returning (the coordinator may
    /// hold its own `RefCell` borrows when it arms a timer).
    fn schedule(&self, after: std::time::Duration, timer: Timer);

    /// Runs `task` on this shard.
    ///
    /// **Contract:** does not poll `task` before returning, for the same
    /// reason as `schedule`.
    fn spawn(&self, task: LocalTask);
}
