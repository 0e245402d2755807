//! The log's state: `PartitionLog` and what it holds (`LogState`: segments,
//! tail block, cache, the append queue, producers), its counters, and the
//! accessors that only read it. The jobs that change it are the sibling
//! modules, each an `impl PartitionLog`.

use std::{
    cell::{Cell, RefCell},
    collections::BTreeMap,
    path::{Path, PathBuf},
    rc::Rc,
};

use bytes::BytesMut;
use glommio::sync::Semaphore;

use crate::{
    limits::DMA_ALIGNMENT,
    metrics::buckets::{self, Buckets},
    protocol::record_batch::{self, BatchHeader, TxnMarker},
    storage::{
        batch_cache::BatchCache,
        config::{Clock, LogConfig},
        error::{PartitionName, StorageError},
        file::Faults,
        producers::{self, AbortedTxn, ProducerStates},
        segment::Segment,
        txn_index::AbortedIndex,
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
    /// Segment writes past the zeroed blocks (see `storage::zero_ahead`).
    pub extending_writes: Rc<Cell<u64>>,
    /// Writes of appended bytes to the active segment: with write-behind
    /// fewer than the appends (see `behind`).
    pub segment_writes: Rc<Cell<u64>>,
    /// fdatasync latency, seconds.
    pub sync_seconds: Buckets,
    /// Appends covered by each fdatasync (the group commit's batch size).
    pub appends_per_sync: Buckets,
    pub(super) appends_at_last_sync: Cell<u64>,
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
            extending_writes: Rc::new(Cell::new(0)),
            segment_writes: Rc::new(Cell::new(0)),
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

pub(super) fn bump(counter: &Cell<u64>, by: u64) {
    counter.set(counter.get() + by);
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AppendInfo {
    pub base_offset: i64,
    pub last_offset: i64,
    pub max_timestamp: i64,
}

/// Where a queued append finds its answer once a flush wrote it.
pub(super) type ResultSlot = Rc<RefCell<Option<Result<AppendInfo, StorageError>>>>;

/// An append waiting for the next flush.
pub(super) struct Pending {
    pub(super) batch: BytesMut,
    pub(super) header: BatchHeader,
    pub(super) slot: ResultSlot,
    /// Copied from the partition's leader: written at the offsets and
    /// leader epoch it carries (`replica`), not given new ones.
    pub(super) copied: bool,
    /// Its appender waits for it to be durable (acks=all, or a follower's
    /// copy): a journal entry holding it asks for a sync at once.
    pub(super) synced: bool,
}

pub(super) struct LogState {
    /// By base offset; the last one is the active segment.
    pub(super) segments: BTreeMap<i64, Segment>,
    pub(super) log_start: i64,
    /// The log end offset: the offset the next batch gets.
    pub(super) next_offset: i64,
    /// Every offset below this is covered by an fdatasync.
    pub(super) durable_offset: i64,
    pub(super) cache: BatchCache,
    /// Set when an fdatasync failed: writes are refused until reopen.
    pub(super) failed: bool,
    /// Set by `close`: from then on its directory may belong to a new log
    /// object, so nothing is written, trimmed or replaced through this one.
    pub(super) closed: bool,
    /// Appends queued for the next flush, in arrival order.
    pub(super) pending: Vec<Pending>,
    /// Idempotent producers seen here (see `storage::producers`).
    pub(super) producers: ProducerStates,
    /// Transactions aborted here, by the segment holding their marker.
    pub(super) aborted: AbortedIndex,
    /// What of the log the shard journal holds (when the log has one).
    pub(super) journal: JournalTrack,
}

/// How far the shard journal holds this log (see `journaled`).
#[derive(Debug, Default)]
pub(super) struct JournalTrack {
    /// Set by the first durable append: a log only ever written with acks=1
    /// puts nothing in the journal.
    pub(super) wanted: bool,
    /// Every batch from this offset on is queued in the journal (unset until
    /// the first is).
    pub(super) from: Option<i64>,
    /// The end of the last batch queued, in journal entry `entry`.
    pub(super) end: i64,
    pub(super) entry: u64,
}

impl LogState {
    pub(super) fn active(&self) -> &Segment {
        self.segments.values().next_back().expect("a log always has an active segment")
    }

    pub(super) fn active_mut(&mut self) -> &mut Segment {
        self.segments.values_mut().next_back().expect("a log always has an active segment")
    }
}

pub struct PartitionLog {
    pub(super) name: PartitionName,
    pub(super) dir: PathBuf,
    pub(super) config: LogConfig,
    pub(super) clock: Clock,
    pub(super) faults: Faults,
    pub(super) state: RefCell<LogState>,
    pub(super) write_permit: Semaphore,
    pub(super) sync_permit: Semaphore,
    /// One compaction pass at a time.
    pub(super) clean_permit: Semaphore,
    /// The last roll's background work (see `seal::SealWork`); each roll's
    /// work waits for the one before, so checkpoints land in order.
    pub(super) sealing: RefCell<Option<glommio::task::JoinHandle<()>>>,
    /// The directory sync that makes the last roll's new segment stay after
    /// a power loss; the segment's first sync waits for it (`group_commit`).
    pub(super) dir_sync: RefCell<Option<glommio::task::JoinHandle<Result<(), StorageError>>>>,
    /// Set when the log is dropped without a close, or halted: the
    /// background work of its rolls stops at its next step.
    pub(super) halted: Rc<Cell<bool>>,
    /// The active segment's base at the last compaction pass: segments
    /// below it have been cleaned.
    pub(super) cleaned_up_to: Cell<Option<i64>>,
    /// The leader epoch this log's own appends carry: the config's at
    /// open, raised when this broker leads the partition under a newer one.
    pub(super) leader_epoch: Cell<i32>,
    pub(super) stats: LogStats,
    /// The shard journal durable appends go through, if any.
    pub(super) journal: Option<crate::storage::journal::JournalLink>,
    /// The active segment's bytes not yet in its file (see `behind`).
    pub(super) behind: Rc<super::behind::Behind>,
}

impl Drop for PartitionLog {
    /// A log dropped without a close leaves no background work behind to
    /// write into its files after a later open of the partition (see
    /// [`PartitionLog::halt`]).
    fn drop(&mut self) {
        self.stop_background();
    }
}

impl PartitionLog {
    /// Stops the background work of past rolls, and every segment's
    /// zero-ahead, at their next step, without waiting.
    pub(super) fn stop_background(&self) {
        self.halted.set(true);
        if let Ok(st) = self.state.try_borrow() {
            for seg in st.segments.values() {
                seg.ahead.abandon();
            }
        }
    }
}

impl PartitionLog {
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

    /// From now on, appends carry `epoch` (never lowered).
    pub fn set_leader_epoch(&self, epoch: i32) {
        self.leader_epoch.set(self.leader_epoch.get().max(epoch));
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

    /// The idempotence state of one producer here (tests and tools).
    pub fn producer(&self, producer_id: i64) -> Option<producers::ProducerEntry> {
        self.state.borrow().producers.get(producer_id).cloned()
    }

    /// The last stable offset: the first offset of the oldest open
    /// transaction not decided to commit, or the log end when there is
    /// none. A read_committed reader sees only what lies below it.
    pub fn last_stable_offset(&self) -> i64 {
        let st = self.state.borrow();
        st.producers.first_undecided_offset().unwrap_or(st.next_offset)
    }

    /// The first offset of the oldest transaction whose marker is not yet
    /// written, or the log end: compaction keeps its hands below it, since
    /// a decision held in memory is not yet in this log.
    pub fn first_unmarked_offset(&self) -> i64 {
        let st = self.state.borrow();
        st.producers.first_open_offset().unwrap_or(st.next_offset)
    }

    /// The coordinator durably decided to commit `marker`'s transaction and
    /// the marker is about to be appended here: read_committed readers may
    /// read the transaction's records at once, not a device write later
    /// (see `producers::ProducerStates::decide_commit`). Returns whether
    /// the last stable offset may have moved, for waking readers.
    pub fn commit_decided(&self, marker: &TxnMarker) -> bool {
        marker.commit && self.state.borrow_mut().producers.decide_commit(marker.producer_id, marker.producer_epoch)
    }

    /// The aborted transactions overlapping `[from, upper)`, for a
    /// read_committed fetch (see `storage::txn_index`).
    pub fn aborted_transactions(&self, from: i64, upper: i64) -> Vec<AbortedTxn> {
        self.state.borrow().aborted.overlapping(from, upper)
    }

    /// Open transactions here, as (first offset, producer id) (tests, tools).
    pub fn open_transactions(&self) -> Vec<(i64, i64)> {
        self.state.borrow().producers.open_transactions().collect()
    }

    /// Every aborted-index entry, oldest marker first (tests, tools).
    pub fn aborted_index(&self) -> Vec<AbortedTxn> {
        self.state.borrow().aborted.all().copied().collect()
    }

    /// Applies a written batch to the producer and transaction state:
    /// sequences and open transactions from the header, and for a marker
    /// (whose one record is read: markers are the exception to "storage
    /// reads headers only", being a few bytes that say commit or abort) the
    /// end of its producer's transaction, an abort entering the index of
    /// the segment that holds it. Shared by append and recovery.
    pub(super) fn apply_batch(st: &mut LogState, header: &BatchHeader, batch: &[u8]) {
        if header.attributes & record_batch::ATTR_CONTROL != 0 {
            let Some((commit, _)) = record_batch::read_control_batch(batch) else { return };
            let offset = header.base_offset;
            if let Some(entry) = st.producers.end_txn(header.producer_id, header.producer_epoch, commit, offset) {
                let base = st.segments.range(..=offset).next_back().map_or(offset, |(&b, _)| b);
                st.aborted.add(base, entry);
            }
            return;
        }
        st.producers.record(header, header.base_offset);
    }

    /// Refuses any work once the log was closed (see `close`).
    pub(super) fn ensure_open(&self) -> Result<(), StorageError> {
        if self.state.borrow().closed {
            return Err(StorageError::Closed { partition: self.name.clone() });
        }
        Ok(())
    }

    /// Refuses writes once the log was closed, or an fdatasync failed (see
    /// `group_commit`).
    pub(super) fn ensure_writable(&self) -> Result<(), StorageError> {
        let st = self.state.borrow();
        if st.closed {
            return Err(StorageError::Closed { partition: self.name.clone() });
        }
        if st.failed {
            return Err(StorageError::WritesRefused { partition: self.name.clone() });
        }
        Ok(())
    }
}

pub(super) fn align_down(v: u64) -> u64 {
    v & !(DMA_ALIGNMENT - 1)
}

pub(super) fn align_up(v: u64) -> u64 {
    align_down(v + DMA_ALIGNMENT - 1)
}
