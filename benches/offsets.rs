//! Committed offsets: shardlog's `__consumer_offsets` against the storage
//! the source notes say did not scale, ZooKeeper znodes laid out as the old
//! consumers did (`/consumers/<group>/offsets/<topic>/<partition>`), both
//! measured in the same run on the same machine.
//!
//! - **commit throughput**: every key committed `ROUNDS` times. shardlog:
//!   OffsetCommit v8, one group's 100 partitions per request (as a consumer
//!   commits), 16 requests in flight, each answered after its durable
//!   append. ZooKeeper: one `setData` per key (its layout has no batching),
//!   up to 1000 in flight, each answered after ZooKeeper's own synced log.
//! - **fetch latency**: one key at a time, closed loop, random keys:
//!   OffsetFetch v7 for one partition vs `getData` of one znode.
//!
//! With 10,000 and 100,000 distinct keys. The broker (`--cores 1`) and
//! ZooKeeper run on core 0, the client on core 1. Needs Debian's
//! `zookeeper` package (`apt-get install zookeeper`) and Java.
//!
//! `cargo bench --bench offsets [-- --quick]`

mod common;

use std::{
    io::Write,
    net::TcpStream,
    path::Path,
    process::{Command, Stdio},
    time::{Duration, Instant},
};

use hdrhistogram::Histogram;
use kafka_protocol::{
    messages::{
        offset_commit_request::{OffsetCommitRequestPartition, OffsetCommitRequestTopic},
        offset_fetch_request::OffsetFetchRequestTopic,
        *,
    },
    protocol::{Decodable, Encodable, StrBytes},
};
use shardlog::{
    client::{self, read_response, write_request},
    protocol::client::request_frame,
};
use zookeeper_client as zk;

const BROKER: &str = "127.0.0.1:29192";
const ZK_PORT: u16 = 29181;
const TOPIC: &str = "bench-offsets";
const PARTITIONS: i32 = 100;
const ROUNDS: i64 = 3;
const IN_FLIGHT: usize = 16;
const ZK_IN_FLIGHT: usize = 1000;
const FETCH_SAMPLES: usize = 20_000;

fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let key_counts: &[usize] = if quick { &[10_000] } else { &[10_000, 100_000] };
    core_affinity::set_for_current(core_affinity::CoreId { id: 1 });
    println!("# committed offsets: shardlog vs ZooKeeper znodes\n{}", common::machine_and_commit());
    println!(
        "params: {ROUNDS} commits per key; shardlog {PARTITIONS} partitions per OffsetCommit, {IN_FLIGHT} in flight; \
         ZooKeeper setData, {ZK_IN_FLIGHT} in flight; {FETCH_SAMPLES} single-key fetches; broker and ZooKeeper on core 0, \
         client on core 1; medians of 3 repetitions (1 with --quick)"
    );
    let base = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/bench-data/offsets");
    let reps = if quick { 1 } else { 3 };
    let mut rows = Vec::new();
    for &keys in key_counts {
        let mut runs: Vec<[f64; 6]> = Vec::new();
        for rep in 0..reps {
            let _ = std::fs::remove_dir_all(&base);
            std::fs::create_dir_all(&base).unwrap();
            let broker = common::start_broker(BROKER, &base.join("shardlog"));
            let (commits, fetch) = bench_shardlog(keys);
            drop(broker);
            let zookeeper = ZooKeeper::start(&base.join("zookeeper"));
            let (zk_commits, zk_fetch) = futures_lite::future::block_on(bench_zookeeper(keys));
            drop(zookeeper);
            let q = |h: &Histogram<u64>, q: f64| h.value_at_quantile(q) as f64;
            runs.push([commits, zk_commits, q(&fetch, 0.5), q(&fetch, 0.99), q(&zk_fetch, 0.5), q(&zk_fetch, 0.99)]);
            eprintln!("{keys} keys, repetition {} of {reps} done", rep + 1);
        }
        let median = |i: usize| common::median(runs.iter().map(|r| r[i]).collect());
        rows.push((keys, [median(0), median(1), median(2), median(3), median(4), median(5)]));
    }
    println!(
        "| keys | shardlog commits/s | ZooKeeper commits/s | ratio | shardlog fetch p50 / p99 µs | ZooKeeper fetch p50 / p99 µs |"
    );
    println!("|---:|---:|---:|---:|---:|---:|");
    for (keys, [c, zc, f50, f99, z50, z99]) in rows {
        println!("| {keys} | {c:.0} | {zc:.0} | {:.1} | {f50:.0} / {f99:.0} | {z50:.0} / {z99:.0} |", c / zc);
    }
    let _ = std::fs::remove_dir_all(&base);
}

