//! `shardlog topics list|create|describe|alter|delete --bootstrap HOST:PORT`:
//! topic administration over the Kafka protocol, on par with `rpk topic`.
//! Works against any Kafka-compatible broker that serves the APIs used.

use kafka_protocol::{
    messages::{
        create_partitions_request::CreatePartitionsTopic,
        create_topics_request::{CreatableTopic, CreatableTopicConfig},
        describe_configs_request::DescribeConfigsResource,
        incremental_alter_configs_request::{AlterConfigsResource, AlterableConfig},
        metadata_request::MetadataRequestTopic,
        ApiKey, CreatePartitionsRequest, CreatePartitionsResponse, CreateTopicsRequest, CreateTopicsResponse,
        DeleteTopicsRequest, DeleteTopicsResponse, DescribeConfigsRequest, DescribeConfigsResponse,
        IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse, ListOffsetsResponse, MetadataRequest,
        MetadataResponse, TopicName,
    },
    protocol::StrBytes,
};
use serde_json::{json, Value};

use crate::{cli::CLIENT_ID, client::Client};

/// Kafka's config source for a value set on the topic itself.
const SOURCE_DYNAMIC_TOPIC: i8 = 1;

fn str(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_string())
}

/// "KEY=VALUE" → (KEY, VALUE).
pub fn parse_config(s: &str) -> Result<(String, String), String> {
    match s.split_once('=') {
        Some((k, v)) if !k.is_empty() => Ok((k.to_string(), v.to_string())),
        _ => Err(format!("{s:?}: expected KEY=VALUE, e.g. retention.ms=86400000")),
    }
}

/// An error code with its topic, as a message; Ok for 0.
fn check(what: &str, topic: &str, code: i16, message: Option<&StrBytes>) -> Result<(), String> {
    if code == 0 {
        return Ok(());
    }
    let detail = message.map(|m| format!(": {m}")).unwrap_or_default();
    Err(format!("{what} {topic}: Kafka error {code}{detail}"))
}

fn metadata(c: &mut Client, topics: Option<&[&str]>) -> Result<MetadataResponse, String> {
    let mut req = MetadataRequest::default();
    req.topics = topics.map(|names| {
        names
            .iter()
            .map(|n| {
                let mut t = MetadataRequestTopic::default();
                t.name = Some(TopicName(str(n)));
                t
            })
            .collect()
    });
    Ok(c.call(ApiKey::Metadata, 12, &req)?)
}

pub fn list(bootstrap: &str) -> Result<(), String> {
    let mut c = Client::connect(bootstrap, CLIENT_ID)?;
    let meta = metadata(&mut c, None)?;
    let mut rows: Vec<(String, usize, bool)> = meta
        .topics
        .iter()
        .filter_map(|t| Some((t.name.as_ref()?.0.to_string(), t.partitions.len(), t.is_internal)))
        .collect();
    rows.sort();
    println!("{:<50} {:>10}  INTERNAL", "NAME", "PARTITIONS");
    for (name, partitions, internal) in rows {
        println!("{name:<50} {partitions:>10}  {}", if internal { "yes" } else { "" });
    }
    Ok(())
}

pub fn create(
    bootstrap: &str,
    names: &[String],
    partitions: i32,
    replicas: i16,
    configs: &[(String, String)],
) -> Result<(), String> {
    let mut c = Client::connect(bootstrap, CLIENT_ID)?;
    let mut req = CreateTopicsRequest::default();
    req.timeout_ms = 30_000;
    for name in names {
        let mut t = CreatableTopic::default();
        t.name = TopicName(str(name));
        t.num_partitions = partitions;
        t.replication_factor = replicas;
        t.configs = configs
            .iter()
            .map(|(k, v)| {
                let mut cfg = CreatableTopicConfig::default();
                cfg.name = str(k);
                cfg.value = Some(str(v));
                cfg
            })
            .collect();
        req.topics.push(t);
    }
    let resp: CreateTopicsResponse = c.call(ApiKey::CreateTopics, 7, &req)?;
    let mut failed = Vec::new();
    for t in &resp.topics {
        match check("creating", &t.name.0, t.error_code, t.error_message.as_ref()) {
            Ok(()) => println!("created {} ({} partitions)", t.name.0.as_str(), t.num_partitions),
            Err(e) => failed.push(e),
        }
    }
    if failed.is_empty() {
        Ok(())
    } else {
        Err(failed.join("\n"))
    }
}

pub fn delete(bootstrap: &str, names: &[String]) -> Result<(), String> {
    let mut c = Client::connect(bootstrap, CLIENT_ID)?;
    let mut req = DeleteTopicsRequest::default();
    req.topic_names = names.iter().map(|n| TopicName(str(n))).collect();
    req.timeout_ms = 30_000;
    let resp: DeleteTopicsResponse = c.call(ApiKey::DeleteTopics, 5, &req)?;
    let mut failed = Vec::new();
    for r in &resp.responses {
        let name = r.name.as_ref().map_or("?".to_string(), |n| n.0.to_string());
        match check("deleting", &name, r.error_code, r.error_message.as_ref()) {
            Ok(()) => println!("deleted {name}"),
            Err(e) => failed.push(e),
        }
    }
    if failed.is_empty() {
        Ok(())
    } else {
        Err(failed.join("\n"))
    }
}

