//! The consumer delivery semantics under crashes, through
//! perf/semantics/harness.py (kafka-python + SQLite): a consumer is
//! SIGKILLed a dozen times per mode while a producer runs. The harness
//! asserts at-most-once loses some and duplicates none, at-least-once
//! loses none, exactly-once neither; this test runs it against a real
//! broker and shows its table.
//!
//! The fourth mode, `exactly-once (transactions)` (confluent-kafka), runs
//! against a broker the harness starts itself from the binary given here,
//! since it SIGKILLs and restarts it twice besides killing the processor a
//! dozen times; its output, read read_committed, must match the input.

mod common;

use std::{path::Path, process::Command};

use common::broker::Broker;

#[test]
fn delivery_semantics_hold_their_promises_under_consumer_crashes() {
    let dir = common::tempdir().unwrap();
    let broker = Broker::start(&dir.path().join("data"), 2);
    let harness = Path::new(env!("CARGO_MANIFEST_DIR")).join("perf/semantics/harness.py");
    let work = dir.path().join("semantics");
    let out = Command::new("python3")
        .arg(harness)
        .args(["run", &broker.bootstrap(), work.to_str().unwrap(), "3000", "12", "7"])
        .arg(env!("CARGO_BIN_EXE_shardlog"))
        .output()
        .expect("run python3");
    let stdout = String::from_utf8_lossy(&out.stdout);
    eprintln!("{stdout}");
    assert!(
        out.status.success(),
        "semantics harness failed:\n{stdout}\n{}\nbroker log:\n{}",
        String::from_utf8_lossy(&out.stderr),
        broker.log.lock().unwrap().join("\n")
    );
    assert!(stdout.contains("| exactly-once | 3000 | 12 | 0 | 0 |"), "table:\n{stdout}");
    assert!(stdout.contains("| exactly-once (transactions) | 3000 | 12 | 0 | 0 | 2 |"), "table:\n{stdout}");
}
