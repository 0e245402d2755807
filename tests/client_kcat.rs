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

use std::{collections::BTreeSet, process::Command, time::Duration};

use common::{
    broker::Broker,
    child::Lines,
    consumer_cli::{
        assert_read_from_the_end, no_encode_errors, produce, produce_while_running, setup, Record, PARTITIONS,
    },
    wire::Wire,
};

const RUN_TIMEOUT: Duration = Duration::from_secs(60);
/// One record per line: partition, offset, value.
const FORMAT: &str = "%p %o %s\\n";

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
    let mut c = kcat(&broker, &["-C", "-t", topic, "-o", "end", "-c", &wanted.to_string()]);
    let produced = produce_while_running(&mut c, &broker, topic, RUN_TIMEOUT);
    let got = run_to_end(c, &broker);
    assert_read_from_the_end(&got, wanted, &old, &produced);
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
