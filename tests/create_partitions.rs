//! CreatePartitions with librdkafka's admin client: a topic grows from 2 to
//! 5 partitions while a group member consumes it; the member rebalances onto
//! the new partitions and reads what a separate producer wrote there; bad
//! requests get Kafka's error codes; the new count survives a restart.

mod common;

use std::{
    collections::BTreeSet,
    time::{Duration, Instant},
};

use common::broker::Broker;
use rdkafka::{
    admin::{AdminClient, AdminOptions, NewPartitions, NewTopic, TopicReplication},
    client::DefaultClientContext,
    consumer::{BaseConsumer, Consumer},
    message::Message,
    producer::{BaseProducer, BaseRecord, Producer},
    types::RDKafkaErrorCode,
    ClientConfig,
};

const TOPIC: &str = "growing";
const GROUP: &str = "growing-readers";

fn admin(bootstrap: &str) -> AdminClient<DefaultClientContext> {
    ClientConfig::new().set("bootstrap.servers", bootstrap).create().expect("admin client")
}

fn consumer(bootstrap: &str) -> BaseConsumer {
    ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("group.id", GROUP)
        .set("auto.offset.reset", "earliest")
        // Notice the new partitions quickly (the group leader then rebalances).
        .set("topic.metadata.refresh.interval.ms", "500")
        .create()
        .expect("consumer")
}

fn partition_count(c: &BaseConsumer) -> usize {
    let meta = c.fetch_metadata(Some(TOPIC), Duration::from_secs(10)).expect("metadata");
    meta.topics().iter().find(|t| t.name() == TOPIC).map_or(0, |t| t.partitions().len())
}

#[test]
fn a_topic_grows_and_its_group_rebalances_onto_the_new_partitions() {
    let dir = common::tempdir().unwrap();
    let mut broker = Broker::start(dir.path(), 2);
    let bootstrap = broker.bootstrap();
    let admin = admin(&bootstrap);
    let opts = AdminOptions::new().operation_timeout(Some(Duration::from_secs(10)));
    let created = futures_lite::future::block_on(
        admin.create_topics(&[NewTopic::new(TOPIC, 2, TopicReplication::Fixed(1))], &opts),
    )
    .expect("create topics");
    assert!(created.iter().all(|r| r.is_ok()), "{created:?}");

    let c = consumer(&bootstrap);
    c.subscribe(&[TOPIC]).unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while c.assignment().map_or(0, |a| a.count()) < 2 && Instant::now() < deadline {
        let _ = c.poll(Duration::from_millis(100));
    }
    assert_eq!(c.assignment().unwrap().count(), 2, "the member owns both partitions first");

    // Grow; and three requests Kafka refuses.
    let results = futures_lite::future::block_on(admin.create_partitions(
        &[
            NewPartitions::new(TOPIC, 5),
            NewPartitions::new("no-such-topic", 3),
            NewPartitions::new("__consumer_offsets", 60),
        ],
        &opts,
    ))
    .expect("create partitions");
    assert_eq!(results[0], Ok(TOPIC.to_string()));
    assert_eq!(results[1], Err(("no-such-topic".to_string(), RDKafkaErrorCode::UnknownTopicOrPartition)));
    assert_eq!(results[2], Err(("__consumer_offsets".to_string(), RDKafkaErrorCode::InvalidPartitions)));
    let shrink = futures_lite::future::block_on(admin.create_partitions(&[NewPartitions::new(TOPIC, 3)], &opts))
        .expect("create partitions");
    assert_eq!(shrink[0], Err((TOPIC.to_string(), RDKafkaErrorCode::InvalidPartitions)), "5 → 3 is refused");
    assert_eq!(partition_count(&c), 5);

    // Another client writes to every partition, new ones included.
    let producer: BaseProducer = ClientConfig::new().set("bootstrap.servers", &bootstrap).create().expect("producer");
    let mut sent = BTreeSet::new();
    for p in 0..5 {
        for i in 0..20 {
            let value = format!("p{p}-r{i}");
            producer.send(BaseRecord::<(), str>::to(TOPIC).partition(p).payload(&value)).expect("enqueue");
            sent.insert((p, value));
        }
    }
    producer.flush(Duration::from_secs(30)).expect("every record delivered");

    // The member rebalances onto all five partitions and reads every record.
    let mut seen = BTreeSet::new();
    let deadline = Instant::now() + Duration::from_secs(90);
    while seen.len() < sent.len() && Instant::now() < deadline {
        if let Some(Ok(m)) = c.poll(Duration::from_millis(100)) {
            let value = String::from_utf8(m.payload().unwrap_or_default().to_vec()).unwrap();
            seen.insert((m.partition(), value));
        }
    }
    assert_eq!(seen, sent, "records of old and new partitions, consumed by the rebalanced member");
    assert_eq!(c.assignment().unwrap().count(), 5);
    drop(c);

    broker.stop();
    broker.restart();
    let c = consumer(&broker.bootstrap());
    assert_eq!(partition_count(&c), 5, "the new count is persisted");
}
