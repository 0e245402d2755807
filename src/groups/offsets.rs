//! Committed offsets: commit (a durable append, then the cache), fetch
//! (the cache only), describe/list/delete of groups, offset deletion, and
//! expiry with tombstones.

use std::rc::Rc;

use kafka_protocol::messages::{
    delete_groups_response::DeletableGroupResult,
    describe_groups_response::{DescribedGroup, DescribedGroupMember},
    offset_commit_response::{OffsetCommitResponsePartition, OffsetCommitResponseTopic},
    offset_delete_response::{OffsetDeleteResponsePartition, OffsetDeleteResponseTopic},
    DeleteGroupsResponse, DescribeGroupsResponse, GroupId, OffsetCommitRequest, OffsetCommitResponse,
    OffsetDeleteRequest, OffsetDeleteResponse,
};

use crate::groups::{
    records::{Key, OffsetValue},
    FetchedOffset, ListedGroup,
};
use crate::protocol::errors::*;

use super::coordinator::*;

pub(super) async fn commit(c: &Rc<Coordinator>, req: OffsetCommitRequest, version: i16) -> OffsetCommitResponse {
    let group_id = req.group_id.0.to_string();
    let settings = c.settings();
    let group_error = {
        let groups = c.groups.borrow();
        match groups.get(&group_id) {
            _ if group_id.is_empty() => Some(INVALID_GROUP_ID),
            None | Some(Group { state: State::Empty, .. }) if req.generation_id_or_member_epoch < 0 => None,
            None => Some(ILLEGAL_GENERATION),
            Some(g) if !g.members.contains_key(req.member_id.as_str()) => Some(UNKNOWN_MEMBER_ID),
            Some(g) if g.generation != req.generation_id_or_member_epoch => Some(ILLEGAL_GENERATION),
            Some(g) if g.state == State::CompletingRebalance => Some(REBALANCE_IN_PROGRESS),
            Some(_) => None,
        }
    };
    let commit_ts = c.now_ms();
    let expire_ts =
        if (2..=4).contains(&version) && req.retention_time_ms >= 0 { commit_ts + req.retention_time_ms } else { -1 };
    let mut response = OffsetCommitResponse::default();
    let mut to_write: Vec<(String, i32, OffsetValue)> = Vec::new();
    for t in &req.topics {
        let mut rt = OffsetCommitResponseTopic::default();
        rt.name = t.name.clone();
        for p in &t.partitions {
            let metadata = p.committed_metadata.as_ref().map(|m| m.to_string()).unwrap_or_default();
            let known = c.host.partition_exists(t.name.0.as_str(), p.partition_index);
            let code = if let Some(e) = group_error {
                e
            } else if !known {
                UNKNOWN_TOPIC_OR_PARTITION
            } else if metadata.len() > settings.max_metadata_bytes {
                OFFSET_METADATA_TOO_LARGE
            } else {
                to_write.push((
                    t.name.0.to_string(),
                    p.partition_index,
                    OffsetValue {
                        offset: p.committed_offset,
                        leader_epoch: p.committed_leader_epoch,
                        metadata,
                        commit_timestamp: commit_ts,
                        expire_timestamp: expire_ts,
                    },
                ));
                NONE
            };
            let mut rp = OffsetCommitResponsePartition::default();
            rp.partition_index = p.partition_index;
            rp.error_code = code;
            rt.partitions.push(rp);
        }
        response.topics.push(rt);
    }
    let records: Vec<(Vec<u8>, Option<Vec<u8>>)> = to_write
        .iter()
        .map(|(topic, partition, v)| {
            let key = Key::Offset { group: group_id.clone(), topic: topic.clone(), partition: *partition };
            (key.encode(), Some(v.encode()))
        })
        .collect();
    match c.append(&group_id, records).await {
        Ok(()) => {
            let mut offsets = c.offsets.borrow_mut();
            let cache = offsets.entry(group_id.clone()).or_default();
            for (topic, partition, v) in to_write {
                cache.insert((topic, partition), v);
            }
        }
        Err(e) => {
            log::warn!("group {group_id}: commit not stored: {e}");
            for t in &mut response.topics {
                for p in &mut t.partitions {
                    if p.error_code == NONE {
                        p.error_code = COORDINATOR_NOT_AVAILABLE;
                    }
                }
            }
        }
    }
    response
}

