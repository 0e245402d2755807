//! Every (API, version) pair the broker advertises, exercised over a real
//! socket against `shardlog serve --cores 1`.
//!
//! The table comes from the broker's own ApiVersions answer, so a version
//! added there is tested here without editing this file, and an API without
//! a check below fails the test. Each request is built with the protocol
//! crate at that version with every field the version carries set, and each
//! response is decoded at that version and its content checked against data
//! the test put there through other requests (records produced, offsets
//! committed, members joined). Error paths are part of the checks: unknown
//! topics and partitions, unknown members and groups, stale generations,
//! coordinator look-ups that cannot be answered.
//!
//! A failing pair does not stop the run: every pair is tried on a fresh
//! connection and the test fails at the end with the whole list.

#[path = "version_matrix/acls.rs"]
mod acls;
mod common;
#[path = "version_matrix/sasl.rs"]
mod sasl;
#[path = "version_matrix/txn.rs"]
mod txn;

use std::{
    collections::{BTreeMap, BTreeSet},
    io::Write,
    panic::{catch_unwind, AssertUnwindSafe},
};

use bytes::{BufMut, Bytes, BytesMut};
use common::{
    broker::Broker,
    wire::{topic_name, Wire},
};
use kafka_protocol::{
    messages::*,
    protocol::StrBytes,
    records::{
        Compression, Record, RecordBatchDecoder, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
        NO_PARTITION_LEADER_EPOCH, NO_PRODUCER_EPOCH, NO_PRODUCER_ID, NO_SEQUENCE,
    },
};

/// The topic the read-side checks use: two partitions, filled at setup.
const TOPIC: &str = "matrix";
/// Records per batch and batches per partition written at setup.
const SETUP_RECORDS: usize = 4;
const SETUP_BATCHES: usize = 3;
/// Base timestamp of setup batch `i` is `SETUP_TS + i * SETUP_TS_STEP`.
const SETUP_TS: i64 = 1_700_000_000_000;
const SETUP_TS_STEP: i64 = 60_000;

const NONE: i16 = 0;
const OFFSET_OUT_OF_RANGE: i16 = 1;
const UNKNOWN_TOPIC_OR_PARTITION: i16 = 3;
const ILLEGAL_GENERATION: i16 = 22;
const INVALID_GROUP_ID: i16 = 24;
const UNKNOWN_MEMBER_ID: i16 = 25;
const UNSUPPORTED_VERSION: i16 = 35;
const TOPIC_ALREADY_EXISTS: i16 = 36;
const INVALID_PARTITIONS: i16 = 37;
const INVALID_TOPIC_EXCEPTION: i16 = 17;
const NON_EMPTY_GROUP: i16 = 68;
const GROUP_ID_NOT_FOUND: i16 = 69;
const MEMBER_ID_REQUIRED: i16 = 79;
const UNKNOWN_TOPIC_ID: i16 = 100;
const ELECTION_NOT_NEEDED: i16 = 84;
const NO_REASSIGNMENT_IN_PROGRESS: i16 = 85;
const INVALID_REPLICA_ASSIGNMENT: i16 = 39;

const CONFIG: &str = "group_initial_rebalance_delay_ms = 0\n";

#[test]
fn every_advertised_version_answers() {
    let dir = common::tempdir().unwrap();
    let broker = Broker::start_with_config(&dir.path().join("data"), 1, CONFIG, &[]);
    let addr = broker.bootstrap();
    let fx = Fixture::set_up(&addr, broker.port);

    let table = advertised(&addr);
    let mut covered = Vec::new();
    let mut failed = Vec::new();
    // Failures are gathered with their messages below; the default hook
    // would print a backtrace for each.
    let hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    for &(key, (min, max)) in &table {
        for version in min..=max {
            let started = std::time::Instant::now();
            let outcome = catch_unwind(AssertUnwindSafe(|| check(&fx, key, version)));
            covered.push((key, version));
            if let Err(panic) = outcome {
                failed.push(format!("{key:?} v{version} ({:?}): {}", started.elapsed(), panic_message(&panic)));
            }
        }
    }
    std::panic::set_hook(hook);
    eprintln!("version matrix covered {} pairs:", covered.len());
    for (key, (min, max)) in &table {
        eprintln!("  {key:?} {min}..={max}");
    }
    assert!(failed.is_empty(), "{} of {} pairs failed:\n{}", failed.len(), covered.len(), failed.join("\n"));

    flexible_boundaries_are_covered(&table);
    let log = broker.log.lock().unwrap().join("\n");
    for needle in ["cannot be encoded", "cannot size response", "cannot encode"] {
        assert!(!log.contains(needle), "responses failed to encode:\n{log}");
    }
}

/// The README's "Supported Kafka APIs" paragraph names the same APIs and
/// ranges as the broker's ApiVersions answer.
#[test]
fn readme_lists_the_advertised_apis() {
    let dir = common::tempdir().unwrap();
    let broker = Broker::start(&dir.path().join("data"), 1);
    let advertised: BTreeMap<String, (i16, i16)> =
        advertised(&broker.bootstrap()).into_iter().map(|(k, range)| (format!("{k:?}"), range)).collect();
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md")).unwrap();
    assert_eq!(readme_apis(&readme), advertised, "README.md's Supported Kafka APIs vs ApiVersions");
}

/// `Name a–b` or `Name a` entries, comma-separated, up to the paragraph's
/// end; parenthesised remarks are skipped.
fn readme_apis(readme: &str) -> BTreeMap<String, (i16, i16)> {
    let start = readme.find("Supported Kafka APIs:").expect("a Supported Kafka APIs paragraph in README.md");
    let paragraph = &readme[start + "Supported Kafka APIs:".len()..];
    let paragraph = &paragraph[..paragraph.find("\n\n").unwrap_or(paragraph.len())];
    let (mut plain, mut depth) = (String::new(), 0);
    for c in paragraph.chars() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            _ if depth == 0 => plain.push(c),
            _ => {}
        }
    }
    let list = plain.split(". ").next().unwrap().trim_end_matches('.');
    list.split(',')
        .map(|entry| {
            let words: Vec<&str> = entry.split_whitespace().collect();
            assert_eq!(words.len(), 2, "README entry {entry:?} is not `Name a–b`");
            let (min, max) = words[1].split_once('–').unwrap_or((words[1], words[1]));
            let parse = |n: &str| n.parse::<i16>().unwrap_or_else(|_| panic!("README version {n:?} in {entry:?}"));
            (words[0].to_string(), (parse(min), parse(max)))
        })
        .collect()
}

/// Where an API's range spans the switch to flexible (compact) encoding,
/// both the last rigid and the first flexible version were exercised.
fn flexible_boundaries_are_covered(table: &[(ApiKey, (i16, i16))]) {
    let mut spans = 0;
    for &(key, (min, max)) in table {
        let flexible = |v: i16| key.request_header_version(v) >= 2;
        if let Some(first) = (min..=max).find(|&v| flexible(v)) {
            if first > min {
                assert!(!flexible(first - 1), "{key:?}: v{} is rigid", first - 1);
                spans += 1;
            }
        }
    }
    // Metadata, CreateTopics, Fetch, JoinGroup, … all switch within range.
    assert!(spans >= 10, "only {spans} APIs span a flexible boundary: the table shrank");
}

/// The broker's ApiVersions table, read at the newest version.
fn advertised(addr: &str) -> Vec<(ApiKey, (i16, i16))> {
    let mut w = Wire::connect(addr);
    let mut req = ApiVersionsRequest::default();
    req.client_software_name = StrBytes::from_static_str("version-matrix");
    req.client_software_version = StrBytes::from_static_str("1.0");
    let resp: ApiVersionsResponse = w.call(ApiKey::ApiVersions, 3, &req);
    assert_eq!(resp.error_code, NONE);
    resp.api_keys
        .iter()
        .map(|k| {
            let key = ApiKey::try_from(k.api_key).unwrap_or_else(|_| panic!("unknown API key {}", k.api_key));
            (key, (k.min_version, k.max_version))
        })
        .collect()
}

fn panic_message(panic: &Box<dyn std::any::Any + Send>) -> String {
    panic
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_else(|| "panic".into())
}

fn check(fx: &Fixture, key: ApiKey, v: i16) {
    let mut w = Wire::connect(&fx.addr);
    match key {
        ApiKey::ApiVersions => api_versions(fx, &mut w, v),
        ApiKey::Metadata => metadata(fx, &mut w, v),
        ApiKey::CreateTopics => create_topics(&mut w, v),
        ApiKey::DeleteTopics => delete_topics(&mut w, v),
        ApiKey::Produce if v <= 2 => produce_old(&mut w, v),
        ApiKey::Produce => produce(fx, &mut w, v),
        ApiKey::Fetch => fetch(fx, &mut w, v),
        ApiKey::ListOffsets => list_offsets(fx, &mut w, v),
        ApiKey::FindCoordinator => find_coordinator(fx, &mut w, v),
        ApiKey::JoinGroup => join_group(&mut w, v),
        ApiKey::SyncGroup => sync_group(&mut w, v),
        ApiKey::Heartbeat => heartbeat(&mut w, v),
        ApiKey::LeaveGroup => leave_group(&mut w, v),
        ApiKey::OffsetCommit => offset_commit(&mut w, v),
        ApiKey::OffsetFetch => offset_fetch(&mut w, v),
        ApiKey::DescribeGroups => describe_groups(&mut w, v),
        ApiKey::ListGroups => list_groups(&mut w, v),
        ApiKey::DeleteGroups => delete_groups(&mut w, v),
        ApiKey::OffsetDelete => offset_delete(&mut w, v),
        ApiKey::InitProducerId => init_producer_id(&mut w, v),
        ApiKey::CreatePartitions => create_partitions(&mut w, v),
        ApiKey::DescribeConfigs => describe_configs(&mut w, v),
        ApiKey::AlterConfigs => alter_configs(&mut w, v),
        ApiKey::IncrementalAlterConfigs => incremental_alter_configs(&mut w, v),
        ApiKey::DescribeCluster => describe_cluster(fx, &mut w, v),
        ApiKey::DeleteRecords => delete_records(&mut w, v),
        ApiKey::OffsetForLeaderEpoch => offset_for_leader_epoch(fx, &mut w, v),
        ApiKey::DescribeLogDirs => describe_log_dirs(&mut w, v),
        ApiKey::ElectLeaders => elect_leaders(&mut w, v),
        ApiKey::AlterPartitionReassignments => alter_partition_reassignments(&mut w, v),
        ApiKey::ListPartitionReassignments => list_partition_reassignments(&mut w, v),
        ApiKey::WriteTxnMarkers => write_txn_markers(&mut w, v),
        ApiKey::AddPartitionsToTxn => txn::add_partitions_to_txn(&mut w, v),
        ApiKey::AddOffsetsToTxn => txn::add_offsets_to_txn(&mut w, v),
        ApiKey::EndTxn => txn::end_txn(&mut w, v),
        ApiKey::TxnOffsetCommit => txn::txn_offset_commit(&mut w, v),
        ApiKey::DescribeTransactions => txn::describe_transactions(&mut w, v),
        ApiKey::ListTransactions => txn::list_transactions(&mut w, v),
        ApiKey::CreateAcls => acls::create_acls(&mut w, v),
        ApiKey::DescribeAcls => acls::describe_acls(&mut w, v),
        ApiKey::DeleteAcls => acls::delete_acls(&mut w, v),
        ApiKey::SaslHandshake => sasl::sasl_handshake(&mut w, v),
        ApiKey::SaslAuthenticate => sasl::sasl_authenticate(&mut w, v),
        ApiKey::DescribeUserScramCredentials => sasl::describe_user_scram_credentials(&mut w, v),
        ApiKey::AlterUserScramCredentials => sasl::alter_user_scram_credentials(&mut w, v),
        other => panic!("{other:?} is advertised but the matrix has no check for it"),
    }
}

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_string())
}

