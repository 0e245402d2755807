//! Transactions with librdkafka (the `rdkafka` crate) on a 2-shard broker:
//! a transactional producer runs consume–transform–produce, committing the
//! consumer's offsets inside each transaction (`send_offsets_to_transaction`);
//! some transactions are aborted on purpose, then redone.
//!
//! What the coordinator owns is checked here: the group's committed offset
//! moves with each commit and never with an abort (read back by another
//! consumer, OffsetFetch); DescribeTransactions and ListTransactions show the
//! id; a second producer with the same `transactional.id` fences the first,
//! whose next commit fails; and after a broker SIGKILL the state and the
//! committed offsets are back.
//!
//! `read_committed_sees_exactly_the_committed_records` needs the log side
//! (issue 16, part 1: LSO and aborted-transaction index in Fetch); without
//! it a read_committed consumer also sees the aborted records.

mod common;

use std::time::{Duration, Instant};

use common::{broker::Broker, wire::Wire};
use kafka_protocol::messages::{
    ApiKey, DescribeTransactionsRequest, DescribeTransactionsResponse, ListTransactionsRequest,
    ListTransactionsResponse, TransactionalId,
};
use rdkafka::{
    admin::{AdminClient, AdminOptions, NewTopic, TopicReplication},
    client::DefaultClientContext,
    consumer::{BaseConsumer, Consumer},
    error::KafkaError,
    message::Message,
    producer::{BaseProducer, BaseRecord, Producer},
    ClientConfig, Offset, TopicPartitionList,
};

const INPUT: &str = "txn-in";
const OUTPUT: &str = "txn-out";
const GROUP: &str = "txn-processor";
const TXN_ID: &str = "txn-processor-1";
const INPUT_RECORDS: i64 = 40;
const PER_TXN: i64 = 5;
const CONFIG: &str = "group_initial_rebalance_delay_ms = 0\n";
const TIMEOUT: Duration = Duration::from_secs(20);

fn setup(broker: &Broker) {
    let admin: AdminClient<DefaultClientContext> =
        ClientConfig::new().set("bootstrap.servers", broker.bootstrap()).create().expect("admin client");
    let topics =
        [NewTopic::new(INPUT, 1, TopicReplication::Fixed(1)), NewTopic::new(OUTPUT, 2, TopicReplication::Fixed(1))];
    let results =
        futures_lite::future::block_on(admin.create_topics(&topics, &AdminOptions::new())).expect("create topics");
    for r in results {
        r.expect("topic created");
    }
    let producer: BaseProducer =
        ClientConfig::new().set("bootstrap.servers", broker.bootstrap()).create().expect("producer");
    for i in 0..INPUT_RECORDS {
        let value = format!("in-{i}");
        producer.send(BaseRecord::<(), str>::to(INPUT).payload(&value)).expect("queue input");
    }
    producer.flush(TIMEOUT).expect("input flushed");
}

fn transactional_producer(broker: &Broker) -> BaseProducer {
    let producer: BaseProducer = ClientConfig::new()
        .set("bootstrap.servers", broker.bootstrap())
        .set("transactional.id", TXN_ID)
        .set("transaction.timeout.ms", "30000")
        .create()
        .expect("transactional producer");
    producer.init_transactions(TIMEOUT).expect("init_transactions");
    producer
}

fn consumer(broker: &Broker, isolation: &str) -> BaseConsumer {
    ClientConfig::new()
        .set("bootstrap.servers", broker.bootstrap())
        .set("group.id", GROUP)
        .set("enable.auto.commit", "false")
        .set("auto.offset.reset", "earliest")
        .set("isolation.level", isolation)
        .create()
        .expect("consumer")
}

/// The group's committed offset of the input partition, as OffsetFetch
/// answers another consumer (-1001, "invalid", when none).
fn committed(broker: &Broker) -> i64 {
    let c: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", broker.bootstrap())
        .set("group.id", GROUP)
        .create()
        .expect("checker");
    let mut tpl = TopicPartitionList::new();
    tpl.add_partition(INPUT, 0);
    let got = c.committed_offsets(tpl, TIMEOUT).expect("OffsetFetch");
    match got.find_partition(INPUT, 0).expect("asked for it").offset() {
        Offset::Offset(o) => o,
        _ => -1001,
    }
}

