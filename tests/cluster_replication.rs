//! Replicated partitions (issue 18, data replication): three broker
//! processes on 127.0.0.1 in one quorum, a topic with three replicas per
//! partition. librdkafka produces with acks=all while a follower and then a
//! leader are SIGKILLed and restarted; every acknowledged record is read
//! back exactly once, in order, and every replica's log files hold the same
//! bytes once the replicas are in sync again.

mod common;

use std::{
    collections::BTreeMap,
    time::{Duration, Instant},
};

use common::{
    broker::Broker,
    cluster::{
        assert_read_back, broker, create, first_produce, log_bytes, one_record, partitions, signal, start_cluster_with,
        start_three, wait_for_brokers, wait_for_three, wait_identical, wait_until,
    },
    wire::{produce, Wire},
};
use kafka_protocol::messages::{ApiKey, TopicName};
use kafka_protocol::protocol::StrBytes;
use rdkafka::message::Message;

const NOT_ENOUGH_REPLICAS: i16 = 19;
const NOT_ENOUGH_REPLICAS_AFTER_APPEND: i16 = 20;

/// One three-broker cluster at a time: two would share two cores, and
/// could draw the same free port.
static ONE_CLUSTER: std::sync::Mutex<()> = std::sync::Mutex::new(());
const IDEMPOTENT: &[(&str, &str)] = &[("enable.idempotence", "true")];

fn sigkill(brokers: &mut [(i32, Broker)], id: i32) {
    brokers.iter_mut().find(|(i, _)| *i == id).unwrap().1.kill();
}

fn restart(brokers: &mut [(i32, Broker)], id: i32) {
    brokers.iter_mut().find(|(i, _)| *i == id).unwrap().1.restart();
}

