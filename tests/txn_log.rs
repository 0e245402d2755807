//! The log side of transactions over real sockets, on a 2-shard broker:
//! transactional batches (attribute 0x10, a transactional id on Produce)
//! from three producers on two partitions owned by different shards;
//! WriteTxnMarkers aborts one producer's transaction and commits
//! another's; a third stays open. A real client (confluent-kafka, i.e.
//! librdkafka) then reads: at read_committed exactly the committed and
//! plain records, at read_uncommitted all of them, and the markers take
//! offsets that consumed positions jump past. On the wire: a read_committed
//! fetch stops at the LSO while a transaction is open and carries the
//! aborted transactions; ListOffsets read_committed latest is the LSO; a
//! read_committed long poll is woken by the marker that moves the LSO. All
//! of it again after a SIGKILL restart.

mod common;

use std::{
    collections::BTreeMap,
    time::{Duration, Instant},
};

use common::{broker::Broker, wire::*};
use kafka_protocol::messages::{
    write_txn_markers_request, ApiKey, FetchResponse, InitProducerIdRequest, InitProducerIdResponse,
    WriteTxnMarkersRequest, WriteTxnMarkersResponse,
};

const TOPIC: &str = "txn-log";

/// A batch from `producer_id` at epoch 0 (`common::txn::batch`).
fn batch(producer_id: i64, base_sequence: i32, values: &[&str], transactional: bool) -> bytes::Bytes {
    common::txn::batch(producer_id, 0, base_sequence, values, transactional)
}

fn producer_id(w: &mut Wire) -> i64 {
    let mut req = InitProducerIdRequest::default();
    req.transactional_id = None;
    req.transaction_timeout_ms = 60_000;
    req.producer_id = (-1).into();
    req.producer_epoch = -1;
    let resp: InitProducerIdResponse = w.call(ApiKey::InitProducerId, 4, &req);
    assert_eq!(resp.error_code, 0);
    resp.producer_id.0
}

/// Produce v9 with this test's transactional id; returns (error, base offset).
fn produce_txn(w: &mut Wire, partition: i32, batch: bytes::Bytes) -> (i16, i64) {
    common::txn::produce(w, "txn-log-producer", TOPIC, partition, batch)
}

/// WriteTxnMarkers v1 for one producer on the given partitions; the
/// error per partition.
fn write_marker(w: &mut Wire, producer_id: i64, epoch: i16, commit: bool, partitions: &[i32]) -> Vec<(i32, i16)> {
    let mut t = write_txn_markers_request::WritableTxnMarkerTopic::default();
    t.name = topic_name(TOPIC);
    t.partition_indexes = partitions.to_vec();
    let mut m = write_txn_markers_request::WritableTxnMarker::default();
    m.producer_id = producer_id.into();
    m.producer_epoch = epoch;
    m.transaction_result = commit;
    m.coordinator_epoch = 1;
    m.topics.push(t);
    let mut req = WriteTxnMarkersRequest::default();
    req.markers.push(m);
    let resp: WriteTxnMarkersResponse = w.call(ApiKey::WriteTxnMarkers, 1, &req);
    assert_eq!(resp.markers[0].producer_id.0, producer_id);
    resp.markers[0].topics[0].partitions.iter().map(|p| (p.partition_index, p.error_code)).collect()
}

/// ListOffsets latest of one partition of this test's topic.
fn latest(w: &mut Wire, partition: i32, isolation_level: i8) -> i64 {
    common::txn::latest(w, TOPIC, partition, isolation_level)
}

/// What a Fetch v12 says of one partition: (high watermark, LSO, aborted
/// (producer, first offset), batches (base offset, count)).
type Fetched = (i64, i64, Vec<(i64, i64)>, Vec<(i64, i32)>);

fn fetch(w: &mut Wire, partition: i32, offset: i64, isolation_level: i8) -> Fetched {
    let mut req = fetch_request(TOPIC, &[(partition, offset)], 0, 0);
    req.isolation_level = isolation_level;
    let resp: FetchResponse = w.call(ApiKey::Fetch, 12, &req);
    let p = &resp.responses[0].partitions[0];
    assert_eq!(p.error_code, 0);
    let aborted = p.aborted_transactions.iter().flatten().map(|a| (a.producer_id.0, a.first_offset)).collect();
    (p.high_watermark, p.last_stable_offset, aborted, batches(p.records.as_deref().unwrap_or_default()))
}

fn consume(bootstrap: &str, isolation: &str) -> common::txn::Consumed {
    common::txn::consume_python(bootstrap, TOPIC, isolation, "0,1")
}

