//! The native load generator: open-loop senders writing pre-built batches
//! over pipelined connections, and one receiver per connection timing the
//! acknowledgements.
//!
//! Each sender thread owns a share of the rate and a set of connections
//! (`--connections` per partition leader). It admits records at their
//! intended times, groups each partition's due records into a batch (up to
//! `--batch-bytes`, waiting at most `--linger`), and sends one Produce
//! request per connection holding every ready partition's batch, with at
//! most `--max-in-flight` unanswered requests per connection. Records due
//! while a connection is full wait in memory — and their wait counts in
//! their latency.

use std::{
    collections::VecDeque,
    net::TcpStream,
    sync::{
        atomic::{AtomicBool, AtomicUsize, Ordering},
        Arc, Condvar, Mutex,
    },
    time::{Duration, Instant},
};

use bytes::Bytes;
use kafka_protocol::{
    messages::{
        produce_request::{PartitionProduceData, TopicProduceData},
        ApiKey, ProduceRequest, ProduceResponse, TopicName,
    },
    protocol::StrBytes,
};

use super::{
    cluster::{self, Layout},
    measure::{record, ProduceCounts},
    payload::{key_text, partition_for_key, BatchBuilder, Pending},
    schedule::Schedule,
    Clock, Workload,
};

/// Records waiting for admission beyond this many mean the broker is far
/// behind; the run stops and is reported as failed rather than eat memory.
const BACKLOG_LIMIT: usize = 20_000_000;

/// One connection to a partition leader.
///
/// Locks here are the load generator's, a client: each is shared by exactly
/// two threads (a connection's sender and its receiver, plus the progress
/// line once a second), held for a few field updates, never across I/O. The
/// broker's data path (src/server, src/shard, src/storage) takes none.
pub struct Lane {
    pub addr: String,
    /// The sender this connection belongs to (the stamp's stream id).
    stream: u32,
    /// Value bytes per record (throughput counts payload, not framing).
    record_size: usize,
    partitions: Vec<i32>,
    /// Client side, off any broker path: written by this connection's
    /// receiver (or sender for acks=0), read once a second for progress.
    pub counts: Mutex<ProduceCounts>,
    /// Client side: the sender pushes a request before writing it, the
    /// receiver pops it when its answer arrives (answers come in order).
    queue: Mutex<VecDeque<InFlight>>,
    in_flight: AtomicUsize,
    broken: AtomicBool,
    done: AtomicBool,
}

/// One partition's records in a request: (partition, records, bytes).
type Batch = (i32, Vec<Pending>, usize);

struct InFlight {
    correlation: i32,
    sent: Instant,
    batches: Vec<Batch>,
}

/// Wakes a sender when one of its connections frees a slot (a condition
/// variable: the sender sleeps between intended send times, the receivers
/// wake it early when an answer frees room).
#[derive(Default)]
struct Wake {
    /// Client side: guards only the wake-up counter the condvar waits on.
    generation: Mutex<u64>,
    cv: Condvar,
}

impl Wake {
    fn notify(&self) {
        *self.generation.lock().expect("wake lock") += 1;
        self.cv.notify_all();
    }

    fn generation(&self) -> u64 {
        *self.generation.lock().expect("wake lock")
    }

    /// Sleeps until `deadline` or a notification after `seen`.
    fn wait(&self, seen: u64, deadline: Option<Instant>) {
        let now = Instant::now();
        let timeout = match deadline {
            Some(d) if d <= now => return,
            Some(d) => d - now,
            None => Duration::from_millis(50),
        };
        // Short waits spin (a condition variable oversleeps by tens of µs),
        // yielding so the receivers pinned to the same core still run.
        if timeout < Duration::from_micros(60) {
            while Instant::now() < deadline.expect("short waits have a deadline") {
                std::thread::yield_now();
            }
            return;
        }
        let guard = self.generation.lock().expect("wake lock");
        if *guard != seen {
            return;
        }
        let _ = self.cv.wait_timeout(guard, timeout - Duration::from_micros(50)).expect("wake lock");
    }
}

/// A running produce workload.
pub struct ProduceRun {
    pub lanes: Vec<Arc<Lane>>,
    threads: Vec<std::thread::JoinHandle<()>>,
    pub expected: u64,
}

impl ProduceRun {
    /// Totals so far (progress) or at the end.
    pub fn counts(&self) -> ProduceCounts {
        let mut total = ProduceCounts::default();
        for lane in &self.lanes {
            total.merge(&lane.counts.lock().expect("counts lock"));
        }
        total
    }

