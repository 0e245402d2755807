//! The topic table: names, partition counts, configs and which shard owns
//! each partition. Persisted crash-safely in `<data dir>/topics.toml` (write
//! new, fsync, rename) by the controller shard, and shipped read-only to
//! every shard when it changes.

use std::{borrow::Borrow, collections::BTreeMap, fmt, ops::Deref, path::Path, sync::Arc};

use serde::{Deserialize, Serialize};

use super::topic_errors::{ConfigError, TopicNameError};
use crate::storage::{file::write_atomically, LogConfig};

pub const TOPICS_FILE: &str = "topics.toml";
const FORMAT_VERSION: u32 = 1;

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct TopicTable {
    pub version: u32,
    /// Keyed by the interned name: a request that names an existing topic
    /// takes its handle from here ([`TopicTable::handle`]) instead of
    /// building a `String` for each partition it sends to an owner shard.
    pub topics: BTreeMap<TopicHandle, TopicMeta>,
    /// In a metadata quorum: this broker's node id, against which each
    /// partition's leader is compared (`TopicMeta::leaders`). None alone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_id: Option<i32>,
    /// In a metadata quorum: the index of the last controller log entry
    /// that changed the topics (`shard::cluster_topics`); a view of the log
    /// older than this is not applied, so a restart replaying its log from
    /// an old snapshot never removes a topic created since.
    #[serde(default)]
    pub cluster_index: u64,
}

/// A topic's name, shared by reference count: cloning it, sending it to
/// another shard (it is `Send`) or keeping it in a fetch session allocates
/// nothing. Compares, orders, hashes and prints (`{:?}` too) as the name
/// itself, so maps keyed by it are looked up with a plain `&str`.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct TopicHandle(Arc<str>);

impl TopicHandle {
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl From<&str> for TopicHandle {
    /// A new allocation: for a name the topic table does not hold (an
    /// unknown topic the answer must still name), or a new table entry.
    fn from(name: &str) -> Self {
        Self(Arc::from(name))
    }
}

impl Deref for TopicHandle {
    type Target = str;
    fn deref(&self) -> &str {
        &self.0
    }
}

impl Borrow<str> for TopicHandle {
    fn borrow(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for TopicHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for TopicHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&*self.0, f)
    }
}

impl Serialize for TopicHandle {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.0)
    }
}

impl<'de> Deserialize<'de> for TopicHandle {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Ok(Self(Arc::from(String::deserialize(d)?)))
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct TopicMeta {
    /// Kafka's topic id: 16 random bytes (hex in `topics.toml`).
    pub id: TopicId,
    /// Owner shard index of each partition, by partition number.
    pub shards: Vec<usize>,
    #[serde(default)]
    pub configs: BTreeMap<String, String>,
    #[serde(default)]
    pub internal: bool,
    /// In a metadata quorum: the broker leading each partition, by
    /// partition number. Empty alone: every partition is led here.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub leaders: Vec<i32>,
    /// In a metadata quorum: each partition's replicas, in-sync replicas
    /// and leader epoch, as the quorum's log holds them.
    #[serde(default, skip_serializing_if = "ReplicaSets::is_empty")]
    pub replicas: ReplicaSets,
}

/// Per partition, by partition number: who holds a copy, who is in sync,
/// and the leader epoch. Empty alone (and for a partition the lists do not
/// reach: its leader is its one replica).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct ReplicaSets {
    pub replicas: Vec<Vec<i32>>,
    pub isr: Vec<Vec<i32>>,
    pub epochs: Vec<i32>,
}

impl ReplicaSets {
    pub fn is_empty(&self) -> bool {
        self.replicas.is_empty()
    }
}

impl TopicMeta {
    pub fn partitions(&self) -> i32 {
        self.shards.len() as i32
    }

    /// The broker leading `partition`, if the quorum assigned one.
    pub fn leader(&self, partition: i32) -> Option<i32> {
        usize::try_from(partition).ok().and_then(|p| self.leaders.get(p)).copied()
    }

