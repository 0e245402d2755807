//! `shardlog bench null-broker`, the floor for bench latency, through the
//! real binary on 127.0.0.1: librdkafka produces to it and reads the same
//! records back (offsets assigned consecutively, long poll woken by
//! produce), `shardlog bench e2e` validates every record against it, and it
//! advertises only the APIs it answers.

mod common;

use std::{
    collections::BTreeMap,
    path::Path,
    process::Command,
    time::{Duration, Instant},
};

use common::{
    null_broker::NullBroker,
    produce::{produce_all, Outgoing},
};
use rdkafka::{
    admin::{AdminClient, AdminOptions, NewTopic, TopicReplication},
    client::DefaultClientContext,
    consumer::{BaseConsumer, Consumer},
    message::Message,
    producer::{BaseProducer, BaseRecord, Producer},
    ClientConfig,
};
use serde_json::Value;

const TOPIC: &str = "nb-orders";
const PARTITIONS: i32 = 4;

/// partition -> offset -> (key, value)
type Expected = BTreeMap<i32, BTreeMap<i64, (Vec<u8>, Vec<u8>)>>;

fn record(i: usize) -> (Vec<u8>, Vec<u8>) {
    (format!("key-{i}").into_bytes(), format!("value-{i}-{}", "n".repeat(i % 113)).into_bytes())
}

/// Produces records `ids` with acks=1 and adds where they landed to `expected`.
fn produce(bootstrap: &str, ids: std::ops::Range<usize>, expected: &mut Expected) {
    let settings = [("acks", "1"), ("linger.ms", "2"), ("enable.idempotence", "false")];
    let records = ids.map(|i| {
        let (key, value) = record(i);
        Outgoing { id: i, key: Some(key), value, partition: None, timestamp: None }
    });
    for d in produce_all(bootstrap, TOPIC, &settings, records) {
        let previous = expected.entry(d.partition).or_default().insert(d.offset, record(d.id));
        assert!(previous.is_none(), "offset {} of partition {} acknowledged twice", d.offset, d.partition);
    }
}

/// Polls until `expected` has been read (every record in it, once), then
/// checks the content.
fn consume_until(c: &BaseConsumer, got: &mut Expected, expected: &Expected, when: &str) {
    let total: usize = expected.values().map(BTreeMap::len).sum();
    let deadline = Instant::now() + Duration::from_secs(60);
    while got.values().map(BTreeMap::len).sum::<usize>() < total && Instant::now() < deadline {
        let Some(m) = c.poll(Duration::from_millis(500)) else { continue };
        let m = m.unwrap_or_else(|e| panic!("{when}: consume error {e}"));
        let part = got.entry(m.partition()).or_default();
        if let Some((&last, _)) = part.last_key_value() {
            assert_eq!(m.offset(), last + 1, "{when}: partition {} skipped or repeated", m.partition());
        }
        part.insert(m.offset(), (m.key().unwrap_or_default().to_vec(), m.payload().unwrap_or_default().to_vec()));
    }
    assert!(got == expected, "{when}: the records read back differ from those acknowledged");
}

#[test]
fn librdkafka_produces_and_reads_back_every_record() {
    let broker = NullBroker::start();
    let admin: AdminClient<DefaultClientContext> =
        ClientConfig::new().set("bootstrap.servers", broker.bootstrap()).create().unwrap();
    let created = futures_lite::future::block_on(admin.create_topics(
        &[NewTopic::new(TOPIC, PARTITIONS, TopicReplication::Fixed(1))],
        &AdminOptions::new().operation_timeout(Some(Duration::from_secs(10))),
    ))
    .unwrap();
    assert!(created[0].is_ok(), "create topic: {:?}", created[0]);

    let mut expected = Expected::new();
    produce(&broker.bootstrap(), 0..12_000, &mut expected);
    assert_eq!(expected.len(), PARTITIONS as usize, "records spread over every partition");
    for (p, records) in &expected {
        let offsets: Vec<i64> = records.keys().copied().collect();
        let dense: Vec<i64> = (0..offsets.len() as i64).collect();
        assert_eq!(offsets, dense, "partition {p}: offsets assigned from 0 without gaps");
    }

    let c = common::consume::from_start(
        &broker.bootstrap(),
        "nb-verify",
        TOPIC,
        PARTITIONS,
        &[("fetch.wait.max.ms", "200")],
    );
    let mut got = Expected::new();
    consume_until(&c, &mut got, &expected, "first 12,000");

    // The consumer now waits at the end of every partition: records
    // produced while it long-polls must reach it.
    produce(&broker.bootstrap(), 12_000..15_000, &mut expected);
    consume_until(&c, &mut got, &expected, "3,000 more while polling");

    for p in 0..PARTITIONS {
        let (low, high) = c.fetch_watermarks(TOPIC, p, Duration::from_secs(10)).unwrap();
        assert_eq!((low, high), (0, expected[&p].len() as i64), "watermarks of partition {p}");
    }
}