    pub fn is_finished(&self) -> bool {
        self.threads.iter().all(|t| t.is_finished())
    }

    pub fn join(self) -> ProduceCounts {
        for t in self.threads {
            if t.join().is_err() {
                // A panicking thread is a bug in this tool; say so in the result.
                if let Some(lane) = self.lanes.first() {
                    lane.counts.lock().expect("counts lock").failures.push("a load thread panicked".into());
                }
            }
        }
        let mut total = ProduceCounts::default();
        for lane in &self.lanes {
            total.merge(&lane.counts.lock().expect("counts lock"));
        }
        total
    }
}

/// Opens the connections and starts the senders; the schedule starts at
/// `clock.start`.
pub fn start(w: &Workload, layout: &Layout, clock: Clock) -> Result<ProduceRun, String> {
    let senders = w.cores.len().max(1);
    let mut lanes = Vec::new();
    let mut threads = Vec::new();
    let mut expected = 0;
    for s in 0..senders {
        let wake = Arc::new(Wake::default());
        let mut mine = Vec::new();
        for (addr, partitions) in layout.by_leader() {
            for c in 0..w.connections.max(1) {
                let parts: Vec<i32> = partitions.iter().copied().skip(c).step_by(w.connections.max(1)).collect();
                if parts.is_empty() {
                    continue;
                }
                let stream = cluster::connect(&addr)?;
                let lane = Arc::new(Lane {
                    addr: addr.clone(),
                    stream: s as u32,
                    record_size: w.record_size,
                    partitions: parts,
                    counts: Mutex::new(ProduceCounts::default()),
                    queue: Mutex::new(VecDeque::new()),
                    in_flight: AtomicUsize::new(0),
                    broken: AtomicBool::new(false),
                    done: AtomicBool::new(false),
                });
                if w.acks != 0 {
                    let reader = stream.try_clone().map_err(|e| format!("{addr}: {e}"))?;
                    let (lane2, wake2, version) = (lane.clone(), wake.clone(), layout.versions.produce);
                    let core = w.cores.get(s).copied();
                    threads.push(
                        std::thread::Builder::new()
                            .name(format!("bench-ack-{s}"))
                            .spawn(move || {
                                pin(core);
                                receive(&lane2, reader, version, &wake2, clock)
                            })
                            .map_err(|e| e.to_string())?,
                    );
                }
                lanes.push(lane.clone());
                mine.push((lane, stream));
            }
        }
        let sender = Sender::new(w, layout, s as u32, senders, mine, wake, clock);
        expected += sender.expected();
        let core = w.cores.get(s).copied();
        threads.push(
            std::thread::Builder::new()
                .name(format!("bench-send-{s}"))
                .spawn(move || {
                    pin(core);
                    sender.run()
                })
                .map_err(|e| e.to_string())?,
        );
    }
    Ok(ProduceRun { lanes, threads, expected })
}

pub fn pin(core: Option<usize>) {
    if let Some(id) = core {
        if !core_affinity::set_for_current(core_affinity::CoreId { id }) {
            eprintln!("warning: could not pin a load thread to core {id}");
        }
    }
}

struct Sender {
    topic: TopicName,
    acks: i16,
    version: i16,
    batch_bytes: usize,
    max_request_bytes: usize,
    linger: Duration,
    max_in_flight: usize,
    keys: Option<u64>,
    partitions: i32,
    stream_id: u32,
    schedule: Option<Schedule>,
    clock: Clock,
    end: Instant,
    builder: BatchBuilder,
    lanes: Vec<(Arc<Lane>, TcpStream)>,
    /// Partition → (lane index, pending records, their bytes).
    pending: Vec<(usize, VecDeque<Pending>, usize)>,
    backlog: usize,
    /// Next sequence number per partition for this stream.
    seqs: Vec<u64>,
    next_key: u64,
    next_partition: usize,
    /// The partitions this sender writes, in round-robin order.
    order: Vec<i32>,
    wake: Arc<Wake>,
    correlation: i32,
    /// Per lane: the partition position the next request starts at.
    rotation: Vec<usize>,
    /// Admission time − intended time of measured records, µs.
    admit_lag: hdrhistogram::Histogram<u64>,
    /// Time spent in socket writes (long ones: the broker not reading).
    write_blocked: Duration,
}

