//! One partition's log: appends, group-committed syncs, reads by offset,
//! rolling, retention and clean shutdown.
//!
//! A `PartitionLog` lives on one shard and is used by many tasks of that shard
//! at once (through `Rc`). Appends are serialised by a write permit so offsets
//! are assigned in order and the tail block is rewritten by one writer at a
//! time; syncs are serialised by a sync permit, and every durable appender
//! queued behind a running `fdatasync` is covered by the next one: that is the
//! group commit. No `RefCell` borrow is held across an `.await`.
//!
//! This file holds the log's state (`LogState`, `PartitionLog`), `open`,
//! the accessors, producer state rebuild and `close`. The jobs are in
//! submodules, each an `impl PartitionLog` over the same state:
//!
//! - `append` — the append queue, the DMA write runs (`append` →
//!   `flush_pending` → `write_run` → `commit_batch`) and the group commit
//!   (`sync_through`).
//! - `seal` — `roll`, and the background work a roll leaves (`SealWork`,
//!   `CheckpointWork`) that `settle` waits for.
//! - `read` — `read` (tail cache, active segment by direct read, sealed
//!   segments by sendfile range) and `offset_for_timestamp`; the free
//!   functions there walk batch headers in segment files.
//! - `retention` — retention by bytes and time, and DeleteRecords.
//! - `cleaning` — what the log lends a compaction pass (`storage::compact`):
//!   segment snapshots and a typed swap of sealed segments.

mod append;
mod cleaning;
mod read;
mod retention;
mod seal;

use std::{
    cell::{Cell, RefCell},
    collections::BTreeMap,
    path::{Path, PathBuf},
};

use glommio::sync::Semaphore;

use append::Pending;
pub use append::{AppendInfo, AppendTimings, Durability};
pub(crate) use cleaning::{CompactionPass, SegmentSnapshot};
pub use read::ReadSlice;
use retention::read_log_start;
pub use retention::RetentionOutcome;

use crate::{
    limits::DMA_ALIGNMENT,
    metrics::buckets::{self, Buckets},
    protocol::record_batch::BatchHeader,
    storage::{
        batch_cache::BatchCache,
        config::{Clock, LogConfig},
        error::{PartitionName, StorageError},
        file::Faults,
        producers::{self, ProducerStates},
        recovery::{self, Checkpoint, RecoveryReport},
        segment::Segment,
    },
};

/// Counters of one log, read by tests, benches and the metrics endpoint.
/// Plain cells: a log belongs to one shard.
#[derive(Debug)]
pub struct LogStats {
    pub appends: Cell<u64>,
    pub records_appended: Cell<u64>,
    pub bytes_appended: Cell<u64>,
    pub syncs: Cell<u64>,
    /// Appends written past the zeroed blocks (see `storage::zero_ahead`).
    pub extending_writes: Cell<u64>,
    /// fdatasync latency, seconds.
    pub sync_seconds: Buckets,
    /// Appends covered by each fdatasync (the group commit's batch size).
    pub appends_per_sync: Buckets,
    appends_at_last_sync: Cell<u64>,
    pub cache_reads: Cell<u64>,
    pub disk_reads: Cell<u64>,
    /// Bytes handed to readers, and the offsets they span.
    pub bytes_read: Cell<u64>,
    pub records_read: Cell<u64>,
}

impl Default for LogStats {
    fn default() -> Self {
        Self {
            appends: Cell::new(0),
            records_appended: Cell::new(0),
            bytes_appended: Cell::new(0),
            syncs: Cell::new(0),
            extending_writes: Cell::new(0),
            sync_seconds: Buckets::new(buckets::LATENCY_SECONDS),
            appends_per_sync: Buckets::new(buckets::BATCH_SIZES),
            appends_at_last_sync: Cell::new(0),
            cache_reads: Cell::new(0),
            disk_reads: Cell::new(0),
            bytes_read: Cell::new(0),
            records_read: Cell::new(0),
        }
    }
}

