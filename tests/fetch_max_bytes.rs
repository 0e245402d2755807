//! Fetch honours the request-level `max_bytes` (Kafka's `fetch.max.bytes`):
//! a response holds at most that many record bytes, except that the first
//! batch is returned whole so a consumer always makes progress.
//!
//! A librdkafka consumer sizes its receive buffer from `fetch.max.bytes`;
//! a larger answer is "Invalid response size" and the fetch is retried for
//! ever, so the consumer below would never finish.

mod common;

use std::time::{Duration, Instant};

use common::{broker::Broker, wire::Wire};
use kafka_protocol::messages::{ApiKey, FetchResponse};
use rdkafka::{
    consumer::{BaseConsumer, Consumer},
    ClientConfig, Message, Offset, TopicPartitionList,
};

const TOPIC: &str = "fetch-limit";
/// 60 records of 50 KB: 3 MB in one partition, in batches of at most 200 KB.
const RECORDS: usize = 60;
const VALUE_BYTES: usize = 50_000;
const FETCH_MAX_BYTES: usize = 1_000_000;

fn value(i: usize) -> String {
    format!("{i:06}-{}", "v".repeat(VALUE_BYTES))
}

#[test]
fn fetch_respects_the_request_max_bytes() {
    let dir = common::tempdir().unwrap();
    let broker = Broker::start(&dir.path().join("data"), 1);
    let mut w = Wire::connect(&broker.bootstrap());
    assert_eq!(common::wire::create_topic(&mut w, TOPIC, 1), 0);
    let records: Vec<(i32, String)> = (0..RECORDS).map(|i| (0, value(i))).collect();
    let produced = common::produce::produce_with(&broker.bootstrap(), TOPIC, &records, &[("batch.size", "200000")]);

    // A librdkafka consumer whose receive buffer is sized from fetch.max.bytes.
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", broker.bootstrap())
        .set("group.id", "fetch-limit")
        .set("enable.auto.commit", "false")
        .set("fetch.max.bytes", FETCH_MAX_BYTES.to_string())
        .set("max.partition.fetch.bytes", (10 << 20).to_string())
        .set("receive.message.max.bytes", (FETCH_MAX_BYTES + 512).to_string())
        .create()
        .expect("consumer");
    let mut tpl = TopicPartitionList::new();
    tpl.add_partition_offset(TOPIC, 0, Offset::Beginning).unwrap();
    consumer.assign(&tpl).unwrap();
    let mut got = Vec::new();
    let mut errors = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    while got.len() < RECORDS && Instant::now() < deadline {
        match consumer.poll(Duration::from_millis(200)) {
            Some(Ok(m)) => got.push((m.offset(), String::from_utf8(m.payload().unwrap().to_vec()).unwrap())),
            Some(Err(e)) => errors.push(e.to_string()),
            None => {}
        }
    }
    let want: Vec<(i64, String)> = produced.into_iter().map(|(_, o, v)| (o, v)).collect();
    assert_eq!(got.len(), want.len(), "consumed {} of {RECORDS}; errors: {errors:?}", got.len());
    assert!(got == want, "records differ from what was produced");

    // On the wire: with a 10 MB partition limit and a 300 KB request limit,
    // the answer stops at 300 KB, or at the first batch if that is larger.
    let mut req = common::wire::fetch_request(TOPIC, &[(0, 0)], 0, 0);
    req.max_bytes = 300_000;
    req.topics[0].partitions[0].partition_max_bytes = 10 << 20;
    let resp: FetchResponse = w.call(ApiKey::Fetch, 12, &req);
    let records = resp.responses[0].partitions[0].records.clone().unwrap_or_default();
    let batches = common::wire::batches(&records);
    assert!(!batches.is_empty(), "the first batch is always returned");
    let first_len = common::batches_in(&records)[0].2;
    assert!(
        records.len() <= 300_000 || batches.len() == 1,
        "{} bytes in {} batches (first {first_len}) exceed max_bytes 300000",
        records.len(),
        batches.len()
    );
}

/// A fetch of many partitions under a small `max_bytes` reads only what it
/// can answer: the broker's bytes served (its own counter) grow by about
/// the budget, not by every partition's `partition_max_bytes`. (Reading
/// them all and dropping most made a consumer of 5,000 partitions hold
/// gigabytes and fall behind.)
#[test]
fn a_wide_fetch_reads_only_what_fits_its_budget() {
    const WIDE: &str = "wide";
    const PARTITIONS: i32 = 40;
    let dir = common::tempdir().unwrap();
    let broker = Broker::start(&dir.path().join("data"), 1);
    let mut w = Wire::connect(&broker.bootstrap());
    assert_eq!(common::wire::create_topic(&mut w, WIDE, PARTITIONS), 0);
    let mut rng = common::Rng::new(31);
    let mut largest = 0;
    for p in 0..PARTITIONS {
        let batch = common::random_batch(&mut rng, 64, 2048).freeze();
        largest = largest.max(batch.len());
        assert_eq!(common::wire::produce(&mut w, WIDE, p, batch, 1).0, 0, "partition {p}");
    }
    let served =
        || common::broker::metric_sum(&common::broker::metrics_text(&broker), "shardlog_partition_bytes_out", WIDE);
    let before = served();
    // The last partition asks for an offset its log does not hold: left
    // unread by the budget, it is still told so.
    let all: Vec<(i32, i64)> = (0..PARTITIONS).map(|p| (p, if p == PARTITIONS - 1 { 999 } else { 0 })).collect();
    let mut req = common::wire::fetch_request(WIDE, &all, 0, 0);
    req.max_bytes = 200_000;
    let resp: FetchResponse = w.call(ApiKey::Fetch, 12, &req);
    let answered: usize = resp.responses[0].partitions.iter().map(|p| p.records.as_ref().map_or(0, |r| r.len())).sum();
    assert_eq!(resp.responses[0].partitions.len(), PARTITIONS as usize, "every partition is echoed");
    let last = &resp.responses[0].partitions[PARTITIONS as usize - 1];
    assert_eq!(last.error_code, 1, "OFFSET_OUT_OF_RANGE past the budget too");
    assert!(answered > 0 && answered <= 200_000 + largest, "{answered} bytes answered");
    let read = served() - before;
    assert!(
        read <= (200_000 + 2 * largest) as f64,
        "{read} bytes read for a 200000-byte answer ({PARTITIONS} partitions of ~{largest} bytes each)"
    );
}
