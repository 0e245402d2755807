//! Python admin clients against the real broker: confluent-kafka's
//! AdminClient (librdkafka inside the wheel) for ListOffsets with
//! MAX_TIMESTAMP (-3, v7+), and kafka-python's for CreateTopics with replica
//! assignments and num_partitions = -1 (librdkafka refuses to send that
//! combination). Records are produced by the rdkafka crate's librdkafka with
//! timestamps of the test's choosing.

mod common;

use std::{path::Path, process::Command, time::Duration};

use common::{broker::Broker, wire::Wire};
use rdkafka::{
    producer::{BaseProducer, BaseRecord, Producer},
    ClientConfig,
};

fn admin(args: &[&str]) -> serde_json::Value {
    python("confluent_admin.py", args)
}

fn python(script: &str, args: &[&str]) -> serde_json::Value {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/clients").join(script);
    let out = Command::new("python3").arg(&script).args(args).output().expect("run python3");
    assert!(
        out.status.success(),
        "{} {args:?} failed:\n{}\n{}",
        script.display(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("one JSON object")
}

/// The record with the largest timestamp is in the middle of the log, and
/// not the last one: a plain "latest" answer would be wrong.
#[test]
fn list_offsets_max_timestamp() {
    let dir = common::tempdir().unwrap();
    let broker = Broker::start(&dir.path().join("data"), 1);
    let mut w = Wire::connect(&broker.bootstrap());
    assert_eq!(common::wire::create_topic(&mut w, "max-ts", 1), 0);
    let base = 1_700_000_000_000i64;
    let stamps = [1_000, 4_000, 2_000, 9_000, 3_000, 5_000, 2_500];
    let producer: BaseProducer =
        ClientConfig::new().set("bootstrap.servers", broker.bootstrap()).set("linger.ms", "0").create().unwrap();
    for (i, ts) in stamps.iter().enumerate() {
        let value = format!("r{i}");
        let record = BaseRecord::<str, str>::to("max-ts").partition(0).key(&value).payload(&value).timestamp(base + ts);
        producer.send(record).map_err(|(e, _)| e).unwrap();
        // One batch per record: the maximum must be found inside the log,
        // across batches, not read off one batch header.
        producer.flush(Duration::from_secs(20)).unwrap();
    }
    let answer = admin(&["max-timestamp", &broker.bootstrap(), "max-ts", "0"]);
    assert_eq!(answer["offset"], 3, "{answer}");
    assert_eq!(answer["timestamp"], base + 9_000, "{answer}");
}

#[test]
fn create_topics_takes_the_count_from_replica_assignments() {
    let dir = common::tempdir().unwrap();
    let broker = Broker::start(&dir.path().join("data"), 1);
    let answer = python("kafka_python_create_assigned.py", &[&broker.bootstrap(), "assigned", "5"]);
    assert_eq!(answer["partitions"], 5, "{answer}");
}