/// Committed offsets from the cache alone: never from disk.
pub(super) fn fetch_offsets(
    c: &Rc<Coordinator>,
    group_id: &str,
    topics: Option<Vec<(String, Vec<i32>)>>,
) -> Vec<FetchedOffset> {
    let offsets = c.offsets.borrow();
    let cache = offsets.get(group_id);
    let found = |topic: &str, partition: i32| {
        let v = cache.and_then(|c| c.get(&(topic.to_string(), partition)));
        FetchedOffset {
            topic: topic.to_string(),
            partition,
            offset: v.map_or(-1, |v| v.offset),
            leader_epoch: v.map_or(-1, |v| v.leader_epoch),
            metadata: v.map(|v| v.metadata.clone()).unwrap_or_default(),
        }
    };
    match topics {
        Some(topics) => {
            topics.iter().flat_map(|(t, parts)| parts.iter().map(move |&p| (t, p))).map(|(t, p)| found(t, p)).collect()
        }
        None => cache.map(|c| c.keys().map(|(t, p)| found(t, *p)).collect()).unwrap_or_default(),
    }
}

pub(super) fn describe(c: &Rc<Coordinator>, names: Vec<String>) -> DescribeGroupsResponse {
    let groups = c.groups.borrow();
    let offsets = c.offsets.borrow();
    let mut response = DescribeGroupsResponse::default();
    for name in names {
        let mut d = DescribedGroup::default();
        d.group_id = GroupId(s(&name));
        match groups.get(&name) {
            Some(g) => {
                d.group_state = s(g.state.name());
                d.protocol_type = s(g.protocol_type.as_deref().unwrap_or(""));
                let stable = matches!(g.state, State::Stable | State::CompletingRebalance);
                d.protocol_data = s(if stable { g.protocol.as_deref().unwrap_or("") } else { "" });
                for (id, m) in &g.members {
                    let mut dm = DescribedGroupMember::default();
                    dm.member_id = s(id);
                    dm.group_instance_id = m.instance_id.as_deref().map(s);
                    dm.client_id = s(&m.client_id);
                    dm.client_host = s(&m.client_host);
                    if stable {
                        dm.member_metadata = g
                            .protocol
                            .as_ref()
                            .and_then(|p| m.protocols.iter().find(|(n, _)| n == p))
                            .map(|(_, b)| b.clone())
                            .unwrap_or_default();
                        dm.member_assignment = m.assignment.clone();
                    }
                    d.members.push(dm);
                }
            }
            None if offsets.contains_key(&name) => d.group_state = s(State::Empty.name()),
            None => d.group_state = s("Dead"),
        }
        d.authorized_operations = i32::MIN;
        response.groups.push(d);
    }
    response
}

pub(super) fn list(c: &Rc<Coordinator>, states: &[String]) -> Vec<ListedGroup> {
    let groups = c.groups.borrow();
    let offsets = c.offsets.borrow();
    let mut out: Vec<ListedGroup> = groups
        .iter()
        .map(|(name, g)| ListedGroup {
            group: name.clone(),
            protocol_type: g.protocol_type.clone().unwrap_or_default(),
            state: g.state.name(),
        })
        .collect();
    for name in offsets.keys().filter(|n| !groups.contains_key(*n)) {
        out.push(ListedGroup { group: name.clone(), protocol_type: String::new(), state: State::Empty.name() });
    }
    out.retain(|g| states.is_empty() || states.iter().any(|s| s.eq_ignore_ascii_case(g.state)));
    out
}

pub(super) async fn delete_groups(c: &Rc<Coordinator>, names: Vec<String>) -> DeleteGroupsResponse {
    let mut response = DeleteGroupsResponse::default();
    for name in names {
        let code = {
            let groups = c.groups.borrow();
            let has_offsets = c.offsets.borrow().contains_key(&name);
            match groups.get(&name) {
                Some(g) if !g.members.is_empty() => NON_EMPTY_GROUP,
                Some(_) => NONE,
                None if has_offsets => NONE,
                None => GROUP_ID_NOT_FOUND,
            }
        };
        let code = if code == NONE { tombstone_group(c, &name, None).await } else { code };
        let mut r = DeletableGroupResult::default();
        r.group_id = GroupId(s(&name));
        r.error_code = code;
        response.results.push(r);
    }
    response
}

/// Writes tombstones for the group's offsets (all, or the listed ones) and,
/// when all go, for the group itself; then drops them from memory.
pub(super) async fn tombstone_group(c: &Rc<Coordinator>, group_id: &str, only: Option<&[(String, i32)]>) -> i16 {
    let keys: Vec<(String, i32)> = match only {
        Some(list) => list.to_vec(),
        None => c.offsets.borrow().get(group_id).map(|c| c.keys().cloned().collect()).unwrap_or_default(),
    };
    let mut records: Vec<(Vec<u8>, Option<Vec<u8>>)> = keys
        .iter()
        .map(|(t, p)| (Key::Offset { group: group_id.to_string(), topic: t.clone(), partition: *p }.encode(), None))
        .collect();
    if only.is_none() {
        records.push((Key::Group { group: group_id.to_string() }.encode(), None));
    }
    if let Err(e) = c.append(group_id, records).await {
        log::warn!("group {group_id}: cannot write tombstones: {e}");
        return COORDINATOR_NOT_AVAILABLE;
    }
    let mut offsets = c.offsets.borrow_mut();
    if let Some(cache) = offsets.get_mut(group_id) {
        for k in &keys {
            cache.remove(k);
        }
        if cache.is_empty() {
            offsets.remove(group_id);
        }
    }
    if only.is_none() {
        c.groups.borrow_mut().remove(group_id);
    }
    NONE
}

