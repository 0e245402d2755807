//! The group APIs: FindCoordinator 0–6 (key type 0, groups, and 1,
//! transactional ids, whose coordinator is found in `txn_route`), JoinGroup 0–7, SyncGroup 0–5,
//! Heartbeat 0–4, LeaveGroup 0–4, OffsetCommit 2–8, OffsetFetch 1–8,
//! DescribeGroups 0–5, ListGroups 0–4, DeleteGroups 0–2, OffsetDelete 0.
//!
//! Each request goes to the shard that coordinates its group (the owner of
//! the group's `__consumer_offsets` partition), by message when that is
//! another shard; requests about several groups fan out and gather.

use std::{collections::BTreeMap, rc::Rc};

use kafka_protocol::messages::{
    find_coordinator_response::Coordinator as CoordinatorOut,
    list_groups_response::ListedGroup as ListedOut,
    offset_fetch_response::{
        OffsetFetchResponseGroup, OffsetFetchResponsePartition, OffsetFetchResponsePartitions,
        OffsetFetchResponseTopic, OffsetFetchResponseTopics,
    },
    DeleteGroupsRequest, DeleteGroupsResponse, DescribeGroupsRequest, DescribeGroupsResponse, FindCoordinatorRequest,
    FindCoordinatorResponse, GroupId, HeartbeatRequest, HeartbeatResponse, JoinGroupRequest, JoinGroupResponse,
    LeaveGroupRequest, LeaveGroupResponse, ListGroupsRequest, ListGroupsResponse, OffsetCommitRequest,
    OffsetCommitResponse, OffsetDeleteRequest, OffsetDeleteResponse, OffsetFetchRequest, OffsetFetchResponse,
    SyncGroupRequest, SyncGroupResponse, TopicName,
};

use crate::protocol::errors::{self, ErrorCode, COORDINATOR_NOT_AVAILABLE, INVALID_GROUP_ID};
use crate::{
    groups::{
        records, CommitOffsets, DeleteGroups, DeleteOffsets, DescribeGroups, FetchOffsets, FetchedOffset, Heartbeat,
        JoinGroup, LeaveGroup, ListGroups, SyncGroup, OFFSETS_TOPIC,
    },
    server::handlers::str_bytes,
    shard::{router, CrossShard, Shard, ShardId},
};

/// The shard coordinating `group`, if `__consumer_offsets` exists.
fn coordinator_of(shard: &Shard, group: &str) -> Option<ShardId> {
    let partition = records::partition_for(group, shard.settings.groups.offsets_partitions);
    router::owner(&shard.topics(), OFFSETS_TOPIC, partition, shard.count)
}

/// What a group request is told when this broker cannot coordinate its
/// group: NOT_COORDINATOR when another broker of the quorum leads the
/// group's offsets partition (the client finds the coordinator again),
/// else COORDINATOR_NOT_AVAILABLE (retriable).
fn no_coordinator(shard: &Shard, group: &str) -> ErrorCode {
    let partition = records::partition_for(group, shard.settings.groups.offsets_partitions);
    match router::no_owner_error(&shard.topics(), OFFSETS_TOPIC, partition) {
        errors::NOT_LEADER_OR_FOLLOWER => errors::NOT_COORDINATOR,
        _ => COORDINATOR_NOT_AVAILABLE,
    }
}

/// Sends a group call to its coordinator; `None` when none is reachable,
/// or the shard it went to no longer coordinates the group.
async fn call<R, C: CrossShard<Reply = Option<R>>>(shard: &Rc<Shard>, group: &str, call: C) -> Option<R> {
    let owner = coordinator_of(shard, group)?;
    shard.ask(owner, call).await.ok().flatten()
}