// ---------------------------------------------------------------- fixture

/// What setup wrote: per partition of `TOPIC`, each batch's base offset and
/// its records' values.
struct Fixture {
    addr: String,
    port: u16,
    batches: Vec<Vec<(i64, Vec<String>)>>,
}

impl Fixture {
    fn set_up(addr: &str, port: u16) -> Self {
        let mut w = Wire::connect(addr);
        assert_eq!(common::wire::create_topic(&mut w, TOPIC, 2), NONE);
        let mut batches = vec![Vec::new(), Vec::new()];
        for (p, out) in batches.iter_mut().enumerate() {
            for b in 0..SETUP_BATCHES {
                let values: Vec<String> = (0..SETUP_RECORDS).map(|r| format!("p{p}-b{b}-r{r}")).collect();
                let batch = encode(&values, SETUP_TS + b as i64 * SETUP_TS_STEP);
                let (error, base) = common::wire::produce(&mut w, TOPIC, p as i32, batch, -1);
                assert_eq!(error, NONE, "setup produce to {TOPIC}-{p}");
                out.push((base, values));
            }
        }
        Self { addr: addr.to_string(), port, batches }
    }

    fn end(&self, partition: usize) -> i64 {
        let (base, values) = self.batches[partition].last().unwrap();
        base + values.len() as i64
    }

    fn values(&self, partition: usize) -> Vec<String> {
        self.batches[partition].iter().flat_map(|(_, v)| v.clone()).collect()
    }
}

/// A v2 batch of keyed records, built by the protocol crate's encoder (not
/// the broker's).
fn encode(values: &[String], ts: i64) -> Bytes {
    let records: Vec<Record> = values
        .iter()
        .enumerate()
        .map(|(i, v)| Record {
            transactional: false,
            control: false,
            partition_leader_epoch: NO_PARTITION_LEADER_EPOCH,
            producer_id: NO_PRODUCER_ID,
            producer_epoch: NO_PRODUCER_EPOCH,
            delete_horizon: false,
            timestamp_type: TimestampType::Creation,
            offset: i as i64,
            sequence: NO_SEQUENCE,
            timestamp: ts + i as i64,
            key: Some(Bytes::from(format!("k{i}"))),
            value: Some(Bytes::from(v.clone())),
            headers: Default::default(),
        })
        .collect();
    let mut buf = BytesMut::new();
    RecordBatchEncoder::encode(&mut buf, &records, &RecordEncodeOptions { version: 2, compression: Compression::None })
        .expect("encode a batch");
    buf.freeze()
}

/// (offset, value) of every record in a fetched records field.
fn decode_records(records: Option<&Bytes>) -> Vec<(i64, String)> {
    let mut bytes = records.cloned().unwrap_or_default();
    RecordBatchDecoder::decode_all(&mut bytes)
        .expect("fetched batches decode")
        .into_iter()
        .flat_map(|set| set.records)
        .map(|r| (r.offset, String::from_utf8(r.value.unwrap_or_default().to_vec()).unwrap()))
        .collect()
}

// ---------------------------------------------------------------- topics

fn api_versions(fx: &Fixture, w: &mut Wire, v: i16) {
    let mut req = ApiVersionsRequest::default();
    if v >= 3 {
        req.client_software_name = s("version-matrix");
        req.client_software_version = s("1.0");
    }
    let resp: ApiVersionsResponse = w.call(ApiKey::ApiVersions, v, &req);
    assert_eq!(resp.error_code, NONE);
    let listed: BTreeMap<i16, (i16, i16)> =
        resp.api_keys.iter().map(|k| (k.api_key, (k.min_version, k.max_version))).collect();
    let newest: BTreeMap<i16, (i16, i16)> =
        advertised(&fx.addr).into_iter().map(|(k, range)| (k as i16, range)).collect();
    assert_eq!(listed, newest, "every ApiVersions version lists the same table");
    let newest_version = listed[&(ApiKey::ApiVersions as i16)].1;
    // One past the newest: a v0 answer with UNSUPPORTED_VERSION and the
    // table, so the client can retry with a version both speak.
    if v == newest_version && ApiKey::ApiVersions.valid_versions().max > v {
        w.send(ApiKey::ApiVersions, v + 1, &req);
        let resp: ApiVersionsResponse = w.receive(ApiKey::ApiVersions, 0);
        assert_eq!(resp.error_code, UNSUPPORTED_VERSION);
        let relisted: BTreeMap<i16, (i16, i16)> =
            resp.api_keys.iter().map(|k| (k.api_key, (k.min_version, k.max_version))).collect();
        assert_eq!(relisted, listed);
    }
}

fn metadata(fx: &Fixture, w: &mut Wire, v: i16) {
    let missing = format!("matrix-missing-md{v}");
    let mut req = MetadataRequest::default();
    let mut topics = vec![TOPIC.to_string()];
    // v0–v3 always auto-create, so only later versions can ask about a
    // missing topic without creating it.
    if v >= 4 {
        topics.push(missing.clone());
        req.allow_auto_topic_creation = false;
    }
    req.topics = Some(
        topics
            .iter()
            .map(|t| {
                let mut mt = metadata_request::MetadataRequestTopic::default();
                mt.name = Some(topic_name(t));
                mt
            })
            .collect(),
    );
    if (8..=10).contains(&v) {
        req.include_cluster_authorized_operations = true;
    }
    if v >= 8 {
        req.include_topic_authorized_operations = true;
    }
    let resp: MetadataResponse = w.call(ApiKey::Metadata, v, &req);
    assert_eq!(resp.brokers.len(), 1);
    assert_eq!(resp.brokers[0].port, fx.port as i32);
    assert_eq!(resp.brokers[0].host.as_str(), "127.0.0.1");
    if v >= 1 {
        assert_eq!(resp.controller_id, resp.brokers[0].node_id);
    }
    if v >= 2 {
        assert!(resp.cluster_id.as_ref().is_some_and(|c| !c.is_empty()), "cluster id from v2");
    }
    assert_eq!(resp.topics.len(), topics.len());
    let t = &resp.topics[0];
    assert_eq!(t.name.as_ref().unwrap().as_str(), TOPIC);
    assert_eq!(t.error_code, NONE);
    assert_eq!(t.partitions.len(), 2);
    for (i, p) in t.partitions.iter().enumerate() {
        assert_eq!(p.partition_index, i as i32);
        assert_eq!(p.leader_id, resp.brokers[0].node_id);
        assert_eq!(p.replica_nodes, vec![resp.brokers[0].node_id]);
    }
    if v >= 10 {
        assert!(!t.topic_id.is_nil(), "topic id from v10");
    }
    if v >= 4 {
        let m = &resp.topics[1];
        assert_eq!(m.name.as_ref().unwrap().as_str(), missing);
        assert_eq!(m.error_code, UNKNOWN_TOPIC_OR_PARTITION, "{missing} was not to be created");
    }
    // All topics: null from v1, an empty list at v0.
    let mut all = MetadataRequest::default();
    all.topics = if v >= 1 { None } else { Some(Vec::new()) };
    let resp: MetadataResponse = w.call(ApiKey::Metadata, v, &all);
    assert!(resp.topics.iter().any(|t| t.name.as_ref().is_some_and(|n| n.as_str() == TOPIC)));
}

fn creatable(name: &str, partitions: i32) -> create_topics_request::CreatableTopic {
    let mut t = create_topics_request::CreatableTopic::default();
    t.name = topic_name(name);
    t.num_partitions = partitions;
    t.replication_factor = 1;
    let mut c = create_topics_request::CreatableTopicConfig::default();
    c.name = s("retention.ms");
    c.value = Some(s("3600000"));
    t.configs.push(c);
    t
}

