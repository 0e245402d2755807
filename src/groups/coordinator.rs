//! The group coordinator of one shard: the groups whose `__consumer_offsets`
//! partition this shard owns, their members and rebalances, and the offset
//! cache. Everything here runs on that shard's thread; state lives in
//! `RefCell`s borrowed briefly, never across an `.await`.
//!
//! Group states follow Kafka's classic protocol:
//!
//! ```text
//!  Empty ──join──► PreparingRebalance ──all joined / timeout──► CompletingRebalance
//!    ▲                 ▲        ▲                                   │ leader's SyncGroup
//!    │ last member     │ join,  └───────── member joins/leaves ─────┤ (persisted)
//!    │ leaves/expires  │ leave,                                     ▼
//!    └─────────────────┴─ expiry ◄───────────────────────────────  Stable
//! ```
//!
//! Timers are tasks that sleep and then re-check: a session timer per
//! member (re-armed from its last heartbeat), one rebalance timer per
//! rebalance (checked against the rebalance's sequence number).

use std::{
    cell::{Cell, RefCell},
    collections::{BTreeMap, HashMap},
    rc::Rc,
    time::{Duration, Instant},
};

use bytes::{Bytes, BytesMut};
use futures_channel::oneshot;
use kafka_protocol::{
    messages::{
        delete_groups_response::DeletableGroupResult,
        describe_groups_response::{DescribedGroup, DescribedGroupMember},
        join_group_response::JoinGroupResponseMember,
        leave_group_response::MemberResponse,
        offset_commit_response::{OffsetCommitResponsePartition, OffsetCommitResponseTopic},
        offset_delete_response::{OffsetDeleteResponsePartition, OffsetDeleteResponseTopic},
        DeleteGroupsResponse, DescribeGroupsResponse, GroupId, HeartbeatRequest, JoinGroupRequest, JoinGroupResponse,
        LeaveGroupRequest, LeaveGroupResponse, OffsetCommitRequest, OffsetCommitResponse, OffsetDeleteRequest,
        OffsetDeleteResponse, SyncGroupRequest, SyncGroupResponse,
    },
    protocol::StrBytes,
};

use crate::{
    groups::{
        records::{self, GroupValue, Key, MemberValue, OffsetValue},
        FetchedOffset, GroupAnswer, GroupCall, ListedGroup, OFFSETS_TOPIC,
    },
    protocol::record_batch::{self, Record},
    shard::{messages::codes, Shard},
    storage::Durability,
};

/// Kafka error codes of the group APIs.
pub mod errors {
    pub const OFFSET_METADATA_TOO_LARGE: i16 = 12;
    pub const COORDINATOR_LOAD_IN_PROGRESS: i16 = 14;
    pub const COORDINATOR_NOT_AVAILABLE: i16 = 15;
    pub const ILLEGAL_GENERATION: i16 = 22;
    pub const INCONSISTENT_GROUP_PROTOCOL: i16 = 23;
    pub const INVALID_GROUP_ID: i16 = 24;
    pub const UNKNOWN_MEMBER_ID: i16 = 25;
    pub const INVALID_SESSION_TIMEOUT: i16 = 26;
    pub const REBALANCE_IN_PROGRESS: i16 = 27;
    pub const NON_EMPTY_GROUP: i16 = 68;
    pub const GROUP_ID_NOT_FOUND: i16 = 69;
    pub const MEMBER_ID_REQUIRED: i16 = 79;
    pub const FENCED_INSTANCE_ID: i16 = 82;
    pub const GROUP_SUBSCRIBED_TO_TOPIC: i16 = 86;
}
use errors::*;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    Empty,
    PreparingRebalance,
    CompletingRebalance,
    Stable,
}

impl State {
    pub fn name(self) -> &'static str {
        match self {
            State::Empty => "Empty",
            State::PreparingRebalance => "PreparingRebalance",
            State::CompletingRebalance => "CompletingRebalance",
            State::Stable => "Stable",
        }
    }
}

struct Member {
    instance_id: Option<String>,
    client_id: String,
    client_host: String,
    session_timeout: Duration,
    rebalance_timeout: Duration,
    /// Protocols in the member's order of preference, with its metadata.
    protocols: Vec<(String, Bytes)>,
    assignment: Bytes,
    /// Order of first join: the leader is the earliest member still here.
    joined_seq: u64,
    awaiting_join: Option<oneshot::Sender<JoinGroupResponse>>,
    awaiting_sync: Option<oneshot::Sender<SyncGroupResponse>>,
    last_seen: Instant,
    session_timer_armed: bool,
}

