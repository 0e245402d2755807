//! A million commits over 100 keys (one group, 100 partitions) through
//! OffsetCommit, pipelined: `__consumer_offsets` is compacted while they
//! arrive, so afterwards it holds each key once in its cleaned segments plus
//! at most one (small) active segment; and after a broker SIGKILL the
//! newest offset of every key is what OffsetFetch returns.

mod common;

use std::time::{Duration, Instant};

use bytes::{Buf, Bytes};
use common::{
    broker::Broker,
    offsets_schema::{decode_commit_value, decode_key, group_partition, OffsetsKey},
    wire::*,
};
use kafka_protocol::{
    messages::{
        offset_commit_request::{OffsetCommitRequestPartition, OffsetCommitRequestTopic},
        offset_fetch_request::OffsetFetchRequestTopic,
        ApiKey, FetchResponse, GroupId, OffsetCommitRequest, OffsetCommitResponse, OffsetFetchRequest,
        OffsetFetchResponse,
    },
    protocol::StrBytes,
};

const TOPIC: &str = "committed";
const KEYS: i32 = 100;
const REQUESTS: i64 = 10_000; // × 100 partitions = 1,000,000 commits
const GROUP: &str = "compaction-group";
const SEGMENT_BYTES: u64 = 64 << 10;
const IN_FLIGHT: usize = 16;

fn commit_request(offset_of: impl Fn(i32) -> i64) -> OffsetCommitRequest {
    let mut t = OffsetCommitRequestTopic::default();
    t.name = topic_name(TOPIC);
    for p in 0..KEYS {
        let mut pc = OffsetCommitRequestPartition::default();
        pc.partition_index = p;
        pc.committed_offset = offset_of(p);
        pc.committed_leader_epoch = -1;
        pc.committed_metadata = Some(StrBytes::from_static_str("m"));
        t.partitions.push(pc);
    }
    let mut req = OffsetCommitRequest::default();
    req.group_id = GroupId(StrBytes::from_static_str(GROUP));
    req.generation_id_or_member_epoch = -1;
    req.topics.push(t);
    req
}

fn check_commit(resp: &OffsetCommitResponse, what: &str) {
    for t in &resp.topics {
        for p in &t.partitions {
            assert_eq!(p.error_code, 0, "{what}: partition {}", p.partition_index);
        }
    }
}

#[test]
fn a_million_commits_over_a_hundred_keys_compact_to_a_hundred_records() {
    let dir = common::tempdir().unwrap();
    let data = dir.path().join("data");
    let config = format!("offsets_topic_segment_bytes = {SEGMENT_BYTES}\nlog_maintenance_interval_ms = 200\n");
    let mut broker = Broker::start_with_config(&data, 2, &config, &[]);
    let mut w = Wire::connect(&broker.bootstrap());
    assert_eq!(create_topic(&mut w, TOPIC, KEYS), 0);

    let started = Instant::now();
    let mut sent = 0i64;
    let mut received = 0i64;
    while received < REQUESTS {
        while sent < REQUESTS && sent - received < IN_FLIGHT as i64 {
            let round = sent;
            w.send(ApiKey::OffsetCommit, 8, &commit_request(|p| round * 1000 + i64::from(p)));
            sent += 1;
        }
        let resp: OffsetCommitResponse = w.receive(ApiKey::OffsetCommit, 8);
        check_commit(&resp, &format!("commit round {received}"));
        received += 1;
    }
    // The newest offsets, committed last and alone.
    let newest = |p: i32| 7_000_000_000 + i64::from(p) * 13;
    let resp: OffsetCommitResponse = w.call(ApiKey::OffsetCommit, 8, &commit_request(newest));
    check_commit(&resp, "final commit");
    eprintln!("{} commits in {:?}", REQUESTS * i64::from(KEYS) + i64::from(KEYS), started.elapsed());

    // Wait for the cleaner: every key at most once below the active segment.
    let partition = group_partition(GROUP, 50);
    let pdir = data.join(format!("__consumer_offsets-{partition}"));
    let deadline = Instant::now() + Duration::from_secs(120);
    let (cleaned, active, bytes) = loop {
        let active_base = active_segment_base(&pdir);
        let records = read_partition(&mut w, partition);
        let cleaned: Vec<_> = records.iter().filter(|(o, _, _)| *o < active_base).collect();
        let keys: std::collections::BTreeSet<_> = cleaned.iter().map(|(_, k, _)| k.clone()).collect();
        if keys.len() == cleaned.len() {
            let bytes = dir_bytes(&pdir);
            break (cleaned.len(), records.len() - cleaned.len(), bytes);
        }
        assert!(Instant::now() < deadline, "__consumer_offsets-{partition} still has superseded records");
        std::thread::sleep(Duration::from_millis(200));
    };
    eprintln!(
        "after cleaning: {cleaned} records in cleaned segments, {active} in the active segment, {bytes} bytes on disk"
    );
    assert!(cleaned <= KEYS as usize, "{cleaned} records in cleaned segments for {KEYS} keys");
    // The active segment is never cleaned; it is bounded by segment.bytes.
    let per_segment_max = SEGMENT_BYTES as usize / 40;
    assert!(active <= per_segment_max, "{active} records in the active segment");
    assert!(bytes < 4 * SEGMENT_BYTES, "{bytes} bytes on disk after cleaning ~60 MB of commits");

    // A SIGKILL later, every key's newest offset is what OffsetFetch says.
    drop(w);
    broker.kill();
    broker.restart();
    let mut w = Wire::connect(&broker.bootstrap());
    let mut req = OffsetFetchRequest::default();
    req.group_id = GroupId(StrBytes::from_static_str(GROUP));
    let mut t = OffsetFetchRequestTopic::default();
    t.name = topic_name(TOPIC);
    t.partition_indexes = (0..KEYS).collect();
    req.topics = Some(vec![t]);
    let resp: OffsetFetchResponse = w.call(ApiKey::OffsetFetch, 7, &req);
    assert_eq!(resp.error_code, 0);
    let got: Vec<(i32, i64)> =
        resp.topics[0].partitions.iter().map(|p| (p.partition_index, p.committed_offset)).collect();
    let want: Vec<(i32, i64)> = (0..KEYS).map(|p| (p, newest(p))).collect();
    assert_eq!(got, want, "newest committed offsets after SIGKILL and restart");
}