fn bench(args: &[&str], out: &Path) -> (bool, Value, String) {
    let output = Command::new(env!("CARGO_BIN_EXE_shardlog"))
        .arg("bench")
        .args(args)
        .arg("--output")
        .arg(out)
        .args(["--name", "run"])
        .output()
        .expect("run shardlog bench");
    let log = format!("{}\n{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    let text = std::fs::read_to_string(out.join("run.json")).unwrap_or_else(|e| panic!("no result file ({e}): {log}"));
    (output.status.success(), serde_json::from_str(&text).expect("the result is JSON"), log)
}

#[test]
fn bench_e2e_against_it_gets_every_record_acknowledged_and_back_once_in_order() {
    let broker = NullBroker::start();
    let dir = common::tempdir().unwrap();
    let (ok, json, log) = bench(
        &[
            "e2e",
            "--bootstrap",
            &broker.bootstrap(),
            "--topic",
            "floor",
            "--partitions",
            "8",
            "--rate",
            "2000",
            "--record-size",
            "256",
            "--duration",
            "3s",
            "--warmup",
            "1s",
        ],
        dir.path(),
    );
    assert!(ok, "bench failed: {log}");
    assert_eq!(json["status"], "ok", "{log}");
    let n = |k: &str| json[k].as_f64().unwrap_or_else(|| panic!("{k} missing: {json}"));
    // 4 s at 2000/s from a phase of 0: 8000 intended sends.
    assert_eq!(n("sent"), 8000.0, "{log}");
    assert_eq!(n("acknowledged"), 8000.0);
    assert_eq!(n("received"), 8000.0, "every record back through Fetch");
    assert_eq!((n("lost"), n("duplicated"), n("out_of_order")), (0.0, 0.0, 0.0));
    // The null broker's own count agrees: its end offsets add up to the sends.
    let mut w = common::wire::Wire::connect(&broker.bootstrap());
    let end: i64 = (0..8).map(|p| partition_end(&mut w, "floor", p)).sum();
    assert_eq!(end, 8000, "records the null broker assigned offsets to");
}

fn partition_end(w: &mut common::wire::Wire, topic: &str, partition: i32) -> i64 {
    use kafka_protocol::messages::{
        list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic},
        ApiKey, BrokerId, ListOffsetsRequest, ListOffsetsResponse,
    };
    let mut p = ListOffsetsPartition::default();
    p.partition_index = partition;
    p.timestamp = -1;
    let mut t = ListOffsetsTopic::default();
    t.name = common::wire::topic_name(topic);
    t.partitions = vec![p];
    let mut req = ListOffsetsRequest::default();
    req.replica_id = BrokerId(-1);
    req.topics = vec![t];
    let resp: ListOffsetsResponse = w.call(ApiKey::ListOffsets, 5, &req);
    assert_eq!(resp.topics[0].partitions[0].error_code, 0);
    resp.topics[0].partitions[0].offset
}

