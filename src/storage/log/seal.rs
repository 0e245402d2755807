//! Rolling and sealing: a roll syncs the active segment and starts the next
//! one on the append path, and leaves trimming the sealed file, its index
//! files and the checkpoint to background work (`SealWork`, then
//! `CheckpointWork`), chained so checkpoints land in order; `settle` waits
//! for it. Close seals the active segment in place.

use std::{cell::Cell, path::PathBuf, rc::Rc};

use super::{
    behind::BehindTarget,
    state::{LogState, PartitionLog},
};
use crate::{
    limits,
    storage::{
        background,
        error::{PartitionName, StorageError},
        file, producers,
        recovery::{self, Checkpoint},
        segment, txn_index,
        zero_ahead::ZeroAhead,
    },
};

impl PartitionLog {
    /// Rolls before a write of `incoming` bytes when the active segment is
    /// full, old enough (`segment.ms`) or near its limit of relative offsets.
    pub(super) async fn roll_if_due(&self, incoming: usize) -> Result<(), StorageError> {
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
    /// new file. Its directory entry is synced in the background
    /// (`dir_sync`), and the first sync of the new segment waits for that:
    /// a directory sync queues on the shard's blocking pool behind every
    /// other partition's roll work, and at a steady rate the partitions
    /// roll together. Trimming the sealed file, its index files and the
    /// checkpoint follow in the background too ([`SealWork`]): until they
    /// land, recovery rebuilds missing indices and validates from the
    /// previous checkpoint, as after any crash.
    pub(super) async fn roll(&self) -> Result<(), StorageError> {
        self.segment_sync_through(self.log_end()).await?;
        let sealed = self.seal_work();
        let base = self.state.borrow().next_offset;
        let now = self.clock.now_ms();
        let seg = recovery::create_segment(&self.dir, base, &self.name, &self.config, &self.faults, now).await?;
        let dir_sync = background::spawn(recovery::sync_segment_dir(self.dir.clone(), self.name.clone()));
        *self.dir_sync.borrow_mut() = Some(dir_sync);
        self.behind.restart(BehindTarget { file: seg.file.clone(), ahead: seg.ahead.clone() }, base);
        let checkpoint = {
            let mut st = self.state.borrow_mut();
            st.segments.insert(base, seg);
            self.checkpoint_work(&st)
        };
        let previous = self.sealing.borrow_mut().take();
        let halted = self.halted.clone();
        let job = background::spawn(async move {
            if let Some(previous) = previous {
                previous.await;
            }
            let outcome = match sealed.run(&halted).await {
                Ok(()) if halted.get() => Ok(()),
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
    pub(super) async fn seal_active(&self) -> Result<(), StorageError> {
        self.segment_sync_through(self.log_end()).await?;
        self.seal_work().run(&Cell::new(false)).await
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
            aborted: txn_index::encode(st.aborted.segment(seg.base_offset)),
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
    pub(super) async fn write_checkpoint(&self) -> Result<(), StorageError> {
        let work = self.checkpoint_work(&self.state.borrow());
        work.run().await
    }

    /// Records the recovery point alone. At open the producer states are
    /// not rebuilt yet (only what a journal replay appended is in them), and
    /// the active segment's aborts are in no `.txnindex` file: a snapshot
    /// there would hide the aborts before it from every later open.
    pub(super) async fn write_recovery_point(&self) -> Result<(), StorageError> {
        let mut work = self.checkpoint_work(&self.state.borrow());
        work.snapshot = None;
        work.run().await
    }
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
    /// The segment's aborted-transactions index (`.txnindex`), when any.
    aborted: Vec<u8>,
}

impl SealWork {
    /// Each step first checks `halted` (the log was dropped or halted): a
    /// crashed log's work stops where it is.
    async fn run(self, halted: &Cell<bool>) -> Result<(), StorageError> {
        let file = self.file;
        // A zero write still running would land after the trim.
        self.ahead.retire().await;
        if halted.get() {
            return Ok(());
        }
        file.truncate(self.size).await.map_err(|e| StorageError::from_io(&self.name, file.path(), "truncate", e))?;
        let log_path = file.path().to_path_buf();
        let (name, offsets, times, aborted) = (self.name, self.offsets, self.times, self.aborted);
        if halted.get() {
            return Ok(());
        }
        glommio::executor()
            .spawn_blocking(move || {
                if !aborted.is_empty() {
                    let path = log_path.with_extension(txn_index::TXN_INDEX_SUFFIX);
                    file::write_atomically(&path, &aborted)
                        .map_err(|e| StorageError::from_io(&name, &path, "write aborted-transactions index", e))?;
                }
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
