//! Metadata, versions 0–12. The brokers are this one alone, or those the
//! metadata quorum knows alive (`controller`); each partition is led by
//! this broker alone, or in a quorum by the broker the quorum's log names,
//! with the replicas and in-sync replicas it names. Missing topics are created when
//! auto-creation is on and the client allows it.

use std::rc::Rc;

use kafka_protocol::messages::{
    metadata_response::{MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic},
    MetadataRequest, MetadataResponse, TopicName,
};

use crate::protocol::errors;
use crate::{controller::advertised_brokers, security::Session};
use crate::{
    server::handlers::{create_topics::create, str_bytes},
    shard::{
        messages::NewTopic,
        topics::{validate_topic_name, TopicMeta},
        Shard,
    },
};

/// Brokers are advertised at the address of the listener the client came
/// in on (`session.listener`).
pub async fn handle(shard: &Rc<Shard>, request: MetadataRequest, version: i16, session: &Session) -> MetadataResponse {
    // v0 cannot send a null list: there an empty one means every topic.
    let topics = request.topics.filter(|ts| version >= 1 || !ts.is_empty());
    let wanted: Option<Vec<String>> =
        topics.map(|ts| ts.into_iter().filter_map(|t| t.name.map(|n| n.0.to_string())).collect());
    // v0 has no flag and always allowed auto-creation; from v4 the client says.
    let may_create = shard.settings.auto_create_topics && (version < 4 || request.allow_auto_topic_creation);
    if let (Some(names), true) = (&wanted, may_create) {
        let table = shard.topics();
        let missing: Vec<NewTopic> = names
            .iter()
            .filter(|n| !table.topics.contains_key(n.as_str()) && validate_topic_name(n).is_ok())
            .map(|n| NewTopic { name: n.clone(), partitions: -1, replication_factor: -1, configs: Vec::new() })
            .collect();
        if !missing.is_empty() {
            create(shard, missing, false).await;
        }
    }
    let table = shard.topics();
    let names: Vec<String> = wanted.unwrap_or_else(|| table.topics.keys().map(|n| n.to_string()).collect());
    let mut response = MetadataResponse::default();
    let (brokers, controller) = advertised_brokers(&shard.settings, &session.listener);
    let live: Vec<i32> = brokers.iter().map(|b| b.node_id).collect();
    for b in brokers {
        let mut broker = MetadataResponseBroker::default();
        broker.node_id = b.node_id.into();
        broker.host = str_bytes(&b.host);
        broker.port = b.port;
        broker.rack = b.rack.as_deref().map(str_bytes);
        response.brokers.push(broker);
    }
    response.cluster_id = Some(str_bytes(&shard.settings.cluster_id));
    response.controller_id = controller.into();
    for name in names {
        let mut topic = MetadataResponseTopic::default();
        topic.name = Some(TopicName(str_bytes(&name)));
        match table.topics.get(name.as_str()) {
            // A name Kafka refuses: the client gives up instead of waiting
            // for a topic that can never exist.
            None if validate_topic_name(&name).is_err() => topic.error_code = errors::INVALID_TOPIC_EXCEPTION,
            None => topic.error_code = errors::UNKNOWN_TOPIC_OR_PARTITION,
            Some(meta) => {
                topic.topic_id = uuid::Uuid::from_bytes(meta.id_bytes());
                topic.is_internal = meta.internal;
                topic.partitions = (0..meta.partitions()).map(|p| partition(shard, meta, p, &live)).collect();
            }
        }
        response.topics.push(topic);
    }
    response
}

/// A partition's leader, replicas and in-sync replicas: this broker alone,
/// or as the quorum's log holds them. A leader the quorum has fenced is not
/// available (the client waits and asks again), as Kafka says of an
/// offline partition.
fn partition(shard: &Shard, meta: &TopicMeta, index: i32, live: &[i32]) -> MetadataResponsePartition {
    let leader = meta.leader(index).unwrap_or(shard.settings.node_id);
    let mut p = MetadataResponsePartition::default();
    p.partition_index = index;
    p.leader_epoch = meta.epoch_of(index);
    let replicas = meta.replicas_of(index);
    let isr = meta.isr_of(index);
    p.replica_nodes =
        if replicas.is_empty() { vec![leader.into()] } else { replicas.into_iter().map(Into::into).collect() };
    p.isr_nodes = if isr.is_empty() { vec![leader.into()] } else { isr.into_iter().map(Into::into).collect() };
    if live.contains(&leader) {
        p.leader_id = leader.into();
    } else {
        p.error_code = errors::LEADER_NOT_AVAILABLE;
        p.leader_id = (-1).into();
    }
    p
}
