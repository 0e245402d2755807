//! Incremental fetch sessions (KIP-227), over a real socket: a full fetch
//! opens a session; later fetches name only what changed and are answered
//! only with partitions that have something new; forgotten partitions stay
//! out; a wrong epoch or an unknown session is refused with Kafka's codes;
//! epoch -1 closes a session. Then kafka-python, which uses sessions by
//! default, consumes every record of many partitions through them.

mod common;

use std::{collections::BTreeMap, process::Command};

use common::{broker::Broker, wire::*, Rng};
use kafka_protocol::messages::{fetch_request::ForgottenTopic, ApiKey, FetchRequest, FetchResponse};

const TOPIC: &str = "sessions";
const FETCH_SESSION_ID_NOT_FOUND: i16 = 70;
const INVALID_FETCH_SESSION_EPOCH: i16 = 71;

/// A fetch on session `id` at `epoch` of `partitions` (offsets), not waiting.
fn session_fetch(id: i32, epoch: i32, partitions: &[(i32, i64)]) -> FetchRequest {
    let mut req = fetch_request(TOPIC, partitions, 0, 0);
    if partitions.is_empty() {
        req.topics.clear();
    }
    req.session_id = id;
    req.session_epoch = epoch;
    req
}

/// (partition, bytes of records) answered, in order.
fn answered(resp: &FetchResponse) -> Vec<(i32, usize)> {
    resp.responses
        .iter()
        .flat_map(|t| t.partitions.iter().map(|p| (p.partition_index, p.records.as_ref().map_or(0, |r| r.len()))))
        .collect()
}

#[test]
fn a_session_answers_only_what_changed() {
    let dir = common::tempdir().unwrap();
    let broker = Broker::start(&dir.path().join("data"), 1);
    let mut w = Wire::connect(&broker.bootstrap());
    assert_eq!(create_topic(&mut w, TOPIC, 3), 0);
    let mut rng = Rng::new(3);
    let first = common::free_batch_bytes(&mut rng, 2);
    assert_eq!(produce(&mut w, TOPIC, 0, first.clone().into(), 1), (0, 0));

    // Epoch 0: a full fetch that opens a session; every partition answered.
    let resp: FetchResponse = w.call(ApiKey::Fetch, 12, &session_fetch(0, 0, &[(0, 0), (1, 0), (2, 0)]));
    assert_eq!(resp.error_code, 0);
    let id = resp.session_id;
    assert!(id > 0, "a session was opened");
    assert_eq!(answered(&resp), vec![(0, first.len()), (1, 0), (2, 0)]);

    // Epoch 1 names nothing: partition 0 still sits at offset 0 in the
    // session, so its batch comes again; 1 and 2 have nothing new.
    let resp: FetchResponse = w.call(ApiKey::Fetch, 12, &session_fetch(id, 1, &[]));
    assert_eq!((resp.error_code, resp.session_id), (0, id));
    assert_eq!(answered(&resp), vec![(0, first.len())]);
    let records = resp.responses[0].partitions[0].records.clone().unwrap();
    assert_eq!(&records[16..], &first[16..], "the batch as produced");

    // Epoch 2 moves partition 0 past its batch (two records): nothing is
    // new anywhere.
    let resp: FetchResponse = w.call(ApiKey::Fetch, 12, &session_fetch(id, 2, &[(0, 2)]));
    assert_eq!(answered(&resp), vec![], "nothing changed");

    // Data on partition 2: only it is answered, at the session's offset.
    let second = common::free_batch_bytes(&mut rng, 3);
    assert_eq!(produce(&mut w, TOPIC, 2, second.clone().into(), 1), (0, 0));
    let resp: FetchResponse = w.call(ApiKey::Fetch, 12, &session_fetch(id, 3, &[]));
    assert_eq!(answered(&resp), vec![(2, second.len())]);

    // Epoch 4 forgets partition 2; new data there is no longer answered.
    let mut forget = session_fetch(id, 4, &[]);
    let mut gone = ForgottenTopic::default();
    gone.topic = topic_name(TOPIC);
    gone.partitions = vec![2];
    forget.forgotten_topics_data.push(gone);
    let resp: FetchResponse = w.call(ApiKey::Fetch, 12, &forget);
    assert_eq!(answered(&resp), vec![]);
    assert_eq!(produce(&mut w, TOPIC, 2, common::free_batch_bytes(&mut rng, 1).into(), 1), (0, 3));
    let resp: FetchResponse = w.call(ApiKey::Fetch, 12, &session_fetch(id, 5, &[]));
    assert_eq!(answered(&resp), vec![], "a forgotten partition stays out");

    // Errors: a replayed epoch, an unknown session; epoch -1 closes it.
    let resp: FetchResponse = w.call(ApiKey::Fetch, 12, &session_fetch(id, 5, &[]));
    assert_eq!(resp.error_code, INVALID_FETCH_SESSION_EPOCH);
    let resp: FetchResponse = w.call(ApiKey::Fetch, 12, &session_fetch(id + 1000, 1, &[]));
    assert_eq!(resp.error_code, FETCH_SESSION_ID_NOT_FOUND);
    let resp: FetchResponse = w.call(ApiKey::Fetch, 12, &session_fetch(id, -1, &[(1, 0)]));
    assert_eq!((resp.error_code, resp.session_id), (0, 0), "a sessionless full fetch");
    assert_eq!(answered(&resp), vec![(1, 0)]);
    let resp: FetchResponse = w.call(ApiKey::Fetch, 12, &session_fetch(id, 6, &[]));
    assert_eq!(resp.error_code, FETCH_SESSION_ID_NOT_FOUND, "closed by epoch -1");
}

