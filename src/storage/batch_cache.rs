//! Recent batches of one partition, kept as the very `Bytes` that were
//! appended, so tail fetches are served without touching the disk, without
//! copying and without decoding.

use std::collections::VecDeque;

use bytes::Bytes;

#[derive(Debug, Clone)]
pub struct CachedBatch {
    pub base_offset: i64,
    pub last_offset: i64,
    pub bytes: Bytes,
}

/// A FIFO of the newest batches, bounded in bytes. Batches are contiguous
/// in offset order: the cache always covers `[first base, log end)`.
#[derive(Debug, Default)]
pub struct BatchCache {
    batches: VecDeque<CachedBatch>,
    bytes: usize,
    bytes_max: usize,
}

impl BatchCache {
    pub fn new(bytes_max: usize) -> Self {
        Self { batches: VecDeque::new(), bytes: 0, bytes_max }
    }

    /// Adds the newest batch and evicts the oldest past the byte budget. The
    /// newest batch always stays, so the cache is never useless for a
    /// consumer at the tail.
    pub fn push(&mut self, batch: CachedBatch) {
        debug_assert!(self.batches.back().is_none_or(|b| b.last_offset < batch.base_offset));
        self.bytes += batch.bytes.len();
        self.batches.push_back(batch);
        while self.bytes > self.bytes_max && self.batches.len() > 1 {
            let old = self.batches.pop_front().expect("len > 1");
            self.bytes -= old.bytes.len();
        }
    }

    /// Whole batches starting with the one that contains `offset`, up to
    /// `max_bytes` (the first batch is returned even if larger). `None` when
    /// `offset` is older than the cache, so the caller must read the disk.
    pub fn read(&self, offset: i64, max_bytes: usize) -> Option<Vec<Bytes>> {
        let first = self.batches.front()?;
        if offset < first.base_offset {
            return None;
        }
        let start = self.batches.partition_point(|b| b.last_offset < offset);
        let mut out = Vec::new();
        let mut taken = 0usize;
        for b in self.batches.range(start..) {
            if !out.is_empty() && taken + b.bytes.len() > max_bytes {
                break;
            }
            taken += b.bytes.len();
            out.push(b.bytes.clone());
        }
        Some(out)
    }

    /// Forgets everything (after truncation or a failed write).
    pub fn clear(&mut self) {
        self.batches.clear();
        self.bytes = 0;
    }

    /// Drops batches wholly below `log_start` (after retention).
    pub fn trim_before(&mut self, log_start: i64) {
        while self.batches.front().is_some_and(|b| b.last_offset < log_start) {
            let old = self.batches.pop_front().expect("front exists");
            self.bytes -= old.bytes.len();
        }
    }

    pub fn bytes(&self) -> usize {
        self.bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn batch(base: i64, count: i64, len: usize) -> CachedBatch {
        CachedBatch { base_offset: base, last_offset: base + count - 1, bytes: Bytes::from(vec![base as u8; len]) }
    }

    #[test]
    fn serves_from_containing_batch_within_budget() {
        let mut c = BatchCache::new(1000);
        c.push(batch(0, 5, 100));
        c.push(batch(5, 5, 100));
        c.push(batch(10, 5, 100));
        let got = c.read(7, 150).unwrap();
        assert_eq!(got.len(), 1);
        assert_eq!(got[0][0], 5);
        let got = c.read(7, 200).unwrap();
        assert_eq!(got.len(), 2);
        assert_eq!(c.read(15, 100).unwrap().len(), 0);
        assert_eq!(c.read(0, 1).unwrap().len(), 1, "first batch always returned");
    }

    #[test]
    fn evicts_oldest_and_reports_miss() {
        let mut c = BatchCache::new(250);
        for i in 0..5 {
            c.push(batch(i * 10, 10, 100));
        }
        assert_eq!(c.bytes(), 200);
        assert!(c.read(5, 1000).is_none());
        assert_eq!(c.read(30, 1000).unwrap().len(), 2);
        c.trim_before(41);
        assert!(c.read(30, 1000).is_none());
    }
}
