//! The topic APIs behind their checks: Produce (WRITE; a transactional
//! produce also WRITE on its id), Fetch (READ), ListOffsets and
//! OffsetForLeaderEpoch (DESCRIBE), Metadata (DESCRIBE; CREATE to create),
//! and the topic admin APIs (CREATE on the cluster or topic, DELETE, ALTER,
//! DESCRIBE_CONFIGS, ALTER_CONFIGS; broker configs on the cluster).

use std::rc::Rc;

use kafka_protocol::messages::{
    alter_configs_response::AlterConfigsResourceResponse, create_partitions_response::CreatePartitionsTopicResult,
    create_topics_response::CreatableTopicResult, delete_records_response::*,
    delete_topics_response::DeletableTopicResult, describe_configs_response::DescribeConfigsResult,
    list_offsets_response::*, metadata_response::MetadataResponseTopic, offset_for_leader_epoch_response::*,
    produce_response::*, *,
};

use super::{authorize, denied_code, on_cluster};
use crate::{
    metrics::stages::RequestTrace,
    protocol::errors,
    security::{
        acl::{Operation, ResourceType},
        Session,
    },
    server::{
        fetch_encode::{PartitionOut, TopicOut},
        handlers::{self, fetch::FetchAnswer},
    },
    shard::{topics::TopicHandle, Shard},
};

const TOPIC_DENIED: i16 = errors::TOPIC_AUTHORIZATION_FAILED;

fn may(shard: &Shard, session: &Session, op: Operation, topic: &str) -> bool {
    authorize(shard, session, op, ResourceType::Topic, topic)
}

/// Splits `items` into those that may go ahead and those refused. When all
/// may (no ACLs, a super user, or grants that cover the request) the
/// request's own vector goes ahead as it is: no copy on the produce and
/// fetch paths.
/// Each item is checked once (a refusal is counted in `/metrics`).
fn split<T>(items: Vec<T>, mut allowed: impl FnMut(&T) -> bool) -> (Vec<T>, Vec<T>) {
    let Some(first) = items.iter().position(|i| !allowed(i)) else { return (items, Vec::new()) };
    let mut rest = items.into_iter();
    let mut ok: Vec<T> = rest.by_ref().take(first).collect();
    let mut denied = vec![rest.next().expect("the first refused item is there")];
    for item in rest {
        if allowed(&item) {
            ok.push(item);
        } else {
            denied.push(item);
        }
    }
    (ok, denied)
}

pub async fn produce(
    shard: &Rc<Shard>,
    session: &Session,
    mut req: ProduceRequest,
    trace: &RequestTrace,
) -> Option<ProduceResponse> {
    if super::unrestricted(shard, session) {
        return handlers::produce::handle(shard, req, trace).await;
    }
    let txn_denied = req
        .transactional_id
        .as_ref()
        .is_some_and(|id| !authorize(shard, session, Operation::Write, ResourceType::TransactionalId, id.as_str()));
    let (allowed, denied) = if txn_denied {
        (Vec::new(), std::mem::take(&mut req.topic_data))
    } else {
        split(std::mem::take(&mut req.topic_data), |t| may(shard, session, Operation::Write, t.name.as_str()))
    };
    let code = if txn_denied { errors::TRANSACTIONAL_ID_AUTHORIZATION_FAILED } else { TOPIC_DENIED };
    req.topic_data = allowed;
    let mut response = handlers::produce::handle(shard, req, trace).await?;
    for t in denied {
        let partitions = t
            .partition_data
            .iter()
            .map(|p| {
                crate::metrics::ShardMetrics::error(&shard.metrics.produce_errors, code);
                PartitionProduceResponse::default()
                    .with_index(p.index)
                    .with_error_code(code)
                    .with_base_offset(-1)
                    .with_log_append_time_ms(-1)
                    .with_log_start_offset(-1)
            })
            .collect();
        response.responses.push(TopicProduceResponse::default().with_name(t.name).with_partition_responses(partitions));
    }
    Some(response)
}

fn fetch_denied(partition: i32) -> PartitionOut {
    PartitionOut {
        partition,
        error: TOPIC_DENIED,
        high_watermark: -1,
        last_stable_offset: -1,
        log_start: -1,
        preferred_read_replica: -1,
        aborted: Vec::new(),
        records: Vec::new(),
    }
}

