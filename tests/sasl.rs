//! SASL on a SASL_PLAINTEXT listener, with real clients: confluent-kafka
//! (librdkafka), kafka-python and kafkajs produce and consume with
//! SCRAM-SHA-512, PLAIN and SCRAM-SHA-256; a wrong password gets
//! SASL_AUTHENTICATION_FAILED; confluent-kafka's AdminClient creates,
//! describes and deletes a user on a 2-shard broker; out-of-order SASL and
//! requests before authentication are refused while an authenticated client
//! keeps working; a thousand failed logins do not stop it; credentials
//! survive a restart. The first user is made offline by `shardlog users add`.

mod common;

use std::{
    path::Path,
    process::Command,
    time::{Duration, Instant},
};

use bytes::Bytes;
use common::{
    broker::Broker,
    sasl::{assert_round_trip, kafkajs, python, users_add, values},
    scrape,
    wire::Wire,
};
use kafka_protocol::{messages::*, protocol::StrBytes};
use shardlog::security::scram::{Mechanism, ScramClient};

const ADMIN: &str = "alice";
const ADMIN_PASSWORD: &str = "alice-pw-7Qx";
/// alice administers: with a SASL listener no resource is open to everyone
/// (`allow_everyone_if_no_acl_found` is off), and these tests make no ACLs.
const CONFIG: &str = "super_users = [\"User:alice\"]\n";

fn sasl_broker(dir: &Path, cores: usize) -> Broker {
    let data = dir.join("data");
    users_add(&data, ADMIN, ADMIN_PASSWORD);
    Broker::start_secured(&data, cores, "SASL_PLAINTEXT", CONFIG)
}

/// Authenticates a raw connection with SaslHandshake v1 and SaslAuthenticate
/// v2; `Err((error code, message))` when refused.
fn scram_login(addr: &str, m: Mechanism, user: &str, password: &str) -> Result<Wire, (i16, String)> {
    let mut w = Wire::connect(addr);
    let hs: SaslHandshakeResponse = w.call(ApiKey::SaslHandshake, 1, &handshake(m.name()));
    assert_eq!(hs.error_code, 0, "handshake for {}", m.name());
    let mut client = ScramClient::new(m, user, password, "test-client-nonce");
    let first: SaslAuthenticateResponse = w.call(ApiKey::SaslAuthenticate, 2, &token(client.first()));
    if first.error_code != 0 {
        return Err((first.error_code, first.error_message.map(|m| m.to_string()).unwrap_or_default()));
    }
    let last = client.respond(&first.auth_bytes).expect("server-first message");
    let done: SaslAuthenticateResponse = w.call(ApiKey::SaslAuthenticate, 2, &token(last));
    if done.error_code != 0 {
        return Err((done.error_code, done.error_message.map(|m| m.to_string()).unwrap_or_default()));
    }
    client.verify(&done.auth_bytes).expect("the broker proves it knows the key");
    Ok(w)
}

/// A SCRAM-SHA-512 login as alice with a guessed proof: what an attacker
/// sends, without the PBKDF2 a real client runs. Returns the error code.
fn guess(addr: &str, i: u64) -> i16 {
    use base64::Engine;
    let mut w = Wire::connect(addr);
    let _: SaslHandshakeResponse = w.call(ApiKey::SaslHandshake, 1, &handshake("SCRAM-SHA-512"));
    let first = format!("n,,n={ADMIN},r=guess{i}").into_bytes();
    let server_first: SaslAuthenticateResponse = w.call(ApiKey::SaslAuthenticate, 2, &token(first));
    let text = String::from_utf8(server_first.auth_bytes.to_vec()).unwrap();
    let nonce = text.split(',').next().unwrap().strip_prefix("r=").unwrap();
    let proof = base64::engine::general_purpose::STANDARD.encode([i as u8; 64]);
    let last = format!("c=biws,r={nonce},p={proof}").into_bytes();
    let answer: SaslAuthenticateResponse = w.call(ApiKey::SaslAuthenticate, 2, &token(last));
    answer.error_code
}

fn handshake(mechanism: &str) -> SaslHandshakeRequest {
    SaslHandshakeRequest::default().with_mechanism(StrBytes::from_string(mechanism.to_string()))
}

