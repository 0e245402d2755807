//! When each record is meant to be sent: the open-loop schedule.
//!
//! Intended send times are fixed before the run from the requested rate
//! alone (evenly spaced, or a Poisson process), never from when the broker
//! last answered. Latency is measured from these times, so a broker that
//! stalls is charged for every record that should have gone out during the
//! stall — the correction for coordinated omission.

use std::time::{Duration, Instant};

/// A deterministic 64-bit generator (SplitMix64): reproducible Poisson
/// gaps and filler bytes without a dependency.
#[derive(Debug, Clone)]
pub struct SplitMix(u64);

impl SplitMix {
    pub fn new(seed: u64) -> Self {
        Self(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in (0, 1].
    pub fn unit(&mut self) -> f64 {
        ((self.next_u64() >> 11) as f64 + 1.0) / (1u64 << 53) as f64
    }
}

/// The intended send times of one sender: `rate` records a second from
/// `start` for `length`, starting `phase` into the first gap.
#[derive(Debug, Clone)]
pub struct Schedule {
    start: Instant,
    mean_gap_ns: f64,
    poisson: Option<SplitMix>,
    next_ns: f64,
    end_ns: f64,
}

impl Schedule {
    /// `rate` must be positive; `phase` spreads several senders' uniform
    /// schedules so their sum stays evenly spaced.
    pub fn new(start: Instant, rate: f64, length: Duration, phase: f64, poisson_seed: Option<u64>) -> Self {
        assert!(rate > 0.0, "an open-loop schedule needs a positive rate");
        let mean_gap_ns = 1e9 / rate;
        let mut poisson = poisson_seed.map(SplitMix::new);
        let next_ns = match &mut poisson {
            Some(rng) => -rng.unit().ln() * mean_gap_ns,
            None => phase * mean_gap_ns,
        };
        Self { start, mean_gap_ns, poisson, next_ns, end_ns: length.as_nanos() as f64 }
    }

    /// The next intended time without consuming it; `None` once the run's
    /// length is over.
    pub fn peek(&self) -> Option<Instant> {
        (self.next_ns < self.end_ns).then(|| self.start + Duration::from_nanos(self.next_ns as u64))
    }

    pub fn advance(&mut self) {
        self.next_ns += match &mut self.poisson {
            Some(rng) => -rng.unit().ln() * self.mean_gap_ns,
            None => self.mean_gap_ns,
        };
    }

    /// How many intended times fall in the whole run (for progress).
    pub fn expected_count(&self) -> u64 {
        (self.end_ns / self.mean_gap_ns) as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn times(mut s: Schedule) -> Vec<u64> {
        let start = s.start;
        let mut out = Vec::new();
        while let Some(t) = s.peek() {
            out.push((t - start).as_nanos() as u64);
            s.advance();
        }
        out
    }

    #[test]
    fn uniform_schedule_is_evenly_spaced_and_ends_on_time() {
        let t = times(Schedule::new(Instant::now(), 1000.0, Duration::from_secs(2), 0.5, None));
        assert_eq!(t.len(), 2000);
        assert_eq!(t[0], 500_000);
        assert!(t.windows(2).all(|w| w[1] - w[0] >= 999_999 && w[1] - w[0] <= 1_000_001));
        assert!(*t.last().unwrap() < 2_000_000_000);
    }

    #[test]
    fn poisson_schedule_has_the_requested_mean_rate_and_varied_gaps() {
        let t = times(Schedule::new(Instant::now(), 10_000.0, Duration::from_secs(10), 0.0, Some(7)));
        let n = t.len() as f64;
        assert!((n - 100_000.0).abs() < 1500.0, "{n} arrivals for a mean of 100000");
        let gaps: Vec<u64> = t.windows(2).map(|w| w[1] - w[0]).collect();
        let short = gaps.iter().filter(|&&g| g < 10_000).count() as f64 / gaps.len() as f64;
        // P(gap < mean/10) = 1 - e^-0.1 ≈ 0.095 for exponential gaps.
        assert!((short - 0.095).abs() < 0.01, "{short} of gaps under a tenth of the mean");
    }
}