/// Base offset of the newest segment file in a partition directory.
fn active_segment_base(dir: &std::path::Path) -> i64 {
    std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| e.unwrap().file_name().to_string_lossy().strip_suffix(".log").and_then(|s| s.parse().ok()))
        .max()
        .expect("a segment")
}

fn dir_bytes(dir: &std::path::Path) -> u64 {
    std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().metadata().unwrap().len()).sum()
}

/// Every record of a `__consumer_offsets` partition, decoded with the
/// test's own schema reader: (offset, (topic, partition), committed offset).
fn read_partition(w: &mut Wire, partition: i32) -> Vec<(i64, (String, i32), i64)> {
    let mut out = Vec::new();
    let mut next = 0i64;
    loop {
        let mut req = fetch_request("__consumer_offsets", &[(partition, next)], 0, 1);
        req.topics[0].partitions[0].partition_max_bytes = 4 << 20;
        let resp: FetchResponse = w.call(ApiKey::Fetch, 12, &req);
        let p = &resp.responses[0].partitions[0];
        assert_eq!(p.error_code, 0, "fetch __consumer_offsets-{partition} at {next}");
        let records = p.records.clone().unwrap_or_default();
        if records.is_empty() {
            return out;
        }
        next = next_after(&records);
        for (offset, key, value) in records_of(records) {
            if let OffsetsKey::Commit { topic, partition, .. } = decode_key(&key) {
                out.push((offset, (topic, partition), value.map_or(-1, |v| decode_commit_value(&v).offset)));
            }
        }
    }
}

/// One past the last offset of the last batch in `records` (a batch cleaned
/// down to fewer records still spans all its offsets).
fn next_after(records: &[u8]) -> i64 {
    let (mut at, mut next) = (0, 0);
    while at + 61 <= records.len() {
        let base = i64::from_be_bytes(records[at..at + 8].try_into().unwrap());
        let delta = i32::from_be_bytes(records[at + 23..at + 27].try_into().unwrap());
        next = base + i64::from(delta) + 1;
        at += i32::from_be_bytes(records[at + 8..at + 12].try_into().unwrap()) as usize + 12;
    }
    next
}

/// (offset, key, value) of every record in a run of uncompressed batches,
/// read from the v2 format directly.
fn records_of(mut buf: Bytes) -> Vec<(i64, Vec<u8>, Option<Vec<u8>>)> {
    fn varint(buf: &mut Bytes) -> i64 {
        let (mut raw, mut shift) = (0u64, 0);
        loop {
            let b = buf.get_u8();
            raw |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return ((raw >> 1) as i64) ^ -((raw & 1) as i64);
            }
            shift += 7;
        }
    }
    let mut out = Vec::new();
    while buf.remaining() >= 61 {
        let base = buf.get_i64();
        let len = buf.get_i32() as usize;
        let mut batch = buf.split_to(len);
        batch.advance(4 + 1 + 4 + 2 + 4 + 8 + 8 + 8 + 2 + 4); // epoch .. base sequence
        let count = batch.get_i32();
        for _ in 0..count {
            let _len = varint(&mut batch);
            batch.advance(1);
            let _ts = varint(&mut batch);
            let delta = varint(&mut batch);
            let klen = varint(&mut batch);
            let key = batch.split_to(klen.max(0) as usize).to_vec();
            let vlen = varint(&mut batch);
            let value = (vlen >= 0).then(|| batch.split_to(vlen as usize).to_vec());
            let headers = varint(&mut batch);
            assert_eq!(headers, 0);
            out.push((base + delta, key, value));
        }
    }
    out
}
