//! DescribeConfigs (versions 1–4), AlterConfigs (0–2) and
//! IncrementalAlterConfigs (0–1), for topics and the broker.
//!
//! Topic configs are every one Kafka documents (`shard::topic_configs`):
//! described from the topic table, changed through the controller shard,
//! which persists them; the owners reopen the partitions with the new
//! settings. Broker configs are static (the TOML file and flags): described
//! read-only, and a change is refused with a message saying so.

use std::rc::Rc;

use kafka_protocol::messages::{
    alter_configs_response::AlterConfigsResourceResponse,
    describe_configs_response::{DescribeConfigsResourceResult, DescribeConfigsResult, DescribeConfigsSynonym},
    incremental_alter_configs_response, AlterConfigsRequest, AlterConfigsResponse, DescribeConfigsRequest,
    DescribeConfigsResponse, IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse,
};

use crate::protocol::errors::{self, ErrorCode};
use crate::{
    server::handlers::{create_topics::unavailable, str_bytes},
    shard::{
        messages::{AlterConfigs, ConfigChange, TopicOutcome},
        router::CONTROLLER,
        topic_configs::{self, ConfigType},
        Shard,
    },
};

/// Kafka's resource types.
const RESOURCE_TOPIC: i8 = 2;
const RESOURCE_BROKER: i8 = 4;

/// Kafka's config sources (DescribeConfigs v1+).
const SOURCE_DYNAMIC_TOPIC: i8 = 1;
const SOURCE_STATIC_BROKER: i8 = 4;
const SOURCE_DEFAULT: i8 = 5;

/// One described config: name, value, source, type, read-only.
struct Described {
    name: String,
    value: String,
    source: i8,
    kind: ConfigType,
    read_only: bool,
}

pub fn describe(shard: &Rc<Shard>, request: DescribeConfigsRequest, version: i16) -> DescribeConfigsResponse {
    let mut response = DescribeConfigsResponse::default();
    for resource in request.resources {
        let name = resource.resource_name.to_string();
        let mut result = DescribeConfigsResult::default();
        result.resource_type = resource.resource_type;
        result.resource_name = resource.resource_name.clone();
        let configs = match resource.resource_type {
            RESOURCE_TOPIC => topic_configs_of(shard, &name),
            RESOURCE_BROKER => broker_configs(shard, &name),
            other => Err((errors::INVALID_REQUEST, format!("resource type {other} has no configs here"))),
        };
        match configs {
            Err((code, message)) => {
                result.error_code = code;
                result.error_message = Some(str_bytes(&message));
            }
            Ok(all) => {
                // No keys, or an empty list, asks for every config (as Kafka reads it).
                let wanted = resource.configuration_keys.as_ref().filter(|keys| !keys.is_empty());
                result.configs = all
                    .into_iter()
                    .filter(|d| wanted.is_none_or(|keys| keys.iter().any(|k| k.as_str() == d.name)))
                    .map(|d| encode_config(d, version, request.include_synonyms))
                    .collect();
            }
        }
        response.results.push(result);
    }
    response
}

fn encode_config(d: Described, version: i16, synonyms: bool) -> DescribeConfigsResourceResult {
    let mut c = DescribeConfigsResourceResult::default();
    c.name = str_bytes(&d.name);
    c.value = Some(str_bytes(&d.value));
    c.read_only = d.read_only;
    c.config_source = d.source;
    if synonyms {
        let mut s = DescribeConfigsSynonym::default();
        s.name = str_bytes(&d.name);
        s.value = Some(str_bytes(&d.value));
        s.source = d.source;
        c.synonyms = vec![s];
    }
    // config_type and documentation exist from v3 only.
    if version >= 3 {
        c.config_type = d.kind as i8;
    }
    c
}

fn topic_configs_of(shard: &Rc<Shard>, topic: &str) -> Result<Vec<Described>, (ErrorCode, String)> {
    let table = shard.topics();
    let meta =
        table.topics.get(topic).ok_or((errors::UNKNOWN_TOPIC_OR_PARTITION, format!("topic {topic} does not exist")))?;
    Ok(topic_configs::describe(&meta.configs)
        .into_iter()
        .map(|(def, value, set)| Described {
            name: def.name.to_string(),
            value,
            source: if set { SOURCE_DYNAMIC_TOPIC } else { SOURCE_DEFAULT },
            kind: def.kind,
            read_only: false,
        })
        .collect())
}