fn token(bytes: Vec<u8>) -> SaslAuthenticateRequest {
    SaslAuthenticateRequest::default().with_auth_bytes(Bytes::from(bytes))
}

/// Produces one random batch; returns (error, base offset).
fn produce_one(w: &mut Wire, topic: &str, seed: u64) -> (i16, i64) {
    let mut rng = common::Rng::new(seed);
    common::wire::produce(w, topic, 0, common::random_batch(&mut rng, 3, 50).freeze(), -1)
}

#[test]
fn clients_produce_and_consume_with_scram_and_plain() {
    let dir = common::tempdir().unwrap();
    let broker = sasl_broker(dir.path(), 1);
    let b = broker.bootstrap();
    for (client, mechanism) in
        [("confluent", "SCRAM-SHA-512"), ("kafka-python", "SCRAM-SHA-512"), ("kafka-python", "PLAIN")]
    {
        let topic = format!("sasl-{client}-{}", mechanism.to_lowercase());
        let sent = values(&topic);
        let out = python(&[
            "roundtrip",
            client,
            &b,
            mechanism,
            ADMIN,
            ADMIN_PASSWORD,
            &topic,
            &serde_json::to_string(&sent).unwrap(),
        ]);
        assert_round_trip(&out, &sent, &format!("{client} {mechanism}"));
    }
    for mechanism in ["SCRAM-SHA-512", "SCRAM-SHA-256"] {
        let topic = format!("sasl-kafkajs-{}", mechanism.to_lowercase());
        let sent = values(&topic);
        let out = kafkajs(&[
            "roundtrip",
            &b,
            mechanism,
            ADMIN,
            ADMIN_PASSWORD,
            &topic,
            &serde_json::to_string(&sent).unwrap(),
        ]);
        assert_round_trip(&out, &sent, &format!("kafkajs {mechanism}"));
    }
    let samples = scrape::scrape(&broker);
    let ok = scrape::sum(&samples, "shardlog_sasl_authentications_total", &[("result", "success")]);
    assert!(ok >= 5.0, "every client's connections authenticated and were counted: {ok}");
}

#[test]
fn a_wrong_password_gets_sasl_authentication_failed() {
    let dir = common::tempdir().unwrap();
    let broker = sasl_broker(dir.path(), 1);
    let b = broker.bootstrap();
    let out = python(&["login", "confluent", &b, "SCRAM-SHA-512", ADMIN, "wrong"]);
    assert_eq!(out["kind"], "_AUTHENTICATION", "librdkafka's authentication error: {out}");
    assert!(out["error"].as_str().unwrap().contains("invalid credentials"), "the broker's message reached it: {out}");
    let out = python(&["login", "kafka-python", &b, "SCRAM-SHA-512", ADMIN, "wrong"]);
    assert_eq!(out["kind"], "SaslAuthenticationFailedError", "kafka-python maps error 58: {out}");
    let out = python(&["login", "kafka-python", &b, "PLAIN", ADMIN, "wrong"]);
    assert_eq!(out["kind"], "SaslAuthenticationFailedError", "PLAIN too: {out}");
    let out = kafkajs(&["login", &b, "SCRAM-SHA-512", ADMIN, "wrong"]);
    assert_eq!(out["ok"], false, "{out}");
    assert!(
        out["error"].as_str().unwrap().contains("SASL_AUTHENTICATION_FAILED")
            || out["kind"].as_str().unwrap().contains("SASLAuthentication"),
        "kafkajs: {out}"
    );
    // The same clients with the right password get in.
    assert_eq!(python(&["login", "confluent", &b, "SCRAM-SHA-512", ADMIN, ADMIN_PASSWORD])["ok"], true);
    let (code, message) = scram_login(&b, Mechanism::Sha512, ADMIN, "wrong").err().expect("refused");
    assert_eq!(code, 58, "{message}");
    let samples = scrape::scrape(&broker);
    let failed = scrape::sum(&samples, "shardlog_sasl_authentications_total", &[("result", "failure")]);
    assert!(failed >= 4.0, "failures counted: {failed}");
}

