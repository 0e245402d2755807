//! The group state machine on a fake host: a clock that moves only when a
//! test says so, timers that fire in due order, tasks polled by hand and a
//! `__consumer_offsets` kept in memory. No glommio, no sockets, no disk.
//!
//! Each test drives the coordinator through the Kafka requests a client
//! would send and checks what the coordinator answered or stored:
//! generations, members, leaders, error codes and the group records it
//! appended.

use std::{
    cell::{Cell, RefCell},
    future::Future,
    pin::Pin,
    rc::Rc,
    task::{Context, Poll, Waker},
    time::{Duration, Instant},
};

use bytes::Bytes;
use kafka_protocol::{
    messages::{
        join_group_request::JoinGroupRequestProtocol,
        leave_group_request::MemberIdentity,
        offset_commit_request::{OffsetCommitRequestPartition, OffsetCommitRequestTopic},
        sync_group_request::SyncGroupRequestAssignment,
        GroupId, HeartbeatRequest, JoinGroupRequest, JoinGroupResponse, LeaveGroupRequest, OffsetCommitRequest,
        SyncGroupRequest, SyncGroupResponse, TopicName,
    },
    protocol::StrBytes,
};

use super::CommitTxnOffsets;
use super::{
    records::{GroupValue, Key},
    seam::{GroupHost, LocalTask, OffsetsRecord, Timer},
    CommitOffsets, Coordinator, DescribeGroups, FetchOffsets, GroupSettings, Heartbeat, JoinGroup, LeaveGroup,
    SyncGroup,
};
use crate::{groups::StoreError, protocol::errors::*};

const GROUP: &str = "orders";
const SESSION_MS: i32 = 10_000;
const REBALANCE_MS: i32 = 20_000;
/// JoinGroup v5: MEMBER_ID_REQUIRED (v4+) and static members (v5+).
const JOIN_VERSION: i16 = 5;
const LEAVE_VERSION: i16 = 3;

/// Everything the fake host shares with the test.
struct World {
    settings: GroupSettings,
    start: Instant,
    elapsed: Cell<Duration>,
    timers: RefCell<Vec<(Instant, Timer)>>,
    tasks: RefCell<Vec<LocalTask>>,
    /// `__consumer_offsets`: (partition, records of one append).
    log: RefCell<Vec<(i32, Vec<OffsetsRecord>)>>,
    fail_appends: Cell<bool>,
    /// Transactional appends: (partition, producer id, epoch).
    txn_appends: RefCell<Vec<(i32, i64, i16)>>,
}

impl World {
    fn now(&self) -> Instant {
        self.start + self.elapsed.get()
    }
}

struct FakeHost(Rc<World>);

impl GroupHost for FakeHost {
    fn settings(&self) -> &GroupSettings {
        &self.0.settings
    }

    fn now(&self) -> Instant {
        self.0.now()
    }

    fn now_ms(&self) -> i64 {
        1_700_000_000_000 + self.0.elapsed.get().as_millis() as i64
    }

    fn partition_exists(&self, topic: &str, partition: i32) -> bool {
        topic == "payments" && (0..4).contains(&partition)
    }

    fn append(
        &self,
        partition: i32,
        records: Vec<OffsetsRecord>,
    ) -> Pin<Box<dyn Future<Output = Result<(), StoreError>>>> {
        let result = if self.0.fail_appends.get() {
            Err(StoreError::Storage("disk on fire".into()))
        } else {
            self.0.log.borrow_mut().push((partition, records));
            Ok(())
        };
        Box::pin(std::future::ready(result))
    }

    fn append_transactional(
        &self,
        partition: i32,
        records: Vec<OffsetsRecord>,
        producer_id: i64,
        producer_epoch: i16,
    ) -> Pin<Box<dyn Future<Output = Result<(), StoreError>>>> {
        if !self.0.fail_appends.get() {
            self.0.txn_appends.borrow_mut().push((partition, producer_id, producer_epoch));
        }
        self.append(partition, records)
    }

    fn schedule(&self, after: Duration, timer: Timer) {
        self.0.timers.borrow_mut().push((self.0.now() + after, timer));
    }

    fn spawn(&self, task: LocalTask) {
        self.0.tasks.borrow_mut().push(task);
    }
}

/// A request whose answer may come later (a join waits for the rebalance).
struct Pending<T>(Option<Pin<Box<dyn Future<Output = T>>>>);