struct Group {
    state: State,
    protocol_type: Option<String>,
    protocol: Option<String>,
    generation: i32,
    leader: Option<String>,
    members: BTreeMap<String, Member>,
    /// Member ids handed out with MEMBER_ID_REQUIRED, not yet joined.
    pending: Vec<String>,
    state_timestamp: i64,
    /// Bumped at each rebalance, so a timer of an older one does nothing.
    rebalance_seq: u64,
    /// An empty group's first rebalance waits until then for more members.
    initial_delay_until: Option<Instant>,
    rebalance_deadline: Option<Instant>,
}

impl Group {
    fn new() -> Self {
        Self {
            state: State::Empty,
            protocol_type: None,
            protocol: None,
            generation: 0,
            leader: None,
            members: BTreeMap::new(),
            pending: Vec::new(),
            state_timestamp: now_ms(),
            rebalance_seq: 0,
            initial_delay_until: None,
            rebalance_deadline: None,
        }
    }

    /// Protocols every member supports.
    fn candidates(&self) -> Vec<String> {
        let mut members = self.members.values();
        let Some(first) = members.next() else { return Vec::new() };
        let mut out: Vec<String> = first.protocols.iter().map(|(n, _)| n.clone()).collect();
        for m in members {
            out.retain(|p| m.protocols.iter().any(|(n, _)| n == p));
        }
        out
    }

    /// Each member votes for its most preferred candidate; most votes wins.
    fn select_protocol(&self) -> Option<String> {
        let candidates = self.candidates();
        let mut votes: BTreeMap<&str, usize> = BTreeMap::new();
        for m in self.members.values() {
            if let Some((name, _)) = m.protocols.iter().find(|(n, _)| candidates.contains(n)) {
                *votes.entry(name.as_str()).or_default() += 1;
            }
        }
        let best = votes.iter().max_by_key(|(_, &v)| v).map(|(n, _)| n.to_string());
        best
    }

    fn member_by_instance(&self, instance: &str) -> Option<String> {
        self.members.iter().find(|(_, m)| m.instance_id.as_deref() == Some(instance)).map(|(id, _)| id.clone())
    }

    fn to_value(&self) -> GroupValue {
        GroupValue {
            protocol_type: self.protocol_type.clone().unwrap_or_default(),
            generation: self.generation,
            protocol: self.protocol.clone(),
            leader: self.leader.clone(),
            state_timestamp: self.state_timestamp,
            members: self
                .members
                .iter()
                .map(|(id, m)| MemberValue {
                    member_id: id.clone(),
                    group_instance_id: m.instance_id.clone(),
                    client_id: m.client_id.clone(),
                    client_host: m.client_host.clone(),
                    rebalance_timeout_ms: m.rebalance_timeout.as_millis() as i32,
                    session_timeout_ms: m.session_timeout.as_millis() as i32,
                    subscription: self
                        .protocol
                        .as_ref()
                        .and_then(|p| m.protocols.iter().find(|(n, _)| n == p))
                        .map(|(_, meta)| meta.to_vec())
                        .unwrap_or_default(),
                    assignment: m.assignment.to_vec(),
                })
                .collect(),
        }
    }
}

/// The groups and committed offsets this shard coordinates.
#[derive(Default)]
pub struct Coordinator {
    groups: RefCell<HashMap<String, Group>>,
    /// The offset cache: group → (topic, partition) → committed offset.
    offsets: RefCell<HashMap<String, BTreeMap<(String, i32), OffsetValue>>>,
    next_seq: Cell<u64>,
    /// Records replayed at start, for the start-up log line.
    pub replayed: Cell<u64>,
}

/// Starts a task that first yields, so it never runs inside the caller's
/// `RefCell` borrows (glommio may poll a new task right away).
fn spawn(task: impl std::future::Future<Output = ()> + 'static) {
    glommio::spawn_local(async move {
        futures_lite::future::yield_now().await;
        task.await
    })
    .detach();
}

fn now_ms() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64)
}

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_string())
}

impl Coordinator {
    fn seq(&self) -> u64 {
        let v = self.next_seq.get() + 1;
        self.next_seq.set(v);
        v
    }

