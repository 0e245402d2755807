//! The consuming side: one fetching task per partition leader, on the
//! first load core's event loop (`engine`), reading every partition from a
//! start offset, timing each record from its
//! intended send time (end to end) and checking that every record arrives
//! once and in order.

use std::{
    collections::BTreeMap,
    sync::{
        atomic::{AtomicBool, AtomicUsize, Ordering},
        Arc, Mutex,
    },
    time::{Duration, Instant},
};

use kafka_protocol::{
    messages::{
        fetch_request::{FetchPartition, FetchTopic},
        ApiKey, BrokerId, FetchRequest, FetchResponse, TopicName,
    },
    protocol::StrBytes,
};

use super::{
    cluster::{Layout, CLIENT_ID},
    engine::Job,
    measure::{record, Arrival, ConsumeCounts},
    payload::Stamp,
    Clock,
};
use crate::{
    client::{
        self,
        nonblocking::{self, AsyncStream},
    },
    protocol::{
        client::{request_frame, Response},
        record_batch::{read_records, BatchHeader, ATTR_CONTROL, ATTR_TRANSACTIONAL},
    },
};

/// How records are checked.
#[derive(Debug, Clone, Copy)]
pub enum Check {
    /// e2e: this run's stamps, per (stream, partition) sequence numbers.
    Stamps { run: u32 },
    /// consume: offsets, each once and in order, up to the end offsets.
    Offsets,
}

/// The fetch requests' shape.
#[derive(Debug, Clone, Copy)]
pub struct Shape {
    pub partition_max_bytes: i32,
    /// read_committed: records up to the last stable offset, without
    /// aborted transactions' records or transaction markers.
    pub read_committed: bool,
}

/// What the progress line and the final tally read of one fetcher. The
/// locks are the load generator's (client side): taken by the fetcher on
/// its load core and by the main thread once a second, never across I/O.
pub struct Reader {
    pub addr: String,
    pub counts: Mutex<ConsumeCounts>,
    positions: Mutex<BTreeMap<i32, i64>>,
}

pub struct ConsumeRun {
    pub readers: Vec<Arc<Reader>>,
    /// Fetchers still running; each counts itself out when it ends.
    left: Arc<AtomicUsize>,
    stop: Arc<AtomicBool>,
    end: Option<BTreeMap<i32, i64>>,
}

impl ConsumeRun {
    pub fn counts(&self) -> ConsumeCounts {
        let mut total = ConsumeCounts::default();
        for r in &self.readers {
            total.merge(&r.counts.lock().expect("counts lock"));
        }
        total
    }

    /// For `consume`: every partition read up to its end offset.
    pub fn caught_up(&self) -> bool {
        let Some(end) = &self.end else { return false };
        self.readers.iter().all(|r| {
            r.positions.lock().expect("positions lock").iter().all(|(p, pos)| *pos >= end.get(p).copied().unwrap_or(0))
        })
    }

    pub fn failed(&self) -> bool {
        self.readers.iter().any(|r| !r.counts.lock().expect("counts lock").failures.is_empty())
    }

    pub fn is_finished(&self) -> bool {
        self.left.load(Ordering::SeqCst) == 0
    }

    /// Stops the fetchers (each ends after its current long poll) and
    /// returns what they saw.
    pub fn stop(self) -> ConsumeCounts {
        self.stop.store(true, Ordering::SeqCst);
        let deadline = Instant::now() + STOP_WAIT;
        while !self.is_finished() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
        let mut total = ConsumeCounts::default();
        for r in &self.readers {
            total.merge(&r.counts.lock().expect("counts lock"));
        }
        total
    }
}

/// A fetcher ends within one long poll of being told to stop; this bounds
/// the wait for one whose broker stopped answering.
const STOP_WAIT: Duration = Duration::from_secs(5);

/// The fetch long poll: short, so a stop is seen quickly.
const FETCH_MAX_WAIT_MS: i32 = 100;

/// Counts a fetcher out of `left` when it is dropped.
struct FetcherAlive(Arc<AtomicUsize>);