    /// Partition `partition`'s replicas (its leader alone when the quorum
    /// logged none; empty alone).
    pub fn replicas_of(&self, partition: i32) -> Vec<i32> {
        let p = usize::try_from(partition).unwrap_or(usize::MAX);
        match self.replicas.replicas.get(p) {
            Some(r) if !r.is_empty() => r.clone(),
            _ => self.leader(partition).into_iter().collect(),
        }
    }

    /// Partition `partition`'s in-sync replicas.
    pub fn isr_of(&self, partition: i32) -> Vec<i32> {
        let p = usize::try_from(partition).unwrap_or(usize::MAX);
        match self.replicas.isr.get(p) {
            Some(r) if !r.is_empty() => r.clone(),
            _ => self.replicas_of(partition),
        }
    }

    /// Partition `partition`'s leader epoch (0 alone).
    pub fn epoch_of(&self, partition: i32) -> i32 {
        usize::try_from(partition).ok().and_then(|p| self.replicas.epochs.get(p)).copied().unwrap_or(0)
    }

    pub fn id_bytes(&self) -> [u8; 16] {
        self.id.0
    }
}

/// A topic id. Written to `topics.toml` as 32 hex digits; anything else
/// there is an error when the table loads, never a silent zero id.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TopicId(pub [u8; 16]);

impl TopicId {
    fn hex(&self) -> String {
        self.0.iter().map(|b| format!("{b:02x}")).collect()
    }

    fn parse(s: &str) -> Result<Self, String> {
        let bad = || format!("topic id {s:?} is not 32 hex digits");
        if s.len() != 32 || !s.is_ascii() {
            return Err(bad());
        }
        let mut out = [0u8; 16];
        for (i, b) in out.iter_mut().enumerate() {
            *b = u8::from_str_radix(&s[i * 2..i * 2 + 2], 16).map_err(|_| bad())?;
        }
        Ok(Self(out))
    }
}

impl Serialize for TopicId {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.hex())
    }
}

impl<'de> Deserialize<'de> for TopicId {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        Self::parse(&s).map_err(serde::de::Error::custom)
    }
}

impl TopicTable {
    /// The name of the topic with this id (v13+ requests name topics by id).
    pub fn name_by_id(&self, id: &uuid::Uuid) -> Option<&TopicHandle> {
        self.topics.iter().find(|(_, m)| m.id_bytes() == *id.as_bytes()).map(|(n, _)| n)
    }

    /// The table's handle for `name`, if the topic exists: a reference
    /// count, not a copy of the name.
    pub fn handle(&self, name: &str) -> Option<TopicHandle> {
        self.topics.get_key_value(name).map(|(n, _)| n.clone())
    }

    /// Whether `topic` exists and has partition `partition`.
    pub fn has_partition(&self, topic: &str, partition: i32) -> bool {
        self.topics.get(topic).is_some_and(|m| (0..m.partitions()).contains(&partition))
    }

    /// Partitions of every topic this broker hosts (in a quorum, those it
    /// leads or follows).
    pub fn partition_count(&self) -> u64 {
        let hosted = |m: &TopicMeta| (0..m.partitions()).filter(|&p| self.hosted_here(m, p)).count();
        self.topics.values().map(|m| hosted(m) as u64).sum()
    }

    /// Leaves the quorum partitions `me` leads without a leader (-1): until
    /// the log this broker has applied holds its registration as this
    /// process, what it says `me` leads may be stale (a restarted broker's
    /// log is behind the fence that moved its partitions away), and a
    /// broker serving it would take writes it must later cut. Its
    /// registration entry (a new incarnation fences it first) moves them.
    pub fn disown(&mut self, me: i32) {
        for meta in self.topics.values_mut().filter(|m| !m.internal || !m.replicas.is_empty()) {
            for l in meta.leaders.iter_mut().filter(|l| **l == me) {
                *l = -1;
            }
        }
    }

