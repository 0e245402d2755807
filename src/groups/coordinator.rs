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
//! Timers are armed through the host ([`GroupHost::schedule`]) and re-check
//! when they fire: a session timer per member (re-armed from its last
//! heartbeat), one rebalance timer per rebalance (checked against the
//! rebalance's sequence number).
//!
//! **Architecture invariant:** nothing here knows the shard or glommio:
//! appends, timers, tasks, the clock and the settings come through
//! [`GroupHost`], so the state machine runs in unit tests on a fake one.

use std::{
    cell::{Cell, RefCell},
    collections::{BTreeMap, HashMap},
    future::Future,
    rc::Rc,
    time::{Duration, Instant},
};

use bytes::Bytes;
use futures_channel::oneshot;
use kafka_protocol::{
    messages::{
        DeleteGroupsResponse, DescribeGroupsResponse, JoinGroupResponse, LeaveGroupResponse, OffsetCommitResponse,
        OffsetDeleteResponse, SyncGroupResponse, TxnOffsetCommitResponse,
    },
    protocol::StrBytes,
};

use crate::groups::{
    ids::MemberIds,
    membership, offsets,
    records::{self, GroupValue, Key, MemberValue, OffsetValue},
    seam::{GroupHost, OffsetsRecord, Timer},
    CommitOffsets, DeleteGroups, DeleteOffsets, DescribeGroups, FetchOffsets, FetchedOffset, GroupSettings, Heartbeat,
    JoinGroup, LeaveGroup, ListGroups, ListedGroup, ReplayError, StoreError, SyncGroup,
};

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

pub(super) struct Member {
    pub(super) instance_id: Option<String>,
    pub(super) client_id: String,
    pub(super) client_host: String,
    pub(super) session_timeout: Duration,
    pub(super) rebalance_timeout: Duration,
    /// Protocols in the member's order of preference, with its metadata.
    pub(super) protocols: Vec<(String, Bytes)>,
    pub(super) assignment: Bytes,
    /// Order of first join: the leader is the earliest member still here.
    pub(super) joined_seq: u64,
    pub(super) awaiting_join: Option<oneshot::Sender<JoinGroupResponse>>,
    pub(super) awaiting_sync: Option<oneshot::Sender<SyncGroupResponse>>,
    pub(super) last_seen: Instant,
    pub(super) session_timer_armed: bool,
}

pub(super) struct Group {
    pub(super) state: State,
    pub(super) protocol_type: Option<String>,
    pub(super) protocol: Option<String>,
    pub(super) generation: i32,
    pub(super) leader: Option<String>,
    pub(super) members: BTreeMap<String, Member>,
    /// Member ids handed out with MEMBER_ID_REQUIRED, not yet joined.
    pub(super) pending: Vec<String>,
    pub(super) state_timestamp: i64,
    /// Bumped at each rebalance, so a timer of an older one does nothing.
    pub(super) rebalance_seq: u64,
    /// An empty group's first rebalance waits until then for more members.
    pub(super) initial_delay_until: Option<Instant>,
    pub(super) rebalance_deadline: Option<Instant>,
}

impl Group {
    pub(super) fn new(now_ms: i64) -> Self {
        Self {
            state: State::Empty,
            protocol_type: None,
            protocol: None,
            generation: 0,
            leader: None,
            members: BTreeMap::new(),
            pending: Vec::new(),
            state_timestamp: now_ms,
            rebalance_seq: 0,
            initial_delay_until: None,
            rebalance_deadline: None,
        }
    }

    /// Protocols every member supports.
    pub(super) fn candidates(&self) -> Vec<String> {
        let mut members = self.members.values();
        let Some(first) = members.next() else { return Vec::new() };
        let mut out: Vec<String> = first.protocols.iter().map(|(n, _)| n.clone()).collect();
        for m in members {
            out.retain(|p| m.protocols.iter().any(|(n, _)| n == p));
        }
        out
    }