/// Fetch: the topics a request names that the session may not READ are
/// not read (nor added to a fetch session) and are answered
/// TOPIC_AUTHORIZATION_FAILED; the answer is checked again, so partitions
/// an incremental fetch session carries from before an ACL change are
/// refused too, with no records.
pub async fn fetch(shard: &Rc<Shard>, session: &Session, mut req: FetchRequest, version: i16) -> FetchAnswer {
    let replica = if version >= 15 { req.replica_state.replica_id.0 } else { req.replica_id.0 };
    if replica >= 0 && shard.settings.cluster.is_some() {
        session.replica.set(replica);
    }
    if super::unrestricted(shard, session) {
        return handlers::fetch::handle(shard, req, version).await;
    }
    let table = shard.topics();
    let name_of = |t: &fetch_request::FetchTopic| -> Option<TopicHandle> {
        if version >= 13 {
            table.name_by_id(&t.topic_id).cloned()
        } else {
            Some(TopicHandle::from(t.topic.as_str()))
        }
    };
    let mut refused = Vec::new();
    req.topics.retain(|t| match name_of(t) {
        Some(name) if !may(shard, session, Operation::Read, &name) => {
            let partitions = t.partitions.iter().map(|p| fetch_denied(p.partition)).collect();
            refused.push(TopicOut { name, id: t.topic_id, partitions });
            false
        }
        _ => true,
    });
    let mut answer = handlers::fetch::handle(shard, req, version).await;
    for topic in &mut answer.topics {
        if topic.name.is_empty() || may(shard, session, Operation::Read, &topic.name) {
            continue;
        }
        for p in &mut topic.partitions {
            *p = fetch_denied(p.partition);
        }
    }
    answer.topics.extend(refused);
    answer
}

pub async fn list_offsets(
    shard: &Rc<Shard>,
    session: &Session,
    mut req: ListOffsetsRequest,
    version: i16,
) -> ListOffsetsResponse {
    let (allowed, denied) =
        split(std::mem::take(&mut req.topics), |t| may(shard, session, Operation::Describe, t.name.as_str()));
    req.topics = allowed;
    let mut response = handlers::list_offsets::handle(shard, req, version).await;
    for t in denied {
        let partitions = t
            .partitions
            .iter()
            .map(|p| {
                ListOffsetsPartitionResponse::default()
                    .with_partition_index(p.partition_index)
                    .with_error_code(TOPIC_DENIED)
                    .with_timestamp(-1)
                    .with_offset(-1)
            })
            .collect();
        response.topics.push(ListOffsetsTopicResponse::default().with_name(t.name).with_partitions(partitions));
    }
    response
}

pub async fn offset_for_leader_epoch(
    shard: &Rc<Shard>,
    session: &Session,
    mut req: OffsetForLeaderEpochRequest,
) -> OffsetForLeaderEpochResponse {
    let (allowed, denied) =
        split(std::mem::take(&mut req.topics), |t| may(shard, session, Operation::Describe, t.topic.as_str()));
    req.topics = allowed;
    let mut response = handlers::cluster::offset_for_leader_epoch(shard, req).await;
    for t in denied {
        let partitions = t
            .partitions
            .iter()
            .map(|p| {
                EpochEndOffset::default()
                    .with_partition(p.partition)
                    .with_error_code(TOPIC_DENIED)
                    .with_leader_epoch(-1)
                    .with_end_offset(-1)
            })
            .collect();
        response.topics.push(OffsetForLeaderTopicResult::default().with_topic(t.topic).with_partitions(partitions));
    }
    response
}

/// Metadata: topics the session may not DESCRIBE are left out of an
/// all-topics answer and answered TOPIC_AUTHORIZATION_FAILED when named; a
/// named topic that does not exist is created only with CREATE (on the
/// cluster or the topic), else answered TOPIC_AUTHORIZATION_FAILED too.
pub async fn metadata(
    shard: &Rc<Shard>,
    session: &Session,
    mut req: MetadataRequest,
    version: i16,
) -> MetadataResponse {
    let all_topics = req.topics.is_none() || (version == 0 && req.topics.as_ref().is_some_and(Vec::is_empty));
    let would_create = shard.settings.auto_create_topics && (version < 4 || req.allow_auto_topic_creation);
    let mut refused = Vec::new();
    let by_id: Vec<uuid::Uuid> = req.topics.iter().flatten().filter(|t| t.name.is_none()).map(|t| t.topic_id).collect();
    if let (Some(topics), false) = (req.topics.as_mut(), all_topics) {
        let table = shard.topics();
        let may_create_any = || on_cluster(shard, session, Operation::Create);
        let (allowed, denied) = split(std::mem::take(topics), |t| {
            let Some(name) = t.name.as_ref() else { return true };
            may(shard, session, Operation::Describe, name)
                && (!would_create
                    || table.handle(name).is_some()
                    || may_create_any()
                    || may(shard, session, Operation::Create, name))
        });
        *topics = allowed;
        refused = denied.into_iter().filter_map(|t| t.name).collect();
    }
    let mut response = handlers::metadata::handle(shard, req, version, session).await;
    let describable = |t: &MetadataResponseTopic| {
        t.name.as_ref().is_none_or(|n| may(shard, session, Operation::Describe, n.as_str()))
    };
    if all_topics {
        response.topics.retain(describable);
    } else {
        for t in response.topics.iter_mut().filter(|t| !describable(t)) {
            t.error_code = TOPIC_DENIED;
            t.partitions.clear();
            if by_id.contains(&t.topic_id) {
                t.name = None; // asked by id: the name is not the session's to learn
            }
        }
    }
    for name in refused {
        response.topics.push(MetadataResponseTopic::default().with_name(Some(name)).with_error_code(TOPIC_DENIED));
    }
    response
}

