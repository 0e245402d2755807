//! DeleteTopics, versions 1–6: the controller removes the topics from the
//! table and the owning shards close and delete their partitions' files.

use std::rc::Rc;

use kafka_protocol::messages::{
    delete_topics_response::DeletableTopicResult, DeleteTopicsRequest, DeleteTopicsResponse, TopicName,
};

use crate::protocol::errors;
use crate::{
    server::handlers::str_bytes,
    shard::{messages::DeleteTopics, router::CONTROLLER, Shard},
};

pub async fn handle(shard: &Rc<Shard>, request: DeleteTopicsRequest) -> DeleteTopicsResponse {
    // v1–v5 name topics in `topic_names`; v6 in `topics` (by name or id).
    // An id no topic has is answered UNKNOWN_TOPIC_ID here, with no name.
    let mut targets: Vec<Result<String, uuid::Uuid>> =
        request.topic_names.iter().map(|n| Ok(n.0.to_string())).collect();
    let table = shard.topics();
    for t in &request.topics {
        match &t.name {
            Some(n) => targets.push(Ok(n.0.to_string())),
            None => {
                targets.push(table.name_by_id(&t.topic_id).map(|n| n.to_string()).ok_or(t.topic_id));
            }
        }
    }
    let names: Vec<String> = targets.iter().filter_map(|t| t.as_ref().ok().cloned()).collect();
    let outcomes = match shard.ask(CONTROLLER, DeleteTopics { names: names.clone() }).await {
        Ok(o) => o,
        Err(_) => crate::server::handlers::create_topics::unavailable(names),
    };
    let mut outcomes = outcomes.into_iter();
    let mut response = DeleteTopicsResponse::default();
    for target in targets {
        let mut r = DeletableTopicResult::default();
        match target {
            Err(id) => {
                r.name = None;
                r.topic_id = id;
                r.error_code = errors::UNKNOWN_TOPIC_ID;
                r.error_message = Some(str_bytes(&format!("no topic has id {id}")));
            }
            Ok(_) => {
                let Some(o) = outcomes.next() else { break };
                r.name = Some(TopicName(str_bytes(&o.name)));
                r.topic_id = uuid::Uuid::from_bytes(o.id);
                r.error_code = o.error;
                r.error_message = o.message.as_deref().map(str_bytes);
            }
        }
        response.responses.push(r);
    }
    response
}