fn group(g: usize) -> String {
    format!("bench-group-{g}")
}

/// Commits per second, and the fetch latency histogram (µs).
fn bench_shardlog(keys: usize) -> (f64, Histogram<u64>) {
    let mut c = Conn::connect(BROKER);
    let mut t = create_topics_request::CreatableTopic::default();
    t.name = TopicName(StrBytes::from_static_str(TOPIC));
    t.num_partitions = PARTITIONS;
    t.replication_factor = 1;
    let mut req = CreateTopicsRequest::default();
    req.topics.push(t);
    let resp: CreateTopicsResponse = c.call(ApiKey::CreateTopics, 7, &req);
    assert_eq!(resp.topics[0].error_code, 0);
    let groups = keys / PARTITIONS as usize;
    let requests: Vec<Vec<u8>> = (0..ROUNDS as usize * groups)
        .map(|i| {
            let (round, g) = (i / groups, i % groups);
            let mut t = OffsetCommitRequestTopic::default();
            t.name = TopicName(StrBytes::from_static_str(TOPIC));
            for p in 0..PARTITIONS {
                let mut pc = OffsetCommitRequestPartition::default();
                pc.partition_index = p;
                pc.committed_offset = round as i64 * 1_000_000 + i64::from(p);
                pc.committed_leader_epoch = -1;
                pc.committed_metadata = Some(StrBytes::from_static_str(""));
                t.partitions.push(pc);
            }
            let mut req = OffsetCommitRequest::default();
            req.group_id = GroupId(StrBytes::from_string(group(g)));
            req.generation_id_or_member_epoch = -1;
            req.topics.push(t);
            frame(ApiKey::OffsetCommit, 8, i as i32, &req)
        })
        .collect();
    let start = Instant::now();
    let (mut sent, mut done) = (0, 0);
    while done < requests.len() {
        while sent < requests.len() && sent - done < IN_FLIGHT {
            c.stream.write_all(&requests[sent]).unwrap();
            sent += 1;
        }
        let resp: OffsetCommitResponse = c.receive(ApiKey::OffsetCommit, 8);
        assert!(resp.topics[0].partitions.iter().all(|p| p.error_code == 0), "commit failed");
        done += 1;
    }
    let commits = (ROUNDS as usize * keys) as f64 / start.elapsed().as_secs_f64();
    let mut hist = Histogram::<u64>::new(3).unwrap();
    let mut rng = common::SplitMix(7);
    for _ in 0..FETCH_SAMPLES {
        let (g, p) = (rng.below(groups as u64) as usize, rng.below(PARTITIONS as u64) as i32);
        let mut req = OffsetFetchRequest::default();
        req.group_id = GroupId(StrBytes::from_string(group(g)));
        let mut t = OffsetFetchRequestTopic::default();
        t.name = TopicName(StrBytes::from_static_str(TOPIC));
        t.partition_indexes = vec![p];
        req.topics = Some(vec![t]);
        let began = Instant::now();
        let resp: OffsetFetchResponse = c.call(ApiKey::OffsetFetch, 7, &req);
        hist.record(began.elapsed().as_micros() as u64).unwrap();
        let want = (ROUNDS - 1) * 1_000_000 + i64::from(p);
        assert_eq!(resp.topics[0].partitions[0].committed_offset, want, "fetched offset");
    }
    (commits, hist)
}

