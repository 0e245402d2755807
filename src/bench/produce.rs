//! The native load generator: open-loop senders writing pre-built batches
//! over pipelined connections, and one receiver per connection timing the
//! acknowledgements.
//!
//! Each sender owns a share of the rate and a set of connections
//! (`--connections` per partition leader), and runs with its connections'
//! receivers as tasks of one event loop on its load core (`engine`). It
//! admits records at their intended times, groups each partition's due
//! records into a batch (up to `--batch-bytes`, waiting at most `--linger`),
//! and sends one Produce request per connection holding every ready
//! partition's batch, with at most `--max-in-flight` unanswered requests per
//! connection. Records due while a connection is full wait in memory — and
//! their wait counts in their latency.

use std::{
    cell::{Cell, RefCell},
    collections::VecDeque,
    rc::Rc,
    sync::{
        atomic::{AtomicUsize, Ordering},
        // Load-generator locks only (see `Lane`): the broker takes none.
        Arc,
        Mutex,
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
    cluster::{Layout, CLIENT_ID},
    engine::{Job, Notify},
    measure::{acknowledge, record, ProduceCounts},
    payload::{key_text, partition_for_key, BatchBuilder, Pending},
    schedule::Schedule,
    txn_session::{self, Prepared, Session},
    Clock, Workload,
};
use crate::{
    client::{
        self,
        nonblocking::{self, AsyncStream},
        tls::Socket,
    },
    protocol::client::{request_frame, Response},
};

/// Records waiting for admission beyond this many mean the broker is far
/// behind; the run stops and is reported as failed rather than eat memory.
const BACKLOG_LIMIT: usize = 20_000_000;

/// What the progress line and the final tally read of one connection.
///
/// The lock is the load generator's, a client: taken by this connection's
/// receiver (or its sender for acks=0) on its load core and by the progress
/// line once a second, held for a few field updates, never across I/O. The
/// broker's data path (src/server, src/shard, src/storage) takes none.
pub struct Lane {
    pub addr: String,
    /// Off any broker path: the generator's own tally, shared by one load
    /// core and the once-a-second progress line.
    pub counts: Mutex<ProduceCounts>,
}

/// One connection to a partition leader, as its load core sees it.
struct Conn {
    lane: Arc<Lane>,
    /// The sender this connection belongs to (the stamp's stream id).
    stream: u32,
    /// Value bytes per record (throughput counts payload, not framing).
    record_size: usize,
    partitions: Vec<i32>,
    /// Requests written and not yet answered, oldest first (answers come in
    /// order): pushed by the sender, popped by the receiver.
    queue: RefCell<VecDeque<InFlight>>,
    broken: Cell<bool>,
    done: Cell<bool>,
}

/// One partition's records in a request: (partition, records, bytes).
type Batch = (i32, Vec<Pending>, usize);

struct InFlight {
    correlation: i32,
    sent: Instant,
    batches: Vec<Batch>,
}

/// A running produce workload.
pub struct ProduceRun {
    pub lanes: Vec<Arc<Lane>>,
    /// Senders still running; each counts itself out when it ends (or its
    /// executor unwinds).
    senders_left: Arc<AtomicUsize>,
    pub expected: u64,
}

/// Counts a sender out of `senders_left` when it is dropped.
struct SenderAlive(Arc<AtomicUsize>);

impl Drop for SenderAlive {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
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

    /// Every sender has ended, and with it its receivers' work.
    pub fn is_finished(&self) -> bool {
        self.senders_left.load(Ordering::SeqCst) == 0
    }
}

/// Opens the connections and returns the run with one job per sender, the
/// i-th for load core i (`engine::start`); the schedule starts at
/// `clock.start`.
pub fn plan(w: &Workload, layout: &Layout, clock: Clock) -> Result<(ProduceRun, Vec<Vec<Job>>), String> {
    let senders = w.cores.len().max(1);
    let senders_left = Arc::new(AtomicUsize::new(senders));
    let mut lanes = Vec::new();
    let mut jobs = Vec::new();
    let mut expected = 0;
    for s in 0..senders {
        let mut mine = Vec::new();
        for (addr, partitions) in layout.by_leader() {
            for c in 0..w.connections.max(1) {
                let parts: Vec<i32> = partitions.iter().copied().skip(c).step_by(w.connections.max(1)).collect();
                if parts.is_empty() {
                    continue;
                }
                let stream = client::tls::open(&addr)?;
                // Built once per connection before the run; its lock is the
                // generator's tally (see `Lane`), never the broker's.
                let lane = Arc::new(Lane { addr: addr.clone(), counts: Mutex::new(ProduceCounts::default()) });
                lanes.push(lane.clone());
                mine.push((lane, parts, stream));
            }
        }
        expected += schedule(w, clock, s as u32, senders).as_ref().map_or(0, Schedule::expected_count);
        let txn = match w.txn_interval {
            Some(_) => {
                let bootstrap = layout.brokers.values().next().ok_or("the topic's layout names no broker")?;
                Some(txn_session::prepare(bootstrap, format!("shardlog-bench-{:08x}-{s}", w.run))?)
            }
            None => None,
        };
        let (w, layout, alive) = (w.clone(), layout.clone(), SenderAlive(senders_left.clone()));
        let job: Job = Box::new(move || {
            Box::pin(async move {
                let _alive = alive;
                match Sender::new(&w, &layout, (s as u32, senders), mine, txn, clock) {
                    Ok(sender) => sender.run().await,
                    Err((lane, e)) => lane.counts.lock().expect("counts lock").failures.push(e),
                }
            })
        });
        jobs.push(vec![job]);
    }
    Ok((ProduceRun { lanes, senders_left, expected }, jobs))
}

/// Sender `stream_id`'s share of the schedule (none for `--rate 0`).
fn schedule(w: &Workload, clock: Clock, stream_id: u32, senders: usize) -> Option<Schedule> {
    (w.rate > 0.0).then(|| {
        let share = w.rate / senders as f64;
        let seed = w.poisson.then_some(u64::from(w.run) << 8 | u64::from(stream_id));
        Schedule::new(clock.start, share, w.warmup + w.duration, stream_id as f64 / senders as f64, seed)
    })
}

/// Pins a load thread (the baseline's) to `core`.
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
    /// Each connection and the half of its socket this sender writes.
    conns: Vec<(Rc<Conn>, AsyncStream)>,
    /// Partition → (connection index, pending records, their bytes).
    pending: Vec<(usize, VecDeque<Pending>, usize)>,
    backlog: usize,
    /// Next sequence number per partition for this stream.
    seqs: Vec<u64>,
    next_key: u64,
    next_partition: usize,
    /// The partitions this sender writes, in round-robin order.
    order: Vec<i32>,
    /// Receivers wake the sender when an answer frees a slot.
    wake: Rc<Notify>,
    correlation: i32,
    /// Per connection: the partition position the next request starts at.
    rotation: Vec<usize>,
    /// Admission time − intended time of measured records, µs.
    admit_lag: hdrhistogram::Histogram<u64>,
    /// Time spent waiting for socket writes (the broker not reading).
    write_blocked: Duration,
    /// A transactional run's producer (`txn_session`).
    txn: Option<Session>,
    /// While a commit is under way, since when: records due from then on
    /// cannot be sent before the next transaction begins (the protocol's
    /// wait, not the generator's), so their late admission is not counted
    /// as admission lag. Their latency counts the wait all the same.
    commit_hold: Option<Instant>,
}

