//! Talking to the broker under test before and around the run: version
//! negotiation, topic creation, partition leaders, offsets. Any
//! Kafka-compatible broker, one or many nodes: each partition's records go
//! to its leader. The framing is `protocol::client`'s, over `crate::client`.

use std::{
    collections::BTreeMap,
    time::{Duration, Instant},
};

use kafka_protocol::{
    messages::{
        create_topics_request::CreatableTopic, metadata_request::MetadataRequestTopic, ApiKey, ApiVersionsRequest,
        ApiVersionsResponse, CreateTopicsRequest, CreateTopicsResponse, ListOffsetsResponse, MetadataRequest,
        MetadataResponse, TopicName,
    },
    protocol::StrBytes,
};

use crate::client::{list_offsets_request, Client};

pub const CLIENT_ID: &str = "shardlog-bench";

/// The versions this tool speaks with the broker: the newest each side
/// knows, capped where newer versions need topic ids.
#[derive(Debug, Clone, Copy)]
pub struct Versions {
    pub produce: i16,
    pub fetch: i16,
    pub metadata: i16,
    pub list_offsets: i16,
    pub create_topics: i16,
}

/// Where the topic's partitions live.
#[derive(Debug, Clone)]
pub struct Layout {
    pub versions: Versions,
    /// Leader node → its address.
    pub brokers: BTreeMap<i32, String>,
    /// Partition → leader node.
    pub leaders: BTreeMap<i32, i32>,
}

impl Layout {
    /// Partitions grouped by leader address.
    pub fn by_leader(&self) -> BTreeMap<String, Vec<i32>> {
        let mut out: BTreeMap<String, Vec<i32>> = BTreeMap::new();
        for (&p, node) in &self.leaders {
            out.entry(self.brokers[node].clone()).or_default().push(p);
        }
        out
    }
}

pub(super) fn pick(
    resp: &ApiVersionsResponse,
    key: ApiKey,
    ours: std::ops::RangeInclusive<i16>,
) -> Result<i16, String> {
    let theirs = resp.api_keys.iter().find(|k| k.api_key == key as i16);
    let Some(theirs) = theirs else { return Err(format!("the broker does not offer {key:?}")) };
    let top = theirs.max_version.min(*ours.end());
    if top < *ours.start() || top < theirs.min_version {
        return Err(format!(
            "no common {key:?} version: the broker offers {}..={}, this tool speaks {}..={}",
            theirs.min_version,
            theirs.max_version,
            ours.start(),
            ours.end()
        ));
    }
    Ok(top)
}

pub fn negotiate(client: &mut Client) -> Result<Versions, String> {
    let resp: ApiVersionsResponse = client.call(ApiKey::ApiVersions, 0, &ApiVersionsRequest::default())?;
    if resp.error_code != 0 {
        return Err(format!("ApiVersions failed with error {}", resp.error_code));
    }
    Ok(Versions {
        produce: pick(&resp, ApiKey::Produce, 3..=9)?,
        fetch: pick(&resp, ApiKey::Fetch, 4..=12)?,
        metadata: pick(&resp, ApiKey::Metadata, 1..=12)?,
        list_offsets: pick(&resp, ApiKey::ListOffsets, 1..=7)?,
        create_topics: pick(&resp, ApiKey::CreateTopics, 2..=7)?,
    })
}

fn topic_name(name: &str) -> TopicName {
    TopicName(StrBytes::from_string(name.to_string()))
}

/// Creates `topic` with `partitions` if it is missing, waits until every
/// partition has a leader, and returns where they are. An existing topic
/// with a different partition count is an error, not silently used.
pub fn prepare_topic(
    bootstrap: &str,
    topic: &str,
    partitions: i32,
    replication: i16,
    configs: &[(String, String)],
) -> Result<Layout, String> {
    let mut client = Client::connect(bootstrap, CLIENT_ID)?;
    let versions = negotiate(&mut client)?;
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut created = false;
    loop {
        let mut req = MetadataRequest::default();
        let mut t = MetadataRequestTopic::default();
        t.name = Some(topic_name(topic));
        req.topics = Some(vec![t]);
        req.allow_auto_topic_creation = false;
        let resp: MetadataResponse = client.call(ApiKey::Metadata, versions.metadata, &req)?;
        let brokers: BTreeMap<i32, String> =
            resp.brokers.iter().map(|b| (b.node_id.0, format!("{}:{}", b.host.as_str(), b.port))).collect();
        let t = resp.topics.first().ok_or("Metadata answered without the topic")?;
        match t.error_code {
            0 => {
                let have = t.partitions.len() as i32;
                if have != partitions {
                    return Err(format!("topic {topic} exists with {have} partitions, not the {partitions} asked for"));
                }
                let leaders: BTreeMap<i32, i32> =
                    t.partitions.iter().map(|p| (p.partition_index, p.leader_id.0)).collect();
                if leaders.values().all(|l| brokers.contains_key(l)) {
                    return Ok(Layout { versions, brokers, leaders });
                }
            }
            3 if !created => {
                create_topic(&mut client, versions, topic, partitions, replication, configs)?;
                created = true;
            }
            3 | 5 => {} // not yet visible, or leaders being elected
            code => return Err(format!("Metadata for topic {topic}: error {code}")),
        }
        if Instant::now() > deadline {
            return Err(format!("topic {topic}: partitions without a reachable leader after 30 s"));
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn create_topic(
    client: &mut Client,
    versions: Versions,
    topic: &str,
    partitions: i32,
    replication: i16,
    configs: &[(String, String)],
) -> Result<(), String> {
    let mut t = CreatableTopic::default();
    t.name = topic_name(topic);
    t.num_partitions = partitions;
    t.replication_factor = replication;
    t.configs = configs
        .iter()
        .map(|(k, v)| {
            let mut c = kafka_protocol::messages::create_topics_request::CreatableTopicConfig::default();
            c.name = StrBytes::from_string(k.clone());
            c.value = Some(StrBytes::from_string(v.clone()));
            c
        })
        .collect();
    let mut req = CreateTopicsRequest::default();
    req.topics = vec![t];
    req.timeout_ms = 30_000;
    let resp: CreateTopicsResponse = client.call(ApiKey::CreateTopics, versions.create_topics, &req)?;
    match resp.topics.first().map(|t| t.error_code) {
        Some(0) | Some(36) => Ok(()), // created, or someone else just did
        Some(code) => Err(format!(
            "CreateTopics {topic} ({partitions} partitions): error {code}{}",
            resp.topics[0].error_message.as_ref().map_or(String::new(), |m| format!(": {}", m.as_str()))
        )),
        None => Err(format!("CreateTopics {topic}: no answer for the topic")),
    }
}

/// The latest (`-1`) or earliest (`-2`) offset of each partition.
pub fn offsets(layout: &Layout, topic: &str, which: i64) -> Result<BTreeMap<i32, i64>, String> {
    let mut out = BTreeMap::new();
    for (addr, partitions) in layout.by_leader() {
        let mut client = Client::connect(&addr, CLIENT_ID)?;
        let req = list_offsets_request(topic, partitions.iter().copied(), which);
        let resp: ListOffsetsResponse = client.call(ApiKey::ListOffsets, layout.versions.list_offsets, &req)?;
        for t in resp.topics {
            for p in t.partitions {
                if p.error_code != 0 {
                    return Err(format!("ListOffsets {topic}-{}: error {}", p.partition_index, p.error_code));
                }
                out.insert(p.partition_index, p.offset);
            }
        }
    }
    Ok(out)
}