impl<T> Pending<T> {
    fn poll(&mut self) -> Option<T> {
        let fut = self.0.as_mut()?;
        match fut.as_mut().poll(&mut Context::from_waker(Waker::noop())) {
            Poll::Ready(answer) => {
                self.0 = None;
                Some(answer)
            }
            Poll::Pending => None,
        }
    }
}

impl Pending<JoinGroupResponse> {
    fn join(&mut self) -> Option<JoinGroupResponse> {
        self.poll()
    }
}

impl Pending<SyncGroupResponse> {
    fn sync(&mut self) -> Option<SyncGroupResponse> {
        self.poll()
    }
}

struct Harness {
    world: Rc<World>,
    c: Rc<Coordinator>,
}

impl Harness {
    fn new(initial_rebalance_delay_ms: u64) -> Self {
        let settings = GroupSettings { initial_rebalance_delay_ms, ..GroupSettings::default() };
        let world = Rc::new(World {
            settings,
            start: Instant::now(),
            elapsed: Cell::new(Duration::ZERO),
            timers: RefCell::default(),
            tasks: RefCell::default(),
            log: RefCell::default(),
            fail_appends: Cell::new(false),
            txn_appends: RefCell::default(),
        });
        let c = Rc::new(Coordinator::new(Box::new(FakeHost(world.clone())), 7));
        Self { world, c }
    }

    /// Polls spawned tasks and fires timers that are due, until neither
    /// makes progress. Bounded: a coordinator that re-arms forever fails.
    fn settle(&self) {
        for _ in 0..1000 {
            let tasks: Vec<LocalTask> = self.world.tasks.borrow_mut().drain(..).collect();
            let mut progressed = !tasks.is_empty();
            for mut t in tasks {
                if t.as_mut().poll(&mut Context::from_waker(Waker::noop())).is_pending() {
                    self.world.tasks.borrow_mut().push(t);
                    progressed = false;
                }
            }
            let now = self.world.now();
            let due: Vec<Timer> = {
                let mut timers = self.world.timers.borrow_mut();
                timers.sort_by_key(|(at, _)| *at);
                let n = timers.iter().take_while(|(at, _)| *at <= now).count();
                timers.drain(..n).map(|(_, t)| t).collect()
            };
            progressed |= !due.is_empty();
            for t in due {
                self.c.fire(t);
            }
            if !progressed {
                return;
            }
        }
        panic!("the coordinator never settled");
    }

    /// Moves the clock forward in `step`s, settling after each.
    fn advance(&self, by: Duration, step: Duration) {
        let end = self.world.elapsed.get() + by;
        while self.world.elapsed.get() < end {
            self.world.elapsed.set((self.world.elapsed.get() + step).min(end));
            self.settle();
        }
    }

    /// Runs `call` on the coordinator: `|c| async move { c.join(..).await }`.
    fn call<T: 'static, F: Future<Output = T> + 'static>(&self, call: impl FnOnce(Rc<Coordinator>) -> F) -> Pending<T> {
        let mut p = Pending(Some(Box::pin(call(self.c.clone()))));
        // Poll once (the request runs until it waits), let the tasks and
        // timers it started run, then look again.
        let first = p.poll();
        self.settle();
        let answer = first.or_else(|| p.poll());
        match answer {
            Some(answer) => Pending(Some(Box::pin(std::future::ready(answer)))),
            None => p,
        }
    }

    fn join(&self, member_id: &str, instance: Option<&str>, metadata: &'static [u8]) -> Pending<JoinGroupResponse> {
        let mut request = JoinGroupRequest::default();
        request.group_id = GroupId(s(GROUP));
        request.session_timeout_ms = SESSION_MS;
        request.rebalance_timeout_ms = REBALANCE_MS;
        request.member_id = s(member_id);
        request.group_instance_id = instance.map(s);
        request.protocol_type = s("consumer");
        let mut protocol = JoinGroupRequestProtocol::default();
        protocol.name = s("range");
        protocol.metadata = Bytes::from_static(metadata);
        request.protocols = vec![protocol];
        let call = JoinGroup {
            request,
            version: JOIN_VERSION,
            client_id: "client".to_string(),
            client_host: "/127.0.0.1".to_string(),
        };
        self.call(|c| async move { c.join(call).await })
    }