#[test]
fn admin_client_alters_describes_and_deletes_users_on_every_shard() {
    let dir = common::tempdir().unwrap();
    let broker = sasl_broker(dir.path(), 2);
    let b = broker.bootstrap();
    let admin = |args: &[&str]| {
        let mut all = vec![args[0], &b, "SCRAM-SHA-512", ADMIN, ADMIN_PASSWORD];
        all.extend_from_slice(&args[1..]);
        python(&all)
    };
    assert!(scram_login(&b, Mechanism::Sha512, "bob", "bob-pw").is_err(), "no bob yet");
    assert_eq!(admin(&["alter", "upsert", "bob", "bob-pw"])["ok"], true);
    let described = admin(&["describe"]);
    assert_eq!(described["users"]["bob"], serde_json::json!([["SCRAM_SHA_512", 8192]]), "{described}");
    assert_eq!(described["users"][ADMIN].as_array().map(Vec::len), Some(2), "{described}");
    // Many connections, spread by the kernel over both shards: each shard
    // must have bob's new credential.
    for _ in 0..24 {
        scram_login(&b, Mechanism::Sha512, "bob", "bob-pw").unwrap_or_else(|e| panic!("bob logs in: {e:?}"));
    }
    let samples = scrape::scrape(&broker);
    for shard in ["0", "1"] {
        let ok =
            scrape::sum(&samples, "shardlog_sasl_authentications_total", &[("shard", shard), ("result", "success")]);
        assert!(ok >= 1.0, "shard {shard} authenticated some of bob's connections");
    }
    assert_eq!(python(&["login", "kafka-python", &b, "SCRAM-SHA-512", "bob", "bob-pw"])["ok"], true);
    assert_eq!(admin(&["alter", "delete", "bob"])["ok"], true);
    for _ in 0..12 {
        let (code, _) = scram_login(&b, Mechanism::Sha512, "bob", "bob-pw").err().expect("bob is gone on every shard");
        assert_eq!(code, 58);
    }
    let gone = admin(&["describe", "bob"]);
    assert!(gone["error"].as_str().unwrap_or_default().contains("does not exist"), "{gone}");
    let again = admin(&["alter", "delete", "bob"]);
    assert!(again["error"].as_str().unwrap().contains("does not exist"), "RESOURCE_NOT_FOUND: {again}");
}

