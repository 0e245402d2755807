//! Produce and fetch throughput of one broker shard, driven by a small
//! pinned client, against raw loopback TCP measured in the same run with the
//! same frame sizes and the same pipelining.
//!
//! `cargo bench --bench protocol [-- --quick]`
//!
//! The broker runs with `--cores 1` pinned to core 0; the client (and the raw
//! TCP peer's client side) on core 1. Medians over repetitions.

mod common;

use std::{
    io::Write,
    net::{TcpListener, TcpStream},
    time::{Duration, Instant},
};

use bytes::Bytes;
use kafka_protocol::{
    messages::*,
    protocol::{Encodable, StrBytes},
};
use shardlog::{
    client,
    protocol::{
        client::{decode_response, request_frame, Response},
        record_batch::{encode_batch, Record},
    },
};

const RECORD_BYTES: usize = 1024;
const RECORDS_PER_BATCH: usize = 64;
const PIPELINE: usize = 8;
/// Records at the end of the log that a tail consumer reads (fits the
/// default 8 MiB batch cache).
const TAIL_RECORDS: usize = 6 * 1024;
const TAIL_ROUNDS: usize = 20;
/// Segment size of the topic whose fetches come from sealed segments.
const SEALED_SEGMENT_BYTES: usize = 16 << 20;

fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let reps = if quick { 3 } else { 5 };
    let total_bytes: usize = if quick { 64 << 20 } else { 256 << 20 };
    core_affinity::set_for_current(core_affinity::CoreId { id: 1 });
    print_header(reps, total_bytes);
    let batch = batch();
    let requests = total_bytes / batch.len();
    let mut rows: Vec<(String, Vec<f64>, Vec<f64>)> = Vec::new();
    let mut produce1 = (Vec::new(), Vec::new());
    let mut produce_all = (Vec::new(), Vec::new());
    let mut fetch = (Vec::new(), Vec::new());
    let mut sealed = (Vec::new(), Vec::new());
    let mut tail = (Vec::new(), Vec::new());
    for rep in 0..reps {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("target/bench-data/protocol");
        let _ = std::fs::remove_dir_all(&dir);
        let broker = common::start_broker("127.0.0.1:29092", &dir);
        let addr = "127.0.0.1:29092";
        create_topic(addr, "bench", None);
        create_topic(addr, "sealed", Some(SEALED_SEGMENT_BYTES));
        for (acks, out) in [(1i16, &mut produce1), (-1, &mut produce_all)] {
            let frame = produce_frame("bench", &batch, acks);
            let (bytes, elapsed, response_len) = run_produce(addr, &frame, requests);
            out.0.push(mb(bytes, elapsed));
            let (rb, re) = raw_round_trips(&frame, response_len, requests);
            out.1.push(mb(rb, re));
        }
        let (bytes, elapsed, sizes) = run_fetch(addr, "bench", 0);
        fetch.0.push(mb(bytes, elapsed));
        let (rb, re) = raw_fetch(&sizes);
        fetch.1.push(mb(rb, re));
        // The same data in sealed segments, written with direct I/O (so not
        // in the page cache): served with sendfile.
        run_produce(addr, &produce_frame("sealed", &batch, 1), requests);
        let (bytes, elapsed, sizes) = run_fetch(addr, "sealed", 0);
        sealed.0.push(mb(bytes, elapsed));
        let (rb, re) = raw_fetch(&sizes);
        sealed.1.push(mb(rb, re));
        // A consumer at the tail: the last few MiB, served from the batch
        // cache, read again and again.
        // Both produce runs wrote `requests` batches: the log ends at twice that.
        let tail_from = (2 * requests * RECORDS_PER_BATCH - TAIL_RECORDS) as i64;
        let (mut tb, mut te, mut tsizes) = (0, Duration::ZERO, Vec::new());
        for _ in 0..TAIL_ROUNDS {
            let (b, e, s) = run_fetch(addr, "bench", tail_from);
            tb += b;
            te += e;
            tsizes.extend(s);
        }
        tail.0.push(mb(tb, te));
        let (rb, re) = raw_fetch(&tsizes);
        tail.1.push(mb(rb, re));
        drop(broker);
        let _ = std::fs::remove_dir_all(&dir);
        eprintln!("repetition {} of {reps} done", rep + 1);
    }
    rows.push((
        format!("produce acks=1, {}-record batches of {RECORD_BYTES} B, {PIPELINE} in flight", RECORDS_PER_BATCH),
        produce1.0,
        produce1.1,
    ));
    rows.push(("produce acks=all, same".to_string(), produce_all.0, produce_all.1));
    rows.push((
        "fetch from offset 0 to the end, active segment (direct-I/O reads), 1 MiB per request".to_string(),
        fetch.0,
        fetch.1,
    ));
    rows.push((
        format!(
            "fetch from offset 0 to the end, sealed {} MiB segments (sendfile), 1 MiB per request",
            SEALED_SEGMENT_BYTES >> 20
        ),
        sealed.0,
        sealed.1,
    ));
    rows.push((
        format!(
            "fetch the tail ({} MiB, from the batch cache) {TAIL_ROUNDS} times, 1 MiB per request",
            (TAIL_RECORDS * RECORD_BYTES) >> 20
        ),
        tail.0,
        tail.1,
    ));
    println!("| measurement | shardlog MB/s | raw loopback TCP MB/s | ratio |\n|---|---:|---:|---:|");
    for (what, ours, raw) in rows {
        let (o, r) = (common::median(ours), common::median(raw));
        println!("| {what} | {o:.0} | {r:.0} | {:.2} |", o / r);
    }
}

