//! The open-files limit caps the partitions one broker serves (two
//! descriptors each, plus a reserve). Through the real binary started under
//! `prlimit`: the broker raises its soft limit to the hard one and says how
//! many partitions fit; CreateTopics and CreatePartitions refuse what would
//! not fit with POLICY_VIOLATION and a message naming the limit; a restart
//! under a lower limit refuses to start, with the numbers, instead of
//! half-starting.

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
    wire::{create_topic, topic_name, Wire},
};
use kafka_protocol::messages::*;

const CONFIG: &str = "offsets_topic_num_partitions = 2\n";
const POLICY_VIOLATION: i16 = 44;

fn serve(nofile: &str, data: &Path, config: &Path, port: u16) -> Command {
    let mut cmd = Command::new("prlimit");
    cmd.arg(format!("--nofile={nofile}"))
        .arg(env!("CARGO_BIN_EXE_shardlog"))
        .args(["serve", "--cores", "1", "--metrics-listen", ""])
        .arg("--listen")
        .arg(format!("127.0.0.1:{port}"))
        .arg("--config")
        .arg(config)
        .arg("--data-dir")
        .arg(data);
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

fn create_partitions(w: &mut Wire, name: &str, count: i32) -> (i16, String) {
    let mut t = create_partitions_request::CreatePartitionsTopic::default();
    t.name = topic_name(name);
    t.count = count;
    let mut req = CreatePartitionsRequest::default();
    req.topics.push(t);
    req.timeout_ms = 10_000;
    let resp: CreatePartitionsResponse = w.call(ApiKey::CreatePartitions, 3, &req);
    let r = &resp.results[0];
    (r.error_code, r.error_message.as_ref().map(|m| m.to_string()).unwrap_or_default())
}

#[test]
fn the_open_files_limit_bounds_partitions_with_clear_errors() {
    let dir = common::tempdir().unwrap();
    let (data, config) = (dir.path().join("data"), dir.path().join("broker.toml"));
    std::fs::write(&config, CONFIG).unwrap();
    let port = free_port();

    // Soft 300, hard 420: raised to 420, which leaves (420 - 256) / 2 = 82.
    let (mut child, banner) = start("300:420", &data, &config, port);
    let line = banner.iter().find(|l| l.contains("open-files limit")).expect("a line about the limit");
    assert!(line.contains("open-files limit 420 (raised from 300): room for 82 partitions (2 on disk)"), "{line}");

    let mut w = Wire::connect(&format!("127.0.0.1:{port}"));
    // 2 offsets partitions + 81 = 83 > 82.
    let mut t = create_topics_request::CreatableTopic::default();
    t.name = topic_name("too-many");
    t.num_partitions = 81;
    t.replication_factor = 1;
    let mut req = CreateTopicsRequest::default();
    req.topics.push(t);
    req.timeout_ms = 10_000;
    let resp: CreateTopicsResponse = w.call(ApiKey::CreateTopics, 7, &req);
    assert_eq!(resp.topics[0].error_code, POLICY_VIOLATION);
    let message = resp.topics[0].error_message.as_ref().map(|m| m.to_string()).unwrap_or_default();
    assert!(message.contains("room for 82"), "{message}");
    // 2 + 80 = 82 fits, and every partition opens: a produce to the last works.
    assert_eq!(create_topic(&mut w, "fits", 80), 0);
    let batch = common::free_batch_bytes(&mut common::Rng::new(7), 3);
    let (error, base) = common::wire::produce(&mut w, "fits", 79, batch.into(), 1);
    assert_eq!((error, base), (0, 0), "partition 79 is open");
    // One more partition does not fit.
    let (code, message) = create_partitions(&mut w, "fits", 81);
    assert_eq!(code, POLICY_VIOLATION, "{message}");
    assert!(message.contains("would make 83"), "{message}");
    drop(w);
    Command::new("kill").args(["-TERM", &child.id().to_string()]).status().unwrap();
    assert!(child.wait().unwrap().success());

    // 82 partitions on disk under a limit of 300 (room for 22): refused.
    let out = serve("300:300", &data, &config, port).output().unwrap();
    assert!(!out.status.success(), "it must not start");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("82 partitions need about 420 open files"), "{stderr}");
    assert!(stderr.contains("the limit is 300") && stderr.contains("ulimit -n 420"), "{stderr}");
    assert!(!String::from_utf8_lossy(&out.stdout).contains("listening on"), "no half start");
}
