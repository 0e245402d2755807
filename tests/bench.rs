//! `shardlog bench` against a live broker, through the real binary: a
//! fixed-rate run reaches its rate and validates delivery, and a broker
//! that stalls once is caught by the corrected latency while the service
//! time hides it — the coordinated-omission correction at work.

mod common;

use std::{net::TcpListener, path::Path, process::Command, time::Duration};

use common::{broker::Broker, proxy::StallingProxy};
use serde_json::Value;

/// Each test here runs a broker and a load generator at a fixed rate on a
/// 2-core machine: run concurrently, they take each other's cores, and the
/// stall test's service times then include that queueing. One at a time.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Also starts each test on a quiet disk: in CI these tests run right after
/// the build, while gigabytes of fresh build output are still being written
/// back, and the broker's direct writes then queue behind that writeback
/// (the stall test saw service-time p90s of 25-34 ms there, against about
/// 1 ms on a quiet disk).
fn one_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    let guard = ONE_AT_A_TIME.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    let synced = Command::new("sync").status().expect("run sync(1)");
    assert!(synced.success(), "sync(1) failed: {synced}");
    guard
}

fn bench(args: &[&str], out: &Path) -> (bool, Value, String) {
    let output = Command::new(env!("CARGO_BIN_EXE_shardlog"))
        .arg("bench")
        .args(args)
        .arg("--output")
        .arg(out)
        .args(["--name", "run"])
        .output()
        .expect("run shardlog bench");
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let text = std::fs::read_to_string(out.join("run.json"))
        .unwrap_or_else(|e| panic!("no result file ({e}); stdout: {stdout}\nstderr: {stderr}"));
    let json: Value = serde_json::from_str(&text).expect("the result is JSON");
    (output.status.success(), json, format!("{stdout}\n{stderr}"))
}

fn f(v: &Value, path: &[&str]) -> f64 {
    let mut v = v;
    for k in path {
        v = &v[k];
    }
    v.as_f64().unwrap_or_else(|| panic!("{path:?} is not a number in {v}"))
}

#[test]
fn a_fixed_rate_e2e_run_reaches_its_rate_and_validates_every_record() {
    let _serial = one_at_a_time();
    let dir = common::tempdir().unwrap();
    let broker = Broker::start(&dir.path().join("data"), 1);
    let out = dir.path().join("out");
    let rate = 4000.0;
    let (ok, json, log) = bench(
        &[
            "e2e",
            "--bootstrap",
            &broker.bootstrap(),
            "--topic",
            "fixed-rate",
            "--partitions",
            "8",
            "--rate",
            "4000",
            "--record-size",
            "100",
            "--duration",
            "4s",
            "--warmup",
            "1s",
        ],
        &out,
    );
    assert!(ok, "bench failed: {log}");
    assert_eq!(json["status"], "ok", "{log}");
    // 5 s at 4000/s, evenly spaced from a phase of 0: 20000 intended sends.
    let sent = f(&json, &["sent"]);
    assert_eq!(sent, 20_000.0, "{log}");
    assert_eq!(f(&json, &["acknowledged"]), sent);
    assert_eq!(f(&json, &["received"]), sent, "every record back through Fetch");
    assert_eq!(f(&json, &["lost"]), 0.0);
    assert_eq!(f(&json, &["duplicated"]), 0.0);
    assert_eq!(f(&json, &["out_of_order"]), 0.0);
    let achieved = f(&json, &["throughput", "msgs_per_s"]);
    assert!((achieved - rate).abs() <= 0.05 * rate, "achieved {achieved} msg/s for {rate} asked: {log}");
    // The broker agrees on how many records it holds.
    let end: f64 = (0..8).map(|p| partition_end(&broker, "fixed-rate", p) as f64).sum();
    assert_eq!(end, sent, "records in the topic");
    // The measured window (4 s of 5) went into the histograms.
    assert_eq!(f(&json, &["latency_ms", "count"]), 16_000.0);
    assert_eq!(f(&json, &["e2e_latency_ms", "count"]), 16_000.0);
    // A 4 s window is one minute of the per-minute split, holding them all.
    let minutes = json["latency_by_minute_ms"].as_array().expect("latency by minute");
    assert_eq!(minutes.len(), 1, "{minutes:?}");
    assert_eq!((minutes[0]["minute"].as_u64(), minutes[0]["count"].as_u64()), (Some(0), Some(16_000)));
    assert_eq!(minutes[0]["p99_ms"], json["latency_ms"]["p99_ms"], "the same records, the same p99");
    let hist = json["histograms"]["latency"].as_str().unwrap();
    let decoded = shardlog::bench::report::decode(hist).expect("HdrHistogram encoded form");
    assert_eq!(decoded.len(), 16_000);
    assert!(json["machine"]["cpu"].is_string() && json["commit"].is_string());
    let svg = std::fs::read_to_string(out.join("run.svg")).expect("a percentile plot");
    assert!(svg.starts_with("<svg") && svg.contains("99.9%"), "nines axis labels in the plot");
}