impl Sender {
    fn new(
        w: &Workload,
        layout: &Layout,
        stream_id: u32,
        senders: usize,
        lanes: Vec<(Arc<Lane>, TcpStream)>,
        wake: Arc<Wake>,
        clock: Clock,
    ) -> Self {
        let length = w.warmup + w.duration;
        let schedule = (w.rate > 0.0).then(|| {
            let share = w.rate / senders as f64;
            let seed = w.poisson.then_some(u64::from(w.run) << 8 | u64::from(stream_id));
            Schedule::new(clock.start, share, length, stream_id as f64 / senders as f64, seed)
        });
        let mut pending: Vec<(usize, VecDeque<Pending>, usize)> =
            (0..w.partitions).map(|_| (usize::MAX, VecDeque::new(), 0)).collect();
        for (i, (lane, _)) in lanes.iter().enumerate() {
            for &p in &lane.partitions {
                pending[p as usize].0 = i;
            }
        }
        Self {
            topic: TopicName(StrBytes::from_string(w.topic.clone())),
            acks: w.acks,
            version: layout.versions.produce,
            batch_bytes: w.batch_bytes,
            max_request_bytes: w.max_request_bytes.max(w.batch_bytes),
            linger: w.linger,
            max_in_flight: w.max_in_flight.max(1),
            keys: w.keys,
            partitions: w.partitions,
            stream_id,
            schedule,
            clock,
            end: clock.start + length,
            builder: BatchBuilder::new(w.record_size, w.run, stream_id),
            pending,
            backlog: 0,
            seqs: vec![0; w.partitions as usize],
            next_key: 0,
            next_partition: stream_id as usize,
            order: (0..w.partitions).collect(),
            rotation: vec![0; lanes.len()],
            admit_lag: super::measure::histogram(),
            write_blocked: Duration::ZERO,
            lanes,
            wake,
            correlation: 0,
        }
    }

    fn expected(&self) -> u64 {
        self.schedule.as_ref().map_or(0, Schedule::expected_count)
    }

    /// Queues one record intended at `intended` on its partition.
    fn admit(&mut self, intended: Instant) {
        let (partition, key) = match self.keys {
            Some(n) => {
                let k = self.next_key % n.max(1);
                self.next_key += 1;
                (partition_for_key(key_text(k).as_bytes(), self.partitions), Some(k))
            }
            None => {
                let p = self.order[self.next_partition % self.order.len()];
                self.next_partition += 1;
                (p, None)
            }
        };
        let seq = self.seqs[partition as usize];
        self.seqs[partition as usize] += 1;
        let bytes = self.builder.record_bytes(key);
        let slot = &mut self.pending[partition as usize];
        slot.1.push_back(Pending { intended, intended_ns: self.clock.wall_ns(intended), seq, key });
        slot.2 += bytes;
        self.backlog += 1;
    }

    fn run(mut self) {
        let result = self.run_inner();
        if let Some((lane, _)) = self.lanes.first() {
            let mut c = lane.counts.lock().expect("counts lock");
            c.admit_lag.add(&self.admit_lag).expect("same bounds");
            c.write_blocked_s += self.write_blocked.as_secs_f64();
        }
        if let Err(e) = result {
            if let Some((lane, _)) = self.lanes.first() {
                lane.counts.lock().expect("counts lock").failures.push(e);
            }
        }
        // Wait for the last answers, then let the receivers go.
        let deadline = Instant::now() + Duration::from_secs(30);
        for (lane, stream) in &self.lanes {
            lane.done.store(true, Ordering::SeqCst);
            while lane.in_flight.load(Ordering::SeqCst) > 0
                && !lane.broken.load(Ordering::SeqCst)
                && Instant::now() < deadline
            {
                let seen = self.wake.generation();
                self.wake.wait(seen, Some(Instant::now() + Duration::from_millis(10)));
            }
            let left = lane.in_flight.load(Ordering::SeqCst);
            if left > 0 && !lane.broken.load(Ordering::SeqCst) {
                lane.counts
                    .lock()
                    .expect("counts lock")
                    .failures
                    .push(format!("{}: {left} produce requests unanswered 30 s after the run", lane.addr));
            }
            let _ = stream.shutdown(std::net::Shutdown::Both);
        }
    }