    /// Each member votes for its most preferred candidate; most votes wins.
    pub(super) fn select_protocol(&self) -> Option<String> {
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

    pub(super) fn member_by_instance(&self, instance: &str) -> Option<String> {
        self.members.iter().find(|(_, m)| m.instance_id.as_deref() == Some(instance)).map(|(id, _)| id.clone())
    }

    pub(super) fn to_value(&self) -> GroupValue {
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

/// A group's committed offsets by (topic, partition).
pub(super) type GroupOffsets = BTreeMap<(String, i32), OffsetValue>;

/// The groups and committed offsets this shard coordinates.
pub struct Coordinator {
    pub(super) host: Box<dyn GroupHost>,
    pub(super) ids: MemberIds,
    pub(super) groups: RefCell<HashMap<String, Group>>,
    /// The offset cache: group → (topic, partition) → committed offset.
    pub(super) offsets: RefCell<HashMap<String, GroupOffsets>>,
    pub(super) next_seq: Cell<u64>,
    /// Records replayed at start, for the start-up log line.
    pub replayed: Cell<u64>,
    /// Offsets committed inside transactions, by producer id, until their
    /// marker (`txn_offsets.rs`).
    pub(super) pending_txn: RefCell<super::txn_offsets::TxnPending>,
}

pub(super) fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_string())
}

impl Coordinator {
    /// A coordinator with no groups yet. `id_seed` seeds its member-id
    /// generator once (the shard draws it from the OS at start).
    pub fn new(host: Box<dyn GroupHost>, id_seed: u128) -> Self {
        Self {
            host,
            ids: MemberIds::new(id_seed),
            groups: RefCell::default(),
            offsets: RefCell::default(),
            next_seq: Cell::new(0),
            replayed: Cell::new(0),
            pending_txn: RefCell::default(),
        }
    }

    pub fn settings(&self) -> &GroupSettings {
        self.host.settings()
    }

    pub(super) fn now(&self) -> Instant {
        self.host.now()
    }

    pub(super) fn now_ms(&self) -> i64 {
        self.host.now_ms()
    }

    /// Runs `task` on the host; it starts after the caller's borrows end
    /// (the host never polls it before returning).
    pub(super) fn spawn(&self, task: impl Future<Output = ()> + 'static) {
        self.host.spawn(Box::pin(task));
    }

    pub(super) fn seq(&self) -> u64 {
        let v = self.next_seq.get() + 1;
        self.next_seq.set(v);
        v
    }

    /// A timer armed through [`GroupHost::schedule`] is due.
    pub fn fire(self: &Rc<Self>, timer: Timer) {
        match timer {
            Timer::Rebalance { group, seq } => membership::rebalance_timer_fired(self, &group, seq),
            Timer::Session { group, member } => membership::session_timer_fired(self, &group, &member),
        }
    }

    /// The offset cache's size: (groups, committed keys).
    pub fn cache_size(&self) -> (usize, usize) {
        let offsets = self.offsets.borrow();
        (offsets.len(), offsets.values().map(BTreeMap::len).sum())
    }

    /// Every committed offset: (group, topic, partition, offset) — for the
    /// metrics endpoint's lag.
    pub fn committed(&self) -> Vec<(String, String, i32, i64)> {
        let offsets = self.offsets.borrow();
        let mut out = Vec::new();
        for (group, map) in offsets.iter() {
            for ((topic, partition), v) in map {
                out.push((group.clone(), topic.clone(), *partition, v.offset));
            }
        }
        out
    }

