//! Topic configs as Kafka documents them: every name is accepted, checked
//! against its type, persisted with the topic and described; the ones the
//! log acts on are mapped into `LogConfig` by `topics::log_config`.

use std::collections::BTreeMap;

use super::topic_errors::ConfigError;
use crate::storage::LogConfig;

/// Kafka's config value types, numbered as DescribeConfigs (v3+) sends them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConfigType {
    Boolean = 1,
    String = 2,
    Int = 3,
    Long = 5,
    Double = 6,
    List = 7,
}

/// One topic-level config.
#[derive(Debug)]
pub struct TopicConfigDef {
    pub name: &'static str,
    pub kind: ConfigType,
    /// Kafka's default; for configs the log acts on, shardlog's default is
    /// read from `LogConfig::default()` instead (see `default_value`).
    pub kafka_default: &'static str,
    /// The log acts on it; the others are stored and described only.
    pub applied: bool,
    /// The values allowed, for enumerations (empty: any of the type).
    pub choices: &'static [&'static str],
}

const fn def(name: &'static str, kind: ConfigType, kafka_default: &'static str, applied: bool) -> TopicConfigDef {
    TopicConfigDef { name, kind, kafka_default, applied, choices: &[] }
}

const MAX_LONG: &str = "9223372036854775807";

/// Every topic config of Kafka 3.9, by name.
pub const TOPIC_CONFIGS: &[TopicConfigDef] = &[
    TopicConfigDef {
        name: "cleanup.policy",
        kind: ConfigType::List,
        kafka_default: "delete",
        applied: true,
        choices: &["delete", "compact"],
    },
    TopicConfigDef {
        name: "compression.type",
        kind: ConfigType::String,
        kafka_default: "producer",
        // `producer` (keep what the producer sent) is what the log does;
        // recompressing to another codec is not done.
        applied: false,
        choices: &["uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"],
    },
    def("compression.gzip.level", ConfigType::Int, "-1", false),
    def("compression.lz4.level", ConfigType::Int, "9", false),
    def("compression.zstd.level", ConfigType::Int, "3", false),
    def("delete.retention.ms", ConfigType::Long, "86400000", true),
    def("file.delete.delay.ms", ConfigType::Long, "60000", false),
    def("flush.messages", ConfigType::Long, MAX_LONG, false),
    def("flush.ms", ConfigType::Long, MAX_LONG, false),
    def("follower.replication.throttled.replicas", ConfigType::List, "", false),
    def("index.interval.bytes", ConfigType::Int, "4096", true),
    def("leader.replication.throttled.replicas", ConfigType::List, "", false),
    def("local.retention.bytes", ConfigType::Long, "-2", false),
    def("local.retention.ms", ConfigType::Long, "-2", false),
    def("max.compaction.lag.ms", ConfigType::Long, MAX_LONG, false),
    def("max.message.bytes", ConfigType::Int, "1048588", true),
    def("message.downconversion.enable", ConfigType::Boolean, "true", false),
    def("message.format.version", ConfigType::String, "3.0-IV1", false),
    def("message.timestamp.after.max.ms", ConfigType::Long, MAX_LONG, false),
    def("message.timestamp.before.max.ms", ConfigType::Long, MAX_LONG, false),
    def("message.timestamp.difference.max.ms", ConfigType::Long, MAX_LONG, false),
    TopicConfigDef {
        name: "message.timestamp.type",
        kind: ConfigType::String,
        kafka_default: "CreateTime",
        applied: false,
        choices: &["CreateTime", "LogAppendTime"],
    },
    def("min.cleanable.dirty.ratio", ConfigType::Double, "0.5", false),
    def("min.compaction.lag.ms", ConfigType::Long, "0", false),
    def("min.insync.replicas", ConfigType::Int, "1", false),
    def("preallocate", ConfigType::Boolean, "false", false),
    def("remote.log.copy.disable", ConfigType::Boolean, "false", false),
    def("remote.log.delete.on.disable", ConfigType::Boolean, "false", false),
    def("remote.storage.enable", ConfigType::Boolean, "false", false),
    def("retention.bytes", ConfigType::Long, "-1", true),
    def("retention.ms", ConfigType::Long, "604800000", true),
    def("segment.bytes", ConfigType::Int, "1073741824", true),
    def("segment.index.bytes", ConfigType::Int, "10485760", false),
    def("segment.jitter.ms", ConfigType::Long, "0", false),
    def("segment.ms", ConfigType::Long, "604800000", true),
    def("unclean.leader.election.enable", ConfigType::Boolean, "false", false),
];

