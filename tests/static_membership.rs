//! Static membership (KIP-345) with librdkafka: two members with
//! `group.instance.id` share a topic; one closes (a static member sends no
//! LeaveGroup) and a new process comes back under the same instance id. It
//! gets its old partitions back without a rebalance: the other member sees
//! no revoke, and the returning one reads what a producer wrote meanwhile.

mod common;

use std::{
    collections::BTreeSet,
    sync::{
        atomic::{AtomicUsize, Ordering},
        Arc,
    },
    time::{Duration, Instant},
};

use common::broker::Broker;
use rdkafka::{
    admin::{AdminClient, AdminOptions, NewTopic, TopicReplication},
    client::DefaultClientContext,
    consumer::{BaseConsumer, Consumer, ConsumerContext, Rebalance},
    message::Message,
    producer::{BaseProducer, BaseRecord, Producer},
    ClientConfig, ClientContext,
};

const TOPIC: &str = "static-members";
const GROUP: &str = "static-group";

/// Counts the revokes a member goes through.
struct Revokes(Arc<AtomicUsize>);
impl ClientContext for Revokes {}
impl ConsumerContext for Revokes {
    fn pre_rebalance(&self, _: &BaseConsumer<Self>, rebalance: &Rebalance<'_>) {
        if matches!(rebalance, Rebalance::Revoke(_)) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }
}

fn member(bootstrap: &str, instance: &str, revokes: Arc<AtomicUsize>) -> BaseConsumer<Revokes> {
    ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("group.id", GROUP)
        .set("group.instance.id", instance)
        .set("session.timeout.ms", "30000")
        .set("auto.offset.reset", "earliest")
        .set("enable.auto.commit", "true")
        .set("auto.commit.interval.ms", "200")
        .create_with_context(Revokes(revokes))
        .expect("consumer")
}

fn assigned(c: &BaseConsumer<Revokes>) -> BTreeSet<i32> {
    c.assignment().map(|a| a.elements().iter().map(|e| e.partition()).collect()).unwrap_or_default()
}

/// Polls every member until `done` holds (or a minute passes).
fn poll_until(members: &[&BaseConsumer<Revokes>], mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !done() && Instant::now() < deadline {
        for m in members {
            let _ = m.poll(Duration::from_millis(50));
        }
    }
}

#[test]
fn a_static_member_that_comes_back_keeps_its_partitions_without_a_rebalance() {
    let dir = common::tempdir().unwrap();
    let broker = Broker::start_with_config(dir.path(), 1, "group_initial_rebalance_delay_ms = 0\n", &[]);
    let b = broker.bootstrap();
    let admin: AdminClient<DefaultClientContext> =
        ClientConfig::new().set("bootstrap.servers", &b).create().expect("admin");
    let opts = AdminOptions::new().operation_timeout(Some(Duration::from_secs(10)));
    futures_lite::future::block_on(admin.create_topics(&[NewTopic::new(TOPIC, 4, TopicReplication::Fixed(1))], &opts))
        .expect("create topic");

    // The first member leads; the second joins and takes half.
    let (a_revokes, b_revokes) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let a = member(&b, "instance-a", a_revokes.clone());
    a.subscribe(&[TOPIC]).unwrap();
    poll_until(&[&a], || assigned(&a).len() == 4);
    let second = member(&b, "instance-b", b_revokes.clone());
    second.subscribe(&[TOPIC]).unwrap();
    poll_until(&[&a, &second], || assigned(&a).len() == 2 && assigned(&second).len() == 2);
    let b_partitions = assigned(&second);
    assert_eq!(b_partitions.len(), 2, "the second member owns two partitions");
    // Let both settle (auto commits, heartbeats) before the restart.
    poll_until(&[&a, &second], {
        let until = Instant::now() + Duration::from_secs(2);
        move || Instant::now() > until
    });
    let revokes_before = a_revokes.load(Ordering::SeqCst);
    drop(second);

    // Records for the second member's partitions, from another client.
    let producer: BaseProducer = ClientConfig::new().set("bootstrap.servers", &b).create().expect("producer");
    let mut sent = BTreeSet::new();
    for &p in &b_partitions {
        for i in 0..10 {
            let value = format!("p{p}-{i}");
            producer.send(BaseRecord::<(), str>::to(TOPIC).partition(p).payload(&value)).expect("enqueue");
            sent.insert(value);
        }
    }
    producer.flush(Duration::from_secs(30)).expect("delivered");

    // A new process under the same instance id.
    let again = member(&b, "instance-b", Arc::new(AtomicUsize::new(0)));
    again.subscribe(&[TOPIC]).unwrap();
    let mut seen = BTreeSet::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    while seen.len() < sent.len() && Instant::now() < deadline {
        let _ = a.poll(Duration::from_millis(20));
        if let Some(Ok(m)) = again.poll(Duration::from_millis(50)) {
            seen.insert(String::from_utf8_lossy(m.payload().unwrap_or_default()).to_string());
        }
    }
    assert_eq!(assigned(&again), b_partitions, "the same partitions back");
    assert_eq!(seen, sent, "the returning member reads what was written to its partitions");
    assert_eq!(a_revokes.load(Ordering::SeqCst), revokes_before, "the other member saw no rebalance");
    assert_eq!(assigned(&a).len(), 2);
}
