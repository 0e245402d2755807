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
//! Reading order: `LogStats` and `ReadSlice` (what callers see), `LogState`
//! (segments, cache, producers), then `PartitionLog`: `open`, accessors,
//! `append` → `flush_pending` → `write_run` → `commit_batch` (the write path), `sync_through`
//! (group commit), `roll`/`seal_active`/`write_checkpoint`, producer state
//! rebuild, `read` (cache, active segment by direct read, sealed segments
//! by sendfile range), `offset_for_timestamp`, `enforce_retention`; the
//! free functions at the end walk batch headers in segment files.

use std::{
    cell::{Cell, RefCell},
    collections::BTreeMap,
    path::{Path, PathBuf},
    rc::Rc,
    sync::Arc,
    time::{Duration, Instant},
};

use bytes::{Bytes, BytesMut};
use glommio::sync::{Permit, Semaphore};

use crate::{
    limits::{self, DMA_ALIGNMENT},
    metrics::buckets::{self, Buckets},
    protocol::record_batch::{self, BatchHeader},
    storage::{
        background,
        batch_cache::{BatchCache, CachedBatch},
        chunk::{Chunk, FileRange},
        config::{Clock, LogConfig},
        error::{PartitionName, StorageError},
        file::{self, Faults},
        producers::{self, ProducerStates, Sequenced},
        recovery::{self, Checkpoint, RecoveryReport},
        segment::{self, Segment},
        zero_ahead::ZeroAhead,
    },
};

/// When an append may return, matching the producer's `acks`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Durability {
    /// Once the write completed (acks=0 and acks=1).
    Written,
    /// Once an `fdatasync` covers it (acks=all).
    Synced,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AppendInfo {
    pub base_offset: i64,
    pub last_offset: i64,
    pub max_timestamp: i64,
}

/// Where one append's time went, for the request stages in `/metrics`
/// (`metrics::stages`). Filled in by [`PartitionLog::append_timed`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AppendTimings {
    /// Waiting for the write permit (the writer before may write this batch
    /// too, in which case this is all the append waits for).
    pub permit: Duration,
    /// Rolling to a new segment while holding the permit.
    pub roll: Duration,
    /// DMA writes (preallocation included) while holding the permit.
    pub write: Duration,
    /// Waiting for an fdatasync covering the batch (acks=all).
    pub sync: Duration,
}

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

/// Whole batches from a read, with the log bounds at the time of the read.
#[derive(Debug)]
pub struct ReadSlice {
    /// Whole batches: buffers from the tail cache (the very ones appended),
    /// a slice of one direct read of the active segment, or a range of a
    /// sealed segment to be sent from the page cache. No byte was copied to
    /// build them.
    pub chunks: Vec<Chunk>,
    pub log_start: i64,
    pub log_end: i64,
}

impl ReadSlice {
    pub fn len(&self) -> usize {
        self.chunks.iter().map(|c| c.len()).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Copies the bytes out, reading file ranges with blocking reads (tests
    /// and tools; the fetch path sends chunks as they are).
    pub fn to_vec(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.len());
        for c in &self.chunks {
            out.extend_from_slice(&c.to_bytes().unwrap_or_else(|e| panic!("reading a stored range: {e}")));
        }
        out
    }
}

/// Where a queued append finds its answer once a flush wrote it.
type ResultSlot = Rc<RefCell<Option<Result<AppendInfo, StorageError>>>>;

/// An append waiting for the next flush.
struct Pending {
    batch: BytesMut,
    header: BatchHeader,
    slot: ResultSlot,
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
    /// The last roll's background work (see [`SealWork`]); each roll's
    /// work waits for the one before, so checkpoints land in order.
    sealing: RefCell<Option<glommio::task::JoinHandle<()>>>,
    /// The active segment's base at the last compaction pass: segments
    /// below it have been cleaned.
    cleaned_up_to: Cell<Option<i64>>,
    stats: LogStats,
}

/// How a retention pass changed the log.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct RetentionOutcome {
    pub segments_deleted: usize,
    pub bytes_deleted: u64,
    pub log_start: i64,
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

    /// Appends one producer batch, assigning its offsets. Returns once the
    /// batch is written, or once it is durable for [`Durability::Synced`].
    ///
    /// Appends that arrive while a write is in flight queue up; the next
    /// writer flushes the whole queue in one DMA write, and one fdatasync then
    /// covers all of them.
    pub async fn append(&self, batch: BytesMut, durability: Durability) -> Result<AppendInfo, StorageError> {
        self.append_timed(batch, durability, &mut AppendTimings::default()).await
    }

