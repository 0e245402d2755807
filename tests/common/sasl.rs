//! SASL clients for the tests: the first user made offline, and the
//! Python (confluent-kafka, kafka-python) and kafkajs scripts that log in,
//! administer users and round-trip records. With $SHARDLOG_SASL_SSL_CA set
//! in the environment, the scripts speak SASL_SSL trusting that CA.

use std::{path::Path, process::Command};

/// `shardlog users add`, both SCRAM mechanisms.
pub fn users_add(data: &Path, user: &str, password: &str) {
    let pw = data.with_extension("pw");
    std::fs::write(&pw, format!("{password}\n")).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_shardlog"))
        .args(["users", "add", "--mechanism", "SCRAM-SHA-256", "--mechanism", "SCRAM-SHA-512", "--user", user])
        .arg("--data-dir")
        .arg(data)
        .arg("--password-file")
        .arg(&pw)
        .output()
        .unwrap();
    assert!(out.status.success(), "users add: {}", String::from_utf8_lossy(&out.stderr));
}

/// Runs tests/clients/sasl_clients.py over SASL_PLAINTEXT.
pub fn python(args: &[&str]) -> serde_json::Value {
    python_over(None, args)
}

/// The same over SASL_SSL when `ca` is given (the CA the client trusts).
pub fn python_over(ca: Option<&Path>, args: &[&str]) -> serde_json::Value {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/clients/sasl_clients.py");
    let mut cmd = Command::new("python3");
    if let Some(ca) = ca {
        cmd.env("SHARDLOG_SASL_SSL_CA", ca);
    }
    let out = cmd.arg(script).args(args).output().expect("python3");
    assert!(
        out.status.success(),
        "{args:?}: {}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("one JSON object")
}

/// Runs tests/kafkajs/sasl.js over SASL_PLAINTEXT.
pub fn kafkajs(args: &[&str]) -> serde_json::Value {
    kafkajs_over(None, args)
}

/// The same over SASL_SSL when `ca` is given.
pub fn kafkajs_over(ca: Option<&Path>, args: &[&str]) -> serde_json::Value {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/kafkajs");
    assert!(Path::new(dir).join("node_modules/kafkajs").is_dir(), "kafkajs is not installed: run tests/run-all.sh");
    let mut cmd = Command::new("node");
    if let Some(ca) = ca {
        cmd.env("SHARDLOG_SASL_SSL_CA", ca);
    }
    let out = cmd.current_dir(dir).arg("sasl.js").args(args).output().expect("node");
    assert!(
        out.status.success(),
        "{args:?}: {}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("one JSON object")
}

/// Values no other run produced.
pub fn values(tag: &str) -> Vec<String> {
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos();
    (0..7).map(|i| format!("{tag}-{nanos}-{i}-{}", "v".repeat(i * 13))).collect()
}

pub fn assert_round_trip(out: &serde_json::Value, sent: &[String], who: &str) {
    let consumed: Vec<String> = serde_json::from_value(out["consumed"].clone()).unwrap();
    assert_eq!(consumed, sent, "{who} read back exactly what it produced: {out}");
    let offsets: Vec<i64> = serde_json::from_value(out["offsets"].clone()).unwrap();
    assert_eq!(offsets, (0..sent.len() as i64).collect::<Vec<_>>(), "{who}: offsets from the broker");
}
