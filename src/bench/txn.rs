//! The read_committed librdkafka consumer of `shardlog bench produce
//! --client rdkafka --transactional` (`transactional`): it times every
//! record end to end (intended send time → receipt), since a transaction's
//! records become visible only at its commit.

use std::{
    sync::{
        atomic::{AtomicBool, Ordering},
        // The load generator's own locks (a client, not the broker): the
        // reader thread's tally, read once per run; no broker path takes one.
        mpsc,
        Arc,
        Mutex,
    },
    thread::JoinHandle,
    time::{Duration, Instant, SystemTime, UNIX_EPOCH},
};

use rdkafka::{
    config::ClientConfig,
    consumer::{BaseConsumer, Consumer},
    message::Message,
    Offset, TopicPartitionList,
};

use super::{
    measure::{record, Arrival, ConsumeCounts, ProduceCounts},
    payload::Stamp,
    Clock, Workload,
};

/// A read_committed librdkafka consumer of every partition of the topic,
/// from its end when started, in a thread of its own.
pub struct Reader {
    stop: Arc<AtomicBool>,
    /// Off any broker path: filled by the reader thread, read by the bench
    /// once the run is over.
    counts: Arc<Mutex<ConsumeCounts>>,
    handle: JoinHandle<()>,
}

impl Reader {
    pub fn start(w: &Workload, bootstrap: &str, clock: Clock) -> Result<Self, String> {
        let mut config = ClientConfig::new();
        super::rdkafka::sasl_config(&mut config);
        let consumer: BaseConsumer = config
            .set("bootstrap.servers", bootstrap)
            .set("group.id", "shardlog-bench-reader")
            .set("enable.auto.commit", "false")
            .set("isolation.level", "read_committed")
            .set("fetch.wait.max.ms", "500")
            .create()
            .map_err(|e| format!("librdkafka consumer for {bootstrap}: {e}"))?;
        let mut tpl = TopicPartitionList::new();
        for p in 0..w.partitions {
            let (_, end) = consumer
                .fetch_watermarks(&w.topic, p, Duration::from_secs(10))
                .map_err(|e| format!("{}-{p} end offset: {e}", w.topic))?;
            tpl.add_partition_offset(&w.topic, p, Offset::Offset(end)).map_err(|e| e.to_string())?;
        }
        consumer.assign(&tpl).map_err(|e| format!("assign: {e}"))?;
        let (stop, counts) = (Arc::new(AtomicBool::new(false)), Arc::new(Mutex::new(ConsumeCounts::default())));
        let (ready, is_ready) = mpsc::channel();
        let (flag, sink, run) = (stop.clone(), counts.clone(), w.run);
        let handle = std::thread::spawn(move || {
            let _ = ready.send(());
            while !flag.load(Ordering::Relaxed) {
                let Some(m) = consumer.poll(Duration::from_millis(50)) else { continue };
                let now_ns = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos() as i64);
                let mut c = sink.lock().expect("reader counts");
                match m {
                    Ok(m) => see(&mut c, run, m.partition(), m.payload(), now_ns, clock),
                    Err(e) if c.failures.len() < 10 => c.failures.push(format!("read_committed consumer: {e}")),
                    Err(_) => {}
                }
            }
        });
        is_ready.recv().map_err(|_| "the reader thread did not start".to_string())?;
        Ok(Self { stop, counts, handle })
    }

    /// Waits (up to 15 s) until every acknowledged record was read, then
    /// stops the consumer; what it saw.
    pub fn finish(self, produce: &ProduceCounts) -> ConsumeCounts {
        let deadline = Instant::now() + Duration::from_secs(15);
        while Instant::now() < deadline {
            let c = self.counts.lock().expect("reader counts");
            let seen: u64 =
                produce.acked_by_stream.iter().map(|(k, n)| c.streams.get(k).map_or(0, |a| a.seen_below(*n))).sum();
            if seen >= produce.acked {
                break;
            }
            drop(c);
            std::thread::sleep(Duration::from_millis(20));
        }
        self.stop.store(true, Ordering::Relaxed);
        let _ = self.handle.join();
        std::mem::take(&mut *self.counts.lock().expect("reader counts"))
    }
}

fn see(c: &mut ConsumeCounts, run: u32, partition: i32, value: Option<&[u8]>, now_ns: i64, clock: Clock) {
    let size = value.map_or(0, <[u8]>::len) as u64;
    c.received += 1;
    c.received_bytes += size;
    match value.and_then(Stamp::read) {
        Some(s) if s.run == run => {
            match c.streams.entry((s.stream, partition)).or_default().see(s.seq) {
                Arrival::InOrder => {}
                Arrival::Early | Arrival::Late => c.reordered += 1,
                Arrival::Duplicate => c.duplicated += 1,
            }
            let latency = ((now_ns - s.intended_ns).max(0) / 1000) as u64;
            record(&mut c.so_far, latency, 1);
            if s.intended_ns >= clock.measure_from_ns() {
                record(&mut c.latency, latency, 1);
                c.measured += 1;
                c.measured_bytes += size;
            }
        }
        _ => c.foreign += 1,
    }
}