impl Sender {
    /// Builds the sender on its load core and starts a receiver task per
    /// connection (acks=0 has none: nothing comes back).
    fn new(
        w: &Workload,
        layout: &Layout,
        (stream_id, senders): (u32, usize),
        connections: Vec<(Arc<Lane>, Vec<i32>, Socket)>,
        txn: Option<Prepared>,
        clock: Clock,
    ) -> Result<Self, (Arc<Lane>, String)> {
        let wake = Rc::new(Notify::new(w.spin));
        let mut conns = Vec::new();
        for (lane, partitions, stream) in connections {
            let (writer, reader) = match nonblocking::split(stream) {
                Ok(halves) => halves,
                Err(e) => return Err((lane.clone(), format!("{}: {e}", lane.addr))),
            };
            let conn = Rc::new(Conn {
                lane,
                stream: stream_id,
                record_size: w.record_size,
                partitions,
                queue: RefCell::new(VecDeque::new()),
                broken: Cell::new(false),
                done: Cell::new(false),
            });
            if w.acks != 0 {
                let receiver = receive(conn.clone(), reader, layout.versions.produce, wake.clone(), clock);
                glommio::spawn_local(receiver).detach();
            }
            conns.push((conn, writer));
        }
        let mut pending: Vec<(usize, VecDeque<Pending>, usize)> =
            (0..w.partitions).map(|_| (usize::MAX, VecDeque::new(), 0)).collect();
        for (i, (conn, _)) in conns.iter().enumerate() {
            for &p in &conn.partitions {
                pending[p as usize].0 = i;
            }
        }
        let mut builder = BatchBuilder::new(w.record_size, w.run, stream_id);
        let txn = match (txn, w.txn_interval) {
            (Some(p), Some(interval)) => {
                builder.transactional(p.producer_id, p.epoch);
                let session = Session::new(p, &w.topic, interval, clock.start);
                let lane = || conns[0].0.lane.clone();
                Some(session.map_err(|e| (lane(), format!("transaction coordinator: {e}")))?)
            }
            _ => None,
        };
        Ok(Self {
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
            schedule: schedule(w, clock, stream_id, senders),
            clock,
            end: clock.start + w.warmup + w.duration,
            builder,
            txn,
            commit_hold: None,
            pending,
            backlog: 0,
            seqs: vec![0; w.partitions as usize],
            next_key: 0,
            next_partition: stream_id as usize,
            order: (0..w.partitions).collect(),
            rotation: vec![0; conns.len()],
            admit_lag: super::measure::histogram(),
            write_blocked: Duration::ZERO,
            conns,
            wake,
            correlation: 0,
        })
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
        if let Some(t) = &mut self.txn {
            t.records += 1;
        }
    }

