//! Group membership: join (with MEMBER_ID_REQUIRED and the delayed initial
//! join), sync, heartbeat, leave, and the timers that end rebalances and
//! remove members whose sessions expired. State lives in the shard's
//! `Coordinator`; see `coordinator.rs` for the state machine.

use std::{collections::HashMap, rc::Rc, time::Duration};

use bytes::Bytes;
use futures_channel::oneshot;
use kafka_protocol::messages::{
    join_group_response::JoinGroupResponseMember, leave_group_response::MemberResponse, HeartbeatRequest,
    JoinGroupRequest, JoinGroupResponse, LeaveGroupRequest, LeaveGroupResponse, SyncGroupRequest, SyncGroupResponse,
};

use crate::groups::{records::Key, seam::Timer, StoreError};
use crate::protocol::errors::*;

use super::coordinator::*;

/// Shortest wait before a session is checked again: a member waiting in a
/// join is re-checked this often, not in a busy loop.
const SESSION_RECHECK_MIN: Duration = Duration::from_millis(10);

pub(super) fn join_error(code: i16, member_id: &str) -> JoinGroupResponse {
    let mut r = JoinGroupResponse::default();
    r.error_code = code;
    r.generation_id = -1;
    r.member_id = s(member_id);
    r
}

pub(super) async fn join(
    c: &Rc<Coordinator>,
    req: JoinGroupRequest,
    version: i16,
    client_id: String,
    client_host: String,
) -> JoinGroupResponse {
    let settings = c.settings();
    let group_id = req.group_id.0.to_string();
    let member_id = req.member_id.to_string();
    if group_id.is_empty() {
        return join_error(INVALID_GROUP_ID, &member_id);
    }
    if !(settings.min_session_timeout_ms..=settings.max_session_timeout_ms).contains(&req.session_timeout_ms) {
        return join_error(INVALID_SESSION_TIMEOUT, &member_id);
    }
    if req.protocol_type.is_empty() || req.protocols.is_empty() {
        return join_error(INCONSISTENT_GROUP_PROTOCOL, &member_id);
    }
    let (tx, rx) = oneshot::channel();
    {
        let mut groups = c.groups.borrow_mut();
        if !groups.contains_key(&group_id) {
            if !member_id.is_empty() {
                return join_error(UNKNOWN_MEMBER_ID, &member_id);
            }
            groups.insert(group_id.clone(), Group::new(c.now_ms()));
        }
        let g = groups.get_mut(&group_id).expect("inserted above");
        let protocols: Vec<(String, Bytes)> =
            req.protocols.iter().map(|p| (p.name.to_string(), p.metadata.clone())).collect();
        if !g.members.is_empty() {
            let same_type = g.protocol_type.as_deref() == Some(req.protocol_type.as_str());
            let candidates = g.candidates();
            if !same_type || !protocols.iter().any(|(n, _)| candidates.contains(n)) {
                return join_error(INCONSISTENT_GROUP_PROTOCOL, &member_id);
            }
        }
        let instance_id = req.group_instance_id.as_ref().map(|i| i.to_string());
        let id = match &instance_id {
            Some(instance) => match g.member_by_instance(instance) {
                Some(existing) if !member_id.is_empty() && existing != member_id => {
                    return join_error(FENCED_INSTANCE_ID, &member_id);
                }
                Some(existing) => existing,
                None if member_id.is_empty() => c.ids.next(instance),
                None => member_id.clone(),
            },
            None if member_id.is_empty() => {
                let id = c.ids.next(&client_id);
                if version >= 4 {
                    // The client must come back with this id (KIP-394), so a
                    // client that never does leaves no member behind.
                    g.pending.push(id.clone());
                    return join_error(MEMBER_ID_REQUIRED, &id);
                }
                id
            }
            None => {
                if !g.members.contains_key(&member_id) && !g.pending.contains(&member_id) {
                    return join_error(UNKNOWN_MEMBER_ID, &member_id);
                }
                member_id.clone()
            }
        };
        if instance_id.is_some() && member_id.is_empty() {
            if let Some((new_id, response)) = rejoin_static(c, g, &id, &protocols, req.session_timeout_ms) {
                log::info!("group {group_id}: static member {id} came back as {new_id}; no rebalance");
                drop(groups);
                arm_session_timer(c, &group_id, &new_id);
                spawn_persist_group(c, &group_id);
                return response;
            }
        }
        g.pending.retain(|p| p != &id);
        log::debug!("group {group_id}: join from {id} in state {}", g.state.name());
        let seq = c.seq();
        let member = g.members.entry(id.clone()).or_insert_with(|| Member {
            instance_id: instance_id.clone(),
            client_id: client_id.clone(),
            client_host: client_host.clone(),
            session_timeout: Duration::ZERO,
            rebalance_timeout: Duration::ZERO,
            protocols: Vec::new(),
            assignment: Bytes::new(),
            joined_seq: seq,
            awaiting_join: None,
            awaiting_sync: None,
            last_seen: c.now(),
            session_timer_armed: false,
        });
        member.session_timeout = Duration::from_millis(req.session_timeout_ms as u64);
        let rebalance_ms = if req.rebalance_timeout_ms > 0 { req.rebalance_timeout_ms } else { req.session_timeout_ms };
        member.rebalance_timeout = Duration::from_millis(rebalance_ms as u64);
        member.protocols = protocols;
        member.client_id = client_id;
        member.client_host = client_host;
        member.last_seen = c.now();
        // A second join from the same member replaces the first.
        member.awaiting_join = Some(tx);
        if g.protocol_type.is_none() || g.members.len() == 1 {
            g.protocol_type = Some(req.protocol_type.to_string());
        }
        rebalance_for_join(c, &group_id, g);
    }
    try_complete_join(c, &group_id);
    rx.await.unwrap_or_else(|_| join_error(UNKNOWN_MEMBER_ID, &member_id))
}

