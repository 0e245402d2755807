//! CreateTopics, versions 2–7: validated and applied by the controller shard,
//! which persists the topic table and has every shard open its partitions.

use std::rc::Rc;

use kafka_protocol::messages::{
    create_topics_request::CreatableTopic, create_topics_response::CreatableTopicResult, CreateTopicsRequest,
    CreateTopicsResponse, TopicName,
};

use crate::protocol::errors;
use crate::{
    server::handlers::str_bytes,
    shard::{
        messages::{CreateTopics, NewTopic, TopicOutcome},
        router::CONTROLLER,
        Shard,
    },
};

/// Asks the controller to create topics; used by CreateTopics and by
/// auto-creation in Metadata and Produce.
pub async fn create(shard: &Rc<Shard>, topics: Vec<NewTopic>, validate_only: bool) -> Vec<TopicOutcome> {
    let names: Vec<String> = topics.iter().map(|t| t.name.clone()).collect();
    shard.ask(CONTROLLER, CreateTopics { topics, validate_only }).await.unwrap_or_else(|_| unavailable(names))
}

/// Every topic answered with a retriable error: the controller is gone.
pub fn unavailable(names: Vec<String>) -> Vec<TopicOutcome> {
    names
        .into_iter()
        .map(|name| TopicOutcome {
            name,
            error: errors::KAFKA_STORAGE_ERROR,
            message: Some("broker shutting down".into()),
            id: [0; 16],
            partitions: 0,
        })
        .collect()
}

/// With explicit replica assignments Kafka takes the partition count from
/// them (the request then says -1); every replica is this broker.
fn partition_count(t: &CreatableTopic) -> i32 {
    if t.num_partitions == -1 && !t.assignments.is_empty() {
        t.assignments.len() as i32
    } else {
        t.num_partitions
    }
}

pub async fn handle(shard: &Rc<Shard>, request: CreateTopicsRequest) -> CreateTopicsResponse {
    let topics = request
        .topics
        .into_iter()
        .map(|t| NewTopic {
            name: t.name.0.to_string(),
            partitions: partition_count(&t),
            replication_factor: t.replication_factor,
            configs: t.configs.into_iter().filter_map(|c| Some((c.name.to_string(), c.value?.to_string()))).collect(),
        })
        .collect();
    let outcomes = create(shard, topics, request.validate_only).await;
    let mut response = CreateTopicsResponse::default();
    response.topics = outcomes
        .into_iter()
        .map(|o| {
            let mut r = CreatableTopicResult::default();
            r.name = TopicName(str_bytes(&o.name));
            r.topic_id = uuid::Uuid::from_bytes(o.id);
            r.error_code = o.error;
            r.error_message = o.message.as_deref().map(str_bytes);
            r.num_partitions = o.partitions;
            r.replication_factor = 1;
            r
        })
        .collect();
    response
}
