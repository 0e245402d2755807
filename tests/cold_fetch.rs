//! Fetches of data in sealed segments go out with `sendfile` from the page
//! cache. After a restart (empty batch cache), every batch of a log spread
//! over many small segments is fetched back byte for byte, with assorted
//! byte budgets; and a client that does not read for a while (socket buffer
//! full) still gets a complete, correct response.

mod common;

use std::{collections::BTreeMap, io::Read, time::Duration};

use bytes::Bytes;
use common::{broker::Broker, random_batch, wire::*, Rng};
use kafka_protocol::{
    messages::{
        create_topics_request::{CreatableTopic, CreatableTopicConfig},
        ApiKey, ApiVersionsRequest, ApiVersionsResponse, CreateTopicsRequest, CreateTopicsResponse, FetchRequest,
        FetchResponse,
    },
    protocol::StrBytes,
};
use shardlog::protocol::client::{decode_response, response_len, Response};

const TOPIC: &str = "cold";
const PARTITIONS: i32 = 4;
const SEGMENT_BYTES: usize = 1 << 20;
const BATCHES_PER_PARTITION: usize = 40;

type Sent = BTreeMap<i32, BTreeMap<i64, Vec<u8>>>;

#[test]
fn sealed_segments_are_fetched_whole_and_exact() {
    let dir = common::tempdir().unwrap();
    let port = common::broker::free_port();
    let mut broker = Broker::start_on(dir.path(), port, 1, &[]);
    let mut w = Wire::connect(&broker.bootstrap());
    create_small_segment_topic(&mut w);
    let sent = produce_all(&mut w);
    drop(w);
    broker.stop();
    let broker = Broker::start_on(dir.path(), port, 1, &[("SHARDLOG_LOG", "debug")]);

    // Every partition from offset 0 with budgets from a few bytes to 3 MiB:
    // whole batches, in order, as produced.
    let mut w = Wire::connect(&broker.bootstrap());
    let mut rng = Rng::new(5);
    for p in 0..PARTITIONS {
        let mut next = 0i64;
        let mut got = 0;
        while got < sent[&p].len() {
            let mut req = fetch_request(TOPIC, &[(p, next)], 0, 1);
            req.topics[0].partitions[0].partition_max_bytes = 1 + rng.below(3 << 20) as i32;
            let resp: FetchResponse = w.call(ApiKey::Fetch, 12, &req);
            let part = &resp.responses[0].partitions[0];
            assert_eq!(part.error_code, 0, "partition {p} at {next}");
            let records = part.records.clone().unwrap_or_default();
            let found = check_batches(&sent, p, &records);
            assert!(!found.is_empty(), "partition {p}: no batch at offset {next}");
            assert_eq!(found[0], next, "partition {p}: the fetch starts at the requested batch");
            got += found.len();
            next = *sent[&p].range(found[found.len() - 1] + 1..).next().map(|(o, _)| o).unwrap_or(&i64::MAX);
        }
    }

    // A fetch of every partition at once (one segment each, several MiB)
    // to a client that does not read for a while: the broker finds the
    // socket full, keeps serving other connections on the same shard, and
    // still delivers every byte.
    let starts: Vec<(i32, i64)> = (0..PARTITIONS).map(|p| (p, 0)).collect();
    let resp = fetch_while_stalled(&broker, &starts);
    let mut total = 0usize;
    for part in &resp.responses[0].partitions {
        let records = part.records.clone().unwrap_or_default();
        let found = check_batches(&sent, part.partition_index, &records);
        assert_eq!(found.first(), Some(&0), "partition {}: from the first batch", part.partition_index);
        total += records.len();
    }
    assert!(total > 2 * SEGMENT_BYTES, "the response spans several segments ({total} bytes)");
    let (found, log) = broker.wait_for_log("socket full");
    assert!(found, "the slow client made the broker wait for room; log: {log}");

    // The same with data fresh in the batch cache (in-memory buffers).
    let mut sent = sent;
    let mut rng = Rng::new(43);
    let mut starts = Vec::new();
    for p in 0..PARTITIONS {
        let mut first = None;
        for _ in 0..12 {
            let batch = random_batch(&mut rng, 50, 4000).to_vec();
            let (error, base) = produce(&mut w, TOPIC, p, batch.clone().into(), 1);
            assert_eq!(error, 0);
            first.get_or_insert(base);
            sent.get_mut(&p).unwrap().insert(base, batch);
        }
        starts.push((p, first.unwrap()));
    }
    let resp = fetch_while_stalled(&broker, &starts);
    for (part, (p, from)) in resp.responses[0].partitions.iter().zip(&starts) {
        let found = check_batches(&sent, *p, &part.records.clone().unwrap_or_default());
        assert_eq!(found.first(), Some(from), "partition {p}: from the first new batch");
    }
}

