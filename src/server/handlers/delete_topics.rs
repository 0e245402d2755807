//! DeleteTopics, versions 1–6: the controller removes the topics from the
//! table and the owning shards close and delete their partitions' files.

use std::rc::Rc;

use kafka_protocol::messages::{
    delete_topics_response::DeletableTopicResult, DeleteTopicsRequest, DeleteTopicsResponse, TopicName,
};

use crate::{
    server::handlers::str_bytes,
    shard::{router::CONTROLLER, Shard, ShardRequest, ShardResponse},
};

pub async fn handle(shard: &Rc<Shard>, request: DeleteTopicsRequest) -> DeleteTopicsResponse {
    // v1–v5 name topics in `topic_names`; v6 in `topics` (by name or id).
    let mut names: Vec<String> = request.topic_names.iter().map(|n| n.0.to_string()).collect();
    let table = shard.topics();
    for t in &request.topics {
        match &t.name {
            Some(n) => names.push(n.0.to_string()),
            None => {
                let by_id = table.topics.iter().find(|(_, m)| uuid::Uuid::from_bytes(m.id_bytes()) == t.topic_id);
                names.push(by_id.map_or_else(|| t.topic_id.to_string(), |(n, _)| n.clone()));
            }
        }
    }
    let outcomes = match shard.call(CONTROLLER, ShardRequest::DeleteTopics { names: names.clone() }).await {
        ShardResponse::Topics(o) => o,
        _ => crate::server::handlers::create_topics::unavailable(names),
    };
    let mut response = DeleteTopicsResponse::default();
    response.responses = outcomes
        .into_iter()
        .map(|o| {
            let mut r = DeletableTopicResult::default();
            r.name = Some(TopicName(str_bytes(&o.name)));
            r.topic_id = uuid::Uuid::from_bytes(o.id);
            r.error_code = o.error;
            r.error_message = o.message.as_deref().map(str_bytes);
            r
        })
        .collect();
    response
}