fn print_header(reps: usize, total: usize) {
    println!("# shardlog protocol bench");
    println!("{}", common::machine_and_commit());
    println!(
        "params: broker --cores 1 on core 0, client on core 1, {} MiB per run, {reps} repetitions, medians\n",
        total >> 20
    );
}

fn mb(bytes: usize, elapsed: Duration) -> f64 {
    bytes as f64 / elapsed.as_secs_f64() / 1e6
}

fn batch() -> Bytes {
    let value = vec![0x5au8; RECORD_BYTES];
    let records: Vec<Record<'_>> =
        (0..RECORDS_PER_BATCH).map(|i| Record { key: None, value: Some(&value), timestamp_delta: i as i64 }).collect();
    Bytes::from(encode_batch(&records, 1_700_000_000_000))
}

fn frame<Req: Encodable>(key: ApiKey, version: i16, req: &Req) -> Vec<u8> {
    request_frame(key, version, 1, Some("bench"), req).unwrap_or_else(|e| panic!("{e}")).to_vec()
}

/// Reads one frame (of `key` at `version`, for errors) into `buf`; returns
/// its size with the size prefix.
fn read_frame(s: &mut TcpStream, key: ApiKey, version: i16, buf: &mut Vec<u8>) -> usize {
    client::read_frame(s, key, version, buf).unwrap_or_else(|e| panic!("{e}"));
    buf.len() + 4
}

fn create_topic(addr: &str, name: &str, segment_bytes: Option<usize>) {
    let mut t = create_topics_request::CreatableTopic::default();
    t.name = TopicName(StrBytes::from_string(name.into()));
    t.num_partitions = 1;
    t.replication_factor = 1;
    if let Some(bytes) = segment_bytes {
        let mut c = create_topics_request::CreatableTopicConfig::default();
        c.name = StrBytes::from_static_str("segment.bytes");
        c.value = Some(StrBytes::from_string(bytes.to_string()));
        t.configs.push(c);
    }
    let mut req = CreateTopicsRequest::default();
    req.topics.push(t);
    let mut s = TcpStream::connect(addr).unwrap();
    s.write_all(&frame(ApiKey::CreateTopics, 7, &req)).unwrap();
    read_frame(&mut s, ApiKey::CreateTopics, 7, &mut Vec::new());
}

