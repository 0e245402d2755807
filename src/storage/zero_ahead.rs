//! Zero-ahead: the active segment's blocks are written with zeros, in the
//! background, a little ahead of its appends.
//!
//! On ext4 (and XFS) a direct write into blocks that were only reserved
//! with `fallocate`, or past the end of the file, must also convert the
//! extent from unwritten to written and move the file size: a journal
//! transaction on the write's path. `shardlog iotune` measures what that
//! costs a paced 1 KiB append on the test machines' disk: p99 about 2–3 ms
//! against about 0.2 ms for the same writes into blocks already written.
//! So every append that lands in zeroed blocks is a plain overwrite, and
//! the metadata work happens here, off the append's path, a window at a
//! time.
//!
//! One writer beyond [`ZeroAhead::written`] at a time: the zero job, or an
//! append that outran it (the fallback, which writes as before: reserve,
//! then an extending write). Appends that land below `written` need no
//! permit, and nothing else writes there, so the two never overlap.
//!
//! Crash safety is unchanged: the zeros are not data, recovery trims them
//! ("zero padding", see `recovery::cut_tail`), and a segment sealed before
//! its padding was trimmed keeps the segments after it.

use std::{cell::Cell, rc::Rc, time::Instant};

use glommio::sync::Semaphore;

use crate::{
    limits::{DMA_ALIGNMENT, PREALLOCATE_MIN_BYTES, ZERO_AHEAD_APPEND_BYTES_PER_S_MAX, ZERO_AHEAD_MIN_BYTES},
    storage::{error::StorageError, file::SegmentFile, PartitionName},
};

thread_local! {
    /// Zero writes one shard runs at once: each holds a buffer of up to a
    /// window, so many partitions starting together stay bounded.
    static FILLS: Rc<Semaphore> = Rc::new(Semaphore::new(4));
}

/// The write-ahead state of one segment file.
pub struct ZeroAhead {
    file: Rc<SegmentFile>,
    /// Bytes reserved with fallocate (KEEP_SIZE) so far.
    allocated: Cell<u64>,
    /// Every block below this has been written, with zeros or with data.
    written: Cell<u64>,
    /// Held by whoever writes beyond `written`.
    permit: Semaphore,
    /// A zero job is queued or running.
    scheduled: Cell<bool>,
    /// The segment was sealed: no more zeros (its padding is being trimmed).
    retired: Cell<bool>,
    /// A zero write failed here: the fallback path serves the rest.
    failed: Cell<bool>,
    /// When the data end last passed a half-window mark, and that end.
    mark: Cell<Option<(Instant, u64)>>,
    /// Appends came faster than `ZERO_AHEAD_APPEND_BYTES_PER_S_MAX` over the
    /// last half window: they are large and few, and amortise the extent
    /// conversion themselves, while zeros would double the disk's writes.
    fast: Cell<bool>,
}

impl ZeroAhead {
    /// `allocated`: what the file already reserves (its length at open).
    pub fn new(file: Rc<SegmentFile>, allocated: u64) -> Rc<Self> {
        Rc::new(Self {
            file,
            allocated: Cell::new(allocated),
            written: Cell::new(0),
            permit: Semaphore::new(1),
            scheduled: Cell::new(false),
            retired: Cell::new(false),
            failed: Cell::new(false),
            mark: Cell::new(None),
            fast: Cell::new(false),
        })
    }

    /// A segment that never grows (sealed or compacted).
    pub fn sealed(file: Rc<SegmentFile>, size: u64) -> Rc<Self> {
        let this = Self::new(file, size);
        this.retired.set(true);
        this
    }

    /// Whether a write ending at `end` lands in blocks already written.
    pub fn covers(&self, end: u64) -> bool {
        end <= self.written.get()
    }

    /// Writes `buf` at `pos` where it reaches past the written blocks:
    /// waits out a running zero job, reserves blocks in `step`s, then
    /// writes (extending the file, as without zero-ahead).
    pub async fn write_beyond(
        &self,
        buf: glommio::io::DmaBuffer,
        pos: u64,
        step: u64,
        name: &PartitionName,
    ) -> Result<(), StorageError> {
        let end = pos + buf.len() as u64;
        let _permit = self.permit.acquire_permit(1).await.expect("zero-ahead permit: never closed");
        self.reserve(end, step, name).await?;
        self.file.write_at(buf, pos).await.map_err(|e| StorageError::from_io(name, self.file.path(), "write", e))?;
        self.written.set(self.written.get().max(end));
        Ok(())
    }

    /// Reserves blocks through `end`, and ahead of it (`reserve_target`).
    /// When the disk cannot hold the blocks ahead, it reserves only what
    /// the write needs: the reservation ahead is a speed-up, and a nearly
    /// full disk that still has room for the data must take it (a partition
    /// would otherwise refuse every append until a whole step is free).
    async fn reserve(&self, end: u64, step: u64, name: &PartitionName) -> Result<(), StorageError> {
        if end <= self.allocated.get() {
            return Ok(());
        }
        let target = reserve_target(end, step);
        let needed = end.div_ceil(DMA_ALIGNMENT) * DMA_ALIGNMENT;
        let reserved = match self.file.preallocate(target).await {
            Ok(()) => Ok(target),
            Err(e) if target > needed => {
                log::debug!(
                    "partition {name}: reserving {target} bytes of {} failed ({e}); reserving {needed}",
                    self.file.path().display()
                );
                self.file.preallocate(needed).await.map(|()| needed)
            }
            Err(e) => Err(e),
        }
        .map_err(|e| StorageError::from_io(name, self.file.path(), "preallocate", e))?;
        self.allocated.set(reserved);
        Ok(())
    }

