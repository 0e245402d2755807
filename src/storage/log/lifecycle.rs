//! Opening a log (recovery, then the trusted prefix synced and
//! checkpointed, then producer state rebuilt) and closing it.

use std::{
    cell::{Cell, RefCell},
    path::Path,
    rc::Rc,
    time::Duration,
};

use bytes::{Bytes, BytesMut};
use glommio::sync::Semaphore;

use super::{
    behind::{Behind, BehindConfig, BehindTarget},
    retention::read_log_start,
    state::{align_down, JournalTrack, LogState, LogStats, PartitionLog},
};
use crate::{
    protocol::record_batch::BatchHeader,
    storage::{
        batch_cache::BatchCache,
        config::{Clock, LogConfig},
        error::{PartitionName, StorageError},
        file::Faults,
        journal::JournalLink,
        producers::{self, ProducerStates},
        recovery::{self, Checkpoint, RecoveryReport},
        segment::Segment,
        txn_index::AbortedIndex,
    },
};

impl PartitionLog {
    /// Opens (creating if needed) the log in `dir`, recovering it first.
    pub async fn open(
        dir: &Path,
        name: PartitionName,
        config: LogConfig,
        clock: Clock,
        faults: Faults,
    ) -> Result<(Self, RecoveryReport), StorageError> {
        Self::open_journaled(dir, name, config, clock, faults, None, &[]).await
    }

