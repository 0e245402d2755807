//! The metadata quorum (issue 18's first part): three broker processes on
//! 127.0.0.1 form a Raft group with `--controller-quorum`; Metadata and
//! DescribeCluster list every live broker and name the Raft leader as
//! controller. SIGKILL the leader: the others elect another and fence the
//! dead broker; restart it: it rejoins from its own log.

mod common;

use std::time::{Duration, Instant};

use common::{
    broker::{free_port, Broker},
    wire::Wire,
};
use kafka_protocol::messages::{
    ApiKey, DescribeClusterRequest, DescribeClusterResponse, MetadataRequest, MetadataResponse,
};

/// What one broker tells a client: the controller id and (node id, port)
/// of every broker, by Metadata at `version`.
fn metadata_view(broker: &Broker, version: i16) -> (i32, Vec<(i32, i32)>) {
    let mut wire = Wire::connect(&broker.bootstrap());
    let mut request = MetadataRequest::default();
    request.topics = if version == 0 { Some(Vec::new()) } else { None };
    let response: MetadataResponse = wire.call(ApiKey::Metadata, version, &request);
    let brokers = response.brokers.iter().map(|b| (b.node_id.0, b.port)).collect();
    (response.controller_id.0, brokers)
}

fn describe_cluster_view(broker: &Broker) -> (i32, Vec<(i32, i32)>) {
    let mut wire = Wire::connect(&broker.bootstrap());
    let response: DescribeClusterResponse = wire.call(ApiKey::DescribeCluster, 0, &DescribeClusterRequest::default());
    assert_eq!(response.error_code, 0);
    let brokers = response.brokers.iter().map(|b| (b.broker_id.0, b.port)).collect();
    (response.controller_id.0, brokers)
}

/// Waits until every broker in `live` lists exactly `live` (ids and Kafka
/// ports) and all name the same controller, one of them; returns it.
fn wait_for_agreement(live: &[(i32, &Broker)], what: &str) -> i32 {
    wait_for_agreement_within(live, what, Duration::from_secs(30))
}

