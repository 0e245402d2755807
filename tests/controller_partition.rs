//! The cluster across a network partition (issue 18): three brokers, each
//! in a network namespace of its own joined by a bridge that each test
//! makes and removes (root, `ip` from iproute2). The quorum leader's link
//! goes down: the other two elect a new controller and fence it; the link
//! comes back: the old leader learns the newer term, and all three agree
//! again. A replicated partition's leader is cut off under an acks=all
//! load: the others take over, nothing acknowledged is lost, and the old
//! leader's replicas are byte-identical again once it is back.

mod common;

use std::time::{Duration, Instant};

use common::{
    cluster::{create, partitions_at, wait_identical, wait_until_at},
    netns::{Net, NsBroker},
    wire::Wire,
};
use kafka_protocol::messages::{ApiKey, MetadataRequest, MetadataResponse};

/// One bridge and its namespaces at a time: both tests use 10.77.0.0/24.
static ONE_NET: std::sync::Mutex<()> = std::sync::Mutex::new(());

const SUBNET: u8 = 77;
const SETTINGS: &str = "broker_heartbeat_interval_ms = 200\nbroker_session_timeout_ms = 2000\n";

/// (controller id, [(node id, host)]) that broker `b` tells a client.
fn view(b: &NsBroker) -> (i32, Vec<(i32, String)>) {
    let mut wire = Wire::connect(&b.addr());
    let response: MetadataResponse = wire.call(ApiKey::Metadata, 12, &MetadataRequest::default());
    (response.controller_id.0, response.brokers.iter().map(|x| (x.node_id.0, x.host.to_string())).collect())
}

/// Waits until each of `live` lists exactly `live`, at their namespace
/// addresses, and all name one controller among them; returns it.
fn agreement(live: &[&NsBroker], what: &str) -> i32 {
    let mut expected: Vec<(i32, String)> = live.iter().map(|b| (b.node, format!("10.{SUBNET}.0.{}", b.node))).collect();
    expected.sort();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let seen: Vec<_> = live.iter().map(|b| view(b)).collect();
        let controller = seen[0].0;
        if seen.iter().all(|(c, brokers)| *c == controller && *brokers == expected)
            && live.iter().any(|b| b.node == controller)
        {
            return controller;
        }
        assert!(Instant::now() < deadline, "{what}: no agreement in 30 s; expected {expected:?}, saw {seen:?}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn the_majority_elects_and_fences_across_a_partition_and_the_old_leader_rejoins() {
    let _one = ONE_NET.lock().unwrap_or_else(|p| p.into_inner());
    let net = Net::new(SUBNET);
    let dir = tempfile::tempdir().unwrap();
    let brokers: Vec<NsBroker> = (1..=3).map(|n| NsBroker::start(&net, n, dir.path(), SETTINGS)).collect();
    let all: Vec<&NsBroker> = brokers.iter().collect();
    let leader = agreement(&all, "three brokers started");

    net.set_link(leader, false);
    let majority: Vec<&NsBroker> = brokers.iter().filter(|b| b.node != leader).collect();
    let next = agreement(&majority, "the leader partitioned away");
    assert_ne!(next, leader, "the majority kept the cut-off leader");

    net.set_link(leader, true);
    agreement(&all, "the partition healed");
    drop(brokers);
    drop(net);
}

#[test]
fn a_partition_leader_cut_off_under_load_loses_no_acknowledged_record() {
    let _one = ONE_NET.lock().unwrap_or_else(|p| p.into_inner());
    let net = Net::new(SUBNET);
    let dir = tempfile::tempdir().unwrap();
    let brokers: Vec<NsBroker> = (1..=3).map(|n| NsBroker::start(&net, n, dir.path(), SETTINGS)).collect();
    agreement(&brokers.iter().collect::<Vec<_>>(), "three brokers started");
    let first = brokers[0].addr();
    let mut w = Wire::connect(&first);
    assert_eq!(create(&mut w, "cut", 3, 3, &[("min.insync.replicas", "2")]).0, 0);
    let placed = wait_until_at(&first, "cut", "three in sync", |p| p.2 == vec![1, 2, 3]);
    let bootstrap = brokers.iter().map(NsBroker::addr).collect::<Vec<_>>().join(",");
    let load = common::load::start(&bootstrap, "cut", 3, 200, "P");
    let more = |n: usize, what: &str| {
        let (target, deadline) = (load.acknowledged() + n, Instant::now() + Duration::from_secs(40));
        while load.acknowledged() < target {
            assert!(Instant::now() < deadline, "{what}: {} of {target} acknowledged", load.acknowledged());
            std::thread::sleep(Duration::from_millis(50));
        }
    };
    more(200, "before the cut");

    // Partition 0's leader loses its link: it cannot reach the quorum nor
    // its followers, and no client reaches it. The others fence it after
    // its session (2 s), an in-sync replica leads under a new epoch, and
    // acks=all goes on with two.
    let cut = placed[0].0;
    net.set_link(cut, false);
    let other = brokers.iter().find(|b| b.node != cut).unwrap().addr();
    wait_until_at(&other, "cut", "the cut-off leader fenced", |p| p.0 > 0 && p.0 != cut && !p.2.contains(&cut));
    more(200, "while cut off");

    // Healed: it learns the new epochs, cuts what only it took, copies the
    // rest and is in sync again.
    net.set_link(cut, true);
    let healed = brokers.iter().find(|b| b.node == cut).unwrap().addr();
    wait_until_at(&healed, "cut", "the old leader back in sync", |p| p.2 == vec![1, 2, 3]);
    more(200, "after the cut");
    let reports = load.finish();
    wait_identical(dir.path(), "cut", 3, 1);
    let read = common::load::read_back(&other, "tally", "cut", 3, &reports);
    let tally = common::load::tally(&read, "P", &reports);
    println!("{tally}");
    assert_eq!((tally.lost, tally.duplicated, tally.reordered), (0, 0, 0), "{tally}");
    assert_eq!(partitions_at(&other, "cut").len(), 3);
    drop(brokers);
    drop(net);
}
