//! The transaction coordinator: transactional ids, their producer ids and
//! epochs, and the two-phase end of each transaction, kept in the broker's
//! own compacted topic `__transaction_state` in Kafka's schemas.
//!
//! A transactional id lives on one shard: the owner of its
//! `__transaction_state` partition (`abs(javaHashCode(id)) % partitions`,
//! as Kafka places it and as groups are placed). Requests for it that
//! arrive on another shard travel there as a typed call ([`InitTxnProducer`],
//! [`AddTxnPartitions`], [`EndTxn`], …). Every state change is a durable
//! append of the id's whole new state before anyone is answered; ending a
//! transaction logs `PrepareCommit`/`PrepareAbort`, then writes the markers
//! to every partition of the transaction, then logs `CompleteCommit`/
//! `CompleteAbort`. A restart replays the topic and finishes every prepared
//! transaction it finds.
//!
//! **Architecture invariant:** a transactional id's state is touched only by
//! the shard that owns its `__transaction_state` partition, and only one
//! state change per id is in flight at a time (the others are answered
//! CONCURRENT_TRANSACTIONS, which clients retry).
//!
//! **Architecture invariant:** a marker is written only after the prepare
//! record of its transaction is durable, and the complete record only after
//! every marker is.

pub mod coordinator;
pub mod records;
pub mod seam;
#[cfg(test)]
mod tests;

pub use coordinator::TxnCoordinator;
pub use seam::TxnHost;

use crate::protocol::errors::ErrorCode;

/// The internal topic holding transaction state.
pub const TXN_TOPIC: &str = "__transaction_state";

/// Transaction coordinator settings, Kafka's names in brackets.
#[derive(Debug, Clone)]
pub struct TxnSettings {
    /// Partitions of `__transaction_state` created at first start
    /// (`transaction.state.log.num.partitions`, 50).
    pub partitions: i32,
    /// The longest transaction timeout a producer may ask for
    /// (`transaction.max.timeout.ms`, 15 minutes).
    pub max_timeout_ms: i32,
    /// How often open transactions are checked for expiry, and prepared
    /// ones whose markers failed retried
    /// (`transaction.abort.timed.out.transaction.cleanup.interval.ms`, 10 s).
    pub abort_check_interval_ms: u64,
}

impl Default for TxnSettings {
    fn default() -> Self {
        Self { partitions: 50, max_timeout_ms: 900_000, abort_check_interval_ms: 10_000 }
    }
}

/// The `__transaction_state` partition of a transactional id.
pub fn partition_for(transactional_id: &str, partitions: i32) -> i32 {
    crate::groups::records::partition_for(transactional_id, partitions)
}

/// A transactional id's state, with Kafka's numbering (the status byte of
/// `TransactionLogValue`) and names (DescribeTransactions, ListTransactions).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TxnState {
    Empty,
    Ongoing,
    PrepareCommit,
    PrepareAbort,
    CompleteCommit,
    CompleteAbort,
    Dead,
    PrepareEpochFence,
}

impl TxnState {
    pub const ALL: [TxnState; 8] = [
        Self::Empty,
        Self::Ongoing,
        Self::PrepareCommit,
        Self::PrepareAbort,
        Self::CompleteCommit,
        Self::CompleteAbort,
        Self::Dead,
        Self::PrepareEpochFence,
    ];

    pub fn code(self) -> i8 {
        self as i8
    }

    pub fn from_code(code: i8) -> Option<Self> {
        Self::ALL.get(usize::try_from(code).ok()?).copied()
    }

    pub fn name(self) -> &'static str {
        match self {
            Self::Empty => "Empty",
            Self::Ongoing => "Ongoing",
            Self::PrepareCommit => "PrepareCommit",
            Self::PrepareAbort => "PrepareAbort",
            Self::CompleteCommit => "CompleteCommit",
            Self::CompleteAbort => "CompleteAbort",
            Self::Dead => "Dead",
            Self::PrepareEpochFence => "PrepareEpochFence",
        }
    }

    /// Markers are being written: the transaction's outcome is decided.
    pub fn is_prepared(self) -> bool {
        matches!(self, Self::PrepareCommit | Self::PrepareAbort)
    }
}

// The transaction calls, each answered by its own `TxnCoordinator` method;
// another shard makes them through `shard::calls`.

/// InitProducerId with a transactional id; answered with [`TxnProducer`].
#[derive(Debug)]
pub struct InitTxnProducer {
    pub transactional_id: String,
    pub timeout_ms: i32,
    /// KIP-360 (v3+): the id and epoch the producer holds, -1 if none.
    pub producer_id: i64,
    pub producer_epoch: i16,
}

/// The answer to [`InitTxnProducer`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TxnProducer {
    pub error: ErrorCode,
    pub producer_id: i64,
    pub producer_epoch: i16,
}

/// AddPartitionsToTxn (and AddOffsetsToTxn, whose one partition is the
/// group's `__consumer_offsets` partition); answered per partition.
#[derive(Debug)]
pub struct AddTxnPartitions {
    pub transactional_id: String,
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub partitions: Vec<(String, i32)>,
}

/// EndTxn: commit or abort; answered with an error code once the markers
/// are written (or, if they could not be, once the outcome is durable).
#[derive(Debug)]
pub struct EndTxn {
    pub transactional_id: String,
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub commit: bool,
}

/// DescribeTransactions for the ids this shard coordinates.
#[derive(Debug)]
pub struct DescribeTxns {
    pub transactional_ids: Vec<String>,
}

/// One transactional id as DescribeTransactions reports it.
#[derive(Debug, Clone)]
pub struct TxnDescription {
    pub error: ErrorCode,
    pub transactional_id: String,
    pub state: &'static str,
    pub timeout_ms: i32,
    pub start_ms: i64,
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub partitions: Vec<(String, Vec<i32>)>,
}

/// Every transactional id this shard coordinates, filtered by state names
/// and producer ids when those are given.
#[derive(Debug)]
pub struct ListTxns {
    pub states: Vec<String>,
    pub producer_ids: Vec<i64>,
}

/// One transactional id as ListTransactions reports it.
#[derive(Debug, Clone)]
pub struct ListedTxn {
    pub transactional_id: String,
    pub producer_id: i64,
    pub state: &'static str,
}
