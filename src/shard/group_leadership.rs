//! Which `__consumer_offsets` partitions this shard's group coordinator
//! serves: alone, every one the shard owns; in a quorum, where the topic
//! is replicated like any other (`cluster_topics`), those this broker
//! leads. Leadership moves with the quorum's log, and the groups move
//! with it, as in Kafka: a partition whose leadership comes here is
//! replayed into the coordinator before any call for its groups runs
//! (they wait for it); one whose leadership leaves is forgotten, and calls
//! for its groups are told to find their coordinator again.

use std::{
    cell::RefCell,
    collections::BTreeSet,
    rc::Rc,
    time::{Duration, Instant},
};

use crate::{
    groups::{records::partition_for, OFFSETS_TOPIC},
    protocol::record_batch::{self, BatchHeader, ATTR_CONTROL, ATTR_TRANSACTIONAL},
    shard::{group_glue, router, Shard},
};

/// How often a long load logs its progress.
const LOAD_REPORT_EVERY: Duration = Duration::from_secs(2);

/// One load of a partition's groups; a newer one (leadership left and
/// came back) makes an older one stop.
pub(super) type LoadTicket = u64;

impl Shard {
    /// The `__consumer_offsets` partitions this shard owns and this broker
    /// leads, by the table as this shard last heard it.
    fn offsets_partitions_led(&self) -> BTreeSet<i32> {
        let table = self.topics();
        let Some(meta) = table.topics.get(OFFSETS_TOPIC) else { return BTreeSet::new() };
        (0..meta.partitions())
            .filter(|&p| router::owner(&table, OFFSETS_TOPIC, p, self.count) == Some(self.id))
            .collect()
    }

    /// Brings the coordinator's partitions to the table just swapped in,
    /// with no await (so no call sees the new table before this): forgets
    /// the groups of partitions no longer led here and marks the newly led
    /// ones as loading. Returns those, for `load_group_partitions` once
    /// they are open.
    pub(super) fn take_group_leadership(&self) -> Vec<(i32, LoadTicket)> {
        let led = self.offsets_partitions_led();
        let mut served = self.groups_served.borrow_mut();
        for &p in served.difference(&led) {
            self.groups.unload(p);
            self.groups_loading.borrow_mut().remove(&p);
            log::info!("shard {}: {OFFSETS_TOPIC}-{p} is led elsewhere now; its groups moved with it", self.id);
        }
        let gained: Vec<i32> = led.difference(&served).copied().collect();
        *served = led;
        let mut loading = self.groups_loading.borrow_mut();
        gained
            .into_iter()
            .map(|p| {
                let ticket = self.group_loads.get() + 1;
                self.group_loads.set(ticket);
                loading.insert(p, ticket);
                (p, ticket)
            })
            .collect()
    }

    /// Replays each newly led partition into the coordinator, then lets
    /// the calls waiting for it run. A load whose partition left (or came
    /// back under a newer load) meanwhile stops where it is.
    pub(super) async fn load_group_partitions(self: Rc<Self>, gained: Vec<(i32, LoadTicket)>) {
        if gained.is_empty() {
            return;
        }
        let started = Instant::now();
        let total: i64 = gained
            .iter()
            .filter_map(|(number, _)| self.partition(OFFSETS_TOPIC, *number))
            .map(|p| p.log.log_end() - p.log.log_start())
            .sum();
        let mut next_report = started + LOAD_REPORT_EVERY;
        let mut replayed = 0i64;
        for (number, ticket) in gained {
            let current = || self.groups_loading.borrow().get(&number) == Some(&ticket);
            let Some(p) = self.partition(OFFSETS_TOPIC, number) else {
                log::error!(
                    "shard {}: {OFFSETS_TOPIC}-{number} is led here but not open; its groups are empty",
                    self.id
                );
                self.finish_group_load(number, ticket);
                continue;
            };
            // A new leader starts from what it has: its groups lose nothing
            // its followers had, since commits wait for them.
            self.groups.unload(number);
            let mut offset = p.log.log_start();
            while offset < p.log.log_end() && current() {
                // Offsets committed inside a transaction wait for its marker.
                let mut each = |h: &BatchHeader, key: &[u8], value: Option<&[u8]>| {
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
                let Some(next) = group_glue::replay_chunk(&self, &p, offset, &mut each).await else { break };
                if next == offset {
                    break; // nothing readable: leave the rest alone
                }
                replayed += next - offset;
                offset = next;
                if Instant::now() >= next_report {
                    log::info!("shard {}: loading groups: {replayed} of {total} offsets replayed", self.id);
                    next_report = Instant::now() + LOAD_REPORT_EVERY;
                }
            }
            if current() {
                self.finish_group_load(number, ticket);
            }
        }
        self.groups.arm_restored_sessions();
        let (groups, keys) = self.groups.cache_size();
        if replayed > 0 {
            log::info!(
                "shard {}: groups loaded: {keys} committed offsets of {groups} groups, {replayed} offsets replayed in {} ms",
                self.id,
                started.elapsed().as_millis()
            );
        }
    }

    fn finish_group_load(&self, number: i32, ticket: LoadTicket) {
        let mut loading = self.groups_loading.borrow_mut();
        if loading.get(&number) == Some(&ticket) {
            loading.remove(&number);
        }
        drop(loading);
        self.groups_loaded.notify_all();
    }

    /// Waits until no partition of this shard is loading its groups.
    pub(super) async fn groups_ready(&self) {
        while !self.groups_loading.borrow().is_empty() {
            let (tx, rx) = futures_channel::oneshot::channel::<()>();
            self.groups_loaded.register(Rc::new(RefCell::new(Some(tx))));
            let _ = rx.await;
        }
    }

    /// Whether this shard coordinates `group` once what is loading has
    /// loaded: false when its partition's leadership is elsewhere (the
    /// caller answers NOT_COORDINATOR or COORDINATOR_NOT_AVAILABLE).
    pub(super) async fn coordinates(&self, group: &str) -> bool {
        self.groups_ready().await;
        let partition = partition_for(group, self.settings.groups.offsets_partitions);
        self.groups_served.borrow().contains(&partition)
    }

    /// Runs a call for `group` on this shard's coordinator if it
    /// coordinates the group; None if not.
    pub(super) async fn for_group<R>(&self, group: &str, call: impl std::future::Future<Output = R>) -> Option<R> {
        if self.coordinates(group).await {
            Some(call.await)
        } else {
            None
        }
    }
}
