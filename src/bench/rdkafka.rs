//! The same produce workload through librdkafka (`--client rdkafka`): the
//! same schedule, partitions, record stamps and accounting, so the native
//! generator can be compared with a client users already trust, and shown
//! not to be the bottleneck.
//!
//! librdkafka does not tell when a record left in a request, so its
//! "service time" is enqueue → delivery report.

use std::{
    // The generator's tally, shared with librdkafka's delivery-report thread
    // (see `Context`); the broker under test takes no lock.
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use hdrhistogram::Histogram;
use rdkafka::{
    config::ClientConfig,
    error::{KafkaError, RDKafkaErrorCode},
    producer::{BaseRecord, DeliveryResult, Producer, ProducerContext, ThreadedProducer},
    ClientContext,
};

use super::{
    measure::{acknowledge, histogram, record, CommitPhases, ProduceCounts},
    payload::{key_text, partition_for_key, Pending, Stamp, STAMP_BYTES},
    produce::pin,
    report::Tick,
    schedule::{Schedule, SplitMix},
    txn_session::next_slot,
    Clock, Outcome, Workload,
};

struct Sent {
    record: Pending,
    partition: i32,
    enqueued: Instant,
    bytes: usize,
}

struct Context {
    /// The load generator's lock, not the broker's: librdkafka's delivery
    /// callbacks (its own thread) record here and the progress line reads it
    /// once a second; held for a few field updates, never across I/O.
    counts: Arc<Mutex<ProduceCounts>>,
    clock: Clock,
}

impl ClientContext for Context {}

impl ProducerContext for Context {
    type DeliveryOpaque = Box<Sent>;

    fn delivery(&self, result: &DeliveryResult<'_>, sent: Box<Sent>) {
        let at = Instant::now();
        let mut c = self.counts.lock().expect("counts lock");
        match result {
            Ok(_) => acknowledge(&mut c, self.clock, 0, sent.partition, &[sent.record], sent.bytes, sent.enqueued, at),
            Err((e, _)) => {
                let code = match e {
                    KafkaError::MessageProduction(code) => *code as i16,
                    _ => -1,
                };
                *c.errors.entry(code).or_default() += 1;
                if c.failures.len() < 10 {
                    c.failures.push(format!("librdkafka: {e}"));
                }
            }
        }
    }
}

/// What a librdkafka run does beyond the workload.
#[derive(Debug, Default, Clone, Copy)]
pub struct Extras {
    /// A transactional producer, committing this often.
    pub txn_interval: Option<Duration>,
    /// A read_committed librdkafka consumer times every record end to end.
    pub e2e: bool,
}

pub fn run(w: &Workload, bootstrap: &str) -> Result<Outcome, String> {
    run_with(w, bootstrap, Extras::default()).map(|(o, _)| o)
}

pub fn run_with(w: &Workload, bootstrap: &str, x: Extras) -> Result<(Outcome, Option<CommitPhases>), String> {
    let counts = Arc::new(Mutex::new(ProduceCounts::default()));
    let (cpu_before, started) = (super::process_cpu_seconds(), Instant::now());
    let start = Instant::now() + Duration::from_millis(500);
    let clock = Clock::new(start, w.warmup);
    let reader = if x.e2e { Some(super::txn::Reader::start(w, bootstrap, clock)?) } else { None };
    let producer = producer(w, bootstrap, Context { counts: counts.clone(), clock }, x.txn_interval.is_some())?;
    let mut txn = x.txn_interval.map(|interval| Txn::begin(&producer, interval, start)).transpose()?;
    pin(w.cores.first().copied());
    precise_sleeps();

    let mut template = vec![0u8; w.record_size];
    let mut rng = SplitMix::new(0x5eed);
    template.iter_mut().for_each(|b| *b = rng.next_u64() as u8);
    let length = w.warmup + w.duration;
    let end = start + length;
    let mut schedule =
        (w.rate > 0.0).then(|| Schedule::new(start, w.rate, length, 0.0, w.poisson.then_some(u64::from(w.run))));
    let mut seqs = vec![0u64; w.partitions as usize];
    let mut picker = Picker::default();
    let mut progress = super::report::Progress::new();
    let mut last_tick = Instant::now();
    while Instant::now() < start {
        std::hint::spin_loop();
    }
    loop {
        let intended = match next_due(&mut schedule, end, txn.as_ref().map(|t| t.next)) {
            None => break,
            Some(Due::Commit) => {
                txn.as_mut().expect("a commit is due only in a transactional run").tick(&producer)?;
                continue;
            }
            Some(Due::Record(intended)) => intended,
        };
        let (partition, key) = picker.next(w);
        let seq = seqs[partition as usize];
        seqs[partition as usize] += 1;
        let record = Pending { intended, intended_ns: clock.wall_ns(intended), seq, key };
        Stamp { run: w.run, stream: 0, seq, intended_ns: record.intended_ns }.write(&mut template[..STAMP_BYTES]);
        let sent = Box::new(Sent { record, partition, enqueued: Instant::now(), bytes: w.record_size });
        send(&producer, &w.topic, partition, key.map(key_text), &template, sent)?;
        counts.lock().expect("counts lock").sent += 1;
        if let Some(t) = txn.as_mut() {
            t.records += 1;
        }
        if last_tick.elapsed() >= Duration::from_secs(1) {
            last_tick = Instant::now();
            let c = counts.lock().expect("counts lock");
            let note = if Instant::now() < clock.measure_from { "(warm-up)" } else { "" };
            let done = Instant::now().saturating_duration_since(start).as_secs_f64();
            let p99 = Some(c.so_far.value_at_quantile(0.99));
            progress.tick(Tick {
                what: "rdkafka produce",
                done_s: done,
                total_s: length.as_secs_f64(),
                count: c.acked,
                bytes: c.acked_bytes,
                p99_us: p99,
                note,
            });
        }
    }
    progress.finish();
    let finished = match &mut txn {
        Some(t) => t.commit(&producer).map_err(|e| format!("librdkafka last commit_transaction: {e}")),
        None => producer.flush(Duration::from_secs(30)).map_err(|e| format!("librdkafka flush: {e}")),
    };
    if let Err(e) = finished {
        counts.lock().expect("counts lock").failures.push(e);
    }
    drop(producer);
    let produce = std::mem::take(&mut *counts.lock().expect("counts lock"));
    // librdkafka's own threads are not pinned: this is the whole process.
    let generator_cpu = super::generator_cpu_since(w, cpu_before, started);
    let consume = reader.map(|r| r.finish(&produce));
    let outcome = Outcome {
        produce,
        consume,
        window: w.duration,
        service_label: "service (enqueue→ack)",
        generator_cpu,
        warmup_s: w.warmup.as_secs_f64(),
    };
    Ok((outcome, txn.map(|t| CommitPhases { commits: t.commits, commit: t.durations, ..Default::default() })))
}

/// The transaction of a transactional run: committed (and the next one
/// begun) every `interval`, on a fixed cadence from the schedule's start,
/// so a late or long commit does not stretch the intervals after it.
struct Txn {
    interval: Duration,
    next: Instant,
    commits: u64,
    /// Records sent in the open transaction.
    records: u64,
    durations: Histogram<u64>,
}

const TXN_TIMEOUT: Duration = Duration::from_secs(30);

impl Txn {
    /// The first commit is due one interval after the schedule's `start`.
    fn begin(p: &ThreadedProducer<Context>, interval: Duration, start: Instant) -> Result<Self, String> {
        p.init_transactions(TXN_TIMEOUT).map_err(|e| format!("librdkafka init_transactions: {e}"))?;
        p.begin_transaction().map_err(|e| format!("librdkafka begin_transaction: {e}"))?;
        Ok(Self { interval, next: start + interval, commits: 0, records: 0, durations: histogram() })
    }

    /// Commits the transaction that is due and begins the next. A
    /// transaction that holds no record yet (the sender was held up) is not
    /// committed: its slot passes.
    fn tick(&mut self, p: &ThreadedProducer<Context>) -> Result<(), String> {
        if self.records == 0 {
            self.next = next_slot(self.next, self.interval, Instant::now());
            return Ok(());
        }
        self.commit(p).map_err(|e| format!("librdkafka commit_transaction: {e}"))?;
        p.begin_transaction().map_err(|e| format!("librdkafka begin_transaction: {e}"))
    }

    fn commit(&mut self, p: &ThreadedProducer<Context>) -> Result<(), KafkaError> {
        let at = Instant::now();
        // The rdkafka crate's commit_transaction flushes first, and its
        // flush polls for 100 ms at a time while anything is outstanding:
        // every commit would take 100 ms or more. Wait for the delivery
        // reports here instead (our producer's thread serves them), so
        // that its flush finds nothing left.
        while p.in_flight_count() > 0 {
            if at.elapsed() > TXN_TIMEOUT {
                return Err(KafkaError::Flush(RDKafkaErrorCode::OperationTimedOut));
            }
            std::thread::sleep(SPIN_BELOW);
        }
        p.commit_transaction(TXN_TIMEOUT)?;
        record(&mut self.durations, at.elapsed().as_micros() as u64, 1);
        self.commits += 1;
        self.records = 0;
        self.next = next_slot(self.next, self.interval, Instant::now());
        Ok(())
    }
}

/// A librdkafka producer configured like the native generator: no
/// idempotence or compression, the workload's linger, batch size and
/// requests in flight, and queues deep enough never to refuse a record.
/// A transactional one has a `transactional.id` of its own (and so
/// idempotence).
fn producer(
    w: &Workload,
    bootstrap: &str,
    context: Context,
    transactional: bool,
) -> Result<ThreadedProducer<Context>, String> {
    let acks = if w.acks == -1 { "all".to_string() } else { w.acks.to_string() };
    let mut config = ClientConfig::new();
    if transactional {
        config
            .set("transactional.id", format!("shardlog-bench-{:08x}", w.run))
            .set("transaction.timeout.ms", "60000")
            .set("enable.idempotence", "true");
    } else {
        config.set("enable.idempotence", "false");
    }
    sasl_config(&mut config);
    config
        .set("bootstrap.servers", bootstrap)
        .set("client.id", "shardlog-bench-rdkafka")
        .set("acks", &acks)
        .set("linger.ms", format!("{}", w.linger.as_secs_f64() * 1000.0))
        .set("batch.size", w.batch_bytes.to_string())
        .set("message.max.bytes", (w.batch_bytes + 64 * 1024).max(1_000_000).to_string())
        .set("max.in.flight.requests.per.connection", w.max_in_flight.to_string())
        .set("compression.codec", "none")
        .set("queue.buffering.max.messages", "10000000")
        .set("queue.buffering.max.kbytes", "2097151")
        .create_with_context(context)
        .map_err(|e| format!("librdkafka producer for {bootstrap}: {e}"))
}

/// Gaps shorter than this are spun through rather than slept.
const SPIN_BELOW: Duration = Duration::from_micros(20);

/// Sets the calling thread's timer slack to 1 ns, so its sleeps end when
/// asked rather than up to 50 µs later (the default slack).
#[allow(unsafe_code)]
fn precise_sleeps() {
    // SAFETY: PR_SET_TIMERSLACK takes a plain integer and changes only the
    // calling thread's timer slack; no memory is passed.
    let set = unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong, 0, 0, 0) };
    if set != 0 {
        eprintln!("warning: cannot set the sender's timer slack: {}", std::io::Error::last_os_error());
    }
}