pub async fn create_topics(shard: &Rc<Shard>, session: &Session, mut req: CreateTopicsRequest) -> CreateTopicsResponse {
    let cluster = on_cluster(shard, session, Operation::Create);
    let (allowed, denied) =
        split(std::mem::take(&mut req.topics), |t| cluster || may(shard, session, Operation::Create, t.name.as_str()));
    req.topics = allowed;
    let mut response = handlers::create_topics::handle(shard, req).await;
    for t in denied {
        response.topics.push(
            CreatableTopicResult::default()
                .with_name(t.name)
                .with_error_code(TOPIC_DENIED)
                .with_num_partitions(-1)
                .with_replication_factor(-1),
        );
    }
    response
}

pub async fn delete_topics(shard: &Rc<Shard>, session: &Session, mut req: DeleteTopicsRequest) -> DeleteTopicsResponse {
    let table = shard.topics();
    let name_of = |t: &delete_topics_request::DeleteTopicState| {
        t.name.as_ref().map(|n| n.to_string()).or_else(|| table.name_by_id(&t.topic_id).map(|h| h.to_string()))
    };
    let (names, denied_names) =
        split(std::mem::take(&mut req.topic_names), |n| may(shard, session, Operation::Delete, n.as_str()));
    req.topic_names = names;
    let (states, denied_states) = split(std::mem::take(&mut req.topics), |t| {
        name_of(t).is_none_or(|n| may(shard, session, Operation::Delete, &n))
    });
    req.topics = states;
    let mut response = handlers::delete_topics::handle(shard, req).await;
    let denied =
        |name, id| DeletableTopicResult::default().with_name(name).with_topic_id(id).with_error_code(TOPIC_DENIED);
    for n in denied_names {
        response.responses.push(denied(Some(n), uuid::Uuid::nil()));
    }
    for t in denied_states {
        response.responses.push(denied(t.name, t.topic_id));
    }
    response
}

pub async fn create_partitions(
    shard: &Rc<Shard>,
    session: &Session,
    mut req: CreatePartitionsRequest,
) -> CreatePartitionsResponse {
    let (allowed, denied) =
        split(std::mem::take(&mut req.topics), |t| may(shard, session, Operation::Alter, t.name.as_str()));
    req.topics = allowed;
    let mut response = handlers::create_partitions::handle(shard, req).await;
    for t in denied {
        response.results.push(CreatePartitionsTopicResult::default().with_name(t.name).with_error_code(TOPIC_DENIED));
    }
    response
}

pub async fn delete_records(
    shard: &Rc<Shard>,
    session: &Session,
    mut req: DeleteRecordsRequest,
) -> DeleteRecordsResponse {
    let (allowed, denied) =
        split(std::mem::take(&mut req.topics), |t| may(shard, session, Operation::Delete, t.name.as_str()));
    req.topics = allowed;
    let mut response = handlers::delete_records::handle(shard, req).await;
    for t in denied {
        let partitions = t
            .partitions
            .iter()
            .map(|p| {
                DeleteRecordsPartitionResult::default()
                    .with_partition_index(p.partition_index)
                    .with_low_watermark(-1)
                    .with_error_code(TOPIC_DENIED)
            })
            .collect();
        response.topics.push(DeleteRecordsTopicResult::default().with_name(t.name).with_partitions(partitions));
    }
    response
}

