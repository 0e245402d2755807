//! Coordinators in a cluster (issue 18): `__consumer_offsets` and
//! `__transaction_state` are replicated by the quorum like any topic, and
//! a group's or transactional id's coordinator is its partition's leader.
//! When the coordinator's broker dies, the partition's new leader loads
//! the keys from its copy: the offsets a group committed are still there
//! and its consumer goes on from them, reading nothing twice and missing
//! nothing; a transactional id keeps its producer id and epoch, so the
//! next producer fences the last one, and every committed transaction is
//! read once.

mod common;

use std::{
    collections::BTreeMap,
    time::{Duration, Instant},
};

use common::{
    cluster::{
        broker, consume_in_group, create, read_committed, start_three, wait_for_brokers, wait_for_three, wait_until,
    },
    wire::Wire,
};
use kafka_protocol::{
    messages::{
        ApiKey, FindCoordinatorRequest, FindCoordinatorResponse, InitProducerIdRequest, InitProducerIdResponse,
        TransactionalId,
    },
    protocol::StrBytes,
};
use rdkafka::{
    consumer::{BaseConsumer, Consumer},
    producer::{BaseProducer, BaseRecord, Producer},
    ClientConfig, Offset, TopicPartitionList,
};

const OFFSETS: &str = "__consumer_offsets";
/// One cluster at a time: two machines' worth of brokers on two cores
/// would time each other out.
static ONE_CLUSTER: std::sync::Mutex<()> = std::sync::Mutex::new(());
const TOPIC: &str = "orders";
const GROUP: &str = "survivors";

/// The coordinator `addr` names for `GROUP`, once it names one.
fn coordinator_at(addr: &str) -> i32 {
    coordinator_other_than(addr, -1)
}

/// The coordinator `addr` names for `GROUP`, once it names one other
/// than `not`.
fn coordinator_other_than(addr: &str, not: i32) -> i32 {
    find_other_than(addr, GROUP, 0, not)
}

