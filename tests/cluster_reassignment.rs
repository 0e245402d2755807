//! Partition reassignment (issue 18, operations): a broker is added to a
//! three-broker quorum and kafkajs moves a partition onto it, away from
//! the broker leading it (AlterPartitionReassignments). While the new
//! broker is paused the move waits for it, ListPartitionReassignments
//! lists it and acks=all goes on; once the new broker has caught up the
//! partition is its target: led by the new broker, the old leader's copy
//! deleted, the three copies byte-identical, and every acknowledged record
//! read back once, in order. A partition of one replica is then given a
//! second the same way.

mod common;

use std::{
    collections::BTreeMap,
    path::PathBuf,
    process::Command,
    time::{Duration, Instant},
};

use common::{
    cluster::{
        add_broker, assert_read_back, broker, create, log_bytes, partitions, signal, start_three, wait_for_brokers,
        wait_for_three, wait_until,
    },
    wire::Wire,
};
use kafka_protocol::messages::{
    alter_partition_reassignments_request::{ReassignablePartition, ReassignableTopic},
    AlterPartitionReassignmentsRequest, AlterPartitionReassignmentsResponse, ApiKey, BrokerId, TopicName,
};
use kafka_protocol::protocol::StrBytes;

const INVALID_REPLICATION_FACTOR: i16 = 38;
const INVALID_REPLICA_ASSIGNMENT: i16 = 39;
const NO_REASSIGNMENT_IN_PROGRESS: i16 = 85;

