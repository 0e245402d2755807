//! Which partitions of the internal topics this shard's coordinators
//! serve: alone, every one the shard owns; in a quorum, where the topics
//! are replicated like any other (`cluster_topics`), those this broker
//! leads. Leadership moves with the quorum's log, and the groups and
//! transactional ids move with it, as in Kafka: a partition whose
//! leadership comes here is replayed into its coordinator before any call
//! for its keys runs (they wait for it); one whose leadership leaves is
//! forgotten, and calls for its keys are told to find their coordinator
//! again.

use std::{
    cell::{Cell, RefCell},
    collections::{BTreeMap, BTreeSet},
    rc::Rc,
    time::{Duration, Instant},
};

use crate::{
    groups::{records::partition_for, OFFSETS_TOPIC},
    protocol::record_batch::{self, BatchHeader, ATTR_CONTROL, ATTR_TRANSACTIONAL},
    shard::{group_glue, notify::AppendNotify, router, Partition, Shard},
    txn::TXN_TOPIC,
};

/// How often a long load logs its progress.
const LOAD_REPORT_EVERY: Duration = Duration::from_secs(2);

/// One load of a partition; a newer one (leadership left and came back)
/// makes an older one stop.
type LoadTicket = u64;

/// The partitions of one internal topic a coordinator serves, those still
/// loading with their load's ticket, and the calls waiting for the loads.
#[derive(Default)]
pub(super) struct Served {
    partitions: RefCell<BTreeSet<i32>>,
    loading: RefCell<BTreeMap<i32, LoadTicket>>,
    tickets: Cell<LoadTicket>,
    loaded: AppendNotify,
}

impl Served {
    /// Serves `led` from now on: `forget` is called for each partition no
    /// longer led, and the newly led ones are marked loading and returned.
    fn take(&self, topic: &str, shard: usize, led: BTreeSet<i32>, forget: impl Fn(i32)) -> Vec<(i32, LoadTicket)> {
        let mut served = self.partitions.borrow_mut();
        for &p in served.difference(&led) {
            forget(p);
            self.loading.borrow_mut().remove(&p);
            log::info!("shard {shard}: {topic}-{p} is led elsewhere now; its coordinator moved with it");
        }
        let gained: Vec<i32> = led.difference(&served).copied().collect();
        *served = led;
        let mut loading = self.loading.borrow_mut();
        gained
            .into_iter()
            .map(|p| {
                let ticket = self.tickets.get() + 1;
                self.tickets.set(ticket);
                loading.insert(p, ticket);
                (p, ticket)
            })
            .collect()
    }

    /// Whether the load of `p` with `ticket` is still the one wanted.
    fn current(&self, p: i32, ticket: LoadTicket) -> bool {
        self.loading.borrow().get(&p) == Some(&ticket)
    }

    fn finish(&self, p: i32, ticket: LoadTicket) {
        if self.current(p, ticket) {
            self.loading.borrow_mut().remove(&p);
        }
        self.loaded.notify_all();
    }

    /// Whether partition `p` is served here now (loaded or loading).
    fn serving(&self, p: i32) -> bool {
        self.partitions.borrow().contains(&p)
    }

    /// Waits until no partition is loading.
    pub(super) async fn ready(&self) {
        while !self.loading.borrow().is_empty() {
            let (tx, rx) = futures_channel::oneshot::channel::<()>();
            self.loaded.register(Rc::new(RefCell::new(Some(tx))));
            let _ = rx.await;
        }
    }

    /// Runs `call` once what is loading has loaded, if partition `p` is
    /// served here; None if not.
    async fn run<R>(&self, p: i32, call: impl std::future::Future<Output = R>) -> Option<R> {
        self.ready().await;
        if self.partitions.borrow().contains(&p) {
            Some(call.await)
        } else {
            None
        }
    }
}

/// Partitions whose leadership came to this shard, per coordinator.
pub(super) struct Gained {
    groups: Vec<(i32, LoadTicket)>,
    txns: Vec<(i32, LoadTicket)>,
}

impl Shard {
    /// The partitions of `topic` this shard owns and this broker leads, by
    /// the table as this shard last heard it.
    fn partitions_led(&self, topic: &str) -> BTreeSet<i32> {
        let table = self.topics();
        let Some(meta) = table.topics.get(topic) else { return BTreeSet::new() };
        (0..meta.partitions()).filter(|&p| router::owner(&table, topic, p, self.count) == Some(self.id)).collect()
    }

    /// Brings both coordinators to the table just swapped in, with no
    /// await (so no call sees the new table before this): forgets what
    /// they served of partitions no longer led here and marks the newly
    /// led ones as loading, for `load_coordinators` once they are open.
    pub(super) fn take_coordinator_leadership(&self) -> Gained {
        let groups = self
            .group_partitions
            .take(OFFSETS_TOPIC, self.id, self.partitions_led(OFFSETS_TOPIC), |p| self.groups.unload(p));
        let txns = self.txn_partitions.take(TXN_TOPIC, self.id, self.partitions_led(TXN_TOPIC), |p| self.txn.unload(p));
        Gained { groups, txns }
    }

