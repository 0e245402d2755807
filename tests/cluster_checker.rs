//! A Jepsen-style check of replicated partitions (issue 18): three brokers
//! in one quorum, a topic with three replicas per partition
//! (min.insync.replicas 2) under a steady idempotent acks=all load from
//! librdkafka, while randomized faults hit one broker at a time: SIGKILL
//! and restart, SIGSTOP for up to twice the session and SIGCONT, a network
//! partition cutting it off from the others and from the clients for up to
//! twice the session, SIGKILL with the whole data directory lost. Each
//! broker runs in a network namespace of its own on a bridge the test
//! makes and removes (root, `ip`; `common::netns`). Afterwards every acknowledged
//! record must be in its partition once, at the offset acknowledged, in
//! the order sent; two consumers through different brokers must read the
//! same sequence; the replicas' files must be byte-identical. It prints the
//! count table and the faults.
//!
//! `SHARDLOG_CHECKER_SECONDS` (default 40) sets how long faults go on
//! (perf/README.md records a 200 s run); `SHARDLOG_CHECKER_SEED` replays
//! a run's faults. openraft and our sessions time with the monotonic
//! clock, so wall-clock jumps are not among the faults.

mod common;

use std::time::{Duration, Instant};

use common::{
    cluster::{create, wait_for_three_at, wait_identical, wait_until_at},
    netns::{Net, NsBroker},
    wire::Wire,
    Rng,
};

const TOPIC: &str = "checked";
const PARTITIONS: i32 = 3;
/// 10.78.0.0/24: the other namespace tests use 10.77.
const SUBNET: u8 = 78;
const SETTINGS: &str = "broker_heartbeat_interval_ms = 200\nbroker_session_timeout_ms = 3000\n";

#[test]
fn randomized_faults_lose_duplicate_and_reorder_no_acknowledged_record() {
    let seconds: u64 = std::env::var("SHARDLOG_CHECKER_SECONDS").ok().and_then(|s| s.parse().ok()).unwrap_or(40);
    let seed: u64 = std::env::var("SHARDLOG_CHECKER_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs());
    println!("checker: {seconds} s of faults, seed {seed}");
    let net = Net::new(SUBNET);
    let dir = common::tempdir().unwrap();
    let mut brokers: Vec<NsBroker> = (1..=3).map(|n| NsBroker::start(&net, n, dir.path(), SETTINGS)).collect();
    let addrs: Vec<String> = brokers.iter().map(NsBroker::addr).collect();
    wait_for_three_at(&addrs);
    let mut w = Wire::connect(&addrs[0]);
    assert_eq!(create(&mut w, TOPIC, PARTITIONS, 3, &[("min.insync.replicas", "2")]).0, 0);
    wait_until_at(&addrs[0], TOPIC, "three in sync", |p| p.2 == vec![1, 2, 3]);
    let bootstrap = addrs.join(",");
    let load = common::load::start(&bootstrap, TOPIC, PARTITIONS, 300, "J");

    let mut rng = Rng::new(seed);
    let mut faults: Vec<String> = Vec::new();
    let started = Instant::now();
    while started.elapsed() < Duration::from_secs(seconds) {
        std::thread::sleep(Duration::from_millis(500 + rng.below(2000)));
        let victim = 1 + rng.below(3) as i32;
        let b = brokers.iter_mut().find(|b| b.node == victim).unwrap();
        let at = started.elapsed().as_secs_f64();
        match rng.below(10) {
            0..=2 => {
                let down = Duration::from_millis(500 + rng.below(4000));
                b.kill();
                std::thread::sleep(down);
                b.restart();
                faults.push(format!("{at:6.1} s: SIGKILL broker {victim}, restarted after {down:?}"));
            }
            3..=5 => {
                // Up to twice the session (3 s): sometimes it is fenced.
                let paused = Duration::from_millis(500 + rng.below(5500));
                b.signal("-STOP");
                std::thread::sleep(paused);
                b.signal("-CONT");
                faults.push(format!("{at:6.1} s: SIGSTOP broker {victim} for {paused:?}"));
            }
            6..=8 => {
                // Cut off from the quorum, its followers or leaders, and the
                // clients; sometimes past its session.
                let cut = Duration::from_millis(500 + rng.below(5500));
                net.set_link(victim, false);
                std::thread::sleep(cut);
                net.set_link(victim, true);
                faults.push(format!("{at:6.1} s: broker {victim} partitioned away for {cut:?}"));
            }
            _ => {
                b.kill();
                std::fs::remove_dir_all(&b.data_dir).unwrap();
                b.restart();
                faults.push(format!("{at:6.1} s: SIGKILL broker {victim}, data directory lost, restarted empty"));
            }
        }
        // One fault at a time: the three are back before the next.
        wait_for_three_at(&addrs);
    }
    for addr in &addrs {
        wait_until_at(addr, TOPIC, "every replica back in sync", |p| p.0 > 0 && p.2 == vec![1, 2, 3]);
    }
    let acknowledged_during_faults = load.acknowledged();
    let reports = load.finish();
    wait_identical(dir.path(), TOPIC, PARTITIONS, 1);

    let first = common::load::read_back(&addrs[0], "checker-a", TOPIC, PARTITIONS, &reports);
    let second = common::load::read_back(&addrs[2], "checker-b", TOPIC, PARTITIONS, &reports);
    let tally = common::load::tally(&first, "J", &reports);
    println!("faults ({}):\n{}", faults.len(), faults.join("\n"));
    println!("{tally}");
    assert!(!faults.is_empty() && acknowledged_during_faults > 0, "faults and writes both happened");
    assert_eq!((tally.lost, tally.duplicated, tally.reordered), (0, 0, 0), "seed {seed}:\n{tally}");
    assert_eq!(first, second, "two consumers through different brokers read different logs (seed {seed})");
    drop(brokers);
    drop(net);
}
