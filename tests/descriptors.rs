//! Segment files hold descriptors only while in use, so a small open-files
//! limit no longer caps partitions. Through the real binary started under
//! `prlimit`: the broker raises its soft limit to the hard one and says how
//! many segment files each shard keeps open; far more partitions than that
//! are produced to and read back exact; idle files close on their own, so
//! the idle broker holds few descriptors. What does cap partitions is the
//! memory budget: CreateTopics and CreatePartitions refuse past it with
//! POLICY_VIOLATION, and a restart under a smaller budget, or under a limit
//! too low for a shard's few files, refuses to start with the numbers
//! instead of half-starting.

mod common;

use std::{
    io::{BufRead, BufReader},
    path::Path,
    process::{Child, Command, Stdio},
    sync::mpsc,
    time::Duration,
};

use common::{
    broker::free_port,
    wire::{create_partitions, create_topic_answer, Wire},
};
use kafka_protocol::messages::*;

const CONFIG: &str = "offsets_topic_num_partitions = 2\ntransaction_state_log_num_partitions = 1\n\
                      segment_files_idle_close_ms = 200\nmemory = \"128MiB\"\n";
/// Far more than the 24 segment files a shard may keep open under 400.
const PARTITIONS: i32 = 200;
const POLICY_VIOLATION: i16 = 44;

fn serve(nofile: &str, data: &Path, config: &Path, port: u16) -> Command {
    serve_with(nofile, data, config, port, &[])
}

fn serve_with(nofile: &str, data: &Path, config: &Path, port: u16, extra: &[&str]) -> Command {
    let mut cmd = Command::new("prlimit");
    cmd.arg(format!("--nofile={nofile}"))
        .arg(env!("CARGO_BIN_EXE_shardlog"))
        .args(["serve", "--cores", "1", "--metrics-listen", ""])
        .arg("--listen")
        .arg(format!("127.0.0.1:{port}"))
        .arg("--config")
        .arg(config)
        .arg("--data-dir")
        .arg(data)
        .args(extra);
    cmd
}

/// Starts the broker and returns it with its stdout lines up to the one
/// that says it listens.
fn start(nofile: &str, data: &Path, config: &Path, port: u16) -> (Child, Vec<String>) {
    let mut child = serve(nofile, data, config, port).stdout(Stdio::piped()).stderr(Stdio::inherit()).spawn().unwrap();
    let (tx, rx) = mpsc::channel();
    let stdout = child.stdout.take().unwrap();
    std::thread::spawn(move || {
        let mut seen = Vec::new();
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            seen.push(line.clone());
            if line.contains("listening on") {
                let _ = tx.send(seen.clone());
            }
        }
    });
    let banner = rx.recv_timeout(Duration::from_secs(20)).expect("the broker started");
    (child, banner)
}

fn open_descriptors(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd")).map(|d| d.count()).unwrap_or(0)
}

/// Waits until the idle closer has run (twice its period, and then some).
fn until_idle_files_closed(pid: u32, at_most: usize) -> usize {
    let mut seen = open_descriptors(pid);
    for _ in 0..50 {
        if seen <= at_most {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
        seen = open_descriptors(pid);
    }
    seen
}

#[test]
fn many_partitions_under_a_small_open_files_limit() {
    let dir = common::tempdir().unwrap();
    let (data, config) = (dir.path().join("data"), dir.path().join("broker.toml"));
    std::fs::write(&config, CONFIG).unwrap();
    let port = free_port();

    // Soft 300, hard 400: raised to 400; (400 - 256) / 2 / 3 = 24 files.
    let (mut child, banner) = start("300:400", &data, &config, port);
    let line = banner.iter().find(|l| l.contains("open-files limit")).expect("a line about the limit");
    assert!(line.contains("open-files limit 400 (raised from 300): up to 24 segment files open per shard"), "{line}");
    let line = banner.iter().find(|l| l.contains("memory budget")).expect("a line about memory");
    // (128 - 32 requests - 64 base - 16 cache) MiB / 16 KiB.
    assert!(line.contains("room for 1024 partitions (3 on disk)"), "{line}");
    let pid = child.id();
    let idle_at_start = until_idle_files_closed(pid, 0);

    let mut w = Wire::connect(&format!("127.0.0.1:{port}"));
    assert_eq!(create_topic_answer(&mut w, "many", PARTITIONS), (0, String::new()));
    let mut rng = common::Rng::new(11);
    let mut sent = Vec::new();
    for p in 0..PARTITIONS {
        let batch = common::free_batch_bytes(&mut rng, 2);
        let (error, base) = common::wire::produce(&mut w, "many", p, batch.clone().into(), 1);
        assert_eq!((error, base), (0, 0), "partition {p}");
        sent.push(batch);
    }
    let busy = open_descriptors(pid);
    // Two descriptors per partition would be 400 and more; the budget keeps
    // at most 24 files (72 descriptors) open beside the rest.
    assert!(busy < idle_at_start + 24 * 3 + 8, "{busy} descriptors open after producing to {PARTITIONS} partitions");
    // Every batch reads back exact, reopening files as it goes.
    for (p, batch) in sent.iter().enumerate() {
        let resp: FetchResponse =
            w.call(ApiKey::Fetch, 12, &common::wire::fetch_request("many", &[(p as i32, 0)], 0, 1));
        let part = &resp.responses[0].partitions[0];
        assert_eq!(part.error_code, 0, "partition {p}");
        let records = part.records.clone().unwrap_or_default();
        assert_eq!(records.len(), batch.len(), "partition {p}: one whole batch");
        assert_eq!(&records[16..], &batch[16..], "partition {p}: the batch read back differs");
    }
    // Left alone, the files close: the broker is back to its idle count.
    let idle = until_idle_files_closed(pid, idle_at_start + 2);
    eprintln!("descriptors: {idle_at_start} idle at start, {busy} after producing to {PARTITIONS} partitions, {idle} idle again");
    assert!(idle <= idle_at_start + 2, "{idle} descriptors once idle, {idle_at_start} at start");

    // The memory budget caps partitions: 2 + 1 (the internal topics) + 200
    // + 822 = 1025 > 1024.
    let (code, message) = create_topic_answer(&mut w, "too-many", 822);
    assert_eq!(code, POLICY_VIOLATION, "{message}");
    assert!(message.contains("memory budget leaves room for 1024"), "{message}");
    let (code, message) = create_partitions(&mut w, "many", PARTITIONS + 822);
    assert_eq!(code, POLICY_VIOLATION, "{message}");
    assert!(message.contains("would make 1025"), "{message}");
    drop(w);
    Command::new("kill").args(["-TERM", &child.id().to_string()]).status().unwrap();
    assert!(child.wait().unwrap().success());

    // A limit that leaves the shard fewer than 8 files: refused, with the numbers.
    let out = serve("300:300", &data, &config, port).output().unwrap();
    assert!(!out.status.success(), "it must not start");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("leaves each of 1 shard(s) room for 7 segment files"), "{stderr}");
    assert!(stderr.contains("ulimit -n 304"), "{stderr}");
    assert!(!String::from_utf8_lossy(&out.stdout).contains("listening on"), "no half start");
    // A budget too small for the 203 partitions on disk: refused too.
    let out = serve_with("400:400", &data, &config, port, &["--memory", "110MiB"]).output().unwrap();
    assert!(!out.status.success(), "it must not start");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("203 partitions (203 per shard, 16.0 KiB of state each) need a memory budget"), "{stderr}");
    assert!(!String::from_utf8_lossy(&out.stdout).contains("listening on"), "no half start");
}