#[test]
fn it_advertises_only_what_it_answers_and_closes_on_the_rest() {
    use kafka_protocol::messages::{
        ApiKey, ApiVersionsRequest, ApiVersionsResponse, FindCoordinatorRequest, FindCoordinatorResponse,
        JoinGroupRequest,
    };
    let broker = NullBroker::start();
    let mut w = common::wire::Wire::connect(&broker.bootstrap());
    let resp: ApiVersionsResponse = w.call(ApiKey::ApiVersions, 3, &ApiVersionsRequest::default());
    assert_eq!(resp.error_code, 0);
    let mut keys: Vec<i16> = resp.api_keys.iter().map(|k| k.api_key).collect();
    keys.sort();
    // Produce, Fetch, ListOffsets, Metadata, FindCoordinator, ApiVersions,
    // CreateTopics, InitProducerId, AddPartitionsToTxn, EndTxn.
    assert_eq!(keys, vec![0, 1, 2, 3, 10, 18, 19, 22, 24, 26]);
    // A group lookup finds no coordinator, so no group API follows.
    let mut lookup = FindCoordinatorRequest::default();
    lookup.key = kafka_protocol::protocol::StrBytes::from_static_str("some-group");
    let found: FindCoordinatorResponse = w.call(ApiKey::FindCoordinator, 3, &lookup);
    assert_eq!((found.error_code, found.node_id.0), (15, -1), "COORDINATOR_NOT_AVAILABLE");
    lookup.key_type = 1;
    let found: FindCoordinatorResponse = w.call(ApiKey::FindCoordinator, 3, &lookup);
    assert_eq!((found.error_code, found.node_id.0, found.port), (0, 0, i32::from(broker.port)));
    // A group API is not answered: the connection is closed, nothing else.
    w.send(ApiKey::JoinGroup, 5, &JoinGroupRequest::default());
    w.stream.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let read = std::io::Read::read(&mut w.stream, &mut [0u8; 1]);
    let closed = match &read {
        Ok(0) => true,
        Err(e) => e.kind() == std::io::ErrorKind::ConnectionReset,
        Ok(_) => false,
    };
    assert!(closed, "an API it does not advertise closes the connection (read gave {read:?})");
    let mut again = common::wire::Wire::connect(&broker.bootstrap());
    let resp: ApiVersionsResponse = again.call(ApiKey::ApiVersions, 0, &ApiVersionsRequest::default());
    assert_eq!(resp.api_keys.len(), 10, "still serving other connections");
}

#[test]
fn large_requests_come_back_whole_and_the_tail_is_bounded() {
    use common::wire::{create_topic, fetch_request, produce, Wire};
    use kafka_protocol::messages::{ApiKey, FetchResponse};
    const RECORDS: i64 = 400;
    let broker = NullBroker::start();
    let mut w = Wire::connect(&broker.bootstrap());
    assert_eq!(create_topic(&mut w, "big", 1), 0);
    // Batches of about 800 KB each (larger than a read of the socket), 11 MB
    // in all: more than the 8 MiB the null broker keeps per partition.
    let mut rng = common::Rng::new(12);
    let mut sent = Vec::new();
    for i in 0..14 {
        let batch = common::random_batch(&mut rng, RECORDS as usize, 4000).freeze();
        assert_eq!(produce(&mut w, "big", 0, batch.clone(), 1), (0, i * RECORDS), "batch {i}: offsets in order");
        sent.push(batch);
    }
    let end = 14 * RECORDS;
    let fetch = |w: &mut Wire, from: i64, wait_ms: i32| {
        let resp: FetchResponse = w.call(ApiKey::Fetch, 12, &fetch_request("big", &[(0, from)], wait_ms, 1));
        resp.responses[0].partitions[0].clone()
    };
    let p = fetch(&mut w, 0, 0);
    assert_eq!(p.error_code, 1, "offset 0 fell below the tail: OFFSET_OUT_OF_RANGE");
    let start = p.log_start_offset;
    assert!(start > 0 && start < end - RECORDS && start % RECORDS == 0, "log start {start}");
    assert_eq!(p.high_watermark, end);
    // From the log start on, every batch comes back as sent, its base offset
    // assigned (the CRC, which leaves the base offset out, still holds).
    let mut from = start;
    while from < end {
        let p = fetch(&mut w, from, 0);
        assert_eq!(p.error_code, 0);
        let records = p.records.expect("records");
        let mut at = 0;
        for (base, last, len) in common::batches_in(&records) {
            assert_eq!((base, last), (from, from + RECORDS - 1));
            let original = &sent[(from / RECORDS) as usize];
            assert!(records[at + 8..at + len] == original[8..], "batch at offset {from} differs from what was sent");
            (from, at) = (last + 1, at + len);
        }
    }
    // At the end, a fetch waits for max_wait_ms and comes back empty.
    let asked = Instant::now();
    let p = fetch(&mut w, end, 300);
    assert_eq!(p.error_code, 0);
    assert!(p.records.is_none_or(|r| r.is_empty()), "nothing past the end");
    assert!(asked.elapsed() >= Duration::from_millis(250), "long poll returned after {:?}", asked.elapsed());
}

/// Reads `topic`'s partitions from the start at `isolation` until `n`
/// records arrived (or 20 s passed): their values.
fn read_values(bootstrap: &str, topic: &str, partitions: i32, isolation: &str, n: usize) -> Vec<String> {
    let settings = [("isolation.level", isolation), ("fetch.wait.max.ms", "100")];
    let c = common::consume::from_start(bootstrap, "nb-txn-reader", topic, partitions, &settings);
    let mut got = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(20);
    while got.len() < n && Instant::now() < deadline {
        if let Some(m) = c.poll(Duration::from_millis(200)) {
            let m = m.unwrap_or_else(|e| panic!("{isolation}: consume error {e}"));
            got.push(String::from_utf8_lossy(m.payload().unwrap_or_default()).into_owned());
        }
    }
    got
}