#[test]
fn acknowledged_records_survive_the_loss_of_a_follower_and_of_a_leader() {
    let _one = ONE_CLUSTER.lock().unwrap_or_else(|p| p.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let mut brokers = start_three(dir.path());
    wait_for_three(&brokers);
    let mut w = Wire::connect(&broker(&brokers, 1).bootstrap());
    assert_eq!(create(&mut w, "rep", 3, 3, &[("min.insync.replicas", "2")]).0, 0);
    assert_eq!(create(&mut w, "strict", 1, 3, &[("min.insync.replicas", "3")]).0, 0);
    let (code, message) = create(&mut w, "too-many", 1, 4, &[]);
    assert_eq!(code, 38, "four replicas on three brokers: {message}");
    let placed = wait_until(broker(&brokers, 2), "rep", "three in-sync replicas", |p| p.2 == vec![1, 2, 3]);
    for (leader, replicas, _, epoch) in &placed {
        assert_eq!(replicas, &vec![1, 2, 3]);
        assert_eq!(*epoch, 0);
        assert!((1..=3).contains(leader));
    }
    // Placed in sync from the start: each broker opens its copy a moment
    // after its table has the topic.
    let deadline = Instant::now() + Duration::from_secs(10);
    for p in 0..3 {
        for id in 1..=3 {
            while !dir.path().join(format!("b{id}/rep-{p}")).is_dir() {
                assert!(Instant::now() < deadline, "rep-{p} has no copy on broker {id}");
                std::thread::sleep(Duration::from_millis(50));
            }
        }
    }

    // Acknowledged with acks=all: on every replica, byte for byte.
    let mut sent: Vec<(i32, String)> = (0..90).map(|i| (i % 3, format!("a{i}"))).collect();
    let mut delivered = common::produce::produce_with(&broker(&brokers, 1).bootstrap(), "rep", &sent, IDEMPOTENT);
    assert_eq!(delivered.len(), 90);
    wait_identical(dir.path(), "rep", 3, 1);

    // A follower of partition 0 is lost: it leaves the in-sync replicas,
    // and acks=all goes on with the two left (min.insync.replicas 2), but
    // not for a topic that wants all three.
    let leader0 = placed[0].0;
    let follower = (1..=3).find(|&id| id != leader0).unwrap();
    sigkill(&mut brokers, follower);
    let live = (1..=3).find(|&id| id != follower).unwrap();
    wait_until(broker(&brokers, live), "rep", "the follower out of sync", |p| !p.2.contains(&follower));
    let strict = wait_until(broker(&brokers, live), "strict", "the follower out of sync", |p| p.2.len() == 2);
    if strict[0].0 != follower {
        // The leader's own view too: the one it refuses by. A produce it
        // took before it saw the set shrink is refused after the append.
        let leader = broker(&brokers, strict[0].0);
        wait_until(leader, "strict", "the leader sees the follower out of sync", |p| p.2.len() == 2);
        let mut lw = Wire::connect(&leader.bootstrap());
        let (code, _) = produce(&mut lw, "strict", 0, one_record("needs three"), -1);
        assert!(
            code == NOT_ENOUGH_REPLICAS || code == NOT_ENOUGH_REPLICAS_AFTER_APPEND,
            "two in sync, three required: error {code}"
        );
        assert_eq!(produce(&mut lw, "strict", 0, one_record("acks=1 is fine"), 1).0, 0);
    }
    let more: Vec<(i32, String)> = (90..150).map(|i| (i % 3, format!("b{i}"))).collect();
    let got = common::produce::produce_with(&broker(&brokers, live).bootstrap(), "rep", &more, IDEMPOTENT);
    assert_eq!(got.len(), 60, "acks=all with two of three in sync");
    sent.extend(more);
    delivered.extend(got);

    // It comes back, copies what it missed, and is in sync again.
    restart(&mut brokers, follower);
    wait_for_three(&brokers);
    wait_until(broker(&brokers, follower), "rep", "the follower back in sync", |p| p.2 == vec![1, 2, 3]);
    wait_identical(dir.path(), "rep", 3, 1);

    // The leader of partition 0 is lost: an in-sync replica takes over
    // under a new epoch, and producers follow it.
    let killed = Instant::now();
    sigkill(&mut brokers, leader0);
    let other = (1..=3).find(|&id| id != leader0).unwrap();
    let moved = wait_until(broker(&brokers, other), "rep", "a new leader", |p| p.0 != leader0 && p.0 > 0);
    assert!(moved[0].3 >= 1, "a new leader epoch: {moved:?}");
    let first = common::produce::produce_with(
        &broker(&brokers, other).bootstrap(),
        "rep",
        &[(0, "c-first".to_string())],
        IDEMPOTENT,
    );
    assert_eq!(first.len(), 1);
    println!("partition 0 took acks=all again {:?} after its leader's SIGKILL", killed.elapsed());
    sent.push((0, "c-first".to_string()));
    delivered.extend(first);
    let more: Vec<(i32, String)> = (150..210).map(|i| (i % 3, format!("c{i}"))).collect();
    let got = common::produce::produce_with(&broker(&brokers, other).bootstrap(), "rep", &more, IDEMPOTENT);
    assert_eq!(got.len(), 60);
    sent.extend(more);
    delivered.extend(got);

    // The old leader returns as a follower and catches up. What it led
    // when it died moved while it was down: from its first answer on, it
    // does not name itself leader of it.
    restart(&mut brokers, leader0);
    let first_view = partitions(broker(&brokers, leader0), "rep");
    assert_ne!(first_view[0].0, leader0, "a restarted broker served its stale leadership: {first_view:?}");
    wait_for_brokers(&brokers, &[1, 2, 3]);
    wait_until(broker(&brokers, leader0), "rep", "the old leader back in sync", |p| p.2 == vec![1, 2, 3]);
    wait_identical(dir.path(), "rep", 3, 1);

    // Every acknowledged record exactly once, in order, at the offset it
    // was acknowledged at.
    assert_read_back(&broker(&brokers, leader0).bootstrap(), "rep", 3, &delivered);
    assert_eq!(sent.len(), delivered.len());
}

#[test]
fn a_deposed_leaders_records_that_were_never_replicated_are_cut() {
    let _one = ONE_CLUSTER.lock().unwrap_or_else(|p| p.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let mut brokers = start_three(dir.path());
    wait_for_three(&brokers);
    let mut w = Wire::connect(&broker(&brokers, 1).bootstrap());
    assert_eq!(create(&mut w, "cut", 1, 3, &[]).0, 0);
    let placed = wait_until(broker(&brokers, 1), "cut", "three in sync", |p| p.2 == vec![1, 2, 3]);
    let leader = placed[0].0;
    let followers: Vec<i32> = (1..=3).filter(|&id| id != leader).collect();
    // Created means in broker 1's table; the leader's may be a moment later.
    wait_until(broker(&brokers, leader), "cut", "the leader has it", |p| p.0 == leader);
    let mut lw = Wire::connect(&broker(&brokers, leader).bootstrap());
    assert_eq!(first_produce(&mut lw, "cut", 0, one_record("kept-0"), -1), 0);
    for i in 1..5 {
        assert_eq!(produce(&mut lw, "cut", 0, one_record(&format!("kept-{i}")), -1).0, 0);
    }

    // Both followers paused (shorter than their session): the leader takes
    // records with acks=1 that no follower copies, then dies.
    for f in &followers {
        signal(broker(&brokers, *f), "-STOP");
    }
    // Their fetches already sent are answered (empty) within the leader's
    // 500 ms wait; no new one comes.
    std::thread::sleep(Duration::from_millis(1500));
    for i in 0..3 {
        assert_eq!(produce(&mut lw, "cut", 0, one_record(&format!("lost-{i}")), 1).0, 0);
    }
    sigkill(&mut brokers, leader);
    for f in &followers {
        signal(broker(&brokers, *f), "-CONT");
    }
    let moved = wait_until(broker(&brokers, followers[0]), "cut", "a follower leads", |p| p.0 != leader && p.0 > 0);
    let new_leader = moved[0].0;
    let mut nw = Wire::connect(&broker(&brokers, new_leader).bootstrap());
    for i in 0..4 {
        assert_eq!(produce(&mut nw, "cut", 0, one_record(&format!("new-{i}")), -1).0, 0, "acks=all on the new leader");
    }

    // The old leader comes back as a follower: its three records at
    // offsets 5..8 are not the new leader's, and go.
    restart(&mut brokers, leader);
    // Every broker's view, the one asked to elect below included.
    for id in 1..=3 {
        wait_until(broker(&brokers, id), "cut", "the old leader in sync", |p| p.2 == vec![1, 2, 3]);
    }
    wait_identical(dir.path(), "cut", 1, 1);
    let bytes = log_bytes(dir.path(), leader, "cut", 0);
    let text = String::from_utf8_lossy(&bytes);
    assert!(!text.contains("lost-"), "records no follower had are cut from the old leader");
    assert!(text.contains("new-3") && text.contains("kept-4"));

    // ElectLeaders: the old leader is the partition's preferred replica
    // (its first) and, in sync again, takes the lead back under a new
    // epoch; asked again, no election is needed, nor an unclean one while
    // the leader lives.
    let before = partitions(broker(&brokers, new_leader), "cut")[0].3;
    let mut ew = Wire::connect(&broker(&brokers, followers[1]).bootstrap());
    assert_eq!(elect(&mut ew, "cut", &[0, 5], 0), vec![(0, 0), (5, UNKNOWN_TOPIC_OR_PARTITION)]);
    let back = wait_until(broker(&brokers, new_leader), "cut", "the preferred replica leads", |p| p.0 == leader);
    assert_eq!(back[0].3, before + 1, "a new epoch for the preferred leader");
    // Its own view too, before it is produced to.
    wait_until(broker(&brokers, leader), "cut", "the preferred replica knows it leads", |p| p.0 == leader);
    let mut lw = Wire::connect(&broker(&brokers, leader).bootstrap());
    assert_eq!(produce(&mut lw, "cut", 0, one_record("after-election"), -1).0, 0, "acks=all on the preferred leader");
    assert_eq!(elect(&mut ew, "cut", &[0], 0), vec![(0, ELECTION_NOT_NEEDED)]);
    assert_eq!(elect(&mut ew, "cut", &[0], 1), vec![(0, ELECTION_NOT_NEEDED)]);
    wait_identical(dir.path(), "cut", 1, 1);
    assert!(String::from_utf8_lossy(&log_bytes(dir.path(), new_leader, "cut", 0)).contains("after-election"));
}

const UNKNOWN_TOPIC_OR_PARTITION: i16 = 3;
const ELECTION_NOT_NEEDED: i16 = 84;

/// ElectLeaders v2 (type 0 preferred, 1 unclean) for partitions of
/// `topic`: each partition's (id, error code).
fn elect(w: &mut Wire, topic: &str, ps: &[i32], kind: i8) -> Vec<(i32, i16)> {
    use kafka_protocol::messages::{elect_leaders_request::TopicPartitions, ElectLeadersRequest, ElectLeadersResponse};
    let mut t = TopicPartitions::default();
    t.topic = TopicName(StrBytes::from_string(topic.to_string()));
    t.partitions = ps.to_vec();
    let mut req = ElectLeadersRequest::default();
    req.election_type = kind;
    req.topic_partitions = Some(vec![t]);
    req.timeout_ms = 10_000;
    let resp: ElectLeadersResponse = w.call(ApiKey::ElectLeaders, 2, &req);
    assert_eq!(resp.error_code, 0);
    resp.replica_election_results[0].partition_result.iter().map(|p| (p.partition_id, p.error_code)).collect()
}

/// Waits until `load` has had `n` records acknowledged in all.
fn wait_for_acks(load: &common::load::Load, n: usize, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(40);
    while load.acknowledged() < n {
        assert!(Instant::now() < deadline, "{what}: {} of {n} records acknowledged", load.acknowledged());
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn acknowledged_records_survive_a_pause_past_the_session_and_a_lost_data_directory_under_load() {
    let _one = ONE_CLUSTER.lock().unwrap_or_else(|p| p.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let mut brokers = start_three(dir.path());
    wait_for_three(&brokers);
    let mut w = Wire::connect(&broker(&brokers, 1).bootstrap());
    assert_eq!(create(&mut w, "load", 3, 3, &[("min.insync.replicas", "2")]).0, 0);
    let placed = wait_until(broker(&brokers, 1), "load", "three in sync", |p| p.2 == vec![1, 2, 3]);
    let bootstrap = brokers.iter().map(|(_, b)| b.bootstrap()).collect::<Vec<_>>().join(",");
    let load = common::load::start(&bootstrap, "load", 3, 200, "L");
    wait_for_acks(&load, 200, "before any fault");

    // Partition 0's leader is paused past its session (3 s): it is fenced,
    // leaves every in-sync set, and acks=all goes on with the other two.
    // Resumed, it learns it no longer leads, cuts what it alone took, and
    // copies its way back into sync.
    let paused = placed[0].0;
    signal(broker(&brokers, paused), "-STOP");
    let other = (1..=3).find(|&id| id != paused).unwrap();
    wait_until(broker(&brokers, other), "load", "the paused broker fenced", |p| {
        p.0 != paused && !p.2.contains(&paused)
    });
    wait_for_acks(&load, load.acknowledged() + 200, "while a broker is paused");
    signal(broker(&brokers, paused), "-CONT");
    wait_until(broker(&brokers, paused), "load", "the resumed broker back in sync", |p| p.2 == vec![1, 2, 3]);
    wait_for_acks(&load, load.acknowledged() + 200, "after the pause");

    // A broker (partition 1's leader now) loses its whole data directory,
    // quorum log included, and starts empty: it copies every partition from
    // the leaders before it counts as in sync again.
    let lost = partitions(broker(&brokers, other), "load")[1].0;
    sigkill(&mut brokers, lost);
    std::fs::remove_dir_all(dir.path().join(format!("b{lost}"))).unwrap();
    let other = (1..=3).find(|&id| id != lost).unwrap();
    wait_until(broker(&brokers, other), "load", "the lost broker fenced", |p| {
        p.0 != lost && p.0 > 0 && !p.2.contains(&lost)
    });
    wait_for_acks(&load, load.acknowledged() + 200, "with a broker gone");
    restart(&mut brokers, lost);
    wait_until(broker(&brokers, lost), "load", "the emptied broker back in sync", |p| p.2 == vec![1, 2, 3]);
    wait_for_acks(&load, load.acknowledged() + 200, "after the empty restart");

    let reports = load.finish();
    wait_identical(dir.path(), "load", 3, 1);
    let read = common::load::read_back(&bootstrap, "tally", "load", 3, &reports);
    let tally = common::load::tally(&read, "L", &reports);
    println!("{tally}");
    assert!(tally.acknowledged >= 1000, "{tally}");
    assert_eq!((tally.lost, tally.duplicated, tally.reordered), (0, 0, 0), "{tally}");
}

/// The transaction coordinator of `transactional_id` (FindCoordinator v3,
/// key type 1) as broker `b` names it.
fn txn_coordinator(b: &common::broker::Broker, transactional_id: &str) -> i32 {
    use kafka_protocol::messages::{FindCoordinatorRequest, FindCoordinatorResponse};
    let mut req = FindCoordinatorRequest::default();
    req.key = StrBytes::from_string(transactional_id.to_string());
    req.key_type = 1;
    let resp: FindCoordinatorResponse = Wire::connect(&b.bootstrap()).call(ApiKey::FindCoordinator, 3, &req);
    assert_eq!(resp.error_code, 0, "FindCoordinator for {transactional_id}");
    resp.node_id.0
}

/// A transaction whose partition changes leader halfway (the leader is
/// SIGKILLed between two sends of one transaction) commits on the new
/// leader: a read_committed consumer reads each committed record once, in
/// order, and no aborted one, on every partition.
#[test]
fn a_transaction_commits_across_a_leader_change() {
    use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
    let _one = ONE_CLUSTER.lock().unwrap_or_else(|p| p.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let mut brokers = start_three(dir.path());
    wait_for_three(&brokers);
    let mut w = Wire::connect(&broker(&brokers, 1).bootstrap());
    assert_eq!(create(&mut w, "ledger", 3, 3, &[("min.insync.replicas", "2")]).0, 0);
    let placed = wait_until(broker(&brokers, 1), "ledger", "three in sync", |p| p.2 == vec![1, 2, 3]);
    let coordinator = txn_coordinator(broker(&brokers, 1), "ledger-writer");
    // A partition led by a broker that does not coordinate the transaction.
    let (moved, victim) =
        placed.iter().enumerate().map(|(p, x)| (p as i32, x.0)).find(|(_, l)| *l != coordinator).unwrap();
    let bootstrap = brokers.iter().map(|(_, b)| b.bootstrap()).collect::<Vec<_>>().join(",");
    let timeout = Duration::from_secs(30);
    let producer: BaseProducer = rdkafka::ClientConfig::new()
        .set("bootstrap.servers", &bootstrap)
        .set("transactional.id", "ledger-writer")
        .set("linger.ms", "1")
        .create()
        .expect("producer");
    producer.init_transactions(timeout).expect("init_transactions");
    let send_all = |tag: &str| {
        for p in 0..3 {
            let value = format!("{tag}-p{p}");
            producer.send(BaseRecord::<(), _>::to("ledger").partition(p).payload(&value)).expect("send");
        }
        producer.flush(timeout).expect("flush");
    };
    producer.begin_transaction().unwrap();
    send_all("t0");
    producer.commit_transaction(timeout).expect("commit t0");

    // Halfway through t1, partition `moved` loses its leader.
    producer.begin_transaction().unwrap();
    send_all("t1a");
    sigkill(&mut brokers, victim);
    let other = (1..=3).find(|&id| id != victim).unwrap();
    wait_until(broker(&brokers, other), "ledger", "a new leader", |p| p.0 > 0 && p.0 != victim);
    send_all("t1b");
    producer.commit_transaction(timeout).expect("commit t1 across the leader change");
    producer.begin_transaction().unwrap();
    send_all("t2");
    producer.abort_transaction(timeout).expect("abort t2");
    restart(&mut brokers, victim);
    wait_until(broker(&brokers, victim), "ledger", "the old leader back in sync", |p| p.2 == vec![1, 2, 3]);
    producer.begin_transaction().unwrap();
    send_all("t3");
    producer.commit_transaction(timeout).expect("commit t3");

    let settings = [("isolation.level", "read_committed")];
    let consumer = common::consume::from_start(&broker(&brokers, victim).bootstrap(), "audit", "ledger", 3, &settings);
    let mut got: BTreeMap<i32, Vec<String>> = BTreeMap::new();
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut quiet_since = Instant::now();
    while Instant::now() < deadline && quiet_since.elapsed() < Duration::from_secs(3) {
        if let Some(Ok(m)) = consumer.poll(Duration::from_millis(200)) {
            got.entry(m.partition()).or_default().push(String::from_utf8_lossy(m.payload().unwrap()).into_owned());
            quiet_since = Instant::now();
        }
    }
    for p in 0..3 {
        let want: Vec<String> = ["t0", "t1a", "t1b", "t3"].iter().map(|t| format!("{t}-p{p}")).collect();
        assert_eq!(got.get(&p), Some(&want), "ledger-{p} read committed (partition {moved} changed leader)");
    }
    wait_identical(dir.path(), "ledger", 3, 1);
}

/// A follower paused for less than its session (9 s) but longer than
/// `replica_lag_time_max_ms` (1 s) is still registered, yet its leader
/// drops it from the in-sync replicas: acks=all goes on with the other two
/// within seconds instead of waiting out the session. Resumed, it catches
/// up and is in sync again.
#[test]
fn a_follower_that_stops_copying_leaves_the_isr_before_its_session_ends() {
    let _one = ONE_CLUSTER.lock().unwrap_or_else(|p| p.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let settings =
        "broker_heartbeat_interval_ms = 200\nbroker_session_timeout_ms = 9000\nreplica_lag_time_max_ms = 1000\n";
    let brokers = start_cluster_with(dir.path(), 3, 3, settings);
    wait_for_three(&brokers);
    let mut w = Wire::connect(&broker(&brokers, 1).bootstrap());
    assert_eq!(create(&mut w, "lag", 1, 3, &[("min.insync.replicas", "2")]).0, 0);
    let placed = wait_until(broker(&brokers, 1), "lag", "three in sync", |p| p.2 == vec![1, 2, 3]);
    let leader = placed[0].0;
    let follower = (1..=3).find(|&id| id != leader).unwrap();
    wait_until(broker(&brokers, leader), "lag", "the leader has it", |p| p.0 == leader);
    let mut lw = Wire::connect(&broker(&brokers, leader).bootstrap());
    assert_eq!(first_produce(&mut lw, "lag", 0, one_record("before"), -1), 0);

    signal(broker(&brokers, follower), "-STOP");
    let paused = Instant::now();
    assert_eq!(produce(&mut lw, "lag", 0, one_record("while paused"), -1).0, 0, "acks=all with two in sync");
    let took = paused.elapsed();
    let isr = partitions(broker(&brokers, leader), "lag")[0].2.clone();
    assert!(!isr.contains(&follower), "the paused follower left the ISR: {isr:?}");
    assert!(took < Duration::from_secs(6), "acks=all waited {took:?}, near the 9 s session");
    let listed = common::cluster::metadata(broker(&brokers, leader), None, false);
    assert!(listed.brokers.iter().any(|b| b.node_id.0 == follower), "the paused follower is not fenced");
    println!("acks=all answered {took:?} after the follower's pause");

    signal(broker(&brokers, follower), "-CONT");
    wait_until(broker(&brokers, leader), "lag", "the follower back in sync", |p| p.2 == vec![1, 2, 3]);
    wait_identical(dir.path(), "lag", 1, 1);
}

/// Five records, one batch.
fn five_records(first: usize) -> bytes::Bytes {
    let values: Vec<String> = (first..first + 5).map(|i| format!("five-{i}")).collect();
    let records: Vec<shardlog::protocol::record_batch::Record<'_>> = values
        .iter()
        .map(|v| shardlog::protocol::record_batch::Record { key: None, value: Some(v.as_bytes()), timestamp_delta: 0 })
        .collect();
    bytes::Bytes::from(shardlog::protocol::record_batch::encode_batch(&records, 1_700_000_000_000))
}

/// A follower that lost its whole log while its leader's log start moved
/// on (DeleteRecords here, retention alike) cannot fetch from where it
/// ends: the leader answers OFFSET_OUT_OF_RANGE with its log start, and
/// the follower starts over there, with the whole batch that holds that
/// offset, as Kafka's does. It catches up and is in sync again.
#[test]
fn a_follower_behind_its_leaders_log_start_starts_over_there() {
    let _one = ONE_CLUSTER.lock().unwrap_or_else(|p| p.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let mut brokers = start_three(dir.path());
    wait_for_three(&brokers);
    let mut w = Wire::connect(&broker(&brokers, 1).bootstrap());
    assert_eq!(create(&mut w, "trimmed", 1, 3, &[]).0, 0);
    let placed = wait_until(broker(&brokers, 1), "trimmed", "three in sync", |p| p.2 == vec![1, 2, 3]);
    let leader = placed[0].0;
    wait_until(broker(&brokers, leader), "trimmed", "the leader has it", |p| p.0 == leader);
    let follower = (1..=3).find(|&id| id != leader).unwrap();
    let mut lw = Wire::connect(&broker(&brokers, leader).bootstrap());
    assert_eq!(first_produce(&mut lw, "trimmed", 0, five_records(0), -1), 0);
    for i in 1..8 {
        let (code, _) = produce(&mut lw, "trimmed", 0, five_records(i * 5), -1);
        assert_eq!(code, 0);
    }

    // The follower dies with its data; meanwhile the leader's log starts
    // at 32, inside the batch of offsets 30..35.
    sigkill(&mut brokers, follower);
    std::fs::remove_dir_all(dir.path().join(format!("b{follower}"))).unwrap();
    assert_eq!(delete_records(&mut lw, "trimmed", 32), (0, 32));

    restart(&mut brokers, follower);
    wait_for_brokers(&brokers, &[1, 2, 3]);
    for id in 1..=3 {
        wait_until(broker(&brokers, id), "trimmed", "the emptied follower in sync", |p| p.2 == vec![1, 2, 3]);
    }
    assert_eq!(produce(&mut lw, "trimmed", 0, five_records(40), -1).0, 0, "acks=all with the follower back");
    // Its log is the leader's from the batch holding offset 32 on.
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        // The restarted follower opens the partition a moment after it
        // starts; until then it has no directory for it.
        let opened = dir.path().join(format!("b{follower}/trimmed-0")).is_dir();
        let copied = if opened { log_bytes(dir.path(), follower, "trimmed", 0) } else { Vec::new() };
        let original = log_bytes(dir.path(), leader, "trimmed", 0);
        let first_base = (copied.len() >= 8).then(|| i64::from_be_bytes(copied[..8].try_into().unwrap()));
        if first_base == Some(30) && original.ends_with(&copied) && copied.len() > 3 * 60 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the follower's log ({} bytes from offset {first_base:?}) is not the leader's tail ({} bytes)",
            copied.len(),
            original.len()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// DeleteRecords v2 of partition 0 of `topic` up to `offset`: (error, low watermark).
fn delete_records(w: &mut Wire, topic: &str, offset: i64) -> (i16, i64) {
    use kafka_protocol::messages::{delete_records_request, DeleteRecordsRequest, DeleteRecordsResponse};
    let mut trim = delete_records_request::DeleteRecordsPartition::default();
    trim.partition_index = 0;
    trim.offset = offset;
    let mut t = delete_records_request::DeleteRecordsTopic::default();
    t.name = TopicName(StrBytes::from_string(topic.to_string()));
    t.partitions = vec![trim];
    let mut req = DeleteRecordsRequest::default();
    req.topics = vec![t];
    req.timeout_ms = 10_000;
    let resp: DeleteRecordsResponse = w.call(ApiKey::DeleteRecords, 2, &req);
    let p = &resp.topics[0].partitions[0];
    (p.error_code, p.low_watermark)
}

/// ListOffsets v2 EARLIEST of partition 0 of `topic`: (error, offset).
fn earliest(w: &mut Wire, topic: &str) -> (i16, i64) {
    let (error, offset, _) = list_offset(w, topic, -2, -1, 2);
    (error, offset)
}

/// ListOffsets v7 LATEST of partition 0 of `topic`, telling `epoch` as the
/// client's current leader epoch: (error, offset, leader epoch).
fn latest(w: &mut Wire, topic: &str, epoch: i32) -> (i16, i64, i32) {
    list_offset(w, topic, -1, epoch, 7)
}

/// ListOffsets `version` for `timestamp` in partition 0 of `topic`, with
/// `epoch` as the current leader epoch (from v4): (error, offset, epoch).
fn list_offset(w: &mut Wire, topic: &str, timestamp: i64, epoch: i32, version: i16) -> (i16, i64, i32) {
    use kafka_protocol::messages::{list_offsets_request, ListOffsetsRequest, ListOffsetsResponse};
    let mut p = list_offsets_request::ListOffsetsPartition::default();
    p.partition_index = 0;
    p.timestamp = timestamp;
    p.current_leader_epoch = epoch;
    let mut t = list_offsets_request::ListOffsetsTopic::default();
    t.name = TopicName(StrBytes::from_string(topic.to_string()));
    t.partitions = vec![p];
    let mut req = ListOffsetsRequest::default();
    req.replica_id = kafka_protocol::messages::BrokerId(-1);
    req.topics = vec![t];
    let resp: ListOffsetsResponse = w.call(ApiKey::ListOffsets, version, &req);
    let p = &resp.topics[0].partitions[0];
    (p.error_code, p.offset, p.leader_epoch)
}

/// A follower's log start follows its leader's (DeleteRecords here,
/// retention alike): when the leader is lost, the new one starts where
/// the old one did, and the deleted records stay deleted.
#[test]
fn records_deleted_at_the_leader_stay_deleted_after_a_leader_change() {
    let _one = ONE_CLUSTER.lock().unwrap_or_else(|p| p.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let mut brokers = start_three(dir.path());
    wait_for_three(&brokers);
    let mut w = Wire::connect(&broker(&brokers, 1).bootstrap());
    assert_eq!(create(&mut w, "deleted", 1, 3, &[]).0, 0);
    let placed = wait_until(broker(&brokers, 1), "deleted", "three in sync", |p| p.2 == vec![1, 2, 3]);
    let leader = placed[0].0;
    wait_until(broker(&brokers, leader), "deleted", "the leader has it", |p| p.0 == leader);
    let mut lw = Wire::connect(&broker(&brokers, leader).bootstrap());
    assert_eq!(first_produce(&mut lw, "deleted", 0, five_records(0), -1), 0);
    for i in 1..8 {
        assert_eq!(produce(&mut lw, "deleted", 0, five_records(i * 5), -1).0, 0);
    }
    assert_eq!(delete_records(&mut lw, "deleted", 22), (0, 22));
    assert_eq!(earliest(&mut lw, "deleted"), (0, 22));
    // acks=all: the followers have fetched since the delete, and their
    // answers carried the leader's log start.
    assert_eq!(produce(&mut lw, "deleted", 0, five_records(40), -1).0, 0);
    assert_eq!(produce(&mut lw, "deleted", 0, five_records(45), -1).0, 0);
    let old_epoch = partitions(broker(&brokers, leader), "deleted")[0].3;

    sigkill(&mut brokers, leader);
    let survivor = (1..=3).find(|&id| id != leader).unwrap();
    let moved = wait_until(broker(&brokers, survivor), "deleted", "a new leader", |p| p.0 > 0 && p.0 != leader);
    let next = moved[0].0;
    let mut nw = Wire::connect(&broker(&brokers, next).bootstrap());
    let deadline = Instant::now() + Duration::from_secs(20);
    let found = loop {
        let found = earliest(&mut nw, "deleted");
        if found.0 == 0 || Instant::now() > deadline {
            break found;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(found, (0, 22), "broker {next}, the new leader, starts where broker {leader} did");

    // ListOffsets (v4+) checks the client's leader epoch, as Fetch does, and
    // answers the partition's epoch with the offset, which a consumer then
    // validates its position against (KIP-320): a client still at broker
    // {leader}'s epoch is fenced, one ahead of this broker is told so.
    let epoch = partitions(broker(&brokers, next), "deleted")[0].3;
    assert!(epoch > old_epoch, "leader epoch {epoch} after a change from {old_epoch}");
    let deadline = Instant::now() + Duration::from_secs(20);
    while latest(&mut nw, "deleted", -1) != (0, 50, epoch) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
    }
    let answers: Vec<(i16, i64, i32)> =
        [-1, old_epoch, epoch, epoch + 1].into_iter().map(|asked| latest(&mut nw, "deleted", asked)).collect();
    let (fenced, unknown) = ((74, -1, -1), (75, -1, -1));
    assert_eq!(answers, vec![(0, 50, epoch), fenced, (0, 50, epoch), unknown], "ListOffsets at broker {next}");
}
