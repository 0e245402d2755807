//! Follower fetches between owning shards (issue 18: "replication traffic
//! travels between the owning shards of two brokers"): three brokers of
//! two shards each, a topic of four partitions with three replicas, and
//! the internal topics' hundred. While no client sends anything, the
//! followers keep fetching every partition they copy (long polls); each
//! fetch goes to the leader's shard that owns what it names, so no
//! broker's shards send each other a message meanwhile, though the
//! leaders serve fetches on both shards.

mod common;

use std::time::Duration;

use common::{
    cluster::{broker, create, start_cluster_of, start_cluster_shaped, wait_for_three, wait_identical, wait_until},
    scrape::{scrape, sum, Sample},
    wire::Wire,
};

const SETTINGS: &str = "broker_heartbeat_interval_ms = 200\nbroker_session_timeout_ms = 3000\n";

/// Cross-shard messages sent, and fetches served, by each shard.
fn counts(samples: &[Sample]) -> [(f64, f64); 2] {
    [0, 1].map(|shard| {
        let shard = shard.to_string();
        let at = [("shard", shard.as_str())];
        let sent = sum(samples, "shardlog_cross_shard_messages_sent_total", &at);
        let fetches = sum(samples, "shardlog_requests_total", &[("shard", shard.as_str()), ("api", "Fetch")]);
        (sent, fetches)
    })
}

#[test]
fn follower_fetches_land_on_the_shards_that_own_their_partitions() {
    let dir = common::tempdir().unwrap();
    let brokers = start_cluster_of(dir.path(), 3, 3, 2, SETTINGS);
    wait_for_three(&brokers);
    let mut w = Wire::connect(&broker(&brokers, 1).bootstrap());
    assert_eq!(create(&mut w, "spread", 4, 3, &[]).0, 0);
    for (_, b) in &brokers {
        wait_until(b, "spread", "three in sync", |p| p.0 > 0 && p.2 == vec![1, 2, 3]);
    }
    let sent: Vec<(i32, String)> = (0..40).map(|i| (i % 4, format!("v{i}"))).collect();
    assert_eq!(common::produce::produce(&broker(&brokers, 1).bootstrap(), "spread", &sent).len(), 40);
    // The produce's own hops (its connection landed on either shard) are
    // done once it is acknowledged; a moment more for the last fetches.
    std::thread::sleep(Duration::from_millis(500));

    let before: Vec<_> = brokers.iter().map(|(_, b)| counts(&scrape(b))).collect();
    std::thread::sleep(Duration::from_secs(3));
    let after: Vec<_> = brokers.iter().map(|(_, b)| counts(&scrape(b))).collect();
    for (i, (id, _)) in brokers.iter().enumerate() {
        for shard in 0..2 {
            let (sent, fetches) = (after[i][shard].0 - before[i][shard].0, after[i][shard].1 - before[i][shard].1);
            assert!(fetches > 0.0, "broker {id} shard {shard} served no fetch in 3 s: {before:?} → {after:?}");
            assert_eq!(
                sent, 0.0,
                "broker {id} shard {shard} sent {sent} cross-shard messages while only followers fetched"
            );
        }
    }
}

/// Brokers need not have as many shards as each other: a follower's shard
/// fetches from the leader's shard of the same number modulo the leader's
/// count, and the leader routes what that shard does not own to the owner.
#[test]
fn replicas_agree_between_brokers_of_unequal_shard_counts() {
    let dir = common::tempdir().unwrap();
    let brokers = start_cluster_shaped(dir.path(), 3, 3, |id| if id == 3 { 1 } else { 2 }, |_| SETTINGS.to_string());
    wait_for_three(&brokers);
    let mut w = Wire::connect(&broker(&brokers, 3).bootstrap());
    assert_eq!(create(&mut w, "uneven", 4, 3, &[]).0, 0);
    let mut leaders = std::collections::BTreeSet::new();
    for (_, b) in &brokers {
        for p in wait_until(b, "uneven", "three in sync", |p| p.0 > 0 && p.2 == vec![1, 2, 3]) {
            leaders.insert(p.0);
        }
    }
    assert!(leaders.contains(&3) && leaders.len() > 1, "leaders {leaders:?}: the one-shard broker leads some, not all");
    let sent: Vec<(i32, String)> = (0..80).map(|i| (i % 4, format!("u{i}"))).collect();
    let acked = common::produce::produce(&broker(&brokers, 1).bootstrap(), "uneven", &sent);
    assert_eq!(acked.len(), 80, "every record acknowledged");
    // Each partition's three logs, byte for byte, hold its 20 records.
    wait_identical(dir.path(), "uneven", 4, 20 * 10);
    for (_, b) in &brokers {
        wait_until(b, "uneven", "still three in sync", |p| p.2 == vec![1, 2, 3]);
    }
}
