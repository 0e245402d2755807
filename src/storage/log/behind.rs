//! The active segment's bytes on their way to the file, and write-behind.
//!
//! [`Behind`] holds the active segment's bytes from the last partial block
//! the file has (`align_down(written)`) to the log end: less than a block
//! when every append writes its segment (the block the next append
//! rewrites, `write_through`), more under write-behind (`stage`).
//!
//! **Write-behind.** With a shard journal, an append is answered once the
//! journal write holding it completed (`wait_written`): for acks=1 that is
//! the same promise as a segment write (the bytes reached the device, so a
//! crash of the process loses nothing: the next start appends them from the
//! journal), but one journal write carries every partition's appends of a
//! turn of the shard's loop, where each partition's segment took a write of
//! its own. The segment then receives the bytes in the background, in larger
//! writes: once `BEHIND_BYTES` wait, or `delay` after the first did, and
//! always before the segment is synced (a roll, a journal checkpoint, close)
//! or read from the file. Readers see an append once it is answered, from
//! the tail cache; a read that must go to the file first waits for the
//! bytes to reach it. A run of acks=1 appends of `BEHIND_BYTES` or more
//! skips the journal and writes its segment before it is answered
//! (`journal_run`): it would start a segment write at once anyway.

use std::{
    cell::{Cell, RefCell},
    collections::VecDeque,
    rc::Rc,
    time::Duration,
};

use glommio::sync::Semaphore;

use super::state::{align_down, align_up};
use crate::{
    limits,
    storage::{error::PartitionName, error::StorageError, file::SegmentFile, zero_ahead::ZeroAhead},
};

/// Bytes waiting for the segment that start a write at once.
pub(super) const BEHIND_BYTES: u64 = 128 << 10;
/// What the staged bytes' buffer keeps once they are written: a partition
/// that once staged a burst does not hold its size for good (staged bytes
/// are in no memory budget beyond a partition's share,
/// `server::memory::PARTITION_STATE_BYTES`).
const TAIL_KEPT_BYTES: usize = 8 << 10;
/// How long a failed background segment write waits to be tried again.
const RETRY: Duration = Duration::from_millis(100);

/// Where the segment writes go and how the file grows.
pub(super) struct BehindTarget {
    pub(super) file: Rc<SegmentFile>,
    pub(super) ahead: Rc<ZeroAhead>,
}

struct BehindState {
    target: BehindTarget,
    /// Bytes of the segment in the file, and the offset they end at (always
    /// a batch boundary).
    written: u64,
    written_offset: i64,
    /// The segment's bytes from `align_down(written)` to its size with
    /// every staged batch.
    tail: Vec<u8>,
    /// Each staged batch's end: (segment size, next offset) after it. The
    /// last one is the segment's size; none are staged when it is `written`.
    ends: VecDeque<(u64, i64)>,
    /// A timed write is scheduled.
    armed: bool,
    /// A write-at-once is scheduled.
    urgent: bool,
    /// The last segment write failed (a full disk, say): until one
    /// succeeds, appends write their segment before they are answered, so
    /// the producer hears of it.
    stalled: bool,
}

impl BehindState {
    /// The segment's size with every staged batch.
    fn size(&self) -> u64 {
        self.ends.back().map_or(self.written, |e| e.0)
    }
}

pub(super) struct Behind {
    name: PartitionName,
    state: RefCell<BehindState>,
    /// One segment write at a time.
    permit: Semaphore,
    halted: Rc<Cell<bool>>,
    /// Write-behind's delay; zero when every append writes its segment.
    pub(super) delay: Duration,
    segment_bytes: u64,
    zero_ahead_bytes: u64,
    step: u64,
    /// The log's counters of segment writes, and of those past the zeroed
    /// blocks.
    writes: Rc<Cell<u64>>,
    extending: Rc<Cell<u64>>,
}

/// Settings taken from the log's config.
pub(super) struct BehindConfig {
    pub(super) delay: Duration,
    pub(super) segment_bytes: u64,
    pub(super) zero_ahead_bytes: u64,
    pub(super) step: u64,
    pub(super) writes: Rc<Cell<u64>>,
    pub(super) extending: Rc<Cell<u64>>,
}