/// What the sender does next.
enum Due {
    /// Sends the record intended at this instant.
    Record(Instant),
    /// Commits the open transaction, on time rather than after the next
    /// record (at 2,000 msg/s that would be up to 500 µs late).
    Commit,
}

/// Waits until the next record's intended send time or the next commit
/// (`commit_at`), whichever is first; `None` when the run is over.
/// Unthrottled (no schedule), every moment is due.
fn next_due(schedule: &mut Option<Schedule>, end: Instant, commit_at: Option<Instant>) -> Option<Due> {
    loop {
        let now = Instant::now();
        // In intended order: records intended before a late commit's slot
        // (a sender held up) go into its transaction first.
        let record_first =
            |c: Instant, s: &mut Option<Schedule>| s.as_mut().and_then(|s| s.peek()).is_some_and(|t| t <= c);
        if commit_at.is_some_and(|c| c <= now && !record_first(c, schedule)) && now < end {
            return Some(Due::Commit);
        }
        let Some(s) = schedule else { return (now < end).then_some(Due::Record(now)) };
        match s.peek()? {
            // Sleep through every gap but the shortest: librdkafka's own
            // threads (and a reader's) share this core and must not lose
            // it to a spinning sender. With the thread's timer slack at
            // 1 ns (`precise_sleeps`) a sleep ends within microseconds.
            t if t > now => {
                let wake = commit_at.map_or(t, |c| c.min(t));
                let gap = wake.saturating_duration_since(now);
                if gap > SPIN_BELOW {
                    std::thread::sleep(gap);
                } else {
                    std::hint::spin_loop();
                }
            }
            t => {
                s.advance();
                return Some(Due::Record(t));
            }
        }
    }
}

