//! Per-partition log settings (Kafka's topic-level configs) and the clock seam.

use std::{cell::Cell, rc::Rc};

use crate::limits;

/// Settings of one partition's log. Defaults follow Kafka's.
#[derive(Debug, Clone)]
pub struct LogConfig {
    /// Roll when the active segment would exceed this (`segment.bytes`).
    pub segment_bytes: u64,
    /// Roll when the active segment is older than this (`segment.ms`).
    pub segment_ms: i64,
    /// Delete old segments while the rest still exceeds this (`retention.bytes`).
    pub retention_bytes: Option<u64>,
    /// Delete segments whose newest timestamp is older than this (`retention.ms`).
    pub retention_ms: Option<i64>,
    /// Bytes between sparse index entries (`index.interval.bytes`).
    pub index_interval_bytes: u32,
    /// fallocate step for segment files.
    pub preallocate_step_bytes: u64,
    /// Bytes of the active segment written with zeros ahead of its appends,
    /// in the background, so appends overwrite blocks instead of extending
    /// the file (see `storage::zero_ahead`); 0 turns it off.
    pub zero_ahead_bytes: u64,
    /// With a shard journal: appends are answered once the journal write
    /// holding them completed, and reach the segment within this many
    /// milliseconds, in larger writes (see `storage::log::behind`); 0 writes
    /// every append's segment before answering.
    pub write_behind_ms: u64,
    /// Largest batch one append accepts (`max.message.bytes`).
    pub max_batch_bytes: usize,
    /// Memory for recent batches served to tail readers.
    pub cache_bytes: usize,
    /// `cleanup.policy=compact`: batches may leave offset gaps after cleaning,
    /// so recovery cannot require dense offsets.
    pub compacted: bool,
    /// `cleanup.policy` includes `delete`: time and size retention apply.
    /// A compact-only log keeps every key's newest record however old.
    pub delete: bool,
    /// Tombstones older than this are dropped by compaction
    /// (`delete.retention.ms`).
    pub delete_retention_ms: i64,
    /// Leader epoch stamped into every appended batch.
    pub leader_epoch: i32,
}

impl Default for LogConfig {
    fn default() -> Self {
        Self {
            segment_bytes: limits::SEGMENT_BYTES_DEFAULT,
            segment_ms: limits::SEGMENT_MS_DEFAULT,
            retention_bytes: None,
            retention_ms: Some(7 * 24 * 3600 * 1000),
            index_interval_bytes: limits::INDEX_INTERVAL_BYTES_DEFAULT,
            preallocate_step_bytes: limits::PREALLOCATE_STEP_BYTES_DEFAULT,
            zero_ahead_bytes: limits::ZERO_AHEAD_BYTES_DEFAULT,
            // A log on its own writes each append's segment; the broker
            // sets write-behind from its own config (`ServeConfig`).
            write_behind_ms: 0,
            max_batch_bytes: limits::BATCH_BYTES_DEFAULT,
            cache_bytes: limits::BATCH_CACHE_BYTES_DEFAULT,
            compacted: false,
            delete: true,
            delete_retention_ms: 24 * 3600 * 1000,
            leader_epoch: 0,
        }
    }
}

impl LogConfig {
    /// Clamps every value into the range the storage format can represent.
    pub fn clamped(mut self) -> Self {
        self.segment_bytes = self.segment_bytes.clamp(4096, limits::SEGMENT_BYTES_MAX);
        self.max_batch_bytes = self.max_batch_bytes.clamp(64, limits::BATCH_BYTES_MAX);
        self.index_interval_bytes = self.index_interval_bytes.max(1);
        self.preallocate_step_bytes = self.preallocate_step_bytes.max(limits::DMA_ALIGNMENT);
        self.zero_ahead_bytes = self.zero_ahead_bytes.min(limits::ZERO_AHEAD_BYTES_MAX).div_ceil(limits::DMA_ALIGNMENT)
            * limits::DMA_ALIGNMENT;
        self.leader_epoch = self.leader_epoch.max(0);
        self
    }
}

/// Wall-clock milliseconds, replaceable in tests so age-based roll and
/// retention can be driven without sleeping.
#[derive(Debug, Clone, Default)]
pub enum Clock {
    #[default]
    System,
    Manual(Rc<Cell<i64>>),
}

impl Clock {
    pub fn now_ms(&self) -> i64 {
        match self {
            Self::System => {
                std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64)
            }
            Self::Manual(ms) => ms.get(),
        }
    }
}
