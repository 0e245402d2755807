//! `/metrics` scraped with a real HTTP client (Python's urllib, parsed by
//! the official Prometheus client's OpenMetrics parser) during a produce
//! and consume run; the numbers must agree with what the test did.

mod common;

use std::{collections::BTreeMap, process::Command};

use bytes::Bytes;
use common::{
    broker::Broker,
    scrape::{sum, Sample},
    wire::{create_topic, fetch_request, produce, topic_name, Wire},
};
use kafka_protocol::{
    messages::{
        offset_commit_request::{OffsetCommitRequestPartition, OffsetCommitRequestTopic},
        ApiKey, FetchResponse, GroupId, OffsetCommitRequest, OffsetCommitResponse,
    },
    protocol::StrBytes,
};

const TOPIC: &str = "metered";
const PARTITIONS: i32 = 4;

fn scrape(broker: &Broker) -> Vec<Sample> {
    assert!(broker.metrics_url.starts_with("http://127.0.0.1:"), "banner names the metrics URL");
    common::scrape::scrape(broker)
}

fn batch(records: usize, seed: u8) -> Bytes {
    let values: Vec<Vec<u8>> = (0..records).map(|i| vec![seed.wrapping_add(i as u8); 40 + i]).collect();
    let recs: Vec<_> = values
        .iter()
        .map(|v| shardlog::protocol::record_batch::Record { key: None, value: Some(v), timestamp_delta: 0 })
        .collect();
    Bytes::from(shardlog::protocol::record_batch::encode_batch(&recs, 1_800_000_000_000))
}

fn commit(w: &mut Wire, group: &str, offsets: &[(i32, i64)]) {
    let mut t = OffsetCommitRequestTopic::default();
    t.name = topic_name(TOPIC);
    for &(p, o) in offsets {
        let mut pc = OffsetCommitRequestPartition::default();
        pc.partition_index = p;
        pc.committed_offset = o;
        pc.committed_leader_epoch = -1;
        t.partitions.push(pc);
    }
    let mut req = OffsetCommitRequest::default();
    req.group_id = GroupId(StrBytes::from_string(group.into()));
    req.generation_id_or_member_epoch = -1;
    req.topics.push(t);
    let resp: OffsetCommitResponse = w.call(ApiKey::OffsetCommit, 8, &req);
    assert!(resp.topics[0].partitions.iter().all(|p| p.error_code == 0));
}

