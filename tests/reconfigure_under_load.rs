//! A topic's configs changed while producers write to it: the broker
//! closes each partition's log and opens it again with the new configs.
//! Appends that found the old log object and waited behind its close must
//! not be written through it (the new log owns the files by then); they are
//! refused with a retriable error and librdkafka sends them again. Every
//! acknowledged record must then be in the log exactly once, where its
//! acknowledgement said.

mod common;

use std::{
    collections::BTreeMap,
    sync::atomic::{AtomicBool, Ordering},
    sync::Arc,
    time::{Duration, Instant},
};

use common::{
    broker::Broker,
    produce::{produce_all, Outgoing},
};
use rdkafka::{
    admin::{AdminClient, AdminOptions, AlterConfig, NewTopic, ResourceSpecifier, TopicReplication},
    client::DefaultClientContext,
    message::Message,
    ClientConfig,
};

const TOPIC: &str = "reconfigured";
const PARTITIONS: i32 = 4;
/// Reconfigurations made while producing.
const CHANGES: usize = 10;
/// Records sent at least, and at most.
const MIN_RECORDS: usize = 5_000;
const MAX_RECORDS: usize = 1_000_000;

fn opts() -> AdminOptions {
    AdminOptions::new().operation_timeout(Some(Duration::from_secs(10)))
}

#[test]
fn records_acknowledged_while_the_topic_is_reconfigured_are_all_kept_once() {
    let dir = common::tempdir().unwrap();
    let broker = Broker::start(&dir.path().join("data"), 2);
    let admin: AdminClient<DefaultClientContext> =
        ClientConfig::new().set("bootstrap.servers", broker.bootstrap()).create().unwrap();
    let created = futures_lite::future::block_on(
        admin.create_topics(&[NewTopic::new(TOPIC, PARTITIONS, TopicReplication::Fixed(1))], &opts()),
    )
    .unwrap();
    assert!(created[0].is_ok(), "create topic: {:?}", created[0]);

    // The producer keeps sending until every reconfiguration is done (and
    // at least MIN_RECORDS), however fast the machine, so each one lands
    // while records go in.
    let reconfigured = Arc::new(AtomicBool::new(false));
    let bootstrap = broker.bootstrap();
    let done = reconfigured.clone();
    let producer = std::thread::spawn(move || {
        let records =
            (0..MAX_RECORDS).take_while(|&i| i < MIN_RECORDS || !done.load(Ordering::SeqCst)).map(|i| Outgoing {
                id: i,
                key: None,
                value: format!("record-{i}").into_bytes(),
                partition: Some((i % PARTITIONS as usize) as i32),
                timestamp: None,
            });
        let settings = [("acks", "all"), ("linger.ms", "0"), ("enable.idempotence", "true")];
        produce_all(&bootstrap, TOPIC, &settings, records)
    });
    for change in 0..CHANGES {
        let retention = format!("{}", 3_600_000 + change);
        let change = AlterConfig::new(ResourceSpecifier::Topic(TOPIC)).set("retention.ms", &retention);
        let altered = futures_lite::future::block_on(admin.alter_configs(&[change], &opts())).expect("alter configs");
        assert!(altered[0].is_ok(), "{altered:?}");
        std::thread::sleep(Duration::from_millis(20));
    }
    reconfigured.store(true, Ordering::SeqCst);
    let delivered = producer.join().expect("producer thread");
    let records = delivered.len();
    assert!(records < MAX_RECORDS, "the producer ran out of records before the reconfigurations were done");

    // Where each record was acknowledged, against what the log holds.
    let mut acknowledged: BTreeMap<(i32, i64), String> = BTreeMap::new();
    for d in &delivered {
        let previous = acknowledged.insert((d.partition, d.offset), format!("record-{}", d.id));
        assert!(previous.is_none(), "{}-{} acknowledged twice", d.partition, d.offset);
    }
    let c = common::consume::from_start(&broker.bootstrap(), "reconfigure-checker", TOPIC, PARTITIONS, &[]);
    let mut held: BTreeMap<(i32, i64), String> = BTreeMap::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    while held.len() < records && Instant::now() < deadline {
        if let Some(m) = c.poll(Duration::from_millis(200)) {
            let m = m.expect("consume");
            let value = String::from_utf8_lossy(m.payload().unwrap_or_default()).into_owned();
            held.insert((m.partition(), m.offset()), value);
        }
    }
    let missing: Vec<_> = acknowledged.iter().filter(|(at, v)| held.get(at) != Some(v)).take(5).collect();
    assert!(
        missing.is_empty(),
        "{CHANGES} reconfigurations: acknowledged records not in the log as acknowledged: {missing:?}"
    );
    let mut values: Vec<&String> = held.values().collect();
    values.sort();
    values.dedup();
    assert_eq!((held.len(), values.len()), (records, records), "every record held once, nothing else");
}