fn create_topics(w: &mut Wire, v: i16) {
    let name = format!("matrix-ct{v}");
    let mut req = CreateTopicsRequest::default();
    req.timeout_ms = 10_000;
    req.topics.push(creatable(&name, 3));
    // Explicit assignments with num_partitions = -1: the count is theirs.
    let assigned = format!("matrix-ct{v}-assigned");
    let mut t = creatable(&assigned, -1);
    t.replication_factor = -1;
    for p in 0..2 {
        let mut a = create_topics_request::CreatableReplicaAssignment::default();
        a.partition_index = p;
        a.broker_ids = vec![0.into()];
        t.assignments.push(a);
    }
    req.topics.push(t);
    req.topics.push(creatable(TOPIC, 1));
    req.topics.push(creatable("bad/name", 1));
    req.topics.push(creatable(&format!("matrix-ct{v}-zero"), 0));
    let resp: CreateTopicsResponse = w.call(ApiKey::CreateTopics, v, &req);
    let codes: Vec<(String, i16)> = resp.topics.iter().map(|t| (t.name.to_string(), t.error_code)).collect();
    assert_eq!(
        codes,
        vec![
            (name.clone(), NONE),
            (assigned.clone(), NONE),
            (TOPIC.to_string(), TOPIC_ALREADY_EXISTS),
            ("bad/name".to_string(), INVALID_TOPIC_EXCEPTION),
            (format!("matrix-ct{v}-zero"), INVALID_PARTITIONS),
        ]
    );
    if v >= 5 {
        assert_eq!((resp.topics[0].num_partitions, resp.topics[0].replication_factor), (3, 1));
        assert_eq!(resp.topics[1].num_partitions, 2);
    }
    if v >= 7 {
        assert!(!resp.topics[0].topic_id.is_nil());
    }
    if v >= 1 {
        assert!(resp.topics[2].error_message.as_ref().is_some_and(|m| m.contains(TOPIC)));
    }
    assert_eq!(partitions_of(w, &name), Some(3));
    assert_eq!(partitions_of(w, &assigned), Some(2));

    // validate_only: answered, not created.
    let dry = format!("matrix-ct{v}-dry");
    let mut req = CreateTopicsRequest::default();
    req.timeout_ms = 10_000;
    req.validate_only = true;
    req.topics.push(creatable(&dry, 2));
    let resp: CreateTopicsResponse = w.call(ApiKey::CreateTopics, v, &req);
    assert_eq!(resp.topics[0].error_code, NONE);
    assert_eq!(partitions_of(w, &dry), None, "validate_only created {dry}");
}

/// Partition count of a topic, `None` when it does not exist (Metadata v12,
/// no auto-creation).
fn partitions_of(w: &mut Wire, name: &str) -> Option<usize> {
    let mut req = MetadataRequest::default();
    let mut t = metadata_request::MetadataRequestTopic::default();
    t.name = Some(topic_name(name));
    req.topics = Some(vec![t]);
    req.allow_auto_topic_creation = false;
    let resp: MetadataResponse = w.call(ApiKey::Metadata, 12, &req);
    (resp.topics[0].error_code == NONE).then(|| resp.topics[0].partitions.len())
}

fn delete_topics(w: &mut Wire, v: i16) {
    let name = format!("matrix-dt{v}");
    assert_eq!(common::wire::create_topic(w, &name, 1), NONE);
    let missing = format!("matrix-dt{v}-missing");
    let mut req = DeleteTopicsRequest::default();
    req.timeout_ms = 10_000;
    if v >= 6 {
        for n in [&name, &missing] {
            let mut st = delete_topics_request::DeleteTopicState::default();
            st.name = Some(topic_name(n));
            req.topics.push(st);
        }
    } else {
        req.topic_names = vec![topic_name(&name), topic_name(&missing)];
    }
    let resp: DeleteTopicsResponse = w.call(ApiKey::DeleteTopics, v, &req);
    let got: Vec<(String, i16)> =
        resp.responses.iter().map(|r| (r.name.as_ref().unwrap().to_string(), r.error_code)).collect();
    assert_eq!(got, vec![(name.clone(), NONE), (missing, UNKNOWN_TOPIC_OR_PARTITION)]);
    assert_eq!(partitions_of(w, &name), None, "{name} still exists");

    // v6 names topics by id too: a known id, and one no topic has.
    if v >= 6 {
        let by_id = format!("matrix-dt{v}-by-id");
        assert_eq!(common::wire::create_topic(w, &by_id, 1), NONE);
        let id = topic_id(w, &by_id);
        let unknown = uuid::Uuid::from_u128(0x5eed);
        let mut req = DeleteTopicsRequest::default();
        req.timeout_ms = 10_000;
        for topic_id in [id, unknown] {
            let mut st = delete_topics_request::DeleteTopicState::default();
            st.topic_id = topic_id;
            req.topics.push(st);
        }
        let resp: DeleteTopicsResponse = w.call(ApiKey::DeleteTopics, v, &req);
        let got: Vec<(Option<String>, uuid::Uuid, i16)> =
            resp.responses.iter().map(|r| (r.name.as_ref().map(|n| n.to_string()), r.topic_id, r.error_code)).collect();
        assert_eq!(got, vec![(Some(by_id.clone()), id, NONE), (None, unknown, UNKNOWN_TOPIC_ID)]);
        assert_eq!(partitions_of(w, &by_id), None, "{by_id} still exists");
    }
}

fn topic_id(w: &mut Wire, name: &str) -> uuid::Uuid {
    let mut req = MetadataRequest::default();
    let mut t = metadata_request::MetadataRequestTopic::default();
    t.name = Some(topic_name(name));
    req.topics = Some(vec![t]);
    req.allow_auto_topic_creation = false;
    let resp: MetadataResponse = w.call(ApiKey::Metadata, 12, &req);
    resp.topics[0].topic_id
}

// ---------------------------------------------------------------- records

/// Produce v0–v2: advertised, answered UNSUPPORTED_VERSION (as Kafka 4.0).
/// The protocol crate cannot build these versions, so the bytes are laid
/// out here from Kafka's schema.
fn produce_old(w: &mut Wire, v: i16) {
    let mut body = BytesMut::new();
    body.put_i16(ApiKey::Produce as i16);
    body.put_i16(v);
    body.put_i32(1); // correlation id
    body.put_i16(-1); // no client id
    body.put_i16(1); // acks
    body.put_i32(10_000);
    body.put_i32(1);
    body.put_i16(TOPIC.len() as i16);
    body.put_slice(TOPIC.as_bytes());
    body.put_i32(1);
    body.put_i32(0); // partition
    let message_set = [0u8; 26];
    body.put_i32(message_set.len() as i32);
    body.put_slice(&message_set);
    let mut frame = BytesMut::new();
    frame.put_i32(body.len() as i32);
    frame.put_slice(&body);
    w.stream.write_all(&frame).unwrap();
    let mut resp = Vec::new();
    shardlog::client::read_frame(&mut w.stream, ApiKey::Produce, v, &mut resp).unwrap();
    let be16 = |at: usize| i16::from_be_bytes([resp[at], resp[at + 1]]);
    let be32 = |at: usize| i32::from_be_bytes(resp[at..at + 4].try_into().unwrap());
    assert_eq!(be32(0), 1, "correlation id");
    assert_eq!(be32(4), 1, "one topic");
    assert_eq!(&resp[10..10 + TOPIC.len()], TOPIC.as_bytes());
    let at = 10 + TOPIC.len();
    assert_eq!(be32(at), 1, "one partition");
    assert_eq!(be32(at + 4), 0, "partition 0");
    assert_eq!(be16(at + 8), UNSUPPORTED_VERSION);
    let expected_len = at + 10 + 8 + if v >= 2 { 8 } else { 0 } + if v >= 1 { 4 } else { 0 };
    assert_eq!(resp.len(), expected_len, "v{v} response layout");
}

fn produce(fx: &Fixture, w: &mut Wire, v: i16) {
    // Each version appends to its own topic, so offsets are known exactly.
    let topic = format!("matrix-pr{v}");
    assert_eq!(common::wire::create_topic(w, &topic, 2), NONE);
    let values: Vec<String> = (0..3).map(|i| format!("produced-v{v}-{i}")).collect();
    let mut req = ProduceRequest::default();
    req.acks = -1;
    req.timeout_ms = 10_000;
    let mut td = produce_request::TopicProduceData::default();
    td.name = topic_name(&topic);
    for (index, records) in
        [(0, encode(&values[..2], SETUP_TS)), (1, encode(&values[2..], SETUP_TS)), (7, encode(&values, SETUP_TS))]
    {
        let mut pd = produce_request::PartitionProduceData::default();
        pd.index = index;
        pd.records = Some(records);
        td.partition_data.push(pd);
    }
    req.topic_data.push(td);
    let resp: ProduceResponse = w.call(ApiKey::Produce, v, &req);
    let parts = &resp.responses[0].partition_responses;
    assert_eq!(resp.responses[0].name.as_str(), topic);
    let got: Vec<(i32, i16, i64)> = parts.iter().map(|p| (p.index, p.error_code, p.base_offset)).collect();
    assert_eq!(got[..2], [(0, NONE, 0), (1, NONE, 0)]);
    assert_eq!((got[2].0, got[2].1), (7, UNKNOWN_TOPIC_OR_PARTITION));
    if v >= 5 {
        assert_eq!(parts[0].log_start_offset, 0);
    }
    if v >= 8 {
        assert!(parts[0].record_errors.is_empty());
    }
    // Read back with a fixed Fetch version.
    let fetched: FetchResponse =
        w.call(ApiKey::Fetch, 12, &common::wire::fetch_request(&topic, &[(0, 0), (1, 0)], 0, 0));
    let read = |i: usize| decode_records(fetched.responses[0].partitions[i].records.as_ref());
    assert_eq!(read(0), vec![(0, values[0].clone()), (1, values[1].clone())]);
    assert_eq!(read(1), vec![(0, values[2].clone())]);
    // A transactional id is accepted (Kafka checks it only for ACLs): the
    // batches append after the first ones.
    req.transactional_id = Some(s("matrix-tx").into());
    let again: ProduceResponse = w.call(ApiKey::Produce, v, &req);
    let got: Vec<(i32, i16, i64)> =
        again.responses[0].partition_responses.iter().map(|p| (p.index, p.error_code, p.base_offset)).collect();
    assert_eq!(got[..2], [(0, NONE, 2), (1, NONE, 1)]);
    req.transactional_id = None;
    let _ = fx;
}

