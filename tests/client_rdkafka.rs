//! librdkafka (through the `rdkafka` crate) against a 2-shard broker: create a
//! 6-partition topic, produce 100,000 keyed records with acks=all and 100,000
//! with acks=1, read everything back from earliest, check ListOffsets, then
//! restart the broker (SIGTERM, and SIGKILL right after acks=all) and check
//! that the same records sit at the same offsets.

mod common;

use std::{
    collections::BTreeMap,
    time::{Duration, Instant},
};

use common::{
    broker::Broker,
    produce::{produce_all, Outgoing},
};
use rdkafka::{
    admin::{AdminClient, AdminOptions, NewTopic, TopicReplication},
    client::DefaultClientContext,
    consumer::{BaseConsumer, Consumer},
    error::{KafkaError, RDKafkaErrorCode},
    message::Message,
    ClientConfig, Offset, TopicPartitionList,
};

const TOPIC: &str = "rd-orders";
const PARTITIONS: i32 = 6;
const RECORDS: usize = 100_000;
const BASE_TS: i64 = 1_750_000_000_000;

#[derive(Debug, Clone, PartialEq, Eq)]
struct Stored {
    key: Vec<u8>,
    value: Vec<u8>,
    timestamp: i64,
}

/// partition -> offset -> record
type Expected = BTreeMap<i32, BTreeMap<i64, Stored>>;

fn record(i: usize) -> Stored {
    Stored {
        key: format!("key-{i}").into_bytes(),
        value: format!("value-{i}-{}", "x".repeat(i % 97)).into_bytes(),
        timestamp: BASE_TS + i as i64,
    }
}

fn produce(bootstrap: &str, acks: &str, ids: std::ops::Range<usize>, expected: &mut Expected) {
    let settings = [("acks", acks), ("linger.ms", "5"), ("enable.idempotence", "false")];
    let records = ids.map(|i| {
        let r = record(i);
        Outgoing { id: i, key: Some(r.key), value: r.value, partition: None, timestamp: Some(r.timestamp) }
    });
    for d in produce_all(bootstrap, TOPIC, &settings, records) {
        let previous = expected.entry(d.partition).or_default().insert(d.offset, record(d.id));
        assert!(previous.is_none(), "offset {} of partition {} acknowledged twice", d.offset, d.partition);
    }
}

fn consumer(bootstrap: &str) -> BaseConsumer {
    ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("group.id", "rd-verify")
        .set("enable.auto.commit", "false")
        .set("fetch.wait.max.ms", "100")
        .create()
        .expect("consumer")
}

fn verify(bootstrap: &str, expected: &Expected, when: &str) {
    let c = consumer(bootstrap);
    let mut tpl = TopicPartitionList::new();
    for p in 0..PARTITIONS {
        tpl.add_partition_offset(TOPIC, p, Offset::Beginning).unwrap();
    }
    c.assign(&tpl).unwrap();
    let total: usize = expected.values().map(BTreeMap::len).sum();
    let mut got: Expected = BTreeMap::new();
    let mut seen = 0;
    let mut transient = 0;
    let deadline = Instant::now() + Duration::from_secs(120);
    while seen < total && Instant::now() < deadline {
        let Some(m) = c.poll(Duration::from_millis(500)) else { continue };
        let m = match m {
            Ok(m) => m,
            // librdkafka reports connection trouble as an error event and
            // reconnects by itself (CI once saw AllBrokersDown right after a
            // restart); a broker that stays away fails the deadline below.
            Err(KafkaError::MessageConsumption(
                code @ (RDKafkaErrorCode::AllBrokersDown | RDKafkaErrorCode::BrokerTransportFailure),
            )) => {
                eprintln!("{when}: transient {code:?}, polling on");
                transient += 1;
                assert!(transient < 20, "{when}: {transient} transient errors in a row");
                continue;
            }
            Err(e) => panic!("{when}: consume error {e}"),
        };
        transient = 0;
        let stored = Stored {
            key: m.key().unwrap_or_default().to_vec(),
            value: m.payload().unwrap_or_default().to_vec(),
            timestamp: m.timestamp().to_millis().unwrap_or(-1),
        };
        let part = got.entry(m.partition()).or_default();
        if let Some((&last, _)) = part.last_key_value() {
            assert!(m.offset() > last, "{when}: partition {} went back from {last} to {}", m.partition(), m.offset());
        }
        part.insert(m.offset(), stored);
        seen += 1;
    }
    assert_eq!(seen, total, "{when}: consumed {seen} of {total}");
    assert!(&got == expected, "{when}: consumed records differ from what was acknowledged");
    for p in 0..PARTITIONS {
        let (low, high) = c.fetch_watermarks(TOPIC, p, Duration::from_secs(10)).unwrap();
        let part = &expected[&p];
        assert_eq!(low, 0, "{when}: earliest of partition {p}");
        assert_eq!(high, *part.keys().last().unwrap() + 1, "{when}: latest of partition {p}");
    }
    check_offsets_for_times(&c, expected, when);
}

/// For a few timestamps, the broker's answer must be the first record in the
/// partition with a timestamp at or after it.
fn check_offsets_for_times(c: &BaseConsumer, expected: &Expected, when: &str) {
    for probe in [BASE_TS, BASE_TS + 12_345, BASE_TS + 150_000, BASE_TS + 10_000_000] {
        let mut tpl = TopicPartitionList::new();
        for p in 0..PARTITIONS {
            tpl.add_partition_offset(TOPIC, p, Offset::Offset(probe)).unwrap();
        }
        let answer = c.offsets_for_times(tpl, Duration::from_secs(10)).unwrap();
        for p in 0..PARTITIONS {
            let want = expected[&p].iter().find(|(_, r)| r.timestamp >= probe).map(|(o, _)| *o);
            let got = answer.find_partition(TOPIC, p).unwrap().offset();
            let got = match got {
                Offset::Offset(o) => Some(o),
                Offset::End => None,
                other => panic!("{when}: offsets_for_times gave {other:?}"),
            };
            assert_eq!(got, want, "{when}: offset for time {probe} in partition {p}");
        }
    }
}

#[test]
fn rdkafka_produces_and_consumes_across_restarts() {
    let dir = common::tempdir().unwrap();
    let mut broker = Broker::start(dir.path(), 2);
    let admin: AdminClient<DefaultClientContext> =
        ClientConfig::new().set("bootstrap.servers", broker.bootstrap()).create().unwrap();
    let created = futures_lite::future::block_on(admin.create_topics(
        &[NewTopic::new(TOPIC, PARTITIONS, TopicReplication::Fixed(1))],
        &AdminOptions::new().operation_timeout(Some(Duration::from_secs(10))),
    ))
    .unwrap();
    assert!(created[0].is_ok(), "create topic: {:?}", created[0]);
    let mut expected = Expected::new();
    produce(&broker.bootstrap(), "all", 0..RECORDS, &mut expected);
    produce(&broker.bootstrap(), "1", RECORDS..2 * RECORDS, &mut expected);
    assert_eq!(expected.len(), PARTITIONS as usize, "records spread over every partition");
    verify(&broker.bootstrap(), &expected, "before restart");

    broker.stop();
    broker.restart();
    verify(&broker.bootstrap(), &expected, "after SIGTERM restart");

    produce(&broker.bootstrap(), "all", 2 * RECORDS..2 * RECORDS + 5_000, &mut expected);
    broker.kill();
    broker.restart();
    verify(&broker.bootstrap(), &expected, "after SIGKILL restart");
}
