//! What a run measured: histograms and counts, shared between the threads
//! that record them and the one that prints progress.

use std::{collections::BTreeMap, time::Instant};

use hdrhistogram::Histogram;

use super::{payload::Pending, Clock};

/// Latencies are recorded in microseconds, 1 µs to 1 hour, 3 significant
/// digits.
pub fn histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 3_600_000_000, 3).expect("valid histogram bounds")
}

pub fn record(h: &mut Histogram<u64>, micros: u64, count: u64) {
    h.saturating_record_n(micros.max(1), count);
}

/// Records of one produce connection (or one rdkafka producer).
#[derive(Debug)]
pub struct ProduceCounts {
    /// Intended send → acknowledgement, measured records only.
    pub latency: Histogram<u64>,
    /// Actual send → acknowledgement, measured records only.
    pub service: Histogram<u64>,
    /// Corrected latency of every record so far, warm-up included (progress).
    pub so_far: Histogram<u64>,
    /// `latency` split by the minute of the measured window each record's
    /// intended send time fell in: how the tail drifts over a long run.
    pub by_minute: Vec<Histogram<u64>>,
    /// How late the generator admitted each measured record after its
    /// intended time: the generator's own lateness, not the broker's.
    pub admit_lag: Histogram<u64>,
    /// Seconds senders spent in socket writes that took 1 ms or more: the
    /// broker was not reading them (TCP backpressure).
    pub write_blocked_s: f64,
    pub sent: u64,
    pub acked: u64,
    pub acked_bytes: u64,
    /// Acknowledged records whose intended time fell in the measured window.
    pub measured: u64,
    pub measured_bytes: u64,
    /// When the last measured record was acknowledged, seconds since the
    /// measured window opened.
    pub last_measured_ack: f64,
    /// Error code → records refused with it.
    pub errors: BTreeMap<i16, u64>,
    pub failures: Vec<String>,
    /// (stream, partition) → records acknowledged (sequence numbers 0..n).
    pub acked_by_stream: BTreeMap<(u32, i32), u64>,
    /// Native transactional runs: the commits, by phase.
    pub txn: CommitPhases,
}

/// A transactional run's commits, each phase's durations in
/// microseconds (the phases: native runs only).
#[derive(Debug, Clone)]
pub struct CommitPhases {
    pub commits: u64,
    /// Partitions the commits ended (each got a marker).
    pub partitions_ended: u64,
    /// Commit slot → EndTxn answered: the whole commit (librdkafka's
    /// runs: its commit_transaction, which flushes first; no phases).
    pub commit: Histogram<u64>,
    /// Commit slot → the transaction's last record answered.
    pub drain: Histogram<u64>,
    /// EndTxn sent → answered.
    pub end_txn: Histogram<u64>,
    /// AddPartitionsToTxn sent → answered: partitions joining a
    /// transaction before their first batch in it.
    pub add_partitions: Histogram<u64>,
}

impl Default for CommitPhases {
    fn default() -> Self {
        Self {
            commits: 0,
            partitions_ended: 0,
            commit: histogram(),
            drain: histogram(),
            end_txn: histogram(),
            add_partitions: histogram(),
        }
    }
}

impl CommitPhases {
    pub fn merge(&mut self, other: &CommitPhases) {
        self.commits += other.commits;
        self.partitions_ended += other.partitions_ended;
        for (mine, theirs) in [
            (&mut self.commit, &other.commit),
            (&mut self.drain, &other.drain),
            (&mut self.end_txn, &other.end_txn),
            (&mut self.add_partitions, &other.add_partitions),
        ] {
            mine.add(theirs).expect("same bounds");
        }
    }
}

impl Default for ProduceCounts {
    fn default() -> Self {
        Self {
            latency: histogram(),
            service: histogram(),
            so_far: histogram(),
            by_minute: Vec::new(),
            admit_lag: histogram(),
            write_blocked_s: 0.0,
            sent: 0,
            acked: 0,
            acked_bytes: 0,
            measured: 0,
            measured_bytes: 0,
            last_measured_ack: 0.0,
            errors: BTreeMap::new(),
            failures: Vec::new(),
            acked_by_stream: BTreeMap::new(),
            txn: CommitPhases::default(),
        }
    }
}

impl ProduceCounts {
    /// The histogram of minute `i` of the measured window.
    pub fn minute(&mut self, i: usize) -> &mut Histogram<u64> {
        while self.by_minute.len() <= i {
            self.by_minute.push(histogram());
        }
        &mut self.by_minute[i]
    }

    pub fn merge(&mut self, other: &ProduceCounts) {
        self.latency.add(&other.latency).expect("same bounds");
        self.service.add(&other.service).expect("same bounds");
        self.so_far.add(&other.so_far).expect("same bounds");
        for (i, h) in other.by_minute.iter().enumerate() {
            self.minute(i).add(h).expect("same bounds");
        }
        self.admit_lag.add(&other.admit_lag).expect("same bounds");
        self.write_blocked_s += other.write_blocked_s;
        self.sent += other.sent;
        self.acked += other.acked;
        self.acked_bytes += other.acked_bytes;
        self.measured += other.measured;
        self.measured_bytes += other.measured_bytes;
        self.last_measured_ack = self.last_measured_ack.max(other.last_measured_ack);
        for (code, n) in &other.errors {
            *self.errors.entry(*code).or_default() += n;
        }
        self.failures.extend(other.failures.iter().cloned());
        for (k, n) in &other.acked_by_stream {
            *self.acked_by_stream.entry(*k).or_default() += n;
        }
        self.txn.merge(&other.txn);
    }
}