impl Drop for FetcherAlive {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Connects to every leader and returns the run with one job per leader
/// for a load core (`engine::start`), reading `topic` from `start`
/// (partition → offset), up to `end` when given.
pub fn plan(
    topic: &str,
    layout: &Layout,
    start: BTreeMap<i32, i64>,
    end: Option<BTreeMap<i32, i64>>,
    check: Check,
    shape: Shape,
    clock: Clock,
) -> Result<(ConsumeRun, Vec<Job>), String> {
    let stop = Arc::new(AtomicBool::new(false));
    let leaders = layout.by_leader();
    let left = Arc::new(AtomicUsize::new(leaders.len()));
    let mut readers = Vec::new();
    let mut jobs: Vec<Job> = Vec::new();
    for (addr, partitions) in leaders {
        let stream = client::tls::open(&addr)?;
        let positions: BTreeMap<i32, i64> =
            partitions.iter().map(|p| (*p, start.get(p).copied().unwrap_or(0))).collect();
        let reader = Arc::new(Reader {
            addr: addr.clone(),
            counts: Mutex::new(ConsumeCounts::default()),
            positions: Mutex::new(positions),
        });
        readers.push(reader.clone());
        let (topic, version, stop, end) = (topic.to_string(), layout.versions.fetch, stop.clone(), end.clone());
        let alive = FetcherAlive(left.clone());
        jobs.push(Box::new(move || {
            Box::pin(async move {
                let _alive = alive;
                let stream = match nonblocking::into_async(stream) {
                    Ok(s) => s,
                    Err(e) => {
                        reader.counts.lock().expect("counts lock").failures.push(format!("{}: {e}", reader.addr));
                        return;
                    }
                };
                let fetcher = Fetcher {
                    reader,
                    stream,
                    topic: TopicName(StrBytes::from_string(topic)),
                    version,
                    check,
                    shape,
                    clock,
                    stop,
                    end,
                    last_offset: BTreeMap::new(),
                };
                fetcher.run().await
            })
        }));
    }
    Ok((ConsumeRun { readers, left, stop, end }, jobs))
}

struct Fetcher {
    reader: Arc<Reader>,
    stream: AsyncStream,
    topic: TopicName,
    version: i16,
    check: Check,
    shape: Shape,
    clock: Clock,
    stop: Arc<AtomicBool>,
    end: Option<BTreeMap<i32, i64>>,
    /// Offsets check: the last offset seen per partition.
    last_offset: BTreeMap<i32, i64>,
}

impl Fetcher {
    async fn run(mut self) {
        if let Err(e) = self.run_inner().await {
            self.reader.counts.lock().expect("counts lock").failures.push(format!("{}: {e}", self.reader.addr));
        }
    }

    async fn run_inner(&mut self) -> Result<(), String> {
        let mut correlation = 0i32;
        while !self.stop.load(Ordering::SeqCst) {
            let positions = self.reader.positions.lock().expect("positions lock").clone();
            let wanted: Vec<(i32, i64)> = positions
                .iter()
                .filter(|(p, pos)| self.end.as_ref().is_none_or(|e| **pos < e.get(p).copied().unwrap_or(0)))
                .map(|(p, pos)| (*p, *pos))
                .collect();
            if wanted.is_empty() {
                return Ok(()); // read to the end
            }
            let mut topic = FetchTopic::default();
            topic.topic = self.topic.clone();
            topic.partitions = wanted
                .iter()
                .map(|&(p, offset)| {
                    let mut fp = FetchPartition::default();
                    fp.partition = p;
                    fp.fetch_offset = offset;
                    fp.partition_max_bytes = self.shape.partition_max_bytes;
                    fp.current_leader_epoch = -1;
                    fp.log_start_offset = -1;
                    fp
                })
                .collect();
            let mut req = FetchRequest::default();
            req.replica_id = BrokerId(-1);
            req.max_wait_ms = FETCH_MAX_WAIT_MS;
            req.min_bytes = 1;
            req.max_bytes = 50 << 20;
            req.session_epoch = -1;
            req.isolation_level = i8::from(self.shape.read_committed);
            req.topics = vec![topic];
            correlation = correlation.wrapping_add(1);
            let frame = request_frame(ApiKey::Fetch, self.version, correlation, Some(CLIENT_ID), &req)
                .map_err(|e| e.to_string())?;
            let asked = Instant::now();
            nonblocking::write_frame(&mut self.stream, ApiKey::Fetch, self.version, &frame).await?;
            let Response { correlation_id: got, body: resp, .. } =
                nonblocking::read_response::<FetchResponse>(&mut self.stream, ApiKey::Fetch, self.version).await?;
            let at = Instant::now();
            if got != correlation {
                return Err(format!("fetch answer {got} where {correlation} was due"));
            }
            if resp.error_code != 0 {
                return Err(format!("fetch failed with error {}", resp.error_code));
            }
            let now_ns = self.clock.wall_ns(at);
            let mut advanced = Vec::new();
            {
                let reader = self.reader.clone();
                let mut c = reader.counts.lock().expect("counts lock");
                record(&mut c.fetch, (at - asked).as_micros() as u64, 1);
                for t in &resp.responses {
                    for p in &t.partitions {
                        let from = positions.get(&p.partition_index).copied().unwrap_or(0);
                        if p.error_code != 0 {
                            return Err(fetch_error(self.topic.0.as_str(), p.partition_index, from, p.error_code));
                        }
                        let records = p.records.as_deref().unwrap_or(&[]);
                        let aborted: Vec<(i64, i64)> = p
                            .aborted_transactions
                            .iter()
                            .flatten()
                            .map(|a| (a.first_offset, a.producer_id.0))
                            .collect();
                        let next = self.take(&mut c, p.partition_index, from, (records, aborted), now_ns)?;
                        if next > from {
                            advanced.push((p.partition_index, next));
                        }
                    }
                }
            }
            let mut positions = self.reader.positions.lock().expect("positions lock");
            for (p, next) in advanced {
                positions.insert(p, next);
            }
        }
        Ok(())
    }