    /// Queues a zero job when fewer than half of `window` bytes are written
    /// ahead of `head` (the aligned end of the segment's data). `limit`
    /// caps it at the segment's largest size.
    pub fn top_up(self: &Rc<Self>, head: u64, window: u64, limit: u64, step: u64, name: &PartitionName) {
        if window == 0 || self.retired.get() || self.failed.get() || self.scheduled.get() {
            return;
        }
        // A young segment (a quiet partition) zeros as much again as it
        // holds, not the whole window.
        let window = window.min(head.max(ZERO_AHEAD_MIN_BYTES));
        if self.written.get() >= head + window / 2 {
            return;
        }
        match self.mark.get() {
            None => self.mark.set(Some((Instant::now(), head))),
            Some((at, from)) if head < from || head >= from + window / 2 => {
                let rate = head.saturating_sub(from) as f64 / at.elapsed().as_secs_f64().max(1e-6);
                self.fast.set(rate > ZERO_AHEAD_APPEND_BYTES_PER_S_MAX as f64);
                self.mark.set(Some((Instant::now(), head)));
            }
            Some(_) => {}
        }
        if self.fast.get() {
            return;
        }
        self.scheduled.set(true);
        let (this, name) = (self.clone(), name.clone());
        crate::storage::background::spawn(async move {
            let fills = FILLS.with(Rc::clone);
            let _slot = fills.acquire_permit(1).await.expect("zero-ahead slots: never closed");
            if let Err(e) = this.fill(head, window, limit, step, &name).await {
                this.failed.set(true);
                log::warn!("{e} (zero-ahead; appends to this segment extend the file instead)");
            }
            this.scheduled.set(false);
        });
    }

    /// Writes zeros from the written end (or `head`) to `head + window`.
    async fn fill(
        &self,
        head: u64,
        window: u64,
        limit: u64,
        step: u64,
        name: &PartitionName,
    ) -> Result<(), StorageError> {
        let _permit = self.permit.acquire_permit(1).await.expect("zero-ahead permit: never closed");
        if self.retired.get() {
            return Ok(());
        }
        // Appends since `head` was taken either stayed below `written` or
        // raised it under this permit, so nothing at or past `start` holds
        // data or is being written.
        let start = self.written.get().max(head);
        let end = (head + window).min(limit.div_ceil(DMA_ALIGNMENT) * DMA_ALIGNMENT);
        if end <= start {
            return Ok(());
        }
        self.reserve(end, step, name).await?;
        if self.retired.get() {
            return Ok(()); // abandoned while reserving
        }
        let mut buf = self.file.alloc((end - start) as usize);
        buf.as_bytes_mut().fill(0);
        self.file
            .write_padding_at(buf, start)
            .await
            .map_err(|e| StorageError::from_io(name, self.file.path(), "write zeros into", e))?;
        self.written.set(end);
        Ok(())
    }

    /// Stops zero-ahead at once, without waiting: the log that owned the
    /// segment was dropped without a close. A job of the dropped log must
    /// not write zeros into a file that a later open of the partition is
    /// appending to (a crash reopen in the same process, as the model
    /// tests do).
    pub fn abandon(&self) {
        self.retired.set(true);
    }

    /// Stops zero-ahead for good, once a running zero job finished: the
    /// segment is being sealed and its padding trimmed.
    pub async fn retire(&self) {
        let _permit = self.permit.acquire_permit(1).await.expect("zero-ahead permit: never closed");
        self.retired.set(true);
    }
}

/// Where a reservation that must cover `end` stops: as many bytes again as
/// the segment holds, at least `PREALLOCATE_MIN_BYTES` and at most `step`.
/// A partition that took a few records reserves a little; a busy one soon
/// reserves `step` at a time, as before. (A fixed `step` reserved 32 MiB for
/// every partition ever written to: 1.6 GB for the 50 offsets partitions of
/// an idle broker.)
fn reserve_target(end: u64, step: u64) -> u64 {
    let ahead = end.clamp(PREALLOCATE_MIN_BYTES.min(step), step);
    (end + ahead).div_ceil(DMA_ALIGNMENT) * DMA_ALIGNMENT
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reservations_grow_with_the_segment_up_to_the_step() {
        let step = 32 << 20;
        assert_eq!(reserve_target(1, step), DMA_ALIGNMENT + PREALLOCATE_MIN_BYTES);
        assert_eq!(reserve_target(3 << 20, step), 6 << 20);
        assert_eq!(reserve_target(100 << 20, step), 132 << 20);
        // A step below the minimum wins.
        assert_eq!(reserve_target(8192, 4096), 12288);
        for end in [1, 4095, 4097, 1 << 20, (1 << 20) + 1, 77 << 20] {
            let target = reserve_target(end, step);
            assert!(target >= end && target.is_multiple_of(DMA_ALIGNMENT), "{end} -> {target}");
        }
    }
}