pub fn find(name: &str) -> Option<&'static TopicConfigDef> {
    TOPIC_CONFIGS.iter().find(|d| d.name == name)
}

/// Checks one value against its config's type and choices; the error names
/// the config.
pub fn validate(name: &str, value: &str) -> Result<(), ConfigError> {
    let Some(d) = find(name) else {
        return Err(ConfigError::Unknown { name: name.to_string() });
    };
    let ok = match d.kind {
        ConfigType::Boolean => matches!(value.to_ascii_lowercase().as_str(), "true" | "false"),
        ConfigType::Int => value.trim().parse::<i32>().is_ok(),
        ConfigType::Long => value.trim().parse::<i64>().is_ok(),
        ConfigType::Double => value.trim().parse::<f64>().is_ok_and(f64::is_finite),
        ConfigType::String | ConfigType::List => true,
    };
    if !ok {
        return Err(ConfigError::WrongType { name: name.to_string(), value: value.to_string(), kind: d.kind });
    }
    let items: Vec<&str> = match d.kind {
        ConfigType::List => value.split(',').map(str::trim).filter(|s| !s.is_empty()).collect(),
        _ => vec![value],
    };
    if let Some(bad) = items.iter().find(|v| !d.choices.is_empty() && !d.choices.contains(v)) {
        return Err(ConfigError::NotAllowed { name: name.to_string(), value: bad.to_string(), allowed: d.choices });
    }
    Ok(())
}

/// The value a topic without an override has.
pub fn default_value(d: &TopicConfigDef) -> String {
    let c = LogConfig::default();
    let or_minus_one = |v: Option<i64>| v.unwrap_or(-1).to_string();
    match d.name {
        "segment.bytes" => c.segment_bytes.to_string(),
        "segment.ms" => c.segment_ms.to_string(),
        "retention.ms" => or_minus_one(c.retention_ms),
        "retention.bytes" => or_minus_one(c.retention_bytes.map(|b| b as i64)),
        "delete.retention.ms" => c.delete_retention_ms.to_string(),
        "max.message.bytes" => c.max_batch_bytes.to_string(),
        "index.interval.bytes" => c.index_interval_bytes.to_string(),
        _ => d.kafka_default.to_string(),
    }
}

/// Every config of a topic: (definition, value, set on the topic).
pub fn describe(overrides: &BTreeMap<String, String>) -> Vec<(&'static TopicConfigDef, String, bool)> {
    TOPIC_CONFIGS
        .iter()
        .map(|d| match overrides.get(d.name) {
            Some(v) => (d, v.clone(), true),
            None => (d, default_value(d), false),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_are_checked_by_type_and_choices() {
        assert!(validate("compression.type", "lz4").is_ok());
        assert!(validate("compression.type", "brotli").unwrap_err().to_string().contains("compression.type"));
        assert!(validate("min.insync.replicas", "2").is_ok());
        assert!(validate("min.insync.replicas", "two").is_err());
        assert!(validate("cleanup.policy", "compact,delete").is_ok());
        assert!(validate("cleanup.policy", "compact,shred").is_err());
        assert!(validate("preallocate", "TRUE").is_ok());
        assert!(validate("min.cleanable.dirty.ratio", "0.25").is_ok());
        assert_eq!(validate("no.such.config", "1"), Err(ConfigError::Unknown { name: "no.such.config".into() }));
    }

    #[test]
    fn names_are_unique_and_defaults_are_valid() {
        for (i, d) in TOPIC_CONFIGS.iter().enumerate() {
            assert!(TOPIC_CONFIGS[i + 1..].iter().all(|o| o.name != d.name), "{} twice", d.name);
            assert!(validate(d.name, &default_value(d)).is_ok(), "default of {}", d.name);
        }
    }
}