/// The topic's high watermark for one partition, read with the test's own
/// wire code.
fn partition_end(broker: &Broker, topic: &str, partition: i32) -> i64 {
    use kafka_protocol::messages::{
        list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic},
        ApiKey, BrokerId, ListOffsetsRequest, ListOffsetsResponse, TopicName,
    };
    let mut w = common::wire::Wire::connect(&broker.bootstrap());
    let mut p = ListOffsetsPartition::default();
    p.partition_index = partition;
    p.timestamp = -1;
    let mut t = ListOffsetsTopic::default();
    t.name = TopicName(kafka_protocol::protocol::StrBytes::from_string(topic.into()));
    t.partitions = vec![p];
    let mut req = ListOffsetsRequest::default();
    req.replica_id = BrokerId(-1);
    req.topics = vec![t];
    let resp: ListOffsetsResponse = w.call(ApiKey::ListOffsets, 5, &req);
    resp.topics[0].partitions[0].offset
}

#[test]
fn a_200ms_stall_shows_in_corrected_latency_but_not_in_service_time() {
    let _serial = one_at_a_time();
    let dir = common::tempdir().unwrap();
    // Clients learn the broker's address from Metadata: advertise the proxy.
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let proxy_addr = listener.local_addr().unwrap().to_string();
    let config = format!("advertise = \"{proxy_addr}\"\n");
    let broker = Broker::start_with_config(&dir.path().join("data"), 1, &config, &[]);
    // Setup and warm-up take the first second or so; stall in the middle
    // of the measured window.
    let proxy =
        StallingProxy::start(listener, broker.bootstrap(), Duration::from_millis(3500), Duration::from_millis(200));
    let out = dir.path().join("out");
    let (ok, json, log) = bench(
        &[
            "produce",
            "--bootstrap",
            &proxy.addr,
            "--topic",
            "stalled",
            "--partitions",
            "4",
            "--rate",
            "2000",
            "--record-size",
            "100",
            "--duration",
            "5s",
            "--warmup",
            "1s",
        ],
        &out,
    );
    assert!(ok, "bench failed: {log}");
    assert!(proxy.stalled(), "the proxy never stalled: {log}");
    let p99 = f(&json, &["latency_ms", "p99_ms"]);
    let max = f(&json, &["latency_ms", "max_ms"]);
    let service_p99 = f(&json, &["service_time_ms", "p99_ms"]);
    let service_max = f(&json, &["service_time_ms", "max_ms"]);
    eprintln!("corrected p99 {p99} ms, max {max} ms; service time p99 {service_p99} ms, max {service_max} ms");
    // 400 records were due during the stall (2000/s × 0.2 s), 4% of the
    // 10000 measured: the top 1% waited 150 ms or more.
    assert!(max >= 195.0, "corrected max {max} ms misses the 200 ms stall: {log}");
    assert!(p99 >= 120.0, "corrected p99 {p99} ms misses the stall: {log}");
    // Only the few requests already in flight saw it as service time.
    assert!(service_max >= 150.0, "the stalled requests' own service time: {service_max} ms");
    assert!(service_p99 < 60.0, "service time p99 {service_p99} ms should not show the stall: {log}");
    assert_eq!(f(&json, &["sent"]), f(&json, &["acknowledged"]));
}

