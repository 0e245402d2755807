//! The calls one shard makes on another: one struct per call, each paired
//! with its reply type in `calls.rs`. Everything here is `Send`: it crosses
//! cores over glommio's channel mesh.

use std::{sync::Arc, time::Instant};

use bytes::BytesMut;

use crate::{
    metrics::stages::AppendStages,
    protocol::errors::ErrorCode,
    shard::topics::{TopicHandle, TopicTable},
    storage::Chunk,
};

/// One partition of a read, as a fetch asks for it.
#[derive(Debug, Clone)]
pub struct ReadItem {
    /// The table's handle (or, for a topic the table does not hold, one
    /// made from the requested name, which the answer must repeat).
    pub topic: TopicHandle,
    pub partition: i32,
    pub offset: i64,
    pub max_bytes: usize,
    /// The leader epoch the reader knows (Fetch v9+'s
    /// `current_leader_epoch`); -1: not given, not checked.
    pub leader_epoch: i32,
}

#[derive(Debug, Clone, Default)]
pub struct ReadOutcome {
    pub error: ErrorCode,
    pub high_watermark: i64,
    pub log_start: i64,
    /// The partition's last stable offset (-1 with an error).
    pub last_stable_offset: i64,
    /// For read_committed: the aborted transactions overlapping what was
    /// read, as (producer id, first offset).
    pub aborted: Vec<(i64, i64)>,
    /// Whole batches, as stored (no copy was made to build them).
    pub chunks: Vec<Chunk>,
    /// The replica the leader sends this consumer to, unread here
    /// (`nearest_replica`).
    pub preferred_replica: Option<i32>,
    /// To a follower: the high watermark moved past what it was last told
    /// (`nearest_replica`), so the fetch is answered now.
    pub high_watermark_news: bool,
}

impl ReadOutcome {
    /// An answer without data: an error, or a partition left unread.
    pub fn empty(error: ErrorCode, high_watermark: i64, log_start: i64) -> Self {
        let last_stable_offset = if high_watermark < 0 { -1 } else { high_watermark };
        Self { error, high_watermark, log_start, last_stable_offset, ..Self::default() }
    }
}

impl ReadOutcome {
    pub fn bytes(&self) -> usize {
        self.chunks.iter().map(Chunk::len).sum()
    }
}

/// A topic to grow to `count` partitions (CreatePartitions), validated by
/// the controller.
#[derive(Debug, Clone)]
pub struct NewPartitions {
    pub name: String,
    pub count: i32,
    /// The most replicas an explicit assignment gives a new partition (1
    /// when none is given); more than 1 needs more brokers.
    pub replicas_per_partition: usize,
}

/// One topic's config change (AlterConfigs, IncrementalAlterConfigs).
#[derive(Debug, Clone)]
pub struct ConfigChange {
    pub topic: String,
    /// AlterConfigs: the listed configs become the topic's whole set.
    pub replace_all: bool,
    /// (name, operation, value); operations as IncrementalAlterConfigs
    /// numbers them: 0 set, 1 delete, 2 append, 3 subtract.
    pub ops: Vec<(String, i8, Option<String>)>,
}

/// A topic to create, validated by the controller.
#[derive(Debug, Clone)]
pub struct NewTopic {
    pub name: String,
    /// -1: the broker default.
    pub partitions: i32,
    pub replication_factor: i16,
    pub configs: Vec<(String, String)>,
}

#[derive(Debug, Clone)]
pub struct TopicOutcome {
    pub name: String,
    pub error: ErrorCode,
    pub message: Option<String>,
    pub id: [u8; 16],
    pub partitions: i32,
}

/// Append one batch to a partition the target shard owns.
#[derive(Debug)]
pub struct Produce {
    pub topic: TopicHandle,
    pub partition: i32,
    pub batch: BytesMut,
    /// Answer once fdatasync'd (acks=-1), not only written.
    pub durable: bool,
    /// When the caller sent it, for the cross-shard hop stage.
    pub sent: Instant,
}

/// How an append went, with where its time went on the owner.
#[derive(Debug)]
pub struct Produced {
    pub error: ErrorCode,
    pub base_offset: i64,
    pub log_start: i64,
    pub message: Option<String>,
    /// Where the append's time went on the owner (hop = the way there).
    pub stages: AppendStages,
    /// When the owner was done, for the hop back.
    pub finished: Instant,
}

/// Read several partitions the target owns: the items in order until
/// `max_bytes` (the response's budget) is taken; the rest are answered
/// without data. Answered with one outcome per item, in order.
#[derive(Debug)]
pub struct Read {
    pub items: Vec<ReadItem>,
    pub max_bytes: usize,
    /// isolation_level 1: only batches below the last stable offset, and
    /// the aborted transactions among them.
    pub read_committed: bool,
    /// A follower's node id (reads to the log end), or -1 for a consumer.
    pub replica: i32,
    /// A consumer's `client.rack` (Fetch v11+), for the rack-aware
    /// replica selector (`nearest_replica`).
    pub client_rack: Option<Arc<str>>,
}