impl Behind {
    /// For the active segment `target` of `size` bytes ending at
    /// `next_offset`, whose last partial block is `tail`.
    pub(super) fn new(
        name: PartitionName,
        target: BehindTarget,
        size: u64,
        next_offset: i64,
        tail: Vec<u8>,
        halted: Rc<Cell<bool>>,
        config: BehindConfig,
    ) -> Rc<Self> {
        debug_assert_eq!(tail.len() as u64, size - align_down(size));
        Rc::new(Self {
            name,
            state: RefCell::new(BehindState {
                target,
                written: size,
                written_offset: next_offset,
                tail,
                ends: VecDeque::new(),
                armed: false,
                urgent: false,
                stalled: false,
            }),
            permit: Semaphore::new(1),
            halted,
            delay: config.delay,
            segment_bytes: config.segment_bytes,
            zero_ahead_bytes: config.zero_ahead_bytes,
            step: config.step,
            writes: config.writes,
            extending: config.extending,
        })
    }

    /// A new active segment, empty, starting at `next_offset`. The caller
    /// flushed the old one and holds the write permit.
    pub(super) fn restart(&self, target: BehindTarget, next_offset: i64) {
        let mut st = self.state.borrow_mut();
        debug_assert!(st.ends.is_empty(), "a segment is flushed before it rolls");
        st.target = target;
        st.written = 0;
        st.written_offset = next_offset;
        st.tail.clear();
        st.ends.clear();
    }

    /// Adds a batch (offsets assigned, ending at `next_offset`) after the
    /// staged ones.
    pub(super) fn stage(&self, batch: &[u8], next_offset: i64) {
        let mut st = self.state.borrow_mut();
        st.tail.extend_from_slice(batch);
        let size = st.size() + batch.len() as u64;
        st.ends.push_back((size, next_offset));
    }

    pub(super) fn stalled(&self) -> bool {
        self.state.borrow().stalled
    }

    /// Bytes of the segment in the file and the offset they end at.
    pub(super) fn written(&self) -> (u64, i64) {
        let st = self.state.borrow();
        (st.written, st.written_offset)
    }

    /// After an append staged without writing: schedules the segment write,
    /// at once past `BEHIND_BYTES`, else after the delay.
    pub(super) fn schedule(self: &Rc<Self>) {
        let (now, later) = {
            let mut st = self.state.borrow_mut();
            if st.ends.is_empty() {
                return;
            }
            let now = st.size() - st.written >= BEHIND_BYTES && !st.urgent;
            st.urgent |= now;
            let later = !now && !st.armed;
            st.armed |= later;
            (now, later)
        };
        if !now && !later {
            return;
        }
        let me = self.clone();
        crate::storage::background::spawn(async move {
            if later {
                glommio::timer::sleep(me.delay).await;
            }
            if !me.halted.get() {
                if let Err(e) = me.flush().await {
                    // The journal holds the bytes; the write is tried again.
                    log::error!("{e}; its segment write is retried in {RETRY:?}");
                    glommio::timer::sleep(RETRY).await;
                }
            }
            let mut st = me.state.borrow_mut();
            if later {
                st.armed = false;
            } else {
                st.urgent = false;
            }
            // Bytes staged while this write was in flight get their own.
            let again = !st.ends.is_empty() && !st.armed && !me.halted.get();
            drop(st);
            if again {
                me.schedule();
            }
        });
    }

    /// Writes every staged byte to the segment, in writes of at most
    /// `WRITE_BYTES_MAX` (a larger batch in one) ending at batch boundaries.
    pub(super) async fn flush(&self) -> Result<(), StorageError> {
        let _permit = self.permit.acquire_permit(1).await.expect("segment write permit: never closed");
        self.flush_staged().await
    }