    /// [`Self::open`] for a log whose durable appends go through `journal`:
    /// after recovery, the batches of `replay` (the journal's, from before a
    /// crash) that continue the log are appended, and synced with it.
    pub async fn open_journaled(
        dir: &Path,
        name: PartitionName,
        config: LogConfig,
        clock: Clock,
        faults: Faults,
        journal: Option<JournalLink>,
        replay: &[Bytes],
    ) -> Result<(Self, RecoveryReport), StorageError> {
        let config = config.clamped();
        let leader_epoch = config.leader_epoch;
        let (segments, mut report) = recovery::recover(dir, &name, &config, &faults, clock.now_ms()).await?;
        let active = segments.last().expect("recover returns at least one segment");
        let next_offset = active.next_offset;
        // DeleteRecords may have moved the start past the first segment's base.
        let log_start = segments[0].base_offset.max(read_log_start(dir).unwrap_or(0).min(next_offset));
        let tail = read_tail(active, &name).await?;
        let halted = Rc::new(Cell::new(false));
        let stats = LogStats::default();
        let behind = Behind::new(
            name.clone(),
            BehindTarget { file: active.file.clone(), ahead: active.ahead.clone() },
            active.size,
            next_offset,
            tail,
            halted.clone(),
            BehindConfig {
                delay: Duration::from_millis(config.write_behind_ms),
                segment_bytes: config.segment_bytes,
                zero_ahead_bytes: config.zero_ahead_bytes,
                step: config.preallocate_step_bytes,
                writes: stats.segment_writes.clone(),
                extending: stats.extending_writes.clone(),
            },
        );
        let state = LogState {
            segments: segments.into_iter().map(|s| (s.base_offset, s)).collect(),
            log_start,
            next_offset,
            durable_offset: next_offset,
            cache: BatchCache::new(config.cache_bytes),
            failed: false,
            closed: false,
            pending: Vec::new(),
            producers: ProducerStates::default(),
            aborted: AbortedIndex::default(),
            journal: JournalTrack::default(),
        };
        let mut log = Self {
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
            dir_sync: RefCell::new(None),
            halted,
            cleaned_up_to: Cell::new(None),
            leader_epoch: Cell::new(leader_epoch),
            stats,
            journal: None,
            behind,
        };
        report.journal_batches = log.replay_journal(replay).await?;
        log.journal = journal;
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
            log.write_recovery_point().await?;
        }
        log.rebuild_producers().await;
        Ok((log, report))
    }

    /// Appends the journal's batches that continue the recovered log (those
    /// it already holds are skipped); stops at one that would leave a gap.
    /// A batch supersedes any queued before it at the same or later
    /// offsets: those were a run whose segment write failed, whose offsets
    /// the next writes took.
    async fn replay_journal(&self, batches: &[Bytes]) -> Result<usize, StorageError> {
        let mut plan: Vec<(BatchHeader, &Bytes)> = Vec::new();
        for batch in batches {
            let Ok(header) = BatchHeader::parse(batch, usize::MAX) else {
                log::warn!("partition {}: an unreadable batch in the journal; its replay stops there", self.name);
                break;
            };
            while plan.last().is_some_and(|(h, _)| h.base_offset >= header.base_offset) {
                plan.pop();
            }
            plan.push((header, batch));
        }
        let mut appended = 0;
        for (header, batch) in plan {
            let end = self.log_end();
            if header.last_offset() < end {
                continue;
            }
            if header.base_offset != end {
                log::warn!(
                    "partition {}: the journal's batch at offset {} does not continue the log at {end}; \
                     its replay stops",
                    self.name,
                    header.base_offset
                );
                break;
            }
            let mut timings = super::AppendTimings::default();
            self.write_queued(BytesMut::from(&batch[..]), header, super::Durability::Written, &mut timings).await?;
            appended += 1;
        }
        if appended > 0 {
            log::info!("partition {}: appended {appended} batch(es) from the journal", self.name);
        }
        Ok(appended)
    }

    /// Rebuilds the producer and transaction states on open: the newest
    /// snapshot and the `.txnindex` files, then the headers of every batch
    /// after the snapshot (and the records of its markers), which reopens
    /// the transactions still open and adds the aborts the files lack. A
    /// part that cannot be read is logged and skipped (its producers then
    /// start over, as after expiry).
    async fn rebuild_producers(&self) {
        let (from, states) = producers::load_newest_snapshot(&self.dir, self.log_end())
            .map_or((self.log_start(), ProducerStates::default()), |(o, s)| (o.max(self.log_start()), s));
        {
            let mut st = self.state.borrow_mut();
            st.producers = states;
            st.aborted = AbortedIndex::load(&self.dir, st.log_start, st.next_offset, &self.name.to_string());
        }
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
                    let end = (at + h.total_bytes()).min(bytes.len());
                    PartitionLog::apply_batch(&mut self.state.borrow_mut(), &h, &bytes[at..end]);
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
    }

    /// Stops the log as a crash of the process would, for tests that reopen
    /// a partition in the same process: the background work of past rolls
    /// stops at its next step, and the step in flight (a trim, an index
    /// file, a checkpoint, a zero write) lands before this returns, as a
    /// dead process's submitted I/O does before its restart. Without this a
    /// trim landing in the middle of the next open's recovery looks like a
    /// torn segment. The log must not be used afterwards; drop it.
    pub async fn halt(&self) {
        self.stop_background();
        let aheads: Vec<_> = self.state.borrow().segments.values().map(|s| s.ahead.clone()).collect();
        let job = self.sealing.borrow_mut().take();
        if let Some(job) = job {
            job.await;
        }
        self.behind.settle().await; // a running segment write finished
        for ahead in &aheads {
            ahead.retire().await; // a running zero write finished
        }
    }

    /// Flushes, seals the active segment and records a checkpoint so the next
    /// open needs no validation. After a failed sync nothing is vouched for.
    /// Whatever reaches the log afterwards (an append queued behind this,
    /// a maintenance pass that still holds it) is refused: the directory
    /// may be opened again, by a new log object, as soon as this returns.
    pub async fn close(&self) -> Result<(), StorageError> {
        let _permit = self.write_permit.acquire_permit(1).await.expect("write permit: never closed");
        self.settle().await;
        let writable = self.ensure_writable();
        self.state.borrow_mut().closed = true;
        writable?;
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