    fn run_inner(&mut self) -> Result<(), String> {
        let mut request_buf = Vec::new();
        loop {
            let seen = self.wake.generation();
            let now = Instant::now();
            if self.lanes.iter().any(|(l, _)| l.broken.load(Ordering::SeqCst)) {
                return Err("stopped: a connection to the broker failed".into());
            }
            // Admit what is due.
            match &mut self.schedule {
                Some(_) => {
                    while let Some(t) = self.schedule.as_ref().and_then(Schedule::peek) {
                        if t > now {
                            break;
                        }
                        self.schedule.as_mut().expect("checked").advance();
                        if t >= self.clock.measure_from {
                            record(&mut self.admit_lag, (now - t).as_micros() as u64, 1);
                        }
                        self.admit(t);
                    }
                }
                None if now < self.end => self.top_up(now),
                None => {}
            }
            if self.backlog > BACKLOG_LIMIT {
                return Err(format!(
                    "stopped: {} records waiting to be sent; the broker is far behind the requested rate",
                    self.backlog
                ));
            }
            let finished_admitting = match &self.schedule {
                Some(s) => s.peek().is_none(),
                None => now >= self.end,
            };
            // Send what is ready.
            let mut linger_deadline: Option<Instant> = None;
            for i in 0..self.lanes.len() {
                loop {
                    let lane = &self.lanes[i].0;
                    if self.acks != 0 && lane.in_flight.load(Ordering::SeqCst) >= self.max_in_flight {
                        break;
                    }
                    let (batches, wait) = self.take_ready(i, now, finished_admitting);
                    if let Some(d) = wait {
                        linger_deadline = Some(linger_deadline.map_or(d, |x: Instant| x.min(d)));
                    }
                    if batches.is_empty() {
                        break;
                    }
                    self.send(i, batches, &mut request_buf)?;
                }
            }
            if finished_admitting && self.backlog == 0 {
                return Ok(());
            }
            let next_due = self.schedule.as_ref().and_then(Schedule::peek);
            let deadline = [next_due, linger_deadline].into_iter().flatten().min();
            self.wake.wait(seen, deadline);
        }
    }

    /// Unthrottled runs (`--rate 0`): keep every partition of a connection
    /// with a free slot one batch deep.
    fn top_up(&mut self, now: Instant) {
        for i in 0..self.lanes.len() {
            let lane = self.lanes[i].0.clone();
            if self.acks != 0 && lane.in_flight.load(Ordering::SeqCst) >= self.max_in_flight {
                continue;
            }
            for &p in &lane.partitions {
                while self.pending[p as usize].2 + self.builder.record_bytes(None) <= self.batch_bytes {
                    let before = self.next_partition;
                    self.next_partition = self.order.iter().position(|&q| q == p).expect("own partition");
                    self.admit(now);
                    self.next_partition = before;
                }
            }
        }
    }

    /// The batches lane `i` can send now, and when the earliest lingering
    /// one becomes ready.
    fn take_ready(&mut self, i: usize, now: Instant, flush: bool) -> (Vec<Batch>, Option<Instant>) {
        let mut out = Vec::new();
        let mut wait = None;
        let mut request_bytes = 0;
        let partitions = self.lanes[i].0.partitions.clone();
        // Start where the last request stopped, so a request cut short by
        // --max-request-bytes does not starve the partitions after the cut.
        let first = self.rotation[i] % partitions.len();
        for k in 0..partitions.len() {
            let p = partitions[(first + k) % partitions.len()];
            let (_, queue, bytes) = &mut self.pending[p as usize];
            let Some(oldest) = queue.front() else { continue };
            let ready_at = oldest.intended + self.linger;
            if !(self.linger.is_zero() || *bytes >= self.batch_bytes || ready_at <= now || flush) {
                wait = Some(wait.map_or(ready_at, |w: Instant| w.min(ready_at)));
                continue;
            }
            if !out.is_empty() && request_bytes + self.builder.record_bytes(oldest.key) > self.max_request_bytes {
                self.rotation[i] = first + k;
                break;
            }
            let mut take = 0;
            let mut taken_bytes = 0;
            for r in queue.iter() {
                let b = self.builder.record_bytes(r.key);
                if take > 0
                    && (taken_bytes + b > self.batch_bytes || request_bytes + taken_bytes + b > self.max_request_bytes)
                {
                    break;
                }
                take += 1;
                taken_bytes += b;
            }
            let records: Vec<Pending> = queue.drain(..take).collect();
            *bytes -= taken_bytes;
            self.backlog -= take;
            request_bytes += taken_bytes;
            out.push((p, records, taken_bytes));
        }
        (out, wait)
    }

