//! Offset expiry (`offsets.retention.minutes`, here 0 so the check runs at
//! once): the offsets of a group with no members expire with tombstones;
//! a group with a live member keeps its offsets until it empties; expired
//! offsets stay gone after a SIGKILL and restart.

mod common;

use std::time::{Duration, Instant};

use common::{broker::Broker, free_batch_bytes, wire::*, Rng};
use kafka_protocol::{
    messages::{
        offset_commit_request::{OffsetCommitRequestPartition, OffsetCommitRequestTopic},
        offset_fetch_request::OffsetFetchRequestTopic,
        ApiKey, GroupId, OffsetCommitRequest, OffsetCommitResponse, OffsetFetchRequest, OffsetFetchResponse,
    },
    protocol::StrBytes,
};
use rdkafka::{
    consumer::{BaseConsumer, CommitMode, Consumer},
    ClientConfig, Offset, TopicPartitionList,
};

const TOPIC: &str = "expiring";
const CONFIG: &str = "offsets_retention_minutes = 0\noffsets_retention_check_interval_ms = 300\n\
                      group_initial_rebalance_delay_ms = 300\n";

fn committed(w: &mut Wire, group: &str) -> Vec<i64> {
    let mut req = OffsetFetchRequest::default();
    req.group_id = GroupId(StrBytes::from_string(group.to_string()));
    let mut t = OffsetFetchRequestTopic::default();
    t.name = topic_name(TOPIC);
    t.partition_indexes = vec![0, 1];
    req.topics = Some(vec![t]);
    let resp: OffsetFetchResponse = w.call(ApiKey::OffsetFetch, 7, &req);
    assert_eq!(resp.error_code, 0);
    resp.topics[0].partitions.iter().map(|p| p.committed_offset).collect()
}

fn wait_for(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn offsets_of_empty_groups_expire_and_live_groups_keep_theirs() {
    let dir = common::tempdir().unwrap();
    let data = dir.path().join("data");
    let mut broker = Broker::start_with_config(&data, 2, CONFIG, &[]);
    let mut w = Wire::connect(&broker.bootstrap());
    assert_eq!(create_topic(&mut w, TOPIC, 2), 0);
    let mut rng = Rng::new(8);
    for p in 0..2 {
        for _ in 0..3 {
            assert_eq!(produce(&mut w, TOPIC, p, free_batch_bytes(&mut rng, 2).into(), 1).0, 0);
        }
    }

    // A live member of "busy" commits.
    let busy: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", broker.bootstrap())
        .set("group.id", "busy")
        .set("enable.auto.commit", "false")
        .set("auto.offset.reset", "earliest")
        .set("session.timeout.ms", "6000")
        .set("heartbeat.interval.ms", "500")
        .create()
        .unwrap();
    busy.subscribe(&[TOPIC]).unwrap();
    wait_for("the busy member's assignment", || {
        let _ = busy.poll(Duration::from_millis(50));
        busy.assignment().is_ok_and(|a| a.count() == 2)
    });
    let mut tpl = TopicPartitionList::new();
    tpl.add_partition_offset(TOPIC, 0, Offset::Offset(3)).unwrap();
    tpl.add_partition_offset(TOPIC, 1, Offset::Offset(5)).unwrap();
    busy.commit(&tpl, CommitMode::Sync).unwrap();

    // "lonely" commits without ever joining: an empty group.
    let mut t = OffsetCommitRequestTopic::default();
    t.name = topic_name(TOPIC);
    let mut pc = OffsetCommitRequestPartition::default();
    pc.partition_index = 0;
    pc.committed_offset = 2;
    pc.committed_leader_epoch = -1;
    t.partitions.push(pc);
    let mut req = OffsetCommitRequest::default();
    req.group_id = GroupId(StrBytes::from_static_str("lonely"));
    req.generation_id_or_member_epoch = -1;
    req.topics.push(t);
    let resp: OffsetCommitResponse = w.call(ApiKey::OffsetCommit, 8, &req);
    assert_eq!(resp.topics[0].partitions[0].error_code, 0);

    wait_for("the empty group's offsets to expire", || committed(&mut w, "lonely") == [-1, -1]);
    // Several expiry checks later the live group still has its offsets.
    std::thread::sleep(Duration::from_millis(1500));
    let _ = busy.poll(Duration::from_millis(10));
    assert_eq!(committed(&mut w, "busy"), [3, 5], "a group with a live member keeps its offsets");

    // Once its member leaves, the group is empty and its offsets expire too.
    drop(busy);
    wait_for("the emptied group's offsets to expire", || committed(&mut w, "busy") == [-1, -1]);
    let dump = std::process::Command::new(env!("CARGO_BIN_EXE_shardlog"))
        .args(["offsets", "dump", "--data-dir", data.to_str().unwrap(), "--group", "lonely"])
        .output()
        .unwrap();
    let dump = String::from_utf8_lossy(&dump.stdout);
    assert!(dump.lines().any(|l| l == format!("[lonely,{TOPIC},0]::NULL")), "tombstone written:\n{dump}");

    drop(w);
    broker.kill();
    broker.restart();
    let mut w = Wire::connect(&broker.bootstrap());
    assert_eq!(committed(&mut w, "lonely"), [-1, -1], "expired offsets stay expired after a restart");
    assert_eq!(committed(&mut w, "busy"), [-1, -1], "expired offsets stay expired after a restart");
}