    /// [`Self::append`], saying where the time went.
    pub async fn append_timed(
        &self,
        batch: BytesMut,
        durability: Durability,
        timings: &mut AppendTimings,
    ) -> Result<AppendInfo, StorageError> {
        let header = record_batch::check_produced_batch(&batch, self.config.max_batch_bytes)
            .map_err(|reason| StorageError::InvalidBatch { partition: self.name.clone(), reason })?;
        if producers::is_idempotent(&header) {
            let verdict = self.state.borrow().producers.check(&header);
            match verdict {
                Ok(Sequenced::Append) => self.state.borrow_mut().producers.record(&header, -1),
                Ok(Sequenced::Duplicate { base_offset, last_offset }) => {
                    // Written before: answer as the first time, once it is as
                    // durable as this request asks.
                    if durability == Durability::Synced {
                        let waited = Instant::now();
                        let synced = self.sync_through(last_offset + 1).await;
                        timings.sync += waited.elapsed();
                        synced?;
                    }
                    return Ok(AppendInfo { base_offset, last_offset, max_timestamp: header.max_timestamp });
                }
                Ok(Sequenced::InFlight) => {
                    return Err(StorageError::DuplicateInFlight { partition: self.name.clone() });
                }
                Err(reason) => return Err(StorageError::Sequence { partition: self.name.clone(), reason }),
            }
        }
        let slot: ResultSlot = Rc::new(RefCell::new(None));
        self.state.borrow_mut().pending.push(Pending { batch, header, slot: slot.clone() });
        let waited = Instant::now();
        let permit = self.write_permit.acquire_permit(1).await.expect("write permit: never closed");
        timings.permit += waited.elapsed();
        if slot.borrow().is_none() {
            self.flush_pending(timings).await;
        }
        drop(permit);
        let info = slot.borrow_mut().take().expect("a flush answers every queued append")?;
        if durability == Durability::Synced {
            let waited = Instant::now();
            let synced = self.sync_through(info.last_offset + 1).await;
            timings.sync += waited.elapsed();
            synced?;
        }
        Ok(info)
    }

    fn ensure_writable(&self) -> Result<(), StorageError> {
        if self.state.borrow().failed {
            return Err(StorageError::WritesRefused { partition: self.name.clone() });
        }
        Ok(())
    }

    /// Writes every queued append, in runs that fit the active segment and
    /// the write size limit, rolling between runs. The caller holds the
    /// write permit. Every queued slot gets an answer.
    async fn flush_pending(&self, timings: &mut AppendTimings) {
        let mut queue = std::mem::take(&mut self.state.borrow_mut().pending);
        let mut done = 0;
        while done < queue.len() {
            let rolled = Instant::now();
            let outcome = match self.ensure_writable() {
                Ok(()) => self.roll_if_due(queue[done].batch.len()).await,
                Err(e) => Err(e),
            };
            timings.roll += rolled.elapsed();
            let run_len = self.run_length(&queue[done..]);
            let run = &mut queue[done..done + run_len];
            let written = Instant::now();
            let outcome = match outcome {
                Ok(()) => self.write_run(run).await,
                Err(e) => Err(e),
            };
            timings.write += written.elapsed();
            match outcome {
                Ok(infos) => {
                    for (p, info) in run.iter().zip(infos) {
                        *p.slot.borrow_mut() = Some(Ok(info));
                    }
                    done += run_len;
                }
                Err(e) => {
                    // Nothing after a failed write may be written out of order.
                    let mut st = self.state.borrow_mut();
                    for p in &queue[done..] {
                        if producers::is_idempotent(&p.header) {
                            st.producers.forget(&p.header);
                        }
                        *p.slot.borrow_mut() = Some(Err(e.duplicate()));
                    }
                    return;
                }
            }
        }
    }

    /// How many queued batches the next write takes: at least one, then as
    /// many as fit the active segment and `WRITE_BYTES_MAX`.
    fn run_length(&self, queue: &[Pending]) -> usize {
        let st = self.state.borrow();
        let room = self.config.segment_bytes.saturating_sub(st.active().size);
        let mut bytes = queue[0].batch.len() as u64;
        let mut n = 1;
        while let Some(p) = queue.get(n) {
            bytes += p.batch.len() as u64;
            if bytes > room || bytes > limits::WRITE_BYTES_MAX as u64 {
                break;
            }
            n += 1;
        }
        n
    }

    /// Writes the tail block plus a run of batches as one aligned DMA write,
    /// then commits the new state. Nothing is visible to readers before the
    /// write completed, and a failed write leaves the state as it was.
    async fn write_run(&self, run: &mut [Pending]) -> Result<Vec<AppendInfo>, StorageError> {
        let (file, ahead, buf, write_pos, needed) = {
            let st = self.state.borrow();
            let mut next = st.next_offset;
            for p in run.iter_mut() {
                record_batch::patch_base_offset(&mut p.batch, next);
                record_batch::patch_leader_epoch(&mut p.batch, self.config.leader_epoch);
                p.header.base_offset = next;
                p.header.leader_epoch = self.config.leader_epoch;
                next = p.header.last_offset() + 1;
            }
            let seg = st.active();
            let write_pos = align_down(seg.size);
            debug_assert_eq!(st.tail.len() as u64, seg.size - write_pos, "tail mirrors the partial block");
            let used = st.tail.len() + run.iter().map(|p| p.batch.len()).sum::<usize>();
            let mut buf = seg.file.alloc(align_up(used as u64) as usize);
            let bytes = buf.as_bytes_mut();
            bytes[..st.tail.len()].copy_from_slice(&st.tail);
            let mut at = st.tail.len();
            for p in run.iter() {
                bytes[at..at + p.batch.len()].copy_from_slice(&p.batch);
                at += p.batch.len();
            }
            bytes[used..].fill(0);
            let needed = write_pos + bytes.len() as u64;
            (seg.file.clone(), seg.ahead.clone(), buf, write_pos, needed)
        };
        let step = self.config.preallocate_step_bytes;
        if ahead.covers(needed) {
            // Blocks written before: a plain overwrite, no metadata to change.
            file.write_at(buf, write_pos)
                .await
                .map_err(|e| StorageError::from_io(&self.name, file.path(), "write", e))?;
        } else {
            bump(&self.stats.extending_writes, 1);
            ahead.write_beyond(buf, write_pos, step, &self.name).await?;
        }
        let infos = run.iter_mut().map(|p| self.commit_batch(p)).collect();
        let head = align_up(self.state.borrow().active().size);
        ahead.top_up(head, self.config.zero_ahead_bytes, self.config.segment_bytes, step, &self.name);
        Ok(infos)
    }