#[test]
fn out_of_order_sasl_and_requests_before_authentication_are_refused() {
    let dir = common::tempdir().unwrap();
    let broker = sasl_broker(dir.path(), 1);
    let b = broker.bootstrap();
    let mut good = scram_login(&b, Mechanism::Sha512, ADMIN, ADMIN_PASSWORD).expect("alice logs in");
    let (err, first) = produce_one(&mut good, "kept", 1);
    assert_eq!((err, first), (0, 0));

    // A request before authentication: closed without an answer.
    let mut w = Wire::connect(&b);
    let versions: ApiVersionsResponse = w.call(ApiKey::ApiVersions, 3, &ApiVersionsRequest::default());
    assert!(versions.api_keys.iter().any(|k| k.api_key == ApiKey::SaslAuthenticate as i16), "ApiVersions is allowed");
    w.send(ApiKey::Metadata, 12, &MetadataRequest::default());
    assert!(w.is_closed(), "Metadata before authentication closes the connection");

    // A frame too large for a connection not yet authenticated.
    let mut w = Wire::connect(&b);
    use std::io::Write;
    w.stream.write_all(&(10u32 << 20).to_be_bytes()).unwrap();
    assert!(w.is_closed(), "a 10 MiB frame before authentication closes the connection");

    // SaslAuthenticate before SaslHandshake.
    let mut w = Wire::connect(&b);
    let r: SaslAuthenticateResponse = w.call(ApiKey::SaslAuthenticate, 2, &token(b"n,,n=alice,r=abc".to_vec()));
    assert_eq!(r.error_code, 34, "ILLEGAL_SASL_STATE");
    assert!(w.is_closed());

    // A second handshake.
    let mut w = Wire::connect(&b);
    let _: SaslHandshakeResponse = w.call(ApiKey::SaslHandshake, 1, &handshake("SCRAM-SHA-512"));
    let r: SaslHandshakeResponse = w.call(ApiKey::SaslHandshake, 1, &handshake("SCRAM-SHA-512"));
    assert_eq!(r.error_code, 34, "ILLEGAL_SASL_STATE");
    assert!(w.is_closed());

    // A mechanism not offered: the answer lists those that are.
    let mut w = Wire::connect(&b);
    let r: SaslHandshakeResponse = w.call(ApiKey::SaslHandshake, 1, &handshake("GSSAPI"));
    assert_eq!(r.error_code, 33, "UNSUPPORTED_SASL_MECHANISM");
    let offered: Vec<String> = r.mechanisms.iter().map(|m| m.to_string()).collect();
    assert_eq!(offered, ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]);
    assert!(w.is_closed());

    // Garbage where the client-first message should be.
    let mut w = Wire::connect(&b);
    let _: SaslHandshakeResponse = w.call(ApiKey::SaslHandshake, 1, &handshake("SCRAM-SHA-256"));
    let r: SaslAuthenticateResponse = w.call(ApiKey::SaslAuthenticate, 2, &token(vec![0xff; 300]));
    assert_eq!(r.error_code, 58, "SASL_AUTHENTICATION_FAILED");
    assert!(r.error_message.unwrap().contains("UTF-8"));
    assert!(w.is_closed());

    // A v0 handshake: the PLAIN token follows raw (no Kafka header).
    let mut w = Wire::connect(&b);
    let r: SaslHandshakeResponse = w.call(ApiKey::SaslHandshake, 0, &handshake("PLAIN"));
    assert_eq!(r.error_code, 0);
    let raw = format!("\0{ADMIN}\0{ADMIN_PASSWORD}");
    use std::io::Read;
    w.stream.write_all(&(raw.len() as u32).to_be_bytes()).unwrap();
    w.stream.write_all(raw.as_bytes()).unwrap();
    let mut size = [0u8; 4];
    w.stream.read_exact(&mut size).unwrap();
    assert_eq!(size, [0; 4], "PLAIN's empty challenge, raw");
    let (err, _) = produce_one(&mut w, "raw-v0", 2);
    assert_eq!(err, 0, "authenticated by the raw exchange");

    // The authenticated client saw none of it.
    let (err, next) = produce_one(&mut good, "kept", 3);
    assert_eq!((err, next), (0, 3), "three records were in the first batch");
}

#[test]
fn a_thousand_failed_logins_do_not_stop_an_authenticated_client() {
    let dir = common::tempdir().unwrap();
    let broker = sasl_broker(dir.path(), 1);
    let b = broker.bootstrap();
    let mut good = scram_login(&b, Mechanism::Sha512, ADMIN, ADMIN_PASSWORD).expect("alice logs in");
    let mut latencies = |n: usize, seed: u64| {
        let mut out = Vec::new();
        for i in 0..n {
            let t = Instant::now();
            let (err, _) = produce_one(&mut good, "steady", seed + i as u64);
            assert_eq!(err, 0);
            out.push(t.elapsed());
        }
        out.sort();
        out
    };
    let before = latencies(200, 0);
    let started = Instant::now();
    // One guesser, a thousand guesses in a loop, while alice produces.
    let attacker = {
        let b = b.clone();
        std::thread::spawn(move || {
            for i in 0..1000 {
                assert_eq!(guess(&b, i), 58, "a guessed proof is refused");
            }
        })
    };
    let mut during = Vec::new();
    while !attacker.is_finished() {
        during.extend(latencies(20, 10_000 + during.len() as u64));
    }
    attacker.join().unwrap();
    during.sort();
    let p50 = |v: &[Duration]| v[v.len() / 2];
    eprintln!(
        "produce p50 before {:?}, during 1000 failed logins {:?} ({} produces during)",
        p50(&before),
        p50(&during),
        during.len()
    );
    assert!(!during.is_empty(), "the client produced while the logins failed");
    let samples = scrape::scrape(&broker);
    let failed = scrape::sum(&samples, "shardlog_sasl_authentications_total", &[("result", "failure")]);
    assert_eq!(failed, 1000.0, "every failure counted");
    let (_, log) = broker.wait_for_log("authentication failure(s) since the last report");
    let lines = log.lines().filter(|l| l.contains("authentication failure(s)")).count();
    let allowed = started.elapsed().as_secs() as usize + 2;
    assert!((1..=allowed).contains(&lines), "failures logged at most once a second: {lines} lines");
}

