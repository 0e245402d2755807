//! The per-stage request histograms in `/metrics`, after librdkafka (the
//! `rdkafka` crate) produced with acks=1 and acks=all to a topic with small
//! segments (so appends roll) and read everything back. Every stage of a
//! Produce must have seen time, and per API the stages' summed time must
//! add up to the requests' total time (size prefix read → response written)
//! within 10%: a stage left out or counted twice would show here.

mod common;

use std::{
    collections::BTreeMap,
    time::{Duration, Instant},
};

use common::{
    broker::Broker,
    produce::{produce_all, Outgoing},
    scrape::{scrape, sum, Sample},
};
use rdkafka::{
    admin::{AdminClient, AdminOptions, NewTopic, TopicReplication},
    client::DefaultClientContext,
    consumer::{BaseConsumer, Consumer},
    message::Message,
    ClientConfig, Offset, TopicPartitionList,
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

fn value(i: usize) -> Vec<u8> {
    format!("record-{i}-{}", "v".repeat(i % 300)).into_bytes()
}

/// Produces records `ids` with `acks`; records (partition, offset) → record id.
fn produce(bootstrap: &str, acks: &str, ids: std::ops::Range<usize>, stored: &mut BTreeMap<(i32, i64), usize>) {
    let settings = [("acks", acks), ("linger.ms", "1"), ("enable.idempotence", "false")];
    let records = ids.map(|i| Outgoing {
        id: i,
        key: None,
        value: value(i),
        partition: Some((i % PARTITIONS as usize) as i32),
        timestamp: None,
    });
    for d in produce_all(bootstrap, TOPIC, &settings, records) {
        let previous = stored.insert((d.partition, d.offset), d.id);
        assert!(previous.is_none(), "acks={acks}: offset {} of {} given twice", d.offset, d.partition);
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