    /// Applies one `__consumer_offsets` record read at start.
    pub fn replay(&self, key: &[u8], value: Option<&[u8]>) -> Result<(), ReplayError> {
        let key = Key::decode(key).map_err(ReplayError::Key)?;
        self.replayed.set(self.replayed.get() + 1);
        match (key, value) {
            (Key::Offset { group, topic, partition }, Some(v)) => {
                let v = OffsetValue::decode(v).map_err(ReplayError::OffsetValue)?;
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
                let v = GroupValue::decode(v).map_err(ReplayError::GroupValue)?;
                let mut g = Group::new(self.now_ms());
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
                            last_seen: self.now(),
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
    pub fn arm_restored_sessions(self: &Rc<Self>) {
        let groups = self.groups.borrow();
        for (name, g) in groups.iter() {
            for (id, _) in g.members.iter().filter(|(_, m)| !m.session_timer_armed) {
                membership::arm_session_timer(self, name, id);
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

impl Coordinator {
    /// Forgets the groups of `__consumer_offsets` partition `partition`,
    /// whose leadership moved to another broker: their members, committed
    /// offsets and offsets waiting for a transaction's marker. A member
    /// waiting for its join or sync is told NOT_COORDINATOR, and finds the
    /// new coordinator. Timers of forgotten groups find nothing and stop.
    pub fn unload(&self, partition: i32) {
        let count = self.settings().offsets_partitions;
        let here = |group: &str| records::partition_for(group, count) == partition;
        let gone: Vec<(String, Group)> = {
            let mut groups = self.groups.borrow_mut();
            let names: Vec<String> = groups.keys().filter(|g| here(g)).cloned().collect();
            names.into_iter().filter_map(|n| groups.remove(&n).map(|g| (n, g))).collect()
        };
        for (_, group) in gone {
            for (id, mut m) in group.members {
                if let Some(tx) = m.awaiting_join.take() {
                    let _ = tx.send(membership::join_error(crate::protocol::errors::NOT_COORDINATOR, &id));
                }
                if let Some(tx) = m.awaiting_sync.take() {
                    let mut r = SyncGroupResponse::default();
                    r.error_code = crate::protocol::errors::NOT_COORDINATOR;
                    let _ = tx.send(r);
                }
            }
        }
        self.offsets.borrow_mut().retain(|g, _| !here(g));
        self.pending_txn.borrow_mut().forget(here);
    }
}

impl Coordinator {
    // The group calls (see `groups::JoinGroup` and the rest), each on the
    // coordinator shard.

    pub async fn join(self: &Rc<Self>, call: JoinGroup) -> JoinGroupResponse {
        let JoinGroup { request, version, client_id, client_host } = call;
        membership::join(self, request, version, client_id, client_host).await
    }

    pub async fn sync(self: &Rc<Self>, call: SyncGroup) -> SyncGroupResponse {
        membership::sync(self, call.request).await
    }

    pub async fn heartbeat(self: &Rc<Self>, call: Heartbeat) -> i16 {
        membership::heartbeat(self, call.request)
    }

    pub async fn leave(self: &Rc<Self>, call: LeaveGroup) -> LeaveGroupResponse {
        membership::leave(self, call.request, call.version).await
    }

    pub async fn commit(self: &Rc<Self>, call: CommitOffsets) -> OffsetCommitResponse {
        offsets::commit(self, call.request, call.version).await
    }

    pub async fn commit_txn(self: &Rc<Self>, call: super::CommitTxnOffsets) -> TxnOffsetCommitResponse {
        super::txn_offsets::commit(self, call.request).await
    }

    pub async fn fetch_offsets(self: &Rc<Self>, call: FetchOffsets) -> Vec<FetchedOffset> {
        offsets::fetch_offsets(self, &call.group, call.topics)
    }

    pub async fn describe(self: &Rc<Self>, call: DescribeGroups) -> DescribeGroupsResponse {
        offsets::describe(self, call.groups)
    }

    pub async fn list(self: &Rc<Self>, call: ListGroups) -> Vec<ListedGroup> {
        offsets::list(self, &call.states)
    }

    pub async fn delete_groups(self: &Rc<Self>, call: DeleteGroups) -> DeleteGroupsResponse {
        offsets::delete_groups(self, call.groups).await
    }

    pub async fn delete_offsets(self: &Rc<Self>, call: DeleteOffsets) -> OffsetDeleteResponse {
        offsets::offset_delete(self, call.request).await
    }

    /// Expires committed offsets whose time has come (see
    /// [`offsets::expire_offsets`]); the number expired.
    pub async fn expire_offsets(self: &Rc<Self>) -> usize {
        offsets::expire_offsets(self).await
    }

    /// Appends records to the group's `__consumer_offsets` partition and
    /// waits until they are durable.
    pub(super) async fn append(&self, group_id: &str, records: Vec<OffsetsRecord>) -> Result<(), StoreError> {
        if records.is_empty() {
            return Ok(());
        }
        let partition = records::partition_for(group_id, self.settings().offsets_partitions);
        self.host.append(partition, records).await
    }
}
