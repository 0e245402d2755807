//! The shard's group glue: its side of the group coordinator's seam
//! ([`GroupHost`]: its `__consumer_offsets` partitions, glommio timers and
//! tasks, the system clocks and the topic table), the creation of
//! `__consumer_offsets` at first start, the replay of this shard's
//! partitions of it into the coordinator, and the offset-expiry timer.

use std::{
    future::Future,
    pin::Pin,
    rc::{Rc, Weak},
    sync::Arc,
    time::{Duration, Instant},
};

use bytes::BytesMut;

use crate::{
    groups::{
        seam::{LocalTask, OffsetsRecord},
        GroupHost, GroupSettings, StoreError, Timer, OFFSETS_TOPIC,
    },
    protocol::record_batch::{self, BatchHeader, Record, ATTR_CONTROL, ATTR_TRANSACTIONAL},
    shard::{topics::new_topic_id, BrokerSettings, Partition, Shard},
    storage::Durability,
};

/// Replay reads `__consumer_offsets` this many bytes at a time.
const REPLAY_READ_BYTES: usize = 1 << 20;
/// How often a long replay logs its progress.
const REPLAY_REPORT_EVERY: Duration = Duration::from_secs(2);

/// Reaches its shard through a `Weak`: the shard owns the coordinator,
/// which owns this.
pub(super) struct ShardGroupHost {
    pub(super) shard: Weak<Shard>,
    pub(super) settings: Arc<BrokerSettings>,
}

/// Starts a task that first yields, so it never runs inside the caller's
/// `RefCell` borrows (glommio may poll a new task right away): the seam's
/// contract for `schedule` and `spawn`.
pub(super) fn spawn_after_yield(task: impl Future<Output = ()> + 'static) {
    glommio::spawn_local(async move {
        futures_lite::future::yield_now().await;
        task.await
    })
    .detach();
}

pub(crate) fn system_now_ms() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64)
}

impl GroupHost for ShardGroupHost {
    fn settings(&self) -> &GroupSettings {
        &self.settings.groups
    }

    fn now(&self) -> Instant {
        Instant::now()
    }

    fn now_ms(&self) -> i64 {
        system_now_ms()
    }

    fn partition_exists(&self, topic: &str, partition: i32) -> bool {
        self.shard.upgrade().is_some_and(|shard| shard.topics().has_partition(topic, partition))
    }

    fn append(
        &self,
        partition: i32,
        records: Vec<OffsetsRecord>,
    ) -> Pin<Box<dyn Future<Output = Result<(), StoreError>>>> {
        Box::pin(append_internal(self.shard.clone(), OFFSETS_TOPIC, partition, records, Internal::Synced))
    }

    fn append_transactional(
        &self,
        partition: i32,
        records: Vec<OffsetsRecord>,
        producer_id: i64,
        producer_epoch: i16,
    ) -> Pin<Box<dyn Future<Output = Result<(), StoreError>>>> {
        Box::pin(append_internal(
            self.shard.clone(),
            OFFSETS_TOPIC,
            partition,
            records,
            Internal::Transactional(producer_id, producer_epoch),
        ))
    }

    fn schedule(&self, after: Duration, timer: Timer) {
        let shard = self.shard.clone();
        spawn_after_yield(async move {
            if !after.is_zero() {
                glommio::timer::sleep(after).await;
            }
            if let Some(shard) = shard.upgrade() {
                shard.groups.fire(timer);
            }
        });
    }

    fn spawn(&self, task: LocalTask) {
        spawn_after_yield(task);
    }
}

/// How an internal record is appended.
#[derive(Debug, Clone, Copy)]
pub(super) enum Internal {
    /// Answered once durable.
    Synced,
    /// Answered once written: for a record whose loss in a crash the
    /// restart repairs (a transaction's completion: its prepare record,
    /// durable, makes the coordinator write the markers again).
    Written,
    /// Part of this producer's transaction (TxnOffsetCommit), with its id
    /// and epoch; answered once durable.
    Transactional(i64, i16),
}

/// Appends `records` to partition `partition` of one of the broker's
/// internal topics (`__consumer_offsets`, `__transaction_state`) as one
/// batch, as `how` says.
pub(super) async fn append_internal(
    shard: Weak<Shard>,
    topic: &'static str,
    partition: i32,
    records: Vec<OffsetsRecord>,
    how: Internal,
) -> Result<(), StoreError> {
    let Some(shard) = shard.upgrade() else { return Err(StoreError::ShuttingDown) };
    let Some(p) = shard.partition(topic, partition) else {
        return Err(StoreError::NotOpen { partition });
    };
    let recs: Vec<Record<'_>> = records
        .iter()
        .map(|(k, v)| Record { key: Some(k.as_slice()), value: v.as_deref(), timestamp_delta: 0 })
        .collect();
    let result = match how {
        Internal::Synced | Internal::Written => {
            let batch = record_batch::encode_batch(&recs, system_now_ms());
            let durability = if matches!(how, Internal::Synced) { Durability::Synced } else { Durability::Written };
            p.log.append(BytesMut::from(&batch[..]), durability).await
        }
        Internal::Transactional(id, epoch) => {
            let batch = record_batch::encode_transactional_batch(&recs, system_now_ms(), id, epoch);
            p.log.append_for_transaction(BytesMut::from(&batch[..])).await
        }
    };
    p.appended.notify_all();
    result.map(|_| ()).map_err(|e| StoreError::Storage(Box::new(e)))
}