    /// Checks and times the records of one partition's fetched bytes (and,
    /// read_committed, the aborted transactions listed with them: (first
    /// offset, producer id)); returns the next offset to fetch.
    fn take(
        &mut self,
        c: &mut ConsumeCounts,
        partition: i32,
        from: i64,
        (mut bytes, aborted): (&[u8], Vec<(i64, i64)>),
        now_ns: i64,
    ) -> Result<i64, String> {
        let mut filter = AbortFilter::new(aborted, self.shape.read_committed);
        let mut next = from;
        let where_ = |offset: i64| format!("{}-{partition} at offset {offset}", self.topic.0.as_str());
        while bytes.len() >= crate::protocol::record_batch::HEADER_BYTES {
            let Ok(h) = BatchHeader::parse(bytes, usize::MAX) else { break };
            if h.total_bytes() > bytes.len() {
                break; // cut short by max bytes: fetch it whole next time
            }
            let batch = &bytes[..h.total_bytes()];
            bytes = &bytes[h.total_bytes()..];
            if h.last_offset() < next {
                continue;
            }
            if matches!(self.check, Check::Stamps { .. }) && filter.skips(&h) {
                next = h.last_offset() + 1;
                continue;
            }
            let records = read_records(batch).map_err(|e| format!("{}: {e}", where_(h.base_offset)))?;
            for r in records {
                if r.offset < next {
                    continue;
                }
                let size = r.value.map_or(0, <[u8]>::len) as u64;
                c.received += 1;
                c.received_bytes += size;
                match self.check {
                    Check::Offsets => {
                        let last = self.last_offset.insert(partition, r.offset);
                        if last.is_some_and(|l| r.offset <= l) {
                            c.duplicated += 1;
                        }
                        c.measured += 1;
                        c.measured_bytes += size;
                    }
                    Check::Stamps { run } => match r.value.and_then(Stamp::read) {
                        Some(s) if s.run == run => {
                            match c.streams.entry((s.stream, partition)).or_default().see(s.seq) {
                                Arrival::InOrder => {}
                                Arrival::Early | Arrival::Late => c.reordered += 1,
                                Arrival::Duplicate => c.duplicated += 1,
                            }
                            let latency = ((now_ns - s.intended_ns).max(0) / 1000) as u64;
                            record(&mut c.so_far, latency, 1);
                            if s.intended_ns >= self.clock.measure_from_ns() {
                                record(&mut c.latency, latency, 1);
                                c.measured += 1;
                                c.measured_bytes += size;
                            }
                        }
                        _ => c.foreign += 1,
                    },
                }
            }
            next = h.last_offset() + 1;
        }
        Ok(next)
    }
}

/// Which fetched batches hold no record of the producer's, end to end: a
/// transaction marker, or (read_committed) a batch of an aborted
/// transaction, from its first offset on until its abort marker, as
/// Kafka's clients filter with the fetch's aborted list.
struct AbortFilter {
    /// The fetch's aborted transactions not yet reached: (first offset,
    /// producer id), in offset order.
    listed: std::iter::Peekable<std::vec::IntoIter<(i64, i64)>>,
    /// Producers whose aborted transaction is being read.
    aborting: std::collections::BTreeSet<i64>,
    read_committed: bool,
}

impl AbortFilter {
    fn new(mut aborted: Vec<(i64, i64)>, read_committed: bool) -> Self {
        aborted.sort_unstable();
        Self { listed: aborted.into_iter().peekable(), aborting: Default::default(), read_committed }
    }