fn fetch(fx: &Fixture, w: &mut Wire, v: i16) {
    let mut req = FetchRequest::default();
    req.replica_id = (-1).into();
    req.max_wait_ms = 50;
    req.min_bytes = 1;
    req.max_bytes = 50 << 20;
    // read_committed: without transactions everything below the high
    // watermark is stable, so the answer is the same as read_uncommitted.
    req.isolation_level = 1;
    if v >= 7 {
        // A full fetch outside any session: forgotten topics mean nothing.
        req.session_id = 0;
        req.session_epoch = -1;
        let mut forgotten = fetch_request::ForgottenTopic::default();
        forgotten.topic = topic_name("matrix-forgotten");
        forgotten.topic_id = uuid::Uuid::from_u128(0xf0f0);
        forgotten.partitions = vec![0];
        req.forgotten_topics_data.push(forgotten);
    }
    if v >= 11 {
        req.rack_id = s("rack-a");
    }
    if v >= 15 {
        let mut state = fetch_request::ReplicaState::default();
        state.replica_id = (-1).into();
        state.replica_epoch = -1;
        req.replica_state = state;
    }
    // From v13 topics travel by id: the fixture topic's, and one no topic has.
    let id = topic_id(w, TOPIC);
    let no_such_id = uuid::Uuid::from_u128(0x5eed_0000_0000_0000_0000_0000_0000_0013);
    let mut t = fetch_request::FetchTopic::default();
    t.topic = topic_name(TOPIC);
    t.topic_id = id;
    let second = fx.batches[1][1].0;
    for (partition, offset) in [(0, 0), (1, second), (0, fx.end(0) + 100), (9, 0)] {
        let mut p = fetch_request::FetchPartition::default();
        p.partition = partition;
        p.fetch_offset = offset;
        p.partition_max_bytes = 1 << 20;
        if v >= 5 {
            p.log_start_offset = -1;
        }
        if v >= 9 {
            p.current_leader_epoch = 0;
        }
        if v >= 12 {
            p.last_fetched_epoch = -1;
        }
        t.partitions.push(p);
    }
    req.topics.push(t);
    if v >= 13 {
        let mut unknown = fetch_request::FetchTopic::default();
        unknown.topic_id = no_such_id;
        let mut p = fetch_request::FetchPartition::default();
        p.partition_max_bytes = 1 << 20;
        p.current_leader_epoch = -1;
        p.last_fetched_epoch = -1;
        p.log_start_offset = -1;
        unknown.partitions.push(p);
        req.topics.push(unknown);
    }
    let resp: FetchResponse = w.call(ApiKey::Fetch, v, &req);
    if v >= 7 {
        assert_eq!(resp.error_code, NONE);
        assert_eq!(resp.session_id, 0);
    }
    if v >= 13 {
        assert_eq!(resp.responses.len(), 2);
        assert_eq!(resp.responses[0].topic_id, id);
        assert_eq!(resp.responses[1].topic_id, no_such_id);
        let unknown: Vec<(i32, i16)> =
            resp.responses[1].partitions.iter().map(|p| (p.partition_index, p.error_code)).collect();
        assert_eq!(unknown, vec![(0, UNKNOWN_TOPIC_ID)]);
    } else {
        assert_eq!(resp.responses.len(), 1);
        assert_eq!(resp.responses[0].topic.as_str(), TOPIC);
    }
    let parts = &resp.responses[0].partitions;
    let codes: Vec<(i32, i16)> = parts.iter().map(|p| (p.partition_index, p.error_code)).collect();
    assert_eq!(codes, vec![(0, NONE), (1, NONE), (0, OFFSET_OUT_OF_RANGE), (9, UNKNOWN_TOPIC_OR_PARTITION)]);
    for (p, part) in parts.iter().enumerate().take(2) {
        assert_eq!(part.high_watermark, fx.end(p));
        if v >= 4 {
            assert_eq!(part.last_stable_offset, fx.end(p));
        }
        if v >= 5 {
            assert_eq!(part.log_start_offset, 0);
        }
    }
    let values = |p: usize, skip: usize| -> Vec<(i64, String)> {
        fx.values(p).into_iter().enumerate().skip(skip).map(|(i, v)| (i as i64, v)).collect()
    };
    assert_eq!(decode_records(parts[0].records.as_ref()), values(0, 0));
    assert_eq!(decode_records(parts[1].records.as_ref()), values(1, second as usize));
}

fn list_offsets(fx: &Fixture, w: &mut Wire, v: i16) {
    let mut req = ListOffsetsRequest::default();
    req.replica_id = (-1).into();
    if v >= 2 {
        req.isolation_level = 1;
    }
    let mut t = list_offsets_request::ListOffsetsTopic::default();
    t.name = topic_name(TOPIC);
    // Earliest, latest, and the timestamp of partition 1's third batch.
    let queries = [(0, -2), (0, -1), (1, SETUP_TS + 2 * SETUP_TS_STEP), (1, SETUP_TS + 100 * SETUP_TS_STEP)];
    for (partition, timestamp) in queries {
        let mut p = list_offsets_request::ListOffsetsPartition::default();
        p.partition_index = partition;
        p.timestamp = timestamp;
        if v >= 4 {
            p.current_leader_epoch = 0;
        }
        t.partitions.push(p);
    }
    req.topics.push(t);
    let mut unknown = list_offsets_request::ListOffsetsTopic::default();
    unknown.name = topic_name("matrix-no-such-topic");
    let mut p = list_offsets_request::ListOffsetsPartition::default();
    p.timestamp = -1;
    unknown.partitions.push(p);
    req.topics.push(unknown);

    let resp: ListOffsetsResponse = w.call(ApiKey::ListOffsets, v, &req);
    assert_eq!(resp.topics.len(), 2);
    let got: Vec<(i32, i16, i64)> =
        resp.topics[0].partitions.iter().map(|p| (p.partition_index, p.error_code, p.offset)).collect();
    let third = fx.batches[1][2].0;
    assert_eq!(got, vec![(0, NONE, 0), (0, NONE, fx.end(0)), (1, NONE, third), (1, NONE, -1)]);
    assert_eq!(resp.topics[0].partitions[2].timestamp, SETUP_TS + 2 * SETUP_TS_STEP);
    if v >= 4 {
        assert_eq!(resp.topics[0].partitions[0].leader_epoch, 0);
    }
    assert_eq!(resp.topics[1].partitions[0].error_code, UNKNOWN_TOPIC_OR_PARTITION);

    // MAX_TIMESTAMP (-3, from v7): setup timestamps grow, so the newest
    // record of partition 1 carries the largest.
    if v >= 7 {
        let mut req = req.clone();
        req.topics.truncate(1);
        req.topics[0].partitions.truncate(1);
        req.topics[0].partitions[0].partition_index = 1;
        req.topics[0].partitions[0].timestamp = -3;
        let resp: ListOffsetsResponse = w.call(ApiKey::ListOffsets, v, &req);
        let p = &resp.topics[0].partitions[0];
        let last_ts = SETUP_TS + (SETUP_BATCHES as i64 - 1) * SETUP_TS_STEP + SETUP_RECORDS as i64 - 1;
        assert_eq!((p.error_code, p.offset, p.timestamp), (NONE, fx.end(1) - 1, last_ts));
    }
    // EARLIEST_LOCAL (-4, v8+): everything is local, so the log start;
    // LATEST_TIERED (-5, v9+): nothing is tiered, so -1, as Kafka answers
    // with remote storage off.
    for (from, timestamp, expect) in [(8, -4, 0), (9, -5, -1)] {
        if v >= from {
            let mut req = req.clone();
            req.topics.truncate(1);
            req.topics[0].partitions.truncate(1);
            req.topics[0].partitions[0].partition_index = 1;
            req.topics[0].partitions[0].timestamp = timestamp;
            let resp: ListOffsetsResponse = w.call(ApiKey::ListOffsets, v, &req);
            let p = &resp.topics[0].partitions[0];
            assert_eq!((p.error_code, p.offset), (NONE, expect), "timestamp {timestamp}");
        }
    }
}

fn init_producer_id(w: &mut Wire, v: i16) {
    let mut req = InitProducerIdRequest::default();
    req.transaction_timeout_ms = 60_000;
    if v >= 3 {
        req.producer_id = (-1).into();
        req.producer_epoch = -1;
    }
    let first: InitProducerIdResponse = w.call(ApiKey::InitProducerId, v, &req);
    assert_eq!(first.error_code, NONE);
    assert!(first.producer_id.0 >= 0);
    assert_eq!(first.producer_epoch, 0);
    let second: InitProducerIdResponse = w.call(ApiKey::InitProducerId, v, &req);
    assert_ne!(first.producer_id, second.producer_id, "each producer gets its own id");
    // With a transactional id: the transaction coordinator.
    txn::init_producer_id(w, v);
}

/// An abort marker written through WriteTxnMarkers to a fresh topic's
/// partition 0 (a marker for a producer without an open transaction is
/// still written, as in Kafka), an unknown partition and an unknown topic;
/// then read back: a control batch with the producer's id at offset 0, and
/// a read_committed fetch naming the aborted (empty) transaction.
fn write_txn_markers(w: &mut Wire, v: i16) {
    let topic = format!("matrix-wtm{v}");
    assert_eq!(common::wire::create_topic(w, &topic, 1), NONE);
    let mut known = write_txn_markers_request::WritableTxnMarkerTopic::default();
    known.name = topic_name(&topic);
    known.partition_indexes = vec![0, 5];
    let mut unknown = write_txn_markers_request::WritableTxnMarkerTopic::default();
    unknown.name = topic_name("matrix-wtm-missing");
    unknown.partition_indexes = vec![0];
    let mut m = write_txn_markers_request::WritableTxnMarker::default();
    m.producer_id = 4_242.into();
    m.producer_epoch = 3;
    m.transaction_result = false;
    m.coordinator_epoch = 9;
    m.topics = vec![known, unknown];
    let mut req = WriteTxnMarkersRequest::default();
    req.markers.push(m);
    let resp: WriteTxnMarkersResponse = w.call(ApiKey::WriteTxnMarkers, v, &req);
    assert_eq!(resp.markers.len(), 1);
    assert_eq!(resp.markers[0].producer_id.0, 4_242);
    let got: Vec<(String, Vec<(i32, i16)>)> = resp.markers[0]
        .topics
        .iter()
        .map(|t| (t.name.to_string(), t.partitions.iter().map(|p| (p.partition_index, p.error_code)).collect()))
        .collect();
    assert_eq!(
        got,
        vec![
            (topic.clone(), vec![(0, NONE), (5, UNKNOWN_TOPIC_OR_PARTITION)]),
            ("matrix-wtm-missing".to_string(), vec![(0, UNKNOWN_TOPIC_OR_PARTITION)]),
        ]
    );
    let mut fetch = common::wire::fetch_request(&topic, &[(0, 0)], 0, 0);
    fetch.isolation_level = 1;
    let fetched: FetchResponse = w.call(ApiKey::Fetch, 12, &fetch);
    let p = &fetched.responses[0].partitions[0];
    let records = p.records.as_ref().expect("the marker");
    // Kafka's v2 batch layout: attributes at 21, producer id at 43.
    assert_eq!(i64::from_be_bytes(records[0..8].try_into().unwrap()), 0, "base offset");
    assert_eq!(i16::from_be_bytes([records[21], records[22]]) & 0x30, 0x30, "transactional control batch");
    assert_eq!(i64::from_be_bytes(records[43..51].try_into().unwrap()), 4_242);
    assert_eq!((p.high_watermark, p.last_stable_offset), (1, 1));
    let aborted: Vec<(i64, i64)> =
        p.aborted_transactions.iter().flatten().map(|a| (a.producer_id.0, a.first_offset)).collect();
    assert_eq!(aborted, vec![(4_242, 0)]);
}

