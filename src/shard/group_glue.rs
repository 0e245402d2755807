//! The shard's group glue: its side of the group coordinator's seam
//! ([`GroupHost`]: its `__consumer_offsets` partitions, glommio timers and
//! tasks, the system clocks and the topic table), the creation of
//! `__consumer_offsets` at first start, reading its records back for the
//! replay (`coordinator_leadership`), and the offset-expiry timer.

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
    protocol::record_batch::{self, BatchHeader, Record},
    shard::{topics::new_topic_id, BrokerSettings, Partition, Shard},
    storage::Durability,
};

/// Replay reads `__consumer_offsets` this many bytes at a time.
const REPLAY_READ_BYTES: usize = 1 << 20;

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
    let replicated = p.replica.borrow().replicated;
    if replicated && !p.replica.borrow().leading {
        return Err(StoreError::NotLeader(format!("{}: this broker no longer leads it", p.log.name())));
    }
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
    let info = result.map_err(|e| StoreError::Storage(Box::new(e)))?;
    // A replicated partition (`__consumer_offsets` in a quorum) answers
    // once its in-sync replicas have the records too, like acks=all: a
    // commit acknowledged survives its coordinator's broker.
    if replicated {
        Shard::wait_replicated(&p, info.last_offset + 1)
            .await
            .map_err(|(_, message)| StoreError::NotLeader(message))?;
    }
    Ok(())
}

/// The seed of this shard's member-id generator, read from the OS once at
/// start (the time, if /dev/urandom cannot be read).
pub(super) fn member_id_seed() -> u128 {
    u128::from_le_bytes(new_topic_id().0)
}

/// Waits until the `__consumer_offsets` partitions this shard serves are
/// replayed into its group coordinator (`coordinator_leadership`: the
/// first table applied at start marks them and loads them).
pub async fn load_groups(shard: &Rc<Shard>) {
    shard.groups_ready().await;
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