    /// Batches must come in offset order.
    fn skips(&mut self, h: &BatchHeader) -> bool {
        while let Some((_, producer)) = self.listed.next_if(|(first, _)| *first <= h.base_offset) {
            self.aborting.insert(producer);
        }
        let transactional = h.attributes & ATTR_TRANSACTIONAL != 0;
        if h.attributes & ATTR_CONTROL != 0 {
            if transactional {
                self.aborting.remove(&h.producer_id);
            }
            return true;
        }
        self.read_committed && transactional && self.aborting.contains(&h.producer_id)
    }
}

/// Why a partition's fetch failed, for the run's verdict. Falling behind
/// the log start is named: the records were dropped (retention, or the
/// null broker's `--tail-bytes`) before the reader got to them.
fn fetch_error(topic: &str, partition: i32, offset: i64, code: i16) -> String {
    if code == crate::protocol::errors::OFFSET_OUT_OF_RANGE {
        format!(
            "fetch {topic}-{partition} at offset {offset}: OFFSET_OUT_OF_RANGE (error 1): the reader fell behind the \
             broker's log start, which dropped records before they were read (retention, or the null broker's \
             --tail-bytes)"
        )
    } else {
        format!("fetch {topic}-{partition} at offset {offset}: error {code}")
    }
}

#[cfg(test)]
mod tests {
    use super::{fetch_error, AbortFilter, BatchHeader, ATTR_CONTROL, ATTR_TRANSACTIONAL};

    fn batch(base_offset: i64, producer_id: i64, attributes: i16) -> BatchHeader {
        BatchHeader {
            base_offset,
            batch_length: 0,
            leader_epoch: 0,
            magic: 2,
            crc: 0,
            attributes,
            last_offset_delta: 0,
            base_timestamp: 0,
            max_timestamp: 0,
            producer_id,
            producer_epoch: 0,
            base_sequence: 0,
            records_count: 1,
        }
    }

    #[test]
    fn read_committed_skips_an_aborted_transaction_from_its_first_offset_to_its_marker() {
        const TXN: i16 = ATTR_TRANSACTIONAL;
        const MARKER: i16 = ATTR_TRANSACTIONAL | ATTR_CONTROL;
        // Producer 7's transaction from offset 10 was aborted (its marker at
        // 13); producer 8's interleaved one was committed (marker at 14).
        let log = [
            (5, 7, TXN, false),    // an earlier transaction of 7, committed
            (6, 7, MARKER, true),  // its commit marker
            (10, 7, TXN, true),    // the aborted transaction
            (11, 8, TXN, false),   // another producer, committed
            (12, 7, TXN, true),    // still aborted
            (13, 7, MARKER, true), // the abort marker ends it
            (14, 8, MARKER, true), // 8's commit marker
            (15, 7, TXN, false),   // 7's next transaction
            (16, -1, 0, false),    // a plain batch
        ];
        let mut filter = AbortFilter::new(vec![(10, 7)], true);
        for (offset, producer, attributes, skipped) in log {
            assert_eq!(filter.skips(&batch(offset, producer, attributes)), skipped, "offset {offset}");
        }
        // read_uncommitted keeps the aborted records; markers never hold any.
        let mut filter = AbortFilter::new(vec![(10, 7)], false);
        let kept: Vec<i64> =
            log.iter().filter(|(o, p, a, _)| !filter.skips(&batch(*o, *p, *a))).map(|(o, ..)| *o).collect();
        assert_eq!(kept, [5, 10, 11, 12, 15, 16]);
    }

    #[test]
    fn a_fetch_error_names_the_partition_offset_and_what_out_of_range_means() {
        let behind = fetch_error("e2e", 3, 4096, crate::protocol::errors::OFFSET_OUT_OF_RANGE);
        assert!(behind.contains("e2e-3 at offset 4096"), "{behind}");
        assert!(behind.contains("OFFSET_OUT_OF_RANGE") && behind.contains("fell behind"), "{behind}");
        let other = fetch_error("e2e", 0, 7, 6);
        assert_eq!(other, "fetch e2e-0 at offset 7: error 6");
    }
}
