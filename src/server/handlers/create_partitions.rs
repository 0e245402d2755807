//! CreatePartitions, versions 0–3: adds partitions to existing topics. The
//! controller shard checks and persists the new counts, and every shard
//! opens the new partitions it owns; clients see them in Metadata and
//! group members rebalance onto them (their leader notices the new count).

use std::rc::Rc;

use kafka_protocol::messages::{
    create_partitions_response::CreatePartitionsTopicResult, CreatePartitionsRequest, CreatePartitionsResponse,
    TopicName,
};

use crate::{
    server::handlers::{create_topics::unavailable, str_bytes},
    shard::{
        messages::{CreatePartitions, NewPartitions},
        router::CONTROLLER,
        Shard,
    },
};

pub async fn handle(shard: &Rc<Shard>, request: CreatePartitionsRequest) -> CreatePartitionsResponse {
    let topics: Vec<NewPartitions> = request
        .topics
        .into_iter()
        .map(|t| NewPartitions {
            name: t.name.0.to_string(),
            count: t.count,
            // One broker: an assignment may only name this broker, once per partition.
            replicas_per_partition: t
                .assignments
                .map(|a| a.iter().map(|p| p.broker_ids.len()).max().unwrap_or(1))
                .unwrap_or(1),
        })
        .collect();
    let names: Vec<String> = topics.iter().map(|t| t.name.clone()).collect();
    let call = CreatePartitions { topics, validate_only: request.validate_only };
    let outcomes = shard.ask(CONTROLLER, call).await.unwrap_or_else(|_| unavailable(names));
    let mut response = CreatePartitionsResponse::default();
    response.results = outcomes
        .into_iter()
        .map(|o| {
            let mut r = CreatePartitionsTopicResult::default();
            r.name = TopicName(str_bytes(&o.name));
            r.error_code = o.error;
            r.error_message = o.message.as_deref().map(str_bytes);
            r
        })
        .collect();
    response
}