/// Reads `n` input records from `from`.
fn read_input(c: &BaseConsumer, from: i64, n: i64) -> Vec<String> {
    let mut tpl = TopicPartitionList::new();
    tpl.add_partition_offset(INPUT, 0, Offset::Offset(from)).unwrap();
    c.assign(&tpl).expect("assign");
    let mut out = Vec::new();
    let deadline = Instant::now() + TIMEOUT;
    while (out.len() as i64) < n {
        assert!(Instant::now() < deadline, "only {} of {n} input records from {from}", out.len());
        if let Some(m) = c.poll(Duration::from_millis(200)) {
            let m = m.expect("input record");
            out.push(String::from_utf8_lossy(m.payload().unwrap_or_default()).into_owned());
        }
    }
    out
}

/// One consume–transform–produce transaction over `n` records from `from`;
/// commits or aborts. Returns what it produced.
fn transaction(p: &BaseProducer, c: &BaseConsumer, from: i64, n: i64, commit: bool) -> Vec<String> {
    let input = read_input(c, from, n);
    p.begin_transaction().expect("begin_transaction");
    let tag = if commit { "out" } else { "aborted" };
    let produced: Vec<String> = input.iter().map(|v| format!("{tag}:{v}")).collect();
    for (i, v) in produced.iter().enumerate() {
        let key = i.to_string();
        p.send(BaseRecord::to(OUTPUT).key(&key).payload(v)).expect("queue output");
    }
    let mut offsets = TopicPartitionList::new();
    offsets.add_partition_offset(INPUT, 0, Offset::Offset(from + n)).unwrap();
    let metadata = c.group_metadata().expect("group metadata");
    p.send_offsets_to_transaction(&offsets, &metadata, TIMEOUT).expect("send_offsets_to_transaction");
    if commit {
        p.commit_transaction(TIMEOUT).expect("commit_transaction");
    } else {
        // abort_transaction does not serve delivery reports itself.
        p.flush(TIMEOUT).expect("outputs delivered before the abort");
        p.abort_transaction(TIMEOUT).expect("abort_transaction");
    }
    produced
}

/// Runs the loop: every third transaction is first aborted, then redone.
/// Returns the records committed.
fn process(broker: &Broker, p: &BaseProducer) -> Vec<String> {
    let c = consumer(broker, "read_committed");
    let mut committed_records = Vec::new();
    let mut at = 0;
    let mut round = 0;
    while at < INPUT_RECORDS {
        if round % 3 == 1 {
            let before = committed(broker);
            transaction(p, &c, at, PER_TXN, false);
            assert_eq!(committed(broker), before, "an aborted transaction's offsets are never committed");
        }
        committed_records.extend(transaction(p, &c, at, PER_TXN, true));
        at += PER_TXN;
        assert_eq!(committed(broker), at, "the committed offset moves with the transaction's commit");
        round += 1;
    }
    committed_records
}

fn describe(broker: &Broker) -> DescribeTransactionsResponse {
    let mut w = Wire::connect(&broker.bootstrap());
    let req = DescribeTransactionsRequest::default()
        .with_transactional_ids(vec![TransactionalId(TXN_ID.into()), TransactionalId("nobody".into())]);
    w.call(ApiKey::DescribeTransactions, 0, &req)
}

fn list(broker: &Broker) -> ListTransactionsResponse {
    let mut w = Wire::connect(&broker.bootstrap());
    w.call(ApiKey::ListTransactions, 0, &ListTransactionsRequest::default())
}

