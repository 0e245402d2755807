//! SSL listeners (issue 17): real clients produce and consume over TLS with
//! a CA the test makes; untrusted and expired server certificates and a
//! missing required client certificate fail the handshake; a client
//! certificate's subject becomes the principal; garbage, truncated records
//! and a slow-loris handshake leave other clients unharmed; SIGHUP swaps
//! the certificate for new connections while open ones go on.

mod common;

use std::{
    collections::BTreeSet,
    io::{Read, Write},
    net::TcpStream,
    path::Path,
    process::Command,
    time::{Duration, Instant},
};

use common::{
    child::Lines,
    tls::{Pki, SslBroker},
};
use kafka_protocol::messages::{ApiKey, ApiVersionsRequest, ApiVersionsResponse, MetadataRequest, MetadataResponse};
use shardlog::client::{self, tls};

const RECORDS: usize = 300;
const CLIENT_TIMEOUT: Duration = Duration::from_secs(90);

/// `produced`/`consumed` values a client printed.
fn values(lines: &[String], what: &str) -> BTreeSet<String> {
    lines.iter().filter_map(|l| l.strip_prefix(what)).map(|v| v.trim().to_string()).collect()
}

fn round_trip(name: &str, cmd: Command, broker: &SslBroker) {
    let (status, lines, stderr) = Lines::spawn(cmd).finish(CLIENT_TIMEOUT);
    assert!(
        status.is_some_and(|s| s.success()),
        "{name} exited with {status:?}\nstderr: {stderr}\nbroker log: {}",
        broker.broker.log.lock().unwrap().join("\n")
    );
    let (produced, consumed) = (values(&lines, "produced "), values(&lines, "consumed "));
    assert_eq!(produced.len(), RECORDS, "{name}: acknowledged records");
    assert_eq!(consumed, produced, "{name}: what was read back over TLS");
    let read = lines.iter().filter(|l| l.starts_with("consumed ")).count();
    assert_eq!(read, RECORDS, "{name}: no record read twice");
}

fn python(args: &[&str]) -> Command {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/clients/tls_roundtrip.py");
    let mut cmd = Command::new("python3");
    cmd.arg(script).args(args);
    cmd
}

/// ApiVersions then Metadata over an open connection: the broker port
/// Metadata advertises.
fn advertised_port(stream: &mut (impl Read + Write)) -> i32 {
    client::write_request(stream, ApiKey::ApiVersions, 3, 1, Some("tls-test"), &ApiVersionsRequest::default()).unwrap();
    let versions = client::read_response::<ApiVersionsResponse>(stream, ApiKey::ApiVersions, 3).unwrap();
    assert_eq!(versions.body.error_code, 0);
    client::write_request(stream, ApiKey::Metadata, 9, 2, Some("tls-test"), &MetadataRequest::default()).unwrap();
    let metadata = client::read_response::<MetadataResponse>(stream, ApiKey::Metadata, 9).unwrap();
    metadata.body.brokers[0].port
}

#[test]
fn confluent_kafka_kafka_python_and_kafkajs_round_trip_over_ssl() {
    let dir = common::tempdir().unwrap();
    let pki = Pki::make(&dir.path().join("pki"));
    let broker = SslBroker::start(&pki, &dir.path().join("data"), "server", "requested");
    let ssl = broker.ssl_bootstrap();
    // Each listener advertises its own address.
    let mut secure = tls::connect(&ssl, pki.client("ca.pem", false)).unwrap();
    assert_eq!(advertised_port(&mut secure), i32::from(broker.ssl_port));
    let mut plain = client::connect(&broker.broker.bootstrap()).unwrap();
    assert_eq!(advertised_port(&mut plain), i32::from(broker.broker.port));

    let (ca, cert, key) = (pki.text("ca.pem"), pki.text("client.pem"), pki.text("client.key"));
    let n = RECORDS.to_string();
    round_trip("confluent-kafka", python(&["confluent", &ssl, "tls-cf", &n, &ca, &cert, &key]), &broker);
    round_trip("kafka-python", python(&["kafka-python", &ssl, "tls-kp", &n, &ca]), &broker);
    let mut js = Command::new("node");
    js.current_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/kafkajs")).args([
        "tls.js",
        &ssl,
        "tls-js",
        &n,
        &ca,
        &CLIENT_TIMEOUT.as_millis().to_string(),
    ]);
    round_trip("kafkajs", js, &broker);
    // confluent-kafka showed its certificate (client_auth = "requested").
    let (found, log) = broker.broker.wait_for_log("as User:CN=alice,OU=streaming,O=Example Corp,C=US");
    assert!(found, "no connection named by its certificate's subject; log: {log}");
}

