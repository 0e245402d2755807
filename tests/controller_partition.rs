//! The cluster across a network partition (issue 18): three brokers, each
//! in a network namespace of its own joined by a bridge that each test
//! makes and removes (root, `ip` from iproute2). The quorum leader's link
//! goes down: the other two elect a new controller and fence it; the link
//! comes back: the old leader learns the newer term, and all three agree
//! again. A replicated partition's leader is cut off under an acks=all
//! load: the others take over, nothing acknowledged is lost, and the old
//! leader's replicas are byte-identical again once it is back.

mod common;

use std::{
    io::{BufRead, BufReader},
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

use common::{
    cluster::{create, partitions_at, wait_identical, wait_until_at},
    wire::Wire,
};
use kafka_protocol::messages::{ApiKey, MetadataRequest, MetadataResponse};

/// One bridge and its namespaces at a time: both tests use 10.77.0.0/24.
static ONE_NET: std::sync::Mutex<()> = std::sync::Mutex::new(());

const KAFKA_PORT: u16 = 9092;
const CONTROLLER_PORT: u16 = 9093;

fn ip(args: &[&str]) {
    let out = Command::new("ip").args(args).output().expect("run ip (iproute2)");
    assert!(out.status.success(), "ip {}: {}", args.join(" "), String::from_utf8_lossy(&out.stderr));
}

/// A bridge in this namespace and three namespaces on it, 10.77.0.1-3; the
/// bridge is 10.77.0.254, so this test reaches every broker. Removed on drop.
struct Net {
    tag: u32,
}

impl Net {
    fn new() -> Self {
        let net = Self { tag: std::process::id() % 100_000 };
        let bridge = net.bridge();
        ip(&["link", "add", &bridge, "type", "bridge"]);
        ip(&["addr", "add", "10.77.0.254/24", "dev", &bridge]);
        ip(&["link", "set", &bridge, "up"]);
        for n in 1..=3 {
            let (ns, outside, inside) = (net.ns(n), net.outside(n), format!("sp{}{n}", net.tag));
            ip(&["netns", "add", &ns]);
            ip(&["link", "add", &outside, "type", "veth", "peer", "name", &inside]);
            ip(&["link", "set", &inside, "netns", &ns]);
            ip(&["link", "set", &outside, "master", &bridge, "up"]);
            ip(&["netns", "exec", &ns, "ip", "addr", "add", &format!("10.77.0.{n}/24"), "dev", &inside]);
            ip(&["netns", "exec", &ns, "ip", "link", "set", &inside, "up"]);
            ip(&["netns", "exec", &ns, "ip", "link", "set", "lo", "up"]);
        }
        net
    }

    fn bridge(&self) -> String {
        format!("slb{}", self.tag)
    }

    fn ns(&self, n: i32) -> String {
        format!("sl{}-{n}", self.tag)
    }

    /// Broker `n`'s link to the bridge, on this side.
    fn outside(&self, n: i32) -> String {
        format!("sv{}{n}", self.tag)
    }

    fn set_link(&self, n: i32, up: bool) {
        ip(&["link", "set", &self.outside(n), if up { "up" } else { "down" }]);
    }
}

impl Drop for Net {
    fn drop(&mut self) {
        for n in 1..=3 {
            let _ = Command::new("ip").args(["link", "del", &self.outside(n)]).status();
            let _ = Command::new("ip").args(["netns", "del", &self.ns(n)]).status();
        }
        let _ = Command::new("ip").args(["link", "del", &self.bridge()]).status();
    }
}

/// `shardlog serve` inside broker `n`'s namespace; SIGKILLed on drop.
struct NsBroker {
    node: i32,
    child: Child,
}

impl NsBroker {
    fn start(net: &Net, n: i32, dir: &std::path::Path) -> Self {
        let quorum = (1..=3).map(|i| format!("{i}@10.77.0.{i}:{CONTROLLER_PORT}")).collect::<Vec<_>>().join(",");
        let config = dir.join(format!("b{n}.toml"));
        std::fs::write(&config, "broker_heartbeat_interval_ms = 200\nbroker_session_timeout_ms = 2000\n").unwrap();
        let mut child = Command::new("ip")
            .args(["netns", "exec", &net.ns(n), env!("CARGO_BIN_EXE_shardlog"), "serve"])
            .arg("--config")
            .arg(&config)
            .args(["--node-id", &n.to_string(), "--controller-quorum", &quorum])
            .args(["--listen", &format!("10.77.0.{n}:{KAFKA_PORT}"), "--cores", "1", "--metrics-listen", ""])
            .arg("--data-dir")
            .arg(dir.join(format!("b{n}")))
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("start shardlog in a namespace");
        let stdout = BufReader::new(child.stdout.take().unwrap());
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in stdout.lines().map_while(Result::ok) {
                if line.contains("listening on") {
                    let _ = tx.send(());
                }
            }
        });
        rx.recv_timeout(Duration::from_secs(30)).expect("broker listening in its namespace");
        Self { node: n, child }
    }

    fn addr(&self) -> String {
        format!("10.77.0.{}:{KAFKA_PORT}", self.node)
    }
}

impl Drop for NsBroker {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// (controller id, [(node id, host)]) that broker `b` tells a client.
fn view(b: &NsBroker) -> (i32, Vec<(i32, String)>) {
    let mut wire = Wire::connect(&b.addr());
    let response: MetadataResponse = wire.call(ApiKey::Metadata, 12, &MetadataRequest::default());
    (response.controller_id.0, response.brokers.iter().map(|x| (x.node_id.0, x.host.to_string())).collect())
}

/// Waits until each of `live` lists exactly `live`, at their namespace
/// addresses, and all name one controller among them; returns it.
fn agreement(live: &[&NsBroker], what: &str) -> i32 {
    let mut expected: Vec<(i32, String)> = live.iter().map(|b| (b.node, format!("10.77.0.{}", b.node))).collect();
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
    let net = Net::new();
    let dir = tempfile::tempdir().unwrap();
    let brokers: Vec<NsBroker> = (1..=3).map(|n| NsBroker::start(&net, n, dir.path())).collect();
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
    let net = Net::new();
    let dir = tempfile::tempdir().unwrap();
    let brokers: Vec<NsBroker> = (1..=3).map(|n| NsBroker::start(&net, n, dir.path())).collect();
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
