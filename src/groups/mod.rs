//! Consumer groups: the classic group protocol (join, sync, heartbeat,
//! leave) and committed offsets, kept in the broker's own compacted topic
//! `__consumer_offsets`.
//!
//! A group lives on one shard: the owner of its `__consumer_offsets`
//! partition (`records::partition_for`, Kafka's placement). Requests for it
//! that arrive on another shard travel there as a typed call ([`JoinGroup`],
//! [`CommitOffsets`], …), like produce. A commit is a durable append to that partition, then an update
//! of the shard's offset cache; an offset fetch reads only the cache.
//!
//! **Architecture invariant:** a group's state and its offsets are touched
//! only by the shard that owns its `__consumer_offsets` partition; the
//! offset cache is a plain map with no lock and no sharing.

pub mod coordinator;
pub mod errors;
pub mod ids;
mod membership;
pub mod offsets;
pub mod records;
pub mod seam;
#[cfg(test)]
mod tests;
mod txn_offsets;

use kafka_protocol::messages::{
    HeartbeatRequest, JoinGroupRequest, LeaveGroupRequest, OffsetCommitRequest, OffsetDeleteRequest, SyncGroupRequest,
    TxnOffsetCommitRequest,
};

pub use coordinator::Coordinator;
pub use errors::{ReplayError, StoreError};
pub use seam::{GroupHost, Timer};

/// The internal topic holding commits and group metadata.
pub const OFFSETS_TOPIC: &str = "__consumer_offsets";

/// Group coordination settings, Kafka's names in brackets.
#[derive(Debug, Clone)]
pub struct GroupSettings {
    /// Partitions of `__consumer_offsets` created at first start
    /// (`offsets.topic.num.partitions`, 50).
    pub offsets_partitions: i32,
    /// How long an empty group waits for more members before its first
    /// rebalance completes (`group.initial.rebalance.delay.ms`, 3000).
    pub initial_rebalance_delay_ms: u64,
    /// Offsets of a group with no members expire this long after the group
    /// emptied or the last commit (`offsets.retention.minutes`, 7 days).
    pub offsets_retention_ms: i64,
    /// How often expired offsets are looked for
    /// (`offsets.retention.check.interval.ms`, 10 minutes).
    pub offsets_retention_check_ms: u64,
    /// Accepted session timeouts (`group.min.session.timeout.ms` 6000,
    /// `group.max.session.timeout.ms` 1800000).
    pub min_session_timeout_ms: i32,
    pub max_session_timeout_ms: i32,
    /// Longest metadata string a commit may carry
    /// (`offset.metadata.max.bytes`, 4096).
    pub max_metadata_bytes: usize,
}

impl Default for GroupSettings {
    fn default() -> Self {
        Self {
            offsets_partitions: 50,
            initial_rebalance_delay_ms: 3000,
            offsets_retention_ms: 7 * 24 * 3600 * 1000,
            offsets_retention_check_ms: 600_000,
            min_session_timeout_ms: 6000,
            max_session_timeout_ms: 1_800_000,
            max_metadata_bytes: 4096,
        }
    }
}

// The group calls, each answered by its own `Coordinator` method (`join`,
// `commit`, …); another shard makes them through `shard::calls`, whose
// table pairs each with its reply type.

/// JoinGroup, answered with its response.
#[derive(Debug)]
pub struct JoinGroup {
    pub request: JoinGroupRequest,
    pub version: i16,
    pub client_id: String,
    pub client_host: String,
}

/// SyncGroup, answered with its response.
#[derive(Debug)]
pub struct SyncGroup {
    pub request: SyncGroupRequest,
}

/// Heartbeat, answered with its error code.
#[derive(Debug)]
pub struct Heartbeat {
    pub request: HeartbeatRequest,
}

/// LeaveGroup, answered with its response.
#[derive(Debug)]
pub struct LeaveGroup {
    pub request: LeaveGroupRequest,
    pub version: i16,
}

/// OffsetCommit, answered with its response.
#[derive(Debug)]
pub struct CommitOffsets {
    pub request: OffsetCommitRequest,
    pub version: i16,
}

/// TxnOffsetCommit, answered with its response: offsets pending until
/// the producer's transaction ends.
#[derive(Debug)]
pub struct CommitTxnOffsets {
    pub request: TxnOffsetCommitRequest,
}

/// Committed offsets of one group: `None` asks for all of them.
#[derive(Debug)]
pub struct FetchOffsets {
    pub group: String,
    pub topics: Option<Vec<(String, Vec<i32>)>>,
}

/// DescribeGroups for the groups this shard coordinates.
#[derive(Debug)]
pub struct DescribeGroups {
    pub groups: Vec<String>,
}

/// Every group this shard coordinates, filtered by state names if any.
#[derive(Debug)]
pub struct ListGroups {
    pub states: Vec<String>,
}

/// DeleteGroups for the groups this shard coordinates.
#[derive(Debug)]
pub struct DeleteGroups {
    pub groups: Vec<String>,
}

/// OffsetDelete, answered with its response.
#[derive(Debug)]
pub struct DeleteOffsets {
    pub request: OffsetDeleteRequest,
}

/// One committed offset as OffsetFetch reports it.
#[derive(Debug, Clone)]
pub struct FetchedOffset {
    pub topic: String,
    pub partition: i32,
    /// -1 when nothing was committed.
    pub offset: i64,
    pub leader_epoch: i32,
    pub metadata: String,
}

/// A group as ListGroups reports it.
#[derive(Debug, Clone)]
pub struct ListedGroup {
    pub group: String,
    pub protocol_type: String,
    pub state: &'static str,
}