    /// A dynamic member's first join: MEMBER_ID_REQUIRED, then the join
    /// with the id the coordinator handed out.
    fn join_new(&self, metadata: &'static [u8]) -> (String, Pending<JoinGroupResponse>) {
        let first = self.join("", None, metadata).join().expect("answered at once");
        assert_eq!(first.error_code, MEMBER_ID_REQUIRED);
        let id = first.member_id.to_string();
        assert!(id.starts_with("client-"), "{id}");
        (id.clone(), self.join(&id, None, metadata))
    }

    fn sync(
        &self,
        member_id: &str,
        generation: i32,
        assignments: &[(&str, &'static [u8])],
    ) -> Pending<SyncGroupResponse> {
        let mut request = SyncGroupRequest::default();
        request.group_id = GroupId(s(GROUP));
        request.generation_id = generation;
        request.member_id = s(member_id);
        request.assignments = assignments
            .iter()
            .map(|(id, a)| {
                let mut x = SyncGroupRequestAssignment::default();
                x.member_id = s(id);
                x.assignment = Bytes::from_static(a);
                x
            })
            .collect();
        self.call(|c| async move { c.sync(SyncGroup { request }).await })
    }

    fn heartbeat(&self, member_id: &str, generation: i32) -> i16 {
        let mut request = HeartbeatRequest::default();
        request.group_id = GroupId(s(GROUP));
        request.generation_id = generation;
        request.member_id = s(member_id);
        let answer = self.call(|c| async move { c.heartbeat(Heartbeat { request }).await }).poll();
        answer.expect("a heartbeat is answered at once")
    }

    fn leave(&self, member_id: &str) -> i16 {
        let mut request = LeaveGroupRequest::default();
        request.group_id = GroupId(s(GROUP));
        let mut m = MemberIdentity::default();
        m.member_id = s(member_id);
        request.members = vec![m];
        let call = LeaveGroup { request, version: LEAVE_VERSION };
        let r = self.call(|c| async move { c.leave(call).await }).poll().expect("a leave is answered at once");
        r.members.first().map_or(r.error_code, |m| m.error_code.max(r.error_code))
    }

    /// (state, member ids) as DescribeGroups reports them.
    fn describe(&self) -> (String, Vec<String>) {
        let call = DescribeGroups { groups: vec![GROUP.to_string()] };
        let r = self.call(|c| async move { c.describe(call).await }).poll().expect("a describe is answered at once");
        let g = &r.groups[0];
        (g.group_state.to_string(), g.members.iter().map(|m| m.member_id.to_string()).collect())
    }

    /// The group's newest metadata record in the fake `__consumer_offsets`.
    fn stored_group(&self) -> Option<GroupValue> {
        let log = self.world.log.borrow();
        let records = log.iter().flat_map(|(_, records)| records.iter());
        let mut newest = None;
        for (key, value) in records {
            if let Ok(Key::Group { group }) = Key::decode(key) {
                if group == GROUP {
                    newest = value.as_deref().map(|v| GroupValue::decode(v).expect("a group value we wrote"));
                }
            }
        }
        newest
    }
}

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_string())
}

fn sorted(mut v: Vec<String>) -> Vec<String> {
    v.sort();
    v
}

/// Two dynamic members reach a stable generation: `a` joins first (and
/// leads), `b` joins during `a`'s initial delay. Returns (a, b, generation).
fn two_stable_members(h: &Harness) -> (String, String, i32) {
    let (a, mut ja) = h.join_new(b"sub");
    let (b, mut jb) = h.join_new(b"sub");
    assert!(ja.join().is_none() && jb.join().is_none(), "both wait for the initial delay");
    h.advance(Duration::from_millis(h.world.settings.initial_rebalance_delay_ms), Duration::from_millis(100));
    let (ra, rb) = (ja.join().expect("join completes"), jb.join().expect("join completes"));
    assert_eq!((ra.error_code, rb.error_code), (NONE, NONE));
    assert_eq!(ra.generation_id, rb.generation_id);
    assert_eq!(ra.leader.as_str(), a, "the first member leads");
    assert_eq!(
        sorted(ra.members.iter().map(|m| m.member_id.to_string()).collect()),
        sorted(vec![a.clone(), b.clone()])
    );
    assert!(rb.members.is_empty(), "only the leader sees the members");
    let generation = ra.generation_id;
    let mut sb = h.sync(&b, generation, &[]);
    assert!(sb.sync().is_none(), "a follower waits for the leader's assignment");
    let mut sa = h.sync(&a, generation, &[(&a, b"for-a"), (&b, b"for-b")]);
    assert_eq!(sa.sync().expect("leader answered").assignment.as_ref(), b"for-a");
    assert_eq!(sb.sync().expect("follower answered").assignment.as_ref(), b"for-b");
    (a, b, generation)
}

