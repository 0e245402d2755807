//! kafkajs 2.2.4 (npm, `tests/kafkajs/`) group consumers against the real
//! broker: from the beginning, from the end, and from a committed offset.
//! Records are produced by librdkafka; what kafkajs prints is compared with
//! the producer's delivery reports.
//!
//! kafkajs resolves offsets with ListOffsets v3, which the broker once could
//! not encode (the connection closed, nothing was consumed).

mod common;

use std::{collections::BTreeSet, path::PathBuf, process::Command, time::Duration};

use common::{
    broker::Broker,
    child::Lines,
    consumer_cli::{
        assert_read_from_the_end, no_encode_errors, produce, produce_while_running, setup, Record, CONFIG, PARTITIONS,
    },
    wire::Wire,
};
use kafka_protocol::{messages::*, protocol::StrBytes};

const RUN_TIMEOUT: Duration = Duration::from_secs(90);

fn kafkajs_dir() -> PathBuf {
    let dir = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/kafkajs"));
    assert!(dir.join("node_modules/kafkajs").is_dir(), "kafkajs is not installed: run tests/run-all.sh");
    dir
}

fn consumer(broker: &Broker, topic: &str, group: &str, mode: &str, count: usize) -> Lines {
    let dir = kafkajs_dir();
    let mut cmd = Command::new("node");
    cmd.current_dir(&dir).arg("consume.js").args([
        &broker.bootstrap(),
        topic,
        group,
        mode,
        &count.to_string(),
        &RUN_TIMEOUT.as_millis().to_string(),
    ]);
    Lines::spawn(cmd)
}

/// `record <partition> <offset> <value>` lines.
fn records(lines: &[String]) -> Vec<Record> {
    lines
        .iter()
        .filter_map(|l| l.strip_prefix("record "))
        .map(|l| {
            let mut parts = l.splitn(3, ' ');
            let p = parts.next().unwrap().parse().unwrap();
            let o = parts.next().unwrap().parse().unwrap();
            (p, o, parts.next().unwrap_or_default().to_string())
        })
        .collect()
}

fn run_to_end(c: Lines, broker: &Broker) -> Vec<Record> {
    let (status, lines, stderr) = c.finish(RUN_TIMEOUT + Duration::from_secs(10));
    assert!(
        status.is_some_and(|s| s.success()),
        "kafkajs exited with {status:?}\nstdout: {lines:?}\nstderr: {stderr}\nbroker log: {}",
        broker.log.lock().unwrap().join("\n")
    );
    records(&lines)
}

/// Committed offsets of `group` on `topic`'s partitions (OffsetFetch v8).
fn committed(broker: &Broker, group: &str, topic: &str) -> Vec<i64> {
    let mut w = Wire::connect(&broker.bootstrap());
    let mut req = OffsetFetchRequest::default();
    let mut g = offset_fetch_request::OffsetFetchRequestGroup::default();
    g.group_id = GroupId(StrBytes::from_string(group.into()));
    let mut t = offset_fetch_request::OffsetFetchRequestTopics::default();
    t.name = common::wire::topic_name(topic);
    t.partition_indexes = (0..PARTITIONS).collect();
    g.topics = Some(vec![t]);
    req.groups.push(g);
    let resp: OffsetFetchResponse = w.call(ApiKey::OffsetFetch, 8, &req);
    resp.groups[0].topics[0].partitions.iter().map(|p| p.committed_offset).collect()
}

#[test]
fn kafkajs_group_consumes_from_the_beginning() {
    let topic = "js-beginning";
    let (_dir, broker) = setup(topic);
    let produced = produce(&broker, topic, "early", 400);
    let got = run_to_end(consumer(&broker, topic, "js-g-beginning", "beginning", produced.len()), &broker);
    let got: BTreeSet<Record> = got.into_iter().collect();
    let want: BTreeSet<Record> = produced.into_iter().collect();
    assert_eq!(got, want, "kafkajs read every record librdkafka produced, at its offset");
    // The group committed what it consumed.
    assert_eq!(committed(&broker, "js-g-beginning", topic), vec![200, 200]);
    no_encode_errors(&broker);
}

