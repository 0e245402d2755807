//! A steady producer for fault tests: librdkafka (idempotent, acks=all)
//! sends numbered records round-robin over a topic's partitions from a
//! thread of its own while the test kills, pauses and restarts brokers,
//! and keeps every delivery report. `read_back` then reads the partitions
//! (with a librdkafka consumer) and `tally` counts what became of each
//! record sent.

use std::{
    collections::{BTreeMap, HashMap},
    sync::{
        atomic::{AtomicBool, Ordering},
        Arc, Mutex,
    },
    thread::JoinHandle,
    time::{Duration, Instant},
};

use rdkafka::{
    message::Message,
    producer::{BaseProducer, BaseRecord, DeliveryResult, Producer, ProducerContext},
    ClientConfig, ClientContext,
};

/// One send's report: the partition it was sent to, and its offset or the
/// error librdkafka gave up with.
#[derive(Debug, Clone)]
pub struct Report {
    pub value: String,
    pub partition: i32,
    pub outcome: Result<i64, String>,
}

type Reports = Arc<Mutex<Vec<Report>>>;

struct Deliveries(Reports);
impl ClientContext for Deliveries {}
impl ProducerContext for Deliveries {
    type DeliveryOpaque = Box<(i32, String)>;
    fn delivery(&self, result: &DeliveryResult<'_>, sent: Box<(i32, String)>) {
        let (partition, value) = *sent;
        let outcome = match result {
            Ok(m) => Ok(m.offset()),
            Err((e, _)) => Err(e.to_string()),
        };
        self.0.lock().unwrap().push(Report { value, partition, outcome });
    }
}

/// The producer thread; `finish` stops it.
pub struct Load {
    stop: Arc<AtomicBool>,
    reports: Reports,
    thread: Option<JoinHandle<usize>>,
}

/// Starts sending `rate` records a second, named `<prefix><n>`, to
/// partitions 0..`partitions` of `topic` in turn.
pub fn start(bootstrap: &str, topic: &str, partitions: i32, rate: u32, prefix: &str) -> Load {
    let stop = Arc::new(AtomicBool::new(false));
    let reports: Reports = Arc::default();
    let producer: BaseProducer<Deliveries> = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("acks", "all")
        .set("enable.idempotence", "true")
        .set("linger.ms", "2")
        .set("message.timeout.ms", "60000")
        .create_with_context(Deliveries(reports.clone()))
        .expect("producer");
    let (topic, prefix, flag) = (topic.to_string(), prefix.to_string(), stop.clone());
    let thread = std::thread::spawn(move || {
        let every = Duration::from_secs(1) / rate.max(1);
        let start = Instant::now();
        let mut n = 0usize;
        while !flag.load(Ordering::Relaxed) {
            let due = start + every * n as u32;
            if let Some(wait) = due.checked_duration_since(Instant::now()) {
                producer.poll(wait.min(Duration::from_millis(20)));
                continue;
            }
            let partition = (n % partitions as usize) as i32;
            let value = format!("{prefix}{n}");
            let record = BaseRecord::with_opaque_to(&topic, Box::new((partition, value.clone())))
                .partition(partition)
                .key(value.as_bytes())
                .payload(value.as_bytes());
            match producer.send(record) {
                Ok(()) => n += 1,
                Err(_) => {
                    producer.poll(Duration::from_millis(10));
                }
            }
            producer.poll(Duration::ZERO);
        }
        producer.flush(Duration::from_secs(90)).expect("every record reported within 90 s");
        n
    });
    Load { stop, reports, thread: Some(thread) }
}

impl Load {
    /// Records acknowledged so far.
    pub fn acknowledged(&self) -> usize {
        self.reports.lock().unwrap().iter().filter(|r| r.outcome.is_ok()).count()
    }

