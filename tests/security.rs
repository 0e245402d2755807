//! Issue 17's acceptance over SASL_SSL: a broker whose one listener is
//! SASL_SSL (TLS with a CA the test makes, then SCRAM), two shards.
//! confluent-kafka, kafka-python and kafkajs each produce and consume as a
//! SCRAM-SHA-512 user; a wrong password gets SASL_AUTHENTICATION_FAILED.
//! Then the ACL story with a user created over the wire: the super user
//! creates `carol` (AlterUserScramCredentials) and grants her WRITE and
//! READ on a topic prefix and READ on one group; her produce elsewhere is
//! refused with TOPIC_AUTHORIZATION_FAILED, her produce and fetch inside the
//! prefix work, and deleting the WRITE ACL refuses her on both shards at
//! once, without a restart.

mod common;

use common::{
    acls::{acl, AclClient},
    broker::Broker,
    sasl::{assert_round_trip, kafkajs_over, python_over, users_add, values},
    tls::Pki,
};
use serde_json::{json, Value};

const ADMIN: &str = "admin";
const ADMIN_PASSWORD: &str = "admin-pw-4Rt";
const CAROL: &str = "carol";
const CAROL_PASSWORD: &str = "carol-pw-9Zk";

/// Two shards, one SASL_SSL listener, `admin` a super user.
fn broker(dir: &std::path::Path, pki: &Pki) -> Broker {
    let data = dir.join("data");
    users_add(&data, ADMIN, ADMIN_PASSWORD);
    let toml = format!(
        "super_users = [\"User:{ADMIN}\"]\n\n[tls]\ncert_file = {:?}\nkey_file = {:?}\n\n[sasl]\nmechanisms = [\"SCRAM-SHA-512\", \"SCRAM-SHA-256\"]\n",
        pki.text("server.pem"),
        pki.text("server.key"),
    );
    Broker::start_secured(&data, 2, "SASL_SSL", &toml)
}

/// librdkafka settings for a SCRAM-SHA-512 user over SASL_SSL.
fn as_user(pki: &Pki, user: &str, password: &str) -> Value {
    json!({
        "security.protocol": "SASL_SSL", "ssl.ca.location": pki.text("ca.pem"),
        "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": user, "sasl.password": password,
    })
}

#[test]
fn three_clients_over_sasl_ssl_and_acls_for_a_user_made_over_the_wire() {
    let dir = common::tempdir().unwrap();
    let pki = Pki::make(&dir.path().join("pki"));
    let broker = broker(dir.path(), &pki);
    let b = broker.bootstrap();
    let ca = pki.path("ca.pem");

    // Each client, SCRAM-SHA-512 over TLS, reads back what it produced.
    for client in ["confluent", "kafka-python"] {
        let topic = format!("secure-{client}");
        let sent = values(&topic);
        let sent_json = serde_json::to_string(&sent).unwrap();
        let args = ["roundtrip", client, &b, "SCRAM-SHA-512", ADMIN, ADMIN_PASSWORD, &topic, &sent_json];
        assert_round_trip(&python_over(Some(&ca), &args), &sent, client);
    }
    let sent = values("secure-kafkajs");
    let sent_json = serde_json::to_string(&sent).unwrap();
    let args = ["roundtrip", &b, "SCRAM-SHA-512", ADMIN, ADMIN_PASSWORD, "secure-kafkajs", &sent_json];
    assert_round_trip(&kafkajs_over(Some(&ca), &args), &sent, "kafkajs");

    // A wrong password over TLS: SASL_AUTHENTICATION_FAILED, as each client names it.
    let out = python_over(Some(&ca), &["login", "confluent", &b, "SCRAM-SHA-512", ADMIN, "wrong"]);
    assert_eq!(out["kind"], "_AUTHENTICATION", "{out}");
    let out = python_over(Some(&ca), &["login", "kafka-python", &b, "SCRAM-SHA-512", ADMIN, "wrong"]);
    assert_eq!(out["kind"], "SaslAuthenticationFailedError", "{out}");
    let out = kafkajs_over(Some(&ca), &["login", &b, "SCRAM-SHA-512", ADMIN, "wrong"]);
    assert_eq!(out["ok"], false, "{out}");

    // The super user makes carol over the wire and grants her a prefix.
    let admin = AclClient::with_config(&b, as_user(&pki, ADMIN, ADMIN_PASSWORD));
    let made =
        python_over(Some(&ca), &["alter", &b, "SCRAM-SHA-512", ADMIN, ADMIN_PASSWORD, "upsert", CAROL, CAROL_PASSWORD]);
    assert_eq!(made["ok"], true, "{made}");
    for (topic, partitions) in [("carol-orders", 2), ("payroll", 1)] {
        assert_eq!(admin.create_topic(topic, partitions)["error"], Value::Null, "{topic}");
    }
    let principal = format!("User:{CAROL}");
    admin.create_acls(&[
        acl("TOPIC", "carol-", "PREFIXED", &principal, "WRITE", "ALLOW"),
        acl("TOPIC", "carol-", "PREFIXED", &principal, "READ", "ALLOW"),
        acl("GROUP", "carol-group", "LITERAL", &principal, "READ", "ALLOW"),
    ]);

    let carol = AclClient::with_config(&b, as_user(&pki, CAROL, CAROL_PASSWORD));
    let outside = carol.produce("payroll", &["p1"], 1);
    assert_eq!(outside["delivered"], 0, "{outside}");
    let errors = outside["errors"].as_array().unwrap();
    assert!(!errors.is_empty() && errors.iter().all(|e| e == "TOPIC_AUTHORIZATION_FAILED"), "{outside}");
    let inside = ["c1", "c2", "c3", "c4"];
    assert_eq!(carol.produce("carol-orders", &inside, 1)["delivered"], inside.len());
    let read = carol.consume("carol-orders", "carol-group", inside.len());
    assert_eq!(read["errors"], Value::Array(vec![]), "{read}");
    let mut got: Vec<String> = read["values"].as_array().unwrap().iter().map(|v| v.as_str().unwrap().into()).collect();
    got.sort();
    assert_eq!(got, inside, "{read}");

    // Deleting her WRITE ACL refuses her at once on both shards.
    let write = acl("TOPIC", "carol-", "PREFIXED", &principal, "WRITE", "ALLOW");
    let deleted = admin.delete_acls(&write);
    assert_eq!(deleted["deleted"].as_array().map(Vec::len), Some(1), "{deleted}");
    carol.assert_refused_on_both_shards(&broker, "carol-orders", 12);
    // Her READ grant stands: she reads what the super user writes next.
    assert_eq!(admin.produce("carol-orders", &["a1", "a2"], 1)["delivered"], 2);
    let again = carol.consume("carol-orders", "carol-group", 2);
    assert_eq!(again["errors"], json!([]), "{again}");
    let mut got: Vec<&str> = again["values"].as_array().unwrap().iter().map(|v| v.as_str().unwrap()).collect();
    got.sort_unstable();
    assert_eq!(got, ["a1", "a2"], "{again}");
}