/// The coordinator is this broker, or in a quorum the broker leading the
/// key's internal partition (`cluster_topics`), at the address of the
/// listener the client came in on.
pub fn find_coordinator(
    shard: &Shard,
    req: FindCoordinatorRequest,
    version: i16,
    session: &crate::security::Session,
) -> FindCoordinatorResponse {
    let mut resp = FindCoordinatorResponse::default();
    let keys: Vec<String> = if version >= 4 {
        req.coordinator_keys.iter().map(|k| k.to_string()).collect()
    } else {
        vec![req.key.to_string()]
    };
    for key in keys {
        let mut c = CoordinatorOut::default();
        c.key = str_bytes(&key);
        let found = match req.key_type {
            1 if key.is_empty() => Err((errors::INVALID_REQUEST, Some("empty transactional id".to_string()))),
            1 => {
                let partition = crate::txn::partition_for(&key, shard.settings.txn.partitions);
                coordinator_broker(shard, crate::txn::TXN_TOPIC, partition, &session.listener)
            }
            // 2 is a share group's (KIP-932, v6); there are none here.
            0 if key.is_empty() => Err((INVALID_GROUP_ID, None)),
            0 => {
                let partition = records::partition_for(&key, shard.settings.groups.offsets_partitions);
                coordinator_broker(shard, OFFSETS_TOPIC, partition, &session.listener)
            }
            other => Err((errors::INVALID_REQUEST, Some(format!("coordinator key type {other} is not supported")))),
        };
        match found {
            Ok((node, host, port)) => {
                c.node_id = node.into();
                c.host = str_bytes(&host);
                c.port = port;
            }
            Err((code, message)) => {
                c.error_code = code;
                c.error_message = message.as_deref().map(str_bytes);
                c.node_id = (-1).into();
                c.port = -1;
            }
        }
        resp.coordinators.push(c);
    }
    if version < 4 {
        let c = resp.coordinators.pop().expect("one key before v4");
        resp.error_code = c.error_code;
        resp.error_message = c.error_message;
        resp.node_id = c.node_id;
        resp.host = c.host;
        resp.port = c.port;
    }
    resp
}

/// The broker coordinating the keys of `topic`'s `partition`, at the
/// address of `listener`: this broker when it leads the partition, else
/// (in a quorum) the broker that does, while the quorum has it unfenced.
/// COORDINATOR_NOT_AVAILABLE (retriable) naming the topic otherwise.
fn coordinator_broker(
    shard: &Shard,
    topic: &str,
    partition: i32,
    listener: &str,
) -> Result<(i32, String, i32), (ErrorCode, Option<String>)> {
    let table = shard.topics();
    let unavailable = || (COORDINATOR_NOT_AVAILABLE, Some(format!("{topic}-{partition} is not available")));
    let meta = table.topics.get(topic).ok_or_else(unavailable)?;
    match table.led_elsewhere(meta, partition) {
        None => {
            router::owner(&table, topic, partition, shard.count).ok_or_else(unavailable)?;
            let (host, port) = crate::server::listeners::advertised_for(&shard.settings, listener);
            Ok((shard.settings.node_id, host.to_string(), port))
        }
        Some(node) => crate::controller::broker_address(&shard.settings, listener, node)
            .map(|(host, port)| (node, host, port))
            .ok_or_else(unavailable),
    }
}

pub async fn join(
    shard: &Rc<Shard>,
    request: JoinGroupRequest,
    version: i16,
    client_id: String,
    client_host: String,
) -> JoinGroupResponse {
    let group = request.group_id.0.to_string();
    let member = request.member_id.clone();
    match call(shard, &group, JoinGroup { request, version, client_id, client_host }).await {
        Some(r) => r,
        None => {
            let mut r = JoinGroupResponse::default();
            r.error_code = no_coordinator(shard, &group);
            r.generation_id = -1;
            r.member_id = member;
            r
        }
    }
}

pub async fn sync(shard: &Rc<Shard>, request: SyncGroupRequest) -> SyncGroupResponse {
    let group = request.group_id.0.to_string();
    match call(shard, &group, SyncGroup { request }).await {
        Some(r) => r,
        None => {
            let mut r = SyncGroupResponse::default();
            r.error_code = no_coordinator(shard, &group);
            r
        }
    }
}

pub async fn heartbeat(shard: &Rc<Shard>, request: HeartbeatRequest) -> HeartbeatResponse {
    let group = request.group_id.0.to_string();
    let mut r = HeartbeatResponse::default();
    r.error_code = call(shard, &group, Heartbeat { request }).await.unwrap_or_else(|| no_coordinator(shard, &group));
    r
}

