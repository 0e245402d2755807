//! Three broker processes in one metadata quorum on 127.0.0.1, and what
//! the cluster tests ask of them.

use std::{
    collections::BTreeMap,
    path::Path,
    time::{Duration, Instant},
};

use kafka_protocol::messages::{
    create_topics_request, ApiKey, CreateTopicsRequest, CreateTopicsResponse, MetadataRequest, MetadataResponse,
    TopicName,
};
use kafka_protocol::protocol::StrBytes;
use rdkafka::{
    consumer::{BaseConsumer, CommitMode, Consumer},
    message::Message,
    ClientConfig,
};

use super::{
    broker::{free_port, Broker},
    wire::Wire,
};

/// Brokers 1, 2 and 3, each with its own data directory `dir/b<id>`.
pub fn start_three(dir: &Path) -> Vec<(i32, Broker)> {
    start_cluster(dir, 3, 3)
}

/// Brokers 1 to `brokers`, of which 1 to `voters` form the quorum (the
/// others join it as brokers only), each with its own `dir/b<id>`.
pub fn start_cluster(dir: &Path, voters: i32, brokers: i32) -> Vec<(i32, Broker)> {
    let settings = "broker_heartbeat_interval_ms = 200\nbroker_session_timeout_ms = 3000\n";
    start_cluster_with(dir, voters, brokers, settings)
}

/// `start_cluster` with `settings` (TOML lines) in place of the short
/// heartbeat and session above.
pub fn start_cluster_with(dir: &Path, voters: i32, brokers: i32, settings: &str) -> Vec<(i32, Broker)> {
    start_cluster_of(dir, voters, brokers, 1, settings)
}

/// `start_cluster_with`, each broker running `cores` shards.
pub fn start_cluster_of(dir: &Path, voters: i32, brokers: i32, cores: usize, settings: &str) -> Vec<(i32, Broker)> {
    start_cluster_each(dir, voters, brokers, cores, |_| settings.to_string())
}

/// `start_cluster_of`, broker `id` with `settings(id)`.
pub fn start_cluster_each(
    dir: &Path,
    voters: i32,
    brokers: i32,
    cores: usize,
    settings: impl Fn(i32) -> String,
) -> Vec<(i32, Broker)> {
    start_cluster_shaped(dir, voters, brokers, |_| cores, settings)
}

/// `start_cluster_each`, broker `id` with `cores(id)` shards.
pub fn start_cluster_shaped(
    dir: &Path,
    voters: i32,
    brokers: i32,
    cores: impl Fn(i32) -> usize,
    settings: impl Fn(i32) -> String,
) -> Vec<(i32, Broker)> {
    let ports: Vec<u16> = (0..voters).map(|_| free_port()).collect();
    let quorum = (1..=voters).zip(&ports).map(|(id, p)| format!("{id}@127.0.0.1:{p}")).collect::<Vec<_>>().join(",");
    (1..=brokers)
        .map(|id| {
            let config = format!("node_id = {id}\ncontroller_quorum = \"{quorum}\"\n{}", settings(id));
            (id, Broker::start_with_config(&dir.join(format!("b{id}")), cores(id), &config, &[]))
        })
        .collect()
}

/// Metadata v12 for `topics` (None: every topic), creating missing ones
/// when `create`.
pub fn metadata(broker: &Broker, topics: Option<&[&str]>, create: bool) -> MetadataResponse {
    metadata_at(&broker.bootstrap(), topics, create)
}

/// `metadata` from the broker listening at `addr`.
pub fn metadata_at(addr: &str, topics: Option<&[&str]>, create: bool) -> MetadataResponse {
    try_metadata_at(addr, topics, create).unwrap_or_else(|e| panic!("Metadata from {addr}: {e}"))
}

