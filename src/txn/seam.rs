//! The seam between the transaction coordinator and the shard it runs on:
//! what the coordinator needs from a runtime, and nothing else. The shard
//! implements it (`shard::txn_glue`); the unit tests implement it with a
//! fake clock, an in-memory log and recorded markers.

use std::{future::Future, pin::Pin};

use super::TxnSettings;
use crate::{groups::StoreError, protocol::errors::ErrorCode, protocol::record_batch::TxnMarker};

/// A future the coordinator hands the host to run on this shard's thread.
pub type LocalTask = Pin<Box<dyn Future<Output = ()> + 'static>>;

/// A future of this shard's thread.
pub type LocalFuture<T> = Pin<Box<dyn Future<Output = T> + 'static>>;

/// What the transaction coordinator asks of the shard that owns it.
pub trait TxnHost {
    /// Transaction settings, fixed at start.
    fn settings(&self) -> &TxnSettings;

    /// Wall-clock milliseconds since the epoch: transaction start and update
    /// times, stored and shown, and timeouts (Kafka's coordinator measures
    /// them with the wall clock too, so they survive a restart).
    fn now_ms(&self) -> i64;

    /// Whether `partition` of `topic` exists (AddPartitionsToTxn refuses
    /// anything else with UNKNOWN_TOPIC_OR_PARTITION).
    fn partition_exists(&self, topic: &str, partition: i32) -> bool;

    /// Appends one record to partition `partition` of `__transaction_state`
    /// and resolves once it is durable.
    fn append(&self, partition: i32, key: Vec<u8>, value: Option<Vec<u8>>) -> LocalFuture<Result<(), StoreError>>;

    /// Like `append`, but resolves once written, before it is durable: for
    /// a record whose loss in a crash the restart repairs. The next durable
    /// append to the same partition makes it durable too.
    fn append_written(
        &self,
        partition: i32,
        key: Vec<u8>,
        value: Option<Vec<u8>>,
    ) -> LocalFuture<Result<(), StoreError>> {
        self.append(partition, key, value)
    }

    /// Writes `marker` durably to each listed partition, wherever it lives;
    /// answers each with NONE or the error that kept the marker out.
    fn write_markers(
        &self,
        marker: TxnMarker,
        partitions: Vec<(String, i32)>,
    ) -> LocalFuture<Vec<(String, i32, ErrorCode)>>;

    /// A producer id never handed out before.
    fn allocate_producer_id(&self) -> LocalFuture<Result<i64, String>>;

    /// Runs `task` on this shard.
    ///
    /// **Contract:** does not poll `task` before returning (the coordinator
    /// may hold its own `RefCell` borrows when it spawns).
    fn spawn(&self, task: LocalTask);
}
