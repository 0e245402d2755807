//! For the tests that run an outside consumer program (kcat, kafkajs)
//! against a one-shard broker with a two-partition topic: set-up, producing
//! through librdkafka, and the check that a consumer started at the end read
//! only what came after it.

use std::{
    collections::BTreeSet,
    time::{Duration, Instant},
};

use super::{broker::Broker, child::Lines, wire::Wire};

/// (partition, offset, value) as printed by the consumer or reported to the
/// producer.
pub type Record = (i32, i64, String);

pub const PARTITIONS: i32 = 2;
pub const CONFIG: &str = "group_initial_rebalance_delay_ms = 0\n";

/// A one-shard broker with `topic` created.
pub fn setup(topic: &str) -> (tempfile::TempDir, Broker) {
    let dir = super::tempdir().unwrap();
    let broker = Broker::start_with_config(&dir.path().join("data"), 1, CONFIG, &[]);
    let mut w = Wire::connect(&broker.bootstrap());
    assert_eq!(super::wire::create_topic(&mut w, topic, PARTITIONS), 0);
    (dir, broker)
}

/// `n` records `{prefix}-{i}`, alternating between the partitions; returns
/// where the broker put them.
pub fn produce(broker: &Broker, topic: &str, prefix: &str, n: usize) -> Vec<Record> {
    let records: Vec<(i32, String)> = (0..n).map(|i| ((i % 2) as i32, format!("{prefix}-{i}"))).collect();
    super::produce::produce(&broker.bootstrap(), topic, &records)
}

pub fn no_encode_errors(broker: &Broker) {
    let log = broker.log.lock().unwrap().join("\n");
    assert!(!log.contains("cannot be encoded"), "broker log:\n{log}");
}

/// Produces two records every 200 ms until `consumer` exits or `timeout`
/// passes (when a consumer has looked up the end is not observable from
/// outside), and returns them.
pub fn produce_while_running(consumer: &mut Lines, broker: &Broker, topic: &str, timeout: Duration) -> Vec<Record> {
    let mut produced = Vec::new();
    let deadline = Instant::now() + timeout;
    let mut round = 0;
    while consumer.exited().is_none() && Instant::now() < deadline {
        produced.extend(produce(broker, topic, &format!("new{round}"), 2));
        round += 1;
        std::thread::sleep(Duration::from_millis(200));
    }
    produced
}

/// A consumer started at the end read `wanted` records, none of `old`, and
/// on each partition a gapless run of what was `produced` after it started.
pub fn assert_read_from_the_end(got: &[Record], wanted: usize, old: &[Record], produced: &[Record]) {
    assert_eq!(got.len(), wanted);
    let old_values: BTreeSet<&String> = old.iter().map(|r| &r.2).collect();
    assert!(got.iter().all(|r| !old_values.contains(&r.2)), "read records from before its start: {got:?}");
    for p in 0..PARTITIONS {
        let mine: Vec<&Record> = got.iter().filter(|r| r.0 == p).collect();
        let Some(first) = mine.first() else { continue };
        let expected: Vec<&Record> = produced.iter().filter(|r| r.0 == p && r.1 >= first.1).take(mine.len()).collect();
        assert_eq!(mine, expected, "partition {p}: a gapless run of what was produced");
    }
}