fn bump(counter: &Cell<u64>, by: u64) {
    counter.set(counter.get() + by);
}

struct LogState {
    /// By base offset; the last one is the active segment.
    segments: BTreeMap<i64, Segment>,
    log_start: i64,
    /// The log end offset: the offset the next batch gets.
    next_offset: i64,
    /// Every offset below this is covered by an fdatasync.
    durable_offset: i64,
    /// The active segment's last partial block, rewritten with each append.
    tail: Vec<u8>,
    cache: BatchCache,
    /// Set when an fdatasync failed: writes are refused until reopen.
    failed: bool,
    /// Appends queued for the next flush, in arrival order.
    pending: Vec<Pending>,
    /// Idempotent producers seen here (see `storage::producers`).
    producers: ProducerStates,
}

impl LogState {
    fn active(&self) -> &Segment {
        self.segments.values().next_back().expect("a log always has an active segment")
    }

    fn active_mut(&mut self) -> &mut Segment {
        self.segments.values_mut().next_back().expect("a log always has an active segment")
    }
}

pub struct PartitionLog {
    name: PartitionName,
    dir: PathBuf,
    config: LogConfig,
    clock: Clock,
    faults: Faults,
    state: RefCell<LogState>,
    write_permit: Semaphore,
    sync_permit: Semaphore,
    /// One compaction pass at a time.
    clean_permit: Semaphore,
    /// The last roll's background work (see [`seal::SealWork`]); each roll's
    /// work waits for the one before, so checkpoints land in order.
    sealing: RefCell<Option<glommio::task::JoinHandle<()>>>,
    /// The active segment's base at the last compaction pass: segments
    /// below it have been cleaned.
    cleaned_up_to: Cell<Option<i64>>,
    stats: LogStats,
}

impl PartitionLog {
    /// Opens (creating if needed) the log in `dir`, recovering it first.
    pub async fn open(
        dir: &Path,
        name: PartitionName,
        config: LogConfig,
        clock: Clock,
        faults: Faults,
    ) -> Result<(Self, RecoveryReport), StorageError> {
        let config = config.clamped();
        let (segments, report) = recovery::recover(dir, &name, &config, &faults, clock.now_ms()).await?;
        let active = segments.last().expect("recover returns at least one segment");
        let next_offset = active.next_offset;
        // DeleteRecords may have moved the start past the first segment's base.
        let log_start = segments[0].base_offset.max(read_log_start(dir).unwrap_or(0).min(next_offset));
        let tail = read_tail(active, &name).await?;
        let state = LogState {
            segments: segments.into_iter().map(|s| (s.base_offset, s)).collect(),
            log_start,
            next_offset,
            durable_offset: next_offset,
            tail,
            cache: BatchCache::new(config.cache_bytes),
            failed: false,
            pending: Vec::new(),
            producers: ProducerStates::default(),
        };
        let log = Self {
            name,
            dir: dir.to_path_buf(),
            config,
            clock,
            faults,
            state: RefCell::new(state),
            write_permit: Semaphore::new(1),
            sync_permit: Semaphore::new(1),
            clean_permit: Semaphore::new(1),
            sealing: RefCell::new(None),
            cleaned_up_to: Cell::new(None),
            stats: LogStats::default(),
        };
        // What recovery kept is now the trusted prefix: sync it and say so, so
        // the next open validates only what is written after this point.
        // (Sealed segments were synced when they rolled.) After a clean close
        // the checkpoint already says exactly that: skip the fsyncs, which
        // would otherwise cost every partition two at every start.
        let here = Checkpoint {
            segment_base: log.state.borrow().active().base_offset,
            position: log.state.borrow().active().size,
        };
        if report.checkpoint != Some(here) || !report.cuts.is_empty() {
            log.force_sync().await?;
            log.write_checkpoint().await?;
        }
        log.rebuild_producers().await;
        Ok((log, report))
    }