    /// The other broker that leads `partition` of the topic `meta`, if one
    /// does; None when it is led here (always, alone).
    pub fn led_elsewhere(&self, meta: &TopicMeta, partition: i32) -> Option<i32> {
        let me = self.node_id?;
        meta.leader(partition).filter(|&l| l != me)
    }

    /// Whether this broker keeps a copy of `partition`: it leads it or is
    /// one of its replicas (always, alone).
    pub fn hosted_here(&self, meta: &TopicMeta, partition: i32) -> bool {
        match self.node_id {
            None => true,
            Some(me) => self.led_elsewhere(meta, partition).is_none() || meta.replicas_of(partition).contains(&me),
        }
    }

    /// The leader this broker copies `partition` from, when it is a
    /// follower of it.
    pub fn followed(&self, meta: &TopicMeta, partition: i32) -> Option<i32> {
        let me = self.node_id?;
        let leader = self.led_elsewhere(meta, partition).filter(|&l| l >= 0)?;
        meta.replicas_of(partition).contains(&me).then_some(leader)
    }

    pub fn load(data_dir: &Path) -> Result<Self, String> {
        let path = data_dir.join(TOPICS_FILE);
        let text = match std::fs::read_to_string(&path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Ok(Self { version: FORMAT_VERSION, ..Self::default() })
            }
            Err(e) => return Err(format!("cannot read {}: {e}", path.display())),
        };
        let table: Self = toml::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))?;
        if table.version != FORMAT_VERSION {
            return Err(format!("{}: unsupported format version {}", path.display(), table.version));
        }
        Ok(table)
    }

    pub fn save(&self, data_dir: &Path) -> std::io::Result<()> {
        let text = toml::to_string(self).map_err(std::io::Error::other)?;
        write_atomically(&data_dir.join(TOPICS_FILE), text.as_bytes())
    }
}

/// Checks a topic name the way Kafka does: 1–249 chars of `[a-zA-Z0-9._-]`,
/// not `.` or `..`.
pub fn validate_topic_name(name: &str) -> Result<(), TopicNameError> {
    if name.is_empty() || name.len() > 249 {
        return Err(TopicNameError::Length(name.len()));
    }
    if name == "." || name == ".." {
        return Err(TopicNameError::Dots);
    }
    if let Some(c) = name.chars().find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))) {
        return Err(TopicNameError::IllegalChar(c));
    }
    Ok(())
}

/// The log settings of a topic: broker defaults overridden by its configs.
/// Every Kafka topic config is checked (`topic_configs`); the ones the log
/// does not act on are kept in the table and described, nothing more.
pub fn log_config(configs: &BTreeMap<String, String>) -> Result<LogConfig, ConfigError> {
    let mut c = LogConfig::default();
    for (key, value) in configs {
        super::topic_configs::validate(key, value)?;
        let int =
            || value.parse::<i64>().map_err(|_| ConfigError::NotInteger { name: key.clone(), value: value.clone() });
        match key.as_str() {
            "cleanup.policy" => match value.as_str() {
                "delete" => (c.compacted, c.delete) = (false, true),
                "compact" => (c.compacted, c.delete) = (true, false),
                "compact,delete" | "delete,compact" | "compact, delete" | "delete, compact" => {
                    (c.compacted, c.delete) = (true, true)
                }
                _ => return Err(ConfigError::CleanupPolicy { value: value.clone() }),
            },
            "retention.ms" => c.retention_ms = Some(int()?).filter(|v| *v >= 0),
            "retention.bytes" => c.retention_bytes = u64::try_from(int()?).ok(),
            "segment.bytes" => c.segment_bytes = positive(key, int()?)? as u64,
            "segment.ms" => c.segment_ms = positive(key, int()?)?,
            "delete.retention.ms" => c.delete_retention_ms = int()?.max(0),
            "max.message.bytes" => c.max_batch_bytes = positive(key, int()?)? as usize,
            "index.interval.bytes" => c.index_interval_bytes = positive(key, int()?)? as u32,
            _ => {}
        }
    }
    Ok(c.clamped())
}