/// Answer once any listed (topic, partition, offset) has data at or after
/// its offset, or at the deadline (`wait_ms` from now).
#[derive(Debug)]
pub struct WaitForData {
    pub items: Vec<(TopicHandle, i32, i64)>,
    pub wait_ms: u64,
    /// Data counts only below the last stable offset: a marker that
    /// advances it wakes the fetch.
    pub read_committed: bool,
    /// A follower's fetch: data counts up to the log end, not the high
    /// watermark.
    pub replica: bool,
}

/// OffsetForLeaderEpoch for one partition, to its owner: where epoch
/// `epoch` ends in its log.
#[derive(Debug)]
pub struct EpochEnd {
    pub topic: TopicHandle,
    pub partition: i32,
    pub epoch: i32,
}

/// ListOffsets for one partition: -2 earliest, -1 latest, -3 max
/// timestamp, -4 earliest local, -5 latest tiered, else by time.
#[derive(Debug)]
pub struct ListOffset {
    pub topic: TopicHandle,
    pub partition: i32,
    pub timestamp: i64,
    /// isolation_level 1: latest (-1) is the last stable offset.
    pub read_committed: bool,
    /// The leader epoch the client knows (v4+'s `current_leader_epoch`),
    /// checked in a quorum as a fetch's is; -1: not given, not checked.
    pub leader_epoch: i32,
}

/// The answer to [`ListOffset`]: the offset found, and the partition's
/// leader epoch (-1 with an error).
#[derive(Debug, Clone, Copy)]
pub struct OffsetListed {
    pub found: OffsetFound,
    pub leader_epoch: i32,
}

/// DeleteRecords for one partition: move its log start up to `offset`
/// (-1: the log end); answered with the new log start as `offset`.
#[derive(Debug)]
pub struct DeleteRecords {
    pub topic: TopicHandle,
    pub partition: i32,
    pub offset: i64,
}

/// The answer to [`ListOffset`] and [`DeleteRecords`].
#[derive(Debug, Clone, Copy)]
pub struct OffsetFound {
    pub error: ErrorCode,
    pub offset: i64,
    /// -1 where the call has no timestamp to give.
    pub timestamp: i64,
}

/// To the controller (shard 0): create topics.
#[derive(Debug)]
pub struct CreateTopics {
    pub topics: Vec<NewTopic>,
    pub validate_only: bool,
}

/// To the controller: add partitions to topics.
#[derive(Debug)]
pub struct CreatePartitions {
    pub topics: Vec<NewPartitions>,
    pub validate_only: bool,
}

/// To the controller: change topics' configs.
#[derive(Debug)]
pub struct AlterConfigs {
    pub changes: Vec<ConfigChange>,
    pub validate_only: bool,
}

/// To the controller: delete topics.
#[derive(Debug)]
pub struct DeleteTopics {
    pub names: Vec<String>,
}

/// From the controller to every shard: the new topic table. Answered with
/// the partitions the shard could not open.
#[derive(Debug)]
pub struct ApplyTopics {
    pub table: Arc<TopicTable>,
}

/// A partition a shard could not open for a new topic table, and why.
#[derive(Debug)]
pub struct OpenFailure {
    pub topic: String,
    pub partition: i32,
    pub cause: crate::storage::StorageError,
}

/// Why the controller could not hand out a producer id: the file that keeps
/// the next free block could not be read, parsed or written.
#[derive(Debug)]
pub enum ProducerIdError {
    Read { file: std::path::PathBuf, source: std::io::Error },
    Parse { file: std::path::PathBuf, reason: std::num::ParseIntError },
    Persist { file: std::path::PathBuf, reason: String },
}

impl std::fmt::Display for ProducerIdError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Read { file, source } => write!(f, "cannot read {}: {source}", file.display()),
            Self::Parse { file, reason } => write!(f, "{}: {reason}", file.display()),
            Self::Persist { file, reason } => write!(f, "cannot persist {}: {reason}", file.display()),
        }
    }
}

impl std::error::Error for ProducerIdError {}

/// To the controller: a fresh producer id.
#[derive(Debug)]
pub struct AllocateProducerId;

/// A copy of the shard's metrics (for a `/metrics` scrape).
#[derive(Debug)]
pub struct Metrics;

/// To a partition's owner: write a transaction marker to each listed
/// partition it owns (`WriteTxnMarkers`), durably. Answered per partition
/// with NONE, or the error that kept the marker out.
#[derive(Debug)]
pub struct WriteTxnMarkers {
    pub marker: crate::protocol::record_batch::TxnMarker,
    pub partitions: Vec<(TopicHandle, i32)>,
}

/// One partition's answer to [`WriteTxnMarkers`].
#[derive(Debug, Clone)]
pub struct MarkerWritten {
    pub topic: TopicHandle,
    pub partition: i32,
    pub error: ErrorCode,
}