/// What a join does to its group's state: the first member starts a
/// rebalance after the initial delay, a member joining during that delay
/// extends it (Kafka's delayed initial join, up to the rebalance timeout),
/// and a join to a settled group rebalances it.
fn rebalance_for_join(c: &Rc<Coordinator>, group_id: &str, g: &mut Group) {
    let settings = c.settings();
    match g.state {
        State::Empty => {
            let delay = Duration::from_millis(settings.initial_rebalance_delay_ms);
            g.initial_delay_until = Some(c.now() + delay);
            start_rebalance(c, group_id, g);
            arm_timer(c, group_id, g.rebalance_seq, delay);
        }
        State::PreparingRebalance => {
            if let Some(until) = g.initial_delay_until {
                // Kafka's delayed initial join: each new member extends
                // the wait, up to the rebalance timeout.
                let delay = Duration::from_millis(settings.initial_rebalance_delay_ms);
                let extended = (c.now() + delay).min(g.rebalance_deadline.unwrap_or(until));
                if extended > until {
                    g.initial_delay_until = Some(extended);
                    arm_timer(c, group_id, g.rebalance_seq, extended - c.now());
                }
            }
        }
        State::CompletingRebalance | State::Stable => start_rebalance(c, group_id, g),
    }
}

/// KIP-345: a static member that comes back under its instance id (a new
/// process, empty member id) to a stable group, with the protocols it had,
/// takes its old place and assignment without a rebalance. It gets a new
/// member id, which fences the old one. A returning leader rebalances
/// instead (its assignment would have to be recomputed by it anyway).
/// Returns the new id and the JoinGroup answer.
fn rejoin_static(
    c: &Coordinator,
    g: &mut Group,
    old_id: &str,
    protocols: &[(String, Bytes)],
    session_timeout_ms: i32,
) -> Option<(String, JoinGroupResponse)> {
    let unchanged = g.members.get(old_id).is_some_and(|m| same_subscription(&m.protocols, protocols));
    if g.state != State::Stable || !unchanged || g.leader.as_deref() == Some(old_id) {
        return None;
    }
    let mut member = g.members.remove(old_id).expect("checked above");
    let instance = member.instance_id.clone().unwrap_or_default();
    let new_id = c.ids.next(&instance);
    member.last_seen = c.now();
    member.session_timeout = Duration::from_millis(session_timeout_ms as u64);
    member.session_timer_armed = true;
    g.members.insert(new_id.clone(), member);
    let mut r = JoinGroupResponse::default();
    r.generation_id = g.generation;
    r.protocol_type = g.protocol_type.as_deref().map(s);
    r.protocol_name = g.protocol.as_deref().map(s);
    r.leader = s(g.leader.as_deref().unwrap_or_default());
    r.member_id = s(&new_id);
    Some((new_id, r))
}