/// Grows the topic to `partitions` and/or sets and deletes configs.
pub fn alter(
    bootstrap: &str,
    name: &str,
    partitions: Option<i32>,
    set: &[(String, String)],
    unset: &[String],
) -> Result<(), String> {
    let mut c = Client::connect(bootstrap, CLIENT_ID)?;
    if let Some(count) = partitions {
        let mut t = CreatePartitionsTopic::default();
        t.name = TopicName(str(name));
        t.count = count;
        let mut req = CreatePartitionsRequest::default();
        req.topics = vec![t];
        req.timeout_ms = 30_000;
        let resp: CreatePartitionsResponse = c.call(ApiKey::CreatePartitions, 3, &req)?;
        for r in &resp.results {
            check("adding partitions to", name, r.error_code, r.error_message.as_ref())?;
        }
        println!("{name}: {count} partitions");
    }
    if set.is_empty() && unset.is_empty() {
        return Ok(());
    }
    let op = |key: &str, operation: i8, value: Option<&str>| {
        let mut cfg = AlterableConfig::default();
        cfg.name = str(key);
        cfg.config_operation = operation;
        cfg.value = value.map(str);
        cfg
    };
    let mut resource = AlterConfigsResource::default();
    resource.resource_type = 2;
    resource.resource_name = str(name);
    resource.configs = set.iter().map(|(k, v)| op(k, 0, Some(v))).chain(unset.iter().map(|k| op(k, 1, None))).collect();
    let mut req = IncrementalAlterConfigsRequest::default();
    req.resources = vec![resource];
    let resp: IncrementalAlterConfigsResponse = c.call(ApiKey::IncrementalAlterConfigs, 1, &req)?;
    for r in &resp.responses {
        check("altering configs of", name, r.error_code, r.error_message.as_ref())?;
    }
    println!("{name}: {} config(s) set, {} deleted", set.len(), unset.len());
    Ok(())
}

/// Partitions with leader and offsets, and the topic's configs (those set
/// on it, or every one with `all_configs`).
pub fn describe(bootstrap: &str, name: &str, all_configs: bool, as_json: bool) -> Result<(), String> {
    let mut c = Client::connect(bootstrap, CLIENT_ID)?;
    let meta = metadata(&mut c, Some(&[name]))?;
    let topic = meta.topics.first().ok_or_else(|| format!("no metadata for topic {name}"))?;
    check("describing", name, topic.error_code, None)?;
    let mut partitions: Vec<(i32, i32)> = topic.partitions.iter().map(|p| (p.partition_index, p.leader_id.0)).collect();
    partitions.sort();
    let earliest = offsets(&mut c, name, &partitions, -2)?;
    let latest = offsets(&mut c, name, &partitions, -1)?;
    let configs = configs(&mut c, name)?;
    let rows: Vec<Value> = partitions
        .iter()
        .zip(earliest.iter().zip(&latest))
        .map(|(&(p, leader), (&start, &end))| json!({"partition": p, "leader": leader, "log_start_offset": start, "high_watermark": end}))
        .collect();
    let shown: Vec<&(String, String, bool)> = configs.iter().filter(|(_, _, set)| all_configs || *set).collect();
    if as_json {
        let config_map: serde_json::Map<String, Value> =
            shown.iter().map(|(k, v, set)| (k.clone(), json!({"value": v, "set_on_topic": set}))).collect();
        let out = json!({"name": name, "internal": topic.is_internal, "partitions": rows, "configs": config_map});
        println!("{}", serde_json::to_string_pretty(&out).map_err(|e| e.to_string())?);
        return Ok(());
    }
    println!("NAME        {name}");
    println!("PARTITIONS  {}", partitions.len());
    println!("INTERNAL    {}", topic.is_internal);
    println!();
    println!("{:>9} {:>6} {:>18} {:>18}", "PARTITION", "LEADER", "LOG-START-OFFSET", "HIGH-WATERMARK");
    for ((p, leader), (start, end)) in partitions.iter().zip(earliest.iter().zip(&latest)) {
        println!("{p:>9} {leader:>6} {start:>18} {end:>18}");
    }
    println!();
    println!("{:<45} {:<25} SOURCE", "CONFIG", "VALUE");
    for (k, v, set) in shown {
        println!("{k:<45} {v:<25} {}", if *set { "topic" } else { "default" });
    }
    Ok(())
}

fn offsets(c: &mut Client, name: &str, partitions: &[(i32, i32)], which: i64) -> Result<Vec<i64>, String> {
    let req = crate::client::list_offsets_request(name, partitions.iter().map(|&(p, _)| p), which);
    let resp: ListOffsetsResponse = c.call(ApiKey::ListOffsets, 5, &req)?;
    let answered: Vec<(i32, i64)> =
        resp.topics.iter().flat_map(|t| t.partitions.iter()).map(|p| (p.partition_index, p.offset)).collect();
    Ok(partitions.iter().map(|&(p, _)| answered.iter().find(|a| a.0 == p).map_or(-1, |a| a.1)).collect())
}

/// (name, value, set on the topic), sorted by name.
fn configs(c: &mut Client, name: &str) -> Result<Vec<(String, String, bool)>, String> {
    let mut resource = DescribeConfigsResource::default();
    resource.resource_type = 2;
    resource.resource_name = str(name);
    resource.configuration_keys = None;
    let mut req = DescribeConfigsRequest::default();
    req.resources = vec![resource];
    let resp: DescribeConfigsResponse = c.call(ApiKey::DescribeConfigs, 4, &req)?;
    let mut out = Vec::new();
    for r in &resp.results {
        check("describing configs of", name, r.error_code, r.error_message.as_ref())?;
        for cfg in &r.configs {
            let value = cfg.value.as_ref().map_or(String::new(), |v| v.to_string());
            out.push((cfg.name.to_string(), value, cfg.config_source == SOURCE_DYNAMIC_TOPIC));
        }
    }
    out.sort();
    Ok(out)
}
