//! Automatic preferred-leader rebalance (Kafka's
//! auto.leader.rebalance.enable, on by default): a partition's preferred
//! replica, killed and restarted, leads the partition again without an
//! operator's ElectLeaders once it is back in sync (the check runs every
//! second here, every 300 s by default).

mod common;

use std::time::{Duration, Instant};

use common::{
    cluster::{broker, create, leaders, metadata, start_cluster_with, wait_for_three, wait_until},
    wire::Wire,
};

const SETTINGS: &str = "broker_heartbeat_interval_ms = 200\nbroker_session_timeout_ms = 3000\n\
                        leader_imbalance_check_interval_seconds = 1\n";

#[test]
fn a_restarted_preferred_replica_leads_again() {
    let dir = common::tempdir().unwrap();
    let mut brokers = start_cluster_with(dir.path(), 3, 3, SETTINGS);
    wait_for_three(&brokers);
    let mut w = Wire::connect(&broker(&brokers, 1).bootstrap());
    assert_eq!(create(&mut w, "balanced", 3, 3, &[]).0, 0);
    drop(w);
    for (_, b) in &brokers {
        wait_until(b, "balanced", "three in sync", |p| p.0 > 0 && p.2 == vec![1, 2, 3]);
    }
    let told = metadata(broker(&brokers, 1), Some(&["balanced"]), false);
    let p0 = told.topics[0].partitions.iter().find(|p| p.partition_index == 0).expect("partition 0");
    let preferred = p0.replica_nodes[0].0;
    let other = (1..=3).find(|&id| id != preferred).unwrap();

    brokers.iter_mut().find(|(id, _)| *id == preferred).unwrap().1.kill();
    let deadline = Instant::now() + Duration::from_secs(20);
    while leaders(broker(&brokers, other), "balanced").map_or(true, |l| l[0] == preferred) {
        assert!(Instant::now() < deadline, "partition 0 never left its dead leader {preferred}");
        std::thread::sleep(Duration::from_millis(100));
    }
    brokers.iter_mut().find(|(id, _)| *id == preferred).unwrap().1.restart();
    wait_until(broker(&brokers, other), "balanced", "the restarted broker back in sync", |p| p.2 == vec![1, 2, 3]);

    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let now = leaders(broker(&brokers, other), "balanced");
        if now.as_ref().is_ok_and(|l| l[0] == preferred) {
            break;
        }
        assert!(Instant::now() < deadline, "partition 0 never went back to its preferred replica {preferred}: {now:?}");
        std::thread::sleep(Duration::from_millis(100));
    }
}