/// The seed of this shard's member-id generator, read from the OS once at
/// start (the time, if /dev/urandom cannot be read).
pub(super) fn member_id_seed() -> u128 {
    u128::from_le_bytes(new_topic_id().0)
}

/// Replays the `__consumer_offsets` partitions this shard owns into its
/// group coordinator, then arms the sessions of the members it restored.
pub async fn load_groups(shard: &Rc<Shard>) {
    let started = Instant::now();
    let partitions = shard.groups_partitions();
    let total: i64 = partitions.iter().map(|(_, p)| p.log.log_end() - p.log.log_start()).sum();
    let mut done = 0i64;
    let mut next_report = Instant::now() + REPLAY_REPORT_EVERY;
    for (number, p) in partitions {
        let mut offset = p.log.log_start();
        while offset < p.log.log_end() {
            // Offsets committed inside a transaction wait for its marker.
            let mut each = |h: &BatchHeader, key: &[u8], value: Option<&[u8]>| {
                if h.attributes & ATTR_CONTROL != 0 {
                    if let Some(commit) = record_batch::control_key_commit(key) {
                        shard.groups.on_txn_marker(number, h.producer_id, h.producer_epoch, commit);
                    }
                    Ok(())
                } else if h.attributes & ATTR_TRANSACTIONAL != 0 {
                    shard.groups.replay_txn_offset(h.producer_id, h.producer_epoch, key, value)
                } else {
                    shard.groups.replay(key, value)
                }
            };
            let Some(next) = replay_chunk(shard, &p, offset, &mut each).await else { break };
            if next == offset {
                break; // nothing readable: leave the rest alone
            }
            done += next - offset;
            offset = next;
            if Instant::now() >= next_report {
                log::info!("shard {}: loading groups: {done} of {total} offsets replayed", shard.id);
                next_report = Instant::now() + REPLAY_REPORT_EVERY;
            }
        }
    }
    shard.groups.arm_restored_sessions();
    let (groups, keys) = shard.groups.cache_size();
    if total > 0 {
        log::info!(
            "shard {}: loaded {keys} committed offsets of {groups} groups from {} records in {} ms",
            shard.id,
            shard.groups.replayed.get(),
            started.elapsed().as_millis()
        );
    }
}

/// Takes one keyed record read back at start: its batch's header, its key
/// and its value (`None`: a tombstone).
pub(super) type ReplayRecord<'a, E> = dyn FnMut(&BatchHeader, &[u8], Option<&[u8]>) -> Result<(), E> + 'a;

/// Hands each keyed record of the batches of one read from `offset` to
/// `each` (with its batch's header); the offset after the last whole
/// batch, or `None` if the read failed. Records `each` cannot read are
/// logged and skipped.
pub(super) async fn replay_chunk<E: std::fmt::Display>(
    shard: &Shard,
    p: &Partition,
    offset: i64,
    each: &mut ReplayRecord<'_, E>,
) -> Option<i64> {
    let slice = match p.log.read(offset, REPLAY_READ_BYTES).await {
        Ok(s) => s,
        Err(e) => {
            log::error!("shard {}: cannot replay {}: {e}", shard.id, p.log.name());
            return None;
        }
    };
    let mut bytes = Vec::with_capacity(slice.len());
    for chunk in &slice.chunks {
        match chunk.load().await {
            Ok(b) => bytes.extend_from_slice(&b),
            Err(e) => log::error!("shard {}: cannot replay {}: {e}", shard.id, p.log.name()),
        }
    }
    let mut next = offset;
    let mut at = 0;
    while at < bytes.len() {
        let Ok(header) = BatchHeader::parse(&bytes[at..], usize::MAX) else { break };
        let end = (at + header.total_bytes()).min(bytes.len());
        match record_batch::read_records(&bytes[at..end]) {
            Ok(records) => {
                for r in records {
                    let Some(key) = r.key else { continue };
                    if let Err(e) = each(&header, key, r.value) {
                        log::warn!("{}: skipping record at offset {}: {e}", p.log.name(), r.offset);
                    }
                }
            }
            Err(e) => log::warn!("{}: skipping batch at offset {}: {e}", p.log.name(), header.base_offset),
        }
        next = header.last_offset() + 1;
        at = end;
    }
    Some(next)
}

/// Every `offsets_retention_check_ms`, expires committed offsets, in the
/// shard's background queue (it yields to request handling).
pub fn spawn_offset_expiry(shard: &Rc<Shard>) {
    let every = Duration::from_millis(shard.settings.groups.offsets_retention_check_ms);
    let shard = shard.clone();
    crate::storage::background::spawn(async move {
        loop {
            glommio::timer::sleep(every).await;
            let n = shard.groups.expire_offsets().await;
            if n > 0 {
                log::info!("shard {}: expired {n} committed offsets", shard.id);
            }
        }
    });
}