    /// Makes one written batch visible: segment, index, tail block, cache.
    fn commit_batch(&self, p: &mut Pending) -> AppendInfo {
        let batch = std::mem::take(&mut p.batch).freeze();
        let header = p.header;
        let mut st = self.state.borrow_mut();
        let seg = st.active_mut();
        let position = seg.size;
        seg.on_append(&header, position);
        let new_size = seg.size;
        let keep = (new_size - align_down(new_size)) as usize;
        if keep <= batch.len() {
            st.tail.clear();
            st.tail.extend_from_slice(&batch[batch.len() - keep..]);
        } else {
            st.tail.extend_from_slice(&batch);
        }
        st.next_offset = header.last_offset() + 1;
        bump(&self.stats.appends, 1);
        bump(&self.stats.records_appended, (header.last_offset() - header.base_offset + 1) as u64);
        bump(&self.stats.bytes_appended, batch.len() as u64);
        st.cache.push(CachedBatch { base_offset: header.base_offset, last_offset: header.last_offset(), bytes: batch });
        if producers::is_idempotent(&header) {
            st.producers.record(&header, header.base_offset);
        }
        AppendInfo {
            base_offset: header.base_offset,
            last_offset: header.last_offset(),
            max_timestamp: header.max_timestamp,
        }
    }

    /// Returns once every offset below `target` is durable. Callers queue on
    /// the sync permit; whoever gets it finds its data already covered by the
    /// sync before it, or syncs everything written so far for all behind it.
    pub async fn sync_through(&self, target: i64) -> Result<(), StorageError> {
        if self.state.borrow().durable_offset >= target {
            return Ok(());
        }
        let _permit = self.sync_permit.acquire_permit(1).await.expect("sync permit: never closed");
        if self.state.borrow().durable_offset >= target {
            return Ok(());
        }
        self.sync_active().await
    }

    /// Syncs the active segment now, whatever was synced before.
    async fn force_sync(&self) -> Result<(), StorageError> {
        let _permit = self.sync_permit.acquire_permit(1).await.expect("sync permit: never closed");
        self.sync_active().await
    }

    /// One fdatasync of the active segment; the caller holds the sync permit.
    async fn sync_active(&self) -> Result<(), StorageError> {
        let (file, upto) = {
            let st = self.state.borrow();
            if st.failed {
                return Err(StorageError::WritesRefused { partition: self.name.clone() });
            }
            (st.active().file.clone(), st.next_offset)
        };
        bump(&self.stats.syncs, 1);
        let appends = self.stats.appends.get();
        self.stats.appends_per_sync.observe((appends - self.stats.appends_at_last_sync.get()) as f64);
        self.stats.appends_at_last_sync.set(appends);
        let started = Instant::now();
        let synced = file.fdatasync().await;
        self.stats.sync_seconds.observe(started.elapsed().as_secs_f64());
        match synced {
            Ok(()) => {
                let mut st = self.state.borrow_mut();
                st.durable_offset = st.durable_offset.max(upto);
                Ok(())
            }
            Err(source) => {
                // fsyncgate: after a failed fsync the kernel may have dropped
                // the dirty pages and cleared the error, so a retry could
                // "succeed" over lost data. Refuse writes until recovery.
                self.state.borrow_mut().failed = true;
                log::error!(
                    "partition {}: fdatasync of {} failed: {source}; refusing writes",
                    self.name,
                    file.path().display()
                );
                Err(StorageError::SyncFailed { partition: self.name.clone(), file: file.path().to_path_buf(), source })
            }
        }
    }

    async fn roll_if_due(&self, incoming: usize) -> Result<(), StorageError> {
        let due = {
            let st = self.state.borrow();
            let seg = st.active();
            let now = self.clock.now_ms();
            seg.size > 0
                && (seg.size + incoming as u64 > self.config.segment_bytes
                    || now - seg.created_ms >= self.config.segment_ms
                    // A batch holds fewer records than bytes, so this keeps
                    // every relative offset of the next batch representable.
                    || st.next_offset - seg.base_offset > limits::SEGMENT_OFFSETS_MAX - limits::BATCH_BYTES_MAX as i64)
        };
        if due {
            self.roll().await
        } else {
            Ok(())
        }
    }