/// Whether two protocol lists name the same protocols with the same
/// subscription. Consumer metadata is compared by its subscribed topics
/// only: a new process owns no partitions yet, so the owned-partitions and
/// generation fields (ConsumerProtocolSubscription v1+) always differ.
fn same_subscription(old: &[(String, Bytes)], new: &[(String, Bytes)]) -> bool {
    old.len() == new.len()
        && old.iter().zip(new).all(|((a, ma), (b, mb))| {
            a == b && (ma == mb || subscribed_topics(ma).is_some_and(|t| Some(t) == subscribed_topics(mb)))
        })
}

fn subscribed_topics(metadata: &Bytes) -> Option<std::collections::BTreeSet<String>> {
    use bytes::Buf;
    use kafka_protocol::protocol::Decodable;
    let mut bytes = metadata.clone();
    if bytes.remaining() < 2 {
        return None;
    }
    let version = bytes.get_i16().clamp(0, 3);
    let sub = kafka_protocol::messages::ConsumerProtocolSubscription::decode(&mut bytes, version).ok()?;
    Some(sub.topics.iter().map(|t| t.to_string()).collect())
}

/// Moves a group to PreparingRebalance: pending syncs are told to rejoin,
/// and a timer ends the rebalance at the longest rebalance timeout.
pub(super) fn start_rebalance(c: &Rc<Coordinator>, group_id: &str, g: &mut Group) {
    if g.state == State::CompletingRebalance {
        for m in g.members.values_mut() {
            if let Some(tx) = m.awaiting_sync.take() {
                let mut r = SyncGroupResponse::default();
                r.error_code = REBALANCE_IN_PROGRESS;
                let _ = tx.send(r);
            }
        }
    }
    if g.state != State::Empty {
        g.initial_delay_until = None;
    }
    log::debug!("group {group_id}: rebalancing (was {})", g.state.name());
    g.state = State::PreparingRebalance;
    g.state_timestamp = c.now_ms();
    g.rebalance_seq += 1;
    let timeout = g.members.values().map(|m| m.rebalance_timeout).max().unwrap_or_default();
    g.rebalance_deadline = Some(c.now() + timeout);
    arm_timer(c, group_id, g.rebalance_seq, timeout);
}

/// Re-checks the group when `after` has passed, if the same rebalance is
/// still going on ([`rebalance_timer_fired`]).
pub(super) fn arm_timer(c: &Rc<Coordinator>, group_id: &str, seq: u64, after: Duration) {
    c.host.schedule(after, Timer::Rebalance { group: group_id.to_string(), seq });
}

pub(super) fn rebalance_timer_fired(c: &Rc<Coordinator>, group_id: &str, seq: u64) {
    let current = c.groups.borrow().get(group_id).map(|g| g.rebalance_seq);
    if current == Some(seq) {
        try_complete_join(c, group_id);
    }
}

