//! Typed requests one shard sends another, and their answers. Everything here
//! is `Send`: it crosses cores over glommio's channel mesh.

use std::{sync::Arc, time::Instant};

use bytes::BytesMut;

use crate::{metrics::stages::AppendStages, protocol::errors::ErrorCode, shard::topics::TopicTable, storage::Chunk};

/// One partition of a read, as a fetch asks for it.
#[derive(Debug, Clone)]
pub struct ReadItem {
    pub topic: String,
    pub partition: i32,
    pub offset: i64,
    pub max_bytes: usize,
}

#[derive(Debug, Clone, Default)]
pub struct ReadOutcome {
    pub error: ErrorCode,
    pub high_watermark: i64,
    pub log_start: i64,
    /// Whole batches, as stored (no copy was made to build them).
    pub chunks: Vec<Chunk>,
}

impl ReadOutcome {
    pub fn bytes(&self) -> usize {
        self.chunks.iter().map(Chunk::len).sum()
    }
}

/// A topic to create, validated by the controller.
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

#[derive(Debug)]
pub enum ShardRequest {
    /// Append one batch to a partition this shard owns. `sent`: when the
    /// caller sent it, for the cross-shard hop stage.
    Produce { topic: String, partition: i32, batch: BytesMut, durable: bool, sent: Instant },
    /// Read several partitions this shard owns.
    /// Reads the items in order until `max_bytes` (the response's budget)
    /// is taken; the rest are answered without data.
    Read { items: Vec<ReadItem>, max_bytes: usize },
    /// Answer once any listed partition has data at or after its offset, or
    /// at the deadline (milliseconds from now).
    WaitForData { items: Vec<(String, i32, i64)>, wait_ms: u64 },
    /// ListOffsets for one partition: -2 earliest, -1 latest, -3 max
    /// timestamp, -4 earliest local, -5 latest tiered, else by time.
    ListOffset { topic: String, partition: i32, timestamp: i64 },
    /// DeleteRecords for one partition: move its log start up to `offset`
    /// (-1: the log end); answered with `Offset` (the new log start).
    DeleteRecords { topic: String, partition: i32, offset: i64 },
    /// To the controller (shard 0): create topics.
    CreateTopics { topics: Vec<NewTopic>, validate_only: bool },
    /// To the controller: add partitions to topics.
    CreatePartitions { topics: Vec<NewPartitions>, validate_only: bool },
    /// To the controller: change topics' configs.
    AlterConfigs { changes: Vec<ConfigChange>, validate_only: bool },
    /// To the controller: delete topics.
    DeleteTopics { names: Vec<String> },
    /// From the controller to every shard: the new topic table.
    ApplyTopics { table: Arc<TopicTable> },
    /// To a group's coordinator shard.
    Group(crate::groups::GroupCall),
    /// To the controller: a fresh producer id.
    AllocateProducerId,
    /// A copy of the shard's metrics (for a `/metrics` scrape).
    Metrics,
}

#[derive(Debug)]
pub enum ShardResponse {
    Produced {
        error: ErrorCode,
        base_offset: i64,
        log_start: i64,
        message: Option<String>,
        /// Where the append's time went on the owner (hop = the way there).
        stages: AppendStages,
        /// When the owner was done, for the hop back.
        finished: Instant,
    },
    Read(Vec<ReadOutcome>),
    DataReady,
    Offset {
        error: ErrorCode,
        offset: i64,
        timestamp: i64,
    },
    Topics(Vec<TopicOutcome>),
    /// Partitions the shard could not open: (topic, partition, cause).
    Applied(Vec<(String, i32, String)>),
    Group(crate::groups::GroupAnswer),
    ProducerId(Result<i64, String>),
    Metrics(Box<crate::metrics::snapshot::ShardSnapshot>),
    /// The owner shard is gone (the broker is shutting down): answer the
    /// client with a retriable error instead of failing the connection.
    Unavailable,
}

/// A request plus the way back to whoever asked.
pub struct Envelope {
    pub request: ShardRequest,
    pub reply: futures_channel::oneshot::Sender<ShardResponse>,
}