fn produce_frame(topic: &str, batch: &Bytes, acks: i16) -> Vec<u8> {
    let mut pd = produce_request::PartitionProduceData::default();
    pd.index = 0;
    pd.records = Some(batch.clone());
    let mut td = produce_request::TopicProduceData::default();
    td.name = TopicName(StrBytes::from_string(topic.into()));
    td.partition_data.push(pd);
    let mut req = ProduceRequest::default();
    req.acks = acks;
    req.timeout_ms = 30_000;
    req.topic_data.push(td);
    frame(ApiKey::Produce, 9, &req)
}

/// Sends `count` copies of `frame`, keeping PIPELINE in flight. Returns the
/// record bytes sent, the time, and the size of one response.
fn run_produce(addr: &str, frame: &[u8], count: usize) -> (usize, Duration, usize) {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_nodelay(true).unwrap();
    let mut buf = Vec::new();
    let start = Instant::now();
    let (mut sent, mut received, mut response_len) = (0, 0, 0);
    while received < count {
        while sent < count && sent - received < PIPELINE {
            s.write_all(frame).unwrap();
            sent += 1;
        }
        response_len = read_frame(&mut s, ApiKey::Produce, 9, &mut buf);
        let resp: Response<ProduceResponse> =
            decode_response(ApiKey::Produce, 9, Bytes::copy_from_slice(&buf)).unwrap_or_else(|e| panic!("{e}"));
        let resp = resp.body;
        let pr = &resp.responses[0].partition_responses[0];
        assert_eq!(pr.error_code, 0, "produce failed: {:?}", pr.error_message);
        received += 1;
    }
    (count * frame.len(), start.elapsed(), response_len)
}

/// The raw baseline for produce: the same frames through a plain TCP peer
/// (pinned to core 0) that reads each frame and answers with a response of
/// the broker's response size.
fn raw_round_trips(frame: &[u8], response_len: usize, count: usize) -> (usize, Duration) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let server = std::thread::spawn(move || {
        core_affinity::set_for_current(core_affinity::CoreId { id: 0 });
        let (mut s, _) = listener.accept().unwrap();
        s.set_nodelay(true).unwrap();
        let mut response = vec![0u8; response_len];
        response[..4].copy_from_slice(&((response_len - 4) as i32).to_be_bytes());
        let mut buf = Vec::new();
        for _ in 0..count {
            read_frame(&mut s, ApiKey::Produce, 9, &mut buf);
            s.write_all(&response).unwrap();
        }
    });
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_nodelay(true).unwrap();
    let mut buf = Vec::new();
    let start = Instant::now();
    let (mut sent, mut received) = (0, 0);
    while received < count {
        while sent < count && sent - received < PIPELINE {
            s.write_all(frame).unwrap();
            sent += 1;
        }
        read_frame(&mut s, ApiKey::Produce, 9, &mut buf);
        received += 1;
    }
    let elapsed = start.elapsed();
    server.join().unwrap();
    (count * frame.len(), elapsed)
}

