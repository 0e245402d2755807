//! Consumer groups with librdkafka (the `rdkafka` crate) on a 2-shard
//! broker:
//!
//! - three member processes in one group on a 6-partition topic get two
//!   partitions each; one is SIGKILLed (it stops heartbeating) and its
//!   partitions move to the other two after the session timeout;
//! - commits round-trip through OffsetFetch; the records in
//!   `__consumer_offsets`, read by a Kafka client and decoded with the
//!   test's own reader of Kafka's schemas, are the commits made;
//! - after a broker SIGKILL and restart the committed offsets and the groups
//!   are still there, and a new consumer resumes exactly at the committed
//!   offsets.

mod common;

use std::{
    collections::{BTreeMap, BTreeSet},
    io::Write,
    process::Command,
    time::{Duration, Instant},
};

use common::{
    broker::Broker,
    members::{covers_all, wait_for, Member},
    offsets_schema::{decode_commit_value, decode_key, group_partition, OffsetsKey},
};
use rdkafka::{
    admin::{AdminClient, AdminOptions, NewTopic, TopicReplication},
    client::DefaultClientContext,
    consumer::{BaseConsumer, CommitMode, Consumer},
    message::Message,
    producer::{BaseProducer, BaseRecord, Producer},
    ClientConfig, Offset, TopicPartitionList,
};

const TOPIC: &str = "rd-groups";
const PARTITIONS: i32 = 6;
const PER_PARTITION: i64 = 50;
const MEMBERS_GROUP: &str = "rd-members";
const COMMIT_GROUP: &str = "rd-commits";
const SESSION_TIMEOUT_MS: u64 = 6000;
const OFFSETS_PARTITIONS: i32 = 50;
const CHILD_ENV: &str = "SHARDLOG_GROUP_MEMBER";
const CONFIG: &str = "group_initial_rebalance_delay_ms = 500\n";

#[test]
fn rdkafka_consumer_groups_and_committed_offsets() {
    if let Ok(bootstrap) = std::env::var(CHILD_ENV) {
        return member(&bootstrap);
    }
    let dir = common::tempdir().unwrap();
    let mut broker = Broker::start_with_config(&dir.path().join("data"), 2, CONFIG, &[]);
    create_topic(&broker.bootstrap());
    produce(&broker.bootstrap());

    // Three members, two partitions each.
    let mut members: Vec<Member> = (0..3).map(|_| spawn_member(&broker.bootstrap())).collect();
    wait_for("three members with two partitions each", Duration::from_secs(60), || {
        let sets: Vec<BTreeSet<i32>> = members.iter().map(Member::assignment).collect();
        sets.iter().all(|s| s.len() == 2) && covers_all(&sets, PARTITIONS)
    });

    // One stops heartbeating: its partitions move to the others.
    members[0].kill();
    let killed = Instant::now();
    wait_for("the two survivors to take over all six partitions", Duration::from_secs(40), || {
        let sets: Vec<BTreeSet<i32>> = members[1..].iter().map(Member::assignment).collect();
        sets.iter().all(|s| s.len() == 3) && covers_all(&sets, PARTITIONS)
    });
    let moved = killed.elapsed();
    assert!(
        moved >= Duration::from_millis(SESSION_TIMEOUT_MS / 2),
        "partitions moved after {moved:?}, before the session could have timed out"
    );
    eprintln!("partitions of the killed member moved after {moved:?} (session timeout {SESSION_TIMEOUT_MS} ms)");
    drop(members);

    // Commits round-trip.
    let committed: BTreeMap<i32, (i64, String)> =
        (0..PARTITIONS).map(|p| (p, (3 + 7 * i64::from(p), format!("meta-{p}")))).collect();
    {
        let c = consumer(&broker.bootstrap(), COMMIT_GROUP);
        let mut tpl = TopicPartitionList::new();
        for (p, (offset, meta)) in &committed {
            tpl.add_partition_offset(TOPIC, *p, Offset::Offset(*offset)).unwrap();
            tpl.find_partition(TOPIC, *p).unwrap().set_metadata(meta.clone());
        }
        c.commit(&tpl, CommitMode::Sync).expect("commit");
        assert_eq!(fetch_committed(&c), committed, "committed offsets read back");
    }

    // What is in __consumer_offsets, read like any topic.
    let records = read_offsets_topic(&broker.bootstrap(), group_partition(COMMIT_GROUP, OFFSETS_PARTITIONS));
    let mut seen = BTreeMap::new();
    for (key, value) in &records {
        if let OffsetsKey::Commit { group, topic, partition } = decode_key(key) {
            if group == COMMIT_GROUP && topic == TOPIC {
                let v = decode_commit_value(value.as_deref().expect("not a tombstone"));
                assert!(v.commit_timestamp > 1_700_000_000_000, "commit timestamp {}", v.commit_timestamp);
                seen.insert(partition, (v.offset, v.metadata));
            }
        }
    }
    assert_eq!(seen, committed, "the commits as stored in __consumer_offsets");

    // SIGKILL: committed offsets and groups survive.
    broker.kill();
    broker.restart();
    let c = consumer(&broker.bootstrap(), COMMIT_GROUP);
    assert_eq!(fetch_committed(&c), committed, "committed offsets after SIGKILL and restart");
    let groups = c.fetch_group_list(None, Duration::from_secs(10)).expect("list groups");
    let names: BTreeSet<&str> = groups.groups().iter().map(|g| g.name()).collect();
    assert!(names.contains(MEMBERS_GROUP) && names.contains(COMMIT_GROUP), "groups after restart: {names:?}");

    // A consumer of the group resumes exactly where the commits say.
    c.subscribe(&[TOPIC]).unwrap();
    let mut first: BTreeMap<i32, i64> = BTreeMap::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    while first.len() < PARTITIONS as usize && Instant::now() < deadline {
        if let Some(Ok(m)) = c.poll(Duration::from_millis(100)) {
            first.entry(m.partition()).or_insert(m.offset());
        }
    }
    let want: BTreeMap<i32, i64> = committed.iter().map(|(p, (o, _))| (*p, *o)).collect();
    assert_eq!(first, want, "first offset consumed per partition");
}