    /// The offset cache's size: (groups, committed keys).
    pub fn cache_size(&self) -> (usize, usize) {
        let offsets = self.offsets.borrow();
        (offsets.len(), offsets.values().map(BTreeMap::len).sum())
    }

    /// Applies one `__consumer_offsets` record read at start.
    pub fn replay(&self, key: &[u8], value: Option<&[u8]>) -> Result<(), String> {
        let key = Key::decode(key).map_err(|e| format!("key: {e}"))?;
        self.replayed.set(self.replayed.get() + 1);
        match (key, value) {
            (Key::Offset { group, topic, partition }, Some(v)) => {
                let v = OffsetValue::decode(v).map_err(|e| format!("offset value: {e}"))?;
                self.offsets.borrow_mut().entry(group).or_default().insert((topic, partition), v);
            }
            (Key::Offset { group, topic, partition }, None) => {
                let mut offsets = self.offsets.borrow_mut();
                if let Some(g) = offsets.get_mut(&group) {
                    g.remove(&(topic, partition));
                    if g.is_empty() {
                        offsets.remove(&group);
                    }
                }
            }
            (Key::Group { group }, Some(v)) => {
                let v = GroupValue::decode(v).map_err(|e| format!("group value: {e}"))?;
                let mut g = Group::new();
                g.protocol_type = Some(v.protocol_type).filter(|p| !p.is_empty());
                g.protocol = v.protocol;
                g.generation = v.generation;
                g.leader = v.leader;
                g.state_timestamp = v.state_timestamp;
                for m in v.members {
                    let protocols = match &g.protocol {
                        Some(p) => vec![(p.clone(), Bytes::from(m.subscription))],
                        None => Vec::new(),
                    };
                    g.members.insert(
                        m.member_id,
                        Member {
                            instance_id: m.group_instance_id,
                            client_id: m.client_id,
                            client_host: m.client_host,
                            session_timeout: Duration::from_millis(m.session_timeout_ms.max(0) as u64),
                            rebalance_timeout: Duration::from_millis(m.rebalance_timeout_ms.max(0) as u64),
                            protocols,
                            assignment: Bytes::from(m.assignment),
                            joined_seq: self.seq(),
                            awaiting_join: None,
                            awaiting_sync: None,
                            last_seen: Instant::now(),
                            session_timer_armed: false,
                        },
                    );
                }
                g.state = if g.members.is_empty() { State::Empty } else { State::Stable };
                self.groups.borrow_mut().insert(group, g);
            }
            (Key::Group { group }, None) => {
                self.groups.borrow_mut().remove(&group);
            }
        }
        Ok(())
    }

    /// After replay: members restored from the log must heartbeat within
    /// their session timeout, or they are removed as usual.
    pub fn arm_restored_sessions(&self, shard: &Rc<Shard>) {
        let groups = self.groups.borrow();
        for (name, g) in groups.iter() {
            for id in g.members.keys() {
                arm_session_timer(shard, name, id);
            }
        }
        drop(groups);
        for g in self.groups.borrow_mut().values_mut() {
            for m in g.members.values_mut() {
                m.session_timer_armed = true;
            }
        }
    }
}

/// Handles one group request on the coordinator shard.
pub async fn handle(shard: &Rc<Shard>, call: GroupCall) -> GroupAnswer {
    match call {
        GroupCall::Join { request, version, client_id, client_host } => {
            GroupAnswer::Join(join(shard, request, version, client_id, client_host).await)
        }
        GroupCall::Sync { request } => GroupAnswer::Sync(sync(shard, request).await),
        GroupCall::Heartbeat { request } => GroupAnswer::Heartbeat(heartbeat(shard, request)),
        GroupCall::Leave { request, version } => GroupAnswer::Leave(leave(shard, request, version).await),
        GroupCall::Commit { request, version } => GroupAnswer::Commit(commit(shard, request, version).await),
        GroupCall::FetchOffsets { group, topics } => GroupAnswer::Offsets(Ok(fetch_offsets(shard, &group, topics))),
        GroupCall::Describe { groups } => GroupAnswer::Describe(describe(shard, groups)),
        GroupCall::List { states } => GroupAnswer::List(list(shard, &states)),
        GroupCall::Delete { groups } => GroupAnswer::Delete(delete_groups(shard, groups).await),
        GroupCall::OffsetDelete { request } => GroupAnswer::OffsetDelete(offset_delete(shard, request).await),
    }
}

