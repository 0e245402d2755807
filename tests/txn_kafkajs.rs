//! Transactions with a second client: kafkajs 2.2.4 (`tests/kafkajs/txn.js`),
//! a transactional producer (`transactionalId`, `idempotent: true`,
//! `maxInFlightRequests: 1`) on a 2-shard broker, commits four transactions
//! and aborts two; one committed and one aborted transaction also carry
//! `sendOffsets` for a consumer group.
//!
//! Read back by librdkafka and by kafkajs itself: read_committed sees exactly
//! the committed records, read_uncommitted all of them; the group's offset
//! is the committed transaction's, not the aborted one's; and the markers
//! take offsets (each transaction wrote one to each output partition).

mod common;

use std::{
    collections::BTreeSet,
    path::PathBuf,
    process::Command,
    time::{Duration, Instant},
};

use common::{broker::Broker, child::Lines};
use rdkafka::{
    admin::{AdminClient, AdminOptions, NewTopic, TopicReplication},
    client::DefaultClientContext,
    consumer::{BaseConsumer, Consumer},
    message::Message,
    ClientConfig, Offset, TopicPartitionList,
};

const OUTPUT: &str = "js-txn-out";
const INPUT: &str = "js-txn-in";
const GROUP: &str = "js-txn-group";
const TXN_ID: &str = "js-txn-producer";
const CONFIG: &str = "group_initial_rebalance_delay_ms = 0\n";
const TIMEOUT: Duration = Duration::from_secs(20);
/// Six transactions (txn.js), each touching both partitions.
const TRANSACTIONS: i64 = 6;

fn kafkajs_dir() -> PathBuf {
    let dir = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/kafkajs"));
    assert!(dir.join("node_modules/kafkajs").is_dir(), "kafkajs is not installed: run tests/run-all.sh");
    dir
}

fn create_topics(broker: &Broker) {
    let admin: AdminClient<DefaultClientContext> =
        ClientConfig::new().set("bootstrap.servers", broker.bootstrap()).create().expect("admin client");
    let topics =
        [NewTopic::new(OUTPUT, 2, TopicReplication::Fixed(1)), NewTopic::new(INPUT, 1, TopicReplication::Fixed(1))];
    let results =
        futures_lite::future::block_on(admin.create_topics(&topics, &AdminOptions::new())).expect("create topics");
    for r in results {
        r.expect("topic created");
    }
}

/// Runs txn.js; the (outcome, partition, value) it reports, per record.
fn run_transactions(broker: &Broker) -> Vec<(String, i32, String)> {
    let out = Command::new("node")
        .current_dir(kafkajs_dir())
        .args(["txn.js", &broker.bootstrap(), OUTPUT, INPUT, GROUP, TXN_ID])
        .output()
        .expect("run node");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success() && stdout.lines().any(|l| l == "done"),
        "kafkajs transactions failed:\n{stdout}\n{}\nbroker log: {}",
        String::from_utf8_lossy(&out.stderr),
        broker.log.lock().unwrap().join("\n")
    );
    stdout
        .lines()
        .filter(|l| *l != "done")
        .map(|l| {
            let mut parts = l.splitn(3, ' ');
            let outcome = parts.next().unwrap().to_string();
            let partition = parts.next().unwrap().parse().unwrap();
            (outcome, partition, parts.next().unwrap().to_string())
        })
        .collect()
}

/// (partition, value) of what librdkafka reads from the beginning with
/// `isolation`; stops at `n` records (or after 10 s with fewer), then polls
/// one more second for a record too many.
fn read_rdkafka(broker: &Broker, isolation: &str, n: usize) -> BTreeSet<(i32, String)> {
    let c: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", broker.bootstrap())
        .set("group.id", "js-txn-checker")
        .set("enable.auto.commit", "false")
        .set("isolation.level", isolation)
        .create()
        .expect("consumer");
    let mut tpl = TopicPartitionList::new();
    for partition in 0..2 {
        tpl.add_partition_offset(OUTPUT, partition, Offset::Beginning).unwrap();
    }
    c.assign(&tpl).expect("assign");
    let mut got = BTreeSet::new();
    let mut deadline = Instant::now() + Duration::from_secs(10);
    let mut extra = false;
    while Instant::now() < deadline {
        if let Some(Ok(m)) = c.poll(Duration::from_millis(100)) {
            got.insert((m.partition(), String::from_utf8_lossy(m.payload().unwrap_or_default()).into_owned()));
        }
        if got.len() >= n && !extra {
            extra = true;
            deadline = Instant::now() + Duration::from_secs(1);
        }
    }
    got
}

