//! The transaction state machine on a fake host: a clock that moves only
//! when a test says so, `__transaction_state` kept in memory, markers
//! recorded instead of written, tasks polled by hand. No glommio, no disk.
//!
//! Each test drives the coordinator through the requests a transactional
//! producer sends and checks the answers, the records logged (decoded with
//! the record codec) and the markers, in the order they happened.

use std::{
    cell::{Cell, RefCell},
    future::Future,
    rc::Rc,
    task::{Context, Poll, Waker},
};

use super::{
    coordinator::TxnMeta,
    records::{decode_key, TxnValue},
    seam::{LocalFuture, LocalTask, TxnHost},
    AddTxnPartitions, DescribeTxns, EndTxn, InitTxnProducer, ListTxns, TxnCoordinator, TxnProducer, TxnSettings,
    TxnState,
};
use crate::{
    groups::StoreError,
    protocol::{errors::*, record_batch::TxnMarker},
};

const ID: &str = "orders-processor";
const TIMEOUT_MS: i32 = 60_000;

/// Something the coordinator did, in order.
#[derive(Debug, Clone, PartialEq)]
enum Event {
    Logged(i32, String, Option<TxnValue>),
    Markers(TxnMarker, Vec<(String, i32)>),
}

struct World {
    settings: TxnSettings,
    now_ms: Cell<i64>,
    events: RefCell<Vec<Event>>,
    next_producer_id: Cell<i64>,
    tasks: RefCell<Vec<LocalTask>>,
    fail_markers: Cell<bool>,
    /// While set, appends wait (to catch a request between its check and
    /// its durable write).
    hold_appends: Cell<bool>,
    /// The states logged with `append_written` (not waited on to be
    /// durable), in order.
    written_only: RefCell<Vec<TxnState>>,
}

struct FakeHost(Rc<World>);

impl TxnHost for FakeHost {
    fn settings(&self) -> &TxnSettings {
        &self.0.settings
    }

    fn now_ms(&self) -> i64 {
        self.0.now_ms.get()
    }

    fn partition_exists(&self, topic: &str, partition: i32) -> bool {
        match topic {
            "out" => (0..4).contains(&partition),
            "__consumer_offsets" => (0..50).contains(&partition),
            _ => false,
        }
    }

    fn append(&self, partition: i32, key: Vec<u8>, value: Option<Vec<u8>>) -> LocalFuture<Result<(), StoreError>> {
        let world = self.0.clone();
        Box::pin(std::future::poll_fn(move |_| {
            if world.hold_appends.get() {
                return Poll::Pending;
            }
            let id = decode_key(&key).expect("the coordinator logs key v0");
            let value = value.as_deref().map(|v| TxnValue::decode(v).expect("the coordinator logs value v0"));
            world.events.borrow_mut().push(Event::Logged(partition, id, value));
            Poll::Ready(Ok(()))
        }))
    }

    fn append_written(
        &self,
        partition: i32,
        key: Vec<u8>,
        value: Option<Vec<u8>>,
    ) -> LocalFuture<Result<(), StoreError>> {
        if let Some(v) = value.as_deref() {
            let state = TxnValue::decode(v).expect("the coordinator logs value v0").state;
            self.0.written_only.borrow_mut().push(state);
        }
        self.append(partition, key, value)
    }

    fn write_markers(
        &self,
        marker: TxnMarker,
        partitions: Vec<(String, i32)>,
    ) -> LocalFuture<Vec<(String, i32, ErrorCode)>> {
        let error = if self.0.fail_markers.get() { NOT_LEADER_OR_FOLLOWER } else { NONE };
        if error == NONE {
            self.0.events.borrow_mut().push(Event::Markers(marker, partitions.clone()));
        }
        Box::pin(std::future::ready(partitions.into_iter().map(|(t, p)| (t, p, error)).collect()))
    }

    fn allocate_producer_id(&self) -> LocalFuture<Result<i64, String>> {
        let id = self.0.next_producer_id.get();
        self.0.next_producer_id.set(id + 1);
        Box::pin(std::future::ready(Ok(id)))
    }

    fn spawn(&self, task: LocalTask) {
        self.0.tasks.borrow_mut().push(task);
    }
}

fn world() -> Rc<World> {
    Rc::new(World {
        settings: TxnSettings::default(),
        now_ms: Cell::new(1_700_000_000_000),
        events: RefCell::default(),
        next_producer_id: Cell::new(1000),
        tasks: RefCell::default(),
        fail_markers: Cell::new(false),
        hold_appends: Cell::new(false),
        written_only: RefCell::new(Vec::new()),
    })
}