fn rec(partition: i32, offset: i64, value: &str) -> (i32, i64, String) {
    (partition, offset, value.to_string())
}

/// The layout written below: p0 = a a a | b b | plain | abort(a) | commit(b);
/// p1 = b b | a a | abort(a) | commit(b) | c (open).
fn expected_committed() -> Vec<(i32, i64, String)> {
    vec![rec(0, 3, "b0-0"), rec(0, 4, "b0-1"), rec(0, 5, "plain"), rec(1, 0, "b1-0"), rec(1, 1, "b1-1")]
}

fn check_visibility(w: &mut Wire, bootstrap: &str, a: i64, c_open: bool) {
    // On the wire: p1's LSO is c's first offset while c is open.
    let p1_lso = if c_open { 6 } else { 7 };
    assert_eq!(latest(w, 1, 1), p1_lso, "ListOffsets read_committed latest is the LSO");
    assert_eq!(latest(w, 1, 0), 7, "read_uncommitted latest is the log end");
    assert_eq!(latest(w, 0, 1), 8);
    let (hw, lso, aborted, got) = fetch(w, 1, 0, 1);
    assert_eq!((hw, lso), (7, p1_lso));
    assert_eq!(aborted, vec![(a, 2)], "a's aborted transaction on p1");
    let last = got.last().map(|(base, n)| base + i64::from(*n) - 1);
    assert_eq!(last, Some(p1_lso - 1), "a read_committed fetch ends just below the LSO: {got:?}");
    let (_, lso0, aborted0, _) = fetch(w, 0, 0, 1);
    assert_eq!((lso0, aborted0), (8, vec![(a, 0)]));
    let (_, lso_u, aborted_u, all) = fetch(w, 1, 0, 0);
    assert_eq!(lso_u, p1_lso, "read_uncommitted is told the LSO too");
    assert!(aborted_u.is_empty(), "no aborted list for read_uncommitted");
    assert_eq!(all.last().map(|(base, _)| *base), Some(6), "read_uncommitted reaches the open batch");

    // A real client at read_committed sees exactly the committed records.
    let committed = consume(bootstrap, "read_committed");
    let mut expected = expected_committed();
    if !c_open {
        expected.push(rec(1, 6, "c1-0"));
    }
    let mut records = committed.records.clone();
    records.sort();
    assert_eq!(records, expected);
    // Positions jump past the markers (p0: 6 and 7), and stop at p1's LSO.
    assert_eq!(committed.positions, BTreeMap::from([(0, 8), (1, p1_lso)]));

    let uncommitted = consume(bootstrap, "read_uncommitted");
    let mut records = uncommitted.records;
    records.sort();
    let everything = vec![
        rec(0, 0, "a0-0"),
        rec(0, 1, "a0-1"),
        rec(0, 2, "a0-2"),
        rec(0, 3, "b0-0"),
        rec(0, 4, "b0-1"),
        rec(0, 5, "plain"),
        rec(1, 0, "b1-0"),
        rec(1, 1, "b1-1"),
        rec(1, 2, "a1-0"),
        rec(1, 3, "a1-1"),
        rec(1, 6, "c1-0"),
    ];
    assert_eq!(records, everything, "read_uncommitted sees every record; markers are never records");
    assert_eq!(uncommitted.positions, BTreeMap::from([(0, 8), (1, 7)]));
}