/// The broker's settings under Kafka's names; `""` names the cluster default.
fn broker_configs(shard: &Rc<Shard>, broker: &str) -> Result<Vec<Described>, (ErrorCode, String)> {
    let s = &shard.settings;
    if !(broker.is_empty() || broker == s.node_id.to_string()) {
        return Err((errors::INVALID_REQUEST, format!("broker {broker} is not this broker (node {})", s.node_id)));
    }
    let fixed = |name: &str, value: String, kind| Described {
        name: name.to_string(),
        value,
        source: SOURCE_STATIC_BROKER,
        kind,
        read_only: true,
    };
    Ok(vec![
        fixed("node.id", s.node_id.to_string(), ConfigType::Int),
        fixed("broker.id", s.node_id.to_string(), ConfigType::Int),
        fixed("log.dirs", s.data_dir.display().to_string(), ConfigType::String),
        fixed("num.partitions", s.default_partitions.to_string(), ConfigType::Int),
        fixed("auto.create.topics.enable", s.auto_create_topics.to_string(), ConfigType::Boolean),
        fixed("default.replication.factor", "1".into(), ConfigType::Int),
        fixed("offsets.topic.replication.factor", "1".into(), ConfigType::Int),
        fixed("socket.request.max.bytes", s.max_request_bytes.to_string(), ConfigType::Int),
        fixed("max.connections", (s.max_connections_per_shard * shard.count).to_string(), ConfigType::Int),
    ])
}

pub async fn alter(shard: &Rc<Shard>, request: AlterConfigsRequest) -> AlterConfigsResponse {
    let resources = request
        .resources
        .into_iter()
        .map(|r| {
            let ops = r.configs.into_iter().map(|c| (c.name.to_string(), 0, c.value.map(|v| v.to_string()))).collect();
            (r.resource_type, r.resource_name.to_string(), true, ops)
        })
        .collect();
    let mut response = AlterConfigsResponse::default();
    response.responses = change(shard, resources, request.validate_only)
        .await
        .into_iter()
        .map(|(kind, name, error, message)| {
            let mut r = AlterConfigsResourceResponse::default();
            (r.resource_type, r.resource_name, r.error_code) = (kind, str_bytes(&name), error);
            r.error_message = message.as_deref().map(str_bytes);
            r
        })
        .collect();
    response
}

pub async fn incremental_alter(
    shard: &Rc<Shard>,
    request: IncrementalAlterConfigsRequest,
) -> IncrementalAlterConfigsResponse {
    let resources = request
        .resources
        .into_iter()
        .map(|r| {
            let ops = r
                .configs
                .into_iter()
                .map(|c| (c.name.to_string(), c.config_operation, c.value.map(|v| v.to_string())))
                .collect();
            (r.resource_type, r.resource_name.to_string(), false, ops)
        })
        .collect();
    let mut response = IncrementalAlterConfigsResponse::default();
    response.responses = change(shard, resources, request.validate_only)
        .await
        .into_iter()
        .map(|(kind, name, error, message)| {
            let mut r = incremental_alter_configs_response::AlterConfigsResourceResponse::default();
            (r.resource_type, r.resource_name, r.error_code) = (kind, str_bytes(&name), error);
            r.error_message = message.as_deref().map(str_bytes);
            r
        })
        .collect();
    response
}

/// (resource type, name, replace all, ops) in; (type, name, error, message)
/// out, in request order. Topic changes go to the controller in one call.
type Resource = (i8, String, bool, Vec<(String, i8, Option<String>)>);

async fn change(
    shard: &Rc<Shard>,
    resources: Vec<Resource>,
    validate_only: bool,
) -> Vec<(i8, String, ErrorCode, Option<String>)> {
    let topics: Vec<ConfigChange> = resources
        .iter()
        .filter(|r| r.0 == RESOURCE_TOPIC)
        .map(|(_, topic, replace_all, ops)| ConfigChange {
            topic: topic.clone(),
            replace_all: *replace_all,
            ops: ops.clone(),
        })
        .collect();
    let mut outcomes: Vec<TopicOutcome> = if topics.is_empty() {
        Vec::new()
    } else {
        let names = topics.iter().map(|t| t.topic.clone()).collect();
        let call = AlterConfigs { changes: topics, validate_only };
        shard.ask(CONTROLLER, call).await.unwrap_or_else(|_| unavailable(names))
    };
    outcomes.reverse();
    resources
        .into_iter()
        .map(|(kind, name, _, _)| match kind {
            RESOURCE_TOPIC => {
                let o = outcomes.pop().expect("one outcome per topic change");
                (kind, name, o.error, o.message)
            }
            RESOURCE_BROKER => (
                kind,
                name,
                errors::INVALID_REQUEST,
                Some(
                    "broker configs are static in shardlog: set them in the TOML file or with flags, and restart"
                        .into(),
                ),
            ),
            other => (kind, name, errors::INVALID_REQUEST, Some(format!("resource type {other} has no configs here"))),
        })
        .collect()
}
