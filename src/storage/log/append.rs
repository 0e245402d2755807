//! The write path: appends queue up, and the writer holding the write
//! permit flushes the whole queue as runs of aligned DMA writes
//! (`flush_pending` → `write_run` → `commit_batch`), rolling between runs;
//! a durable append then waits for the group commit (`group_commit`).

use std::{
    cell::RefCell,
    rc::Rc,
    time::{Duration, Instant},
};

use bytes::{Bytes, BytesMut};

use super::state::{bump, AppendInfo, PartitionLog, Pending, ResultSlot};
use crate::{
    limits,
    protocol::record_batch::{self, TxnMarker},
    storage::{
        batch_cache::CachedBatch,
        error::StorageError,
        producers::{self, Sequenced},
    },
};

/// When an append may return, matching the producer's `acks`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Durability {
    /// Once the write completed (acks=0 and acks=1).
    Written,
    /// Once an `fdatasync` covers it (acks=all).
    Synced,
    /// Once written, like `Written`, for a caller that waits for a sync
    /// next (`sync_through`, beside other work): the shard journal starts
    /// that sync as soon as the write completes.
    WrittenSyncNext,
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

impl PartitionLog {
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
        if header.attributes & record_batch::ATTR_CONTROL != 0 {
            // Markers come from the transaction coordinator, never a producer.
            return Err(StorageError::InvalidBatch {
                partition: self.name.clone(),
                reason: record_batch::BatchError::ControlBatch,
            });
        }
        if header.attributes & record_batch::ATTR_TRANSACTIONAL != 0 && !producers::is_idempotent(&header) {
            // Its transaction could never be matched with a marker.
            return Err(StorageError::InvalidBatch {
                partition: self.name.clone(),
                reason: record_batch::BatchError::TransactionalWithoutSequence,
            });
        }
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
        self.write_queued(batch, header, durability, timings).await
    }

    /// Appends a batch the broker itself wrote for a producer's transaction
    /// (Kafka's coordinator origin): the offsets a TxnOffsetCommit writes to
    /// `__consumer_offsets`, transactional with the producer's id and epoch
    /// but no sequence, since they are not a producer's retries. They open
    /// the producer's transaction here like its own batches, and its marker
    /// ends it. Returns once durable.
    pub async fn append_for_transaction(&self, batch: BytesMut) -> Result<AppendInfo, StorageError> {
        let header = record_batch::check_produced_batch(&batch, self.config.max_batch_bytes)
            .map_err(|reason| StorageError::InvalidBatch { partition: self.name.clone(), reason })?;
        if !producers::is_transactional_data(&header) || producers::is_idempotent(&header) {
            // Only the broker's own unsequenced transactional batches come here.
            return Err(StorageError::InvalidBatch {
                partition: self.name.clone(),
                reason: record_batch::BatchError::TransactionalWithoutSequence,
            });
        }
        self.write_queued(batch, header, Durability::Synced, &mut AppendTimings::default()).await
    }

    /// Appends a transaction marker (a control batch) and returns once it is
    /// written, or durable for [`Durability::Synced`]: the coordinator counts
    /// a transaction finished in a partition only when its marker cannot be
    /// lost, so a caller asking for less syncs before it answers.
    /// A marker from an epoch older than the producer's here is refused
    /// (StaleEpoch: INVALID_PRODUCER_EPOCH); it comes from a fenced round.
    pub async fn append_marker(
        &self,
        marker: TxnMarker,
        timestamp: i64,
        durability: Durability,
    ) -> Result<AppendInfo, StorageError> {
        let checked = self.state.borrow().producers.check_marker(marker.producer_id, marker.producer_epoch);
        checked.map_err(|reason| StorageError::Sequence { partition: self.name.clone(), reason })?;
        let batch = BytesMut::from(&record_batch::encode_control_batch(&marker, timestamp)[..]);
        let header = record_batch::BatchHeader::parse(&batch, usize::MAX).expect("an encoded control batch parses");
        self.write_queued(batch, header, durability, &mut AppendTimings::default()).await
    }

    /// Queues a checked batch, writes the queue (or waits for the writer
    /// before to write it), then waits for `durability`.
    pub(super) async fn write_queued(
        &self,
        batch: BytesMut,
        header: record_batch::BatchHeader,
        durability: Durability,
        timings: &mut AppendTimings,
    ) -> Result<AppendInfo, StorageError> {
        let slot: ResultSlot = Rc::new(RefCell::new(None));
        let synced = durability != Durability::Written;
        self.state.borrow_mut().pending.push(Pending { batch, header, slot: slot.clone(), copied: false, synced });
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

    /// Writes every queued append, in runs that fit the active segment and
    /// the write size limit, rolling between runs. The caller holds the
    /// write permit. Every queued slot gets an answer.
    pub(super) async fn flush_pending(&self, timings: &mut AppendTimings) {
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
                    // The journal holds the failed run; the batches that
                    // take its offsets next supersede it there.
                    st.journal.end = st.journal.end.min(st.next_offset);
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

    /// Writes a run of batches, then commits the new state. With
    /// write-behind (`behind`) the run goes into the shard journal and is
    /// answered once that write completed; its segment write follows in the
    /// background. Otherwise (a large acks=1 run, see `journal_run`, or
    /// when the journal failed) it is written to
    /// the segment after whatever bytes wait for it, as aligned DMA writes.
    /// Nothing is visible to readers before a write holding it completed,
    /// and a failed write leaves the state as it was.
    async fn write_run(&self, run: &mut [Pending]) -> Result<Vec<AppendInfo>, StorageError> {
        {
            let st = self.state.borrow();
            let mut next = st.next_offset;
            for p in run.iter_mut() {
                if !p.copied {
                    record_batch::patch_base_offset(&mut p.batch, next);
                    record_batch::patch_leader_epoch(&mut p.batch, self.leader_epoch.get());
                    p.header.base_offset = next;
                    p.header.leader_epoch = self.leader_epoch.get();
                }
                debug_assert!(p.header.base_offset >= next, "copied batches continue the log");
                next = p.header.last_offset() + 1;
            }
        }
        // Patched, each batch is shared from here on: the journal, the
        // segment write and the cache hold the same bytes.
        let batches: Vec<Bytes> = run.iter_mut().map(|p| std::mem::take(&mut p.batch).freeze()).collect();
        // Into the journal alongside the segment (durable appends wait for
        // the journal's sync, not the segment's).
        let entry = self.journal_run(run, &batches);
        let behind = self.behind.clone();
        if let (Some(entry), Some(link)) = (entry, self.journal.as_ref().filter(|_| self.writes_behind())) {
            if link.journal.wait_written(entry).await {
                for (p, batch) in run.iter().zip(&batches) {
                    behind.stage(batch, p.header.last_offset() + 1);
                }
                let infos = run.iter().zip(batches).map(|(p, batch)| self.commit_batch(&p.header, batch)).collect();
                behind.schedule();
                return Ok(infos);
            }
            // The journal failed: the segment write makes the run written.
        }
        let slices: Vec<&[u8]> = batches.iter().map(|b| &b[..]).collect();
        let next_offset = run.last().expect("a run holds a batch").header.last_offset() + 1;
        behind.write_through(&slices, next_offset).await?;
        Ok(run.iter().zip(batches).map(|(p, batch)| self.commit_batch(&p.header, batch)).collect())
    }

    /// Makes one written batch visible: segment, index, cache.
    fn commit_batch(&self, header: &record_batch::BatchHeader, batch: Bytes) -> AppendInfo {
        let mut st = self.state.borrow_mut();
        let seg = st.active_mut();
        let position = seg.size;
        seg.on_append(header, position);
        st.next_offset = header.last_offset() + 1;
        bump(&self.stats.appends, 1);
        bump(&self.stats.records_appended, (header.last_offset() - header.base_offset + 1) as u64);
        bump(&self.stats.bytes_appended, batch.len() as u64);
        PartitionLog::apply_batch(&mut st, header, &batch);
        st.cache.push(CachedBatch { base_offset: header.base_offset, last_offset: header.last_offset(), bytes: batch });
        AppendInfo {
            base_offset: header.base_offset,
            last_offset: header.last_offset(),
            max_timestamp: header.max_timestamp,
        }
    }
}