/// `metadata_at`, with a refused or broken connection returned: a broker
/// that is starting or was just killed is waited for, not failed on.
pub fn try_metadata_at(addr: &str, topics: Option<&[&str]>, create: bool) -> std::io::Result<MetadataResponse> {
    let mut request = MetadataRequest::default();
    request.topics = topics.map(|ts| {
        ts.iter()
            .map(|t| {
                let mut r = kafka_protocol::messages::metadata_request::MetadataRequestTopic::default();
                r.name = Some(TopicName(StrBytes::from_string(t.to_string())));
                r
            })
            .collect()
    });
    request.allow_auto_topic_creation = create;
    Wire::try_once(addr, ApiKey::Metadata, 12, &request)
}

/// Each partition's leader as `broker` tells it, or the topic's error.
pub fn leaders(broker: &Broker, topic: &str) -> Result<Vec<i32>, i16> {
    let response = metadata(broker, Some(&[topic]), false);
    let t = &response.topics[0];
    if t.error_code != 0 {
        return Err(t.error_code);
    }
    let mut ps: Vec<_> = t.partitions.iter().map(|p| (p.partition_index, p.leader_id.0)).collect();
    ps.sort();
    Ok(ps.into_iter().map(|(_, l)| l).collect())
}

/// Waits until every broker gives `topic` the same leaders (or the same
/// error); returns them.
pub fn agreed_leaders(brokers: &[(i32, Broker)], topic: &str) -> Result<Vec<i32>, i16> {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let seen: Vec<_> = brokers.iter().map(|(_, b)| leaders(b, topic)).collect();
        if seen.iter().all(|s| *s == seen[0]) && seen[0].as_ref().is_ok_and(|l| !l.contains(&-1)) {
            return seen[0].clone();
        }
        if seen.iter().all(|s| *s == seen[0]) && seen[0].is_err() {
            return seen[0].clone();
        }
        assert!(Instant::now() < deadline, "brokers disagree on {topic}: {seen:?}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Waits until every broker lists brokers 1, 2 and 3, and has the
/// quorum's internal topics with every partition led and its three
/// replicas in sync (their partitions are opened before that, so a test's
/// own topic does not queue behind them).
pub fn wait_for_three(brokers: &[(i32, Broker)]) {
    wait_for_three_at(&addresses(brokers));
}

/// `wait_for_three` for the brokers listening at `addrs`.
pub fn wait_for_three_at(addrs: &[String]) {
    wait_for_brokers_at(addrs, &[1, 2, 3]);
    for addr in addrs {
        for topic in ["__consumer_offsets", "__transaction_state"] {
            wait_until_at(addr, topic, "the internal topics led and in sync", |p| p.0 > 0 && p.2.len() == 3);
        }
    }
}

/// Waits until every broker of `brokers` lists exactly `ids`.
pub fn wait_for_brokers(brokers: &[(i32, Broker)], ids: &[i32]) {
    wait_for_brokers_at(&addresses(brokers), ids);
}

/// `wait_for_brokers` for the brokers listening at `addrs`.
pub fn wait_for_brokers_at(addrs: &[String], ids: &[i32]) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let listed: Vec<Result<Vec<i32>, String>> = addrs
            .iter()
            .map(|a| match try_metadata_at(a, Some(&[]), false) {
                Ok(m) => Ok(m.brokers.iter().map(|x| x.node_id.0).collect()),
                Err(e) => Err(format!("{a}: {e}")),
            })
            .collect();
        if listed.iter().all(|l| l.as_deref() == Ok(ids)) {
            return;
        }
        assert!(Instant::now() < deadline, "the brokers never listed {ids:?}: {listed:?}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn addresses(brokers: &[(i32, Broker)]) -> Vec<String> {
    brokers.iter().map(|(_, b)| b.bootstrap()).collect()
}

/// The broker with node id `id`.
pub fn broker(brokers: &[(i32, Broker)], id: i32) -> &Broker {
    &brokers.iter().find(|(i, _)| *i == id).unwrap().1
}

/// A batch of one record.
pub fn one_record(value: &str) -> bytes::Bytes {
    let record =
        shardlog::protocol::record_batch::Record { key: None, value: Some(value.as_bytes()), timestamp_delta: 0 };
    bytes::Bytes::from(shardlog::protocol::record_batch::encode_batch(&[record], 1_700_000_000_000))
}

/// Each partition's (leader, replicas, in-sync replicas, leader epoch) as
/// `b` tells them.
pub fn partitions(b: &Broker, topic: &str) -> Vec<(i32, Vec<i32>, Vec<i32>, i32)> {
    partitions_at(&b.bootstrap(), topic)
}

/// `partitions` from the broker listening at `addr`.
pub fn partitions_at(addr: &str, topic: &str) -> Vec<(i32, Vec<i32>, Vec<i32>, i32)> {
    try_partitions_at(addr, topic).unwrap_or_else(|e| panic!("Metadata of {topic} from {addr}: {e}"))
}

/// One partition as a broker tells it: (leader, replicas, in-sync
/// replicas, leader epoch).
pub type PartitionView = (i32, Vec<i32>, Vec<i32>, i32);

/// `partitions_at`, with a refused or broken connection returned.
pub fn try_partitions_at(addr: &str, topic: &str) -> std::io::Result<Vec<PartitionView>> {
    let response = try_metadata_at(addr, Some(&[topic]), false)?;
    let mut ps: Vec<_> = response.topics[0]
        .partitions
        .iter()
        .map(|p| {
            let ids = |v: &[kafka_protocol::messages::BrokerId]| {
                let mut v: Vec<i32> = v.iter().map(|b| b.0).collect();
                v.sort();
                v
            };
            (p.partition_index, (p.leader_id.0, ids(&p.replica_nodes), ids(&p.isr_nodes), p.leader_epoch))
        })
        .collect();
    ps.sort();
    Ok(ps.into_iter().map(|(_, p)| p).collect())
}

/// Waits until `b` says `check` of every partition of `topic`.
pub fn wait_until(
    b: &Broker,
    topic: &str,
    what: &str,
    check: impl Fn(&(i32, Vec<i32>, Vec<i32>, i32)) -> bool,
) -> Vec<(i32, Vec<i32>, Vec<i32>, i32)> {
    wait_until_at(&b.bootstrap(), topic, what, check)
}

/// `wait_until` asking the broker listening at `addr`.
pub fn wait_until_at(
    addr: &str,
    topic: &str,
    what: &str,
    check: impl Fn(&(i32, Vec<i32>, Vec<i32>, i32)) -> bool,
) -> Vec<(i32, Vec<i32>, Vec<i32>, i32)> {
    let deadline = Instant::now() + Duration::from_secs(40);
    loop {
        let seen = try_partitions_at(addr, topic);
        if let Ok(seen) = &seen {
            if !seen.is_empty() && seen.iter().all(&check) {
                return seen.clone();
            }
        }
        assert!(Instant::now() < deadline, "{what}: never so; {topic} at {addr} is {seen:?}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The batches in a replica's segment files of `topic`-`p`, concatenated
/// (the zero padding after each file's last batch left out). Empty while
/// the directory is not there: a broker that lost its data directory
/// makes it again once it copies the partition (until its registration
/// is applied, the views may still list it in sync); a file removed while
/// it is read (a segment deleted) ends what is returned.
pub fn log_bytes(dir: &Path, id: i32, topic: &str, p: i32) -> Vec<u8> {
    let pdir = dir.join(format!("b{id}/{topic}-{p}"));
    let entries = match std::fs::read_dir(&pdir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Vec::new(),
        Err(e) => panic!("{}: {e}", pdir.display()),
    };
    let mut files: Vec<_> = entries
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "log"))
        .collect();
    files.sort();
    let mut out = Vec::new();
    for f in files {
        let bytes = match std::fs::read(&f) {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => break,
            Err(e) => panic!("{}: {e}", f.display()),
        };
        let mut at = 0;
        while at + 12 <= bytes.len() {
            let len = i32::from_be_bytes(bytes[at + 8..at + 12].try_into().unwrap());
            if len <= 0 || at + 12 + len as usize > bytes.len() {
                break;
            }
            at += 12 + len as usize;
        }
        out.extend_from_slice(&bytes[..at]);
    }
    out
}

/// Waits until the three replicas of every partition hold the same bytes,
/// and at least `min` bytes each.
pub fn wait_identical(dir: &Path, topic: &str, partitions: i32, min: usize) {
    let deadline = Instant::now() + Duration::from_secs(30);
    for p in 0..partitions {
        loop {
            let logs: Vec<Vec<u8>> = (1..=3).map(|id| log_bytes(dir, id, topic, p)).collect();
            if logs.iter().all(|l| *l == logs[0]) && logs[0].len() >= min {
                break;
            }
            let sizes: Vec<usize> = logs.iter().map(Vec::len).collect();
            assert!(
                Instant::now() < deadline,
                "{topic}-{p}: the replicas never agreed: sizes {sizes:?}; first different batch (base offset, leader epoch, length): {:?}",
                first_difference(&logs)
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

/// Each replica's batch (base offset, partition leader epoch, bytes) at
/// the first byte where the replicas' logs differ.
fn first_difference(logs: &[Vec<u8>]) -> Vec<Option<(i64, i32, usize)>> {
    let shortest = logs.iter().map(Vec::len).min().unwrap_or(0);
    let differs = (0..shortest).find(|&i| logs.iter().any(|l| l[i] != logs[0][i])).unwrap_or(shortest);
    logs.iter()
        .map(|l| {
            let mut at = 0;
            while at + 61 <= l.len() {
                let len = 12 + i32::from_be_bytes(l[at + 8..at + 12].try_into().unwrap()) as usize;
                if differs < at + len {
                    let base = i64::from_be_bytes(l[at..at + 8].try_into().unwrap());
                    let epoch = i32::from_be_bytes(l[at + 12..at + 16].try_into().unwrap());
                    return Some((base, epoch, len));
                }
                at += len;
            }
            None
        })
        .collect()
}

/// Sends `sig` (e.g. -STOP) to the broker's process.
pub fn signal(b: &Broker, sig: &str) {
    let status = std::process::Command::new("kill").args([sig, &b.pid().to_string()]).status().unwrap();
    assert!(status.success(), "kill {sig}");
}

/// CreateTopics (v7) with a replication factor and configs.
pub fn create(w: &mut Wire, name: &str, partitions: i32, replicas: i16, configs: &[(&str, &str)]) -> (i16, String) {
    let mut t = create_topics_request::CreatableTopic::default();
    t.name = TopicName(StrBytes::from_string(name.to_string()));
    t.num_partitions = partitions;
    t.replication_factor = replicas;
    for (k, v) in configs {
        let mut c = create_topics_request::CreatableTopicConfig::default();
        c.name = StrBytes::from_string(k.to_string());
        c.value = Some(StrBytes::from_string(v.to_string()));
        t.configs.push(c);
    }
    let mut req = CreateTopicsRequest::default();
    req.topics.push(t);
    req.timeout_ms = 10_000;
    let resp: CreateTopicsResponse = w.call(ApiKey::CreateTopics, 7, &req);
    let message = resp.topics[0].error_message.as_ref().map(|m| m.to_string()).unwrap_or_default();
    (resp.topics[0].error_code, message)
}

/// Consumes `topic` in group `group` from `bootstrap` until `want` records
/// came or 60 s passed; commits what it read. Returns the values by partition.
pub fn consume_in_group(bootstrap: &str, group: &str, topic: &str, want: usize) -> BTreeMap<i32, Vec<String>> {
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("group.id", group)
        .set("enable.auto.commit", "false")
        .set("auto.offset.reset", "earliest")
        .create()
        .expect("consumer");
    consumer.subscribe(&[topic]).expect("subscribe");
    let mut got: BTreeMap<i32, Vec<String>> = BTreeMap::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    while got.values().map(Vec::len).sum::<usize>() < want && Instant::now() < deadline {
        if let Some(Ok(m)) = consumer.poll(Duration::from_millis(200)) {
            let value = String::from_utf8(m.payload().unwrap_or_default().to_vec()).unwrap();
            got.entry(m.partition()).or_default().push(value);
        }
    }
    consumer.commit_consumer_state(CommitMode::Sync).expect("commit");
    got
}

/// Reads `topic` (of `partitions`) from the start with a read_committed
/// librdkafka consumer through `bootstrap`, until `want` records came or
/// 30 s passed, then 2 s more (anything after the committed records would
/// show then too). The values by partition.
pub fn read_committed(bootstrap: &str, topic: &str, partitions: i32, want: usize) -> BTreeMap<i32, Vec<String>> {
    let settings = [("isolation.level", "read_committed")];
    let consumer = super::consume::from_start(bootstrap, "audit", topic, partitions, &settings);
    let mut got: BTreeMap<i32, Vec<String>> = BTreeMap::new();
    let take = |got: &mut BTreeMap<i32, Vec<String>>, wait: Duration| {
        if let Some(Ok(m)) = consumer.poll(wait) {
            got.entry(m.partition()).or_default().push(String::from_utf8_lossy(m.payload().unwrap()).into_owned());
        }
    };
    let deadline = Instant::now() + Duration::from_secs(30);
    while got.values().map(Vec::len).sum::<usize>() < want && Instant::now() < deadline {
        take(&mut got, Duration::from_millis(200));
    }
    let until = Instant::now() + Duration::from_secs(2);
    while Instant::now() < until {
        take(&mut got, Duration::from_millis(100));
    }
    got
}

/// A new partition's first produce at its leader: until the leader's
/// table has the topic the produce is told UNKNOWN_TOPIC_OR_PARTITION (3),
/// and from then until the partition is open there NOT_LEADER_OR_FOLLOWER
/// (6); clients retry both, and so does this, for up to 10 s. The code it
/// ends with.
pub fn first_produce(w: &mut Wire, topic: &str, partition: i32, batch: bytes::Bytes, acks: i16) -> i16 {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let code = super::wire::produce(w, topic, partition, batch.clone(), acks).0;
        if !matches!(code, 3 | 6) || Instant::now() >= deadline {
            return code;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Starts broker `id` beside the brokers `start_cluster` started in `dir`,
/// with broker 1's settings: it joins the cluster as a broker, not a voter.
pub fn add_broker(dir: &Path, id: i32) -> Broker {
    let first = std::fs::read_to_string(dir.join("b1.toml")).expect("broker 1's config");
    let config = first.replacen("node_id = 1\n", &format!("node_id = {id}\n"), 1);
    assert_ne!(config, first, "broker 1's config names no node_id = 1");
    Broker::start_with_config(&dir.join(format!("b{id}")), 1, &config, &[])
}

/// Reads `topic` from its start at `bootstrap`: every acknowledged record
/// once, in order, at the offset it was acknowledged at.
pub fn assert_read_back(bootstrap: &str, topic: &str, partitions: i32, delivered: &[(i32, i64, String)]) {
    let consumer = super::consume::from_start(bootstrap, "check", topic, partitions, &[]);
    let mut read: BTreeMap<i32, Vec<(i64, String)>> = BTreeMap::new();
    let deadline = Instant::now() + Duration::from_secs(40);
    while read.values().map(Vec::len).sum::<usize>() < delivered.len() && Instant::now() < deadline {
        if let Some(Ok(m)) = consumer.poll(Duration::from_millis(200)) {
            let value = String::from_utf8(m.payload().unwrap_or_default().to_vec()).unwrap();
            read.entry(m.partition()).or_default().push((m.offset(), value));
        }
    }
    for p in 0..partitions {
        let mut acked: Vec<(i64, String)> = delivered.iter().filter(|d| d.0 == p).map(|d| (d.1, d.2.clone())).collect();
        acked.sort();
        assert_eq!(read.get(&p).cloned().unwrap_or_default(), acked, "{topic}-{p}: read back against acknowledged");
    }
}
