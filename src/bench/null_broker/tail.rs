//! What the null broker keeps of a partition: its offsets and the most
//! recent batches as they were received (base offsets patched), in memory
//! only and bounded by `--tail-bytes`; and for transactions, each
//! producer's open transaction here (the last stable offset is the oldest
//! one's first offset) and the aborted ones still in the tail, for
//! read_committed readers.

use std::{
    cell::{Cell, RefCell},
    collections::{BTreeMap, VecDeque},
    future::Future,
    pin::Pin,
    task::{Context, Poll, Waker},
};

use bytes::Bytes;

/// Kafka error codes the null broker answers with: the broker's one table.
pub use crate::protocol::errors as codes;

/// One stored batch: its first and last offsets and its bytes.
struct Stored {
    base: i64,
    last: i64,
    bytes: Bytes,
}

/// A partition led by this core.
pub struct Tail {
    batches: VecDeque<Stored>,
    /// The first offset still held (Kafka's log start offset).
    pub start: i64,
    /// The next offset to assign (the high watermark: acks=1 is all there is).
    pub end: i64,
    bytes: usize,
    bytes_max: usize,
    /// Producer id → first offset of its open transaction here.
    open: BTreeMap<i64, i64>,
    /// Aborted transactions as (producer id, first offset, marker offset),
    /// oldest first; dropped once their marker leaves the tail.
    aborted: VecDeque<(i64, i64, i64)>,
}

impl Tail {
    pub fn new(bytes_max: usize) -> Self {
        Self {
            batches: VecDeque::new(),
            start: 0,
            end: 0,
            bytes: 0,
            bytes_max,
            open: BTreeMap::new(),
            aborted: VecDeque::new(),
        }
    }

    /// The last stable offset: the first offset of the oldest open
    /// transaction, or the end when none is open.
    pub fn last_stable(&self) -> i64 {
        self.open.values().copied().min().unwrap_or(self.end)
    }

    /// A transactional batch of `producer_id` was given offsets from
    /// `base`: it opens the producer's transaction here unless one is open.
    pub fn open_txn(&mut self, producer_id: i64, base: i64) {
        self.open.entry(producer_id).or_insert(base);
    }

    /// Ends `producer_id`'s transaction here with `marker` (a control
    /// batch, its base offset patched here), which takes the next offset
    /// as in Kafka; an abort is remembered for read_committed readers.
    pub fn end_txn(&mut self, producer_id: i64, commit: bool, mut marker: bytes::BytesMut) {
        let at = self.reserve(1);
        crate::protocol::record_batch::patch_base_offset(&mut marker, at);
        let first = self.open.remove(&producer_id);
        if !commit {
            self.aborted.push_back((producer_id, first.unwrap_or(at), at));
        }
        self.push(at, at, marker.freeze());
    }

    /// Aborted transactions overlapping `from..upper`, as (producer id,
    /// first offset), for a read_committed fetch.
    pub fn aborted_between(&self, from: i64, upper: i64) -> Vec<(i64, i64)> {
        self.aborted
            .iter()
            .filter(|&&(_, first, last)| last >= from && first < upper)
            .map(|&(p, f, _)| (p, f))
            .collect()
    }

    /// Assigns `count` offsets; returns the first.
    pub fn reserve(&mut self, count: i64) -> i64 {
        let base = self.end;
        self.end += count;
        base
    }

    /// Keeps a batch whose offsets `reserve` gave, dropping the oldest ones
    /// past the byte bound (the newest batch is always kept).
    pub fn push(&mut self, base: i64, last: i64, bytes: Bytes) {
        self.bytes += bytes.len();
        self.batches.push_back(Stored { base, last, bytes });
        while self.bytes > self.bytes_max && self.batches.len() > 1 {
            let old = self.batches.pop_front().expect("more than one batch");
            self.bytes -= old.bytes.len();
        }
        self.start = self.batches.front().map_or(self.end, |b| b.base);
        while self.aborted.front().is_some_and(|&(_, _, last)| last < self.start) {
            self.aborted.pop_front();
        }
    }

    /// The batches from the one holding `from`, up to `max_bytes` (the first
    /// batch always, as Kafka does, so a large batch cannot block a
    /// consumer), starting below `upper` (the last stable offset for a
    /// read_committed reader). Err: `from` is not in `start..=end`.
    pub fn read(&self, from: i64, max_bytes: usize, upper: i64, out: &mut Vec<Bytes>) -> Result<usize, i16> {
        if from < self.start || from > self.end {
            return Err(codes::OFFSET_OUT_OF_RANGE);
        }
        let first = self.batches.partition_point(|b| b.last < from);
        let mut taken = 0;
        for b in self.batches.range(first..) {
            if b.base >= upper || (taken > 0 && taken + b.bytes.len() > max_bytes) {
                break;
            }
            taken += b.bytes.len();
            out.push(b.bytes.clone());
        }
        Ok(taken)
    }