#[test]
fn transactional_consume_transform_produce_commits_offsets_with_the_transaction() {
    let dir = common::tempdir().unwrap();
    let mut broker = Broker::start_with_config(&dir.path().join("data"), 2, CONFIG, &[]);
    setup(&broker);
    let p = transactional_producer(&broker);
    let produced = process(&broker, &p);
    assert_eq!(produced.len() as i64, INPUT_RECORDS);

    let described = describe(&broker);
    let ours = &described.transaction_states[0];
    assert_eq!((ours.error_code, ours.transactional_id.0.as_str()), (0, TXN_ID));
    assert_eq!(ours.transaction_state.as_str(), "CompleteCommit");
    assert!(ours.producer_id.0 >= 0);
    assert_eq!(described.transaction_states[1].error_code, 105, "TRANSACTIONAL_ID_NOT_FOUND");
    let listed = list(&broker);
    assert!(listed.transaction_states.iter().any(|t| t.transactional_id.0.as_str() == TXN_ID));

    // An open transaction shows as Ongoing with its partitions.
    p.begin_transaction().expect("begin");
    p.send(BaseRecord::<str, str>::to(OUTPUT).key("k").payload("open").partition(1)).expect("queue");
    p.flush(TIMEOUT).expect("flush");
    let open = describe(&broker);
    assert_eq!(open.transaction_states[0].transaction_state.as_str(), "Ongoing");
    let topics: Vec<(&str, Vec<i32>)> =
        open.transaction_states[0].topics.iter().map(|t| (t.topic.0.as_str(), t.partitions.clone())).collect();
    assert_eq!(topics, vec![(OUTPUT, vec![1])]);

    // A second producer with the same transactional id fences the first;
    // the first's commit fails, and the open transaction was aborted.
    let zombie_epoch = open.transaction_states[0].producer_epoch;
    let successor = transactional_producer(&broker);
    let failed = p.commit_transaction(TIMEOUT).expect_err("the fenced producer cannot commit");
    eprintln!("fenced producer's commit: {failed}");
    assert!(
        matches!(&failed, KafkaError::Transaction(e) if e.is_fatal()),
        "fencing is fatal to the old producer: {failed:?}"
    );
    let after = describe(&broker).transaction_states[0].clone();
    assert!(after.producer_epoch > zombie_epoch, "the successor holds a newer epoch");
    assert_eq!(committed(&broker), INPUT_RECORDS, "nothing of the fenced transaction was committed");

    // The successor carries on; a broker SIGKILL keeps the state.
    successor.begin_transaction().expect("begin");
    successor.send(BaseRecord::<str, str>::to(OUTPUT).key("k").payload("after-fence")).expect("queue");
    successor.commit_transaction(TIMEOUT).expect("the successor commits");
    // The zombie's record was written (read_uncommitted sees it) but its
    // transaction was aborted by the fence: read_committed never shows it,
    // and reads on past it to the successor's commit.
    let uncommitted = output_values_until(&broker, "read_uncommitted", "after-fence");
    assert!(uncommitted.iter().any(|v| v == "open"), "the zombie's record is in the log: {uncommitted:?}");
    let committed_values = output_values_until(&broker, "read_committed", "after-fence");
    assert!(
        !committed_values.iter().any(|v| v == "open"),
        "the fenced zombie's record is visible: {committed_values:?}"
    );
    drop(successor);
    drop(p);
    broker.kill();
    broker.restart();
    assert_eq!(committed(&broker), INPUT_RECORDS, "committed offsets survive the restart");
    let restarted = describe(&broker).transaction_states[0].clone();
    assert_eq!(restarted.transaction_state.as_str(), "CompleteCommit");
    assert_eq!(restarted.producer_id, after.producer_id);
    let again = transactional_producer(&broker);
    drop(again);
    assert!(describe(&broker).transaction_states[0].producer_epoch > restarted.producer_epoch);

    // The tools: over the protocol, and the records on disk.
    let listed = shardlog(&["txn", "list", "--bootstrap", &broker.bootstrap()]);
    assert!(listed.lines().any(|l| l.starts_with(TXN_ID) && l.ends_with("Empty")), "{listed}");
    let described = shardlog(&["txn", "describe", "--bootstrap", &broker.bootstrap(), "--transactional-id", TXN_ID]);
    assert!(described.lines().any(|l| l.starts_with(TXN_ID)), "{described}");
    let data = dir.path().join("data");
    let data = data.to_str().unwrap();
    let states = shardlog(&["offsets", "dump", "--data-dir", data, "--topic", "__transaction_state"]);
    let ours: Vec<&str> = states.lines().filter(|l| l.starts_with(&format!("{TXN_ID}::"))).collect();
    assert!(ours.iter().any(|l| l.contains("state=PrepareCommit") && l.contains("txn-out-")), "{states}");
    assert!(ours.iter().any(|l| l.contains("state=CompleteAbort")), "the fenced transaction: {states}");
    // __consumer_offsets now holds markers too; the dump reads past them.
    let offsets = shardlog(&["offsets", "dump", "--data-dir", data, "--group", GROUP]);
    let last = format!("[{GROUP},{INPUT},0]::OffsetAndMetadata(offset={INPUT_RECORDS},");
    assert!(offsets.lines().any(|l| l.starts_with(&last)), "{offsets}");
}