    pub(crate) fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn name(&self) -> &PartitionName {
        &self.name
    }

    pub fn stats(&self) -> &LogStats {
        &self.stats
    }

    pub fn config(&self) -> &LogConfig {
        &self.config
    }

    /// Injects faults into this log's files (tests).
    pub fn faults(&self) -> &Faults {
        &self.faults
    }

    pub fn log_start(&self) -> i64 {
        self.state.borrow().log_start
    }

    pub fn log_end(&self) -> i64 {
        self.state.borrow().next_offset
    }

    pub fn durable_offset(&self) -> i64 {
        self.state.borrow().durable_offset
    }

    pub fn segment_count(&self) -> usize {
        self.state.borrow().segments.len()
    }

    /// Base offset and byte size of each segment, oldest first.
    pub fn segments(&self) -> Vec<(i64, u64)> {
        self.state.borrow().segments.values().map(|s| (s.base_offset, s.size)).collect()
    }

    pub fn size_bytes(&self) -> u64 {
        self.state.borrow().segments.values().map(|s| s.size).sum()
    }

    pub fn cache_bytes(&self) -> usize {
        self.state.borrow().cache.bytes()
    }

    /// Rebuilds the producer states on open: the newest snapshot, then the
    /// headers of every batch after it. A part that cannot be read is
    /// logged and skipped (its producers then start over, as after expiry).
    async fn rebuild_producers(&self) {
        let (from, mut states) = producers::load_newest_snapshot(&self.dir, self.log_end())
            .map_or((self.log_start(), ProducerStates::default()), |(o, s)| (o.max(self.log_start()), s));
        let mut offset = from;
        while offset < self.log_end() {
            let slice = match self.read(offset, 1 << 20).await {
                Ok(s) => s,
                Err(e) => {
                    log::warn!("partition {}: rebuilding producer state at offset {offset}: {e}", self.name);
                    break;
                }
            };
            let before = offset;
            for chunk in &slice.chunks {
                let Ok(bytes) = chunk.load().await else { break };
                let mut at = 0;
                while let Ok(h) = BatchHeader::parse(&bytes[at..], usize::MAX) {
                    if producers::is_idempotent(&h) {
                        states.record(&h, h.base_offset);
                    }
                    offset = h.last_offset() + 1;
                    at += h.total_bytes();
                    if at >= bytes.len() {
                        break;
                    }
                }
            }
            if offset == before {
                break;
            }
        }
        self.state.borrow_mut().producers = states;
    }

    /// The idempotence state of one producer here (tests and tools).
    pub fn producer(&self, producer_id: i64) -> Option<producers::ProducerEntry> {
        self.state.borrow().producers.get(producer_id).cloned()
    }

    /// Flushes, seals the active segment and records a checkpoint so the next
    /// open needs no validation. After a failed sync nothing is vouched for.
    pub async fn close(&self) -> Result<(), StorageError> {
        let _permit = self.write_permit.acquire_permit(1).await.expect("write permit: never closed");
        self.settle().await;
        self.ensure_writable()?;
        self.seal_active().await?;
        self.write_checkpoint().await
    }
}

/// The active segment's partial last block, which the next append rewrites.
async fn read_tail(seg: &Segment, name: &PartitionName) -> Result<Vec<u8>, StorageError> {
    let start = align_down(seg.size);
    let len = (seg.size - start) as usize;
    if len == 0 {
        return Ok(Vec::new());
    }
    let bytes = seg.file.read_at(start, len).await.map_err(|e| StorageError::from_io(name, seg.path(), "read", e))?;
    Ok(bytes.to_vec())
}

fn align_down(v: u64) -> u64 {
    v & !(DMA_ALIGNMENT - 1)
}

fn align_up(v: u64) -> u64 {
    align_down(v + DMA_ALIGNMENT - 1)
}
