//! The group APIs behind their checks: FindCoordinator (DESCRIBE on the
//! group or transactional id), the membership calls (READ group),
//! OffsetCommit (READ group, READ topic), OffsetFetch (DESCRIBE group,
//! DESCRIBE topic), DescribeGroups (DESCRIBE), ListGroups (DESCRIBE on the
//! cluster, else only the groups it may DESCRIBE), DeleteGroups (DELETE),
//! OffsetDelete (DELETE group, READ topic).

use std::rc::Rc;

use kafka_protocol::messages::{
    delete_groups_response::DeletableGroupResult, describe_groups_response::DescribedGroup, offset_commit_response::*,
    offset_delete_response::*, offset_fetch_response::*, *,
};

use super::{authorize, on_cluster};
use crate::{
    protocol::errors,
    security::{
        acl::{Operation, ResourceType},
        Session,
    },
    server::handlers::groups as handle,
    shard::Shard,
};

const GROUP_DENIED: i16 = errors::GROUP_AUTHORIZATION_FAILED;
const TOPIC_DENIED: i16 = errors::TOPIC_AUTHORIZATION_FAILED;

fn group(shard: &Shard, session: &Session, op: Operation, id: &str) -> bool {
    authorize(shard, session, op, ResourceType::Group, id)
}

fn topic(shard: &Shard, session: &Session, op: Operation, name: &str) -> bool {
    authorize(shard, session, op, ResourceType::Topic, name)
}

pub fn find_coordinator(
    shard: &Shard,
    session: &Session,
    req: FindCoordinatorRequest,
    version: i16,
) -> FindCoordinatorResponse {
    let (kind, code) = match req.key_type {
        1 => (ResourceType::TransactionalId, errors::TRANSACTIONAL_ID_AUTHORIZATION_FAILED),
        _ => (ResourceType::Group, GROUP_DENIED),
    };
    let may = |key: &str| authorize(shard, session, Operation::Describe, kind, key);
    let single_denied = version < 4 && !may(req.key.as_str());
    let mut response = handle::find_coordinator(shard, req, version, session);
    if single_denied {
        response = FindCoordinatorResponse::default().with_error_code(code).with_node_id((-1).into()).with_port(-1);
    }
    for c in response.coordinators.iter_mut().filter(|c| !may(c.key.as_str())) {
        c.error_code = code;
        c.error_message = None;
        (c.node_id, c.port, c.host) = ((-1).into(), -1, Default::default());
    }
    response
}

pub async fn join(
    shard: &Rc<Shard>,
    session: &Session,
    req: JoinGroupRequest,
    version: i16,
    client_id: String,
    client_host: String,
) -> JoinGroupResponse {
    if !group(shard, session, Operation::Read, req.group_id.as_str()) {
        return JoinGroupResponse::default().with_error_code(GROUP_DENIED).with_generation_id(-1);
    }
    handle::join(shard, req, version, client_id, client_host).await
}

pub async fn sync(shard: &Rc<Shard>, session: &Session, req: SyncGroupRequest) -> SyncGroupResponse {
    if !group(shard, session, Operation::Read, req.group_id.as_str()) {
        return SyncGroupResponse::default().with_error_code(GROUP_DENIED);
    }
    handle::sync(shard, req).await
}

pub async fn heartbeat(shard: &Rc<Shard>, session: &Session, req: HeartbeatRequest) -> HeartbeatResponse {
    if !group(shard, session, Operation::Read, req.group_id.as_str()) {
        return HeartbeatResponse::default().with_error_code(GROUP_DENIED);
    }
    handle::heartbeat(shard, req).await
}

pub async fn leave(shard: &Rc<Shard>, session: &Session, req: LeaveGroupRequest, version: i16) -> LeaveGroupResponse {
    if !group(shard, session, Operation::Read, req.group_id.as_str()) {
        return LeaveGroupResponse::default().with_error_code(GROUP_DENIED);
    }
    handle::leave(shard, req, version).await
}

fn commit_denied(t: &offset_commit_request::OffsetCommitRequestTopic, code: i16) -> OffsetCommitResponseTopic {
    let partitions = t
        .partitions
        .iter()
        .map(|p| OffsetCommitResponsePartition::default().with_partition_index(p.partition_index).with_error_code(code))
        .collect();
    OffsetCommitResponseTopic::default().with_name(t.name.clone()).with_topic_id(t.topic_id).with_partitions(partitions)
}

pub async fn commit(
    shard: &Rc<Shard>,
    session: &Session,
    mut req: OffsetCommitRequest,
    version: i16,
) -> OffsetCommitResponse {
    if !group(shard, session, Operation::Read, req.group_id.as_str()) {
        let topics = req.topics.iter().map(|t| commit_denied(t, GROUP_DENIED)).collect();
        return OffsetCommitResponse::default().with_topics(topics);
    }
    let (allowed, denied): (Vec<_>, Vec<_>) =
        std::mem::take(&mut req.topics).into_iter().partition(|t| topic(shard, session, Operation::Read, &t.name));
    req.topics = allowed;
    let mut response = handle::commit(shard, req, version).await;
    response.topics.extend(denied.iter().map(|t| commit_denied(t, TOPIC_DENIED)));
    response
}

