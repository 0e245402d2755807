//! The per-stage request histograms in `/metrics`, after librdkafka (the
//! `rdkafka` crate) produced with acks=1 and acks=all to a topic with small
//! segments (so appends roll) and read everything back. Every stage of a
//! Produce must have seen time, and per API the stages' summed time must
//! add up to the requests' total time (size prefix read → response written)
//! within 10%: a stage left out or counted twice would show here.

mod common;

use std::{
    collections::BTreeMap,
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use common::{
    broker::Broker,
    scrape::{scrape, sum, Sample},
};
use rdkafka::{
    admin::{AdminClient, AdminOptions, NewTopic, TopicReplication},
    client::DefaultClientContext,
    consumer::{BaseConsumer, Consumer},
    message::Message,
    producer::{BaseProducer, BaseRecord, DeliveryResult, Producer, ProducerContext},
    ClientConfig, ClientContext, Offset, TopicPartitionList,
};

const TOPIC: &str = "staged";
const PARTITIONS: i32 = 4;
const RECORDS_PER_ACKS: usize = 3_000;
/// Small segments, so some appends roll (the segment_roll stage).
const SEGMENT_BYTES: &str = "65536";

/// Every stage the broker reports, as named in `metrics::stages`.
const STAGES: [&str; 12] = [
    "read_wait",
    "decode",
    "handle",
    "cross_shard_hop",
    "write_permit",
    "segment_roll",
    "dma_write",
    "fdatasync",
    "append",
    "encode",
    "response_wait",
    "socket_write",
];

/// Produce stages that must have taken time in this run. response_wait is
/// left out: it is zero whenever the client has one request outstanding.
const PRODUCE_BUSY: [&str; 10] = [
    "read_wait",
    "decode",
    "handle",
    "cross_shard_hop",
    "write_permit",
    "segment_roll",
    "dma_write",
    "fdatasync",
    "append",
    "encode",
];

struct Deliveries(Arc<Mutex<Vec<(usize, i32, i64, Option<String>)>>>);
impl ClientContext for Deliveries {}
impl ProducerContext for Deliveries {
    type DeliveryOpaque = Box<usize>;
    fn delivery(&self, result: &DeliveryResult<'_>, id: Box<usize>) {
        let entry = match result {
            Ok(m) => (*id, m.partition(), m.offset(), None),
            Err((e, m)) => (*id, m.partition(), -1, Some(e.to_string())),
        };
        self.0.lock().unwrap().push(entry);
    }
}

fn value(i: usize) -> Vec<u8> {
    format!("record-{i}-{}", "v".repeat(i % 300)).into_bytes()
}

/// Produces records `ids` with `acks`; returns (partition, offset) → record id.
fn produce(bootstrap: &str, acks: &str, ids: std::ops::Range<usize>, stored: &mut BTreeMap<(i32, i64), usize>) {
    let log = Arc::new(Mutex::new(Vec::new()));
    let producer: BaseProducer<Deliveries> = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("acks", acks)
        .set("linger.ms", "1")
        .set("enable.idempotence", "false")
        .create_with_context(Deliveries(log.clone()))
        .expect("producer");
    for i in ids.clone() {
        let payload = value(i);
        let mut rec = BaseRecord::<(), Vec<u8>, Box<usize>>::with_opaque_to(TOPIC, Box::new(i))
            .payload(&payload)
            .partition((i % PARTITIONS as usize) as i32);
        loop {
            match producer.send(rec) {
                Ok(()) => break,
                Err((_, back)) => {
                    producer.poll(Duration::from_millis(10));
                    rec = back;
                }
            }
        }
        producer.poll(Duration::ZERO);
    }
    producer.flush(Duration::from_secs(60)).expect("flush");
    let log = log.lock().unwrap();
    assert_eq!(log.len(), ids.len(), "every record got a delivery report");
    for (i, partition, offset, error) in log.iter() {
        assert!(error.is_none(), "acks={acks}: record {i} failed: {error:?}");
        assert!(stored.insert((*partition, *offset), *i).is_none(), "offset {offset} of {partition} given twice");
    }
}

/// Reads every partition from the start; each record must be the one the
/// producer's delivery report placed at that offset.
fn consume_all(bootstrap: &str, stored: &BTreeMap<(i32, i64), usize>) {
    let c: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("group.id", "stages")
        .set("enable.auto.commit", "false")
        .set("fetch.wait.max.ms", "50")
        .create()
        .expect("consumer");
    let mut tpl = TopicPartitionList::new();
    for p in 0..PARTITIONS {
        tpl.add_partition_offset(TOPIC, p, Offset::Beginning).unwrap();
    }
    c.assign(&tpl).unwrap();
    let mut seen = 0;
    let deadline = Instant::now() + Duration::from_secs(60);
    while seen < stored.len() && Instant::now() < deadline {
        let Some(m) = c.poll(Duration::from_millis(200)) else { continue };
        let m = m.expect("consume");
        let id = stored.get(&(m.partition(), m.offset())).expect("a record at an acknowledged offset");
        assert_eq!(m.payload().unwrap_or_default(), value(*id), "record at {}-{}", m.partition(), m.offset());
        seen += 1;
    }
    assert_eq!(seen, stored.len(), "consumed every acknowledged record");
}

/// Per stage, its time summed over the API's answered requests.
fn stage_sums(samples: &[Sample], api: &str) -> BTreeMap<&'static str, f64> {
    STAGES
        .iter()
        .map(|s| (*s, sum(samples, "shardlog_request_stage_seconds_sum", &[("api", api), ("stage", s)])))
        .collect()
}

