//! The shard's transaction glue: its side of the transaction coordinator's
//! seam ([`TxnHost`]: its `__transaction_state` partitions, markers sent
//! to each partition's owner as `WriteTxnMarkers` calls, producer ids from
//! the controller, glommio tasks, the system clock), the creation of
//! `__transaction_state` at first start (alone), and the timeout timer.

use std::{
    collections::BTreeMap,
    rc::{Rc, Weak},
    sync::Arc,
    time::Duration,
};

use crate::{
    groups::StoreError,
    protocol::{
        errors::{self, ErrorCode},
        record_batch::TxnMarker,
    },
    shard::{
        group_glue::{append_internal, spawn_after_yield, system_now_ms, Internal},
        messages::{AllocateProducerId, WriteTxnMarkers},
        router, BrokerSettings, Shard,
    },
    txn::{
        seam::{LocalFuture, LocalTask},
        TxnHost, TxnSettings, TXN_TOPIC,
    },
};

/// Reaches its shard through a `Weak`: the shard owns the coordinator,
/// which owns this.
pub(super) struct ShardTxnHost {
    pub(super) shard: Weak<Shard>,
    pub(super) settings: Arc<BrokerSettings>,
}

impl TxnHost for ShardTxnHost {
    fn settings(&self) -> &TxnSettings {
        &self.settings.txn
    }

    fn now_ms(&self) -> i64 {
        system_now_ms()
    }

    fn partition_exists(&self, topic: &str, partition: i32) -> bool {
        self.shard.upgrade().is_some_and(|shard| shard.topics().has_partition(topic, partition))
    }

    fn append(&self, partition: i32, key: Vec<u8>, value: Option<Vec<u8>>) -> LocalFuture<Result<(), StoreError>> {
        Box::pin(append_internal(self.shard.clone(), TXN_TOPIC, partition, vec![(key, value)], Internal::Synced))
    }

    fn append_written(
        &self,
        partition: i32,
        key: Vec<u8>,
        value: Option<Vec<u8>>,
    ) -> LocalFuture<Result<(), StoreError>> {
        Box::pin(append_internal(self.shard.clone(), TXN_TOPIC, partition, vec![(key, value)], Internal::Written))
    }

    fn write_markers(
        &self,
        marker: TxnMarker,
        partitions: Vec<(String, i32)>,
    ) -> LocalFuture<Vec<(String, i32, ErrorCode)>> {
        let shard = self.shard.clone();
        Box::pin(async move {
            let Some(shard) = shard.upgrade() else {
                return partitions.into_iter().map(|(t, p)| (t, p, errors::COORDINATOR_NOT_AVAILABLE)).collect();
            };
            write_markers(&shard, marker, partitions).await
        })
    }

    fn allocate_producer_id(&self) -> LocalFuture<Result<i64, String>> {
        let shard = self.shard.clone();
        Box::pin(async move {
            let shard = shard.upgrade().ok_or("the broker is shutting down")?;
            match shard.ask(router::CONTROLLER, AllocateProducerId).await {
                Ok(result) => result.map_err(|e| e.to_string()),
                Err(_) => Err("the controller shard is gone (shutting down)".into()),
            }
        })
    }

    fn spawn(&self, task: LocalTask) {
        spawn_after_yield(task);
    }
}

/// Sends `marker` to the owner of each partition, one `WriteTxnMarkers`
/// call per owner shard, all at once; answers per partition.
async fn write_markers(
    shard: &Rc<Shard>,
    marker: TxnMarker,
    partitions: Vec<(String, i32)>,
) -> Vec<(String, i32, ErrorCode)> {
    let table = shard.topics();
    let mut out = Vec::with_capacity(partitions.len());
    let mut by_owner: BTreeMap<usize, Vec<_>> = BTreeMap::new();
    let mut by_broker: BTreeMap<i32, Vec<(String, i32)>> = BTreeMap::new();
    for (topic, partition) in partitions {
        let elsewhere = table.topics.get(topic.as_str()).and_then(|m| table.led_elsewhere(m, partition));
        match (table.handle(&topic), router::owner(&table, &topic, partition, shard.count), elsewhere) {
            (Some(handle), Some(owner), _) => by_owner.entry(owner).or_default().push((handle, partition)),
            (_, _, Some(node)) => by_broker.entry(node).or_default().push((topic, partition)),
            _ => out.push((topic, partition, errors::UNKNOWN_TOPIC_OR_PARTITION)),
        }
    }
    let remote: Vec<_> = by_broker
        .into_iter()
        .map(|(node, partitions)| {
            let shard = shard.clone();
            glommio::spawn_local(async move { super::txn_remote::write_on(&shard, node, marker, partitions).await })
        })
        .collect();
    let calls: Vec<_> = by_owner
        .into_iter()
        .map(|(owner, partitions)| {
            let shard = shard.clone();
            glommio::spawn_local(async move {
                let asked: Vec<_> = partitions.iter().map(|(t, p)| (t.to_string(), *p)).collect();
                let answered: Vec<(String, i32, ErrorCode)> = match shard
                    .ask(owner, WriteTxnMarkers { marker, partitions })
                    .await
                {
                    Ok(written) => written.into_iter().map(|w| (w.topic.to_string(), w.partition, w.error)).collect(),
                    Err(_) => asked.into_iter().map(|(t, p)| (t, p, errors::COORDINATOR_NOT_AVAILABLE)).collect(),
                };
                answered
            })
        })
        .collect();
    for call in calls.into_iter().chain(remote) {
        out.extend(call.await);
    }
    out
}

/// Waits until the `__transaction_state` partitions this shard serves
/// are replayed into its transaction coordinator, and their prepared
/// transactions are being finished (`coordinator_leadership`).
pub async fn load_txns(shard: &Rc<Shard>) {
    shard.txns_ready().await;
}

/// Every `abort_check_interval_ms`, aborts expired transactions and
/// retries unfinished markers, in the shard's background queue.
pub fn spawn_txn_timeouts(shard: &Rc<Shard>) {
    let every = Duration::from_millis(shard.settings.txn.abort_check_interval_ms.max(1));
    let shard = shard.clone();
    crate::storage::background::spawn(async move {
        loop {
            glommio::timer::sleep(every).await;
            let n = shard.txn.check_expired().await;
            if n > 0 {
                log::info!("shard {}: aborted {n} timed-out transactions", shard.id);
            }
        }
    });
}