/// Kafka's config resource types: 2 topic, 4 broker (checked on the
/// cluster); others are left to the handler, which refuses them.
fn config_resource(shard: &Shard, session: &Session, op: Operation, resource_type: i8, name: &str) -> Option<i16> {
    let allowed = match resource_type {
        2 => may(shard, session, op, name),
        4 => on_cluster(shard, session, op),
        _ => true,
    };
    (!allowed).then(|| denied_code(if resource_type == 2 { ResourceType::Topic } else { ResourceType::Cluster }))
}

pub fn describe_configs(
    shard: &Rc<Shard>,
    session: &Session,
    mut req: DescribeConfigsRequest,
    version: i16,
) -> DescribeConfigsResponse {
    let mut denied = Vec::new();
    req.resources.retain(|r| {
        match config_resource(shard, session, Operation::DescribeConfigs, r.resource_type, r.resource_name.as_str()) {
            Some(code) => {
                denied.push((code, r.resource_type, r.resource_name.clone()));
                false
            }
            None => true,
        }
    });
    let mut response = handlers::configs::describe(shard, req, version);
    for (code, resource_type, name) in denied {
        response.results.push(
            DescribeConfigsResult::default()
                .with_error_code(code)
                .with_resource_type(resource_type)
                .with_resource_name(name),
        );
    }
    response
}

pub async fn alter_configs(shard: &Rc<Shard>, session: &Session, mut req: AlterConfigsRequest) -> AlterConfigsResponse {
    let mut denied = Vec::new();
    req.resources.retain(|r| {
        match config_resource(shard, session, Operation::AlterConfigs, r.resource_type, r.resource_name.as_str()) {
            Some(code) => {
                denied.push((code, r.resource_type, r.resource_name.clone()));
                false
            }
            None => true,
        }
    });
    let mut response = handlers::configs::alter(shard, req).await;
    for (code, resource_type, name) in denied {
        response.responses.push(
            AlterConfigsResourceResponse::default()
                .with_error_code(code)
                .with_resource_type(resource_type)
                .with_resource_name(name),
        );
    }
    response
}

pub async fn incremental_alter_configs(
    shard: &Rc<Shard>,
    session: &Session,
    mut req: IncrementalAlterConfigsRequest,
) -> IncrementalAlterConfigsResponse {
    let mut denied = Vec::new();
    req.resources.retain(|r| {
        match config_resource(shard, session, Operation::AlterConfigs, r.resource_type, r.resource_name.as_str()) {
            Some(code) => {
                denied.push((code, r.resource_type, r.resource_name.clone()));
                false
            }
            None => true,
        }
    });
    let mut response = handlers::configs::incremental_alter(shard, req).await;
    for (code, resource_type, name) in denied {
        response.responses.push(
            incremental_alter_configs_response::AlterConfigsResourceResponse::default()
                .with_error_code(code)
                .with_resource_type(resource_type)
                .with_resource_name(name),
        );
    }
    response
}

pub fn describe_cluster(shard: &Rc<Shard>, session: &Session, req: DescribeClusterRequest) -> DescribeClusterResponse {
    if !on_cluster(shard, session, Operation::Describe) {
        return DescribeClusterResponse::default().with_error_code(errors::CLUSTER_AUTHORIZATION_FAILED);
    }
    handlers::cluster::describe_cluster(shard, req, session)
}

/// Without DESCRIBE on the cluster: no log dirs (and, from v3, the error).
pub async fn describe_log_dirs(
    shard: &Rc<Shard>,
    session: &Session,
    req: DescribeLogDirsRequest,
    version: i16,
) -> DescribeLogDirsResponse {
    if !on_cluster(shard, session, Operation::Describe) {
        let response = DescribeLogDirsResponse::default();
        return if version >= 3 { response.with_error_code(errors::CLUSTER_AUTHORIZATION_FAILED) } else { response };
    }
    handlers::cluster::describe_log_dirs(shard, req, version).await
}

#[cfg(test)]
mod tests {
    #[test]
    fn split_keeps_order_checks_each_item_once_and_passes_an_all_allowed_vector_through() {
        let mut checks = 0;
        let items = vec![1, 2, 3, 4, 5, 6];
        let address = items.as_ptr();
        let (ok, denied) = super::split(items, |i| {
            checks += 1;
            *i < 100
        });
        assert_eq!((ok.as_ptr(), ok.len(), denied.len(), checks), (address, 6, 0, 6), "the same vector, unchanged");
        checks = 0;
        let (ok, denied) = super::split(vec![1, 2, 3, 4, 5, 6], |i| {
            checks += 1;
            i % 3 != 0
        });
        assert_eq!((ok, denied, checks), (vec![1, 2, 4, 5], vec![3, 6], 6));
    }
}