#[test]
fn join_sync_heartbeat_and_leave() {
    let h = Harness::new(3000);
    let (a, b, generation) = two_stable_members(&h);
    assert_eq!(generation, 1);
    assert_eq!(h.describe(), ("Stable".to_string(), sorted(vec![a.clone(), b.clone()])));
    let stored = h.stored_group().expect("the synced generation was persisted");
    assert_eq!(stored.generation, generation);
    assert_eq!(stored.leader.as_deref(), Some(a.as_str()));
    assert_eq!(stored.members.len(), 2);
    assert_eq!(h.heartbeat(&a, generation), NONE);
    assert_eq!(h.heartbeat(&a, generation - 1), ILLEGAL_GENERATION);
    assert_eq!(h.heartbeat("stranger", generation), UNKNOWN_MEMBER_ID);
    assert_eq!(h.sync(&a, generation + 1, &[]).sync().expect("answered").error_code, ILLEGAL_GENERATION);

    assert_eq!(h.leave(&b), NONE);
    assert_eq!(h.heartbeat(&a, generation), REBALANCE_IN_PROGRESS, "a leave rebalances the rest");
    let r = h.join(&a, None, b"sub").join().expect("the last member's rejoin completes the rebalance");
    assert_eq!(r.generation_id, generation + 1);
    assert_eq!(r.members.iter().map(|m| m.member_id.to_string()).collect::<Vec<_>>(), vec![a.clone()]);
    assert_eq!(h.leave(&b), UNKNOWN_MEMBER_ID, "b is gone");

    assert_eq!(h.leave(&a), NONE);
    let (state, members) = h.describe();
    assert_eq!((state.as_str(), members.len()), ("Empty", 0));
    assert_eq!(h.stored_group().expect("the empty group was persisted").members.len(), 0);
}

#[test]
fn a_static_member_rejoins_without_a_rebalance_and_fences_its_old_id() {
    let h = Harness::new(0);
    let mut ja = h.join("", Some("instance-a"), b"sub");
    h.settle();
    let ra = ja.join().expect("a static member joins without MEMBER_ID_REQUIRED");
    assert_eq!(ra.error_code, NONE);
    let a = ra.member_id.to_string();
    assert!(a.starts_with("instance-a-"), "{a}");
    let mut sa = h.sync(&a, ra.generation_id, &[(&a, b"for-a")]);
    assert_eq!(sa.sync().expect("stable").error_code, NONE);

    let mut jb = h.join("", Some("instance-b"), b"sub");
    assert_eq!(h.heartbeat(&a, ra.generation_id), REBALANCE_IN_PROGRESS);
    let mut ja = h.join(&a, Some("instance-a"), b"sub");
    let (ra, rb) = (ja.join().expect("rebalanced"), jb.join().expect("rebalanced"));
    let (b_old, generation) = (rb.member_id.to_string(), rb.generation_id);
    assert_eq!(ra.generation_id, generation);
    let mut sb = h.sync(&b_old, generation, &[]);
    h.sync(&a, generation, &[(&a, b"for-a"), (&b_old, b"for-b")]).sync().expect("leader's sync answered");
    assert_eq!(sb.sync().expect("follower's sync answered").assignment.as_ref(), b"for-b");

    // b's process restarts: same instance id, no member id.
    let back = h.join("", Some("instance-b"), b"sub").join().expect("answered at once, no rebalance");
    assert_eq!(back.error_code, NONE);
    assert_eq!(back.generation_id, generation, "no new generation");
    let b_new = back.member_id.to_string();
    assert_ne!(b_new, b_old, "a new member id");
    assert_eq!(h.heartbeat(&a, generation), NONE, "the others keep going");
    assert_eq!(h.heartbeat(&b_new, generation), NONE);
    assert_eq!(h.heartbeat(&b_old, generation), UNKNOWN_MEMBER_ID, "the old id is fenced");
    let zombie = h.join(&b_old, Some("instance-b"), b"sub").join().expect("answered at once");
    assert_eq!(zombie.error_code, FENCED_INSTANCE_ID);
    let sync = h.sync(&b_new, generation, &[]).sync().expect("stable group answers at once");
    assert_eq!(sync.assignment.as_ref(), b"for-b", "the old assignment carries over");
    assert_eq!(h.describe().1, sorted(vec![a, b_new]));
}

