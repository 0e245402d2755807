//! `shardlog plan` end to end: a real (short) `bench sweep` against a test
//! broker and a real (short) `iotune`, a report rendered from them, its
//! tables and plots checked, and the page loaded in headless Chromium,
//! whose DOM must show both plots drawn and the sizing table filled.

mod common;

use std::process::Command;

use common::broker::Broker;

fn shardlog(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_shardlog")).args(args).output().unwrap()
}

fn chromium() -> &'static str {
    ["/usr/bin/chromium", "/usr/bin/chromium-browser"]
        .into_iter()
        .find(|p| std::path::Path::new(p).exists())
        .expect("Debian's chromium (tests/run-all.sh installs it)")
}

#[test]
fn a_report_from_measured_runs_renders_in_a_real_browser() {
    let dir = common::tempdir().unwrap();
    let broker = Broker::start(&dir.path().join("data"), 1);
    let results = dir.path().join("results");
    let out = shardlog(&[
        "bench",
        "sweep",
        "--bootstrap",
        &broker.bootstrap(),
        "--topic",
        "planned",
        "--partitions",
        "4",
        "--rate",
        "3000",
        "--steps",
        "3",
        "--record-size",
        "1024",
        "--acks",
        "all",
        "--duration",
        "1s",
        "--warmup",
        "0s",
        "--output",
        results.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "sweep: {}", String::from_utf8_lossy(&out.stderr));
    let io = dir.path().join("io-properties.toml");
    let out = shardlog(&[
        "iotune",
        "--duration",
        "3s",
        "--file-bytes",
        "67108864",
        "--dir",
        dir.path().join("disk").to_str().unwrap(),
        "--output",
        io.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "iotune: {}", String::from_utf8_lossy(&out.stderr));

    let workload = concat!(env!("CARGO_MANIFEST_DIR"), "/perf/workloads/example.toml");
    let report = dir.path().join("report");
    let out = shardlog(&[
        "plan",
        "--workload",
        workload,
        "--results",
        results.to_str().unwrap(),
        "--io",
        io.to_str().unwrap(),
        "--output",
        report.to_str().unwrap(),
    ]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "plan: {stdout} {}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout.contains("machine(s) of 16 cores; limit:"), "{stdout}");

    let html = std::fs::read_to_string(report.join("index.html")).unwrap();
    for resource in [
        "CPU (shards)",
        "disk write bandwidth",
        "disk capacity",
        "network out",
        "memory (batch cache, partition state)",
    ] {
        assert!(html.contains(&format!("<td>{resource}</td>")), "sizing row {resource}");
    }
    assert!(html.contains("<table id=\"sizing\">"));
    assert_eq!(html.matches("<svg").count(), 2, "two inline plots");
    assert!(html.contains("objective p99 ≤ 5 ms") && html.contains("installed:"), "plot legends");
    assert!(!html.contains("src=\"http") && !html.contains("href=\"http"), "self-contained");
    let md = std::fs::read_to_string(report.join("report.md")).unwrap();
    assert!(md.contains("| CPU (shards) |") && md.contains("![latency against throughput](latency.svg)"));
    assert!(std::fs::read_to_string(report.join("latency.svg")).unwrap().starts_with("<svg"));
    // The measured sweep was found and used: no CPU row marked missing.
    assert!(!html.contains("no bench sweep result"), "the sweep in {results:?} was not picked up");

    // A real browser: the page's own script reports what it drew.
    let url = format!("file://{}", report.join("index.html").display());
    let dom = Command::new(chromium())
        .args(["--headless", "--no-sandbox", "--disable-gpu", "--enable-logging=stderr", "--v=0", "--dump-dom"])
        .arg(&url)
        .output()
        .unwrap();
    let page = String::from_utf8_lossy(&dom.stdout);
    let log = String::from_utf8_lossy(&dom.stderr);
    assert!(dom.status.success(), "chromium: {log}");
    assert!(
        page.contains("data-check=\"rendered svgs=2 sizing-rows=8\""),
        "the page's self-check: {}",
        &page[..page.len().min(400)]
    );
    assert!(!log.contains("Uncaught"), "script errors: {log}");
    let shot = dir.path().join("report.png");
    let status = Command::new(chromium())
        .args(["--headless", "--no-sandbox", "--disable-gpu", "--window-size=1200,2400"])
        .arg(format!("--screenshot={}", shot.display()))
        .arg(&url)
        .output()
        .unwrap();
    assert!(status.status.success(), "{}", String::from_utf8_lossy(&status.stderr));
    let png = std::fs::read(&shot).unwrap();
    assert!(png.starts_with(b"\x89PNG") && png.len() > 20_000, "a real screenshot ({} bytes)", png.len());
}