pub async fn leave(shard: &Rc<Shard>, request: LeaveGroupRequest, version: i16) -> LeaveGroupResponse {
    let group = request.group_id.0.to_string();
    match call(shard, &group, LeaveGroup { request, version }).await {
        Some(mut r) => {
            // Per-member answers exist only from v3; before it the top-level
            // code says it all, and a v0–v2 response carrying them cannot be
            // encoded.
            if version < 3 {
                r.members.clear();
            }
            r
        }
        _ => {
            let mut r = LeaveGroupResponse::default();
            r.error_code = no_coordinator(shard, &group);
            r
        }
    }
}

pub async fn commit(shard: &Rc<Shard>, request: OffsetCommitRequest, version: i16) -> OffsetCommitResponse {
    let group = request.group_id.0.to_string();
    // Kept to answer every partition if the coordinator cannot be reached.
    let echo: Vec<(TopicName, Vec<i32>)> = request
        .topics
        .iter()
        .map(|t| (t.name.clone(), t.partitions.iter().map(|p| p.partition_index).collect()))
        .collect();
    match call(shard, &group, CommitOffsets { request, version }).await {
        Some(r) => r,
        None => {
            use kafka_protocol::messages::offset_commit_response::{
                OffsetCommitResponsePartition, OffsetCommitResponseTopic,
            };
            let mut r = OffsetCommitResponse::default();
            for (name, partitions) in echo {
                let mut t = OffsetCommitResponseTopic::default();
                t.name = name;
                for p in partitions {
                    let mut rp = OffsetCommitResponsePartition::default();
                    rp.partition_index = p;
                    rp.error_code = no_coordinator(shard, &group);
                    t.partitions.push(rp);
                }
                r.topics.push(t);
            }
            r
        }
    }
}

pub async fn offset_fetch(shard: &Rc<Shard>, req: OffsetFetchRequest, version: i16) -> OffsetFetchResponse {
    let mut resp = OffsetFetchResponse::default();
    if version >= 8 {
        for g in req.groups {
            let topics =
                g.topics.map(|ts| ts.into_iter().map(|t| (t.name.0.to_string(), t.partition_indexes)).collect());
            let group = g.group_id.0.to_string();
            let mut out = OffsetFetchResponseGroup::default();
            out.group_id = g.group_id;
            match fetch_group(shard, &group, topics).await {
                Ok(found) => {
                    for (topic, parts) in by_topic(found) {
                        let mut t = OffsetFetchResponseTopics::default();
                        t.name = TopicName(str_bytes(&topic));
                        for f in parts {
                            let mut p = OffsetFetchResponsePartitions::default();
                            p.partition_index = f.partition;
                            p.committed_offset = f.offset;
                            p.committed_leader_epoch = f.leader_epoch;
                            p.metadata = Some(str_bytes(&f.metadata));
                            t.partitions.push(p);
                        }
                        out.topics.push(t);
                    }
                }
                Err(code) => out.error_code = code,
            }
            resp.groups.push(out);
        }
        return resp;
    }
    let topics = req.topics.map(|ts| ts.into_iter().map(|t| (t.name.0.to_string(), t.partition_indexes)).collect());
    match fetch_group(shard, req.group_id.0.as_str(), topics).await {
        Ok(found) => {
            for (topic, parts) in by_topic(found) {
                let mut t = OffsetFetchResponseTopic::default();
                t.name = TopicName(str_bytes(&topic));
                for f in parts {
                    let mut p = OffsetFetchResponsePartition::default();
                    p.partition_index = f.partition;
                    p.committed_offset = f.offset;
                    p.committed_leader_epoch = f.leader_epoch;
                    p.metadata = Some(str_bytes(&f.metadata));
                    t.partitions.push(p);
                }
                resp.topics.push(t);
            }
        }
        Err(code) => resp.error_code = code,
    }
    resp
}

async fn fetch_group(
    shard: &Rc<Shard>,
    group: &str,
    topics: Option<Vec<(String, Vec<i32>)>>,
) -> Result<Vec<FetchedOffset>, i16> {
    call(shard, group, FetchOffsets { group: group.to_string(), topics })
        .await
        .ok_or_else(|| no_coordinator(shard, group))
}