/// Polls `f` once: every fake host future is ready, so it must finish.
fn now<T>(f: impl Future<Output = T>) -> T {
    let mut f = std::pin::pin!(f);
    match f.as_mut().poll(&mut Context::from_waker(Waker::noop())) {
        Poll::Ready(v) => v,
        Poll::Pending => panic!("the coordinator waited on a host that never makes it wait"),
    }
}

struct Harness {
    world: Rc<World>,
    c: Rc<TxnCoordinator>,
}

impl Harness {
    fn new() -> Self {
        Self::on(world())
    }

    fn on(world: Rc<World>) -> Self {
        let c = Rc::new(TxnCoordinator::new(Box::new(FakeHost(world.clone()))));
        Self { world, c }
    }

    fn init(&self, id: &str, producer: Option<(i64, i16)>) -> TxnProducer {
        let (producer_id, producer_epoch) = producer.unwrap_or((-1, -1));
        now(self.c.init_producer(InitTxnProducer {
            transactional_id: id.into(),
            timeout_ms: TIMEOUT_MS,
            producer_id,
            producer_epoch,
        }))
    }

    fn add(&self, p: TxnProducer, partitions: &[(&str, i32)]) -> Vec<ErrorCode> {
        let call = AddTxnPartitions {
            transactional_id: ID.into(),
            producer_id: p.producer_id,
            producer_epoch: p.producer_epoch,
            partitions: partitions.iter().map(|(t, n)| (t.to_string(), *n)).collect(),
        };
        now(self.c.add_partitions(call)).into_iter().map(|(_, _, e)| e).collect()
    }

    fn end(&self, p: TxnProducer, commit: bool) -> ErrorCode {
        let call = EndTxn {
            transactional_id: ID.into(),
            producer_id: p.producer_id,
            producer_epoch: p.producer_epoch,
            commit,
        };
        now(self.c.end(call))
    }

    fn state(&self) -> TxnMeta {
        self.c.get(ID).expect("the id is known")
    }

    fn take_events(&self) -> Vec<Event> {
        std::mem::take(&mut *self.world.events.borrow_mut())
    }

    fn run_tasks(&self) {
        let tasks = std::mem::take(&mut *self.world.tasks.borrow_mut());
        for t in tasks {
            now(t);
        }
    }
}

/// The states logged, in order (for the id's partition).
fn logged_states(events: &[Event]) -> Vec<TxnState> {
    let partition = super::partition_for(ID, 50);
    events
        .iter()
        .filter_map(|e| match e {
            Event::Logged(p, id, Some(v)) if id == ID => {
                assert_eq!(*p, partition, "logged to the id's own partition");
                Some(v.state)
            }
            _ => None,
        })
        .collect()
}

#[test]
fn init_allocates_then_bumps_the_epoch() {
    let h = Harness::new();
    let first = h.init(ID, None);
    assert_eq!(first, TxnProducer { error: NONE, producer_id: 1000, producer_epoch: 0 });
    assert_eq!(logged_states(&h.take_events()), vec![TxnState::Empty]);
    let second = h.init(ID, None);
    assert_eq!(second, TxnProducer { error: NONE, producer_id: 1000, producer_epoch: 1 });
    // KIP-360: the current producer asks for a bump with its id and epoch.
    let third = h.init(ID, Some((1000, 1)));
    assert_eq!((third.producer_id, third.producer_epoch), (1000, 2));
    // Another id gets its own producer id.
    assert_eq!(h.init("other", None).producer_id, 1001);
    let bad = now(h.c.init_producer(InitTxnProducer {
        transactional_id: ID.into(),
        timeout_ms: 900_001,
        producer_id: -1,
        producer_epoch: -1,
    }));
    assert_eq!(bad.error, INVALID_TRANSACTION_TIMEOUT);
}

