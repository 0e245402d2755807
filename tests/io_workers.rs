//! `serve --io-workers-cpuset`: the kernel's io workers, which run each
//! shard's fdatasyncs, go to the cores named, and durable produce is
//! answered with them there; a list naming a shard's core is refused with
//! a message that says why.

mod common;

use std::process::Command;

use common::{
    broker::Broker,
    cluster::one_record,
    wire::{create_topic, produce, Wire},
};

/// Each `iou-wrk` thread of `pid` with the CPUs it may run on.
fn io_workers(pid: i32) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for task in std::fs::read_dir(format!("/proc/{pid}/task")).unwrap().flatten() {
        let comm = std::fs::read_to_string(task.path().join("comm")).unwrap_or_default();
        if !comm.starts_with("iou-wrk") {
            continue;
        }
        let status = std::fs::read_to_string(task.path().join("status")).unwrap_or_default();
        if let Some(allowed) = status.lines().find_map(|l| l.strip_prefix("Cpus_allowed_list:")) {
            out.push((comm.trim().to_string(), allowed.trim().to_string()));
        }
    }
    out
}

#[test]
fn durable_produce_is_answered_with_the_io_workers_on_another_core() {
    if std::thread::available_parallelism().map_or(1, |n| n.get()) < 2 {
        return; // one core: there is no other core to name
    }
    let dir = common::tempdir().unwrap();
    let broker = Broker::start_with_config(dir.path(), 1, "cpuset = \"0\"\nio_workers_cpuset = \"1\"\n", &[]);
    let mut w = Wire::connect(&broker.bootstrap());
    assert_eq!(create_topic(&mut w, "synced", 4), 0);
    for round in 0..5i64 {
        for p in 0..4 {
            let (code, offset) = produce(&mut w, "synced", p, one_record(&format!("r{round}-p{p}")), -1);
            assert_eq!((code, offset), (0, round), "acks=all to synced-{p}, round {round}");
        }
    }
    let workers = io_workers(broker.pid());
    assert!(!workers.is_empty(), "the syncs ran in kernel io workers");
    for (name, allowed) in &workers {
        assert_eq!(allowed, "1", "{name} may run on {allowed}, not only on core 1");
    }
    let (placed, log) = broker.wait_for_log("on cpus [1]");
    assert!(placed, "the broker says where its io workers run: {log}");
}

#[test]
fn an_io_workers_cpuset_naming_a_shard_core_is_refused() {
    let dir = common::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_shardlog"))
        .args(["serve", "--cores", "1", "--cpuset", "0", "--io-workers-cpuset", "0-1"])
        .args(["--listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0", "--data-dir"])
        .arg(dir.path())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "serve started with its io workers on its shard's core: {stderr}");
    assert!(stderr.contains("--io-workers-cpuset \"0-1\" names cpu 0, which runs a shard"), "{stderr}");
}