    fn send(&mut self, i: usize, batches: Vec<Batch>, scratch: &mut Vec<u8>) -> Result<(), String> {
        let now_ms = self.clock.wall_ms(Instant::now());
        let mut topic = TopicProduceData::default();
        topic.name = self.topic.clone();
        for (p, records, _) in &batches {
            scratch.clear();
            self.builder.build(records, now_ms, scratch);
            let mut data = PartitionProduceData::default();
            data.index = *p;
            data.records = Some(Bytes::copy_from_slice(scratch));
            topic.partition_data.push(data);
        }
        let mut req = ProduceRequest::default();
        req.acks = self.acks;
        req.timeout_ms = 30_000;
        req.topic_data = vec![topic];
        self.correlation = self.correlation.wrapping_add(1);
        let frame = cluster::frame(ApiKey::Produce, self.version, self.correlation, &req)?;
        let (lane, stream) = &mut self.lanes[i];
        let count: u64 = batches.iter().map(|(_, r, _)| r.len() as u64).sum();
        if self.acks != 0 {
            lane.in_flight.fetch_add(1, Ordering::SeqCst);
            lane.queue.lock().expect("queue lock").push_back(InFlight {
                correlation: self.correlation,
                sent: Instant::now(),
                batches,
            });
            lane.counts.lock().expect("counts lock").sent += count;
            let writing = Instant::now();
            let written = cluster::write_frame(stream, &frame);
            // A write that waits a millisecond or more waited for the broker
            // to read (a full socket buffer), not for the copy.
            let took = writing.elapsed();
            if took >= Duration::from_millis(1) {
                self.write_blocked += took;
            }
            if let Err(e) = written {
                lane.broken.store(true, Ordering::SeqCst);
                return Err(format!("{}: sending a produce request: {e}", lane.addr));
            }
        } else {
            let sent = Instant::now();
            cluster::write_frame(stream, &frame)
                .map_err(|e| format!("{}: sending a produce request: {e}", lane.addr))?;
            // acks=0: nothing comes back; the record counts as done once written.
            let done = Instant::now();
            let mut c = lane.counts.lock().expect("counts lock");
            c.sent += count;
            for (p, records, _) in &batches {
                acknowledge(&mut c, self.clock, self.stream_id, *p, records, lane.record_size, sent, done);
            }
        }
        Ok(())
    }
}

/// Counts `records` (one batch of partition `p`, values of `record_size`
/// bytes) as acknowledged at `at`, sent at `sent`.
#[allow(clippy::too_many_arguments)]
pub(crate) fn acknowledge(
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

fn receive(lane: &Lane, mut stream: TcpStream, version: i16, wake: &Wake, clock: Clock) {
    loop {
        let answer = cluster::read_response::<ProduceResponse>(&mut stream, ApiKey::Produce, version);
        let at = Instant::now();
        let quiet = lane.done.load(Ordering::SeqCst) && lane.in_flight.load(Ordering::SeqCst) == 0;
        let (correlation, resp) = match answer {
            Ok(a) => a,
            Err(_) if quiet => return,
            Err(e) => {
                let lost: usize = lane.queue.lock().expect("queue lock").iter().map(|f| f.batches.len()).sum::<usize>();
                let mut c = lane.counts.lock().expect("counts lock");
                c.failures.push(format!("{}: {e} ({lost} batches unanswered)", lane.addr));
                lane.broken.store(true, Ordering::SeqCst);
                wake.notify();
                return;
            }
        };
        let Some(f) = lane.queue.lock().expect("queue lock").pop_front() else {
            lane.counts
                .lock()
                .expect("counts lock")
                .failures
                .push(format!("{}: an answer nobody asked for", lane.addr));
            lane.broken.store(true, Ordering::SeqCst);
            wake.notify();
            return;
        };
        {
            let mut c = lane.counts.lock().expect("counts lock");
            if correlation != f.correlation {
                c.failures
                    .push(format!("{}: answer to request {correlation} where {} was due", lane.addr, f.correlation));
                lane.broken.store(true, Ordering::SeqCst);
            }
            for (p, records, _) in &f.batches {
                let code = resp
                    .responses
                    .iter()
                    .flat_map(|t| t.partition_responses.iter())
                    .find(|r| r.index == *p)
                    .map(|r| r.error_code);
                match code {
                    Some(0) => acknowledge(&mut c, clock, lane.stream, *p, records, lane.record_size, f.sent, at),
                    Some(code) => *c.errors.entry(code).or_default() += records.len() as u64,
                    None => {
                        c.failures.push(format!("{}: produce answer without partition {p}", lane.addr));
                        *c.errors.entry(-1).or_default() += records.len() as u64;
                    }
                }
            }
        }
        lane.in_flight.fetch_sub(1, Ordering::SeqCst);
        wake.notify();
    }
}