    async fn run(mut self) {
        let result = self.run_inner().await;
        if let Some((conn, _)) = self.conns.first() {
            let mut c = conn.lane.counts.lock().expect("counts lock");
            c.admit_lag.add(&self.admit_lag).expect("same bounds");
            c.write_blocked_s += self.write_blocked.as_secs_f64();
            if let Some(t) = &self.txn {
                c.txn.merge(&t.phases);
            }
            if let Err(e) = result {
                c.failures.push(e);
            }
        }
        // Wait for the last answers, then let the receivers go.
        let deadline = Instant::now() + Duration::from_secs(30);
        for (conn, stream) in &mut self.conns {
            conn.done.set(true);
            while !conn.queue.borrow().is_empty() && !conn.broken.get() && Instant::now() < deadline {
                self.wake.wait(Some(Instant::now() + Duration::from_millis(10))).await;
            }
            let left = conn.queue.borrow().len();
            if left > 0 && !conn.broken.get() {
                conn.lane
                    .counts
                    .lock()
                    .expect("counts lock")
                    .failures
                    .push(format!("{}: {left} produce requests unanswered 30 s after the run", conn.lane.addr));
            }
            stream.shutdown().await;
        }
    }

    fn in_flight(&self, i: usize) -> usize {
        self.conns[i].0.queue.borrow().len()
    }