/// A topic's configs after `change`; the values are checked by `log_config`.
pub fn changed_configs(
    current: &BTreeMap<String, String>,
    change: &crate::shard::messages::ConfigChange,
) -> Result<BTreeMap<String, String>, ConfigError> {
    let mut configs = if change.replace_all { BTreeMap::new() } else { current.clone() };
    for (name, op, value) in &change.ops {
        let def = super::topic_configs::find(name).ok_or_else(|| ConfigError::Unknown { name: name.clone() })?;
        let list_op = matches!(op, 2 | 3);
        if list_op && def.kind != super::topic_configs::ConfigType::List {
            return Err(ConfigError::NotAList { name: name.clone() });
        }
        let value = value.clone();
        match (op, value) {
            (0, Some(v)) => {
                configs.insert(name.clone(), v);
            }
            (0, None) | (1, _) => {
                configs.remove(name);
            }
            (2 | 3, Some(v)) => {
                let have = configs.get(name).cloned().unwrap_or_else(|| super::topic_configs::default_value(def));
                let mut items: Vec<String> =
                    have.split(',').map(|s| s.trim().to_string()).filter(|s| !s.is_empty()).collect();
                for item in v.split(',').map(str::trim).filter(|s| !s.is_empty()) {
                    if *op == 2 && !items.iter().any(|i| i == item) {
                        items.push(item.to_string());
                    } else if *op == 3 {
                        items.retain(|i| i != item);
                    }
                }
                configs.insert(name.clone(), items.join(","));
            }
            (2 | 3, None) => return Err(ConfigError::NeedsValue { name: name.clone() }),
            (other, _) => return Err(ConfigError::UnknownOperation { name: name.clone(), operation: *other }),
        }
    }
    Ok(configs)
}

fn positive(key: &str, v: i64) -> Result<i64, ConfigError> {
    if v > 0 {
        Ok(v)
    } else {
        Err(ConfigError::NotPositive { name: key.to_string(), value: v })
    }
}

/// Creates an internal topic of the broker's own (`__consumer_offsets`,
/// `__transaction_state`) at first start: compacted, with `partitions`
/// spread over the shards, persisted before any shard starts.
pub fn ensure_internal_topic(
    table: &mut TopicTable,
    data_dir: &Path,
    name: &str,
    partitions: i32,
    segment_bytes: u64,
    shards: usize,
) -> Result<(), String> {
    if table.topics.contains_key(name) {
        return Ok(());
    }
    let configs = BTreeMap::from([
        ("cleanup.policy".to_string(), "compact".to_string()),
        ("segment.bytes".to_string(), segment_bytes.to_string()),
    ]);
    let meta = TopicMeta {
        id: new_topic_id(),
        shards: super::router::assign(name, partitions, shards),
        configs,
        internal: true,
        leaders: Vec::new(),
        replicas: Default::default(),
    };
    table.topics.insert(name.into(), meta);
    table.save(data_dir).map_err(|e| format!("cannot persist topic metadata in {}: {e}", data_dir.display()))
}

