//! Resource limits: `max_connections` closes connections beyond it (and
//! accepts again once one goes); the per-connection budget of in-flight
//! request bytes stops the broker reading a connection whose earlier
//! requests are not answered yet, instead of buffering without bound.

mod common;

use std::time::{Duration, Instant};

use bytes::Bytes;
use common::{broker::Broker, wire::*};
use kafka_protocol::messages::{
    list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic},
    produce_request::{PartitionProduceData, TopicProduceData},
    ApiKey, ApiVersionsRequest, ApiVersionsResponse, FetchResponse, ListOffsetsRequest, ListOffsetsResponse,
    ProduceRequest, ProduceResponse,
};
use shardlog::protocol::record_batch::{encode_batch, Record};

fn api_versions_ok(w: &mut Wire) -> bool {
    let resp: ApiVersionsResponse = w.call(ApiKey::ApiVersions, 3, &ApiVersionsRequest::default());
    resp.error_code == 0
}

#[test]
fn connections_beyond_max_connections_are_closed() {
    let dir = common::tempdir().unwrap();
    let broker = Broker::start_with_config(&dir.path().join("data"), 1, "max_connections = 3\n", &[]);
    let mut open: Vec<Wire> = (0..3).map(|_| Wire::connect(&broker.bootstrap())).collect();
    for w in &mut open {
        assert!(api_versions_ok(w));
    }
    let mut extra = Wire::connect(&broker.bootstrap());
    assert!(extra.is_closed(), "a fourth connection is closed");
    drop(open.pop());
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let mut again = Wire::connect(&broker.bootstrap());
        use std::io::Write;
        let mut req = Vec::new();
        // ApiVersions v0, correlation 1, no client id.
        req.extend_from_slice(&[0, 0, 0, 10, 0, 18, 0, 0, 0, 0, 0, 1, 255, 255]);
        if again.stream.write_all(&req).is_ok() && !again.is_closed_quietly() {
            break;
        }
        assert!(Instant::now() < deadline, "a slot freed by a closed connection is not reused");
        std::thread::sleep(Duration::from_millis(50));
    }
    let (found, log) = broker.wait_for_log("refusing connection from 127.0.0.1");
    assert!(found, "logged with the peer: {log}");
}

fn produce_request(topic: &str, batch: Bytes) -> ProduceRequest {
    let mut pd = PartitionProduceData::default();
    pd.index = 0;
    pd.records = Some(batch);
    let mut td = TopicProduceData::default();
    td.name = topic_name(topic);
    td.partition_data.push(pd);
    let mut req = ProduceRequest::default();
    req.acks = 1;
    req.timeout_ms = 10_000;
    req.topic_data.push(td);
    req
}

fn log_end(w: &mut Wire, topic: &str) -> i64 {
    let mut p = ListOffsetsPartition::default();
    p.partition_index = 0;
    p.timestamp = -1;
    let mut t = ListOffsetsTopic::default();
    t.name = topic_name(topic);
    t.partitions.push(p);
    let mut req = ListOffsetsRequest::default();
    req.replica_id = (-1).into();
    req.topics.push(t);
    let resp: ListOffsetsResponse = w.call(ApiKey::ListOffsets, 7, &req);
    resp.topics[0].partitions[0].offset
}