fn join_error(code: i16, member_id: &str) -> JoinGroupResponse {
    let mut r = JoinGroupResponse::default();
    r.error_code = code;
    r.generation_id = -1;
    r.member_id = s(member_id);
    r
}

async fn join(
    shard: &Rc<Shard>,
    req: JoinGroupRequest,
    version: i16,
    client_id: String,
    client_host: String,
) -> JoinGroupResponse {
    let settings = &shard.settings.groups;
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
    let coordinator = &shard.groups;
    let (tx, rx) = oneshot::channel();
    {
        let mut groups = coordinator.groups.borrow_mut();
        if !groups.contains_key(&group_id) {
            if !member_id.is_empty() {
                return join_error(UNKNOWN_MEMBER_ID, &member_id);
            }
            groups.insert(group_id.clone(), Group::new());
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
                None if member_id.is_empty() => format!("{instance}-{}", crate::shard::topics::new_topic_id()),
                None => member_id.clone(),
            },
            None if member_id.is_empty() => {
                let id = format!("{client_id}-{}", crate::shard::topics::new_topic_id());
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
        g.pending.retain(|p| p != &id);
        log::debug!("group {group_id}: join from {id} in state {}", g.state.name());
        let seq = coordinator.seq();
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
            last_seen: Instant::now(),
            session_timer_armed: false,
        });
        member.session_timeout = Duration::from_millis(req.session_timeout_ms as u64);
        let rebalance_ms = if req.rebalance_timeout_ms > 0 { req.rebalance_timeout_ms } else { req.session_timeout_ms };
        member.rebalance_timeout = Duration::from_millis(rebalance_ms as u64);
        member.protocols = protocols;
        member.client_id = client_id;
        member.client_host = client_host;
        member.last_seen = Instant::now();
        // A second join from the same member replaces the first.
        member.awaiting_join = Some(tx);
        if g.protocol_type.is_none() || g.members.len() == 1 {
            g.protocol_type = Some(req.protocol_type.to_string());
        }
        match g.state {
            State::Empty => {
                let delay = Duration::from_millis(settings.initial_rebalance_delay_ms);
                g.initial_delay_until = Some(Instant::now() + delay);
                start_rebalance(shard, &group_id, g);
                arm_timer(shard, &group_id, g.rebalance_seq, delay);
            }
            State::PreparingRebalance => {
                if let Some(until) = g.initial_delay_until {
                    // Kafka's delayed initial join: each new member extends
                    // the wait, up to the rebalance timeout.
                    let delay = Duration::from_millis(settings.initial_rebalance_delay_ms);
                    let extended = (Instant::now() + delay).min(g.rebalance_deadline.unwrap_or(until));
                    if extended > until {
                        g.initial_delay_until = Some(extended);
                        arm_timer(shard, &group_id, g.rebalance_seq, extended - Instant::now());
                    }
                }
            }
            State::CompletingRebalance | State::Stable => start_rebalance(shard, &group_id, g),
        }
    }
    try_complete_join(shard, &group_id);
    rx.await.unwrap_or_else(|_| join_error(UNKNOWN_MEMBER_ID, &member_id))
}

/// Moves a group to PreparingRebalance: pending syncs are told to rejoin,
/// and a timer ends the rebalance at the longest rebalance timeout.
fn start_rebalance(shard: &Rc<Shard>, group_id: &str, g: &mut Group) {
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
    g.state_timestamp = now_ms();
    g.rebalance_seq += 1;
    let timeout = g.members.values().map(|m| m.rebalance_timeout).max().unwrap_or_default();
    g.rebalance_deadline = Some(Instant::now() + timeout);
    arm_timer(shard, group_id, g.rebalance_seq, timeout);
}

/// Re-checks the group when `after` has passed, if the same rebalance is
/// still going on.
fn arm_timer(shard: &Rc<Shard>, group_id: &str, seq: u64, after: Duration) {
    let (shard, group_id) = (shard.clone(), group_id.to_string());
    spawn(async move {
        glommio::timer::sleep(after).await;
        let current = shard.groups.groups.borrow().get(&group_id).map(|g| g.rebalance_seq);
        if current == Some(seq) {
            try_complete_join(&shard, &group_id);
        }
    });
}