/// The same through kafkajs (read.js, a group member with
/// `readUncommitted` false or true).
fn read_kafkajs(broker: &Broker, isolation: &str, n: usize) -> BTreeSet<(i32, String)> {
    let mut cmd = Command::new("node");
    cmd.current_dir(kafkajs_dir()).args([
        "read.js",
        &broker.bootstrap(),
        OUTPUT,
        &format!("js-reader-{isolation}"),
        isolation,
        &n.to_string(),
        "60000",
    ]);
    let (status, lines, stderr) = Lines::spawn(cmd).finish(Duration::from_secs(70));
    assert!(status.is_some_and(|s| s.success()), "kafkajs reader ({isolation}): {status:?}\n{lines:?}\n{stderr}");
    lines
        .iter()
        .filter_map(|l| l.strip_prefix("record "))
        .map(|l| {
            let mut parts = l.splitn(3, ' ');
            let partition = parts.next().unwrap().parse().unwrap();
            let _offset = parts.next();
            (partition, parts.next().unwrap().to_string())
        })
        .collect()
}

fn consumer_for(broker: &Broker, group: &str) -> BaseConsumer {
    ClientConfig::new().set("bootstrap.servers", broker.bootstrap()).set("group.id", group).create().expect("consumer")
}

#[test]
fn kafkajs_transactions_commit_and_abort_with_offsets() {
    let dir = common::tempdir().unwrap();
    let broker = Broker::start_with_config(&dir.path().join("data"), 2, CONFIG, &[]);
    create_topics(&broker);
    let sent = run_transactions(&broker);
    let all: BTreeSet<(i32, String)> = sent.iter().map(|(_, p, v)| (*p, v.clone())).collect();
    let committed: BTreeSet<(i32, String)> =
        sent.iter().filter(|(o, _, _)| o == "committed").map(|(_, p, v)| (*p, v.clone())).collect();
    assert_eq!((all.len(), committed.len()), (24, 16), "txn.js reported {sent:?}");

    // What the broker returns, not what kafkajs said: values and outcomes
    // must agree (the aborted ones are named so by txn.js).
    assert_eq!(read_rdkafka(&broker, "read_committed", committed.len()), committed, "librdkafka read_committed");
    assert_eq!(read_rdkafka(&broker, "read_uncommitted", all.len()), all, "librdkafka read_uncommitted");
    assert_eq!(read_kafkajs(&broker, "committed", committed.len()), committed, "kafkajs read_committed");
    assert_eq!(read_kafkajs(&broker, "uncommitted", all.len()), all, "kafkajs read_uncommitted");

    // sendOffsets: 5 in a committed transaction, then 9 in an aborted one.
    let mut tpl = TopicPartitionList::new();
    tpl.add_partition(INPUT, 0);
    let got = consumer_for(&broker, GROUP).committed_offsets(tpl, TIMEOUT).expect("OffsetFetch");
    assert_eq!(got.find_partition(INPUT, 0).unwrap().offset(), Offset::Offset(5), "the committed sendOffsets");

    // Markers take offsets: each partition holds its 12 records and one
    // marker per transaction.
    let c = consumer_for(&broker, "js-txn-watermarks");
    for partition in 0..2 {
        let (low, high) = c.fetch_watermarks(OUTPUT, partition, TIMEOUT).expect("watermarks");
        assert_eq!((low, high), (0, 12 + TRANSACTIONS), "partition {partition}");
    }
}