#[test]
fn a_connection_over_its_in_flight_budget_is_not_read() {
    let dir = common::tempdir().unwrap();
    let config = "max_inflight_request_bytes_per_connection = 1048576\n";
    let broker = Broker::start_with_config(&dir.path().join("data"), 1, config, &[]);
    let mut admin = Wire::connect(&broker.bootstrap());
    assert_eq!(create_topic(&mut admin, "idle", 1), 0);
    assert_eq!(create_topic(&mut admin, "data", 1), 0);
    // Three batches of 100 records of 4000 bytes: ~400 KB each.
    let value = vec![7u8; 4000];
    let records: Vec<Record<'_>> =
        (0..100).map(|i| Record { key: None, value: Some(&value), timestamp_delta: i }).collect();
    let batch = || Bytes::from(encode_batch(&records, 1_790_000_000_000));
    let (first, second, third) = (batch(), batch(), batch());
    let (n1, n2) = (100, 100);

    // A long poll that holds its answer for 3 s, then three ~400 KB
    // produces behind it on the same connection: the first two fit in the
    // 1 MiB budget (they are handled; their answers wait for the fetch's),
    // the third does not, so it is not even read until the fetch answers.
    let mut w = Wire::connect(&broker.bootstrap());
    w.send(ApiKey::Fetch, 12, &fetch_request("idle", &[(0, 0)], 3000, 1));
    let sent = Instant::now();
    w.send(ApiKey::Produce, 9, &produce_request("data", first));
    w.send(ApiKey::Produce, 9, &produce_request("data", second));
    w.send(ApiKey::Produce, 9, &produce_request("data", third));
    std::thread::sleep(Duration::from_millis(1000));
    let end = log_end(&mut admin, "data");
    assert!(sent.elapsed() < Duration::from_millis(2500), "checked while the fetch is still held");
    assert_eq!(end, n1 + n2, "the request beyond the budget waits unread");

    let _: FetchResponse = w.receive(ApiKey::Fetch, 12);
    for _ in 0..3 {
        let resp: ProduceResponse = w.receive(ApiKey::Produce, 9);
        assert_eq!(resp.responses[0].partition_responses[0].error_code, 0);
    }
    assert_eq!(log_end(&mut admin, "data"), n1 + n2 + 100, "and is handled once the budget frees up");
}

/// Resident memory of a process, from /proc.
fn rss_bytes(pid: i32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let kb: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap();
    kb * 1024
}

#[test]
fn a_consumer_that_stops_reading_holds_bounded_memory() {
    let dir = common::tempdir().unwrap();
    let broker = Broker::start(&dir.path().join("data"), 1);
    let mut producer = Wire::connect(&broker.bootstrap());
    assert_eq!(create_topic(&mut producer, "flood", 1), 0);
    let value = vec![3u8; 8000];
    let records: Vec<Record<'_>> =
        (0..64).map(|i| Record { key: None, value: Some(&value), timestamp_delta: i }).collect();
    let batch = Bytes::from(encode_batch(&records, 1_790_000_000_000)); // ~512 KB
    for _ in 0..20 {
        assert_eq!(produce(&mut producer, "flood", 0, batch.clone(), 1).0, 0);
    }
    let before = rss_bytes(broker.pid());

    // A consumer pipelines fetches of everything and never reads an answer;
    // its socket fills, the broker stops reading it, and it stays stuck.
    let mut slow = Wire::connect(&broker.bootstrap());
    slow.stream.set_write_timeout(Some(Duration::from_millis(500))).unwrap();
    let mut sent = 0;
    for i in 0..100_000 {
        let mut req = fetch_request("flood", &[(0, (i % 20) * 64)], 0, 1);
        req.topics[0].partitions[0].partition_max_bytes = 8 << 20;
        let frame = shardlog::protocol::client::request_frame(ApiKey::Fetch, 12, i as i32, Some(""), &req).unwrap();
        use std::io::Write;
        if slow.stream.write_all(&frame).is_err() {
            break;
        }
        sent += 1;
    }
    assert!(sent < 100_000, "the broker kept reading requests it could not answer ({sent} sent)");

    // Meanwhile producers go on: 200 more batches (~100 MB).
    for _ in 0..200 {
        assert_eq!(produce(&mut producer, "flood", 0, batch.clone(), 1).0, 0);
    }
    let after = rss_bytes(broker.pid());
    let grown = after.saturating_sub(before);
    eprintln!("{sent} fetches sent before the socket filled; broker RSS {before} -> {after} bytes");
    // 16 answers in flight of up to 8 MiB each, plus the batch cache.
    assert!(grown < 200 << 20, "broker memory grew by {grown} bytes with one stuck consumer");
}