/// A fresh random topic id.
pub fn new_topic_id() -> TopicId {
    let mut bytes = [0u8; 16];
    if std::fs::File::open("/dev/urandom").and_then(|mut f| std::io::Read::read_exact(&mut f, &mut bytes)).is_err() {
        let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos());
        bytes = nanos.to_le_bytes();
    }
    TopicId(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compression_type_takes_kafkas_values() {
        for value in ["producer", "lz4", "zstd", "uncompressed"] {
            let m = BTreeMap::from([("compression.type".to_string(), value.to_string())]);
            assert!(log_config(&m).is_ok(), "{value}");
        }
        let m = BTreeMap::from([("compression.type".to_string(), "brotli".to_string())]);
        assert!(log_config(&m).unwrap_err().to_string().contains("brotli"));
    }

    #[test]
    fn names_follow_kafka_rules() {
        assert!(validate_topic_name("orders.v1_x-2").is_ok());
        assert!(validate_topic_name("").is_err());
        assert!(validate_topic_name("..").is_err());
        assert!(validate_topic_name("a/b").is_err());
        assert!(validate_topic_name(&"x".repeat(250)).is_err());
    }

    #[test]
    fn configs_map_to_log_settings() {
        let mut m = BTreeMap::new();
        m.insert("retention.ms".to_string(), "1000".to_string());
        m.insert("cleanup.policy".to_string(), "compact".to_string());
        m.insert("segment.bytes".to_string(), "1048576".to_string());
        let c = log_config(&m).unwrap();
        assert_eq!(c.retention_ms, Some(1000));
        assert!(c.compacted);
        assert_eq!(c.segment_bytes, 1 << 20);
        m.insert("segment.bytes".to_string(), "-5".to_string());
        assert!(log_config(&m).is_err());
        let mut bad = BTreeMap::new();
        bad.insert("nope".to_string(), "1".to_string());
        assert!(log_config(&bad).is_err());
    }

    #[test]
    fn table_round_trips_through_toml() {
        let mut t = TopicTable { version: FORMAT_VERSION, ..TopicTable::default() };
        t.topics.insert(
            "a".into(),
            TopicMeta {
                id: new_topic_id(),
                shards: vec![0, 1, 0],
                configs: BTreeMap::new(),
                internal: false,
                leaders: Vec::new(),
                replicas: Default::default(),
            },
        );
        let text = toml::to_string(&t).unwrap();
        let back: TopicTable = toml::from_str(&text).unwrap();
        assert_eq!(back, t);
        let hex: String = t.topics["a"].id_bytes().iter().map(|b| format!("{b:02x}")).collect();
        assert!(text.contains(&format!("id = \"{hex}\"")), "the id is stored as hex: {text}");
    }

    #[test]
    fn a_handle_is_the_tables_own_name_and_behaves_as_the_name() {
        let mut t = TopicTable::default();
        let meta = TopicMeta {
            id: new_topic_id(),
            shards: vec![0],
            configs: BTreeMap::new(),
            internal: false,
            leaders: Vec::new(),
            replicas: Default::default(),
        };
        t.topics.insert("orders".into(), meta);
        let (key, _) = t.topics.get_key_value("orders").unwrap();
        let handle = t.handle("orders").expect("the topic exists");
        assert!(Arc::ptr_eq(&handle.0, &key.0), "a reference count, not a copy");
        assert!(t.handle("nope").is_none());
        assert_eq!(handle, TopicHandle::from("orders"), "equal to any handle of the same name");
        assert_eq!(format!("{handle} {handle:?}"), "orders \"orders\"", "prints as the name does");
        assert_eq!(t.name_by_id(&uuid::Uuid::from_bytes(t.topics["orders"].id_bytes())), Some(&handle));
    }

    #[test]
    fn a_damaged_topic_id_fails_the_load_naming_the_file() {
        let dir = tempfile::tempdir().unwrap();
        for bad in ["00112233", "zz112233445566778899aabbccddeeff", ""] {
            let text = format!("version = 1\n[topics.a]\nid = \"{bad}\"\nshards = [0]\n");
            std::fs::write(dir.path().join(TOPICS_FILE), text).unwrap();
            let e = TopicTable::load(dir.path()).expect_err(bad);
            assert!(e.contains(TOPICS_FILE) && e.contains("32 hex digits"), "{e}");
        }
        let good = "version = 1\n[topics.a]\nid = \"00112233445566778899aabbccddeeff\"\nshards = [0]\n";
        std::fs::write(dir.path().join(TOPICS_FILE), good).unwrap();
        let t = TopicTable::load(dir.path()).unwrap();
        assert_eq!(t.topics["a"].id_bytes()[..3], [0x00, 0x11, 0x22]);
        assert_eq!(t.topics["a"].id_bytes()[15], 0xff);
    }
}
