//! ACL helpers: confluent-kafka's AdminClient, producer and consumer
//! (`tests/clients/confluent_acls.py`) as one principal. `AclClient::new`
//! connects as `User:ANONYMOUS`; `with_config` adds client settings (e.g.
//! `security.protocol` and SASL ones) to every client it runs.

use std::{path::Path, process::Command};

use serde_json::{json, Value};

use super::broker::{metric_sum, metrics_text, Broker};

pub struct AclClient {
    pub bootstrap: String,
    /// Extra librdkafka settings for every client (JSON object).
    pub config: Value,
}

/// One ACL (or, with "ANY"/null fields, a filter) in the script's form.
pub fn acl(
    resource_type: &str,
    name: &str,
    pattern: &str,
    principal: &str,
    operation: &str,
    permission: &str,
) -> Value {
    json!({
        "resource_type": resource_type, "name": name, "pattern_type": pattern,
        "principal": principal, "host": "*", "operation": operation, "permission": permission,
    })
}

/// A filter matching every ACL.
pub fn any_filter() -> Value {
    json!({
        "resource_type": "ANY", "name": null, "pattern_type": "ANY",
        "principal": null, "host": null, "operation": "ANY", "permission": "ANY",
    })
}

impl AclClient {
    pub fn new(bootstrap: &str) -> Self {
        Self { bootstrap: bootstrap.to_string(), config: json!({}) }
    }

    pub fn with_config(bootstrap: &str, config: Value) -> Self {
        Self { bootstrap: bootstrap.to_string(), config }
    }

    /// Runs one command of the script; its JSON answer.
    pub fn run(&self, command: &str, args: &[&str]) -> Value {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/clients/confluent_acls.py");
        let out = Command::new("python3")
            .arg(&script)
            .arg(command)
            .arg(&self.bootstrap)
            .args(args)
            .env("SHARDLOG_CLIENT_CONFIG", self.config.to_string())
            .output()
            .expect("run python3");
        assert!(
            out.status.success(),
            "confluent_acls.py {command} {args:?} failed:\n{}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).expect("one JSON object")
    }

    /// Creates the ACLs; panics naming any that the broker refused.
    pub fn create_acls(&self, acls: &[Value]) {
        let answer = self.run("create-acls", &[&Value::from(acls.to_vec()).to_string()]);
        let results = answer["results"].as_array().expect("results");
        assert_eq!(results.len(), acls.len(), "{answer}");
        assert!(results.iter().all(Value::is_null), "CreateAcls refused some: {answer}");
    }

    /// The ACLs a filter matches, sorted.
    pub fn describe_acls(&self, filter: &Value) -> Value {
        self.run("describe-acls", &[&filter.to_string()])
    }

    pub fn delete_acls(&self, filter: &Value) -> Value {
        self.run("delete-acls", &[&filter.to_string()])
    }

    pub fn create_topic(&self, topic: &str, partitions: i32) -> Value {
        self.run("create-topic", &[topic, &partitions.to_string()])
    }

    /// Metadata for all topics: name → error name or null.
    pub fn topics(&self) -> Value {
        self.run("topics", &[])["topics"].clone()
    }

    /// `producers` fresh producers (fresh connections) each send `values`.
    pub fn produce(&self, topic: &str, values: &[&str], producers: usize) -> Value {
        self.run("produce", &[topic, &json!(values).to_string(), &producers.to_string()])
    }

    pub fn consume(&self, topic: &str, group: &str, count: usize) -> Value {
        self.run("consume", &[topic, group, &count.to_string()])
    }
}

/// Refusals `broker`'s shard `shard` has counted (`shardlog_authorization_denied`).
pub fn denied_on_shard(broker: &Broker, shard: usize) -> f64 {
    metric_sum(&metrics_text(broker), "shardlog_authorization_denied", &format!("shard=\"{shard}\""))
}

impl AclClient {
    /// `producers` fresh producers (fresh connections, which SO_REUSEPORT
    /// spreads over the shards) each send one record to `topic`: every one
    /// is refused with TOPIC_AUTHORIZATION_FAILED, and both of `broker`'s
    /// shards count refusals.
    pub fn assert_refused_on_both_shards(&self, broker: &Broker, topic: &str, producers: usize) {
        let before = [denied_on_shard(broker, 0), denied_on_shard(broker, 1)];
        let refused = self.produce(topic, &["refused"], producers);
        assert_eq!(refused["delivered"], 0, "{refused}");
        let errors = refused["errors"].as_array().unwrap();
        assert_eq!(errors.len(), producers, "{refused}");
        assert!(errors.iter().all(|e| e == "TOPIC_AUTHORIZATION_FAILED"), "{refused}");
        let after = [denied_on_shard(broker, 0), denied_on_shard(broker, 1)];
        assert!(after[0] > before[0] && after[1] > before[1], "denials per shard before {before:?}, after {after:?}");
    }
}