#[test]
fn a_run_that_loses_its_broker_is_reported_as_failed_without_figures() {
    let _serial = one_at_a_time();
    let dir = common::tempdir().unwrap();
    let mut broker = Broker::start(&dir.path().join("data"), 1);
    let out = dir.path().join("out");
    let bootstrap = broker.bootstrap();
    let runner = std::thread::spawn({
        let out = out.clone();
        move || {
            bench(
                &[
                    "produce",
                    "--bootstrap",
                    &bootstrap,
                    "--topic",
                    "doomed",
                    "--partitions",
                    "2",
                    "--rate",
                    "1000",
                    "--record-size",
                    "64",
                    "--duration",
                    "4s",
                    "--warmup",
                    "0s",
                ],
                &out,
            )
        }
    });
    std::thread::sleep(Duration::from_millis(2000));
    broker.kill();
    let (ok, json, log) = runner.join().unwrap();
    assert!(!ok, "a run that lost its broker must exit non-zero: {log}");
    assert_eq!(json["status"], "failed", "{log}");
    assert!(json.get("latency_ms").is_none(), "no figures for a failed run: {json}");
    assert!(log.contains("FAILED") || log.contains("run failed"), "{log}");
    assert!(f(&json, &["acknowledged"]) > 0.0, "records went through before the kill: {json}");
    let why = json["validation"].as_str().unwrap();
    assert!(why.contains("127.0.0.1"), "the failure names the broker connection: {why}");
}

/// `--client rdkafka` runs the same workload through librdkafka after our
/// own client, validates both and reports their ratio.
#[cfg(feature = "rdkafka-client")]
#[test]
fn the_same_workload_through_librdkafka_is_validated_and_compared() {
    let _serial = one_at_a_time();
    let dir = common::tempdir().unwrap();
    let broker = Broker::start(&dir.path().join("data"), 1);
    let out = dir.path().join("out");
    let (ok, json, log) = bench(
        &[
            "produce",
            "--client",
            "rdkafka",
            "--bootstrap",
            &broker.bootstrap(),
            "--topic",
            "both-clients",
            "--partitions",
            "4",
            "--rate",
            "2000",
            "--record-size",
            "100",
            "--duration",
            "2s",
            "--warmup",
            "1s",
            "--keys",
            "50",
        ],
        &out,
    );
    assert!(ok, "bench failed: {log}");
    let other = &json["rdkafka"];
    assert_eq!(other["status"], "ok", "{log}");
    assert_eq!(other["parameters"]["client"], "rdkafka");
    // Both clients sent 3 s at 2000/s; the topic holds both runs.
    assert_eq!(f(&json, &["sent"]), 6000.0);
    assert_eq!(f(other, &["sent"]), 6000.0);
    assert_eq!(f(other, &["acknowledged"]), 6000.0);
    let end: i64 = (0..4).map(|p| partition_end(&broker, "both-clients", p)).sum();
    assert_eq!(end, 12_000, "records in the topic after both runs");
    let ratio = f(&json, &["ratio", "throughput_native_over_rdkafka"]);
    assert!((0.9..1.1).contains(&ratio), "same fixed rate, same throughput: ratio {ratio}");
    assert!(log.contains("native / librdkafka"), "{log}");
}

/// `bench produce --transactional` committing every 100 ms: 4 partitions
/// of `topic`, 2,000 msg/s of 100 B records, acks=all, 2 s after 1 s of
/// warm-up (6,000 records a run), plus `client`'s arguments.
fn transactional_bench(broker: &Broker, topic: &str, client: &[&str], out: &Path) -> (bool, Value, String) {
    let bootstrap = broker.bootstrap();
    let mut args = vec!["produce", "--transactional", "--txn-interval", "100ms", "--acks", "all"];
    args.extend_from_slice(client);
    args.extend_from_slice(&["--bootstrap", &bootstrap, "--topic", topic, "--partitions", "4", "--rate", "2000"]);
    args.extend_from_slice(&["--record-size", "100", "--duration", "2s", "--warmup", "1s"]);
    bench(&args, out)
}

