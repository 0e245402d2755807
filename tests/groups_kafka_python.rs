//! Consumer groups with kafka-python on a 2-shard broker, driven through
//! tests/clients/kafka_python_groups.py: the same checks as the librdkafka
//! groups test, from a second, independent client implementation.

mod common;

use std::{
    collections::{BTreeMap, BTreeSet},
    path::Path,
    process::Command,
    time::{Duration, Instant},
};

use common::{
    broker::Broker,
    members::{covers_all, wait_for, Member},
    offsets_schema::{decode_commit_value, decode_key, group_partition, OffsetsKey},
};

const TOPIC: &str = "py-groups";
const PARTITIONS: i32 = 6;
const MEMBERS_GROUP: &str = "py-members";
const COMMIT_GROUP: &str = "py-commits";
const CONFIG: &str = "group_initial_rebalance_delay_ms = 500\n";

fn script() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/clients/kafka_python_groups.py")
}

fn python(args: &[&str]) -> String {
    let out = Command::new("python3").arg(script()).args(args).output().expect("run python3");
    assert!(
        out.status.success(),
        "kafka-python {args:?} failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn kafka_python_consumer_groups_and_committed_offsets() {
    let dir = common::tempdir().unwrap();
    let mut broker = Broker::start_with_config(&dir.path().join("data"), 2, CONFIG, &[]);
    let b = broker.bootstrap();
    python(&["setup", &b, TOPIC, &PARTITIONS.to_string(), "40"]);

    let mut members: Vec<Member> = (0..3).map(|_| spawn_member(&b)).collect();
    wait_for("three members with two partitions each", Duration::from_secs(60), || {
        let sets: Vec<BTreeSet<i32>> = members.iter().map(Member::assignment).collect();
        sets.iter().all(|s| s.len() == 2) && covers_all(&sets, PARTITIONS)
    });
    members[0].kill();
    let killed = Instant::now();
    wait_for("the two survivors to take over all six partitions", Duration::from_secs(40), || {
        let sets: Vec<BTreeSet<i32>> = members[1..].iter().map(Member::assignment).collect();
        sets.iter().all(|s| s.len() == 3) && covers_all(&sets, PARTITIONS)
    });
    eprintln!("partitions of the killed member moved after {:?}", killed.elapsed());
    drop(members);

    let committed: BTreeMap<i32, (i64, String)> =
        (0..PARTITIONS).map(|p| (p, (5 + 3 * i64::from(p), format!("py-meta-{p}")))).collect();
    let specs: Vec<String> = committed.iter().map(|(p, (o, m))| format!("{p}:{o}:{m}")).collect();
    let mut args = vec!["commit", &b, TOPIC, COMMIT_GROUP];
    args.extend(specs.iter().map(String::as_str));
    python(&args);
    assert_eq!(read_committed(&b), committed, "committed offsets read back");

    let partition = group_partition(COMMIT_GROUP, 50).to_string();
    let records: Vec<(String, Option<String>)> =
        serde_json::from_str(&python(&["offsets-topic", &b, &partition])).expect("offsets-topic output");
    let mut seen = BTreeMap::new();
    for (key, value) in &records {
        if let OffsetsKey::Commit { group, topic, partition } = decode_key(&unhex(key)) {
            if group == COMMIT_GROUP && topic == TOPIC {
                let v = decode_commit_value(&unhex(value.as_deref().expect("not a tombstone")));
                seen.insert(partition, (v.offset, v.metadata));
            }
        }
    }
    assert_eq!(seen, committed, "the commits as stored in __consumer_offsets");

    broker.kill();
    broker.restart();
    let b = broker.bootstrap();
    assert_eq!(read_committed(&b), committed, "committed offsets after SIGKILL and restart");
    let groups: Vec<String> = serde_json::from_str(&python(&["groups", &b])).unwrap();
    assert!(
        groups.iter().any(|g| g == MEMBERS_GROUP) && groups.iter().any(|g| g == COMMIT_GROUP),
        "groups after restart: {groups:?}"
    );
    let first: BTreeMap<String, i64> =
        serde_json::from_str(&python(&["resume", &b, TOPIC, COMMIT_GROUP, &PARTITIONS.to_string()])).unwrap();
    let first: BTreeMap<i32, i64> = first.into_iter().map(|(p, o)| (p.parse().unwrap(), o)).collect();
    let want: BTreeMap<i32, i64> = committed.iter().map(|(p, (o, _))| (*p, *o)).collect();
    assert_eq!(first, want, "first offset consumed per partition");
}

fn read_committed(b: &str) -> BTreeMap<i32, (i64, String)> {
    let text = python(&["committed", b, TOPIC, COMMIT_GROUP, &PARTITIONS.to_string()]);
    let parsed: BTreeMap<String, (i64, String)> = serde_json::from_str(&text).expect("committed output");
    parsed.into_iter().map(|(p, v)| (p.parse().unwrap(), v)).collect()
}

fn unhex(s: &str) -> Vec<u8> {
    (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap()).collect()
}

fn spawn_member(bootstrap: &str) -> Member {
    let mut cmd = Command::new("python3");
    cmd.arg(script()).args(["member", bootstrap, TOPIC, MEMBERS_GROUP]);
    Member::spawn(cmd)
}
