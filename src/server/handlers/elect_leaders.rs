//! ElectLeaders, versions 0–2: an operator moves partitions back to their
//! preferred replica (type 0; v0 knows no other) or, unclean (type 1),
//! gives a partition whose in-sync replicas are all down to a live
//! replica. Needs ALTER on the cluster, as Kafka's; the controller shard
//! asks the quorum (`shard::elections`).

use std::{collections::BTreeMap, rc::Rc};

use kafka_protocol::messages::{
    elect_leaders_response::{PartitionResult, ReplicaElectionResult},
    ElectLeadersRequest, ElectLeadersResponse, TopicName,
};

use crate::{
    controller::PartitionOutcome,
    protocol::errors::{self, ErrorCode},
    security::{acl::Operation, Session},
    server::{authz::on_cluster, handlers::str_bytes},
    shard::{elections::ElectLeaders, router::CONTROLLER, Shard},
};

pub async fn handle(shard: &Rc<Shard>, session: &Session, req: ElectLeadersRequest) -> ElectLeadersResponse {
    let named: Option<Vec<(String, Vec<i32>)>> = req
        .topic_partitions
        .as_ref()
        .map(|ts| ts.iter().map(|t| (t.topic.0.to_string(), t.partitions.clone())).collect());
    if !on_cluster(shard, session, Operation::Alter) {
        let message = "ALTER on the cluster is needed to elect leaders";
        return refused(named, errors::CLUSTER_AUTHORIZATION_FAILED, message);
    }
    if !matches!(req.election_type, 0 | 1) {
        return refused(named, errors::INVALID_REQUEST, &format!("election type {} is not 0 or 1", req.election_type));
    }
    let call = ElectLeaders { unclean: req.election_type == 1, partitions: named.clone() };
    let answer = shard.ask(CONTROLLER, call).await.unwrap_or_else(|_| Err("the controller shard is gone".into()));
    match answer {
        Ok(results) => respond(errors::NONE, results),
        Err(e) => refused(named, errors::REQUEST_TIMED_OUT, &e),
    }
}

/// Every partition named answered `code` (and the whole request too).
fn refused(named: Option<Vec<(String, Vec<i32>)>>, code: ErrorCode, message: &str) -> ElectLeadersResponse {
    let results = named
        .into_iter()
        .flatten()
        .flat_map(|(topic, ps)| {
            ps.into_iter().map(move |partition| PartitionOutcome {
                topic: topic.clone(),
                partition,
                error: code,
                message: Some(message.to_string()),
            })
        })
        .collect();
    respond(code, results)
}

fn respond(code: ErrorCode, results: Vec<PartitionOutcome>) -> ElectLeadersResponse {
    let mut by_topic: BTreeMap<String, Vec<PartitionResult>> = BTreeMap::new();
    for r in results {
        let mut p = PartitionResult::default();
        p.partition_id = r.partition;
        p.error_code = r.error;
        p.error_message = r.message.as_deref().map(str_bytes);
        by_topic.entry(r.topic).or_default().push(p);
    }
    let mut response = ElectLeadersResponse::default();
    response.error_code = code;
    for (topic, partition_result) in by_topic {
        let mut t = ReplicaElectionResult::default();
        t.topic = TopicName(str_bytes(&topic));
        t.partition_result = partition_result;
        response.replica_election_results.push(t);
    }
    response
}