pub(super) async fn offset_delete(c: &Rc<Coordinator>, req: OffsetDeleteRequest) -> OffsetDeleteResponse {
    let group_id = req.group_id.0.to_string();
    let mut response = OffsetDeleteResponse::default();
    let subscribed: Option<Vec<String>> = {
        let groups = c.groups.borrow();
        let has_offsets = c.offsets.borrow().contains_key(&group_id);
        match groups.get(&group_id) {
            None if !has_offsets => {
                response.error_code = GROUP_ID_NOT_FOUND;
                return response;
            }
            Some(g) if !g.members.is_empty() => Some(subscribed_topics(g)),
            _ => None,
        }
    };
    let mut delete = Vec::new();
    for t in &req.topics {
        let mut rt = OffsetDeleteResponseTopic::default();
        rt.name = t.name.clone();
        let busy = subscribed.as_ref().is_some_and(|topics| topics.iter().any(|x| x == t.name.0.as_str()));
        for p in &t.partitions {
            let mut rp = OffsetDeleteResponsePartition::default();
            rp.partition_index = p.partition_index;
            if busy {
                rp.error_code = GROUP_SUBSCRIBED_TO_TOPIC;
            } else {
                delete.push((t.name.0.to_string(), p.partition_index));
            }
            rt.partitions.push(rp);
        }
        response.topics.push(rt);
    }
    if !delete.is_empty() {
        let code = tombstone_group(c, &group_id, Some(&delete)).await;
        if code != NONE {
            response.error_code = code;
        }
    }
    response
}

/// Topics the members of a consumer group subscribe to (consumer protocol
/// subscriptions); empty for other protocol types.
pub(super) fn subscribed_topics(g: &Group) -> Vec<String> {
    use kafka_protocol::{messages::ConsumerProtocolSubscription, protocol::Decodable};
    if g.protocol_type.as_deref() != Some("consumer") {
        return Vec::new();
    }
    let mut out = Vec::new();
    for m in g.members.values() {
        for (_, meta) in &m.protocols {
            let mut buf = meta.clone();
            if buf.len() < 2 {
                continue;
            }
            let version = i16::from_be_bytes([buf[0], buf[1]]);
            bytes::Buf::advance(&mut buf, 2);
            if let Ok(sub) = ConsumerProtocolSubscription::decode(&mut buf, version.clamp(0, 3)) {
                out.extend(sub.topics.iter().map(|t| t.to_string()));
            }
        }
    }
    out
}

/// Expires offsets: those whose commit carried an expiry that has passed,
/// and all of a group with no members once the retention has passed since
/// it emptied (or since the newest commit, for groups that never had
/// members). Writes tombstones first, then forgets them.
pub async fn expire_offsets(c: &Rc<Coordinator>) -> usize {
    let now = c.now_ms();
    let retention = c.settings().offsets_retention_ms;
    // (group, its expired partitions, whether the whole group goes)
    type Expired = (String, Vec<(String, i32)>, bool);
    let mut expired: Vec<Expired> = Vec::new();
    {
        let groups = c.groups.borrow();
        let offsets = c.offsets.borrow();
        for (group_id, cache) in offsets.iter() {
            let g = groups.get(group_id);
            let empty = g.is_none_or(|g| g.members.is_empty());
            let keys: Vec<(String, i32)> = cache
                .iter()
                .filter(|(_, v)| {
                    let explicit = v.expire_timestamp >= 0 && v.expire_timestamp <= now;
                    let since = g.map_or(v.commit_timestamp, |g| g.state_timestamp.max(v.commit_timestamp));
                    explicit || (empty && v.expire_timestamp < 0 && since + retention <= now)
                })
                .map(|(k, _)| k.clone())
                .collect();
            if !keys.is_empty() {
                let all = keys.len() == cache.len() && empty;
                expired.push((group_id.clone(), keys, all));
            }
        }
    }
    let mut count = 0;
    for (group_id, keys, all) in expired {
        count += keys.len();
        let only = if all && c.groups.borrow().get(&group_id).is_none_or(|g| g.members.is_empty()) {
            None
        } else {
            Some(keys.as_slice())
        };
        tombstone_group(c, &group_id, only).await;
    }
    count
}