/// Completes the join phase once every member has rejoined (and an empty
/// group's initial delay has passed), or at the rebalance deadline, when
/// members that did not rejoin are dropped.
fn try_complete_join(shard: &Rc<Shard>, group_id: &str) {
    let mut persist = false;
    {
        let mut groups = shard.groups.groups.borrow_mut();
        let Some(g) = groups.get_mut(group_id) else { return };
        if g.state != State::PreparingRebalance {
            return;
        }
        let now = Instant::now();
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
        g.state_timestamp = now_ms();
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
    let ids: Vec<String> = shard
        .groups
        .groups
        .borrow()
        .get(group_id)
        .map(|g| g.members.iter().filter(|(_, m)| !m.session_timer_armed).map(|(id, _)| id.clone()).collect())
        .unwrap_or_default();
    for id in ids {
        arm_session_timer(shard, group_id, &id);
        if let Some(m) = shard.groups.groups.borrow_mut().get_mut(group_id).and_then(|g| g.members.get_mut(&id)) {
            m.session_timer_armed = true;
        }
    }
    if persist {
        spawn_persist_group(shard, group_id);
    }
}

/// Removes a member whose session timed out (unless it is waiting in a
/// join, where the rebalance timeout applies instead).
fn arm_session_timer(shard: &Rc<Shard>, group_id: &str, member_id: &str) {
    let (shard, group_id, member_id) = (shard.clone(), group_id.to_string(), member_id.to_string());
    spawn(async move {
        loop {
            let wait = {
                let mut groups = shard.groups.groups.borrow_mut();
                let Some(m) = groups.get_mut(&group_id).and_then(|g| g.members.get_mut(&member_id)) else { return };
                let due = m.last_seen + m.session_timeout;
                let now = Instant::now();
                if m.awaiting_join.is_some() || due > now {
                    Some(due.saturating_duration_since(now).max(Duration::from_millis(10)))
                } else {
                    None
                }
            };
            match wait {
                Some(d) => glommio::timer::sleep(d).await,
                None => break,
            }
        }
        log::info!("group {group_id}: member {member_id} stopped heartbeating; removing it");
        remove_members(&shard, &group_id, &[member_id]);
    });
}

/// Removes members, then rebalances the rest (or empties the group).
fn remove_members(shard: &Rc<Shard>, group_id: &str, ids: &[String]) {
    let mut persist = false;
    {
        let mut groups = shard.groups.groups.borrow_mut();
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
                g.state_timestamp = now_ms();
                g.protocol = None;
                persist = true;
            }
            State::Stable | State::CompletingRebalance => start_rebalance(shard, group_id, g),
        }
        if g.state == State::PreparingRebalance && g.members.is_empty() {
            g.rebalance_deadline = Some(Instant::now());
        }
    }
    try_complete_join(shard, group_id);
    if persist {
        spawn_persist_group(shard, group_id);
    }
}

fn spawn_persist_group(shard: &Rc<Shard>, group_id: &str) {
    let (shard, group_id) = (shard.clone(), group_id.to_string());
    spawn(async move {
        if let Err(e) = persist_group(&shard, &group_id).await {
            log::warn!("group {group_id}: cannot persist its metadata: {e}");
        }
    });
}

/// Appends the group's current metadata (key v2, value v3), durably.
async fn persist_group(shard: &Rc<Shard>, group_id: &str) -> Result<(), String> {
    let value = shard.groups.groups.borrow().get(group_id).map(Group::to_value);
    let Some(value) = value else { return Ok(()) };
    let key = Key::Group { group: group_id.to_string() }.encode();
    append(shard, group_id, &[(key, Some(value.encode()))]).await
}

/// Appends records to the group's `__consumer_offsets` partition and waits
/// until they are durable.
async fn append(shard: &Rc<Shard>, group_id: &str, records: &[(Vec<u8>, Option<Vec<u8>>)]) -> Result<(), String> {
    if records.is_empty() {
        return Ok(());
    }
    let partition = records::partition_for(group_id, shard.settings.groups.offsets_partitions);
    let Some(p) = shard.partition(OFFSETS_TOPIC, partition) else {
        return Err(format!("{OFFSETS_TOPIC}-{partition} is not open on shard {}", shard.id));
    };
    let recs: Vec<Record<'_>> = records
        .iter()
        .map(|(k, v)| Record { key: Some(k.as_slice()), value: v.as_deref(), timestamp_delta: 0 })
        .collect();
    let batch = record_batch::encode_batch(&recs, now_ms());
    let result = p.log.append(BytesMut::from(&batch[..]), Durability::Synced).await;
    p.appended.notify_all();
    result.map(|_| ()).map_err(|e| e.to_string())
}