/// Sends a fetch on a small-window connection and does not read it; meanwhile
/// another connection to the same shard must be answered. Then reads the
/// fetch response slowly.
fn fetch_while_stalled(broker: &Broker, starts: &[(i32, i64)]) -> FetchResponse {
    let mut slow = Wire::from_stream(small_window_connect(&broker.bootstrap()));
    let mut req: FetchRequest = fetch_request(TOPIC, starts, 0, 1);
    for part in &mut req.topics[0].partitions {
        part.partition_max_bytes = 8 << 20;
    }
    slow.send(ApiKey::Fetch, 12, &req);
    std::thread::sleep(Duration::from_millis(200));
    let mut other = Wire::connect(&broker.bootstrap());
    let resp: ApiVersionsResponse = other.call(ApiKey::ApiVersions, 3, &ApiVersionsRequest::default());
    assert_eq!(resp.error_code, 0, "another client is served while one is stalled");
    std::thread::sleep(Duration::from_millis(300));
    read_slowly(&mut slow.stream)
}

fn create_small_segment_topic(w: &mut Wire) {
    let mut t = CreatableTopic::default();
    t.name = topic_name(TOPIC);
    t.num_partitions = PARTITIONS;
    t.replication_factor = 1;
    let mut c = CreatableTopicConfig::default();
    c.name = StrBytes::from_static_str("segment.bytes");
    c.value = Some(StrBytes::from_string(SEGMENT_BYTES.to_string()));
    t.configs.push(c);
    let mut req = CreateTopicsRequest::default();
    req.topics.push(t);
    req.timeout_ms = 10_000;
    let resp: CreateTopicsResponse = w.call(ApiKey::CreateTopics, 7, &req);
    assert_eq!(resp.topics[0].error_code, 0);
}

/// About 4 MiB per partition in batches of 1–200 KiB, so each partition has
/// several sealed segments.
fn produce_all(w: &mut Wire) -> Sent {
    let mut rng = Rng::new(41);
    let mut sent = Sent::new();
    for _ in 0..BATCHES_PER_PARTITION {
        for p in 0..PARTITIONS {
            let records = 1 + rng.below(50) as usize;
            let batch = random_batch(&mut rng, records, 4000).to_vec();
            let (error, base) = produce(w, TOPIC, p, batch.clone().into(), 1);
            assert_eq!(error, 0, "produce to partition {p}");
            sent.entry(p).or_default().insert(base, batch);
        }
    }
    sent
}

/// Checks that `records` is a run of whole batches equal to what was
/// produced at their offsets; returns their base offsets.
fn check_batches(sent: &Sent, partition: i32, records: &[u8]) -> Vec<i64> {
    let mut bases = Vec::new();
    let mut at = 0usize;
    for (base, _) in batches(records) {
        let len = i32::from_be_bytes(records[at + 8..at + 12].try_into().unwrap()) as usize + 12;
        let mut want = sent[&partition].get(&base).unwrap_or_else(|| panic!("no batch at {base}")).clone();
        want[..8].copy_from_slice(&base.to_be_bytes());
        assert!(records[at..at + len] == want[..], "partition {partition}: batch at {base} differs");
        at += len;
        bases.push(base);
    }
    assert_eq!(at, records.len(), "partition {partition}: only whole batches");
    bases
}

/// Reads one Fetch v12 response in small pieces with pauses.
fn read_slowly(stream: &mut std::net::TcpStream) -> FetchResponse {
    let mut len = [0u8; 4];
    stream.read_exact(&mut len).unwrap();
    let size = response_len(ApiKey::Fetch, 12, len).unwrap();
    let mut buf = vec![0u8; size];
    let mut at = 0;
    let mut reads = 0;
    while at < size {
        let n = stream.read(&mut buf[at..size.min(at + (64 << 10))]).unwrap();
        assert!(n > 0, "connection closed after {at} of {size} bytes");
        at += n;
        reads += 1;
        if reads % 16 == 0 {
            std::thread::sleep(Duration::from_millis(30));
        }
    }
    let resp: Response<FetchResponse> = decode_response(ApiKey::Fetch, 12, Bytes::from(buf)).unwrap();
    assert_eq!(resp.unread_bytes, 0);
    resp.body
}

/// A connection whose receive buffer is small, so the broker's send buffer
/// fills while the client is not reading.
fn small_window_connect(addr: &str) -> std::net::TcpStream {
    let socket = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
    socket.set_recv_buffer_size(32 << 10).unwrap();
    let addr: std::net::SocketAddr = addr.parse().unwrap();
    socket.connect(&addr.into()).unwrap();
    let stream: std::net::TcpStream = socket.into();
    stream.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    stream
}