    /// Seals the active segment and starts a new one at the log end. The
    /// caller holds the write permit. Only what the next append needs is
    /// done here: the sync of the sealed segment (everything before the new
    /// one must be durable before anything in it is acknowledged) and the
    /// new file with its directory entry synced. Trimming the sealed file,
    /// its index files and the checkpoint follow in the background
    /// ([`SealWork`]): until they land, recovery rebuilds missing indices
    /// and validates from the previous checkpoint, as after any crash.
    pub(crate) async fn roll(&self) -> Result<(), StorageError> {
        self.sync_through(self.log_end()).await?;
        let sealed = self.seal_work();
        let base = self.state.borrow().next_offset;
        let seg =
            recovery::create_segment(&self.dir, base, &self.name, &self.config, &self.faults, self.clock.now_ms())
                .await?;
        let checkpoint = {
            let mut st = self.state.borrow_mut();
            st.segments.insert(base, seg);
            st.tail.clear();
            self.checkpoint_work(&st)
        };
        let previous = self.sealing.borrow_mut().take();
        let job = background::spawn(async move {
            if let Some(previous) = previous {
                previous.await;
            }
            let outcome = match sealed.run().await {
                Ok(()) => checkpoint.run().await,
                Err(e) => Err(e),
            };
            if let Err(e) = outcome {
                log::warn!("after a roll: {e} (recovery will rebuild what is missing)");
            }
        });
        *self.sealing.borrow_mut() = Some(job);
        Ok(())
    }

    /// Waits until the background work of past rolls is done: their index
    /// files and checkpoints are on disk. Compaction and retention, which
    /// replace and delete sealed segments, and close call it first.
    pub async fn settle(&self) {
        let job = self.sealing.borrow_mut().take();
        if let Some(job) = job {
            job.await;
        }
    }

    /// Makes the active segment durable, trims it and writes its index
    /// files, now (at close).
    async fn seal_active(&self) -> Result<(), StorageError> {
        self.sync_through(self.log_end()).await?;
        self.seal_work().run().await
    }

    fn seal_work(&self) -> SealWork {
        let st = self.state.borrow();
        let seg = st.active();
        SealWork {
            name: self.name.clone(),
            file: seg.file.clone(),
            ahead: seg.ahead.clone(),
            size: seg.size,
            offsets: seg.index.encode_offsets(),
            times: seg.index.encode_times(),
        }
    }

    /// The recovery point as of now, and beside it a snapshot of the
    /// producer states as of the log end (only when there are producers).
    fn checkpoint_work(&self, st: &LogState) -> CheckpointWork {
        let seg = st.active();
        let snapshot = (!st.producers.is_empty()).then(|| (st.next_offset, st.producers.encode(st.next_offset)));
        CheckpointWork {
            name: self.name.clone(),
            dir: self.dir.clone(),
            checkpoint: Checkpoint { segment_base: seg.base_offset, position: seg.size },
            snapshot,
        }
    }