/// OffsetFetch is checked on its answer: a group it may not DESCRIBE is
/// answered GROUP_AUTHORIZATION_FAILED; a topic it may not DESCRIBE is
/// left out of an all-topics answer, TOPIC_AUTHORIZATION_FAILED if named.
pub async fn offset_fetch(
    shard: &Rc<Shard>,
    session: &Session,
    req: OffsetFetchRequest,
    version: i16,
) -> OffsetFetchResponse {
    let may_group = |id: &str| group(shard, session, Operation::Describe, id);
    let may_topic = |name: &str| topic(shard, session, Operation::Describe, name);
    let single_group_denied = version < 8 && !may_group(req.group_id.as_str());
    let all_topics = req.topics.is_none();
    let groups_all_topics: Vec<bool> = req.groups.iter().map(|g| g.topics.is_none()).collect();
    let mut response = handle::offset_fetch(shard, req, version).await;
    if single_group_denied {
        response.error_code = GROUP_DENIED;
        response.topics.clear();
        return response;
    }
    if all_topics {
        response.topics.retain(|t| may_topic(&t.name));
    }
    for t in response.topics.iter_mut().filter(|t| !may_topic(&t.name)) {
        for p in &mut t.partitions {
            (p.error_code, p.committed_offset, p.metadata) = (TOPIC_DENIED, -1, None);
        }
    }
    for (g, all) in response.groups.iter_mut().zip(groups_all_topics) {
        if !may_group(g.group_id.as_str()) {
            (g.error_code, g.topics) = (GROUP_DENIED, Vec::new());
            continue;
        }
        if all {
            g.topics.retain(|t| may_topic(&t.name));
        }
        for t in g.topics.iter_mut().filter(|t| !may_topic(&t.name)) {
            for p in &mut t.partitions {
                (p.error_code, p.committed_offset, p.metadata) = (TOPIC_DENIED, -1, None);
            }
        }
    }
    response
}

pub async fn describe(shard: &Rc<Shard>, session: &Session, mut req: DescribeGroupsRequest) -> DescribeGroupsResponse {
    let (allowed, denied): (Vec<_>, Vec<_>) = std::mem::take(&mut req.groups)
        .into_iter()
        .partition(|g| group(shard, session, Operation::Describe, g.as_str()));
    req.groups = allowed;
    let mut response = handle::describe(shard, req).await;
    for g in denied {
        response.groups.push(DescribedGroup::default().with_group_id(g).with_error_code(GROUP_DENIED));
    }
    response
}

pub async fn list(shard: &Rc<Shard>, session: &Session, req: ListGroupsRequest) -> ListGroupsResponse {
    let mut response = handle::list(shard, req).await;
    if !on_cluster(shard, session, Operation::Describe) {
        response.groups.retain(|g| group(shard, session, Operation::Describe, g.group_id.as_str()));
    }
    response
}

pub async fn delete(shard: &Rc<Shard>, session: &Session, mut req: DeleteGroupsRequest) -> DeleteGroupsResponse {
    let (allowed, denied): (Vec<_>, Vec<_>) = std::mem::take(&mut req.groups_names)
        .into_iter()
        .partition(|g| group(shard, session, Operation::Delete, g.as_str()));
    req.groups_names = allowed;
    let mut response = handle::delete(shard, req).await;
    for g in denied {
        response.results.push(DeletableGroupResult::default().with_group_id(g).with_error_code(GROUP_DENIED));
    }
    response
}

pub async fn offset_delete(shard: &Rc<Shard>, session: &Session, mut req: OffsetDeleteRequest) -> OffsetDeleteResponse {
    if !group(shard, session, Operation::Delete, req.group_id.as_str()) {
        return OffsetDeleteResponse::default().with_error_code(GROUP_DENIED);
    }
    let (allowed, denied): (Vec<_>, Vec<_>) =
        std::mem::take(&mut req.topics).into_iter().partition(|t| topic(shard, session, Operation::Read, &t.name));
    req.topics = allowed;
    let mut response = handle::offset_delete(shard, req).await;
    for t in denied {
        let partitions = t
            .partitions
            .iter()
            .map(|p| {
                OffsetDeleteResponsePartition::default()
                    .with_partition_index(p.partition_index)
                    .with_error_code(TOPIC_DENIED)
            })
            .collect();
        response.topics.push(OffsetDeleteResponseTopic::default().with_name(t.name).with_partitions(partitions));
    }
    response
}