fn create_topic(bootstrap: &str) {
    let admin: AdminClient<DefaultClientContext> =
        ClientConfig::new().set("bootstrap.servers", bootstrap).create().unwrap();
    let created = futures_lite::future::block_on(admin.create_topics(
        &[NewTopic::new(TOPIC, PARTITIONS, TopicReplication::Fixed(1))],
        &AdminOptions::new().operation_timeout(Some(Duration::from_secs(10))),
    ))
    .unwrap();
    assert!(created[0].is_ok(), "create topic: {:?}", created[0]);
}

fn produce(bootstrap: &str) {
    let producer: BaseProducer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("enable.idempotence", "false")
        .create()
        .expect("producer");
    for p in 0..PARTITIONS {
        for i in 0..PER_PARTITION {
            let key = format!("p{p}-{i}");
            producer.send(BaseRecord::<str, str>::to(TOPIC).partition(p).key(&key).payload(&key)).unwrap();
        }
    }
    producer.flush(Duration::from_secs(30)).expect("flush");
}

fn consumer(bootstrap: &str, group: &str) -> BaseConsumer {
    ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("group.id", group)
        .set("enable.auto.commit", "false")
        .set("auto.offset.reset", "earliest")
        .set("session.timeout.ms", SESSION_TIMEOUT_MS.to_string())
        .set("heartbeat.interval.ms", "500")
        .set("fetch.wait.max.ms", "100")
        .create()
        .expect("consumer")
}

fn fetch_committed(c: &BaseConsumer) -> BTreeMap<i32, (i64, String)> {
    let mut tpl = TopicPartitionList::new();
    for p in 0..PARTITIONS {
        tpl.add_partition(TOPIC, p);
    }
    let got = c.committed_offsets(tpl, Duration::from_secs(10)).expect("fetch committed offsets");
    got.elements()
        .iter()
        .filter_map(|e| match e.offset() {
            Offset::Offset(o) => Some((e.partition(), (o, e.metadata().to_string()))),
            _ => None,
        })
        .collect()
}

/// Every record of one `__consumer_offsets` partition, read by a plain
/// consumer (internal topics are readable by assignment).
fn read_offsets_topic(bootstrap: &str, partition: i32) -> Vec<(Vec<u8>, Option<Vec<u8>>)> {
    let c: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("group.id", "rd-offsets-reader")
        .set("enable.auto.commit", "false")
        .set("fetch.wait.max.ms", "100")
        .create()
        .unwrap();
    let (_, high) = c.fetch_watermarks("__consumer_offsets", partition, Duration::from_secs(10)).unwrap();
    let mut tpl = TopicPartitionList::new();
    tpl.add_partition_offset("__consumer_offsets", partition, Offset::Beginning).unwrap();
    c.assign(&tpl).unwrap();
    let mut out = Vec::new();
    let mut next = 0;
    let deadline = Instant::now() + Duration::from_secs(30);
    while next < high {
        assert!(Instant::now() < deadline, "reading __consumer_offsets-{partition}: at {next} of {high}");
        if let Some(m) = c.poll(Duration::from_millis(100)) {
            let m = m.expect("consume __consumer_offsets");
            out.push((m.key().unwrap_or_default().to_vec(), m.payload().map(<[u8]>::to_vec)));
            next = m.offset() + 1;
        }
    }
    out
}

fn spawn_member(bootstrap: &str) -> Member {
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args(["rdkafka_consumer_groups_and_committed_offsets", "--exact", "--nocapture", "--test-threads=1"])
        .env(CHILD_ENV, bootstrap);
    Member::spawn(cmd)
}

/// The member process: consumes and reports its assignment when it changes.
fn member(bootstrap: &str) {
    let c = consumer(bootstrap, MEMBERS_GROUP);
    c.subscribe(&[TOPIC]).unwrap();
    let mut last = None;
    loop {
        let _ = c.poll(Duration::from_millis(50));
        let now: Vec<String> = c
            .assignment()
            .map(|tpl| tpl.elements().iter().map(|e| e.partition().to_string()).collect())
            .unwrap_or_default();
        if last.as_ref() != Some(&now) {
            println!("ASSIGNED {}", now.join(","));
            std::io::stdout().flush().unwrap();
            last = Some(now);
        }
    }
}