#[test]
fn a_member_that_stops_heartbeating_is_removed_after_its_session_timeout() {
    let h = Harness::new(3000);
    let (a, b, generation) = two_stable_members(&h);
    let session = Duration::from_millis(SESSION_MS as u64);
    // a heartbeats every second; b is silent.
    let step = Duration::from_secs(1);
    let mut waited = Duration::ZERO;
    while waited + step < session {
        h.advance(step, step);
        waited += step;
        assert_eq!(h.heartbeat(&a, generation), NONE, "b still counts after {waited:?}");
    }
    h.advance(step * 2, step);
    assert_eq!(h.heartbeat(&a, generation), REBALANCE_IN_PROGRESS, "b expired: the group rebalances");
    assert_eq!(h.heartbeat(&b, generation), UNKNOWN_MEMBER_ID);
    let r = h.join(&a, None, b"sub").join().expect("a alone completes the rebalance");
    assert_eq!(r.generation_id, generation + 1);
    assert_eq!(r.members.len(), 1);
    assert_eq!(r.leader.as_str(), a);
}

#[test]
fn members_that_do_not_rejoin_within_the_rebalance_timeout_are_dropped() {
    let h = Harness::new(3000);
    let (a, b, generation) = two_stable_members(&h);
    let (c, mut jc) = h.join_new(b"sub");
    assert_eq!(h.heartbeat(&a, generation), REBALANCE_IN_PROGRESS);
    let mut ja = h.join(&a, None, b"sub");
    // b keeps heartbeating (its session is fine) but never rejoins.
    let step = Duration::from_secs(1);
    let rebalance = Duration::from_millis(REBALANCE_MS as u64);
    let mut waited = Duration::ZERO;
    while waited + step < rebalance {
        assert_eq!(h.heartbeat(&b, generation), REBALANCE_IN_PROGRESS);
        h.advance(step, step);
        waited += step;
        assert!(ja.join().is_none() && jc.join().is_none(), "still waiting for b after {waited:?}");
    }
    h.advance(step * 2, step);
    let (ra, rc) = (ja.join().expect("deadline ends the rebalance"), jc.join().expect("deadline ends it"));
    assert_eq!((ra.generation_id, rc.generation_id), (generation + 1, generation + 1));
    assert_eq!(sorted(ra.members.iter().map(|m| m.member_id.to_string()).collect()), sorted(vec![a, c]));
    assert_eq!(h.heartbeat(&b, generation), UNKNOWN_MEMBER_ID, "b was dropped");
}

#[test]
fn a_commit_is_answered_only_after_its_append_and_failed_appends_say_so() {
    let h = Harness::new(0);
    let commit = |partition: i32, offset: i64| {
        let mut p = OffsetCommitRequestPartition::default();
        p.partition_index = partition;
        p.committed_offset = offset;
        let mut t = OffsetCommitRequestTopic::default();
        t.name = TopicName(s("payments"));
        t.partitions = vec![p];
        let mut request = OffsetCommitRequest::default();
        request.group_id = GroupId(s(GROUP));
        request.generation_id_or_member_epoch = -1;
        request.topics = vec![t];
        let call = CommitOffsets { request, version: 8 };
        let r = h.call(|c| async move { c.commit(call).await }).poll().expect("a commit is answered at once");
        r.topics[0].partitions[0].error_code
    };
    let fetched = |partition: i32| {
        let call = FetchOffsets { group: GROUP.to_string(), topics: Some(vec![("payments".into(), vec![partition])]) };
        let o = h.call(|c| async move { c.fetch_offsets(call).await }).poll().expect("a fetch is answered at once");
        o[0].offset
    };
    assert_eq!(commit(1, 42), NONE);
    assert_eq!(fetched(1), 42);
    assert_eq!(commit(9, 1), UNKNOWN_TOPIC_OR_PARTITION);
    h.world.fail_appends.set(true);
    assert_eq!(commit(1, 43), COORDINATOR_NOT_AVAILABLE);
    assert_eq!(fetched(1), 42, "a commit that was not stored is not served");
    let log = h.world.log.borrow();
    let stored: Vec<&OffsetsRecord> = log.iter().flat_map(|(_, r)| r.iter()).collect();
    assert_eq!(stored.len(), 1, "one record: the commit that succeeded");
    let partition = super::records::partition_for(GROUP, h.world.settings.offsets_partitions);
    assert!(log.iter().all(|(p, _)| *p == partition), "appended to the group's own partition");
}

