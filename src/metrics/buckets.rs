//! Fixed-bucket histograms for metrics: one shard's, plain `Cell`s, no
//! locks. Scraping takes a `Send` snapshot by message passing.

use std::cell::Cell;

/// Request and fsync latencies, seconds: 50 µs to 10 s.
pub const LATENCY_SECONDS: &[f64] =
    &[0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 10.0];

/// Appends covered by one fdatasync (group commit).
pub const BATCH_SIZES: &[f64] = &[1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0, 1024.0];

/// The bucket `v` falls in: the first bound at or above it, else +Inf
/// (index `bounds.len()`).
pub fn bucket_index(bounds: &[f64], v: f64) -> usize {
    bounds.iter().position(|b| v <= *b).unwrap_or(bounds.len())
}

#[derive(Debug)]
pub struct Buckets {
    bounds: &'static [f64],
    /// Per bucket (not cumulative); the last one is +Inf.
    counts: Vec<Cell<u64>>,
    sum: Cell<f64>,
}

impl Buckets {
    pub fn new(bounds: &'static [f64]) -> Self {
        Self { bounds, counts: (0..=bounds.len()).map(|_| Cell::new(0)).collect(), sum: Cell::new(0.0) }
    }

    pub fn observe(&self, v: f64) {
        let i = bucket_index(self.bounds, v);
        self.counts[i].set(self.counts[i].get() + 1);
        self.sum.set(self.sum.get() + v);
    }

    pub fn snapshot(&self) -> BucketSnapshot {
        let buckets: Vec<(f64, u64)> = self
            .counts
            .iter()
            .enumerate()
            .map(|(i, c)| (self.bounds.get(i).copied().unwrap_or(f64::MAX), c.get()))
            .collect();
        BucketSnapshot { sum: self.sum.get(), count: buckets.iter().map(|b| b.1).sum(), buckets }
    }
}

impl Default for Buckets {
    /// A latency histogram (`LATENCY_SECONDS`).
    fn default() -> Self {
        Self::new(LATENCY_SECONDS)
    }
}

/// A histogram's state: the count in each bucket (not cumulative; the
/// encoder accumulates) by upper bound, the last being `f64::MAX`, which
/// the encoder writes as +Inf.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct BucketSnapshot {
    pub sum: f64,
    pub count: u64,
    pub buckets: Vec<(f64, u64)>,
}

impl BucketSnapshot {
    /// Adds another snapshot with the same bounds.
    pub fn merge(&mut self, other: &BucketSnapshot) {
        if self.buckets.is_empty() {
            *self = other.clone();
            return;
        }
        self.sum += other.sum;
        self.count += other.count;
        for (a, b) in self.buckets.iter_mut().zip(&other.buckets) {
            a.1 += b.1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_count_per_bound_with_an_infinite_last_one() {
        let b = Buckets::new(&[1.0, 10.0]);
        for v in [0.5, 1.0, 5.0, 50.0] {
            b.observe(v);
        }
        let s = b.snapshot();
        assert_eq!(s.count, 4);
        assert_eq!(s.sum, 56.5);
        assert_eq!(s.buckets, vec![(1.0, 2), (10.0, 1), (f64::MAX, 1)]);
        let mut m = s.clone();
        m.merge(&s);
        assert_eq!(m.buckets[2], (f64::MAX, 2));
        assert_eq!(m.count, 8);
    }
}