/// What consumers saw, checked record by record.
#[derive(Debug)]
pub struct ConsumeCounts {
    /// Intended send → receipt (e2e), measured records only.
    pub latency: Histogram<u64>,
    /// Fetch request → response.
    pub fetch: Histogram<u64>,
    pub so_far: Histogram<u64>,
    pub received: u64,
    pub received_bytes: u64,
    pub measured: u64,
    pub measured_bytes: u64,
    pub duplicated: u64,
    pub reordered: u64,
    /// Records without this run's stamp (other writers, earlier runs).
    pub foreign: u64,
    pub failures: Vec<String>,
    /// (stream, partition) → what arrived.
    pub streams: BTreeMap<(u32, i32), Arrivals>,
}

impl Default for ConsumeCounts {
    fn default() -> Self {
        Self {
            latency: histogram(),
            fetch: histogram(),
            so_far: histogram(),
            received: 0,
            received_bytes: 0,
            measured: 0,
            measured_bytes: 0,
            duplicated: 0,
            reordered: 0,
            foreign: 0,
            failures: Vec::new(),
            streams: BTreeMap::new(),
        }
    }
}

impl ConsumeCounts {
    pub fn merge(&mut self, c: &ConsumeCounts) {
        self.latency.add(&c.latency).expect("same bounds");
        self.fetch.add(&c.fetch).expect("same bounds");
        self.so_far.add(&c.so_far).expect("same bounds");
        self.received += c.received;
        self.received_bytes += c.received_bytes;
        self.measured += c.measured;
        self.measured_bytes += c.measured_bytes;
        self.duplicated += c.duplicated;
        self.reordered += c.reordered;
        self.foreign += c.foreign;
        self.failures.extend(c.failures.iter().cloned());
        for (k, a) in &c.streams {
            self.streams.insert(*k, a.clone());
        }
    }
}

/// The sequence numbers seen from one (stream, partition): everything
/// below `next` except `missing`.
#[derive(Debug, Default, Clone)]
pub struct Arrivals {
    pub next: u64,
    pub missing: std::collections::BTreeSet<u64>,
}

/// What a sequence number turned out to be.
#[derive(Debug, PartialEq, Eq)]
pub enum Arrival {
    InOrder,
    /// Ahead of the next expected: the ones between are missing so far.
    Early,
    /// A missing one, late.
    Late,
    Duplicate,
}

impl Arrivals {
    /// Gaps longer than this are not tracked one by one; the records in them
    /// count as lost unless they arrive in the tracked part.
    const MAX_TRACKED_GAP: u64 = 1 << 20;

    pub fn see(&mut self, seq: u64) -> Arrival {
        if seq == self.next {
            self.next += 1;
            Arrival::InOrder
        } else if seq > self.next {
            let from = self.next.max(seq.saturating_sub(Self::MAX_TRACKED_GAP));
            self.missing.extend(from..seq);
            self.next = seq + 1;
            Arrival::Early
        } else if self.missing.remove(&seq) {
            Arrival::Late
        } else {
            Arrival::Duplicate
        }
    }

    /// How many of the sequence numbers `0..n` were seen.
    pub fn seen_below(&self, n: u64) -> u64 {
        n.min(self.next) - self.missing.range(..n).count() as u64
    }
}

/// Counts `records` (one batch of partition `p`, values of `record_size`
/// bytes) as acknowledged at `at`, sent at `sent`.
#[allow(clippy::too_many_arguments)]
pub fn acknowledge(
    c: &mut ProduceCounts,
    clock: Clock,
    stream: u32,
    p: i32,
    records: &[Pending],
    record_size: usize,
    sent: Instant,
    at: Instant,
) {
    let per_record = record_size;
    let service = (at - sent).as_micros() as u64;
    let mut measured = 0u64;
    for r in records {
        let latency = at.saturating_duration_since(r.intended).as_micros() as u64;
        record(&mut c.so_far, latency, 1);
        if r.intended >= clock.measure_from {
            record(&mut c.latency, latency, 1);
            let minute = (r.intended - clock.measure_from).as_secs() / 60;
            record(c.minute(minute as usize), latency, 1);
            measured += 1;
        }
    }
    if measured > 0 {
        record(&mut c.service, service, measured);
        c.measured += measured;
        c.measured_bytes += measured * per_record as u64;
        c.last_measured_ack = c.last_measured_ack.max((at - clock.measure_from).as_secs_f64());
    }
    c.acked += records.len() as u64;
    c.acked_bytes += (records.len() * record_size) as u64;
    *c.acked_by_stream.entry((stream, p)).or_default() += records.len() as u64;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arrivals_tell_order_gaps_late_and_duplicates_apart() {
        let mut a = Arrivals::default();
        assert_eq!(a.see(0), Arrival::InOrder);
        assert_eq!(a.see(1), Arrival::InOrder);
        assert_eq!(a.see(4), Arrival::Early);
        assert_eq!(a.seen_below(5), 3);
        assert_eq!(a.see(2), Arrival::Late);
        assert_eq!(a.see(2), Arrival::Duplicate);
        assert_eq!(a.see(1), Arrival::Duplicate);
        assert_eq!(a.seen_below(5), 4);
        assert_eq!(a.seen_below(3), 3);
        assert_eq!(a.seen_below(10), 4);
    }
}