    async fn run_inner(&mut self) -> Result<(), String> {
        let mut request_buf = Vec::new();
        loop {
            let now = Instant::now();
            if self.conns.iter().any(|(c, _)| c.broken.get()) {
                return Err("stopped: a connection to the broker failed".into());
            }
            self.admit_due(now);
            if self.backlog > BACKLOG_LIMIT {
                return Err(format!(
                    "stopped: {} records waiting to be sent; the broker is far behind the requested rate",
                    self.backlog
                ));
            }
            if self.txn.as_ref().is_some_and(|t| now >= t.next) {
                self.commit_due(&mut request_buf).await?;
                continue;
            }
            let finished_admitting = match &self.schedule {
                Some(s) => s.peek().is_none(),
                None => now >= self.end,
            };
            // Send what is ready.
            let mut linger_deadline: Option<Instant> = None;
            for i in 0..self.conns.len() {
                while self.acks == 0 || self.in_flight(i) < self.max_in_flight {
                    let (batches, wait) = self.take_ready(i, now, finished_admitting);
                    if let Some(d) = wait {
                        linger_deadline = Some(linger_deadline.map_or(d, |x: Instant| x.min(d)));
                    }
                    if batches.is_empty() {
                        break;
                    }
                    self.send(i, batches, &mut request_buf).await?;
                }
            }
            if finished_admitting && self.backlog == 0 {
                if self.txn.is_some() {
                    self.drain(&mut request_buf).await?;
                    self.txn.as_mut().expect("transactional").commit().await?;
                }
                return Ok(());
            }
            let next_due = self.schedule.as_ref().and_then(Schedule::peek);
            let commit_due = self.txn.as_ref().map(|t| t.next);
            let deadline = [next_due, linger_deadline, commit_due].into_iter().flatten().min();
            self.wake.wait(deadline).await;
        }
    }

    /// A commit slot has come: every record admitted so far goes out, and
    /// once all are answered the transaction commits (the next one opens
    /// with its first batch).
    /// A slot with nothing admitted since the last commit passes.
    async fn commit_due(&mut self, scratch: &mut Vec<u8>) -> Result<(), String> {
        let txn = self.txn.as_mut().expect("a commit is due only in a transactional run");
        if txn.records == 0 {
            txn.skip(Instant::now());
            return Ok(());
        }
        self.commit_hold = Some(Instant::now());
        self.drain(scratch).await?;
        let txn = self.txn.as_mut().expect("transactional");
        let drained = Instant::now().saturating_duration_since(txn.next);
        record(&mut txn.phases.drain, drained.as_micros() as u64, 1);
        txn.commit().await?;
        self.admit_due(Instant::now());
        self.commit_hold = None;
        Ok(())
    }

    /// Sends every admitted record (lingering or not), then waits until
    /// every request is answered.
    async fn drain(&mut self, scratch: &mut Vec<u8>) -> Result<(), String> {
        loop {
            if self.conns.iter().any(|(c, _)| c.broken.get()) {
                return Err("stopped: a connection to the broker failed".into());
            }
            for i in 0..self.conns.len() {
                while self.in_flight(i) < self.max_in_flight {
                    let (batches, _) = self.take_ready(i, Instant::now(), true);
                    if batches.is_empty() {
                        break;
                    }
                    self.send(i, batches, scratch).await?;
                }
            }
            if self.backlog == 0 && (0..self.conns.len()).all(|i| self.in_flight(i) == 0) {
                return Ok(());
            }
            self.wake.wait(Some(Instant::now() + Duration::from_millis(10))).await;
        }
    }

    /// Admits every record whose intended time has come (unthrottled: tops
    /// the partitions up).
    fn admit_due(&mut self, now: Instant) {
        match &mut self.schedule {
            Some(_) => {
                while let Some(t) = self.schedule.as_ref().and_then(Schedule::peek) {
                    if t > now {
                        break;
                    }
                    self.schedule.as_mut().expect("checked").advance();
                    if t >= self.clock.measure_from && self.commit_hold.is_none_or(|held| t < held) {
                        record(&mut self.admit_lag, (now - t).as_micros() as u64, 1);
                    }
                    self.admit(t);
                }
            }
            None if now < self.end => self.top_up(now),
            None => {}
        }
    }

    /// Unthrottled runs (`--rate 0`): keep every partition of a connection
    /// with a free slot one batch deep.
    fn top_up(&mut self, now: Instant) {
        for i in 0..self.conns.len() {
            if self.acks != 0 && self.in_flight(i) >= self.max_in_flight {
                continue;
            }
            let conn = self.conns[i].0.clone();
            for &p in &conn.partitions {
                while self.pending[p as usize].2 + self.builder.record_bytes(None) <= self.batch_bytes {
                    let before = self.next_partition;
                    self.next_partition = self.order.iter().position(|&q| q == p).expect("own partition");
                    self.admit(now);
                    self.next_partition = before;
                }
            }
        }
    }