    /// Writes `batches` (offsets assigned, the last ending at `next_offset`)
    /// to the segment after every staged byte, without staging them: the
    /// segment's last partial block and the batches go straight into one
    /// aligned write, as when no write-behind is on. A failed write leaves
    /// the state as it was.
    pub(super) async fn write_through(&self, batches: &[&[u8]], next_offset: i64) -> Result<(), StorageError> {
        let _permit = self.permit.acquire_permit(1).await.expect("segment write permit: never closed");
        self.flush_staged().await?;
        let (file, ahead, buf, pos, end, tail) = {
            let st = self.state.borrow();
            let pos = align_down(st.written);
            let used = st.tail.len() + batches.iter().map(|b| b.len()).sum::<usize>();
            let mut buf = st.target.file.alloc(align_up(used as u64) as usize);
            let bytes = buf.as_bytes_mut();
            bytes[..st.tail.len()].copy_from_slice(&st.tail);
            let mut at = st.tail.len();
            for b in batches {
                bytes[at..at + b.len()].copy_from_slice(b);
                at += b.len();
            }
            bytes[used..].fill(0);
            // The last partial block, which the next write starts with.
            let tail = bytes[align_down(used as u64) as usize..used].to_vec();
            (st.target.file.clone(), st.target.ahead.clone(), buf, pos, pos + used as u64, tail)
        };
        self.write_block(&file, &ahead, buf, pos).await?;
        let mut st = self.state.borrow_mut();
        st.tail = tail;
        st.written = end;
        st.written_offset = next_offset;
        drop(st);
        self.writes.set(self.writes.get() + 1);
        ahead.top_up(align_up(end), self.zero_ahead_bytes, self.segment_bytes, self.step, &self.name);
        Ok(())
    }

    /// [`Self::flush`] for a caller holding the segment write permit.
    async fn flush_staged(&self) -> Result<(), StorageError> {
        loop {
            let Some(step) = self.next_write() else { return Ok(()) };
            let (file, ahead, buf, pos, end, end_offset) = step;
            self.write_block(&file, &ahead, buf, pos).await?;
            self.mark_written(end, end_offset);
            ahead.top_up(align_up(end), self.zero_ahead_bytes, self.segment_bytes, self.step, &self.name);
        }
    }

    /// One aligned segment write at `pos`, growing the file first when it
    /// reaches past the zeroed blocks. Records whether it failed (`stalled`).
    async fn write_block(
        &self,
        file: &SegmentFile,
        ahead: &ZeroAhead,
        buf: glommio::io::DmaBuffer,
        pos: u64,
    ) -> Result<(), StorageError> {
        let written = if ahead.covers(pos + buf.len() as u64) {
            file.write_at(buf, pos).await.map_err(|e| StorageError::from_io(&self.name, file.path(), "write", e))
        } else {
            self.extending.set(self.extending.get() + 1);
            ahead.write_beyond(buf, pos, self.step, &self.name).await
        };
        self.state.borrow_mut().stalled = written.is_err();
        written
    }

    /// The next write: its file, buffer, position, and the segment size and
    /// offset it ends at. `None` when nothing waits.
    #[allow(clippy::type_complexity)]
    fn next_write(&self) -> Option<(Rc<SegmentFile>, Rc<ZeroAhead>, glommio::io::DmaBuffer, u64, u64, i64)> {
        let st = self.state.borrow();
        let &(mut end, mut end_offset) = st.ends.front()?;
        let pos = align_down(st.written);
        for &(e, o) in st.ends.iter().skip(1) {
            if e - pos > limits::WRITE_BYTES_MAX as u64 {
                break;
            }
            (end, end_offset) = (e, o);
        }
        let used = (end - pos) as usize;
        let mut buf = st.target.file.alloc(align_up(used as u64) as usize);
        let bytes = buf.as_bytes_mut();
        bytes[..used].copy_from_slice(&st.tail[..used]);
        bytes[used..].fill(0);
        Some((st.target.file.clone(), st.target.ahead.clone(), buf, pos, end, end_offset))
    }

    fn mark_written(&self, end: u64, end_offset: i64) {
        let mut st = self.state.borrow_mut();
        let drop_bytes = (align_down(end) - align_down(st.written)) as usize;
        st.tail.drain(..drop_bytes);
        st.written = end;
        st.written_offset = end_offset;
        while st.ends.front().is_some_and(|e| e.0 <= end) {
            st.ends.pop_front();
        }
        if st.ends.is_empty() {
            st.tail.shrink_to(TAIL_KEPT_BYTES);
        }
        self.writes.set(self.writes.get() + 1);
    }

    /// Bytes the staged bytes' buffer holds on to.
    #[cfg(test)]
    pub(super) fn tail_capacity(&self) -> usize {
        self.state.borrow().tail.capacity()
    }

    /// Waits out a segment write in flight (the log is halting).
    pub(super) async fn settle(&self) {
        drop(self.permit.acquire_permit(1).await.expect("segment write permit: never closed"));
    }
}