#[test]
fn commit_logs_prepare_then_markers_then_complete() {
    let h = Harness::new();
    let p = h.init(ID, None);
    h.take_events();
    assert_eq!(h.add(p, &[("out", 0), ("out", 3)]), vec![NONE, NONE]);
    assert_eq!(h.add(p, &[("__consumer_offsets", 7)]), vec![NONE]);
    assert_eq!(h.state().state, TxnState::Ongoing);
    assert_eq!(h.end(p, true), NONE);
    let events = h.take_events();
    assert_eq!(
        logged_states(&events),
        vec![TxnState::Ongoing, TxnState::Ongoing, TxnState::PrepareCommit, TxnState::CompleteCommit]
    );
    // The markers sit between the prepare and the complete records.
    let markers_at = events.iter().position(|e| matches!(e, Event::Markers(..))).expect("markers written");
    let Event::Markers(marker, partitions) = &events[markers_at] else { unreachable!() };
    assert_eq!(*marker, TxnMarker { producer_id: 1000, producer_epoch: 0, commit: true, coordinator_epoch: 0 });
    assert_eq!(
        partitions,
        &vec![("__consumer_offsets".to_string(), 7), ("out".to_string(), 0), ("out".to_string(), 3)]
    );
    let Event::Logged(_, _, Some(prepare)) = &events[markers_at - 1] else { panic!("prepare logged before markers") };
    assert_eq!(prepare.state, TxnState::PrepareCommit);
    assert_eq!(prepare.partitions.len(), 2, "the prepare record names every partition");
    let Event::Logged(_, _, Some(complete)) = &events[markers_at + 1] else { panic!("complete logged after markers") };
    assert_eq!(complete.state, TxnState::CompleteCommit);
    assert!(complete.partitions.is_empty());
    // Only the complete record is not waited on to be durable: losing it
    // leaves the prepare record last, from which a restart completes the
    // transaction again (`replay_completes_a_prepared_commit`).
    assert_eq!(*h.world.written_only.borrow(), vec![TxnState::CompleteCommit]);
    // A retried commit is answered NONE; an abort now is a state error.
    assert_eq!(h.end(p, true), NONE);
    assert_eq!(h.end(p, false), INVALID_TXN_STATE);
    // The next transaction starts from nothing.
    assert_eq!(h.add(p, &[("out", 1)]), vec![NONE]);
    assert_eq!(h.state().partitions.len(), 1);
}

#[test]
fn abort_writes_abort_markers() {
    let h = Harness::new();
    let p = h.init(ID, None);
    h.add(p, &[("out", 2)]);
    h.take_events();
    assert_eq!(h.end(p, false), NONE);
    let events = h.take_events();
    assert_eq!(logged_states(&events), vec![TxnState::PrepareAbort, TxnState::CompleteAbort]);
    assert!(events.iter().any(|e| matches!(e, Event::Markers(m, _) if !m.commit && m.producer_epoch == 0)));
    // EndTxn with nothing open is a state error.
    let fresh = h.init(ID, None);
    assert_eq!(h.end(fresh, true), INVALID_TXN_STATE);
}

#[test]
fn a_new_producer_fences_the_zombie_and_aborts_its_transaction() {
    let h = Harness::new();
    let zombie = h.init(ID, None);
    assert_eq!(h.add(zombie, &[("out", 0)]), vec![NONE]);
    h.take_events();
    // The new instance: the open transaction is aborted with a bumped
    // epoch, and it is told to retry.
    assert_eq!(h.init(ID, None).error, CONCURRENT_TRANSACTIONS);
    let events = h.take_events();
    assert_eq!(logged_states(&events), vec![TxnState::PrepareAbort, TxnState::CompleteAbort]);
    assert!(events.iter().any(|e| matches!(
        e,
        Event::Markers(m, ps) if !m.commit && m.producer_epoch == 1 && ps == &vec![("out".to_string(), 0)]
    )));
    let fresh = h.init(ID, None);
    assert_eq!(fresh, TxnProducer { error: NONE, producer_id: 1000, producer_epoch: 2 });
    // Every request of the zombie is refused as fenced.
    assert_eq!(h.add(zombie, &[("out", 1)]), vec![PRODUCER_FENCED]);
    assert_eq!(h.end(zombie, true), PRODUCER_FENCED);
    assert_eq!(h.init(ID, Some((1000, 0))).error, PRODUCER_FENCED);
    // A producer id this transactional id never had.
    let stranger = TxnProducer { error: NONE, producer_id: 77, producer_epoch: 2 };
    assert_eq!(h.add(stranger, &[("out", 1)]), vec![INVALID_PRODUCER_ID_MAPPING]);
}

