//! kafka-python against a 2-shard broker: the same round trip as the
//! librdkafka test, driven through tests/clients/kafka_python_roundtrip.py.

mod common;

use std::{path::Path, process::Command};

use common::broker::Broker;

const TOPIC: &str = "py-orders";
const RECORDS: usize = 100_000;

fn python(args: &[&str]) {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/clients/kafka_python_roundtrip.py");
    let out = Command::new("python3").arg(script).args(args).output().expect("run python3");
    assert!(
        out.status.success(),
        "kafka-python {args:?} failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn kafka_python_produces_and_consumes_across_restarts() {
    let dir = common::tempdir().unwrap();
    let manifest = dir.path().join("manifest.jsonl");
    let manifest = manifest.to_str().unwrap();
    let data = dir.path().join("data");
    let mut broker = Broker::start(&data, 2);
    let b = broker.bootstrap();
    python(&["create", &b, TOPIC, "6"]);
    python(&["produce", &b, TOPIC, "all", "0", &RECORDS.to_string(), manifest]);
    python(&["produce", &b, TOPIC, "1", &RECORDS.to_string(), &RECORDS.to_string(), manifest]);
    python(&["verify", &b, TOPIC, manifest]);

    broker.stop();
    broker.restart();
    python(&["verify", &broker.bootstrap(), TOPIC, manifest]);

    python(&["produce", &broker.bootstrap(), TOPIC, "all", &(2 * RECORDS).to_string(), "3000", manifest]);
    broker.kill();
    broker.restart();
    python(&["verify", &broker.bootstrap(), TOPIC, manifest]);
}