/// Completes the join phase once every member has rejoined (and an empty
/// group's initial delay has passed), or at the rebalance deadline, when
/// members that did not rejoin are dropped.
pub(super) fn try_complete_join(c: &Rc<Coordinator>, group_id: &str) {
    let mut persist = false;
    {
        let mut groups = c.groups.borrow_mut();
        let Some(g) = groups.get_mut(group_id) else { return };
        if g.state != State::PreparingRebalance {
            return;
        }
        let now = c.now();
        let all_joined = g.members.values().all(|m| m.awaiting_join.is_some());
        let delay_over = g.initial_delay_until.is_none_or(|t| now >= t);
        let deadline_passed = g.rebalance_deadline.is_some_and(|t| now >= t);
        if !((all_joined && delay_over) || deadline_passed) {
            return;
        }
        g.members.retain(|_, m| m.awaiting_join.is_some());
        g.initial_delay_until = None;
        g.rebalance_deadline = None;
        g.generation += 1;
        g.state_timestamp = c.now_ms();
        if g.members.is_empty() {
            g.state = State::Empty;
            g.protocol = None;
            g.leader = None;
            persist = true;
        } else {
            g.protocol = g.select_protocol();
            let leader_still_here = g.leader.as_ref().is_some_and(|l| g.members.contains_key(l));
            if !leader_still_here {
                g.leader = g.members.iter().min_by_key(|(_, m)| m.joined_seq).map(|(id, _)| id.clone());
            }
            g.state = State::CompletingRebalance;
            log::info!(
                "group {group_id}: generation {} with {} member(s), protocol {:?}, leader {:?}",
                g.generation,
                g.members.len(),
                g.protocol,
                g.leader
            );
            let protocol = g.protocol.clone().unwrap_or_default();
            let everyone: Vec<JoinGroupResponseMember> = g
                .members
                .iter()
                .map(|(id, m)| {
                    let mut jm = JoinGroupResponseMember::default();
                    jm.member_id = s(id);
                    jm.group_instance_id = m.instance_id.as_deref().map(s);
                    jm.metadata =
                        m.protocols.iter().find(|(n, _)| *n == protocol).map(|(_, b)| b.clone()).unwrap_or_default();
                    jm
                })
                .collect();
            let leader = g.leader.clone().unwrap_or_default();
            for (id, m) in g.members.iter_mut() {
                let mut r = JoinGroupResponse::default();
                r.generation_id = g.generation;
                r.protocol_type = g.protocol_type.as_deref().map(s);
                r.protocol_name = Some(s(&protocol));
                r.leader = s(&leader);
                r.member_id = s(id);
                if *id == leader {
                    r.members = everyone.clone();
                }
                m.last_seen = now;
                if let Some(tx) = m.awaiting_join.take() {
                    let _ = tx.send(r);
                }
            }
        }
    }
    let ids: Vec<String> = c
        .groups
        .borrow()
        .get(group_id)
        .map(|g| g.members.iter().filter(|(_, m)| !m.session_timer_armed).map(|(id, _)| id.clone()).collect())
        .unwrap_or_default();
    for id in ids {
        arm_session_timer(c, group_id, &id);
        if let Some(m) = c.groups.borrow_mut().get_mut(group_id).and_then(|g| g.members.get_mut(&id)) {
            m.session_timer_armed = true;
        }
    }
    if persist {
        spawn_persist_group(c, group_id);
    }
}

/// Removes a member whose session timed out (unless it is waiting in a
/// join, where the rebalance timeout applies instead): checked at once, then
/// re-checked at each due time until the member is gone.
pub(super) fn arm_session_timer(c: &Rc<Coordinator>, group_id: &str, member_id: &str) {
    c.host.schedule(Duration::ZERO, Timer::Session { group: group_id.to_string(), member: member_id.to_string() });
}

pub(super) fn session_timer_fired(c: &Rc<Coordinator>, group_id: &str, member_id: &str) {
    let wait = {
        let mut groups = c.groups.borrow_mut();
        let Some(m) = groups.get_mut(group_id).and_then(|g| g.members.get_mut(member_id)) else { return };
        let due = m.last_seen + m.session_timeout;
        let now = c.now();
        if m.awaiting_join.is_some() || due > now {
            Some(due.saturating_duration_since(now).max(SESSION_RECHECK_MIN))
        } else {
            None
        }
    };
    match wait {
        Some(after) => {
            let timer = Timer::Session { group: group_id.to_string(), member: member_id.to_string() };
            c.host.schedule(after, timer);
        }
        None => {
            log::info!("group {group_id}: member {member_id} stopped heartbeating; removing it");
            remove_members(c, group_id, &[member_id.to_string()]);
        }
    }
}