    /// Replays each newly led partition into its coordinator, then lets
    /// the calls waiting for it run; prepared transactions found are
    /// finished. A load whose partition left (or came back under a newer
    /// load) meanwhile stops where it is.
    pub(super) async fn load_coordinators(self: Rc<Self>, gained: Gained) {
        for (number, ticket) in gained.groups {
            // A new leader starts from what it has: its groups lose nothing
            // its followers had, since commits wait for them.
            self.groups.unload(number);
            let current = || self.group_partitions.current(number, ticket);
            let mut each = |h: &BatchHeader, key: &[u8], value: Option<&[u8]>| {
                // Offsets committed inside a transaction wait for its marker.
                if h.attributes & ATTR_CONTROL != 0 {
                    if let Some(commit) = record_batch::control_key_commit(key) {
                        self.groups.on_txn_marker(number, h.producer_id, h.producer_epoch, commit);
                    }
                    Ok(())
                } else if h.attributes & ATTR_TRANSACTIONAL != 0 {
                    self.groups.replay_txn_offset(h.producer_id, h.producer_epoch, key, value)
                } else {
                    self.groups.replay(key, value)
                }
            };
            self.replay_partition(OFFSETS_TOPIC, number, &current, &mut each).await;
            if !self.group_partitions.serving(number) {
                // Left while loading: what the last read replayed goes too.
                self.groups.unload(number);
            }
            self.group_partitions.finish(number, ticket);
        }
        self.groups.arm_restored_sessions();
        for (number, ticket) in gained.txns {
            self.txn.unload(number);
            let current = || self.txn_partitions.current(number, ticket);
            let mut each = |_: &BatchHeader, key: &[u8], value: Option<&[u8]>| self.txn.replay(key, value);
            self.replay_partition(TXN_TOPIC, number, &current, &mut each).await;
            if !self.txn_partitions.serving(number) {
                self.txn.unload(number);
            }
            if current() {
                let prepared = self.txn.complete_prepared(number);
                if prepared > 0 {
                    log::info!("shard {}: {TXN_TOPIC}-{number}: completing {prepared} prepared transactions", self.id);
                }
            }
            self.txn_partitions.finish(number, ticket);
        }
    }

    /// Hands every keyed record of `topic`-`number` to `each`, while
    /// `current` says the load is still wanted; logs progress of a long
    /// one.
    async fn replay_partition<E: std::fmt::Display>(
        &self,
        topic: &str,
        number: i32,
        current: &dyn Fn() -> bool,
        each: &mut group_glue::ReplayRecord<'_, E>,
    ) {
        let Some(p): Option<Rc<Partition>> = self.partition(topic, number) else {
            log::error!("shard {}: {topic}-{number} is led here but not open; its coordinator starts empty", self.id);
            return;
        };
        let (started, total) = (Instant::now(), p.log.log_end() - p.log.log_start());
        let mut next_report = started + LOAD_REPORT_EVERY;
        let mut offset = p.log.log_start();
        while offset < p.log.log_end() && current() {
            let Some(next) = group_glue::replay_chunk(self, &p, offset, each).await else { break };
            if next == offset {
                break; // nothing readable: leave the rest alone
            }
            offset = next;
            if Instant::now() >= next_report {
                let done = offset - p.log.log_start();
                log::info!("shard {}: loading {topic}-{number}: {done} of {total} offsets replayed", self.id);
                next_report = Instant::now() + LOAD_REPORT_EVERY;
            }
        }
        if total > 0 {
            log::info!(
                "shard {}: {topic}-{number}: {total} offsets replayed in {} ms",
                self.id,
                started.elapsed().as_millis()
            );
        }
    }

    /// Waits until the group coordinator has loaded what it serves.
    pub(super) async fn groups_ready(&self) {
        self.group_partitions.ready().await;
    }

    /// Waits until the transaction coordinator has loaded what it serves.
    pub(super) async fn txns_ready(&self) {
        self.txn_partitions.ready().await;
    }

    /// Runs a call for `group` on this shard's coordinator if it
    /// coordinates the group; None if not (its partition's leadership is
    /// elsewhere: the caller answers NOT_COORDINATOR or
    /// COORDINATOR_NOT_AVAILABLE).
    pub(super) async fn for_group<R>(&self, group: &str, call: impl std::future::Future<Output = R>) -> Option<R> {
        let partition = partition_for(group, self.settings.groups.offsets_partitions);
        self.group_partitions.run(partition, call).await
    }

    /// `for_group` for a transactional id.
    pub(super) async fn for_txn<R>(&self, id: &str, call: impl std::future::Future<Output = R>) -> Option<R> {
        let partition = crate::txn::partition_for(id, self.settings.txn.partitions);
        self.txn_partitions.run(partition, call).await
    }
}