/// Every value of both output partitions from the beginning, read at
/// `isolation` until `last` arrives (a later record: everything before it
/// in its partition is settled).
fn output_values_until(broker: &Broker, isolation: &str, last: &str) -> Vec<String> {
    let c: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", broker.bootstrap())
        .set("group.id", format!("txn-checker-{isolation}"))
        .set("enable.auto.commit", "false")
        .set("isolation.level", isolation)
        .create()
        .expect("checking consumer");
    let mut tpl = TopicPartitionList::new();
    for partition in 0..2 {
        tpl.add_partition_offset(OUTPUT, partition, Offset::Beginning).unwrap();
    }
    c.assign(&tpl).expect("assign");
    let (mut got, mut idle_after_last) = (Vec::new(), None::<Instant>);
    let deadline = Instant::now() + TIMEOUT;
    // After `last`, read on briefly: the other partition may hold more.
    while idle_after_last.is_none_or(|t| t.elapsed() < Duration::from_secs(1)) {
        assert!(Instant::now() < deadline, "{last:?} not read at {isolation} within {TIMEOUT:?}: {got:?}");
        if let Some(m) = c.poll(Duration::from_millis(100)) {
            let v = String::from_utf8_lossy(m.expect("output record").payload().unwrap_or_default()).into_owned();
            if v == last {
                idle_after_last = Some(Instant::now());
            }
            got.push(v);
        }
    }
    got
}

/// Runs the shardlog binary; its standard output (it must succeed).
fn shardlog(args: &[&str]) -> String {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_shardlog")).args(args).output().expect("run shardlog");
    assert!(out.status.success(), "shardlog {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Needs the log side (part 1): aborted records filtered for read_committed.
#[test]
fn read_committed_sees_exactly_the_committed_records() {
    let dir = common::tempdir().unwrap();
    let broker = Broker::start_with_config(&dir.path().join("data"), 2, CONFIG, &[]);
    setup(&broker);
    let p = transactional_producer(&broker);
    let mut wanted = process(&broker, &p);
    drop(p);
    let read = |isolation: &str, n: usize| {
        let c = consumer(&broker, isolation);
        let mut tpl = TopicPartitionList::new();
        for partition in 0..2 {
            tpl.add_partition_offset(OUTPUT, partition, Offset::Beginning).unwrap();
        }
        c.assign(&tpl).expect("assign");
        let mut got = Vec::new();
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline && got.len() < n {
            if let Some(Ok(m)) = c.poll(Duration::from_millis(200)) {
                got.push(String::from_utf8_lossy(m.payload().unwrap_or_default()).into_owned());
            }
        }
        got
    };
    let aborted = (0..INPUT_RECORDS / PER_TXN).filter(|round| round % 3 == 1).count() as i64 * PER_TXN;
    let mut everything = read("read_uncommitted", (INPUT_RECORDS + aborted) as usize);
    assert_eq!(everything.len() as i64, INPUT_RECORDS + aborted, "read_uncommitted sees aborted records too");
    let mut committed = read("read_committed", wanted.len() + 1);
    committed.sort();
    wanted.sort();
    assert_eq!(committed, wanted, "read_committed sees exactly the committed records");
    everything.retain(|v| v.starts_with("aborted:"));
    assert_eq!(everything.len() as i64, aborted);
}