// ---------------------------------------------------------------- groups

fn find_coordinator(fx: &Fixture, w: &mut Wire, v: i16) {
    let mut req = FindCoordinatorRequest::default();
    if v >= 4 {
        req.coordinator_keys = vec![s("matrix-g"), s("")];
    } else {
        req.key = s("matrix-g");
    }
    let resp: FindCoordinatorResponse = w.call(ApiKey::FindCoordinator, v, &req);
    let found = if v >= 4 {
        assert_eq!(resp.coordinators.len(), 2);
        assert_eq!(resp.coordinators[0].key.as_str(), "matrix-g");
        assert_eq!(resp.coordinators[1].error_code, INVALID_GROUP_ID);
        let c = &resp.coordinators[0];
        (c.error_code, c.host.to_string(), c.port)
    } else {
        (resp.error_code, resp.host.to_string(), resp.port)
    };
    assert_eq!(found, (NONE, "127.0.0.1".to_string(), fx.port as i32));

    // An empty group id; a transaction coordinator.
    if v < 4 {
        let mut empty = FindCoordinatorRequest::default();
        empty.key = s("");
        let resp: FindCoordinatorResponse = w.call(ApiKey::FindCoordinator, v, &empty);
        assert_eq!(resp.error_code, INVALID_GROUP_ID);
    }
    if v >= 1 {
        let mut tx = req.clone();
        tx.key_type = 1;
        let resp: FindCoordinatorResponse = w.call(ApiKey::FindCoordinator, v, &tx);
        let found = if v >= 4 {
            let c = &resp.coordinators[0];
            (c.error_code, c.host.to_string(), c.port)
        } else {
            (resp.error_code, resp.host.to_string(), resp.port)
        };
        assert_eq!(found, (NONE, "127.0.0.1".to_string(), fx.port as i32));
    }
    // A share group's coordinator (v6, KIP-932): there are no share groups.
    if v >= 6 {
        let mut share = req.clone();
        share.key_type = 2;
        let resp: FindCoordinatorResponse = w.call(ApiKey::FindCoordinator, v, &share);
        assert_eq!(resp.coordinators[0].error_code, INVALID_REQUEST);
    }
}

/// One member in a group of its own: joined (JoinGroup v7) and synced
/// (SyncGroup v5) with modern versions, so other APIs can be checked at
/// every version against a Stable group.
struct Member {
    group: String,
    id: String,
    instance: Option<String>,
    generation: i32,
}

const ASSIGNMENT: &[u8] = b"matrix-assignment";
const MEMBER_METADATA: &[u8] = b"matrix-subscription";

fn join_request(group: &str, member: &str, instance: Option<&str>, v: i16) -> JoinGroupRequest {
    let mut req = JoinGroupRequest::default();
    req.group_id = GroupId(s(group));
    req.session_timeout_ms = 30_000;
    if v >= 1 {
        req.rebalance_timeout_ms = 30_000;
    }
    req.member_id = s(member);
    if v >= 5 {
        req.group_instance_id = instance.map(s);
    }
    req.protocol_type = s("consumer");
    let mut p = join_group_request::JoinGroupRequestProtocol::default();
    p.name = s("range");
    p.metadata = Bytes::from_static(MEMBER_METADATA);
    req.protocols.push(p);
    if v >= 8 {
        req.reason = Some(s("matrix join"));
    }
    req
}

/// Joins with JoinGroup at version `v`, answering MEMBER_ID_REQUIRED (v4+,
/// dynamic members) with a second join.
fn join_at(w: &mut Wire, group: &str, instance: Option<&str>, v: i16) -> JoinGroupResponse {
    let first: JoinGroupResponse = w.call(ApiKey::JoinGroup, v, &join_request(group, "", instance, v));
    if first.error_code != MEMBER_ID_REQUIRED {
        return first;
    }
    assert!(v >= 4 && instance.is_none(), "MEMBER_ID_REQUIRED only for dynamic members from v4");
    assert!(!first.member_id.is_empty(), "MEMBER_ID_REQUIRED carries the id to use");
    w.call(ApiKey::JoinGroup, v, &join_request(group, &first.member_id, instance, v))
}

fn stable_member(w: &mut Wire, group: &str, instance: Option<&str>) -> Member {
    let joined = join_at(w, group, instance, 7);
    assert_eq!(joined.error_code, NONE, "join {group}");
    let id = joined.member_id.to_string();
    let synced = sync_at(w, group, &id, instance, joined.generation_id, 5);
    assert_eq!(synced.error_code, NONE, "sync {group}");
    Member { group: group.into(), id, instance: instance.map(String::from), generation: joined.generation_id }
}

fn sync_at(
    w: &mut Wire,
    group: &str,
    member: &str,
    instance: Option<&str>,
    generation: i32,
    v: i16,
) -> SyncGroupResponse {
    let mut req = SyncGroupRequest::default();
    req.group_id = GroupId(s(group));
    req.generation_id = generation;
    req.member_id = s(member);
    if v >= 3 {
        req.group_instance_id = instance.map(s);
    }
    if v >= 5 {
        req.protocol_type = Some(s("consumer"));
        req.protocol_name = Some(s("range"));
    }
    let mut a = sync_group_request::SyncGroupRequestAssignment::default();
    a.member_id = s(member);
    a.assignment = Bytes::from_static(ASSIGNMENT);
    req.assignments.push(a);
    w.call(ApiKey::SyncGroup, v, &req)
}

/// The instance id a version can carry for a static member.
fn instance_for(group: &str, carries_instance: bool) -> Option<String> {
    carries_instance.then(|| format!("{group}-instance"))
}

fn join_group(w: &mut Wire, v: i16) {
    let group = format!("mg-join{v}");
    let instance = instance_for(&group, v >= 5);
    let resp = join_at(w, &group, instance.as_deref(), v);
    assert_eq!(resp.error_code, NONE);
    assert!(resp.generation_id >= 1);
    assert_eq!(resp.leader, resp.member_id, "the only member leads");
    assert_eq!(resp.protocol_name.as_ref().map(|p| p.as_str()), Some("range"));
    if v >= 7 {
        assert_eq!(resp.protocol_type.as_ref().map(|p| p.as_str()), Some("consumer"));
    }
    assert_eq!(resp.members.len(), 1);
    assert_eq!(resp.members[0].member_id, resp.member_id);
    assert_eq!(&resp.members[0].metadata[..], MEMBER_METADATA);
    if v >= 5 {
        assert_eq!(resp.members[0].group_instance_id.as_ref().map(|i| i.to_string()), instance);
    }
    // A member id the group never gave out.
    let unknown: JoinGroupResponse = w.call(ApiKey::JoinGroup, v, &join_request(&group, "matrix-nobody", None, v));
    assert_eq!(unknown.error_code, UNKNOWN_MEMBER_ID);
}

fn sync_group(w: &mut Wire, v: i16) {
    let group = format!("mg-sync{v}");
    let instance = instance_for(&group, v >= 3);
    let joined = join_at(w, &group, instance.as_deref(), 7);
    assert_eq!(joined.error_code, NONE);
    let resp = sync_at(w, &group, &joined.member_id, instance.as_deref(), joined.generation_id, v);
    assert_eq!(resp.error_code, NONE);
    assert_eq!(&resp.assignment[..], ASSIGNMENT);
    if v >= 5 {
        assert_eq!(resp.protocol_type.as_ref().map(|p| p.as_str()), Some("consumer"));
        assert_eq!(resp.protocol_name.as_ref().map(|p| p.as_str()), Some("range"));
    }
    let stale = sync_at(w, &group, &joined.member_id, instance.as_deref(), joined.generation_id + 1, v);
    assert_eq!(stale.error_code, ILLEGAL_GENERATION);
    let unknown = sync_at(w, &group, "matrix-nobody", None, joined.generation_id, v);
    assert_eq!(unknown.error_code, UNKNOWN_MEMBER_ID);
}

fn heartbeat_at(w: &mut Wire, m: &Member, member: &str, generation: i32, v: i16) -> i16 {
    let mut req = HeartbeatRequest::default();
    req.group_id = GroupId(s(&m.group));
    req.generation_id = generation;
    req.member_id = s(member);
    if v >= 3 && member == m.id {
        req.group_instance_id = m.instance.as_deref().map(s);
    }
    let resp: HeartbeatResponse = w.call(ApiKey::Heartbeat, v, &req);
    resp.error_code
}

fn heartbeat(w: &mut Wire, v: i16) {
    let group = format!("mg-hb{v}");
    let m = stable_member(w, &group, instance_for(&group, v >= 3).as_deref());
    assert_eq!(heartbeat_at(w, &m, &m.id, m.generation, v), NONE);
    assert_eq!(heartbeat_at(w, &m, &m.id, m.generation + 1, v), ILLEGAL_GENERATION);
    assert_eq!(heartbeat_at(w, &m, "matrix-nobody", m.generation, v), UNKNOWN_MEMBER_ID);
}