#[test]
fn scraped_metrics_agree_with_a_produce_and_consume_run() {
    let dir = common::tempdir().unwrap();
    let broker = Broker::start(&dir.path().join("data"), 2);
    let mut w = Wire::connect(&broker.bootstrap());
    assert_eq!(create_topic(&mut w, TOPIC, PARTITIONS), 0);

    // Phase 1: records in. Partition p gets p+1 batches of 3 + p records.
    let mut records = BTreeMap::new();
    let mut bytes = BTreeMap::new();
    let mut produce_requests = 0;
    for p in 0..PARTITIONS {
        for b in 0..=p {
            let batch = batch(3 + p as usize, b as u8);
            *bytes.entry(p).or_insert(0usize) += batch.len();
            let acks = if b % 2 == 0 { -1 } else { 1 };
            assert_eq!(produce(&mut w, TOPIC, p, batch, acks).0, 0);
            produce_requests += 1;
            *records.entry(p).or_insert(0i64) += 3 + i64::from(p);
        }
    }
    // One refused: a partition the topic does not have.
    assert_eq!(produce(&mut w, TOPIC, 99, batch(1, 0), 1).0, 3);
    produce_requests += 1;

    let mid = scrape(&broker);
    for p in 0..PARTITIONS {
        let labels = [("topic", TOPIC), ("partition", &p.to_string())];
        assert_eq!(
            sum(&mid, "shardlog_partition_records_in_total", &labels),
            records[&p] as f64,
            "records in, partition {p}"
        );
        assert_eq!(
            sum(&mid, "shardlog_partition_bytes_in_total", &labels),
            bytes[&p] as f64,
            "bytes in, partition {p}"
        );
        assert_eq!(sum(&mid, "shardlog_partition_log_end_offset", &labels), records[&p] as f64);
        assert_eq!(sum(&mid, "shardlog_partition_log_start_offset", &labels), 0.0);
        assert_eq!(sum(&mid, "shardlog_partition_segments", &labels), 1.0);
        assert!(sum(&mid, "shardlog_partition_segment_bytes", &labels) >= bytes[&p] as f64);
        assert_eq!(sum(&mid, "shardlog_partition_records_out_total", &labels), 0.0, "nothing fetched yet");
    }
    assert_eq!(sum(&mid, "shardlog_requests_total", &[("api", "Produce"), ("version", "9")]), produce_requests as f64);
    assert_eq!(
        sum(&mid, "shardlog_request_latency_seconds_count", &[("api", "Produce")]),
        produce_requests as f64,
        "one latency observation per request"
    );
    assert_eq!(sum(&mid, "shardlog_produce_errors_total", &[("code", "3")]), 1.0, "the unknown partition");
    assert_eq!(sum(&mid, "shardlog_connections", &[]), 1.0, "the test's one connection");
    // acks=all batches were synced: one fsync each at least (batches 0 and 2).
    assert!(sum(&mid, "shardlog_fsync_seconds_count", &[]) >= 6.0);
    assert!(sum(&mid, "shardlog_group_commit_appends_count", &[]) >= 6.0);
    // The shard's wake-up probe (every 10 ms) has run since the start.
    assert!(sum(&mid, "shardlog_shard_wakeup_lag_seconds_count", &[("shard", "0")]) >= 1.0);
    assert!(sum(&mid, "shardlog_batch_cache_bytes", &[]) >= bytes.values().sum::<usize>() as f64);

    // Phase 2: consume everything; commit part of it for a group.
    let everything: Vec<(i32, i64)> = (0..PARTITIONS).map(|p| (p, 0)).collect();
    let resp: FetchResponse = w.call(ApiKey::Fetch, 12, &fetch_request(TOPIC, &everything, 0, 1));
    let fetched: usize = resp.responses[0].partitions.iter().map(|p| p.records.as_ref().map_or(0, Bytes::len)).sum();
    assert_eq!(fetched, bytes.values().sum::<usize>());
    commit(&mut w, "lagging", &[(0, 1), (3, 10)]);

    let end = scrape(&broker);
    for p in 0..PARTITIONS {
        let labels = [("topic", TOPIC), ("partition", &p.to_string())];
        assert_eq!(
            sum(&end, "shardlog_partition_records_out_total", &labels),
            records[&p] as f64,
            "records out, partition {p}"
        );
        assert_eq!(
            sum(&end, "shardlog_partition_bytes_out_total", &labels),
            bytes[&p] as f64,
            "bytes out, partition {p}"
        );
    }
    assert_eq!(sum(&end, "shardlog_requests_total", &[("api", "Fetch"), ("version", "12")]), 1.0);
    let lag = |p: &str| sum(&end, "shardlog_group_lag", &[("group", "lagging"), ("topic", TOPIC), ("partition", p)]);
    assert_eq!(lag("0"), (records[&0] - 1) as f64);
    assert_eq!(lag("3"), (records[&3] - 10) as f64);
    assert_eq!(sum(&end, "shardlog_group_committed_offset", &[("group", "lagging"), ("partition", "3")]), 10.0);
    // The commit went to its coordinator's __consumer_offsets partition.
    assert!(sum(&end, "shardlog_partition_records_in_total", &[("topic", "__consumer_offsets")]) >= 2.0);
    // Two shards answered; requests served on one shard for partitions of
    // the other travelled as messages.
    let shards: std::collections::BTreeSet<&str> =
        end.iter().filter(|s| s.name == "shardlog_connections").map(|s| s.labels["shard"].as_str()).collect();
    assert_eq!(shards.len(), 2);
    assert_eq!(
        sum(&end, "shardlog_cross_shard_messages_sent_total", &[]),
        sum(&end, "shardlog_cross_shard_messages_received_total", &[]),
        "every message sent was received"
    );
    assert!(sum(&end, "shardlog_cross_shard_messages_sent_total", &[]) > 0.0);
    assert_eq!(sum(&end, "shardlog_cross_shard_queue_depth", &[]), 0.0);
    assert_eq!(sum(&end, "shardlog_long_poll_waiters", &[]), 0.0);
}

#[test]
fn a_long_poll_shows_as_a_waiter_and_other_paths_are_refused() {
    let dir = common::tempdir().unwrap();
    let broker = Broker::start(&dir.path().join("data"), 1);
    let mut w = Wire::connect(&broker.bootstrap());
    assert_eq!(create_topic(&mut w, "idle", 1), 0);
    // A fetch that waits 3 s for data that never comes.
    w.send(ApiKey::Fetch, 12, &fetch_request("idle", &[(0, 0)], 3000, 1));
    std::thread::sleep(std::time::Duration::from_millis(300));
    let during = scrape(&broker);
    assert_eq!(sum(&during, "shardlog_long_poll_waiters", &[]), 1.0);
    assert_eq!(sum(&during, "shardlog_requests_in_flight", &[]), 1.0);
    let _: FetchResponse = w.receive(ApiKey::Fetch, 12);
    let out = Command::new("curl")
        .args(["-s", "-o", "/dev/null", "-w", "%{http_code}"])
        .arg(broker.metrics_url.replace("/metrics", "/elsewhere"))
        .output()
        .expect("curl (tests/run-all.sh installs it)");
    assert_eq!(String::from_utf8_lossy(&out.stdout), "404");
}