/// Removes members, then rebalances the rest (or empties the group).
pub(super) fn remove_members(c: &Rc<Coordinator>, group_id: &str, ids: &[String]) {
    let mut persist = false;
    {
        let mut groups = c.groups.borrow_mut();
        let Some(g) = groups.get_mut(group_id) else { return };
        let before = g.members.len();
        for id in ids {
            g.members.remove(id);
        }
        if g.members.len() == before {
            return;
        }
        if g.leader.as_ref().is_some_and(|l| !g.members.contains_key(l)) {
            g.leader = None;
        }
        match g.state {
            State::Empty => {}
            State::PreparingRebalance => {}
            State::Stable | State::CompletingRebalance if g.members.is_empty() => {
                g.generation += 1;
                g.state = State::Empty;
                g.state_timestamp = c.now_ms();
                g.protocol = None;
                persist = true;
            }
            State::Stable | State::CompletingRebalance => start_rebalance(c, group_id, g),
        }
        if g.state == State::PreparingRebalance && g.members.is_empty() {
            g.rebalance_deadline = Some(c.now());
        }
    }
    try_complete_join(c, group_id);
    if persist {
        spawn_persist_group(c, group_id);
    }
}

pub(super) fn spawn_persist_group(c: &Rc<Coordinator>, group_id: &str) {
    let (owner, group_id) = (c.clone(), group_id.to_string());
    c.spawn(async move {
        if let Err(e) = persist_group(&owner, &group_id).await {
            log::warn!("group {group_id}: cannot persist its metadata: {e}");
        }
    });
}

/// Appends the group's current metadata (key v2, value v3), durably.
pub(super) async fn persist_group(c: &Rc<Coordinator>, group_id: &str) -> Result<(), StoreError> {
    let value = c.groups.borrow().get(group_id).map(Group::to_value);
    let Some(value) = value else { return Ok(()) };
    let key = Key::Group { group: group_id.to_string() }.encode();
    c.append(group_id, vec![(key, Some(value.encode()))]).await
}

pub(super) async fn sync(c: &Rc<Coordinator>, req: SyncGroupRequest) -> SyncGroupResponse {
    let group_id = req.group_id.0.to_string();
    let member_id = req.member_id.to_string();
    let error = |code| {
        let mut r = SyncGroupResponse::default();
        r.error_code = code;
        r
    };
    let rx = {
        let mut groups = c.groups.borrow_mut();
        let Some(g) = groups.get_mut(&group_id) else { return error(UNKNOWN_MEMBER_ID) };
        if !g.members.contains_key(&member_id) {
            return error(UNKNOWN_MEMBER_ID);
        }
        if req.generation_id != g.generation {
            return error(ILLEGAL_GENERATION);
        }
        let type_ok = req.protocol_type.as_ref().is_none_or(|t| g.protocol_type.as_deref() == Some(t.as_str()));
        let name_ok = req.protocol_name.as_ref().is_none_or(|n| g.protocol.as_deref() == Some(n.as_str()));
        if !type_ok || !name_ok {
            return error(INCONSISTENT_GROUP_PROTOCOL);
        }
        let state = g.state;
        let m = g.members.get_mut(&member_id).expect("checked above");
        m.last_seen = c.now();
        match state {
            State::Empty | State::PreparingRebalance => return error(REBALANCE_IN_PROGRESS),
            State::Stable => {
                let mut r = SyncGroupResponse::default();
                r.protocol_type = g.protocol_type.as_deref().map(s);
                r.protocol_name = g.protocol.as_deref().map(s);
                r.assignment = m.assignment.clone();
                return r;
            }
            State::CompletingRebalance => {
                let (tx, rx) = oneshot::channel();
                m.awaiting_sync = Some(tx);
                if g.leader.as_deref() == Some(member_id.as_str()) {
                    let given: HashMap<String, Bytes> =
                        req.assignments.iter().map(|a| (a.member_id.to_string(), a.assignment.clone())).collect();
                    for (id, m) in g.members.iter_mut() {
                        m.assignment = given.get(id).cloned().unwrap_or_default();
                    }
                    let (owner, group_id, generation) = (c.clone(), group_id.clone(), g.generation);
                    c.spawn(async move { finish_sync(&owner, &group_id, generation).await });
                }
                rx
            }
        }
    };
    rx.await.unwrap_or_else(|_| error(REBALANCE_IN_PROGRESS))
}

