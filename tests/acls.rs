//! ACLs with confluent-kafka's AdminClient, producer and consumer against a
//! two-shard broker with `allow_everyone_if_no_acl_found = false`. Until
//! SASL lands every connection is `User:ANONYMOUS`, so the ACLs are granted
//! to it: first while the config makes it a super user (the bootstrap
//! admin), then the broker restarts without that and the ACLs alone decide.

#[path = "acls/codes.rs"]
mod codes;
mod common;

use serde_json::Value;

use common::{
    acls::{acl, any_filter, AclClient},
    broker::Broker,
};

const ME: &str = "User:ANONYMOUS";

fn config(anonymous_is_super_user: bool) -> String {
    let supers = if anonymous_is_super_user { "super_users = [\"User:ANONYMOUS\"]\n" } else { "" };
    format!("{supers}allow_everyone_if_no_acl_found = false\n")
}

fn granted() -> Vec<Value> {
    vec![
        acl("TOPIC", "orders-", "PREFIXED", ME, "WRITE", "ALLOW"),
        acl("TOPIC", "orders-", "PREFIXED", ME, "READ", "ALLOW"),
        acl("GROUP", "readers", "LITERAL", ME, "READ", "ALLOW"),
        // To manage ACLs once it is no longer a super user (librdkafka
        // calls the cluster resource type, 4, BROKER).
        acl("BROKER", "kafka-cluster", "LITERAL", ME, "ALTER", "ALLOW"),
    ]
}

/// The ACLs an answer lists, in a canonical order, to compare as sets.
fn sorted(list: &Value) -> Vec<String> {
    let mut out: Vec<String> = list.as_array().expect("a list of ACLs").iter().map(|a| a.to_string()).collect();
    out.sort();
    out
}

fn filter(resource_type: &str, name: Option<&str>, pattern: &str) -> Value {
    let mut f = any_filter();
    f["resource_type"] = resource_type.into();
    f["name"] = name.into();
    f["pattern_type"] = pattern.into();
    f
}

#[test]
fn acls_decide_take_effect_on_every_shard_and_survive_a_restart() {
    let dir = common::tempdir().unwrap();
    let mut broker = Broker::start_with_config(&dir.path().join("data"), 2, &config(true), &[]);
    let admin = AclClient::new(&broker.bootstrap());
    for (topic, partitions) in [("orders-eu", 2), ("payments", 1), ("secret", 1)] {
        assert_eq!(admin.create_topic(topic, partitions)["error"], Value::Null, "{topic}");
    }
    assert_eq!(admin.produce("secret", &["s1"], 1)["delivered"], 1);
    admin.create_acls(&granted());

    std::fs::write(broker.config.as_ref().unwrap(), config(false)).unwrap();
    broker.stop();
    broker.restart();
    let me = AclClient::new(&broker.bootstrap());

    let topics = me.topics();
    assert_eq!(topics["orders-eu"], Value::Null, "{topics}");
    assert!(topics.get("secret").is_none() && topics.get("payments").is_none(), "undescribable shown: {topics}");

    let outside = me.produce("payments", &["p1", "p2"], 1);
    assert_eq!(outside["delivered"], 0, "{outside}");
    let errors = outside["errors"].as_array().unwrap();
    assert!(!errors.is_empty() && errors.iter().all(|e| e == "TOPIC_AUTHORIZATION_FAILED"), "{outside}");

    let values = ["o1", "o2", "o3", "o4", "o5", "o6"];
    let inside = me.produce("orders-eu", &values, 1);
    assert_eq!(inside["delivered"], values.len(), "{inside}");
    let read = me.consume("orders-eu", "readers", values.len());
    assert_eq!(read["errors"], Value::Array(vec![]), "{read}");
    let mut got: Vec<String> = read["values"].as_array().unwrap().iter().map(|v| v.as_str().unwrap().into()).collect();
    got.sort();
    assert_eq!(got, values, "{read}");
    let other = me.consume("orders-eu", "others", 1);
    assert!(other["errors"].as_array().unwrap().iter().any(|e| e == "GROUP_AUTHORIZATION_FAILED"), "{other}");

    let all = me.describe_acls(&any_filter());
    assert_eq!(sorted(&all["acls"]), sorted(&Value::from(granted())), "{all}");
    let prefixed = me.describe_acls(&filter("ANY", None, "PREFIXED"));
    assert_eq!(sorted(&prefixed["acls"]), sorted(&Value::from(granted()[..2].to_vec())), "{prefixed}");
    let literal = me.describe_acls(&filter("GROUP", Some("readers"), "LITERAL"));
    assert_eq!(sorted(&literal["acls"]), sorted(&Value::from(vec![granted()[2].clone()])), "{literal}");
    let matching = me.describe_acls(&filter("TOPIC", Some("orders-us"), "MATCH"));
    assert_eq!(sorted(&matching["acls"]), sorted(&Value::from(granted()[..2].to_vec())), "{matching}");

    // Fresh producers land on both shards (SO_REUSEPORT spreads
    // connections); each shard must refuse once the ACL is gone.
    let mut write = filter("TOPIC", Some("orders-"), "PREFIXED");
    write["operation"] = "WRITE".into();
    let deleted = me.delete_acls(&write);
    assert_eq!(sorted(&deleted["deleted"]), sorted(&Value::from(vec![granted()[0].clone()])), "{deleted}");
    me.assert_refused_on_both_shards(&broker, "orders-eu", 16);

    broker.stop();
    broker.restart();
    let me = AclClient::new(&broker.bootstrap());
    let all = me.describe_acls(&any_filter());
    assert_eq!(sorted(&all["acls"]), sorted(&Value::from(granted()[1..].to_vec())), "{all}");
    let refused = me.produce("orders-eu", &["after-restart"], 1);
    assert_eq!(refused["delivered"], 0, "{refused}");
}

/// Without any ACL and with the default settings, nothing changes: a
/// client may do everything, as before ACLs existed.
#[test]
fn no_acls_and_default_settings_allow_everything() {
    let dir = common::tempdir().unwrap();
    let broker = Broker::start(&dir.path().join("data"), 1);
    let c = AclClient::new(&broker.bootstrap());
    assert_eq!(c.create_topic("open", 1)["error"], Value::Null);
    assert_eq!(c.produce("open", &["a", "b"], 1)["delivered"], 2);
    let read = c.consume("open", "anyone", 2);
    assert_eq!(read["values"], serde_json::json!(["a", "b"]), "{read}");
    assert_eq!(c.describe_acls(&any_filter())["acls"], Value::Array(vec![]));
}