fn leave_group(w: &mut Wire, v: i16) {
    let group = format!("mg-leave{v}");
    let m = stable_member(w, &group, instance_for(&group, v >= 3).as_deref());
    let leave = |w: &mut Wire, member: &str, instance: Option<&str>| -> LeaveGroupResponse {
        let mut req = LeaveGroupRequest::default();
        req.group_id = GroupId(s(&group));
        if v >= 3 {
            let mut id = leave_group_request::MemberIdentity::default();
            id.member_id = s(member);
            id.group_instance_id = instance.map(s);
            if v >= 5 {
                id.reason = Some(s("matrix leave"));
            }
            req.members.push(id);
        } else {
            req.member_id = s(member);
        }
        w.call(ApiKey::LeaveGroup, v, &req)
    };
    let unknown = leave(w, "matrix-nobody", None);
    if v >= 3 {
        assert_eq!(unknown.error_code, NONE);
        assert_eq!(unknown.members.len(), 1);
        assert_eq!(unknown.members[0].member_id.as_str(), "matrix-nobody");
        assert_eq!(unknown.members[0].error_code, UNKNOWN_MEMBER_ID);
    } else {
        assert_eq!(unknown.error_code, UNKNOWN_MEMBER_ID);
    }
    let left = leave(w, &m.id, m.instance.as_deref());
    assert_eq!(left.error_code, NONE);
    if v >= 3 {
        assert_eq!(left.members.len(), 1);
        assert_eq!(left.members[0].member_id.as_str(), m.id);
        assert_eq!(left.members[0].error_code, NONE);
    }
    let described = describe(w, &group, 5);
    assert_eq!(described.group_state.as_str(), "Empty", "the only member left {group}");
    assert!(described.members.is_empty());
}

fn describe(w: &mut Wire, group: &str, v: i16) -> describe_groups_response::DescribedGroup {
    let mut req = DescribeGroupsRequest::default();
    req.groups = vec![GroupId(s(group))];
    if v >= 3 {
        req.include_authorized_operations = true;
    }
    let resp: DescribeGroupsResponse = w.call(ApiKey::DescribeGroups, v, &req);
    assert_eq!(resp.groups.len(), 1);
    resp.groups.into_iter().next().unwrap()
}

fn commit_at(w: &mut Wire, group: &str, member: &str, generation: i32, offsets: &[(i32, i64)], v: i16) -> Vec<i16> {
    commit_as(w, group, member, None, generation, offsets, v)
}

fn commit_as(
    w: &mut Wire,
    group: &str,
    member: &str,
    instance: Option<&str>,
    generation: i32,
    offsets: &[(i32, i64)],
    v: i16,
) -> Vec<i16> {
    let mut req = OffsetCommitRequest::default();
    req.group_id = GroupId(s(group));
    req.generation_id_or_member_epoch = generation;
    req.member_id = s(member);
    if v >= 7 {
        req.group_instance_id = instance.map(s);
    }
    if (2..=4).contains(&v) {
        req.retention_time_ms = -1;
    }
    let mut t = offset_commit_request::OffsetCommitRequestTopic::default();
    t.name = topic_name(TOPIC);
    for &(partition, offset) in offsets {
        let mut p = offset_commit_request::OffsetCommitRequestPartition::default();
        p.partition_index = partition;
        p.committed_offset = offset;
        p.committed_metadata = Some(s(&format!("meta-{offset}")));
        if v >= 6 {
            p.committed_leader_epoch = 0;
        }
        t.partitions.push(p);
    }
    req.topics.push(t);
    let resp: OffsetCommitResponse = w.call(ApiKey::OffsetCommit, v, &req);
    assert_eq!(resp.topics.len(), 1);
    assert_eq!(resp.topics[0].name.as_str(), TOPIC);
    resp.topics[0].partitions.iter().map(|p| p.error_code).collect()
}

/// Committed (offset, metadata) per partition of `TOPIC`, read with
/// OffsetFetch v8.
fn committed(w: &mut Wire, group: &str) -> BTreeMap<i32, (i64, String)> {
    let mut req = OffsetFetchRequest::default();
    let mut g = offset_fetch_request::OffsetFetchRequestGroup::default();
    g.group_id = GroupId(s(group));
    g.topics = None;
    req.groups.push(g);
    let resp: OffsetFetchResponse = w.call(ApiKey::OffsetFetch, 8, &req);
    assert_eq!(resp.groups[0].error_code, NONE);
    resp.groups[0]
        .topics
        .iter()
        .filter(|t| t.name.as_str() == TOPIC)
        .flat_map(|t| t.partitions.iter())
        .filter(|p| p.committed_offset >= 0)
        .map(|p| {
            (p.partition_index, (p.committed_offset, p.metadata.as_ref().map(|m| m.to_string()).unwrap_or_default()))
        })
        .collect()
}

fn offset_commit(w: &mut Wire, v: i16) {
    // A standalone consumer: no generation, no member.
    let simple = format!("mg-commit{v}-simple");
    assert_eq!(commit_at(w, &simple, "", -1, &[(0, 5), (1, 6)], v), vec![NONE, NONE]);
    let expected: BTreeMap<i32, (i64, String)> =
        [(0, (5, "meta-5".to_string())), (1, (6, "meta-6".to_string()))].into_iter().collect();
    assert_eq!(committed(w, &simple), expected);

    // A group member; then a stranger and a stale generation.
    let group = format!("mg-commit{v}");
    let m = stable_member(w, &group, instance_for(&group, v >= 7).as_deref());
    assert_eq!(commit_as(w, &group, &m.id, m.instance.as_deref(), m.generation, &[(1, 9)], v), vec![NONE]);
    assert_eq!(committed(w, &group).get(&1), Some(&(9, "meta-9".to_string())));
    assert_eq!(commit_at(w, &group, "matrix-nobody", m.generation, &[(1, 10)], v), vec![UNKNOWN_MEMBER_ID]);
    let stale = commit_as(w, &group, &m.id, m.instance.as_deref(), m.generation + 1, &[(1, 11)], v);
    assert_eq!(stale, vec![ILLEGAL_GENERATION]);
    assert_eq!(committed(w, &group).get(&1), Some(&(9, "meta-9".to_string())), "refused commits changed nothing");
}

fn offset_fetch(w: &mut Wire, v: i16) {
    let group = format!("mg-fetch{v}");
    assert_eq!(commit_at(w, &group, "", -1, &[(0, 7), (1, 3)], 8), vec![NONE, NONE]);
    let unknown = format!("mg-fetch{v}-never");
    // Partitions 0 and 1 are committed; 5 does not exist.
    let asked = [0, 1, 5];
    let expect = |parts: Vec<(i32, i64, String)>, group: &str| {
        if group.ends_with("-never") {
            assert!(parts.iter().all(|p| p.1 == -1), "{group}: {parts:?}");
        } else {
            assert_eq!(parts, vec![(0, 7, "meta-7".into()), (1, 3, "meta-3".into()), (5, -1, String::new())]);
        }
    };
    if v >= 8 {
        let mut req = OffsetFetchRequest::default();
        req.require_stable = true;
        for g in [&group, &unknown] {
            let mut rg = offset_fetch_request::OffsetFetchRequestGroup::default();
            rg.group_id = GroupId(s(g));
            let mut t = offset_fetch_request::OffsetFetchRequestTopics::default();
            t.name = topic_name(TOPIC);
            t.partition_indexes = asked.to_vec();
            rg.topics = Some(vec![t]);
            if v >= 9 {
                // A classic group's client sends no member (KIP-848 fields).
                rg.member_id = None;
                rg.member_epoch = -1;
            }
            req.groups.push(rg);
        }
        let resp: OffsetFetchResponse = w.call(ApiKey::OffsetFetch, v, &req);
        assert_eq!(resp.groups.len(), 2);
        for (g, name) in resp.groups.iter().zip([&group, &unknown]) {
            assert_eq!(g.group_id.as_str(), name.as_str());
            assert_eq!(g.error_code, NONE);
            let parts = g.topics[0]
                .partitions
                .iter()
                .map(|p| {
                    (
                        p.partition_index,
                        p.committed_offset,
                        p.metadata.as_ref().map(|m| m.to_string()).unwrap_or_default(),
                    )
                })
                .collect();
            expect(parts, name);
            if name == &group {
                assert_eq!(g.topics[0].partitions[0].committed_leader_epoch, 0);
            }
        }
        return;
    }
    for g in [&group, &unknown] {
        let mut req = OffsetFetchRequest::default();
        req.group_id = GroupId(s(g));
        let mut t = offset_fetch_request::OffsetFetchRequestTopic::default();
        t.name = topic_name(TOPIC);
        t.partition_indexes = asked.to_vec();
        req.topics = Some(vec![t]);
        if v >= 7 {
            req.require_stable = true;
        }
        let resp: OffsetFetchResponse = w.call(ApiKey::OffsetFetch, v, &req);
        if v >= 2 {
            assert_eq!(resp.error_code, NONE);
        }
        assert_eq!(resp.topics.len(), 1);
        let parts = resp.topics[0]
            .partitions
            .iter()
            .map(|p| {
                (p.partition_index, p.committed_offset, p.metadata.as_ref().map(|m| m.to_string()).unwrap_or_default())
            })
            .collect();
        expect(parts, g);
        if v >= 5 && g == &group {
            assert_eq!(resp.topics[0].partitions[0].committed_leader_epoch, 0);
        }
    }
    // Every committed partition: a null topic list, from v2.
    if v >= 2 {
        let mut req = OffsetFetchRequest::default();
        req.group_id = GroupId(s(&group));
        req.topics = None;
        let resp: OffsetFetchResponse = w.call(ApiKey::OffsetFetch, v, &req);
        let all: BTreeSet<(String, i32, i64)> = resp
            .topics
            .iter()
            .flat_map(|t| t.partitions.iter().map(move |p| (t.name.to_string(), p.partition_index, p.committed_offset)))
            .collect();
        let expected: BTreeSet<(String, i32, i64)> =
            [(TOPIC.to_string(), 0, 7), (TOPIC.to_string(), 1, 3)].into_iter().collect();
        assert_eq!(all, expected);
    }
}

fn describe_groups(w: &mut Wire, v: i16) {
    let group = format!("mg-describe{v}");
    let m = stable_member(w, &group, instance_for(&group, true).as_deref());
    let d = describe(w, &group, v);
    assert_eq!(d.error_code, NONE);
    assert_eq!(d.group_id.as_str(), group);
    assert_eq!(d.group_state.as_str(), "Stable");
    assert_eq!(d.protocol_type.as_str(), "consumer");
    assert_eq!(d.protocol_data.as_str(), "range");
    assert_eq!(d.members.len(), 1);
    let member = &d.members[0];
    assert_eq!(member.member_id.as_str(), m.id);
    assert_eq!(member.client_id.as_str(), "shardlog-test");
    assert!(member.client_host.starts_with("/127.0.0.1"), "{}", member.client_host);
    assert_eq!(&member.member_metadata[..], MEMBER_METADATA);
    assert_eq!(&member.member_assignment[..], ASSIGNMENT);
    if v >= 4 {
        assert_eq!(member.group_instance_id.as_ref().map(|i| i.to_string()), m.instance);
    }
    let unknown = describe(w, &format!("{group}-never"), v);
    assert_eq!(unknown.error_code, NONE);
    assert_eq!(unknown.group_state.as_str(), "Dead");
    assert!(unknown.members.is_empty());
}