fn handshake_error(addr: &str, config: std::sync::Arc<rustls::ClientConfig>) -> String {
    match tls::connect(addr, config) {
        Ok(_) => panic!("the TLS handshake with {addr} succeeded"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn untrusted_and_expired_server_certificates_fail_the_handshake() {
    let dir = common::tempdir().unwrap();
    let pki = Pki::make(&dir.path().join("pki"));
    let good = SslBroker::start(&pki, &dir.path().join("good"), "server", "none");
    let e = handshake_error(&good.ssl_bootstrap(), pki.client("other-ca.pem", false));
    assert!(e.contains("UnknownIssuer"), "untrusted CA: {e}");
    let (logged, log) = good.broker.wait_for_log("TLS handshake failed on listener SECURE");
    assert!(logged, "the failed handshake was not logged: {log}");
    let (status, lines, _) = Lines::spawn(python(&["probe", &good.ssl_bootstrap(), &pki.text("other-ca.pem")]))
        .finish(Duration::from_secs(30));
    assert!(status.is_some_and(|s| s.success()));
    assert!(lines.iter().any(|l| l.starts_with("failed")), "confluent-kafka with another CA: {lines:?}");
    let (_, lines, _) =
        Lines::spawn(python(&["probe", &good.ssl_bootstrap(), &pki.text("ca.pem")])).finish(Duration::from_secs(30));
    assert_eq!(lines, vec!["ok".to_string()], "confluent-kafka with the right CA");

    let expired = SslBroker::start(&pki, &dir.path().join("expired"), "expired", "none");
    let e = handshake_error(&expired.ssl_bootstrap(), pki.client("ca.pem", false));
    assert!(e.contains("Expired"), "expired certificate: {e}");
    // Both brokers still serve.
    let mut ok = tls::connect(&good.ssl_bootstrap(), pki.client("ca.pem", false)).unwrap();
    assert_eq!(advertised_port(&mut ok), i32::from(good.ssl_port));
}

#[test]
fn required_client_auth_refuses_clients_without_a_certificate_and_names_those_with_one() {
    let dir = common::tempdir().unwrap();
    let pki = Pki::make(&dir.path().join("pki"));
    let broker = SslBroker::start(&pki, &dir.path().join("data"), "server", "required");
    // TLS 1.3: the client's side of the handshake ends before the server
    // has judged it; the refusal arrives as an alert on the first read.
    let refused = tls::connect(&broker.ssl_bootstrap(), pki.client("ca.pem", false)).and_then(|mut s| {
        client::write_request(&mut s, ApiKey::ApiVersions, 3, 1, None, &ApiVersionsRequest::default())?;
        client::read_response::<ApiVersionsResponse>(&mut s, ApiKey::ApiVersions, 3)
    });
    let e = refused.err().expect("a client without a certificate was served").to_string();
    assert!(e.contains("CertificateRequired") || e.contains("certificate"), "no certificate: {e}");
    let mut alice = tls::connect(&broker.ssl_bootstrap(), pki.client("ca.pem", true)).unwrap();
    assert_eq!(advertised_port(&mut alice), i32::from(broker.ssl_port));
    let (found, log) =
        broker.broker.wait_for_log("on listener SECURE as User:CN=alice,OU=streaming,O=Example Corp,C=US");
    assert!(found, "the principal is not the certificate's subject; log: {log}");
}

#[test]
fn garbage_truncated_records_and_slow_handshakes_leave_other_clients_unharmed() {
    let dir = common::tempdir().unwrap();
    let pki = Pki::make(&dir.path().join("pki"));
    let broker = SslBroker::start(&pki, &dir.path().join("data"), "server", "none");
    let ssl = broker.ssl_bootstrap();
    let (ca, n) = (pki.text("ca.pem"), RECORDS.to_string());
    let good = Lines::spawn(python(&["confluent", &ssl, "tls-hostile", &n, &ca]));

    // Half a ClientHello (a record header claiming 512 bytes, 40 sent),
    // then nothing: the broker closes it at its handshake deadline.
    let mut loris = TcpStream::connect(&ssl).unwrap();
    loris.write_all(&[0x16, 0x03, 0x01, 0x02, 0x00, 0x01, 0x00, 0x01, 0xfc, 0x03, 0x03]).unwrap();
    loris.write_all(&[0x42; 29]).unwrap();
    let loris_since = Instant::now();
    // Garbage: not a TLS record at all.
    let mut garbage = TcpStream::connect(&ssl).unwrap();
    let mut rng = common::Rng::new(17);
    let mut junk = vec![0u8; 64 << 10];
    rng.fill(&mut junk);
    let _ = garbage.write_all(&junk);
    assert_closed(&mut garbage, Duration::from_secs(5), "garbage");
    // A truncated record: a handshake record header claiming 16 KiB, 100
    // bytes of it, then the client's end of the stream.
    let mut truncated = TcpStream::connect(&ssl).unwrap();
    truncated.write_all(&[0x16, 0x03, 0x03, 0x40, 0x00]).unwrap();
    truncated.write_all(&[0x01; 100]).unwrap();
    truncated.shutdown(std::net::Shutdown::Write).unwrap();
    assert_closed(&mut truncated, Duration::from_secs(5), "truncated record");

    assert_closed(&mut loris, Duration::from_secs(15), "slow-loris handshake");
    let waited = loris_since.elapsed();
    assert!(waited >= Duration::from_secs(9), "the slow handshake was closed after {waited:?}, before its deadline");

    let (status, lines, stderr) = good.finish(CLIENT_TIMEOUT);
    assert!(status.is_some_and(|s| s.success()), "the good client failed: {stderr}");
    assert_eq!(values(&lines, "consumed "), values(&lines, "produced "));
    assert_eq!(values(&lines, "produced ").len(), RECORDS);
    assert!(!stderr.contains("error"), "the good client saw errors: {stderr}");
    let mut after = tls::connect(&ssl, pki.client("ca.pem", false)).unwrap();
    assert_eq!(advertised_port(&mut after), i32::from(broker.ssl_port));
    // The three bad handshakes are counted, under their listener.
    let failed = common::broker::metric_sum(
        &common::broker::metrics_text(&broker.broker),
        "shardlog_tls_handshake_failures",
        "listener=\"SECURE\"",
    );
    assert!(failed >= 3.0, "failed TLS handshakes counted: {failed}");
}

/// Waits for the broker to close `stream` (EOF or reset).
fn assert_closed(stream: &mut TcpStream, within: Duration, what: &str) {
    stream.set_read_timeout(Some(within)).unwrap();
    let mut buf = [0u8; 4096];
    loop {
        match stream.read(&mut buf) {
            Ok(0) => return,
            Ok(_) => {} // an alert
            Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {
                panic!("{what}: the broker kept the connection open for {within:?}")
            }
            Err(_) => return, // reset
        }
    }
}

#[test]
fn sighup_serves_the_new_certificate_to_new_connections_and_keeps_open_ones() {
    let dir = common::tempdir().unwrap();
    let pki = Pki::make(&dir.path().join("pki"));
    // The broker's files are copies, replaced below.
    for (from, to) in [("server.pem", "live.pem"), ("server.key", "live.key")] {
        std::fs::copy(pki.path(from), pki.path(to)).unwrap();
    }
    let broker = SslBroker::start(&pki, &dir.path().join("data"), "live", "none");
    let ssl = broker.ssl_bootstrap();
    let mut open = tls::connect(&ssl, pki.client("ca.pem", false)).unwrap();
    assert_eq!(advertised_port(&mut open), i32::from(broker.ssl_port));
    assert!(handshake_error(&ssl, pki.client("other-ca.pem", false)).contains("UnknownIssuer"));

    for (from, to) in [("other-server.pem", "live.pem"), ("other-server.key", "live.key")] {
        std::fs::copy(pki.path(from), pki.path(to)).unwrap();
    }
    let status = Command::new("kill").args(["-HUP", &broker.broker.pid().to_string()]).status().unwrap();
    assert!(status.success());
    let (found, log) = broker.broker.wait_for_log("SIGHUP: reloaded the TLS certificate");
    assert!(found, "no reload logged: {log}");

    let mut fresh = tls::connect(&ssl, pki.client("other-ca.pem", false)).expect("the new certificate after SIGHUP");
    assert_eq!(advertised_port(&mut fresh), i32::from(broker.ssl_port));
    assert!(
        handshake_error(&ssl, pki.client("ca.pem", false)).contains("UnknownIssuer"),
        "the old certificate is still served"
    );
    // The connection opened before the reload still works.
    assert_eq!(advertised_port(&mut open), i32::from(broker.ssl_port));
}