async fn bench_zookeeper(keys: usize) -> (f64, Histogram<u64>) {
    let client = connect_zookeeper().await;
    let groups = keys / PARTITIONS as usize;
    let options = zk::CreateMode::Persistent.with_acls(zk::Acls::anyone_all());
    // The layout, created before timing (parents first).
    create(&client, "/consumers", &options).await;
    for g in 0..groups {
        for suffix in ["", "/offsets", &format!("/offsets/{TOPIC}")] {
            create(&client, &format!("/consumers/{}{suffix}", group(g)), &options).await;
        }
    }
    let paths: Vec<String> =
        (0..keys).map(|k| format!("/consumers/{}/offsets/{TOPIC}/{}", group(k / 100), k % 100)).collect();
    for chunk in paths.chunks(ZK_IN_FLIGHT) {
        let creates: Vec<_> = chunk.iter().map(|p| client.create(p, b"0", &options)).collect();
        for r in futures::future::join_all(creates).await {
            r.expect("create znode");
        }
    }
    let start = Instant::now();
    for round in 0..ROUNDS {
        let value = (round * 1_000_000).to_string();
        for chunk in paths.chunks(ZK_IN_FLIGHT) {
            let writes: Vec<_> = chunk.iter().map(|p| client.set_data(p, value.as_bytes(), None)).collect();
            for r in futures::future::join_all(writes).await {
                r.expect("setData");
            }
        }
    }
    let commits = (ROUNDS as usize * keys) as f64 / start.elapsed().as_secs_f64();
    let mut hist = Histogram::<u64>::new(3).unwrap();
    let mut rng = common::SplitMix(7);
    for _ in 0..FETCH_SAMPLES {
        let path = &paths[rng.below(keys as u64) as usize];
        let began = Instant::now();
        let (data, _) = client.get_data(path).await.expect("getData");
        hist.record(began.elapsed().as_micros() as u64).unwrap();
        assert_eq!(data, ((ROUNDS - 1) * 1_000_000).to_string().into_bytes());
    }
    (commits, hist)
}

async fn create(client: &zk::Client, path: &str, options: &zk::CreateOptions<'_>) {
    match client.create(path, b"", options).await {
        Ok(_) | Err(zk::Error::NodeExists) => {}
        Err(e) => panic!("create {path}: {e}"),
    }
}

async fn connect_zookeeper() -> zk::Client {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        match zk::Client::connect(&format!("127.0.0.1:{ZK_PORT}")).await {
            Ok(c) => return c,
            Err(e) if Instant::now() > deadline => panic!("ZooKeeper did not come up: {e}"),
            Err(_) => std::thread::sleep(Duration::from_millis(200)),
        }
    }
}

/// ZooKeeper, started like the broker (`common::Process` kills it on drop).
struct ZooKeeper;

impl ZooKeeper {
    /// ZooKeeper standalone from Debian's package, pinned to core 0, with
    /// its data (and synced transaction log) under `dir`.
    fn start(dir: &Path) -> common::Process {
        std::fs::create_dir_all(dir).unwrap();
        // Debian's jar names its dependencies in its manifest.
        let jar = "/usr/share/java/zookeeper.jar";
        assert!(
            Path::new(jar).exists(),
            "ZooKeeper not installed: apt-get install -y zookeeper (Debian's package) first"
        );
        let classpath = format!("/etc/zookeeper/conf:{jar}");
        let child = Command::new("taskset")
            .args(["-c", "0", "java", "-Xmx1g", "-Dzookeeper.admin.enableServer=false", "-cp", &classpath])
            .args(["org.apache.zookeeper.server.ZooKeeperServerMain", &ZK_PORT.to_string()])
            .arg(dir)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start ZooKeeper (java)");
        common::Process(child)
    }
}

/// A blocking connection speaking the Kafka protocol. Commits are framed
/// before the clock starts and written as they are, so answers are not
/// matched to correlation ids here.
struct Conn {
    stream: TcpStream,
    next: i32,
}

impl Conn {
    fn connect(addr: &str) -> Self {
        Conn { stream: client::connect(addr).unwrap_or_else(|e| panic!("{e}")), next: 1_000_000 }
    }

    fn call<Req: Encodable, Resp: Decodable>(&mut self, key: ApiKey, version: i16, req: &Req) -> Resp {
        self.next += 1;
        write_request(&mut self.stream, key, version, self.next, Some("bench"), req).unwrap_or_else(|e| panic!("{e}"));
        self.receive(key, version)
    }

    fn receive<Resp: Decodable>(&mut self, key: ApiKey, version: i16) -> Resp {
        read_response(&mut self.stream, key, version).unwrap_or_else(|e| panic!("{e}")).body
    }
}

fn frame<Req: Encodable>(key: ApiKey, version: i16, correlation: i32, req: &Req) -> Vec<u8> {
    request_frame(key, version, correlation, Some("bench"), req).unwrap_or_else(|e| panic!("{e}")).to_vec()
}