fn list_groups(w: &mut Wire, v: i16) {
    let stable = format!("mg-list{v}");
    stable_member(w, &stable, None);
    let empty = format!("mg-list{v}-empty");
    assert_eq!(commit_at(w, &empty, "", -1, &[(0, 1)], 8), vec![NONE]);
    let mut req = ListGroupsRequest::default();
    if v >= 4 {
        req.states_filter = vec![s("Stable")];
    }
    let resp: ListGroupsResponse = w.call(ApiKey::ListGroups, v, &req);
    assert_eq!(resp.error_code, NONE);
    let listed: BTreeMap<String, (String, String)> = resp
        .groups
        .iter()
        .map(|g| (g.group_id.to_string(), (g.protocol_type.to_string(), g.group_state.to_string())))
        .collect();
    let stable_entry = listed.get(&stable).unwrap_or_else(|| panic!("{stable} not listed: {listed:?}"));
    assert_eq!(stable_entry.0, "consumer");
    if v >= 4 {
        assert_eq!(stable_entry.1, "Stable");
        assert!(!listed.contains_key(&empty), "the filter keeps only Stable groups");
        assert!(listed.values().all(|(_, state)| state == "Stable"));
    } else {
        assert!(listed.contains_key(&empty), "{empty} not listed: {listed:?}");
    }
    // v5's type filter (KIP-848): every group here is classic.
    if v >= 5 {
        assert!(resp.groups.iter().all(|g| g.group_type.as_str() == "classic"));
        let mut classic = req.clone();
        classic.types_filter = vec![s("Classic")];
        let resp: ListGroupsResponse = w.call(ApiKey::ListGroups, v, &classic);
        assert!(resp.groups.iter().any(|g| g.group_id.as_str() == stable), "{stable} not listed as classic");
        let mut consumer = req.clone();
        consumer.types_filter = vec![s("consumer")];
        let resp: ListGroupsResponse = w.call(ApiKey::ListGroups, v, &consumer);
        assert!(resp.groups.is_empty(), "no consumer-protocol groups: {:?}", resp.groups);
    }
}

fn delete_groups(w: &mut Wire, v: i16) {
    let empty = format!("mg-delete{v}");
    assert_eq!(commit_at(w, &empty, "", -1, &[(0, 4)], 8), vec![NONE]);
    let busy = format!("mg-delete{v}-busy");
    stable_member(w, &busy, None);
    let never = format!("mg-delete{v}-never");
    let mut req = DeleteGroupsRequest::default();
    req.groups_names = vec![GroupId(s(&empty)), GroupId(s(&busy)), GroupId(s(&never))];
    let resp: DeleteGroupsResponse = w.call(ApiKey::DeleteGroups, v, &req);
    let got: BTreeMap<String, i16> = resp.results.iter().map(|r| (r.group_id.to_string(), r.error_code)).collect();
    let expected: BTreeMap<String, i16> =
        [(empty.clone(), NONE), (busy, NON_EMPTY_GROUP), (never, GROUP_ID_NOT_FOUND)].into_iter().collect();
    assert_eq!(got, expected);
    assert!(committed(w, &empty).is_empty(), "a deleted group keeps no offsets");
}

fn offset_delete(w: &mut Wire, v: i16) {
    let group = format!("mg-offdel{v}");
    assert_eq!(commit_at(w, &group, "", -1, &[(0, 4), (1, 8)], 8), vec![NONE, NONE]);
    let request = |group: &str| {
        let mut req = OffsetDeleteRequest::default();
        req.group_id = GroupId(s(group));
        let mut t = offset_delete_request::OffsetDeleteRequestTopic::default();
        t.name = topic_name(TOPIC);
        let mut p = offset_delete_request::OffsetDeleteRequestPartition::default();
        p.partition_index = 0;
        t.partitions.push(p);
        req.topics.push(t);
        req
    };
    let resp: OffsetDeleteResponse = w.call(ApiKey::OffsetDelete, v, &request(&group));
    assert_eq!(resp.error_code, NONE);
    assert_eq!(resp.topics[0].partitions[0].error_code, NONE);
    let left: Vec<i32> = committed(w, &group).into_keys().collect();
    assert_eq!(left, vec![1], "only partition 0's offset was deleted");
    let resp: OffsetDeleteResponse = w.call(ApiKey::OffsetDelete, v, &request(&format!("{group}-never")));
    assert_eq!(resp.error_code, GROUP_ID_NOT_FOUND);
}

// ---------------------------------------------------------------- admin APIs

const INVALID_CONFIG: i16 = 40;
const INVALID_REQUEST: i16 = 42;
const UNKNOWN_LEADER_EPOCH: i16 = 75;
const RESOURCE_TOPIC: i8 = 2;
const RESOURCE_BROKER: i8 = 4;

fn partition_count(w: &mut Wire, topic: &str) -> usize {
    let mut t = metadata_request::MetadataRequestTopic::default();
    t.name = Some(topic_name(topic));
    let mut req = MetadataRequest::default();
    req.topics = Some(vec![t]);
    let resp: MetadataResponse = w.call(ApiKey::Metadata, 1, &req);
    resp.topics[0].partitions.len()
}

fn create_partitions(w: &mut Wire, v: i16) {
    let name = format!("grow-v{v}");
    assert_eq!(common::wire::create_topic(w, &name, 1), NONE);
    let grow = |topic: &str, count: i32| {
        let mut t = create_partitions_request::CreatePartitionsTopic::default();
        t.name = topic_name(topic);
        t.count = count;
        t
    };
    let mut req = CreatePartitionsRequest::default();
    req.topics = vec![grow(&name, 3), grow("no-such-topic", 2)];
    req.timeout_ms = 10_000;
    let resp: CreatePartitionsResponse = w.call(ApiKey::CreatePartitions, v, &req);
    let codes: Vec<(String, i16)> = resp.results.iter().map(|r| (r.name.0.to_string(), r.error_code)).collect();
    assert_eq!(codes, vec![(name.clone(), NONE), ("no-such-topic".to_string(), UNKNOWN_TOPIC_OR_PARTITION)]);
    assert_eq!(partition_count(w, &name), 3);
    req.topics = vec![grow(&name, 2)];
    let resp: CreatePartitionsResponse = w.call(ApiKey::CreatePartitions, v, &req);
    assert_eq!(resp.results[0].error_code, INVALID_PARTITIONS, "shrinking");
}

fn describe_resource(w: &mut Wire, v: i16, kind: i8, name: &str, keys: Option<&[&str]>) -> DescribeConfigsResponse {
    let mut r = describe_configs_request::DescribeConfigsResource::default();
    r.resource_type = kind;
    r.resource_name = s(name);
    r.configuration_keys = keys.map(|k| k.iter().map(|k| s(k)).collect());
    let mut req = DescribeConfigsRequest::default();
    req.resources = vec![r];
    req.include_synonyms = true;
    if v >= 3 {
        req.include_documentation = true;
    }
    w.call(ApiKey::DescribeConfigs, v, &req)
}

fn config_value(resp: &DescribeConfigsResponse, name: &str) -> Option<String> {
    resp.results[0]
        .configs
        .iter()
        .find(|c| c.name.as_str() == name)
        .and_then(|c| c.value.as_ref().map(|v| v.to_string()))
}

fn describe_configs(w: &mut Wire, v: i16) {
    let resp = describe_resource(w, v, RESOURCE_TOPIC, TOPIC, Some(&["retention.ms", "cleanup.policy"]));
    assert_eq!(resp.results[0].error_code, NONE);
    let configs = &resp.results[0].configs;
    assert_eq!(configs.len(), 2, "only the keys asked for");
    let retention = configs.iter().find(|c| c.name.as_str() == "retention.ms").expect("retention.ms");
    assert_eq!(retention.value.as_deref(), Some("604800000"));
    assert_eq!(retention.config_source, 5, "DEFAULT_CONFIG");
    assert_eq!(retention.config_type, if v >= 3 { 5 } else { 0 }, "LONG from v3");
    assert!(!retention.synonyms.is_empty(), "synonyms were asked for");
    let all = describe_resource(w, v, RESOURCE_TOPIC, TOPIC, None);
    assert!(all.results[0].configs.len() >= 30, "every topic config");
    let missing = describe_resource(w, v, RESOURCE_TOPIC, "no-such-topic", None);
    assert_eq!(missing.results[0].error_code, UNKNOWN_TOPIC_OR_PARTITION);
    let broker = describe_resource(w, v, RESOURCE_BROKER, "0", None);
    let partitions =
        broker.results[0].configs.iter().find(|c| c.name.as_str() == "num.partitions").expect("num.partitions");
    assert!(partitions.read_only);
}

fn alter_configs(w: &mut Wire, v: i16) {
    let name = format!("alter-v{v}");
    assert_eq!(common::wire::create_topic(w, &name, 1), NONE);
    let resource = |kind: i8, target: &str, key: &str, value: &str| {
        let mut c = alter_configs_request::AlterableConfig::default();
        c.name = s(key);
        c.value = Some(s(value));
        let mut r = alter_configs_request::AlterConfigsResource::default();
        r.resource_type = kind;
        r.resource_name = s(target);
        r.configs = vec![c];
        r
    };
    let mut req = AlterConfigsRequest::default();
    req.resources = vec![
        resource(RESOURCE_TOPIC, &name, "retention.ms", "1000"),
        resource(RESOURCE_TOPIC, TOPIC, "no.such.config", "1"),
        resource(RESOURCE_BROKER, "0", "num.partitions", "3"),
    ];
    let resp: AlterConfigsResponse = w.call(ApiKey::AlterConfigs, v, &req);
    let codes: Vec<i16> = resp.responses.iter().map(|r| r.error_code).collect();
    assert_eq!(codes, vec![NONE, INVALID_CONFIG, INVALID_REQUEST]);
    assert_eq!(
        config_value(&describe_resource(w, 4, RESOURCE_TOPIC, &name, None), "retention.ms").as_deref(),
        Some("1000")
    );
}