    /// Records the recovery point (and producer snapshot) now.
    async fn write_checkpoint(&self) -> Result<(), StorageError> {
        let work = self.checkpoint_work(&self.state.borrow());
        work.run().await
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

    /// Reads whole batches starting with the one that contains `offset`, up
    /// to `max_bytes` (the first batch is returned even when larger). Returns
    /// an empty slice at the log end.
    pub async fn read(&self, offset: i64, max_bytes: usize) -> Result<ReadSlice, StorageError> {
        let mut from = offset;
        loop {
            let (log_start, log_end, target) = {
                let st = self.state.borrow();
                let (log_start, log_end) = (st.log_start, st.next_offset);
                if from < log_start || from > log_end {
                    return Err(StorageError::OffsetOutOfRange {
                        partition: self.name.clone(),
                        offset,
                        log_start,
                        log_end,
                    });
                }
                if from == log_end {
                    return Ok(ReadSlice { chunks: Vec::new(), log_start, log_end });
                }
                if let Some(chunks) = st.cache.read(from, max_bytes) {
                    bump(&self.stats.cache_reads, 1);
                    let next = chunks.last().and_then(|b| last_offset_in(b)).map_or(from, |l| l + 1);
                    let chunks: Vec<Chunk> = chunks.into_iter().map(Chunk::Memory).collect();
                    self.count_read(&chunks, offset, next);
                    return Ok(ReadSlice { chunks, log_start, log_end });
                }
                (log_start, log_end, self.locate(&st, from))
            };
            bump(&self.stats.disk_reads, 1);
            let (file, start, seg_end, seg_next) = target;
            let sealed = seg_next < log_end;
            let found = if sealed {
                locate_sealed(&file, start, seg_end, from, max_bytes).await
            } else {
                read_segment(&file, start, seg_end, from, max_bytes, self.config.index_interval_bytes)
                    .await
                    .map(|found| found.map(|b| (last_offset_in(&b).map_or(from, |l| l + 1), Chunk::Memory(b))))
            };
            match found.map_err(|e| e.into_storage(&self.name, file.path()))? {
                Some((next, chunk)) => {
                    let chunks = vec![chunk];
                    self.count_read(&chunks, offset, next);
                    return Ok(ReadSlice { chunks, log_start, log_end });
                }
                // The offset fell in a gap at the end of a compacted segment.
                None => from = seg_next,
            }
        }
    }

    fn count_read(&self, chunks: &[Chunk], from: i64, next: i64) {
        bump(&self.stats.bytes_read, chunks.iter().map(|c| c.len() as u64).sum());
        bump(&self.stats.records_read, (next - from).max(0) as u64);
    }

    /// The segment holding `offset` (or the next one, for an offset in a
    /// gap): its file, index position, size and next offset.
    fn locate(&self, st: &LogState, offset: i64) -> (Rc<file::SegmentFile>, u64, u64, i64) {
        let seg = st
            .segments
            .range(..=offset)
            .next_back()
            .filter(|(_, s)| offset < s.next_offset)
            .or_else(|| st.segments.range(offset..).next())
            .map(|(_, s)| s)
            .expect("offset within [log_start, log_end) lies in or before a segment");
        let relative = (offset.max(seg.base_offset) - seg.base_offset) as u32;
        let start = u64::from(seg.index.lookup(relative));
        (seg.file.clone(), start, seg.size, seg.next_offset)
    }

    /// The first offset whose record timestamp is at least `timestamp`, with
    /// that timestamp (Kafka's ListOffsets by time); `None` when every record
    /// is older. Uses the time index to skip to the right part of the log.
    pub async fn offset_for_timestamp(&self, timestamp: i64) -> Result<Option<(i64, i64)>, StorageError> {
        let target = {
            let st = self.state.borrow();
            st.segments.values().find(|s| s.max_timestamp >= timestamp).map(|s| {
                let relative = s.index.lookup_time_floor(timestamp);
                (s.file.clone(), u64::from(s.index.lookup(relative)), s.size)
            })
        };
        let Some((file, mut pos, end)) = target else { return Ok(None) };
        while pos < end {
            let len = (limits::READ_WINDOW_BYTES as u64).min(end - pos) as usize;
            let window =
                file.read_at(pos, len).await.map_err(|e| StorageError::from_io(&self.name, file.path(), "read", e))?;
            let mut at = 0;
            while at + record_batch::HEADER_BYTES <= window.len() {
                let h = BatchHeader::parse(&window[at..], limits::BATCH_BYTES_MAX).map_err(|reason| {
                    StorageError::Corrupt {
                        partition: self.name.clone(),
                        file: file.path().to_path_buf(),
                        position: pos + at as u64,
                        reason,
                    }
                })?;
                if at + h.total_bytes() > window.len() {
                    break;
                }
                if let Some((delta, ts)) =
                    record_batch::first_record_at_or_after(&window[at..at + h.total_bytes()], timestamp)
                {
                    return Ok(Some((h.base_offset + i64::from(delta), ts)));
                }
                at += h.total_bytes();
            }
            if at == 0 {
                // A batch larger than the window: read it whole next round.
                let h =
                    BatchHeader::parse(&window, limits::BATCH_BYTES_MAX).map_err(|reason| StorageError::Corrupt {
                        partition: self.name.clone(),
                        file: file.path().to_path_buf(),
                        position: pos,
                        reason,
                    })?;
                let whole = file
                    .read_at(pos, h.total_bytes())
                    .await
                    .map_err(|e| StorageError::from_io(&self.name, file.path(), "read", e))?;
                if let Some((delta, ts)) = record_batch::first_record_at_or_after(&whole, timestamp) {
                    return Ok(Some((h.base_offset + i64::from(delta), ts)));
                }
                at = h.total_bytes();
            }
            pos += at as u64;
        }
        Ok(None)
    }

    /// Deletes whole segments, oldest first, beyond `retention.bytes` or older
    /// than `retention.ms`. The active segment is never deleted.
    pub async fn enforce_retention(&self) -> Result<RetentionOutcome, StorageError> {
        // Settle before taking the permit, so appends rarely wait for it;
        // again under the permit for a roll that happened meanwhile.
        self.settle().await;
        let _permit = self.write_permit.acquire_permit(1).await.expect("write permit: never closed");
        self.settle().await;
        if !self.config.delete {
            return Ok(RetentionOutcome { log_start: self.log_start(), ..RetentionOutcome::default() });
        }
        let now = self.clock.now_ms();
        let victims = {
            let mut st = self.state.borrow_mut();
            let mut total: u64 = st.segments.values().map(|s| s.size).sum();
            let mut victims = Vec::new();
            while st.segments.len() > 1 {
                let oldest = st.segments.values().next().expect("len > 1");
                let over_size = self.config.retention_bytes.is_some_and(|max| total - oldest.size >= max);
                let too_old = self.config.retention_ms.is_some_and(|ms| now - oldest.retention_timestamp() > ms);
                if !(over_size || too_old) {
                    break;
                }
                let (_, seg) = st.segments.pop_first().expect("len > 1");
                total -= seg.size;
                victims.push(seg);
            }
            st.log_start = st.log_start.max(st.segments.values().next().expect("active remains").base_offset);
            let log_start = st.log_start;
            st.cache.trim_before(log_start);
            victims
        };
        let mut outcome = RetentionOutcome { log_start: self.log_start(), ..RetentionOutcome::default() };
        for seg in &victims {
            outcome.segments_deleted += 1;
            outcome.bytes_deleted += seg.size;
            self.remove_segment_files(seg.path()).await?;
        }
        Ok(outcome)
    }

    /// DeleteRecords: moves the log start up to `offset` (-1: the log end),
    /// persists it (so a restart keeps it), and deletes the segments wholly
    /// below it. Returns the new log start (Kafka's low watermark).
    pub async fn delete_records(&self, offset: i64) -> Result<i64, StorageError> {
        self.settle().await;
        let _permit = self.write_permit.acquire_permit(1).await.expect("write permit: never closed");
        self.settle().await;
        let (log_start, log_end) = (self.log_start(), self.log_end());
        let target = if offset == -1 { log_end } else { offset };
        if !(0..=log_end).contains(&target) {
            return Err(StorageError::OffsetOutOfRange { partition: self.name.clone(), offset, log_start, log_end });
        }
        if target <= log_start {
            return Ok(log_start);
        }
        let path = self.dir.join(LOG_START_FILE);
        let (name, to_write) = (self.name.clone(), path.clone());
        glommio::executor()
            .spawn_blocking(move || file::write_atomically(&to_write, format!("{target}\n").as_bytes()))
            .await
            .map_err(|e| StorageError::from_io(&name, &path, "write log start", e))?;
        let victims = {
            let mut st = self.state.borrow_mut();
            st.log_start = target;
            let mut victims = Vec::new();
            while st.segments.len() > 1 && st.segments.values().next().is_some_and(|s| s.next_offset <= target) {
                victims.push(st.segments.pop_first().expect("len > 1").1);
            }
            st.cache.trim_before(target);
            victims
        };
        for seg in &victims {
            self.remove_segment_files(seg.path()).await?;
        }
        Ok(target)
    }

    async fn remove_segment_files(&self, log_path: &Path) -> Result<(), StorageError> {
        let log_path = log_path.to_path_buf();
        let dir = self.dir.clone();
        let name = self.name.clone();
        glommio::executor()
            .spawn_blocking(move || {
                for suffix in [segment::INDEX_SUFFIX, segment::TIME_INDEX_SUFFIX, segment::LOG_SUFFIX] {
                    let path = log_path.with_extension(suffix);
                    match std::fs::remove_file(&path) {
                        Ok(()) => {}
                        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                        Err(e) => return Err(StorageError::from_io(&name, &path, "delete segment", e)),
                    }
                }
                file::sync_dir(&dir).map_err(|e| StorageError::from_io(&name, &dir, "sync directory", e))
            })
            .await
    }
}

/// The log start a DeleteRecords set, in the partition directory (Kafka keeps
/// it in a log-start-offset checkpoint); absent until the first one.
const LOG_START_FILE: &str = "log-start-offset";

/// The persisted log start, if any (a file that cannot be read counts as
/// none: the first segment's base is then the start, as before the delete).
fn read_log_start(dir: &Path) -> Option<i64> {
    std::fs::read_to_string(dir.join(LOG_START_FILE)).ok()?.trim().parse().ok()
}

/// What sealing a segment leaves to do once it is synced: trim its
/// preallocated blocks and write its index files. Owns what it needs, so it
/// can run after the roll returned.
struct SealWork {
    name: PartitionName,
    file: Rc<file::SegmentFile>,
    ahead: Rc<ZeroAhead>,
    size: u64,
    offsets: Vec<u8>,
    times: Vec<u8>,
}

impl SealWork {
    async fn run(self) -> Result<(), StorageError> {
        let file = self.file;
        // A zero write still running would land after the trim.
        self.ahead.retire().await;
        file.truncate(self.size).await.map_err(|e| StorageError::from_io(&self.name, file.path(), "truncate", e))?;
        let log_path = file.path().to_path_buf();
        let (name, offsets, times) = (self.name, self.offsets, self.times);
        glommio::executor()
            .spawn_blocking(move || {
                for (suffix, bytes) in [(segment::INDEX_SUFFIX, offsets), (segment::TIME_INDEX_SUFFIX, times)] {
                    let path = log_path.with_extension(suffix);
                    file::write_atomically(&path, &bytes)
                        .map_err(|e| StorageError::from_io(&name, &path, "write index", e))?;
                }
                Ok(())
            })
            .await
    }
}

/// A checkpoint (and producer snapshot) to write, as of when it was taken.
struct CheckpointWork {
    name: PartitionName,
    dir: PathBuf,
    checkpoint: Checkpoint,
    snapshot: Option<(i64, Vec<u8>)>,
}

impl CheckpointWork {
    async fn run(self) -> Result<(), StorageError> {
        let CheckpointWork { name, dir, checkpoint, snapshot } = self;
        let path = dir.join(recovery::CHECKPOINT_FILE);
        glommio::executor()
            .spawn_blocking(move || {
                if let Some((offset, bytes)) = snapshot {
                    let snap = segment::segment_path(&dir, offset, producers::SNAPSHOT_SUFFIX);
                    file::write_atomically(&snap, &bytes)
                        .map_err(|e| StorageError::from_io(&name, &snap, "write producer snapshot", e))?;
                    producers::remove_old_snapshots(&dir, offset)
                        .map_err(|e| StorageError::from_io(&name, &dir, "remove old producer snapshots", e))?;
                }
                file::write_atomically(&path, &recovery::encode_checkpoint(checkpoint))
                    .map_err(|e| StorageError::from_io(&name, &path, "write checkpoint", e))
            })
            .await
    }
}

/// A failure while reading a segment: I/O, or bytes that no longer parse.
enum ReadError {
    Io(std::io::Error),
    Corrupt { position: u64, reason: record_batch::BatchError },
}

impl ReadError {
    fn into_storage(self, name: &PartitionName, file: &Path) -> StorageError {
        match self {
            Self::Io(e) => StorageError::from_io(name, file, "read", e),
            Self::Corrupt { position, reason } => {
                StorageError::Corrupt { partition: name.clone(), file: file.to_path_buf(), position, reason }
            }
        }
    }
}

/// Finds, in a sealed segment, the range of whole batches from the first one
/// whose last offset is at least `offset`, up to `max_bytes` (the first batch
/// always). Only batch headers are read, through the page cache, which then
/// holds the range for `sendfile`. `None` when no batch reaches `offset`.
async fn locate_sealed(
    file: &file::SegmentFile,
    start: u64,
    seg_end: u64,
    offset: i64,
    max_bytes: usize,
) -> Result<Option<(i64, Chunk)>, ReadError> {
    let buffered = file.buffered().map_err(ReadError::Io)?;
    let path = Arc::new(file.path().to_path_buf());
    let walker = buffered.clone();
    let found =
        glommio::executor().spawn_blocking(move || walk_headers(&walker, start, seg_end, offset, max_bytes)).await?;
    Ok(found.map(|(pos, len, last)| (last + 1, Chunk::File(FileRange { file: buffered, path, pos, len }))))
}

/// The last offset of the last whole batch in `bytes` (headers only).
fn last_offset_in(bytes: &[u8]) -> Option<i64> {
    let mut at = 0;
    let mut last = None;
    while at + record_batch::HEADER_BYTES <= bytes.len() {
        let h = BatchHeader::parse(&bytes[at..], usize::MAX).ok()?;
        if at + h.total_bytes() > bytes.len() {
            break;
        }
        last = Some(h.last_offset());
        at += h.total_bytes();
    }
    last
}

/// Bytes read at a time while walking batch headers in a sealed segment:
/// several small batches per read, and little wasted on large ones.
const HEADER_WALK_WINDOW: usize = 16 << 10;

/// Blocking header walk for [`locate_sealed`]: `(position, length, last
/// offset)`.
fn walk_headers(
    file: &std::fs::File,
    start: u64,
    seg_end: u64,
    offset: i64,
    max_bytes: usize,
) -> Result<Option<(u64, usize, i64)>, ReadError> {
    use std::os::unix::fs::FileExt;
    let mut window = vec![0u8; HEADER_WALK_WINDOW];
    let mut pos = start;
    let mut first: Option<u64> = None;
    let mut taken = 0usize;
    let mut last = offset;
    while pos < seg_end {
        let want = (HEADER_WALK_WINDOW as u64).min(seg_end - pos) as usize;
        let got = file.read_at(&mut window[..want], pos).map_err(ReadError::Io)?;
        if got < record_batch::HEADER_BYTES {
            return Err(ReadError::Corrupt {
                position: pos,
                reason: record_batch::BatchError::Incomplete { needed: record_batch::HEADER_BYTES, have: got },
            });
        }
        let mut at = 0usize;
        while at + record_batch::HEADER_BYTES <= got {
            let header = BatchHeader::parse(&window[at..got], limits::BATCH_BYTES_MAX)
                .map_err(|reason| ReadError::Corrupt { position: pos + at as u64, reason })?;
            let total = header.total_bytes();
            if pos + (at + total) as u64 > seg_end {
                return Err(ReadError::Corrupt {
                    position: pos + at as u64,
                    reason: record_batch::BatchError::Incomplete {
                        needed: total,
                        have: (seg_end - pos - at as u64) as usize,
                    },
                });
            }
            match first {
                None if header.last_offset() < offset => {}
                None => {
                    first = Some(pos + at as u64);
                    taken = total;
                    last = header.last_offset();
                }
                Some(begin) => {
                    if taken + total > max_bytes {
                        return Ok(Some((begin, taken, last)));
                    }
                    taken += total;
                    last = header.last_offset();
                }
            }
            at += total;
        }
        pos += at as u64;
    }
    Ok(first.map(|begin| (begin, taken, last)))
}

/// Reads whole batches from a segment file, from the first batch whose last
/// offset is at least `offset`. Walks headers from `start` (an index hint);
/// never parses records. `None` when no batch in the segment reaches `offset`.
async fn read_segment(
    file: &file::SegmentFile,
    start: u64,
    seg_end: u64,
    offset: i64,
    max_bytes: usize,
    index_interval_bytes: u32,
) -> Result<Option<Bytes>, ReadError> {
    let mut pos = start;
    let want = max_bytes.max(record_batch::HEADER_BYTES);
    while pos < seg_end {
        let len = ((index_interval_bytes as usize + want) as u64).min(seg_end - pos) as usize;
        let window = file.read_at(pos, len).await.map_err(ReadError::Io)?;
        let mut at = 0usize;
        let mut first: Option<(usize, usize)> = None; // (start in window, bytes taken)
        while at + record_batch::HEADER_BYTES <= window.len() {
            let header = BatchHeader::parse(&window[at..], limits::BATCH_BYTES_MAX)
                .map_err(|reason| ReadError::Corrupt { position: pos + at as u64, reason })?;
            let total = header.total_bytes();
            match first {
                None if header.last_offset() < offset => at += total,
                None => {
                    if at + total > window.len() {
                        // The first batch is larger than the window: read it whole.
                        let start = pos + at as u64;
                        let whole = file.read_at(start, total).await.map_err(ReadError::Io)?;
                        return Ok(Some(whole));
                    }
                    first = Some((at, total));
                    at += total;
                }
                Some((begin, taken)) => {
                    if taken + total > max_bytes || at + total > window.len() {
                        break;
                    }
                    first = Some((begin, taken + total));
                    at += total;
                }
            }
        }
        if let Some((begin, taken)) = first {
            return Ok(Some(window.slice(begin..begin + taken)));
        }
        pos += at as u64;
        if at == 0 {
            // Not even one header fits: the segment ends in a partial batch,
            // which recovery and append never leave behind.
            return Err(ReadError::Corrupt {
                position: pos,
                reason: record_batch::BatchError::Incomplete { needed: record_batch::HEADER_BYTES, have: window.len() },
            });
        }
    }
    Ok(None)
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

/// A segment as the log held it when asked: what a compaction pass reads,
/// and names when it replaces segments.
#[derive(Clone)]
pub(crate) struct SegmentSnapshot {
    pub(crate) base: i64,
    pub(crate) file: Rc<file::SegmentFile>,
    pub(crate) size: u64,
    pub(crate) next_offset: i64,
}

impl SegmentSnapshot {
    fn of(s: &Segment) -> Self {
        Self { base: s.base_offset, file: s.file.clone(), size: s.size, next_offset: s.next_offset }
    }
}

/// One compaction pass over a log (`storage::compact`), holding the clean
/// permit: one pass at a time per log. Appends continue meanwhile.
pub(crate) struct CompactionPass<'a> {
    log: &'a PartitionLog,
    _clean: Permit<'a>,
    /// The active segment's base when the pass began: the segments below it
    /// are the ones this pass cleans.
    active_base: i64,
}

/// The write permit, taken to swap a group of sealed segments out; the
/// group was still sealed and unchanged when it was taken.
pub(crate) struct SealedLock<'a> {
    log: &'a PartitionLog,
    _write: Permit<'a>,
    bases: Vec<i64>,
    /// One past the last offset the group covers.
    end: i64,
}