#[test]
fn markers_lso_and_read_committed_over_the_wire() {
    let dir = common::tempdir().unwrap();
    let mut broker = Broker::start(&dir.path().join("data"), 2);
    let mut w = Wire::connect(&broker.bootstrap());
    assert_eq!(create_topic(&mut w, TOPIC, 2), 0);
    let (a, b, c, plain) = (producer_id(&mut w), producer_id(&mut w), producer_id(&mut w), producer_id(&mut w));

    assert_eq!(produce_txn(&mut w, 0, batch(a, 0, &["a0-0", "a0-1", "a0-2"], true)), (0, 0));
    assert_eq!(produce_txn(&mut w, 1, batch(b, 0, &["b1-0", "b1-1"], true)), (0, 0));
    assert_eq!(produce_txn(&mut w, 0, batch(b, 0, &["b0-0", "b0-1"], true)), (0, 3));
    assert_eq!(produce_txn(&mut w, 1, batch(a, 0, &["a1-0", "a1-1"], true)), (0, 2));
    assert_eq!(produce(&mut w, TOPIC, 0, batch(plain, 0, &["plain"], false), -1), (0, 5));
    let (_, lso, _, _) = fetch(&mut w, 0, 0, 1);
    assert_eq!(lso, 0, "a's open transaction holds p0's LSO at its first offset");
    let (_, _, _, none) = fetch(&mut w, 0, 0, 1);
    assert!(none.is_empty(), "nothing is stable on p0 yet");

    assert_eq!(write_marker(&mut w, a, 0, false, &[0, 1]), vec![(0, 0), (1, 0)]);
    assert_eq!(write_marker(&mut w, b, 0, true, &[0, 1]), vec![(0, 0), (1, 0)]);
    assert_eq!(produce_txn(&mut w, 1, batch(c, 0, &["c1-0"], true)), (0, 6));
    // A marker from an older epoch than the producer's is refused, and a
    // partition that does not exist is named as such.
    assert_eq!(write_marker(&mut w, a, -1, true, &[0]), vec![(0, 47)]);
    assert_eq!(write_marker(&mut w, a, 0, false, &[9]), vec![(9, 3)]);
    // Producers may not send markers, nor transactional batches without
    // idempotence fields (INVALID_RECORD, 87); nothing is written.
    let mut forged = batch(plain, 1, &["forged"], true).to_vec();
    forged[21..23].copy_from_slice(&0x30i16.to_be_bytes());
    let crc = crc32c::crc32c(&forged[21..]);
    forged[17..21].copy_from_slice(&crc.to_be_bytes());
    assert_eq!(produce_txn(&mut w, 0, forged.into()).0, 87);
    let mut unsequenced = batch(plain, 1, &["unsequenced"], true).to_vec();
    unsequenced[53..57].copy_from_slice(&(-1i32).to_be_bytes());
    let crc = crc32c::crc32c(&unsequenced[21..]);
    unsequenced[17..21].copy_from_slice(&crc.to_be_bytes());
    assert_eq!(produce_txn(&mut w, 0, unsequenced.into()).0, 87);

    check_visibility(&mut w, &broker.bootstrap(), a, true);

    // Everything survives a SIGKILL: the open transaction, the LSO and
    // the aborted transactions are rebuilt from the log.
    drop(w);
    broker.kill();
    broker.restart();
    let mut w = Wire::connect(&broker.bootstrap());
    check_visibility(&mut w, &broker.bootstrap(), a, true);

    // A read_committed long poll at the LSO waits, and c's commit (which
    // moves the LSO, not only the log end) wakes it: at the decision,
    // before the marker's own write lands.
    let mut poller = Wire::connect(&broker.bootstrap());
    let mut req = fetch_request(TOPIC, &[(1, 6)], 10_000, 1);
    req.isolation_level = 1;
    let asked = Instant::now();
    poller.send(ApiKey::Fetch, 12, &req);
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(write_marker(&mut w, c, 0, true, &[1]), vec![(1, 0)]);
    let resp: FetchResponse = poller.receive(ApiKey::Fetch, 12);
    let waited = asked.elapsed();
    let p = &resp.responses[0].partitions[0];
    assert!(waited >= Duration::from_millis(400), "the fetch waited for the marker ({waited:?})");
    assert!(waited < Duration::from_secs(5), "the marker woke the fetch ({waited:?})");
    let got = batches(p.records.as_deref().unwrap_or_default());
    // c's batch, now committed; its marker too if its write landed first.
    let lso = p.last_stable_offset;
    assert!(
        (got == vec![(6, 1)] && (lso == 7 || lso == 8)) || (got == vec![(6, 1), (7, 1)] && lso == 8),
        "c's batch (and perhaps its marker) below the LSO: got {got:?}, LSO {lso}, error {}, high watermark {}",
        p.error_code,
        p.high_watermark,
    );

    // p1's log end is now 8 (the commit marker at 7).
    assert_eq!(latest(&mut w, 1, 1), 8);
    let committed = consume(&broker.bootstrap(), "read_committed");
    let mut records = committed.records;
    records.sort();
    let mut expected = expected_committed();
    expected.push(rec(1, 6, "c1-0"));
    assert_eq!(records, expected);
    assert_eq!(committed.positions, BTreeMap::from([(0, 8), (1, 8)]));
    drop(w);
    drop(poller);
    broker.kill();
    broker.restart();
    let mut w = Wire::connect(&broker.bootstrap());
    assert_eq!(latest(&mut w, 1, 1), 8, "after a second SIGKILL nothing is open");
    let (_, _, aborted, _) = fetch(&mut w, 1, 0, 1);
    assert_eq!(aborted, vec![(a, 2)]);
}