/// On two cores (so half the markers cross to the other core), a
/// librdkafka transactional producer commits, aborts and commits again:
/// read_committed readers get exactly the committed records, through the
/// last stable offset and the aborted list; read_uncommitted ones get all.
#[test]
fn librdkafka_transactions_commit_and_abort_through_it() {
    let broker = NullBroker::start_on("0-1");
    let topic = "nb-txn";
    let admin: AdminClient<DefaultClientContext> =
        ClientConfig::new().set("bootstrap.servers", broker.bootstrap()).create().unwrap();
    let created = futures_lite::future::block_on(admin.create_topics(
        &[NewTopic::new(topic, PARTITIONS, TopicReplication::Fixed(1))],
        &AdminOptions::new().operation_timeout(Some(Duration::from_secs(10))),
    ))
    .unwrap();
    assert!(created[0].is_ok(), "create topic: {:?}", created[0]);
    let p: BaseProducer = ClientConfig::new()
        .set("bootstrap.servers", broker.bootstrap())
        .set("transactional.id", "nb-txn-producer")
        .create()
        .expect("transactional producer");
    let timeout = Duration::from_secs(20);
    p.init_transactions(timeout).expect("init_transactions");
    let mut committed = Vec::new();
    for (round, commit) in [(0, true), (1, false), (2, true)] {
        p.begin_transaction().expect("begin_transaction");
        for i in 0..40 {
            let value = format!("{}-{round}-{i}", if commit { "commit" } else { "abort" });
            let partition = i % PARTITIONS;
            p.send(BaseRecord::<(), String>::to(topic).payload(&value).partition(partition))
                .unwrap_or_else(|(e, _)| panic!("send: {e}"));
            if commit {
                committed.push(value);
            }
        }
        p.flush(timeout).expect("flush");
        if commit {
            p.commit_transaction(timeout).expect("commit_transaction");
        } else {
            p.abort_transaction(timeout).expect("abort_transaction");
        }
    }
    // A non-transactional record after them: read_committed reaches it
    // only past every marker.
    p.begin_transaction().unwrap();
    p.send(BaseRecord::<(), String>::to(topic).payload(&"last".to_string()).partition(0)).unwrap();
    p.commit_transaction(timeout).expect("last commit");
    committed.push("last".to_string());

    let mut got = read_values(&broker.bootstrap(), topic, PARTITIONS, "read_committed", committed.len());
    got.sort();
    committed.sort();
    assert_eq!(got, committed, "read_committed: exactly the committed records");
    let all = read_values(&broker.bootstrap(), topic, PARTITIONS, "read_uncommitted", 121);
    let distinct: std::collections::BTreeSet<&String> = all.iter().collect();
    assert_eq!((all.len(), distinct.len()), (121, 121), "read_uncommitted: every record once, aborted ones too");
    assert_eq!(all.iter().filter(|v| v.starts_with("abort-")).count(), 40);
    // Each partition holds 3 + 1 markers (partition 0) or 3, taking offsets;
    // partition p is led by node p % 2, on port + p % 2.
    let mut nodes: Vec<_> =
        (0..2).map(|n| common::wire::Wire::connect(&format!("127.0.0.1:{}", broker.port + n))).collect();
    let ends: i64 = (0..PARTITIONS).map(|part| partition_end(&mut nodes[part as usize % 2], topic, part)).sum();
    assert_eq!(ends, 120 + 1 + 3 * i64::from(PARTITIONS) + 1, "records plus one marker per partition per transaction");
}

#[test]
fn a_transactional_bench_against_it_reads_every_committed_record_once() {
    let broker = NullBroker::start();
    let dir = common::tempdir().unwrap();
    let (ok, json, log) = bench(
        &[
            "produce",
            "--client",
            "rdkafka",
            "--transactional",
            "--txn-interval",
            "100ms",
            "--bootstrap",
            &broker.bootstrap(),
            "--topic",
            "nb-txn-bench",
            "--partitions",
            "4",
            "--rate",
            "1000",
            "--record-size",
            "128",
            "--acks",
            "all",
            "--duration",
            "2s",
            "--warmup",
            "1s",
        ],
        dir.path(),
    );
    assert!(ok, "bench failed: {log}");
    let txn = &json["transactional"];
    let n = |k: &str| txn[k].as_f64().unwrap_or_else(|| panic!("{k} missing: {json}"));
    assert_eq!(n("sent"), 3000.0, "{log}");
    assert_eq!(n("received"), 3000.0, "every record read back read_committed: {log}");
    assert_eq!((n("lost"), n("duplicated"), n("out_of_order")), (0.0, 0.0, 0.0), "{log}");
    assert!(json["comparison"]["commits"].as_f64().unwrap_or(0.0) >= 20.0, "a commit every 100 ms: {json}");
}

