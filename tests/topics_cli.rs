//! `shardlog topics …` against a broker, with records written by
//! librdkafka: create with partitions and configs, describe (text and
//! JSON: offsets, configs), alter (grow, set, delete), list, delete, and an
//! error that names the topic.

mod common;

use std::{process::Command, time::Duration};

use common::broker::Broker;
use rdkafka::{
    producer::{BaseProducer, BaseRecord, Producer},
    ClientConfig,
};
use serde_json::Value;

fn topics(args: &[&str]) -> (bool, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_shardlog")).arg("topics").args(args).output().expect("run shardlog");
    (out.status.success(), String::from_utf8_lossy(&out.stdout).into(), String::from_utf8_lossy(&out.stderr).into())
}

fn describe(bootstrap: &str, name: &str) -> Value {
    let (ok, out, err) = topics(&["describe", "--bootstrap", bootstrap, name, "--json"]);
    assert!(ok, "describe failed: {err}");
    serde_json::from_str(&out).expect("describe --json prints JSON")
}

#[test]
fn topics_are_created_described_altered_listed_and_deleted() {
    let dir = common::tempdir().unwrap();
    let broker = Broker::start(dir.path(), 2);
    let b = broker.bootstrap();
    let (ok, out, err) = topics(&["create", "--bootstrap", &b, "orders", "-p", "3", "-c", "retention.ms=3600000"]);
    assert!(ok && out.contains("created orders (3 partitions)"), "{out}{err}");

    let producer: BaseProducer = ClientConfig::new().set("bootstrap.servers", &b).create().expect("producer");
    for i in 0..30 {
        let value = format!("order-{i}");
        producer.send(BaseRecord::<(), str>::to("orders").partition(i % 3).payload(&value)).expect("enqueue");
    }
    producer.flush(Duration::from_secs(30)).expect("delivered");

    let d = describe(&b, "orders");
    let partitions = d["partitions"].as_array().unwrap();
    assert_eq!(partitions.len(), 3);
    for p in partitions {
        assert_eq!(p["log_start_offset"], 0);
        assert_eq!(p["high_watermark"], 10, "10 records in each partition: {p}");
    }
    assert_eq!(d["configs"]["retention.ms"]["value"], "3600000");
    assert!(d["configs"].get("segment.bytes").is_none(), "defaults only with --all-configs");

    let (ok, out, err) = topics(&[
        "alter",
        "--bootstrap",
        &b,
        "orders",
        "-p",
        "5",
        "--set",
        "cleanup.policy=compact",
        "--delete",
        "retention.ms",
    ]);
    assert!(ok, "{out}{err}");
    let d = describe(&b, "orders");
    assert_eq!(d["partitions"].as_array().unwrap().len(), 5);
    assert_eq!(d["configs"]["cleanup.policy"]["value"], "compact");
    assert!(d["configs"].get("retention.ms").is_none(), "retention.ms back to its default");

    let (ok, text, _) = topics(&["describe", "--bootstrap", &b, "orders", "--all-configs"]);
    assert!(ok && text.contains("HIGH-WATERMARK") && text.contains("segment.bytes"), "{text}");

    let (ok, out, _) = topics(&["list", "--bootstrap", &b]);
    assert!(ok && out.lines().any(|l| l.starts_with("orders ") && l.contains(" 5")), "{out}");

    let (ok, _, err) = topics(&["create", "--bootstrap", &b, "bad/name"]);
    assert!(!ok && err.contains("bad/name"), "the error names the topic: {err}");
    let (ok, _, err) = topics(&["alter", "--bootstrap", &b, "orders", "-p", "2"]);
    assert!(!ok && err.contains("orders"), "shrinking is refused, naming the topic: {err}");

    let (ok, out, err) = topics(&["delete", "--bootstrap", &b, "orders"]);
    assert!(ok && out.contains("deleted orders"), "{out}{err}");
    let (_, out, _) = topics(&["list", "--bootstrap", &b]);
    assert!(!out.lines().any(|l| l.starts_with("orders ")), "{out}");
}