async fn sync(shard: &Rc<Shard>, req: SyncGroupRequest) -> SyncGroupResponse {
    let group_id = req.group_id.0.to_string();
    let member_id = req.member_id.to_string();
    let error = |code| {
        let mut r = SyncGroupResponse::default();
        r.error_code = code;
        r
    };
    let rx = {
        let mut groups = shard.groups.groups.borrow_mut();
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
        m.last_seen = Instant::now();
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
                    let (shard, group_id, generation) = (shard.clone(), group_id.clone(), g.generation);
                    spawn(async move { finish_sync(&shard, &group_id, generation).await });
                }
                rx
            }
        }
    };
    rx.await.unwrap_or_else(|_| error(REBALANCE_IN_PROGRESS))
}

/// Persists the leader's assignment, then makes the group Stable and hands
/// every waiting member its assignment.
async fn finish_sync(shard: &Rc<Shard>, group_id: &str, generation: i32) {
    let persisted = persist_group(shard, group_id).await;
    let mut groups = shard.groups.groups.borrow_mut();
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
        if let Some(g) = shard.groups.groups.borrow_mut().get_mut(group_id) {
            start_rebalance(shard, group_id, g);
        }
        return;
    }
    g.state = State::Stable;
    g.state_timestamp = now_ms();
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

fn heartbeat(shard: &Rc<Shard>, req: HeartbeatRequest) -> i16 {
    let mut groups = shard.groups.groups.borrow_mut();
    let Some(g) = groups.get_mut(req.group_id.0.as_str()) else { return UNKNOWN_MEMBER_ID };
    let state = g.state;
    let generation = g.generation;
    let Some(m) = g.members.get_mut(req.member_id.as_str()) else { return UNKNOWN_MEMBER_ID };
    m.last_seen = Instant::now();
    match state {
        State::Empty => UNKNOWN_MEMBER_ID,
        State::PreparingRebalance => REBALANCE_IN_PROGRESS,
        _ if req.generation_id != generation => ILLEGAL_GENERATION,
        _ => codes::NONE,
    }
}

async fn leave(shard: &Rc<Shard>, req: LeaveGroupRequest, version: i16) -> LeaveGroupResponse {
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
        let groups = shard.groups.groups.borrow();
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
    remove_members(shard, &group_id, &leaving);
    response
}