fn by_topic(found: Vec<FetchedOffset>) -> Vec<(String, Vec<FetchedOffset>)> {
    let mut out: Vec<(String, Vec<FetchedOffset>)> = Vec::new();
    for f in found {
        match out.iter_mut().find(|(t, _)| *t == f.topic) {
            Some((_, v)) => v.push(f),
            None => out.push((f.topic.clone(), vec![f])),
        }
    }
    out
}

/// Groups by coordinator shard, keeping request order for the answer.
fn by_coordinator(shard: &Shard, groups: &[String]) -> BTreeMap<Option<ShardId>, Vec<String>> {
    let mut out: BTreeMap<Option<ShardId>, Vec<String>> = BTreeMap::new();
    for g in groups {
        out.entry(coordinator_of(shard, g)).or_default().push(g.clone());
    }
    out
}

pub async fn describe(shard: &Rc<Shard>, req: DescribeGroupsRequest) -> DescribeGroupsResponse {
    let names: Vec<String> = req.groups.iter().map(|g| g.0.to_string()).collect();
    let mut described = Vec::new();
    for (owner, groups) in by_coordinator(shard, &names) {
        let answer = match owner {
            Some(owner) => shard.ask(owner, DescribeGroups { groups: groups.clone() }).await.ok(),
            None => None,
        };
        match answer {
            Some(r) => described.extend(r.groups),
            None => {
                for g in groups {
                    let mut d = kafka_protocol::messages::describe_groups_response::DescribedGroup::default();
                    d.group_id = GroupId(str_bytes(&g));
                    d.error_code = no_coordinator(shard, &g);
                    described.push(d);
                }
            }
        }
    }
    let mut resp = DescribeGroupsResponse::default();
    for name in &names {
        if let Some(i) = described.iter().position(|d| d.group_id.0.as_str() == name) {
            resp.groups.push(described.swap_remove(i));
        }
    }
    resp
}

pub async fn list(shard: &Rc<Shard>, req: ListGroupsRequest) -> ListGroupsResponse {
    let states: Vec<String> = req.states_filter.iter().map(|s| s.to_string()).collect();
    let mut resp = ListGroupsResponse::default();
    // v5's type filter (KIP-848): every group here is a classic group.
    if !req.types_filter.is_empty() && !req.types_filter.iter().any(|t| t.eq_ignore_ascii_case("classic")) {
        return resp;
    }
    for target in 0..shard.count {
        match shard.ask(target, ListGroups { states: states.clone() }).await {
            Ok(groups) => {
                for g in groups {
                    let mut l = ListedOut::default();
                    l.group_id = GroupId(str_bytes(&g.group));
                    l.protocol_type = str_bytes(&g.protocol_type);
                    l.group_state = str_bytes(g.state);
                    l.group_type = str_bytes("classic");
                    resp.groups.push(l);
                }
            }
            Err(_) => resp.error_code = COORDINATOR_NOT_AVAILABLE,
        }
    }
    resp
}

pub async fn delete(shard: &Rc<Shard>, req: DeleteGroupsRequest) -> DeleteGroupsResponse {
    let names: Vec<String> = req.groups_names.iter().map(|g| g.0.to_string()).collect();
    let mut resp = DeleteGroupsResponse::default();
    for (owner, groups) in by_coordinator(shard, &names) {
        let answer = match owner {
            Some(owner) => shard.ask(owner, DeleteGroups { groups: groups.clone() }).await.ok(),
            None => None,
        };
        match answer {
            Some(r) => resp.results.extend(r.results),
            None => {
                for g in groups {
                    let mut r = kafka_protocol::messages::delete_groups_response::DeletableGroupResult::default();
                    r.group_id = GroupId(str_bytes(&g));
                    r.error_code = no_coordinator(shard, &g);
                    resp.results.push(r);
                }
            }
        }
    }
    resp
}

pub async fn offset_delete(shard: &Rc<Shard>, request: OffsetDeleteRequest) -> OffsetDeleteResponse {
    let group = request.group_id.0.to_string();
    match call(shard, &group, DeleteOffsets { request }).await {
        Some(r) => r,
        None => {
            let mut r = OffsetDeleteResponse::default();
            r.error_code = no_coordinator(shard, &group);
            r
        }
    }
}
