//! Debian's kcat (librdkafka 2.0.2) consuming from the real broker: `-o
//! beginning`, `-o end`, `-o -10`, and as a balanced group member (`-G`).
//! Records are produced by the rdkafka crate's librdkafka (a different
//! build and version); what kcat prints is compared with its delivery
//! reports.
//!
//! kcat resolves logical offsets with ListOffsets v2 and leaves a group with
//! LeaveGroup v1; the broker once could encode neither answer and closed the
//! connection.

mod common;

use std::{
    collections::BTreeSet,
    process::Command,
    time::{Duration, Instant},
};

use common::{broker::Broker, child::Lines, wire::Wire};

const PARTITIONS: i32 = 2;
const CONFIG: &str = "group_initial_rebalance_delay_ms = 0\n";
const RUN_TIMEOUT: Duration = Duration::from_secs(60);
/// One record per line: partition, offset, value.
const FORMAT: &str = "%p %o %s\\n";

type Record = (i32, i64, String);

fn setup(topic: &str) -> (tempfile::TempDir, Broker) {
    let dir = common::tempdir().unwrap();
    let broker = Broker::start_with_config(&dir.path().join("data"), 1, CONFIG, &[]);
    let mut w = Wire::connect(&broker.bootstrap());
    assert_eq!(common::wire::create_topic(&mut w, topic, PARTITIONS), 0);
    (dir, broker)
}

fn produce(broker: &Broker, topic: &str, prefix: &str, n: usize) -> Vec<Record> {
    let records: Vec<(i32, String)> = (0..n).map(|i| ((i % 2) as i32, format!("{prefix}-{i}"))).collect();
    common::produce::produce(&broker.bootstrap(), topic, &records)
}

fn kcat(broker: &Broker, args: &[&str]) -> Lines {
    let mut cmd = Command::new("kcat");
    cmd.args(["-b", &broker.bootstrap(), "-f", FORMAT, "-X", "fetch.wait.max.ms=100"]).args(args);
    Lines::spawn(cmd)
}

fn parse(lines: &[String]) -> Vec<Record> {
    lines
        .iter()
        .filter(|l| !l.is_empty())
        .map(|l| {
            let mut parts = l.splitn(3, ' ');
            let p = parts.next().unwrap().parse().unwrap_or_else(|_| panic!("kcat line {l:?}"));
            let o = parts.next().unwrap().parse().unwrap_or_else(|_| panic!("kcat line {l:?}"));
            (p, o, parts.next().unwrap_or_default().to_string())
        })
        .collect()
}

fn run_to_end(c: Lines, broker: &Broker) -> Vec<Record> {
    let (status, lines, stderr) = c.finish(RUN_TIMEOUT);
    assert!(
        status.is_some_and(|s| s.success()),
        "kcat exited with {status:?}\nstdout: {lines:?}\nstderr: {stderr}\nbroker log: {}",
        broker.log.lock().unwrap().join("\n")
    );
    parse(&lines)
}

fn no_encode_errors(broker: &Broker) {
    let log = broker.log.lock().unwrap().join("\n");
    assert!(!log.contains("cannot be encoded"), "broker log:\n{log}");
}

#[test]
fn kcat_consumes_from_the_beginning() {
    let topic = "kcat-beginning";
    let (_dir, broker) = setup(topic);
    let produced = produce(&broker, topic, "rec", 300);
    let got = run_to_end(kcat(&broker, &["-C", "-t", topic, "-o", "beginning", "-e"]), &broker);
    let got: BTreeSet<Record> = got.into_iter().collect();
    assert_eq!(got, produced.into_iter().collect::<BTreeSet<_>>());
    no_encode_errors(&broker);
}

#[test]
fn kcat_consumes_the_last_ten_of_each_partition() {
    let topic = "kcat-last10";
    let (_dir, broker) = setup(topic);
    let produced = produce(&broker, topic, "rec", 100);
    let got = run_to_end(kcat(&broker, &["-C", "-t", topic, "-o", "-10", "-e"]), &broker);
    let got: BTreeSet<Record> = got.into_iter().collect();
    let want: BTreeSet<Record> = produced.into_iter().filter(|r| r.1 >= 40).collect();
    assert_eq!(want.len(), 20);
    assert_eq!(got, want, "the ten newest records of each partition");
    no_encode_errors(&broker);
}

/// `-o end` never prints what was there before it started, and prints a
/// gapless run of what is produced afterwards.
#[test]
fn kcat_consumes_from_the_end() {
    let topic = "kcat-end";
    let (_dir, broker) = setup(topic);
    let old = produce(&broker, topic, "old", 100);
    let wanted = 20;
    let c = kcat(&broker, &["-C", "-t", topic, "-o", "end", "-c", &wanted.to_string()]);
    let mut c = c;
    // When kcat has looked up the end is not observable from outside, so
    // records are produced in rounds until it has printed enough.
    let mut produced = Vec::new();
    let deadline = Instant::now() + RUN_TIMEOUT;
    let mut round = 0;
    while c.exited().is_none() && Instant::now() < deadline {
        produced.extend(produce(&broker, topic, &format!("new{round}"), 2));
        round += 1;
        std::thread::sleep(Duration::from_millis(200));
    }
    let got = run_to_end(c, &broker);
    assert_eq!(got.len(), wanted);
    let old_values: BTreeSet<&String> = old.iter().map(|r| &r.2).collect();
    assert!(got.iter().all(|r| !old_values.contains(&r.2)), "read records from before its start: {got:?}");
    for p in 0..PARTITIONS {
        let mine: Vec<&Record> = got.iter().filter(|r| r.0 == p).collect();
        let Some(first) = mine.first() else { continue };
        let expected: Vec<&Record> = produced.iter().filter(|r| r.0 == p && r.1 >= first.1).take(mine.len()).collect();
        assert_eq!(mine, expected, "partition {p}: a gapless run of what was produced");
    }
    no_encode_errors(&broker);
}

/// `-G`: a balanced consumer group member reads everything, commits it, and
/// leaves the group cleanly on exit.
#[test]
fn kcat_balanced_group_member() {
    let topic = "kcat-group";
    let group = "kcat-g";
    let (_dir, broker) = setup(topic);
    let produced = produce(&broker, topic, "rec", 200);
    let c = kcat(&broker, &["-G", group, "-X", "auto.offset.reset=earliest", "-c", &produced.len().to_string(), topic]);
    let got: BTreeSet<Record> = run_to_end(c, &broker).into_iter().collect();
    assert_eq!(got, produced.into_iter().collect::<BTreeSet<_>>());
    // Closing committed the consumed offsets and left the group.
    let mut w = Wire::connect(&broker.bootstrap());
    let offsets = committed(&mut w, group, topic);
    assert_eq!(offsets, vec![100, 100], "kcat committed what it consumed");
    let state = group_state(&mut w, group);
    assert_eq!(state, "Empty", "kcat left {group} on exit");
    no_encode_errors(&broker);
}

fn committed(w: &mut Wire, group: &str, topic: &str) -> Vec<i64> {
    use kafka_protocol::{messages::*, protocol::StrBytes};
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

fn group_state(w: &mut Wire, group: &str) -> String {
    use kafka_protocol::{messages::*, protocol::StrBytes};
    let mut req = DescribeGroupsRequest::default();
    req.groups = vec![GroupId(StrBytes::from_string(group.into()))];
    let resp: DescribeGroupsResponse = w.call(ApiKey::DescribeGroups, 5, &req);
    resp.groups[0].group_state.to_string()
}