/// Every version advertised for the transactional APIs answers, decoded
/// by the protocol crate: FindCoordinator v0–4 (v0 has no key type, so it
/// is a group lookup, which finds none), InitProducerId v0–4,
/// AddPartitionsToTxn v0–3 and EndTxn v0–3.
#[test]
fn every_advertised_version_of_the_transactional_apis_answers() {
    use common::wire::{create_topic, topic_name, Wire};
    use kafka_protocol::{
        messages::{
            add_partitions_to_txn_request::AddPartitionsToTxnTopic, AddPartitionsToTxnRequest,
            AddPartitionsToTxnResponse, ApiKey, EndTxnRequest, EndTxnResponse, FindCoordinatorRequest,
            FindCoordinatorResponse, InitProducerIdRequest, InitProducerIdResponse, ProducerId, TransactionalId,
        },
        protocol::StrBytes,
    };
    let broker = NullBroker::start();
    let mut w = Wire::connect(&broker.bootstrap());
    assert_eq!(create_topic(&mut w, "nb-versions", 2), 0);
    for version in 0..=4i16 {
        let id = format!("nb-versions-{version}");
        let mut lookup = FindCoordinatorRequest::default();
        lookup.key_type = if version == 0 { 0 } else { 1 };
        if version >= 4 {
            lookup.coordinator_keys = vec![StrBytes::from_string(id.clone())];
        } else {
            lookup.key = StrBytes::from_string(id.clone());
        }
        let found: FindCoordinatorResponse = w.call(ApiKey::FindCoordinator, version, &lookup);
        let (error, node) = match found.coordinators.first() {
            Some(c) if version >= 4 => (c.error_code, c.node_id.0),
            _ => (found.error_code, found.node_id.0),
        };
        let wanted = if version == 0 { (15, -1) } else { (0, 0) };
        assert_eq!((error, node), wanted, "FindCoordinator v{version}");

        let mut init = InitProducerIdRequest::default();
        init.transactional_id = Some(TransactionalId(StrBytes::from_string(id.clone())));
        init.transaction_timeout_ms = 60_000;
        init.producer_id = ProducerId(-1);
        init.producer_epoch = -1;
        let given: InitProducerIdResponse = w.call(ApiKey::InitProducerId, version, &init);
        assert_eq!((given.error_code, given.producer_epoch), (0, 0), "InitProducerId v{version}");
        assert!(given.producer_id.0 >= 0, "InitProducerId v{version}: {:?}", given.producer_id);
        if version > 3 {
            continue;
        }
        let mut topic = AddPartitionsToTxnTopic::default();
        topic.name = topic_name("nb-versions");
        topic.partitions = vec![0, 1];
        let mut add = AddPartitionsToTxnRequest::default();
        add.v3_and_below_transactional_id = TransactionalId(StrBytes::from_string(id.clone()));
        add.v3_and_below_producer_id = given.producer_id;
        add.v3_and_below_producer_epoch = given.producer_epoch;
        add.v3_and_below_topics = vec![topic];
        let added: AddPartitionsToTxnResponse = w.call(ApiKey::AddPartitionsToTxn, version, &add);
        let codes: Vec<i16> = added.results_by_topic_v3_and_below[0]
            .results_by_partition
            .iter()
            .map(|p| p.partition_error_code)
            .collect();
        assert_eq!(codes, vec![0, 0], "AddPartitionsToTxn v{version}");
        let mut end = EndTxnRequest::default();
        end.transactional_id = TransactionalId(StrBytes::from_string(id));
        end.producer_id = given.producer_id;
        end.producer_epoch = given.producer_epoch;
        end.committed = version % 2 == 0;
        let ended: EndTxnResponse = w.call(ApiKey::EndTxn, version, &end);
        assert_eq!(ended.error_code, 0, "EndTxn v{version}");
    }
    // Each EndTxn wrote a marker into both partitions: 4 transactions.
    let ends: i64 = (0..2).map(|p| partition_end(&mut w, "nb-versions", p)).sum();
    assert_eq!(ends, 8);
}