#[test]
fn transactional_offsets_wait_for_their_marker() {
    let h = Harness::new(0);
    let partition = super::records::partition_for(GROUP, h.world.settings.offsets_partitions);
    let txn_commit = |producer_id: i64, epoch: i16, offset: i64| {
        let mut p = kafka_protocol::messages::txn_offset_commit_request::TxnOffsetCommitRequestPartition::default();
        p.partition_index = 2;
        p.committed_offset = offset;
        let mut t = kafka_protocol::messages::txn_offset_commit_request::TxnOffsetCommitRequestTopic::default();
        t.name = TopicName(s("payments"));
        t.partitions = vec![p];
        let mut request = kafka_protocol::messages::TxnOffsetCommitRequest::default();
        request.group_id = GroupId(s(GROUP));
        request.producer_id = producer_id.into();
        request.producer_epoch = epoch;
        request.generation_id = -1;
        request.topics = vec![t];
        let call = CommitTxnOffsets { request };
        let r = h.call(|c| async move { c.commit_txn(call).await }).poll().expect("answered at once");
        r.topics[0].partitions[0].error_code
    };
    let fetched = || {
        let call = FetchOffsets { group: GROUP.to_string(), topics: Some(vec![("payments".into(), vec![2])]) };
        h.call(|c| async move { c.fetch_offsets(call).await }).poll().expect("answered at once")[0].offset
    };
    assert_eq!(txn_commit(500, 3, 10), NONE);
    assert_eq!(h.world.txn_appends.borrow().as_slice(), &[(partition, 500, 3)], "the producer's own batch");
    assert_eq!(fetched(), -1, "pending: OffsetFetch does not see it");
    h.c.on_txn_marker(partition + 1, 500, 3, true);
    assert_eq!(fetched(), -1, "a marker on another partition is not this group's");
    h.c.on_txn_marker(partition, 501, 3, true);
    assert_eq!(fetched(), -1, "nor another producer's");
    h.c.on_txn_marker(partition, 500, 3, true);
    assert_eq!(fetched(), 10, "committed with the transaction");
    assert_eq!(txn_commit(500, 3, 20), NONE);
    // Fenced: the abort carries the bumped epoch; the zombie's next commit
    // is refused and cannot ride on its successor's commit.
    h.c.on_txn_marker(partition, 500, 4, false);
    assert_eq!(fetched(), 10, "an abort drops the pending offset");
    assert_eq!(txn_commit(500, 3, 21), PRODUCER_FENCED);
    assert_eq!(txn_commit(500, 5, 22), NONE);
    h.c.on_txn_marker(partition, 500, 5, true);
    assert_eq!(fetched(), 22, "the successor's offset, and only it");
    assert_eq!(h.c.pending_txn_offsets(), 0);

    // Replayed at start: pending until the control batch read after it.
    let fresh = Harness::new(0);
    let key = Key::Offset { group: GROUP.into(), topic: "payments".into(), partition: 2 }.encode();
    let value = super::records::OffsetValue {
        offset: 30,
        leader_epoch: -1,
        metadata: String::new(),
        commit_timestamp: 1,
        expire_timestamp: -1,
    }
    .encode();
    fresh.c.replay_txn_offset(700, 0, &key, Some(&value)).expect("an offset record");
    assert_eq!(fresh.c.pending_txn_offsets(), 1);
    fresh.c.on_txn_marker(partition, 700, 0, true);
    let call = FetchOffsets { group: GROUP.to_string(), topics: Some(vec![("payments".into(), vec![2])]) };
    let got = fresh.call(|c| async move { c.fetch_offsets(call).await }).poll().expect("answered")[0].offset;
    assert_eq!(got, 30);
}