/// Runs `tests/kafkajs/reassign.js` with `args`; its standard output.
fn kafkajs(args: &[&str]) -> String {
    let dir = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/kafkajs"));
    assert!(dir.join("node_modules/kafkajs").is_dir(), "kafkajs is not installed: run tests/run-all.sh");
    let out = Command::new("node").current_dir(&dir).arg("reassign.js").args(args).output().expect("run node");
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(out.status.success(), "kafkajs {args:?} failed:\n{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    stdout
}

/// A listed move's replicas, adding replicas and removing replicas.
type Listed = (Vec<i64>, Vec<i64>, Vec<i64>);

/// The moves kafkajs lists, by topic and partition.
fn listed(bootstrap: &str) -> BTreeMap<(String, i64), Listed> {
    let json: serde_json::Value = serde_json::from_str(kafkajs(&[bootstrap, "list"]).trim()).expect("JSON");
    let ids = |v: &serde_json::Value| v.as_array().unwrap().iter().map(|b| b.as_i64().unwrap()).collect::<Vec<_>>();
    let mut out = BTreeMap::new();
    for t in json["topics"].as_array().expect("topics") {
        for p in t["partitions"].as_array().unwrap() {
            let key = (t["name"].as_str().unwrap().to_string(), p["partition"].as_i64().unwrap());
            out.insert(key, (ids(&p["replicas"]), ids(&p["addingReplicas"]), ids(&p["removingReplicas"])));
        }
    }
    out
}

/// AlterPartitionReassignments v1 for one partition, over the wire: its error.
fn alter(w: &mut Wire, topic: &str, partition: i32, replicas: Option<&[i32]>, allow_factor_change: bool) -> i16 {
    let p = ReassignablePartition::default()
        .with_partition_index(partition)
        .with_replicas(replicas.map(|r| r.iter().copied().map(BrokerId).collect()));
    let t =
        ReassignableTopic::default().with_name(TopicName(StrBytes::from_string(topic.into()))).with_partitions(vec![p]);
    let req = AlterPartitionReassignmentsRequest::default()
        .with_timeout_ms(10_000)
        .with_allow_replication_factor_change(allow_factor_change)
        .with_topics(vec![t]);
    let resp: AlterPartitionReassignmentsResponse = w.call(ApiKey::AlterPartitionReassignments, 1, &req);
    assert_eq!(resp.allow_replication_factor_change, allow_factor_change, "v1 echoes the flag");
    resp.responses[0].partitions[0].error_code
}

#[test]
fn a_partition_moves_onto_an_added_broker_and_off_its_leader() {
    let dir = common::tempdir().unwrap();
    let mut brokers = start_three(dir.path());
    wait_for_three(&brokers);
    let bootstrap = broker(&brokers, 1).bootstrap();
    let mut w = Wire::connect(&bootstrap);
    assert_eq!(create(&mut w, "moved", 2, 3, &[("min.insync.replicas", "2")]).0, 0);
    let placed = wait_until(broker(&brokers, 1), "moved", "three in sync", |p| p.2 == vec![1, 2, 3]);
    let (leader, epoch) = (placed[0].0, placed[0].3);
    let kept: Vec<i32> = (1..=3).filter(|&b| b != leader).collect();

    // Targets the quorum refuses.
    assert_eq!(alter(&mut w, "moved", 0, Some(&[1, 2, 9]), true), INVALID_REPLICA_ASSIGNMENT, "no broker 9");
    assert_eq!(alter(&mut w, "moved", 0, Some(&[1, 1, 2]), true), INVALID_REPLICA_ASSIGNMENT, "broker 1 twice");
    assert_eq!(alter(&mut w, "moved", 0, Some(&[1, 2]), false), INVALID_REPLICATION_FACTOR, "3 replicas to 2");
    assert_eq!(alter(&mut w, "moved", 0, None, true), NO_REASSIGNMENT_IN_PROGRESS, "nothing to cancel");

    let mut sent: Vec<(i32, String)> = (0..40).map(|i| (i % 2, format!("a{i}"))).collect();
    let mut delivered = common::produce::produce(&bootstrap, "moved", &sent);
    assert_eq!(delivered.len(), 40);

    // Broker 4 joins the cluster, then pauses: the move onto it waits.
    brokers.push((4, add_broker(dir.path(), 4)));
    wait_for_brokers(&brokers, &[1, 2, 3, 4]);
    signal(broker(&brokers, 4), "-STOP");
    let target = format!("4,{},{}", kept[0], kept[1]);
    assert!(kafkajs(&[&bootstrap, "alter", "moved", "0", &target]).contains("alter ok"));
    let moving = listed(&bootstrap);
    let expected = (vec![4, kept[0] as i64, kept[1] as i64, leader as i64], vec![4], vec![leader as i64]);
    assert_eq!(moving.get(&("moved".to_string(), 0)), Some(&expected), "the move under way: {moving:?}");
    assert_eq!(moving.len(), 1, "only partition 0 moves: {moving:?}");
    let during = partitions(broker(&brokers, 1), "moved");
    assert_eq!((during[0].0, during[0].1.clone()), (leader, vec![1, 2, 3, 4]), "copied to the union, same leader");
    assert!(!during[0].2.contains(&4), "paused broker 4 is not in sync: {during:?}");

    // acks=all goes on meanwhile, with the original replicas in sync.
    let more: Vec<(i32, String)> = (40..60).map(|i| (i % 2, format!("b{i}"))).collect();
    delivered.extend(common::produce::produce(&bootstrap, "moved", &more));
    sent.extend(more);

    // Broker 4 resumes and catches up: the move finishes on every broker.
    signal(broker(&brokers, 4), "-CONT");
    let mut target_ids = vec![4, kept[0], kept[1]];
    target_ids.sort();
    for (_, b) in &brokers {
        let done =
            wait_until(b, "moved", "the move finished", |p| p.1 == p.2 && (p.1 == target_ids || p.1 == vec![1, 2, 3]));
        assert_eq!((done[0].0, &done[0].1), (4, &target_ids), "broker 4 leads what it was moved onto first: {done:?}");
        assert!(done[0].3 > epoch, "a new leader, a new epoch: {done:?}");
        assert_eq!(done[1].1, vec![1, 2, 3], "partition 1 stays: {done:?}");
    }
    let deadline = Instant::now() + Duration::from_secs(20);
    let old_copy = dir.path().join(format!("b{leader}/moved-0"));
    while old_copy.exists() {
        assert!(Instant::now() < deadline, "{} was not deleted", old_copy.display());
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(listed(&bootstrap).is_empty(), "no move is listed once it finished");

    // acks=all through the new leader.
    let last: Vec<(i32, String)> = (60..80).map(|i| (i % 2, format!("c{i}"))).collect();
    delivered.extend(common::produce::produce(&broker(&brokers, 4).bootstrap(), "moved", &last));
    sent.extend(last);
    assert_eq!(delivered.len(), sent.len());

    wait_identical_copies(dir.path(), "moved", &[4, kept[0], kept[1]]);
    assert_read_back(&broker(&brokers, 4).bootstrap(), "moved", 2, &delivered);

    // A partition of one replica gets a second on another broker (v0 lets
    // the replication factor change): its leader reopens it replicated,
    // and the new copy catches up.
    assert_eq!(create(&mut w, "single", 1, 1, &[]).0, 0);
    let only = wait_until(broker(&brokers, 1), "single", "led", |p| p.0 > 0)[0].0;
    let other = if only == 4 { kept[0] } else { 4 };
    let first: Vec<(i32, String)> = (0..10).map(|i| (0, format!("s{i}"))).collect();
    let mut single = common::produce::produce(&bootstrap, "single", &first);
    assert!(kafkajs(&[&bootstrap, "alter", "single", "0", &format!("{only},{other}")]).contains("alter ok"));
    let mut both = vec![only, other];
    both.sort();
    for (_, b) in &brokers {
        wait_until(b, "single", "two replicas in sync", |p| p.0 == only && p.1 == both && p.2 == both);
    }
    let second: Vec<(i32, String)> = (10..20).map(|i| (0, format!("s{i}"))).collect();
    single.extend(common::produce::produce(&bootstrap, "single", &second));
    assert_eq!(single.len(), 20);
    wait_identical_copies(dir.path(), "single", &[only, other]);
    assert_read_back(&broker(&brokers, only).bootstrap(), "single", 1, &single);
}

/// Waits until partition 0 of `topic` has the same bytes on each of `ids`.
fn wait_identical_copies(dir: &std::path::Path, topic: &str, ids: &[i32]) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let logs: Vec<Vec<u8>> = ids.iter().map(|&id| log_bytes(dir, id, topic, 0)).collect();
        if logs.iter().all(|l| *l == logs[0]) && !logs[0].is_empty() {
            return;
        }
        let sizes: Vec<usize> = logs.iter().map(Vec::len).collect();
        assert!(Instant::now() < deadline, "{topic}-0's copies on {ids:?} never agreed: sizes {sizes:?}");
        std::thread::sleep(Duration::from_millis(100));
    }
}