/// Which partition (and key) the next record goes to: round robin, or by
/// key over `w.keys` keys, as the native generator does.
#[derive(Default)]
struct Picker {
    next: usize,
    next_key: u64,
}

impl Picker {
    fn next(&mut self, w: &Workload) -> (i32, Option<u64>) {
        match w.keys {
            Some(n) => {
                let k = self.next_key % n.max(1);
                self.next_key += 1;
                (partition_for_key(key_text(k).as_bytes(), w.partitions), Some(k))
            }
            None => {
                self.next += 1;
                ((self.next - 1) as i32 % w.partitions, None)
            }
        }
    }
}

/// Hands one record to librdkafka, waiting while its queue is full.
fn send(
    producer: &ThreadedProducer<Context>,
    topic: &str,
    partition: i32,
    key: Option<String>,
    payload: &[u8],
    mut opaque: Box<Sent>,
) -> Result<(), String> {
    loop {
        let mut r =
            BaseRecord::<str, [u8], Box<Sent>>::with_opaque_to(topic, opaque).partition(partition).payload(payload);
        if let Some(k) = &key {
            r = r.key(k.as_str());
        }
        match producer.send(r) {
            Ok(()) => return Ok(()),
            Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), back)) => {
                opaque = back.delivery_opaque;
                std::thread::sleep(Duration::from_micros(100));
            }
            Err((e, _)) => return Err(format!("librdkafka refused a record for {topic}-{partition}: {e}")),
        }
    }
}

/// librdkafka's SASL settings for the process's login (`bench --sasl`).
pub fn sasl_config(config: &mut ClientConfig) {
    if let Some(login) = crate::client::sasl::login() {
        config
            .set("security.protocol", "SASL_PLAINTEXT")
            .set("sasl.mechanism", login.mechanism.name())
            .set("sasl.username", &login.user)
            .set("sasl.password", &login.password);
    }
}