fn incremental_alter_configs(w: &mut Wire, v: i16) {
    let name = format!("incr-v{v}");
    assert_eq!(common::wire::create_topic(w, &name, 1), NONE);
    let op = |key: &str, operation: i8, value: &str| {
        let mut c = incremental_alter_configs_request::AlterableConfig::default();
        c.name = s(key);
        c.config_operation = operation;
        c.value = Some(s(value));
        c
    };
    let mut r = incremental_alter_configs_request::AlterConfigsResource::default();
    r.resource_type = RESOURCE_TOPIC;
    r.resource_name = s(&name);
    r.configs = vec![op("retention.ms", 0, "2000"), op("cleanup.policy", 2, "compact")];
    let mut req = IncrementalAlterConfigsRequest::default();
    req.resources = vec![r];
    let resp: IncrementalAlterConfigsResponse = w.call(ApiKey::IncrementalAlterConfigs, v, &req);
    assert_eq!(resp.responses[0].error_code, NONE);
    let now = describe_resource(w, 4, RESOURCE_TOPIC, &name, None);
    assert_eq!(config_value(&now, "retention.ms").as_deref(), Some("2000"));
    assert_eq!(config_value(&now, "cleanup.policy").as_deref(), Some("delete,compact"));
}

fn describe_cluster(fx: &Fixture, w: &mut Wire, v: i16) {
    let mut req = DescribeClusterRequest::default();
    req.include_cluster_authorized_operations = true;
    if v >= 2 {
        req.include_fenced_brokers = true;
    }
    let resp: DescribeClusterResponse = w.call(ApiKey::DescribeCluster, v, &req);
    assert_eq!(resp.error_code, NONE);
    assert!(!resp.cluster_id.is_empty());
    assert_eq!(resp.controller_id.0, 0);
    let brokers: Vec<(i32, i32)> = resp.brokers.iter().map(|b| (b.broker_id.0, b.port)).collect();
    assert_eq!(brokers, vec![(0, i32::from(fx.port))]);
}

/// A lone broker: each partition's one replica leads it, so a preferred
/// election is not needed, and a partition that does not exist is named.
fn elect_leaders(w: &mut Wire, v: i16) {
    let mut t = elect_leaders_request::TopicPartitions::default();
    t.topic = topic_name(TOPIC);
    t.partitions = vec![1, 0, 9];
    let mut req = ElectLeadersRequest::default();
    req.topic_partitions = Some(vec![t]);
    req.timeout_ms = 5_000;
    let resp: ElectLeadersResponse = w.call(ApiKey::ElectLeaders, v, &req);
    assert_eq!(resp.error_code, NONE);
    let r = &resp.replica_election_results;
    assert_eq!((r.len(), r[0].topic.0.as_str()), (1, TOPIC));
    let codes: Vec<(i32, i16)> = r[0].partition_result.iter().map(|p| (p.partition_id, p.error_code)).collect();
    assert_eq!(codes, vec![(1, ELECTION_NOT_NEEDED), (0, ELECTION_NOT_NEEDED), (9, UNKNOWN_TOPIC_OR_PARTITION)]);
    // Every partition (null): none needed an election, none is listed.
    req.topic_partitions = None;
    let resp: ElectLeadersResponse = w.call(ApiKey::ElectLeaders, v, &req);
    assert_eq!((resp.error_code, resp.replica_election_results.len()), (NONE, 0));
}

/// A lone broker (node 0): a partition "moved" onto itself needs nothing,
/// anywhere else is refused, and there is no move to cancel.
fn alter_partition_reassignments(w: &mut Wire, v: i16) {
    use alter_partition_reassignments_request::{ReassignablePartition, ReassignableTopic};
    let p = |i: i32, r: Option<Vec<i32>>| {
        ReassignablePartition::default()
            .with_partition_index(i)
            .with_replicas(r.map(|r| r.into_iter().map(BrokerId).collect()))
    };
    let t = ReassignableTopic::default().with_name(topic_name(TOPIC)).with_partitions(vec![
        p(0, Some(vec![0])),
        p(1, Some(vec![5])),
        p(1, None),
        p(9, Some(vec![0])),
    ]);
    let req = AlterPartitionReassignmentsRequest::default()
        .with_timeout_ms(5_000)
        .with_allow_replication_factor_change(v < 1)
        .with_topics(vec![t]);
    let resp: AlterPartitionReassignmentsResponse = w.call(ApiKey::AlterPartitionReassignments, v, &req);
    assert_eq!(resp.error_code, NONE);
    assert_eq!(resp.allow_replication_factor_change, v < 1, "v1 echoes the flag; v0 has none (true)");
    let r = &resp.responses;
    assert_eq!((r.len(), r[0].name.0.as_str()), (1, TOPIC));
    let codes: Vec<(i32, i16)> = r[0].partitions.iter().map(|p| (p.partition_index, p.error_code)).collect();
    let expected = vec![
        (0, NONE),
        (1, INVALID_REPLICA_ASSIGNMENT),
        (1, NO_REASSIGNMENT_IN_PROGRESS),
        (9, UNKNOWN_TOPIC_OR_PARTITION),
    ];
    assert_eq!(codes, expected);
    let message = r[0].partitions[1].error_message.as_ref().map(|m| m.to_string()).unwrap_or_default();
    assert!(message.contains(&format!("{TOPIC}-1")), "the refusal names the partition: {message:?}");
}

/// A lone broker moves nothing: no move is listed, named or not.
fn list_partition_reassignments(w: &mut Wire, v: i16) {
    let t = list_partition_reassignments_request::ListPartitionReassignmentsTopics::default()
        .with_name(topic_name(TOPIC))
        .with_partition_indexes(vec![0, 1]);
    for topics in [None, Some(vec![t])] {
        let req = ListPartitionReassignmentsRequest::default().with_timeout_ms(5_000).with_topics(topics);
        let resp: ListPartitionReassignmentsResponse = w.call(ApiKey::ListPartitionReassignments, v, &req);
        assert_eq!((resp.error_code, resp.topics.len()), (NONE, 0));
    }
}

fn delete_records(w: &mut Wire, v: i16) {
    let name = format!("trim-v{v}");
    assert_eq!(common::wire::create_topic(w, &name, 1), NONE);
    let values: Vec<String> = (0..SETUP_RECORDS).map(|r| format!("r{r}")).collect();
    let (_, _) = common::wire::produce(w, &name, 0, encode(&values, SETUP_TS), -1);
    let (error, second) = common::wire::produce(w, &name, 0, encode(&values, SETUP_TS), -1);
    assert_eq!(error, NONE);
    let trim = |partition: i32, offset: i64| {
        let mut p = delete_records_request::DeleteRecordsPartition::default();
        p.partition_index = partition;
        p.offset = offset;
        p
    };
    let mut t = delete_records_request::DeleteRecordsTopic::default();
    t.name = topic_name(&name);
    t.partitions = vec![trim(0, second)];
    let mut req = DeleteRecordsRequest::default();
    req.topics = vec![t];
    req.timeout_ms = 10_000;
    let resp: DeleteRecordsResponse = w.call(ApiKey::DeleteRecords, v, &req);
    let p = &resp.topics[0].partitions[0];
    assert_eq!((p.error_code, p.low_watermark), (NONE, second));
    req.topics[0].partitions = vec![trim(0, 1_000), trim(7, 0)];
    let resp: DeleteRecordsResponse = w.call(ApiKey::DeleteRecords, v, &req);
    let codes: Vec<i16> = resp.topics[0].partitions.iter().map(|p| p.error_code).collect();
    assert_eq!(codes, vec![OFFSET_OUT_OF_RANGE, UNKNOWN_TOPIC_OR_PARTITION]);
}

fn offset_for_leader_epoch(fx: &Fixture, w: &mut Wire, v: i16) {
    let ask = |partition: i32, current: i32| {
        let mut p = offset_for_leader_epoch_request::OffsetForLeaderPartition::default();
        p.partition = partition;
        p.current_leader_epoch = current;
        p.leader_epoch = 0;
        p
    };
    let mut t = offset_for_leader_epoch_request::OffsetForLeaderTopic::default();
    t.topic = topic_name(TOPIC);
    t.partitions = vec![ask(0, 0), ask(1, 3), ask(9, -1)];
    let mut req = OffsetForLeaderEpochRequest::default();
    req.replica_id = (-1).into();
    req.topics = vec![t];
    let resp: OffsetForLeaderEpochResponse = w.call(ApiKey::OffsetForLeaderEpoch, v, &req);
    let end = fx.batches[0].last().map(|(base, values)| base + values.len() as i64).unwrap();
    let got: Vec<(i16, i64)> = resp.topics[0].partitions.iter().map(|p| (p.error_code, p.end_offset)).collect();
    assert!(got[0].1 >= end, "epoch 0 ends at the log end: {got:?}");
    assert_eq!((got[0].0, got[1], got[2]), (NONE, (UNKNOWN_LEADER_EPOCH, -1), (UNKNOWN_TOPIC_OR_PARTITION, -1)));
}

fn describe_log_dirs(w: &mut Wire, v: i16) {
    let mut t = describe_log_dirs_request::DescribableLogDirTopic::default();
    t.topic = topic_name(TOPIC);
    t.partitions = vec![0, 1];
    let mut req = DescribeLogDirsRequest::default();
    req.topics = Some(vec![t]);
    let resp: DescribeLogDirsResponse = w.call(ApiKey::DescribeLogDirs, v, &req);
    assert_eq!(resp.results.len(), 1, "one log dir");
    let dir = &resp.results[0];
    let topics: Vec<(String, usize)> = dir.topics.iter().map(|t| (t.name.0.to_string(), t.partitions.len())).collect();
    assert_eq!(topics, vec![(TOPIC.to_string(), 2)], "only the partitions asked for");
    assert!(dir.topics[0].partitions.iter().all(|p| p.partition_size > 0), "setup wrote to both");
    if v >= 4 {
        assert!(dir.total_bytes > 0 && dir.usable_bytes > 0, "file-system size from v4");
    }
}
