//! Transactions across broker crashes: a librdkafka transactional producer
//! writes one record to each of four partitions (on both shards) per
//! transaction while the broker is SIGKILLed at random moments and
//! restarted. A kill can land in any phase: partitions being added, records
//! written, EndTxn received, the prepare record logged, markers written to
//! some partitions but not others, or after the transaction completed.
//!
//! Afterwards a read_committed consumer must see every transaction whole
//! or not at all (four records or none), every transaction whose
//! `commit_transaction` returned success, and no record twice.

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
    error::KafkaError,
    message::Message,
    producer::{BaseProducer, BaseRecord, Producer},
    ClientConfig, Offset, TopicPartitionList,
};

const TOPIC: &str = "atomic";
const PARTITIONS: i32 = 4;
const TXN_ID: &str = "crash-writer";
const KILLS: usize = 5;
const TIMEOUT: Duration = Duration::from_secs(10);

fn create_topic(bootstrap: &str) {
    let admin: AdminClient<DefaultClientContext> =
        ClientConfig::new().set("bootstrap.servers", bootstrap).create().expect("admin client");
    let topic = NewTopic::new(TOPIC, PARTITIONS, TopicReplication::Fixed(1));
    let results =
        futures_lite::future::block_on(admin.create_topics(&[topic], &AdminOptions::new())).expect("create topic");
    for r in results {
        r.expect("topic created");
    }
}

/// A transactional producer, retrying `init_transactions` while the broker
/// is down or still loading. A new one fences and aborts whatever its
/// predecessor left open.
fn producer(bootstrap: &str) -> BaseProducer {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let p: BaseProducer = ClientConfig::new()
            .set("bootstrap.servers", bootstrap)
            .set("transactional.id", TXN_ID)
            .set("transaction.timeout.ms", "10000")
            .set("message.timeout.ms", "8000")
            .create()
            .expect("transactional producer");
        match p.init_transactions(TIMEOUT) {
            Ok(()) => return p,
            Err(e) => {
                assert!(Instant::now() < deadline, "init_transactions kept failing: {e}");
                std::thread::sleep(Duration::from_millis(200));
            }
        }
    }
}

/// One transaction `n`: a record "n" on every partition, then commit.
/// `Ok(true)`: committed (acknowledged); `Ok(false)`: aborted or its outcome
/// unknown; `Err`: the producer must be replaced.
fn transaction(p: &BaseProducer, n: u64) -> Result<bool, KafkaError> {
    p.begin_transaction()?;
    let value = n.to_string();
    for partition in 0..PARTITIONS {
        let record = BaseRecord::<(), str>::to(TOPIC).partition(partition).payload(&value);
        if let Err((e, _)) = p.send(record) {
            p.abort_transaction(TIMEOUT)?;
            return Err(e);
        }
    }
    for _ in 0..5 {
        match p.commit_transaction(TIMEOUT) {
            Ok(()) => return Ok(true),
            Err(KafkaError::Transaction(e)) if e.is_retriable() => continue,
            Err(KafkaError::Transaction(e)) if e.txn_requires_abort() => {
                p.abort_transaction(TIMEOUT)?;
                return Ok(false);
            }
            Err(e) => return Err(e),
        }
    }
    Ok(false)
}

/// Runs transactions until `stop`; returns the ones acknowledged.
fn write_until(bootstrap: String, stop: Arc<AtomicBool>, acked: Arc<Mutex<Vec<u64>>>) {
    let mut p = producer(&bootstrap);
    let mut n = 0u64;
    while !stop.load(Ordering::Relaxed) {
        n += 1;
        match transaction(&p, n) {
            Ok(true) => acked.lock().unwrap().push(n),
            Ok(false) => {}
            Err(_) => p = producer(&bootstrap),
        }
    }
    // Closes whatever the last producer may have left open.
    drop(p);
    let _ = producer(&bootstrap);
}

/// Every record of the topic, read_committed: transaction number →
/// partitions it was seen on.
fn read_committed(bootstrap: &str) -> BTreeMap<u64, Vec<i32>> {
    let c: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("group.id", "crash-reader")
        .set("isolation.level", "read_committed")
        .set("enable.partition.eof", "true")
        .create()
        .expect("consumer");
    let mut tpl = TopicPartitionList::new();
    for partition in 0..PARTITIONS {
        tpl.add_partition_offset(TOPIC, partition, Offset::Beginning).unwrap();
    }
    c.assign(&tpl).expect("assign");
    let mut seen: BTreeMap<u64, Vec<i32>> = BTreeMap::new();
    let mut at_end = std::collections::BTreeSet::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    while at_end.len() < PARTITIONS as usize {
        assert!(Instant::now() < deadline, "read_committed did not reach the end of every partition: {at_end:?}");
        match c.poll(Duration::from_millis(200)) {
            Some(Ok(m)) => {
                let n: u64 = std::str::from_utf8(m.payload().unwrap_or_default()).unwrap().parse().unwrap();
                seen.entry(n).or_default().push(m.partition());
            }
            Some(Err(KafkaError::PartitionEOF(partition))) => {
                at_end.insert(partition);
            }
            Some(Err(e)) => panic!("consumer error: {e}"),
            None => {}
        }
    }
    seen
}

#[test]
fn transactions_stay_whole_across_broker_kills() {
    let dir = tempfile::tempdir().unwrap();
    let mut broker = Broker::start(dir.path(), 2);
    let bootstrap = broker.bootstrap();
    create_topic(&bootstrap);
    let stop = Arc::new(AtomicBool::new(false));
    let acked = Arc::new(Mutex::new(Vec::new()));
    let writer = {
        let (bootstrap, stop, acked) = (bootstrap.clone(), stop.clone(), acked.clone());
        std::thread::spawn(move || write_until(bootstrap, stop, acked))
    };
    // Kill times spread over a transaction's phases: a varying 150–650 ms.
    let seed = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().subsec_nanos() as u64;
    println!("kill schedule seed {seed}");
    let mut state = seed | 1;
    for kill in 0..KILLS {
        state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        let wait = Duration::from_millis(150 + (state >> 33) % 500);
        // Let transactions run (and complete some) before each kill.
        let before = acked.lock().unwrap().len();
        let ran_until = Instant::now() + Duration::from_secs(30);
        while acked.lock().unwrap().len() == before && Instant::now() < ran_until {
            std::thread::sleep(Duration::from_millis(20));
        }
        std::thread::sleep(wait);
        println!("kill {} after {wait:?}", kill + 1);
        broker.kill();
        broker.restart();
    }
    std::thread::sleep(Duration::from_secs(1));
    stop.store(true, Ordering::Relaxed);
    writer.join().expect("writer thread");

    let acked = acked.lock().unwrap().clone();
    let seen = read_committed(&bootstrap);
    assert!(acked.len() >= KILLS, "the writer committed between kills: {} acknowledged", acked.len());
    for (n, partitions) in &seen {
        let mut sorted = partitions.clone();
        sorted.sort_unstable();
        assert_eq!(
            sorted,
            (0..PARTITIONS).collect::<Vec<_>>(),
            "transaction {n} is visible in part (or twice) on partitions {partitions:?}"
        );
    }
    let lost: Vec<u64> = acked.iter().copied().filter(|n| !seen.contains_key(n)).collect();
    assert!(lost.is_empty(), "acknowledged transactions missing after the kills: {lost:?}");
    println!("{} transactions acknowledged, {} visible, all whole", acked.len(), seen.len());
}