/// Under a budget that fits one batch, an incremental fetch of a session
/// whose partitions all have data answers a different partition each time:
/// the session is read from a point that moves with the epoch.
#[test]
fn a_tight_budget_does_not_starve_the_same_partitions() {
    let dir = common::tempdir().unwrap();
    let broker = Broker::start(&dir.path().join("data"), 1);
    let mut w = Wire::connect(&broker.bootstrap());
    assert_eq!(create_topic(&mut w, TOPIC, 3), 0);
    let mut rng = Rng::new(9);
    for p in 0..3 {
        assert_eq!(produce(&mut w, TOPIC, p, common::free_batch_bytes(&mut rng, 2).into(), 1), (0, 0));
    }
    let mut open = session_fetch(0, 0, &[(0, 0), (1, 0), (2, 0)]);
    open.max_bytes = 1;
    let resp: FetchResponse = w.call(ApiKey::Fetch, 12, &open);
    let id = resp.session_id;
    let mut served = std::collections::BTreeSet::new();
    for epoch in 1..=3 {
        let mut req = session_fetch(id, epoch, &[]);
        req.max_bytes = 1;
        let resp: FetchResponse = w.call(ApiKey::Fetch, 12, &req);
        let with_data: Vec<i32> = answered(&resp).into_iter().filter(|&(_, n)| n > 0).map(|(p, _)| p).collect();
        assert_eq!(with_data.len(), 1, "epoch {epoch}: one batch fits: {with_data:?}");
        served.extend(with_data);
    }
    assert_eq!(served.len(), 3, "every partition was served in three fetches: {served:?}");
}

const WIDE: &str = "sessions-wide";
const WIDE_PARTITIONS: i32 = 300;

#[test]
fn kafka_python_consumes_many_partitions_through_a_session() {
    let dir = common::tempdir().unwrap();
    let broker = Broker::start(&dir.path().join("data"), 1);
    let mut w = Wire::connect(&broker.bootstrap());
    assert_eq!(create_topic(&mut w, WIDE, WIDE_PARTITIONS), 0);
    let records: Vec<(i32, String)> = (0..WIDE_PARTITIONS).map(|p| (p, format!("value-{p}"))).collect();
    let produced = common::produce::produce(&broker.bootstrap(), WIDE, &records);
    assert_eq!(produced.len(), WIDE_PARTITIONS as usize);

    let script = format!(
        r#"
import json, sys, time
from kafka import KafkaConsumer, TopicPartition
c = KafkaConsumer(bootstrap_servers="{bootstrap}", enable_auto_commit=False, fetch_max_wait_ms=100)
c.assign([TopicPartition("{WIDE}", p) for p in range({WIDE_PARTITIONS})])
c.seek_to_beginning()
got = {{}}
deadline = time.time() + 60
while len(got) < {WIDE_PARTITIONS} and time.time() < deadline:
    for tp, msgs in c.poll(timeout_ms=500).items():
        for m in msgs:
            got[str(m.partition)] = m.value.decode()
# A few more rounds with nothing new: incremental fetches of an idle session.
for _ in range(5):
    c.poll(timeout_ms=200)
c.close()
print(json.dumps(got))
"#,
        bootstrap = broker.bootstrap()
    );
    let out = Command::new("python3").arg("-c").arg(&script).output().expect("run python3");
    assert!(out.status.success(), "kafka-python: {}", String::from_utf8_lossy(&out.stderr));
    let got: BTreeMap<String, String> = serde_json::from_slice(&out.stdout).expect("the consumer's JSON");
    let want: BTreeMap<String, String> = produced.iter().map(|(p, _, v)| (p.to_string(), v.clone())).collect();
    assert_eq!(got, want, "every partition's record, through the session");

    let text = common::broker::metrics_text(&broker);
    let value = |name: &str| common::broker::metric_sum(&text, name, "");
    assert!(value("shardlog_fetch_sessions_opened_total") >= 1.0, "kafka-python opened a session:\n{text}");
    assert!(value("shardlog_fetch_incremental_total") >= 5.0, "and fetched incrementally on it");
}