impl PartitionLog {
    /// Starts a compaction pass once no other runs and the background work of
    /// past rolls has landed (index files of a segment the pass replaces must
    /// not land afterwards). `None` when no segment was sealed since the last
    /// pass finished.
    pub(crate) async fn begin_compaction(&self) -> Option<CompactionPass<'_>> {
        let clean = self.clean_permit.acquire_permit(1).await.expect("clean permit: never closed");
        self.settle().await;
        let active_base = self.state.borrow().active().base_offset;
        if Some(active_base) == self.cleaned_up_to.get() {
            return None;
        }
        Some(CompactionPass { log: self, _clean: clean, active_base })
    }
}

impl<'a> CompactionPass<'a> {
    /// The sealed segments as they are now, oldest first.
    pub(crate) fn sealed(&self) -> Vec<SegmentSnapshot> {
        let st = self.log.state.borrow();
        let n = st.segments.len();
        st.segments.values().take(n.saturating_sub(1)).map(SegmentSnapshot::of).collect()
    }

    /// The active segment as it is now.
    pub(crate) fn active(&self) -> SegmentSnapshot {
        SegmentSnapshot::of(self.log.state.borrow().active())
    }

    /// Takes the write permit to swap `group` (consecutive sealed segments,
    /// from [`Self::sealed`]) out. `None` when retention got to one of them
    /// first (or it was replaced since).
    pub(crate) async fn lock_sealed(&self, group: &[SegmentSnapshot]) -> Option<SealedLock<'a>> {
        let log = self.log;
        let write = log.write_permit.acquire_permit(1).await.expect("write permit: never closed");
        if !group.iter().all(|g| log.still_sealed(g.base, &g.file)) {
            return None;
        }
        let bases = group.iter().map(|g| g.base).collect();
        let end = group[group.len() - 1].next_offset;
        Some(SealedLock { log, _write: write, bases, end })
    }

    /// Records that the segments sealed when the pass began are clean: the
    /// next pass waits until another segment is sealed.
    pub(crate) fn finish(self) {
        self.log.cleaned_up_to.set(Some(self.active_base));
    }
}

impl SealedLock<'_> {
    /// Replaces the locked segments with `merged` (or with nothing), once the
    /// files on disk were swapped (`storage::swap`).
    pub(crate) fn replace(self, merged: Option<Segment>) {
        let mut st = self.log.state.borrow_mut();
        for b in &self.bases {
            st.segments.remove(b);
        }
        // Cached batches of these segments are the uncleaned originals.
        st.cache.trim_before(self.end);
        if let Some(seg) = merged {
            st.segments.insert(seg.base_offset, seg);
        }
    }
}

impl PartitionLog {
    fn still_sealed(&self, base: i64, file: &Rc<file::SegmentFile>) -> bool {
        let st = self.state.borrow();
        let is_active = st.segments.keys().next_back() == Some(&base);
        !is_active && st.segments.get(&base).is_some_and(|s| Rc::ptr_eq(&s.file, file))
    }
}