/// Fetches the whole partition from offset 0, one request at a time.
/// Returns the record bytes received, the time, and each response's size.
fn run_fetch(addr: &str, topic: &str, from: i64) -> (usize, Duration, Vec<usize>) {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_nodelay(true).unwrap();
    let mut buf = Vec::new();
    let mut offset = from;
    let mut bytes = 0;
    let mut sizes = Vec::new();
    let start = Instant::now();
    loop {
        let mut fp = fetch_request::FetchPartition::default();
        fp.partition = 0;
        fp.fetch_offset = offset;
        fp.partition_max_bytes = 1 << 20;
        let mut ft = fetch_request::FetchTopic::default();
        ft.topic = TopicName(StrBytes::from_string(topic.into()));
        ft.partitions.push(fp);
        let mut req = FetchRequest::default();
        req.replica_id = (-1).into();
        req.max_bytes = 1 << 20;
        req.min_bytes = 1;
        req.max_wait_ms = 0;
        req.topics.push(ft);
        s.write_all(&frame(ApiKey::Fetch, 12, &req)).unwrap();
        let size = read_frame(&mut s, ApiKey::Fetch, 12, &mut buf);
        // Find the records in place, as a consumer that cares about speed
        // would; the raw baseline's client does not decode either.
        let records = records_in_fetch_v12(&buf);
        if records.is_empty() {
            break;
        }
        sizes.push(size);
        bytes += records.len();
        let mut at = 0;
        while at + 61 <= records.len() {
            let base = i64::from_be_bytes(records[at..at + 8].try_into().unwrap());
            let len = i32::from_be_bytes(records[at + 8..at + 12].try_into().unwrap()) as usize + 12;
            let delta = i32::from_be_bytes(records[at + 23..at + 27].try_into().unwrap());
            offset = base + i64::from(delta) + 1;
            at += len;
        }
    }
    (bytes, start.elapsed(), sizes)
}

/// The records field of a one-topic, one-partition Fetch v12 response
/// (after the size prefix), without copying.
fn records_in_fetch_v12(buf: &[u8]) -> &[u8] {
    fn uvarint(buf: &[u8], at: &mut usize) -> usize {
        let (mut v, mut shift) = (0usize, 0);
        loop {
            let b = buf[*at];
            *at += 1;
            v |= usize::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return v;
            }
            shift += 7;
        }
    }
    // correlation id, header tags, throttle, error, session id
    let mut at = 4 + 1 + 4 + 2 + 4;
    assert_eq!(uvarint(buf, &mut at), 2, "one topic");
    let name = uvarint(buf, &mut at) - 1;
    at += name;
    assert_eq!(uvarint(buf, &mut at), 2, "one partition");
    let error = i16::from_be_bytes([buf[at + 4], buf[at + 5]]);
    assert_eq!(error, 0, "fetch error");
    // index, error, high watermark, last stable offset, log start
    at += 4 + 2 + 8 + 8 + 8;
    let aborted = uvarint(buf, &mut at);
    assert!(aborted <= 1, "no aborted transactions");
    at += 4; // preferred read replica
    let len = uvarint(buf, &mut at).saturating_sub(1);
    &buf[at..at + len]
}

/// The raw baseline for fetch: a TCP peer answers each small request with a
/// pre-built response of the size the broker sent.
fn raw_fetch(sizes: &[usize]) -> (usize, Duration) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let plan = sizes.to_vec();
    let server = std::thread::spawn(move || {
        core_affinity::set_for_current(core_affinity::CoreId { id: 0 });
        let (mut s, _) = listener.accept().unwrap();
        s.set_nodelay(true).unwrap();
        let biggest = plan.iter().copied().max().unwrap_or(4);
        let mut response = vec![7u8; biggest];
        let mut buf = Vec::new();
        for size in plan {
            read_frame(&mut s, ApiKey::Fetch, 12, &mut buf);
            response[..4].copy_from_slice(&((size - 4) as i32).to_be_bytes());
            s.write_all(&response[..size]).unwrap();
        }
    });
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_nodelay(true).unwrap();
    let request = vec![0u8, 0, 0, 60].into_iter().chain(std::iter::repeat_n(0u8, 60)).collect::<Vec<u8>>();
    let mut buf = Vec::new();
    let mut bytes = 0;
    let start = Instant::now();
    for _ in sizes {
        s.write_all(&request).unwrap();
        bytes += read_frame(&mut s, ApiKey::Fetch, 12, &mut buf);
    }
    let elapsed = start.elapsed();
    server.join().unwrap();
    (bytes, elapsed)
}
