//! A librdkafka producer with enable.idempotence=true (acks=all) keeps
//! producing while the broker is SIGKILLed and restarted again and again;
//! librdkafka retries whatever was in flight. Afterwards every acknowledged
//! record is in the log exactly once, at the offset its acknowledgement
//! named, and no record is there twice.

mod common;

use std::{
    collections::BTreeMap,
    sync::{
        atomic::{AtomicBool, Ordering},
        Arc, Mutex,
    },
    time::{Duration, Instant},
};

use common::broker::Broker;
use rdkafka::{
    admin::{AdminClient, AdminOptions, NewTopic, TopicReplication},
    client::DefaultClientContext,
    consumer::{BaseConsumer, Consumer},
    message::Message,
    producer::{BaseRecord, DeliveryResult, Producer, ProducerContext, ThreadedProducer},
    ClientConfig, ClientContext, Offset, TopicPartitionList,
};

const TOPIC: &str = "idempotent";
const PARTITIONS: i32 = 3;
const RECORDS: usize = 60_000;
const KILLS: usize = 8;

/// (record id, partition, offset or the error)
type Reports = Arc<Mutex<Vec<(usize, i32, Result<i64, String>)>>>;

struct Acks(Reports);
impl ClientContext for Acks {}
impl ProducerContext for Acks {
    type DeliveryOpaque = Box<usize>;
    fn delivery(&self, result: &DeliveryResult<'_>, id: Box<usize>) {
        let entry = match result {
            Ok(m) => (*id, m.partition(), Ok(m.offset())),
            Err((e, m)) => (*id, m.partition(), Err(e.to_string())),
        };
        self.0.lock().unwrap().push(entry);
    }
}

#[test]
fn idempotent_producer_across_broker_sigkills_writes_each_record_once() {
    let dir = common::tempdir().unwrap();
    let mut broker = Broker::start(&dir.path().join("data"), 2);
    let admin: AdminClient<DefaultClientContext> =
        ClientConfig::new().set("bootstrap.servers", broker.bootstrap()).create().unwrap();
    let created = futures_lite::future::block_on(admin.create_topics(
        &[NewTopic::new(TOPIC, PARTITIONS, TopicReplication::Fixed(1))],
        &AdminOptions::new().operation_timeout(Some(Duration::from_secs(10))),
    ))
    .unwrap();
    assert!(created[0].is_ok(), "create topic: {:?}", created[0]);
    drop(admin);

    let reports: Reports = Arc::new(Mutex::new(Vec::new()));
    let producer: ThreadedProducer<Acks> = ClientConfig::new()
        .set("bootstrap.servers", broker.bootstrap())
        .set("enable.idempotence", "true")
        .set("acks", "all")
        .set("linger.ms", "2")
        .set("message.timeout.ms", "300000")
        .set("reconnect.backoff.ms", "20")
        .set("reconnect.backoff.max.ms", "200")
        .create_with_context(Acks(reports.clone()))
        .expect("idempotent producer");
    let done = Arc::new(AtomicBool::new(false));
    let sender = {
        let done = done.clone();
        std::thread::spawn(move || {
            for i in 0..RECORDS {
                let key = format!("key-{}", i % 97);
                let payload = format!("record-{i}");
                let mut rec = BaseRecord::with_opaque_to(TOPIC, Box::new(i)).key(&key).payload(&payload);
                loop {
                    match producer.send(rec) {
                        Ok(()) => break,
                        Err((_, back)) => {
                            std::thread::sleep(Duration::from_millis(2));
                            rec = back;
                        }
                    }
                }
                // Paced, so the kills land while records are in flight.
                if i % 25 == 0 {
                    std::thread::sleep(Duration::from_millis(1));
                }
            }
            producer.flush(Duration::from_secs(240)).expect("every record reported");
            done.store(true, Ordering::Release);
            producer
        })
    };

    // SIGKILL the broker while records are in flight, then bring it back.
    let mut kills = 0;
    while kills < KILLS && !done.load(Ordering::Acquire) {
        let acked_before = reports.lock().unwrap().len();
        let wait_from = Instant::now();
        while reports.lock().unwrap().len() < acked_before + 2000
            && wait_from.elapsed() < Duration::from_secs(20)
            && !done.load(Ordering::Acquire)
        {
            std::thread::sleep(Duration::from_millis(20));
        }
        broker.kill();
        kills += 1;
        std::thread::sleep(Duration::from_millis(100));
        broker.restart();
    }
    let producer = sender.join().unwrap();
    drop(producer);
    assert!(kills >= 5, "only {kills} kills happened while producing");

    let reports = reports.lock().unwrap().clone();
    assert_eq!(reports.len(), RECORDS, "one report per record");
    let acked: BTreeMap<usize, (i32, i64)> =
        reports.iter().filter_map(|(i, p, r)| r.as_ref().ok().map(|o| (*i, (*p, *o)))).collect();
    let failed: Vec<&(usize, i32, Result<i64, String>)> = reports.iter().filter(|(_, _, r)| r.is_err()).collect();
    eprintln!("{kills} broker SIGKILLs; {} acknowledged, {} failed", acked.len(), failed.len());
    assert!(
        failed.is_empty(),
        "records failed although the producer retries for 5 minutes: {:?}",
        &failed[..failed.len().min(5)]
    );

    // Read every partition back: each record id once, acked ones where acked.
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", broker.bootstrap())
        .set("group.id", "idempotence-check")
        .set("enable.auto.commit", "false")
        .set("fetch.wait.max.ms", "100")
        .create()
        .unwrap();
    let mut tpl = TopicPartitionList::new();
    let mut ends = BTreeMap::new();
    for p in 0..PARTITIONS {
        tpl.add_partition_offset(TOPIC, p, Offset::Beginning).unwrap();
        ends.insert(p, consumer.fetch_watermarks(TOPIC, p, Duration::from_secs(10)).unwrap().1);
    }
    consumer.assign(&tpl).unwrap();
    let mut seen: BTreeMap<usize, (i32, i64)> = BTreeMap::new();
    let mut read = 0i64;
    let total: i64 = ends.values().sum();
    let deadline = Instant::now() + Duration::from_secs(120);
    while read < total {
        assert!(Instant::now() < deadline, "read {read} of {total} records");
        let Some(m) = consumer.poll(Duration::from_millis(100)) else { continue };
        let m = m.expect("consume");
        read += 1;
        let payload = std::str::from_utf8(m.payload().unwrap()).unwrap();
        let id: usize = payload.strip_prefix("record-").unwrap().parse().unwrap();
        if let Some(first) = seen.insert(id, (m.partition(), m.offset())) {
            panic!("record {id} stored twice: at {first:?} and at ({}, {})", m.partition(), m.offset());
        }
    }
    for (id, at) in &acked {
        assert_eq!(seen.get(id), Some(at), "acknowledged record {id}");
    }
    assert_eq!(seen.len(), RECORDS, "every record is stored once");
}