    /// Stops sending, waits for every report and returns them all.
    pub fn finish(mut self) -> Vec<Report> {
        self.stop.store(true, Ordering::Relaxed);
        let sent = self.thread.take().unwrap().join().expect("producer thread");
        let reports = std::mem::take(&mut *self.reports.lock().unwrap());
        assert_eq!(reports.len(), sent, "a delivery report for every record sent");
        reports
    }
}

/// What became of the records, partition by partition.
#[derive(Debug, Default, PartialEq)]
pub struct Tally {
    pub sent: usize,
    pub acknowledged: usize,
    /// Failed in the producer's view, yet in the log (allowed: the broker
    /// may have written a record whose answer was lost).
    pub failed_but_present: usize,
    /// Acknowledged and missing, or not at the offset acknowledged.
    pub lost: usize,
    pub duplicated: usize,
    /// In a partition's log out of the order they were sent in.
    pub reordered: usize,
}

impl std::fmt::Display for Tally {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(f, "| sent | acknowledged | failed, yet present | lost | duplicated | reordered |")?;
        writeln!(f, "|---:|---:|---:|---:|---:|---:|")?;
        write!(
            f,
            "| {} | {} | {} | {} | {} | {} |",
            self.sent, self.acknowledged, self.failed_but_present, self.lost, self.duplicated, self.reordered
        )
    }
}

/// Each partition's records as (offset, value), read from the start
/// through `bootstrap` by a consumer in group `group` until every
/// acknowledged record's offset has been passed (or 60 s).
pub fn read_back(
    bootstrap: &str,
    group: &str,
    topic: &str,
    partitions: i32,
    reports: &[Report],
) -> BTreeMap<i32, Vec<(i64, String)>> {
    let mut want_end: HashMap<i32, i64> = HashMap::new();
    for r in reports {
        if let Ok(offset) = r.outcome {
            let end = want_end.entry(r.partition).or_default();
            *end = (*end).max(offset + 1);
        }
    }
    let consumer = super::consume::from_start(bootstrap, group, topic, partitions, &[]);
    let mut read: BTreeMap<i32, Vec<(i64, String)>> = BTreeMap::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    let behind = |read: &BTreeMap<i32, Vec<(i64, String)>>| {
        want_end.iter().any(|(p, end)| read.get(p).and_then(|v| v.last()).map_or(0, |l| l.0 + 1) < *end)
    };
    while behind(&read) && Instant::now() < deadline {
        if let Some(Ok(m)) = consumer.poll(Duration::from_millis(200)) {
            let value = String::from_utf8(m.payload().unwrap_or_default().to_vec()).unwrap();
            read.entry(m.partition()).or_default().push((m.offset(), value));
        }
    }
    read
}

/// Counts what became of each record sent, against what was read back
/// (`read_back`). A record's number is what follows `prefix` in its value.
pub fn tally(read: &BTreeMap<i32, Vec<(i64, String)>>, prefix: &str, reports: &[Report]) -> Tally {
    let number = |v: &str| v.strip_prefix(prefix).and_then(|n| n.parse::<u64>().ok());
    let mut t = Tally { sent: reports.len(), ..Tally::default() };
    let mut at: HashMap<(i32, String), Vec<i64>> = HashMap::new();
    for (p, records) in read {
        let mut last = None;
        for (offset, value) in records {
            at.entry((*p, value.clone())).or_default().push(*offset);
            let n = number(value);
            if n.is_some() && last.is_some() && n < last {
                t.reordered += 1;
            }
            last = n.or(last);
        }
    }
    t.duplicated = at.values().filter(|offsets| offsets.len() > 1).count();
    for r in reports {
        let present = at.get(&(r.partition, r.value.clone()));
        match r.outcome {
            Ok(offset) => {
                t.acknowledged += 1;
                if present.is_none_or(|o| !o.contains(&offset)) {
                    t.lost += 1;
                }
            }
            Err(_) => t.failed_but_present += usize::from(present.is_some()),
        }
    }
    t
}
