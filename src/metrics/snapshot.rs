//! A shard's metrics, copied into plain `Send` values so they can cross to
//! the shard serving `/metrics`.

use super::buckets::BucketSnapshot;

#[derive(Debug, Clone, Default)]
pub struct PartitionSnapshot {
    pub topic: String,
    pub partition: i32,
    pub records_in: u64,
    pub bytes_in: u64,
    pub records_out: u64,
    pub bytes_out: u64,
    pub log_start: i64,
    pub log_end: i64,
    pub segments: u64,
    pub segment_bytes: u64,
    pub fsyncs: u64,
    /// Writes past the zeroed blocks (`storage::zero_ahead`).
    pub extending_writes: u64,
    /// Writes of appended bytes to the active segment (`storage::log::behind`).
    pub segment_writes: u64,
    pub fsync_seconds: BucketSnapshot,
    pub appends_per_fsync: BucketSnapshot,
}

#[derive(Debug, Clone, Default)]
pub struct ShardSnapshot {
    pub shard: usize,
    pub connections: u64,
    pub requests_in_flight: u64,
    /// ((API key, version), latency).
    pub requests: Vec<((i16, i16), BucketSnapshot)>,
    /// Per API key, the stages of its answered requests.
    pub stages: Vec<(i16, super::StagesSnapshot)>,
    pub produce_errors: Vec<(i16, u64)>,
    pub fetch_errors: Vec<(i16, u64)>,
    pub authorization_denied: Vec<(i16, u64)>,
    pub long_poll_waiters: u64,
    pub follower_reads: u64,
    pub read_replica_referrals: u64,
    pub high_watermark_answers: u64,
    pub cross_shard_sent: u64,
    pub cross_shard_received: u64,
    pub cross_shard_outstanding: u64,
    /// (SASL mechanism, result, authentications).
    pub sasl_authentications: Vec<(&'static str, &'static str, u64)>,
    /// (listener, failed TLS handshakes).
    pub tls_handshake_failures: Vec<(String, u64)>,
    /// How late the shard's wake-up probe ran.
    pub wakeup_lag: BucketSnapshot,
    pub partitions: Vec<PartitionSnapshot>,
    /// (group, topic, partition, committed offset) coordinated here.
    pub committed: Vec<(String, String, i32, i64)>,
    pub memory: MemorySnapshot,
    pub fetch_sessions: crate::server::fetch_sessions::SessionsUsage,
    pub journal: JournalSnapshot,
}

/// The shard journal's counters (`storage::journal`); zeros without one.
#[derive(Debug, Clone, Default)]
pub struct JournalSnapshot {
    pub writes: u64,
    pub syncs: u64,
    pub bytes: u64,
    pub entries: u64,
    pub rotations: u64,
    pub rotation_waits: u64,
}

/// A shard's memory budget and what its parts hold (`server::memory`).
#[derive(Debug, Clone, Default)]
pub struct MemorySnapshot {
    pub budget_bytes: u64,
    pub requests_budget_bytes: u64,
    /// Bytes of requests read and not yet answered.
    pub requests_bytes: u64,
    /// Partitions × the per-partition state accounted for each.
    pub partitions_bytes: u64,
    pub cache: crate::storage::batch_cache::CacheUsage,
}
