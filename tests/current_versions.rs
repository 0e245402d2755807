//! Clients left to pick their own versions talk to shardlog at Kafka 3.9's:
//! librdkafka fetches by topic id (Fetch v13+) and lists offsets at v7+, and what it
//! reads back is what its delivery reports placed. `/metrics` counts requests
//! by API and version, which shows the versions it chose.

mod common;

use std::{
    collections::BTreeMap,
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use common::{broker::Broker, scrape::scrape};
use rdkafka::{
    admin::{AdminClient, AdminOptions, NewTopic, TopicReplication},
    client::DefaultClientContext,
    consumer::{BaseConsumer, Consumer},
    message::Message,
    producer::{BaseProducer, BaseRecord, DeliveryResult, Producer, ProducerContext},
    ClientConfig, ClientContext, Offset, TopicPartitionList,
};

const TOPIC: &str = "by-id";
const PARTITIONS: i32 = 3;
const RECORDS: usize = 2_000;

type Placed = Arc<Mutex<BTreeMap<(i32, i64), usize>>>;

struct Deliveries(Placed, Arc<Mutex<Vec<String>>>);
impl ClientContext for Deliveries {}
impl ProducerContext for Deliveries {
    type DeliveryOpaque = Box<usize>;
    fn delivery(&self, result: &DeliveryResult<'_>, id: Box<usize>) {
        match result {
            Ok(m) => {
                self.0.lock().unwrap().insert((m.partition(), m.offset()), *id);
            }
            Err((e, _)) => self.1.lock().unwrap().push(format!("record {id}: {e}")),
        }
    }
}

fn value(i: usize) -> Vec<u8> {
    format!("by-id-{i}-{}", "z".repeat(i % 211)).into_bytes()
}

/// The highest version of `api` the broker answered, per `/metrics`.
fn highest_version(broker: &Broker, api: &str) -> Option<i16> {
    scrape(broker)
        .iter()
        .filter(|s| s.name == "shardlog_requests_total" && s.value > 0.0)
        .filter(|s| s.labels.get("api").map(String::as_str) == Some(api))
        .filter_map(|s| s.labels.get("version")?.parse().ok())
        .max()
}

#[test]
fn librdkafka_fetches_by_topic_id_and_reads_what_it_produced() {
    let dir = common::tempdir().unwrap();
    let broker = Broker::start(dir.path(), 1);
    let admin: AdminClient<DefaultClientContext> =
        ClientConfig::new().set("bootstrap.servers", broker.bootstrap()).create().unwrap();
    let created = futures_lite::future::block_on(admin.create_topics(
        &[NewTopic::new(TOPIC, PARTITIONS, TopicReplication::Fixed(1))],
        &AdminOptions::new().operation_timeout(Some(Duration::from_secs(10))),
    ))
    .unwrap();
    assert!(created[0].is_ok(), "create topic: {:?}", created[0]);

    let placed: Placed = Arc::default();
    let failures = Arc::new(Mutex::new(Vec::new()));
    let producer: BaseProducer<Deliveries> = ClientConfig::new()
        .set("bootstrap.servers", broker.bootstrap())
        .set("acks", "all")
        .set("linger.ms", "2")
        .create_with_context(Deliveries(placed.clone(), failures.clone()))
        .expect("producer");
    for i in 0..RECORDS {
        let payload = value(i);
        let mut rec = BaseRecord::<(), Vec<u8>, Box<usize>>::with_opaque_to(TOPIC, Box::new(i))
            .payload(&payload)
            .partition((i % PARTITIONS as usize) as i32);
        while let Err((_, back)) = producer.send(rec) {
            producer.poll(Duration::from_millis(10));
            rec = back;
        }
        producer.poll(Duration::ZERO);
    }
    producer.flush(Duration::from_secs(60)).expect("flush");
    assert!(failures.lock().unwrap().is_empty(), "failed deliveries: {:?}", failures.lock().unwrap());
    let placed = placed.lock().unwrap().clone();
    assert_eq!(placed.len(), RECORDS, "every record has its own offset");

    // Earliest and latest through ListOffsets, then everything from the start.
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", broker.bootstrap())
        .set("group.id", "by-id-reader")
        .set("enable.auto.commit", "false")
        .set("fetch.wait.max.ms", "50")
        .create()
        .expect("consumer");
    for p in 0..PARTITIONS {
        let (low, high) = consumer.fetch_watermarks(TOPIC, p, Duration::from_secs(10)).expect("watermarks");
        let ends = placed.keys().filter(|(q, _)| *q == p).count() as i64;
        assert_eq!((low, high), (0, ends), "watermarks of {TOPIC}-{p}");
    }
    let mut tpl = TopicPartitionList::new();
    for p in 0..PARTITIONS {
        tpl.add_partition_offset(TOPIC, p, Offset::Beginning).unwrap();
    }
    consumer.assign(&tpl).unwrap();
    let mut seen = 0;
    let deadline = Instant::now() + Duration::from_secs(60);
    while seen < RECORDS && Instant::now() < deadline {
        let Some(m) = consumer.poll(Duration::from_millis(200)) else { continue };
        let m = m.expect("consume");
        let id = placed.get(&(m.partition(), m.offset())).expect("a record at an acknowledged offset");
        assert_eq!(m.payload().unwrap_or_default(), value(*id), "record at {TOPIC}-{}@{}", m.partition(), m.offset());
        seen += 1;
    }
    assert_eq!(seen, RECORDS, "consumed every acknowledged record");

    let fetch = highest_version(&broker, "Fetch");
    assert!(fetch >= Some(13), "librdkafka fetched by topic id (Fetch v13+); highest Fetch version seen: {fetch:?}");
    let list = highest_version(&broker, "ListOffsets");
    assert!(list >= Some(7), "highest ListOffsets version seen: {list:?}");
    let produce = highest_version(&broker, "Produce");
    eprintln!("librdkafka chose Fetch v{fetch:?}, ListOffsets v{list:?}, Produce v{produce:?}");
}

/// kafka-python infers the broker's release from ApiVersions and stops short
/// of features it thinks the broker lacks: it must read shardlog as Kafka 3.9.
#[test]
fn kafka_python_reads_the_broker_as_kafka_3_9() {
    let dir = common::tempdir().unwrap();
    let broker = Broker::start(dir.path(), 1);
    let script = "import sys\n\
                  from kafka import KafkaConsumer\n\
                  c = KafkaConsumer(bootstrap_servers=sys.argv[1])\n\
                  c.topics()\n\
                  print('.'.join(map(str, c.config['api_version'])))\n";
    let out = std::process::Command::new("python3")
        .args(["-c", script, &broker.bootstrap()])
        .output()
        .expect("python3 with kafka-python (tests/run-all.sh installs it)");
    assert!(out.status.success(), "kafka-python failed: {}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "3.9", "the release kafka-python inferred");
}