/// `--transactional` runs the librdkafka workload without and then with a
/// transactional producer committing every 100 ms; a read_committed
/// consumer receives every record of both, and the topic holds one commit
/// marker per partition per transaction.
#[cfg(feature = "rdkafka-client")]
#[test]
fn transactions_are_measured_beside_the_same_run_without() {
    let _serial = one_at_a_time();
    let dir = common::tempdir().unwrap();
    let broker = Broker::start(&dir.path().join("data"), 1);
    let out = dir.path().join("out");
    let (ok, json, log) = transactional_bench(&broker, "txn-bench", &["--client", "rdkafka"], &out);
    assert!(ok, "bench failed: {log}");
    let (plain, txn) = (&json["without_transactions"], &json["transactional"]);
    for run in [plain, txn] {
        assert_eq!(run["status"], "ok", "{log}");
        assert_eq!(f(run, &["sent"]), 6000.0, "{log}");
        assert_eq!(f(run, &["received"]), 6000.0, "read_committed saw every record: {log}");
    }
    assert_eq!(json["parameters"]["transactional"], true);
    let commits = f(&json, &["comparison", "commits"]);
    assert!((20.0..=40.0).contains(&commits), "about one commit per 100 ms of 3 s: {commits}");
    // Visible only at its commit: a record waits for it, half an interval on average.
    let (p50_plain, p50_txn) = (f(plain, &["e2e_latency_ms", "p50_ms"]), f(txn, &["e2e_latency_ms", "p50_ms"]));
    assert!(p50_txn > p50_plain && p50_txn > 20.0, "e2e p50 {p50_txn} ms with transactions, {p50_plain} without");
    // Every transaction but the last (it may hold fewer than 4 records)
    // touched the 4 partitions.
    let end: i64 = (0..4).map(|p| partition_end(&broker, "txn-bench", p)).sum();
    let markers = end - 12_000;
    let commits = commits as i64;
    assert!(
        (4 * (commits - 1) + 1..=4 * commits).contains(&markers),
        "{markers} markers besides both runs' 12000 records: one per partition per commit ({commits})"
    );
    assert!(log.contains("transactions / none"), "{log}");
}

/// The native generator's transactions: one transactional producer per
/// load core commits every 100 ms on the run's grid, its fetchers read
/// read_committed, and every record of both runs is received once and in
/// order. A partition joins a transaction before its first batch in it,
/// and each commit ends those: the topic holds exactly one commit marker
/// per partition ended, and at 2,000 msg/s over 4 partitions every
/// transaction but the last holds all four.
#[test]
fn the_native_generator_measures_transactions_beside_the_same_run_without() {
    let _serial = one_at_a_time();
    let dir = common::tempdir().unwrap();
    let broker = Broker::start(&dir.path().join("data"), 1);
    let out = dir.path().join("out");
    let (ok, json, log) = transactional_bench(&broker, "native-txn-bench", &[], &out);
    assert!(ok, "bench failed: {log}");
    let (plain, txn) = (&json["without_transactions"], &json["transactional"]);
    for run in [plain, txn] {
        assert_eq!(run["status"], "ok", "{log}");
        assert_eq!(f(run, &["sent"]), 6000.0, "{log}");
        assert_eq!(f(run, &["received"]), 6000.0, "read_committed saw every record: {log}");
        assert_eq!(run["parameters"]["client"], "native");
    }
    assert_eq!(txn["parameters"]["transactional"], true, "{json}");
    assert_eq!(plain["parameters"]["transactional"], false, "{json}");
    let commits = f(&json, &["comparison", "commits"]);
    assert!((25.0..=35.0).contains(&commits), "one commit per 100 ms of 3 s, and the last: {commits}");
    let (p50_plain, p50_txn) = (f(plain, &["e2e_latency_ms", "p50_ms"]), f(txn, &["e2e_latency_ms", "p50_ms"]));
    assert!(p50_txn > p50_plain && p50_txn > 20.0, "e2e p50 {p50_txn} ms with transactions, {p50_plain} without");
    let ended = f(&json, &["comparison", "partitions_ended"]) as i64;
    let commits = commits as i64;
    assert!((4 * (commits - 1) + 1..=4 * commits).contains(&ended), "{ended} partitions ended by {commits} commits");
    let end: i64 = (0..4).map(|p| partition_end(&broker, "native-txn-bench", p)).sum();
    assert_eq!(end - 12_000, ended, "one marker per partition ended, besides both runs' 12000 records");
}