fn wait_for_agreement_within(live: &[(i32, &Broker)], what: &str, limit: Duration) -> i32 {
    let mut expected: Vec<(i32, i32)> = live.iter().map(|(id, b)| (*id, b.port as i32)).collect();
    expected.sort();
    let deadline = Instant::now() + limit;
    loop {
        let last = live.iter().map(|(_, b)| metadata_view(b, 12)).collect::<Vec<_>>();
        let controller = last[0].0;
        let agreed = last.iter().all(|(c, brokers)| *c == controller && *brokers == expected);
        if agreed && live.iter().any(|(id, _)| *id == controller) {
            return controller;
        }
        assert!(Instant::now() < deadline, "{what}: no agreement in {limit:?}; expected {expected:?}, saw {last:?}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The brokers of `brokers` other than `except`, as `wait_for_agreement` takes them.
fn members(brokers: &[(i32, Broker)], except: Option<i32>) -> Vec<(i32, &Broker)> {
    brokers.iter().filter(|(id, _)| Some(*id) != except).map(|(id, b)| (*id, b)).collect()
}

/// One copy of each `__consumer_offsets` partition: these tests are about
/// the quorum's sessions, and a follower refused by a dead leader would
/// have the quorum fence it before its session ends (`report_unreachable`).
fn quorum_config(id: i32, quorum: &str, session_ms: u64) -> String {
    format!(
        "node_id = {id}\ncontroller_quorum = \"{quorum}\"\n\
         broker_heartbeat_interval_ms = 200\nbroker_session_timeout_ms = {session_ms}\n\
         offsets_topic_replication_factor = 1\ntransaction_state_log_replication_factor = 1\n"
    )
}

/// Three brokers of one quorum, each with its own data directory under `dir`.
fn start_three(dir: &std::path::Path, session_ms: u64) -> Vec<(i32, Broker)> {
    let ports: Vec<u16> = (0..3).map(|_| free_port()).collect();
    let quorum = (1..=3).zip(&ports).map(|(id, p)| format!("{id}@127.0.0.1:{p}")).collect::<Vec<_>>().join(",");
    (1..=3)
        .map(|id| {
            let config = quorum_config(id, &quorum, session_ms);
            (id, Broker::start_with_config(&dir.join(format!("b{id}")), 1, &config, &[]))
        })
        .collect()
}

#[test]
fn three_brokers_agree_on_the_cluster_and_survive_the_leaders_loss() {
    let dir = tempfile::tempdir().unwrap();
    let mut brokers = start_three(dir.path(), 2000);

    let all = members(&brokers, None);
    let leader = wait_for_agreement(&all, "three brokers started");
    // Old and newer versions of both APIs tell the same story.
    let (_, listed) = metadata_view(all[0].1, 12);
    for (_, b) in &all {
        assert_eq!(metadata_view(b, 0).1, listed, "Metadata v0");
        assert_eq!(metadata_view(b, 1), (leader, listed.clone()), "Metadata v1");
        assert_eq!(describe_cluster_view(b), (leader, listed.clone()), "DescribeCluster v0");
    }

    // The leader's process dies without a word.
    let at = brokers.iter().position(|(id, _)| *id == leader).unwrap();
    brokers[at].1.kill();
    let started = Instant::now();
    let survivors = members(&brokers, Some(leader));
    let next = wait_for_agreement(&survivors, "after the leader's SIGKILL");
    assert_ne!(next, leader);
    eprintln!("new controller {next} agreed on {:?} after the kill of {leader}", started.elapsed());

    // Back from its own log and data directory, it is listed again.
    brokers[at].1.restart();
    let all = members(&brokers, None);
    wait_for_agreement(&all, "after the old leader restarted");
    for (_, b) in brokers.iter_mut() {
        b.stop();
    }
}

/// A clean shutdown of the leader fences it at once (Kafka's controlled
/// shutdown): with a one-minute session, only that explains its leaving
/// the others' Metadata within seconds.
#[test]
fn a_leader_stopped_cleanly_leaves_metadata_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let mut brokers = start_three(dir.path(), 60_000);
    let all = members(&brokers, None);
    let leader = wait_for_agreement(&all, "three brokers started");
    let at = brokers.iter().position(|(id, _)| *id == leader).unwrap();
    brokers[at].1.stop();
    let (left, log) = brokers[at].1.wait_for_log("controller: broker");
    assert!(left, "the leader logged no fencing of itself: {log}");
    let survivors = members(&brokers, Some(leader));
    let next = wait_for_agreement_within(&survivors, "after the leader's SIGTERM", Duration::from_secs(15));
    assert_ne!(next, leader);
    for (id, b) in brokers.iter_mut() {
        if *id != leader {
            b.stop();
        }
    }
}

/// The quorum's state comes back from its members' disks: all three are
/// SIGKILLed and only two restart. With a one-minute session, the third is
/// still listed, at its old address, only if its registration was read back
/// from the log (it sends nothing now).
#[test]
fn a_whole_quorum_restarts_from_its_logs() {
    let dir = tempfile::tempdir().unwrap();
    let mut brokers = start_three(dir.path(), 60_000);
    let all = members(&brokers, None);
    wait_for_agreement(&all, "three brokers started");
    for (_, b) in brokers.iter_mut() {
        b.kill();
    }
    let (_, absent) = brokers.pop().unwrap();
    for (_, b) in brokers.iter_mut() {
        b.restart();
    }
    let mut expected: Vec<(i32, i32)> = brokers.iter().map(|(id, b)| (*id, b.port as i32)).collect();
    expected.push((3, absent.port as i32));
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let seen: Vec<_> = brokers.iter().map(|(_, b)| metadata_view(b, 12)).collect();
        let leader_known = seen.iter().all(|(c, _)| *c == seen[0].0) && [1, 2].contains(&seen[0].0);
        if leader_known && seen.iter().all(|(_, listed)| *listed == expected) {
            break;
        }
        assert!(Instant::now() < deadline, "after a restart of two of three: expected {expected:?}, saw {seen:?}");
        std::thread::sleep(Duration::from_millis(100));
    }
    for (_, b) in brokers.iter_mut() {
        b.stop();
    }
}