/// Persists the leader's assignment, then makes the group Stable and hands
/// every waiting member its assignment.
pub(super) async fn finish_sync(c: &Rc<Coordinator>, group_id: &str, generation: i32) {
    let persisted = persist_group(c, group_id).await;
    let mut groups = c.groups.borrow_mut();
    let Some(g) = groups.get_mut(group_id) else { return };
    if g.generation != generation || g.state != State::CompletingRebalance {
        return; // a newer rebalance took over; its members were told to rejoin
    }
    if let Err(e) = &persisted {
        log::warn!("group {group_id}: cannot persist generation {generation}: {e}");
        for m in g.members.values_mut() {
            m.assignment = Bytes::new();
            if let Some(tx) = m.awaiting_sync.take() {
                let mut r = SyncGroupResponse::default();
                r.error_code = COORDINATOR_NOT_AVAILABLE;
                let _ = tx.send(r);
            }
        }
        drop(groups);
        if let Some(g) = c.groups.borrow_mut().get_mut(group_id) {
            start_rebalance(c, group_id, g);
        }
        return;
    }
    g.state = State::Stable;
    g.state_timestamp = c.now_ms();
    for m in g.members.values_mut() {
        if let Some(tx) = m.awaiting_sync.take() {
            let mut r = SyncGroupResponse::default();
            r.protocol_type = g.protocol_type.as_deref().map(s);
            r.protocol_name = g.protocol.as_deref().map(s);
            r.assignment = m.assignment.clone();
            let _ = tx.send(r);
        }
    }
}

pub(super) fn heartbeat(c: &Rc<Coordinator>, req: HeartbeatRequest) -> i16 {
    let mut groups = c.groups.borrow_mut();
    let Some(g) = groups.get_mut(req.group_id.0.as_str()) else { return UNKNOWN_MEMBER_ID };
    let state = g.state;
    let generation = g.generation;
    let Some(m) = g.members.get_mut(req.member_id.as_str()) else { return UNKNOWN_MEMBER_ID };
    m.last_seen = c.now();
    match state {
        State::Empty => UNKNOWN_MEMBER_ID,
        State::PreparingRebalance => REBALANCE_IN_PROGRESS,
        _ if req.generation_id != generation => ILLEGAL_GENERATION,
        _ => NONE,
    }
}

pub(super) async fn leave(c: &Rc<Coordinator>, req: LeaveGroupRequest, version: i16) -> LeaveGroupResponse {
    let group_id = req.group_id.0.to_string();
    let mut response = LeaveGroupResponse::default();
    let identities: Vec<(String, Option<String>)> = if version >= 3 {
        req.members
            .iter()
            .map(|m| (m.member_id.to_string(), m.group_instance_id.as_ref().map(|i| i.to_string())))
            .collect()
    } else {
        vec![(req.member_id.to_string(), None)]
    };
    let mut leaving = Vec::new();
    {
        let groups = c.groups.borrow();
        let Some(g) = groups.get(&group_id) else {
            response.error_code = UNKNOWN_MEMBER_ID;
            return response;
        };
        for (member_id, instance) in identities {
            let found = match &instance {
                Some(i) => g.member_by_instance(i).filter(|id| member_id.is_empty() || *id == member_id),
                None => Some(member_id.clone()).filter(|id| g.members.contains_key(id)),
            };
            let mut r = MemberResponse::default();
            r.member_id = s(&member_id);
            r.group_instance_id = instance.as_deref().map(s);
            match found {
                Some(id) => leaving.push(id),
                None => r.error_code = UNKNOWN_MEMBER_ID,
            }
            response.members.push(r);
        }
    }
    if version < 3 && leaving.is_empty() {
        response.error_code = UNKNOWN_MEMBER_ID;
    }
    for id in &leaving {
        log::debug!("group {group_id}: member {id} leaves");
    }
    remove_members(c, &group_id, &leaving);
    response
}
