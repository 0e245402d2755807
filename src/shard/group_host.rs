//! The shard's side of the group coordinator's seam ([`GroupHost`]): its
//! `__consumer_offsets` partitions, glommio timers and tasks, the system
//! clocks and the topic table.

use std::{
    future::Future,
    pin::Pin,
    rc::Weak,
    sync::Arc,
    time::{Duration, Instant},
};

use bytes::BytesMut;

use crate::{
    groups::{
        seam::{LocalTask, OffsetsRecord},
        GroupHost, GroupSettings, Timer, OFFSETS_TOPIC,
    },
    protocol::record_batch::{self, Record},
    shard::{BrokerSettings, Shard},
    storage::Durability,
};

/// Reaches its shard through a `Weak`: the shard owns the coordinator,
/// which owns this.
pub(super) struct ShardGroupHost {
    pub(super) shard: Weak<Shard>,
    pub(super) settings: Arc<BrokerSettings>,
}

/// Starts a task that first yields, so it never runs inside the caller's
/// `RefCell` borrows (glommio may poll a new task right away): the seam's
/// contract for `schedule` and `spawn`.
fn spawn_after_yield(task: impl Future<Output = ()> + 'static) {
    glommio::spawn_local(async move {
        futures_lite::future::yield_now().await;
        task.await
    })
    .detach();
}

fn system_now_ms() -> i64 {
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
        let Some(shard) = self.shard.upgrade() else { return false };
        let table = shard.topics();
        table.topics.get(topic).is_some_and(|m| (0..m.partitions()).contains(&partition))
    }

    fn append(&self, partition: i32, records: Vec<OffsetsRecord>) -> Pin<Box<dyn Future<Output = Result<(), String>>>> {
        let shard = self.shard.clone();
        Box::pin(async move {
            let Some(shard) = shard.upgrade() else { return Err("the shard is shutting down".to_string()) };
            let Some(p) = shard.partition(OFFSETS_TOPIC, partition) else {
                return Err(format!("{OFFSETS_TOPIC}-{partition} is not open on shard {}", shard.id));
            };
            let recs: Vec<Record<'_>> = records
                .iter()
                .map(|(k, v)| Record { key: Some(k.as_slice()), value: v.as_deref(), timestamp_delta: 0 })
                .collect();
            let batch = record_batch::encode_batch(&recs, system_now_ms());
            let result = p.log.append(BytesMut::from(&batch[..]), Durability::Synced).await;
            p.appended.notify_all();
            result.map(|_| ()).map_err(|e| e.to_string())
        })
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

/// The seed of this shard's member-id generator, read from the OS once at
/// start (the time, if /dev/urandom cannot be read).
pub(super) fn member_id_seed() -> u128 {
    let mut bytes = [0u8; 16];
    if std::fs::File::open("/dev/urandom").and_then(|mut f| std::io::Read::read_exact(&mut f, &mut bytes)).is_err() {
        let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos());
        bytes = nanos.to_le_bytes();
    }
    u128::from_le_bytes(bytes)
}
