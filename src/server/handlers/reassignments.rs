//! AlterPartitionReassignments (versions 0–1) and ListPartitionReassignments
//! (version 0): an operator moves partitions to other brokers, adding a
//! broker's share of the load or taking a broker out (KIP-455), and sees
//! the moves under way. Altering needs ALTER on the cluster, listing
//! DESCRIBE, as Kafka's. The quorum's leader checks and logs the moves
//! (`controller::reassign`); listing reads this broker's view of the log.

use std::{collections::BTreeMap, rc::Rc};

use kafka_protocol::messages::{
    alter_partition_reassignments_response::{ReassignablePartitionResponse, ReassignableTopicResponse},
    list_partition_reassignments_response::{OngoingPartitionReassignment, OngoingTopicReassignment},
    AlterPartitionReassignmentsRequest, AlterPartitionReassignmentsResponse, BrokerId,
    ListPartitionReassignmentsRequest, ListPartitionReassignmentsResponse, TopicName,
};

use crate::{
    controller::{moves_under_way, PartitionOutcome, Reassignment},
    protocol::errors::{self, ErrorCode},
    security::{acl::Operation, Session},
    server::{authz::on_cluster, handlers::str_bytes},
    shard::{reassignments::Reassign, router::CONTROLLER, Shard},
};

pub async fn alter(
    shard: &Rc<Shard>,
    session: &Session,
    req: AlterPartitionReassignmentsRequest,
    version: i16,
) -> AlterPartitionReassignmentsResponse {
    let asked: Vec<Reassignment> = req
        .topics
        .iter()
        .flat_map(|t| {
            t.partitions.iter().map(|p| Reassignment {
                topic: t.name.0.to_string(),
                partition: p.partition_index,
                replicas: p.replicas.as_ref().map(|r| r.iter().map(|b| b.0).collect()),
            })
        })
        .collect();
    // v0 has no flag and lets the replication factor change.
    let allow_factor_change = version < 1 || req.allow_replication_factor_change;
    let answered = if !on_cluster(shard, session, Operation::Alter) {
        Err((errors::CLUSTER_AUTHORIZATION_FAILED, "ALTER on the cluster is needed to reassign partitions".into()))
    } else {
        let call = Reassign { partitions: asked.clone(), allow_factor_change };
        match shard.ask(CONTROLLER, call).await {
            Ok(Ok(results)) => Ok(results),
            Ok(Err(e)) => Err((errors::REQUEST_TIMED_OUT, e)),
            Err(_) => Err((errors::REQUEST_TIMED_OUT, "the controller shard is gone".into())),
        }
    };
    let (code, message, results) = match answered {
        Ok(results) => (errors::NONE, None, results),
        Err((code, message)) => {
            let every = asked.into_iter().map(|r| PartitionOutcome {
                topic: r.topic,
                partition: r.partition,
                error: code,
                message: Some(message.clone()),
            });
            (code, Some(message.clone()), every.collect())
        }
    };
    alter_response(code, message, allow_factor_change, results)
}

fn alter_response(
    code: ErrorCode,
    message: Option<String>,
    allow_factor_change: bool,
    results: Vec<PartitionOutcome>,
) -> AlterPartitionReassignmentsResponse {
    let mut by_topic: BTreeMap<String, Vec<ReassignablePartitionResponse>> = BTreeMap::new();
    for r in results {
        let mut p = ReassignablePartitionResponse::default();
        p.partition_index = r.partition;
        p.error_code = r.error;
        p.error_message = r.message.as_deref().map(str_bytes);
        by_topic.entry(r.topic).or_default().push(p);
    }
    let mut response = AlterPartitionReassignmentsResponse::default();
    response.error_code = code;
    response.error_message = message.as_deref().map(str_bytes);
    response.allow_replication_factor_change = allow_factor_change;
    for (topic, partitions) in by_topic {
        let mut t = ReassignableTopicResponse::default();
        t.name = TopicName(str_bytes(&topic));
        t.partitions = partitions;
        response.responses.push(t);
    }
    response
}

/// The moves under way of the partitions named (None: all). Alone, or
/// before this broker has a view of the log, there are none.
pub fn list(
    shard: &Shard,
    session: &Session,
    req: ListPartitionReassignmentsRequest,
) -> ListPartitionReassignmentsResponse {
    let mut response = ListPartitionReassignmentsResponse::default();
    if !on_cluster(shard, session, Operation::Describe) {
        response.error_code = errors::CLUSTER_AUTHORIZATION_FAILED;
        response.error_message = Some(str_bytes("DESCRIBE on the cluster is needed to list reassignments"));
        return response;
    }
    let Some(link) = &shard.settings.cluster else { return response };
    let wanted = |topic: &str, partition: i32| {
        req.topics
            .as_ref()
            .is_none_or(|ts| ts.iter().any(|t| t.name.0.as_str() == topic && t.partition_indexes.contains(&partition)))
    };
    let view = link.view.borrow();
    let mut by_topic: BTreeMap<&str, Vec<OngoingPartitionReassignment>> = BTreeMap::new();
    for (topic, partition, replicas, moving) in moves_under_way(&view.topics).filter(|m| wanted(m.0, m.1)) {
        let ids = |bs: &[i32]| bs.iter().copied().map(BrokerId).collect::<Vec<_>>();
        let mut p = OngoingPartitionReassignment::default();
        p.partition_index = partition;
        p.replicas = ids(&replicas);
        p.adding_replicas = ids(&moving.adding);
        p.removing_replicas = ids(&moving.removing);
        by_topic.entry(topic).or_default().push(p);
    }
    for (topic, partitions) in by_topic {
        let mut t = OngoingTopicReassignment::default();
        t.name = TopicName(str_bytes(topic));
        t.partitions = partitions;
        response.topics.push(t);
    }
    response
}