async fn commit(shard: &Rc<Shard>, req: OffsetCommitRequest, version: i16) -> OffsetCommitResponse {
    let group_id = req.group_id.0.to_string();
    let settings = &shard.settings.groups;
    let group_error = {
        let groups = shard.groups.groups.borrow();
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
    let table = shard.topics();
    let commit_ts = now_ms();
    let expire_ts =
        if (2..=4).contains(&version) && req.retention_time_ms >= 0 { commit_ts + req.retention_time_ms } else { -1 };
    let mut response = OffsetCommitResponse::default();
    let mut to_write: Vec<(String, i32, OffsetValue)> = Vec::new();
    for t in &req.topics {
        let mut rt = OffsetCommitResponseTopic::default();
        rt.name = t.name.clone();
        for p in &t.partitions {
            let metadata = p.committed_metadata.as_ref().map(|m| m.to_string()).unwrap_or_default();
            let known =
                table.topics.get(t.name.0.as_str()).is_some_and(|m| (0..m.partitions()).contains(&p.partition_index));
            let code = if let Some(e) = group_error {
                e
            } else if !known {
                codes::UNKNOWN_TOPIC_OR_PARTITION
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
                codes::NONE
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
    match append(shard, &group_id, &records).await {
        Ok(()) => {
            let mut offsets = shard.groups.offsets.borrow_mut();
            let cache = offsets.entry(group_id.clone()).or_default();
            for (topic, partition, v) in to_write {
                cache.insert((topic, partition), v);
            }
        }
        Err(e) => {
            log::warn!("group {group_id}: commit not stored: {e}");
            for t in &mut response.topics {
                for p in &mut t.partitions {
                    if p.error_code == codes::NONE {
                        p.error_code = COORDINATOR_NOT_AVAILABLE;
                    }
                }
            }
        }
    }
    response
}

/// Committed offsets from the cache alone: never from disk.
fn fetch_offsets(shard: &Rc<Shard>, group_id: &str, topics: Option<Vec<(String, Vec<i32>)>>) -> Vec<FetchedOffset> {
    let offsets = shard.groups.offsets.borrow();
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

fn describe(shard: &Rc<Shard>, names: Vec<String>) -> DescribeGroupsResponse {
    let groups = shard.groups.groups.borrow();
    let offsets = shard.groups.offsets.borrow();
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

fn list(shard: &Rc<Shard>, states: &[String]) -> Vec<ListedGroup> {
    let groups = shard.groups.groups.borrow();
    let offsets = shard.groups.offsets.borrow();
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

async fn delete_groups(shard: &Rc<Shard>, names: Vec<String>) -> DeleteGroupsResponse {
    let mut response = DeleteGroupsResponse::default();
    for name in names {
        let code = {
            let groups = shard.groups.groups.borrow();
            let has_offsets = shard.groups.offsets.borrow().contains_key(&name);
            match groups.get(&name) {
                Some(g) if !g.members.is_empty() => NON_EMPTY_GROUP,
                Some(_) => codes::NONE,
                None if has_offsets => codes::NONE,
                None => GROUP_ID_NOT_FOUND,
            }
        };
        let code = if code == codes::NONE { tombstone_group(shard, &name, None).await } else { code };
        let mut r = DeletableGroupResult::default();
        r.group_id = GroupId(s(&name));
        r.error_code = code;
        response.results.push(r);
    }
    response
}

/// Writes tombstones for the group's offsets (all, or the listed ones) and,
/// when all go, for the group itself; then drops them from memory.
async fn tombstone_group(shard: &Rc<Shard>, group_id: &str, only: Option<&[(String, i32)]>) -> i16 {
    let keys: Vec<(String, i32)> = match only {
        Some(list) => list.to_vec(),
        None => shard.groups.offsets.borrow().get(group_id).map(|c| c.keys().cloned().collect()).unwrap_or_default(),
    };
    let mut records: Vec<(Vec<u8>, Option<Vec<u8>>)> = keys
        .iter()
        .map(|(t, p)| (Key::Offset { group: group_id.to_string(), topic: t.clone(), partition: *p }.encode(), None))
        .collect();
    if only.is_none() {
        records.push((Key::Group { group: group_id.to_string() }.encode(), None));
    }
    if let Err(e) = append(shard, group_id, &records).await {
        log::warn!("group {group_id}: cannot write tombstones: {e}");
        return COORDINATOR_NOT_AVAILABLE;
    }
    let mut offsets = shard.groups.offsets.borrow_mut();
    if let Some(cache) = offsets.get_mut(group_id) {
        for k in &keys {
            cache.remove(k);
        }
        if cache.is_empty() {
            offsets.remove(group_id);
        }
    }
    if only.is_none() {
        shard.groups.groups.borrow_mut().remove(group_id);
    }
    codes::NONE
}

async fn offset_delete(shard: &Rc<Shard>, req: OffsetDeleteRequest) -> OffsetDeleteResponse {
    let group_id = req.group_id.0.to_string();
    let mut response = OffsetDeleteResponse::default();
    let subscribed: Option<Vec<String>> = {
        let groups = shard.groups.groups.borrow();
        let has_offsets = shard.groups.offsets.borrow().contains_key(&group_id);
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
        let code = tombstone_group(shard, &group_id, Some(&delete)).await;
        if code != codes::NONE {
            response.error_code = code;
        }
    }
    response
}

/// Topics the members of a consumer group subscribe to (consumer protocol
/// subscriptions); empty for other protocol types.
fn subscribed_topics(g: &Group) -> Vec<String> {
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
pub async fn expire_offsets(shard: &Rc<Shard>) -> usize {
    let now = now_ms();
    let retention = shard.settings.groups.offsets_retention_ms;
    let mut expired: Vec<(String, Vec<(String, i32)>, bool)> = Vec::new();
    {
        let groups = shard.groups.groups.borrow();
        let offsets = shard.groups.offsets.borrow();
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
        let only = if all && shard.groups.groups.borrow().get(&group_id).is_none_or(|g| g.members.is_empty()) {
            None
        } else {
            Some(keys.as_slice())
        };
        tombstone_group(shard, &group_id, only).await;
    }
    count
}