#[test]
fn credentials_survive_a_restart() {
    let dir = common::tempdir().unwrap();
    let mut broker = sasl_broker(dir.path(), 1);
    let mut w = scram_login(&broker.bootstrap(), Mechanism::Sha512, ADMIN, ADMIN_PASSWORD).unwrap();
    // AlterUserScramCredentials as a client sends it: the salted password.
    let salt = b"carol-salt-0123".to_vec();
    let salted = Mechanism::Sha256.salted_password(b"carol-pw", &salt, 4096);
    let mut up = alter_user_scram_credentials_request::ScramCredentialUpsertion::default();
    up.name = StrBytes::from_static_str("carol");
    up.mechanism = Mechanism::Sha256.code();
    up.iterations = 4096;
    up.salt = Bytes::from(salt);
    up.salted_password = Bytes::from(salted);
    let mut few = up.clone();
    few.name = StrBytes::from_static_str("dave");
    few.iterations = 100;
    let req = AlterUserScramCredentialsRequest::default().with_upsertions(vec![up, few]);
    let r: AlterUserScramCredentialsResponse = w.call(ApiKey::AlterUserScramCredentials, 0, &req);
    let codes: Vec<(String, i16)> = r.results.iter().map(|r| (r.user.to_string(), r.error_code)).collect();
    assert_eq!(
        codes,
        [("carol".to_string(), 0), ("dave".to_string(), 93)],
        "UNACCEPTABLE_CREDENTIAL for 100 iterations"
    );
    drop(w);
    broker.stop();
    broker.restart();
    let b = broker.bootstrap();
    scram_login(&b, Mechanism::Sha256, "carol", "carol-pw").expect("carol survives the restart");
    scram_login(&b, Mechanism::Sha512, ADMIN, ADMIN_PASSWORD).expect("and so does alice");
    let file = std::fs::read_to_string(dir.path().join("data/__security/scram-credentials.json")).unwrap();
    assert!(!file.contains("carol-pw") && !file.contains(ADMIN_PASSWORD), "no password is stored");
    let listed = Command::new(env!("CARGO_BIN_EXE_shardlog"))
        .args(["users", "add", "--mechanism", "SCRAM-SHA-256", "--user", "eve", "--password", "x"])
        .arg("--data-dir")
        .arg(dir.path().join("data"))
        .output()
        .unwrap();
    assert!(!listed.status.success(), "users add refuses while the broker runs");
    assert!(String::from_utf8_lossy(&listed.stderr).contains("running broker"));
}

#[test]
fn bench_authenticates_every_connection() {
    let dir = common::tempdir().unwrap();
    let broker = sasl_broker(dir.path(), 1);
    let bench = |extra: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_shardlog"))
            .args(["bench", "produce", "--bootstrap", &broker.bootstrap(), "--partitions", "2", "--rate", "500"])
            .args(["--duration", "1s", "--warmup", "500ms", "--spin", "0ms", "--output"])
            .arg(dir.path().join("bench"))
            .args(extra)
            .output()
            .unwrap()
    };
    let ok = bench(&["--sasl", "SCRAM-SHA-512", "--sasl-user", ADMIN, "--sasl-password", ADMIN_PASSWORD]);
    let text = String::from_utf8_lossy(&ok.stderr).into_owned() + &String::from_utf8_lossy(&ok.stdout);
    assert!(ok.status.success(), "{text}");
    let measured: u64 = text
        .lines()
        .find(|l| l.starts_with("throughput:"))
        .and_then(|t| t.split('(').nth(1))
        .and_then(|t| t.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("a throughput line: {text}"));
    assert!(measured > 0, "{text}");
    let wrong = bench(&["--sasl", "SCRAM-SHA-512", "--sasl-user", ADMIN, "--sasl-password", "nope"]);
    assert!(!wrong.status.success());
    assert!(String::from_utf8_lossy(&wrong.stderr).contains("error 58"), "names the broker's refusal");
    let samples = scrape::scrape(&broker);
    let ok = scrape::sum(&samples, "shardlog_sasl_authentications_total", &[("result", "success")]);
    assert!(ok >= 2.0, "metadata and load connections authenticated: {ok}");
}