/// The coordinator `addr` names for `key` (of `key_type`: 0 a group, 1 a
/// transactional id), once it names one other than `not`.
fn find_other_than(addr: &str, key: &str, key_type: i8, not: i32) -> i32 {
    let mut find = FindCoordinatorRequest::default();
    find.key = StrBytes::from_string(key.to_string());
    find.key_type = key_type;
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let r: FindCoordinatorResponse = Wire::connect(addr).call(ApiKey::FindCoordinator, 3, &find);
        if r.error_code == 0 && r.node_id.0 != not {
            return r.node_id.0;
        }
        assert!(
            Instant::now() < deadline,
            "{addr} names no coordinator for {key} but {not}: error {}, node {}",
            r.error_code,
            r.node_id.0
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The group's committed offsets of `TOPIC`'s three partitions, asked
/// through `bootstrap` by librdkafka.
fn committed(bootstrap: &str) -> BTreeMap<i32, Offset> {
    let asker: BaseConsumer =
        ClientConfig::new().set("bootstrap.servers", bootstrap).set("group.id", GROUP).create().expect("consumer");
    let mut tpl = TopicPartitionList::new();
    for p in 0..3 {
        tpl.add_partition(TOPIC, p);
    }
    let got = asker.committed_offsets(tpl, Duration::from_secs(30)).expect("committed offsets");
    got.elements().iter().map(|e| (e.partition(), e.offset())).collect()
}

#[test]
fn a_group_and_its_committed_offsets_survive_the_loss_of_its_coordinator() {
    let _one = ONE_CLUSTER.lock().unwrap_or_else(|p| p.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let mut brokers = start_three(dir.path());
    wait_for_three(&brokers);
    // The quorum creates the offsets topic with three replicas once the
    // three brokers are live.
    wait_until(broker(&brokers, 1), OFFSETS, "replicated three times", |p| p.1.len() == 3 && p.2.len() == 3);
    let mut w = Wire::connect(&broker(&brokers, 1).bootstrap());
    assert_eq!(create(&mut w, TOPIC, 3, 3, &[("min.insync.replicas", "2")]).0, 0);
    wait_until(broker(&brokers, 1), TOPIC, "three in sync", |p| p.2.len() == 3);

    // The group reads and commits the first 60 records.
    let first: Vec<(i32, String)> = (0..60).map(|i| (i % 3, format!("first-{i}"))).collect();
    let all = brokers.iter().map(|(_, b)| b.bootstrap()).collect::<Vec<_>>().join(",");
    assert_eq!(common::produce::produce(&all, TOPIC, &first).len(), 60);
    let read = consume_in_group(&all, GROUP, TOPIC, 60);
    assert_eq!(read.values().map(Vec::len).sum::<usize>(), 60, "the group read the first records: {read:?}");
    let coordinator = coordinator_at(&broker(&brokers, 1).bootstrap());
    for (id, b) in &brokers {
        assert_eq!(coordinator_at(&b.bootstrap()), coordinator, "broker {id} names another coordinator");
    }

    // Its coordinator's broker dies.
    brokers.iter_mut().find(|(id, _)| *id == coordinator).unwrap().1.kill();
    let killed = Instant::now();
    let survivors: Vec<i32> = (1..=3).filter(|&id| id != coordinator).collect();
    let through = broker(&brokers, survivors[0]).bootstrap();
    let moved_to = coordinator_other_than(&through, coordinator);
    assert!(survivors.contains(&moved_to), "the coordinator moved to a live broker: {moved_to}");
    assert_eq!(coordinator_at(&broker(&brokers, survivors[1]).bootstrap()), moved_to);

    // The new coordinator has every offset the group committed.
    let at: BTreeMap<i32, Offset> = committed(&through);
    println!("the group's offsets were read from its new coordinator {:?} after the kill", killed.elapsed());
    for p in 0..3 {
        let read_here = read.get(&p).map_or(0, Vec::len) as i64;
        assert_eq!(at.get(&p), Some(&Offset::Offset(read_here)), "{TOPIC}-{p}'s committed offset after the failover");
    }

    // A consumer of the group goes on from them: the next 30 records, none
    // of the first again.
    let survivors_bootstrap =
        survivors.iter().map(|&id| broker(&brokers, id).bootstrap()).collect::<Vec<_>>().join(",");
    let second: Vec<(i32, String)> = (0..30).map(|i| (i % 3, format!("second-{i}"))).collect();
    assert_eq!(common::produce::produce(&survivors_bootstrap, TOPIC, &second).len(), 30);
    let next = consume_in_group(&survivors_bootstrap, GROUP, TOPIC, 30);
    for p in 0..3 {
        let want: Vec<String> = second.iter().filter(|(q, _)| *q == p).map(|(_, v)| v.clone()).collect();
        assert_eq!(next.get(&p), Some(&want), "{TOPIC}-{p} after the failover: exactly the records not yet read");
    }

    // The dead broker comes back as a follower of the offsets it led, and
    // every broker names one coordinator again.
    brokers.iter_mut().find(|(id, _)| *id == coordinator).unwrap().1.restart();
    wait_for_brokers(&brokers, &[1, 2, 3]);
    wait_until(broker(&brokers, coordinator), OFFSETS, "back in sync", |p| p.0 > 0 && p.2.len() == 3);
    let named: Vec<i32> = brokers.iter().map(|(_, b)| coordinator_at(&b.bootstrap())).collect();
    assert!(named.iter().all(|&n| n == named[0]), "one coordinator named by all: {named:?}");
    let after = committed(&broker(&brokers, coordinator).bootstrap());
    for p in 0..3 {
        let read_here = (read.get(&p).map_or(0, Vec::len) + next.get(&p).map_or(0, Vec::len)) as i64;
        assert_eq!(after.get(&p), Some(&Offset::Offset(read_here)), "{TOPIC}-{p}'s committed offset at the end");
    }
}

const TXN_ID: &str = "mover";

/// A transaction of librdkafka's with transactional id `TXN_ID` through
/// `bootstrap`: one record per partition of `topic`, committed.
fn commit_one(bootstrap: &str, topic: &str, round: &str) {
    let timeout = Duration::from_secs(30);
    let producer: BaseProducer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("transactional.id", TXN_ID)
        .set("linger.ms", "1")
        .create()
        .expect("producer");
    producer.init_transactions(timeout).expect("init_transactions");
    producer.begin_transaction().expect("begin_transaction");
    for p in 0..3 {
        let value = format!("{round}-p{p}");
        producer.send(BaseRecord::<(), _>::to(topic).partition(p).payload(&value)).expect("send");
    }
    producer.flush(timeout).expect("flush");
    producer.commit_transaction(timeout).expect("commit_transaction");
}

/// InitProducerId for `TXN_ID` at its coordinator `addr`, retried while
/// the coordinator loads or finishes a transaction: (producer id, epoch).
fn init_producer_id(addr: &str) -> (i64, i16) {
    let mut req = InitProducerIdRequest::default();
    req.transactional_id = Some(TransactionalId(StrBytes::from_static_str(TXN_ID)));
    req.transaction_timeout_ms = 60_000;
    req.producer_id = (-1).into();
    req.producer_epoch = -1;
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let resp: InitProducerIdResponse = Wire::connect(addr).call(ApiKey::InitProducerId, 4, &req);
        if resp.error_code == 0 {
            return (resp.producer_id.0, resp.producer_epoch);
        }
        assert!(Instant::now() < deadline, "InitProducerId at {addr}: error {}", resp.error_code);
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn a_transactional_id_survives_the_loss_of_its_coordinator() {
    let _one = ONE_CLUSTER.lock().unwrap_or_else(|p| p.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let mut brokers = start_three(dir.path());
    wait_for_three(&brokers);
    let ledger = "ledger";
    let mut w = Wire::connect(&broker(&brokers, 1).bootstrap());
    assert_eq!(create(&mut w, ledger, 3, 3, &[("min.insync.replicas", "2")]).0, 0);
    wait_until(broker(&brokers, 1), ledger, "three in sync", |p| p.2.len() == 3);
    let all = brokers.iter().map(|(_, b)| b.bootstrap()).collect::<Vec<_>>().join(",");
    commit_one(&all, ledger, "before");

    // The id's state as its coordinator logged it: a new InitProducerId
    // bumps the epoch of the same producer id.
    let coordinator = find_other_than(&broker(&brokers, 1).bootstrap(), TXN_ID, 1, -1);
    let (producer_id, epoch) = init_producer_id(&broker(&brokers, coordinator).bootstrap());

    brokers.iter_mut().find(|(id, _)| *id == coordinator).unwrap().1.kill();
    let killed = Instant::now();
    let survivors: Vec<i32> = (1..=3).filter(|&id| id != coordinator).collect();
    let moved_to = find_other_than(&broker(&brokers, survivors[0]).bootstrap(), TXN_ID, 1, coordinator);
    assert!(survivors.contains(&moved_to), "the coordinator moved to a live broker: {moved_to}");
    let after = init_producer_id(&broker(&brokers, moved_to).bootstrap());
    assert_eq!(after, (producer_id, epoch + 1), "the new coordinator knows the id: same producer id, next epoch");
    println!("the id's new coordinator answered InitProducerId {:?} after the kill", killed.elapsed());

    // The next producer of the id commits through the survivors; a
    // read_committed consumer reads both transactions once each.
    let survivors_bootstrap =
        survivors.iter().map(|&id| broker(&brokers, id).bootstrap()).collect::<Vec<_>>().join(",");
    commit_one(&survivors_bootstrap, ledger, "after");
    let got = read_committed(&survivors_bootstrap, ledger, 3, 6);
    for p in 0..3 {
        assert_eq!(got.get(&p), Some(&vec![format!("before-p{p}"), format!("after-p{p}")]), "{ledger}-{p}");
    }
}