/// The stages of `api` add up to its total within 10%, every stage counted
/// each request, and the breakdown by total bucket agrees with the stages.
fn check_adds_up(samples: &[Sample], api: &str) -> BTreeMap<&'static str, f64> {
    let count = sum(samples, "shardlog_request_total_seconds_count", &[("api", api)]);
    let total = sum(samples, "shardlog_request_total_seconds_sum", &[("api", api)]);
    assert!(count > 0.0 && total > 0.0, "{api}: requests were traced (count {count}, seconds {total})");
    for s in STAGES {
        let n = sum(samples, "shardlog_request_stage_seconds_count", &[("api", api), ("stage", s)]);
        assert_eq!(n, count, "{api}: stage {s} counted every request");
    }
    let stages = stage_sums(samples, api);
    let summed: f64 = stages.values().sum();
    let off = (summed - total).abs() / total;
    assert!(
        off <= 0.10,
        "{api}: stages add up to {summed:.6} s, total {total:.6} s ({:.1}% off): {stages:?}",
        off * 100.0
    );
    for (s, secs) in &stages {
        let by_total = sum(samples, "shardlog_request_stage_seconds_by_total_total", &[("api", api), ("stage", s)]);
        assert!((by_total - secs).abs() <= 1e-6 + secs * 1e-6, "{api}/{s}: by-total {by_total} vs {secs}");
    }
    stages
}

#[test]
fn stages_have_time_and_add_up_to_each_requests_total() {
    let dir = common::tempdir().unwrap();
    let broker = Broker::start(dir.path(), 1);
    let admin: AdminClient<DefaultClientContext> =
        ClientConfig::new().set("bootstrap.servers", broker.bootstrap()).create().unwrap();
    let topic = NewTopic::new(TOPIC, PARTITIONS, TopicReplication::Fixed(1)).set("segment.bytes", SEGMENT_BYTES);
    let created = futures_lite::future::block_on(
        admin.create_topics(&[topic], &AdminOptions::new().operation_timeout(Some(Duration::from_secs(10)))),
    )
    .unwrap();
    assert!(created[0].is_ok(), "create topic: {:?}", created[0]);
    let mut stored = BTreeMap::new();
    produce(&broker.bootstrap(), "1", 0..RECORDS_PER_ACKS, &mut stored);
    produce(&broker.bootstrap(), "all", RECORDS_PER_ACKS..2 * RECORDS_PER_ACKS, &mut stored);
    consume_all(&broker.bootstrap(), &stored);

    let samples = scrape(&broker);
    let segments = sum(&samples, "shardlog_partition_segments", &[("topic", TOPIC)]);
    assert!(segments > f64::from(PARTITIONS), "appends rolled segments ({segments} segments)");
    let produced = sum(&samples, "shardlog_requests_total", &[("api", "Produce")]);
    let traced = sum(&samples, "shardlog_request_total_seconds_count", &[("api", "Produce")]);
    assert_eq!(traced, produced, "every answered Produce was traced");
    let stages = check_adds_up(&samples, "Produce");
    for s in PRODUCE_BUSY {
        assert!(stages[s] > 0.0, "Produce stage {s} saw no time: {stages:?}");
    }
    // The acks=all appends waited for syncs the logs counted.
    let fsyncs = sum(&samples, "shardlog_fsync_seconds_count", &[]);
    assert!(fsyncs > 0.0, "the logs synced");
    check_adds_up(&samples, "Fetch");
    eprintln!("Produce stage seconds: {stages:?}");
}