    /// The batches connection `i` can send now, and when the earliest
    /// lingering one becomes ready.
    fn take_ready(&mut self, i: usize, now: Instant, flush: bool) -> (Vec<Batch>, Option<Instant>) {
        let mut out = Vec::new();
        let mut wait = None;
        let mut request_bytes = 0;
        let conn = self.conns[i].0.clone();
        let partitions = &conn.partitions;
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

    async fn send(&mut self, i: usize, batches: Vec<Batch>, scratch: &mut Vec<u8>) -> Result<(), String> {
        if let Some(txn) = &mut self.txn {
            txn.add(batches.iter().map(|(p, ..)| *p)).await?;
        }
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
        let frame = request_frame(ApiKey::Produce, self.version, self.correlation, Some(CLIENT_ID), &req)
            .map_err(|e| e.to_string())?;
        let (conn, stream) = &mut self.conns[i];
        let count: u64 = batches.iter().map(|(_, r, _)| r.len() as u64).sum();
        conn.lane.counts.lock().expect("counts lock").sent += count;
        let sent = Instant::now();
        // acks=0: nothing comes back; the records count as done once written.
        let done_when_written = if self.acks == 0 {
            Some(batches)
        } else {
            conn.queue.borrow_mut().push_back(InFlight { correlation: self.correlation, sent, batches });
            None
        };
        let written = nonblocking::write_frame(stream, ApiKey::Produce, self.version, &frame).await;
        // A write that waits a millisecond or more waited for the broker to
        // read (a full socket buffer), not for the copy.
        let took = sent.elapsed();
        if took >= Duration::from_millis(1) {
            self.write_blocked += took;
        }
        if let Err(e) = written {
            conn.broken.set(true);
            return Err(format!("{}: {e}", conn.lane.addr));
        }
        if let Some(batches) = done_when_written {
            let (mut c, done) = (conn.lane.counts.lock().expect("counts lock"), Instant::now());
            for (p, records, _) in &batches {
                acknowledge(&mut c, self.clock, self.stream_id, *p, records, conn.record_size, sent, done);
            }
        }
        Ok(())
    }
}

async fn receive(conn: Rc<Conn>, mut stream: AsyncStream, version: i16, wake: Rc<Notify>, clock: Clock) {
    let lane = &conn.lane;
    loop {
        let answer = nonblocking::read_response::<ProduceResponse>(&mut stream, ApiKey::Produce, version).await;
        let at = Instant::now();
        let quiet = conn.done.get() && conn.queue.borrow().is_empty();
        let (correlation, resp) = match answer {
            Ok(Response { correlation_id, body, .. }) => (correlation_id, body),
            Err(_) if quiet => return,
            Err(e) => {
                let lost: usize = conn.queue.borrow().iter().map(|f| f.batches.len()).sum();
                lane.counts
                    .lock()
                    .expect("counts lock")
                    .failures
                    .push(format!("{}: {e} ({lost} batches unanswered)", lane.addr));
                conn.broken.set(true);
                wake.notify();
                return;
            }
        };
        let Some(f) = conn.queue.borrow_mut().pop_front() else {
            lane.counts
                .lock()
                .expect("counts lock")
                .failures
                .push(format!("{}: an answer nobody asked for", lane.addr));
            conn.broken.set(true);
            wake.notify();
            return;
        };
        {
            let mut c = lane.counts.lock().expect("counts lock");
            if correlation != f.correlation {
                c.failures
                    .push(format!("{}: answer to request {correlation} where {} was due", lane.addr, f.correlation));
                conn.broken.set(true);
            }
            for (p, records, _) in &f.batches {
                let code = resp
                    .responses
                    .iter()
                    .flat_map(|t| t.partition_responses.iter())
                    .find(|r| r.index == *p)
                    .map(|r| r.error_code);
                match code {
                    Some(0) => acknowledge(&mut c, clock, conn.stream, *p, records, conn.record_size, f.sent, at),
                    Some(code) => *c.errors.entry(code).or_default() += records.len() as u64,
                    None => {
                        c.failures.push(format!("{}: produce answer without partition {p}", lane.addr));
                        *c.errors.entry(-1).or_default() += records.len() as u64;
                    }
                }
            }
        }
        wake.notify();
    }
}