/// A consumer starting at the end never sees the records already there; it
/// sees, without a gap, what is produced after it has started.
#[test]
fn kafkajs_group_consumes_from_the_end() {
    let topic = "js-end";
    let (_dir, broker) = setup(topic);
    let old = produce(&broker, topic, "old", 100);
    let wanted = 20;
    let mut c = consumer(&broker, topic, "js-g-end", "end", wanted);
    assert!(c.wait_for("joined", Duration::from_secs(60)), "kafkajs did not join: {:?}", c.seen);
    let produced = produce_while_running(&mut c, &broker, topic, RUN_TIMEOUT);
    let got = run_to_end(c, &broker);
    assert_read_from_the_end(&got, wanted, &old, &produced);
    no_encode_errors(&broker);
}

/// A group resumes at its committed offset even with fromBeginning; a
/// partition without one starts at the beginning.
#[test]
fn kafkajs_group_resumes_from_committed_offsets() {
    let topic = "js-committed";
    let group = "js-g-committed";
    let (_dir, broker) = setup(topic);
    let produced = produce(&broker, topic, "rec", 200);
    // Partition 0 committed at 30; partition 1 never committed.
    commit(&broker, group, topic, &[30]);
    let start = [30i64, 0];
    let want: BTreeSet<Record> = produced.into_iter().filter(|r| r.1 >= start[r.0 as usize]).collect();
    let got = run_to_end(consumer(&broker, topic, group, "beginning", want.len()), &broker);
    let got: BTreeSet<Record> = got.into_iter().collect();
    assert_eq!(got, want, "kafkajs resumed at the committed offsets");
    assert_eq!(committed(&broker, group, topic), vec![100, 100]);
    no_encode_errors(&broker);
}

/// Commits offsets as a standalone consumer (no generation, no member).
fn commit(broker: &Broker, group: &str, topic: &str, offsets: &[i64]) {
    let mut w = Wire::connect(&broker.bootstrap());
    let mut req = OffsetCommitRequest::default();
    req.group_id = GroupId(StrBytes::from_string(group.into()));
    req.generation_id_or_member_epoch = -1;
    let mut t = offset_commit_request::OffsetCommitRequestTopic::default();
    t.name = common::wire::topic_name(topic);
    for (p, &offset) in offsets.iter().enumerate() {
        let mut cp = offset_commit_request::OffsetCommitRequestPartition::default();
        cp.partition_index = p as i32;
        cp.committed_offset = offset;
        t.partitions.push(cp);
    }
    req.topics.push(t);
    let resp: OffsetCommitResponse = w.call(ApiKey::OffsetCommit, 8, &req);
    assert!(resp.topics[0].partitions.iter().all(|p| p.error_code == 0));
}

/// kafkajs's admin client: describeCluster, createPartitions,
/// describeConfigs, alterConfigs, fetchTopicOffsets and deleteTopicRecords
/// (tests/kafkajs/admin.js checks each answer against records its own
/// producer wrote).
#[test]
fn kafkajs_admin_describes_grows_reconfigures_and_trims_a_topic() {
    let dir = common::tempdir().unwrap();
    let broker = Broker::start_with_config(&dir.path().join("data"), 1, CONFIG, &[]);
    let out = Command::new("node")
        .current_dir(kafkajs_dir())
        .args(["admin.js", &broker.bootstrap(), "kafkajs-admin"])
        .output()
        .expect("run node");
    assert!(
        out.status.success() && String::from_utf8_lossy(&out.stdout).contains("admin ok"),
        "kafkajs admin failed:\n{}\n{}\nbroker log: {}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
        broker.log.lock().unwrap().join("\n")
    );
}