#[test]
fn a_change_in_flight_makes_others_retry() {
    let h = Harness::new();
    let p = h.init(ID, None);
    h.world.hold_appends.set(true);
    let call = AddTxnPartitions {
        transactional_id: ID.into(),
        producer_id: p.producer_id,
        producer_epoch: p.producer_epoch,
        partitions: vec![("out".into(), 0)],
    };
    let mut held = Box::pin(h.c.add_partitions(call));
    assert!(held.as_mut().poll(&mut Context::from_waker(Waker::noop())).is_pending());
    assert_eq!(h.end(p, true), CONCURRENT_TRANSACTIONS);
    assert_eq!(h.init(ID, None).error, CONCURRENT_TRANSACTIONS);
    h.world.hold_appends.set(false);
    let Poll::Ready(added) = held.as_mut().poll(&mut Context::from_waker(Waker::noop())) else { panic!("released") };
    assert_eq!(added[0].2, NONE);
    // Markers that cannot be written leave the transaction prepared:
    // everything but a retry of the same end waits.
    h.world.fail_markers.set(true);
    assert_eq!(h.end(p, true), NONE, "the outcome is durable");
    assert_eq!(h.state().state, TxnState::PrepareCommit);
    assert_eq!(h.add(p, &[("out", 1)]), vec![CONCURRENT_TRANSACTIONS]);
    assert_eq!(h.end(p, true), CONCURRENT_TRANSACTIONS);
    assert_eq!(h.init(ID, None).error, CONCURRENT_TRANSACTIONS);
    // The periodic check retries them.
    h.world.fail_markers.set(false);
    assert_eq!(now(h.c.check_expired()), 0);
    assert_eq!(h.state().state, TxnState::CompleteCommit);
}

#[test]
fn unknown_partitions_are_refused_and_the_rest_not_attempted() {
    let h = Harness::new();
    let p = h.init(ID, None);
    assert_eq!(
        h.add(p, &[("out", 0), ("nope", 0), ("out", 9)]),
        vec![OPERATION_NOT_ATTEMPTED, UNKNOWN_TOPIC_OR_PARTITION, UNKNOWN_TOPIC_OR_PARTITION]
    );
    assert_eq!(h.state().state, TxnState::Empty);
}

#[test]
fn an_expired_transaction_is_aborted_and_its_producer_fenced() {
    let h = Harness::new();
    let p = h.init(ID, None);
    h.add(p, &[("out", 0)]);
    h.world.now_ms.set(h.world.now_ms.get() + i64::from(TIMEOUT_MS) - 1);
    assert_eq!(now(h.c.check_expired()), 0, "not yet");
    h.take_events();
    h.world.now_ms.set(h.world.now_ms.get() + 1);
    assert_eq!(now(h.c.check_expired()), 1);
    let events = h.take_events();
    assert_eq!(logged_states(&events), vec![TxnState::PrepareAbort, TxnState::CompleteAbort]);
    assert!(events.iter().any(|e| matches!(e, Event::Markers(m, _) if !m.commit && m.producer_epoch == 1)));
    assert_eq!(h.end(p, true), PRODUCER_FENCED);
    let listed = h.c.list(ListTxns { states: vec!["CompleteAbort".into()], producer_ids: vec![] });
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].transactional_id, ID);
}

#[test]
fn replay_completes_a_prepared_commit() {
    let first = Harness::new();
    let p = first.init(ID, None);
    first.add(p, &[("out", 1)]);
    first.world.fail_markers.set(true); // the broker dies before the markers
    assert_eq!(first.end(p, true), NONE);
    let log = first.take_events();
    assert_eq!(logged_states(&log), vec![TxnState::Empty, TxnState::Ongoing, TxnState::PrepareCommit]);

    let second = Harness::on(world());
    for e in &log {
        if let Event::Logged(_, id, value) = e {
            let value = value.as_ref().map(TxnValue::encode);
            second.c.replay(&super::records::encode_key(id), value.as_deref()).expect("a record it wrote");
        }
    }
    assert_eq!(second.state().state, TxnState::PrepareCommit);
    assert_eq!(second.c.complete_prepared(crate::txn::partition_for(ID, 50)), 1);
    assert!(second.take_events().is_empty(), "nothing runs inside the call (the seam's contract)");
    second.run_tasks();
    let events = second.take_events();
    assert!(matches!(&events[0], Event::Markers(m, ps)
        if m.commit && m.producer_id == 1000 && ps == &vec![("out".to_string(), 1)]));
    assert_eq!(logged_states(&events), vec![TxnState::CompleteCommit]);
    // The producer carries on where it was.
    let described = second.c.describe(DescribeTxns { transactional_ids: vec![ID.into(), "unknown".into()] });
    assert_eq!((described[0].error, described[0].state, described[0].producer_id), (NONE, "CompleteCommit", 1000));
    assert_eq!(described[1].error, TRANSACTIONAL_ID_NOT_FOUND);
    assert_eq!(second.init(ID, None).producer_epoch, 1);
}

#[test]
fn a_tombstone_forgets_the_id() {
    let h = Harness::new();
    h.init(ID, None);
    h.c.replay(&super::records::encode_key(ID), None).expect("a tombstone");
    assert!(h.c.get(ID).is_none());
}