    /// The first offset whose batch has a timestamp at or after `ts`, and
    /// that timestamp (ListOffsets by time); `None` when there is none.
    pub fn offset_for_time(&self, ts: i64) -> Option<(i64, i64)> {
        self.batches.iter().find_map(|b| {
            let max_ts = i64::from_be_bytes(b.bytes[35..43].try_into().expect("a checked batch header"));
            (max_ts >= ts).then_some((b.base, max_ts))
        })
    }
}

/// Wakes long-polling fetches when anything is produced on this core. One
/// per core rather than per partition: a woken fetch re-checks its own
/// partitions, and a null broker has few fetchers.
#[derive(Default)]
pub struct Notify {
    generation: Cell<u64>,
    waiters: RefCell<Vec<Waker>>,
}

impl Notify {
    pub fn generation(&self) -> u64 {
        self.generation.get()
    }

    pub fn notify(&self) {
        self.generation.set(self.generation.get() + 1);
        let waiters = std::mem::take(&mut *self.waiters.borrow_mut());
        for w in waiters {
            w.wake();
        }
    }

    /// Completes once `notify` is called after `seen` was read.
    pub fn changed(&self, seen: u64) -> Changed<'_> {
        Changed { notify: self, seen }
    }
}

pub struct Changed<'a> {
    notify: &'a Notify,
    seen: u64,
}

impl Future for Changed<'_> {
    type Output = ();
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.notify.generation.get() != self.seen {
            return Poll::Ready(());
        }
        let mut waiters = self.notify.waiters.borrow_mut();
        if !waiters.iter().any(|w| w.will_wake(cx.waker())) {
            waiters.push(cx.waker().clone());
        }
        Poll::Pending
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn batch(n: usize) -> Bytes {
        Bytes::from(vec![0u8; n])
    }

    #[test]
    fn reads_from_the_batch_holding_the_offset_and_bounds_memory() {
        let mut t = Tail::new(4 << 20);
        let step = 1 << 20;
        for _ in 0..6 {
            let base = t.reserve(10);
            t.push(base, base + 9, batch(step));
        }
        // Four batches fit; the two oldest were dropped.
        assert_eq!((t.start, t.end), (20, 60));
        let mut out = Vec::new();
        let all = i64::MAX;
        assert_eq!(t.read(19, usize::MAX, all, &mut out), Err(codes::OFFSET_OUT_OF_RANGE));
        assert_eq!(t.read(61, usize::MAX, all, &mut out), Err(codes::OFFSET_OUT_OF_RANGE));
        assert_eq!(t.read(60, usize::MAX, all, &mut out), Ok(0));
        assert_eq!(t.read(35, step + 1, all, &mut out), Ok(step), "the batch holding 35, and no more");
        out.clear();
        assert_eq!(t.read(35, 1, all, &mut out), Ok(step), "the first batch even past max_bytes");
        out.clear();
        assert_eq!(t.read(20, usize::MAX, all, &mut out), Ok(4 * step));
        assert_eq!(out.len(), 4);
    }

    fn marker(producer_id: i64, commit: bool) -> bytes::BytesMut {
        let m =
            crate::protocol::record_batch::TxnMarker { producer_id, producer_epoch: 0, commit, coordinator_epoch: 0 };
        bytes::BytesMut::from(&crate::protocol::record_batch::encode_control_batch(&m, 0)[..])
    }

    #[test]
    fn transactions_hold_the_stable_offset_and_aborts_are_listed_until_they_leave() {
        let mut t = Tail::new(500);
        let data = |t: &mut Tail, producer: Option<i64>| {
            let base = t.reserve(2);
            if let Some(p) = producer {
                t.open_txn(p, base);
            }
            t.push(base, base + 1, batch(100));
            base
        };
        assert_eq!(data(&mut t, Some(7)), 0);
        assert_eq!(data(&mut t, None), 2);
        assert_eq!(data(&mut t, Some(8)), 4);
        assert_eq!(t.last_stable(), 0);
        let mut out = Vec::new();
        assert_eq!(t.read(0, usize::MAX, t.last_stable(), &mut out), Ok(0), "nothing below an open one");
        t.end_txn(7, true, marker(7, true)); // marker at 6
        assert_eq!((t.last_stable(), t.end), (4, 7), "8's transaction holds readers now");
        assert_eq!(t.read(0, usize::MAX, t.last_stable(), &mut out), Ok(200), "the two batches below 4");
        t.end_txn(8, false, marker(8, false)); // marker at 7
        assert_eq!(t.last_stable(), 8);
        assert_eq!(t.aborted_between(0, 8), vec![(8, 4)]);
        assert_eq!(t.aborted_between(8, 9), vec![], "past its marker");
        // The abort is listed until its marker leaves the tail.
        while t.start <= 7 {
            assert_eq!(t.aborted_between(t.start, t.end), vec![(8, 4)]);
            data(&mut t, None);
        }
        assert_eq!(t.aborted_between(0, t.end), vec![]);
    }
}
