//! WriteTxnMarkers, version 1 (v0, its non-flexible form, was removed in
//! Kafka 4.0 and the protocol crate cannot decode it, so it is not
//! advertised; Kafka's own brokers send v1 since 2.8): Kafka's
//! inter-broker API by which a transaction coordinator has each partition
//! leader write a commit or abort marker. Here every partition is led by
//! this broker, so each marker's partitions are grouped by owner shard and
//! written there (`shard::messages::WriteTxnMarkers`, durably); the answer
//! is per partition. A marker from an older producer epoch than the
//! partition has seen is answered INVALID_PRODUCER_EPOCH.
//!
//! Served so the log side of transactions can be driven over the wire; the
//! broker's own coordinator writes markers through the same shard call.
//! ACLs (issue 17) will restrict it to the cluster principal.

use std::{collections::BTreeMap, rc::Rc};

use kafka_protocol::messages::{
    write_txn_markers_request::WritableTxnMarker,
    write_txn_markers_response::{
        WritableTxnMarkerPartitionResult, WritableTxnMarkerResult, WritableTxnMarkerTopicResult,
    },
    TopicName, WriteTxnMarkersRequest, WriteTxnMarkersResponse,
};

use crate::protocol::errors::{self, ErrorCode};
use crate::{
    protocol::record_batch::TxnMarker,
    shard::{
        messages::{MarkerWritten, WriteTxnMarkers},
        router,
        topics::TopicHandle,
        Shard, ShardId,
    },
};

pub async fn handle(shard: &Rc<Shard>, request: WriteTxnMarkersRequest) -> WriteTxnMarkersResponse {
    let mut response = WriteTxnMarkersResponse::default();
    // Markers one after another, as Kafka's coordinator sends one per
    // producer: each is written everywhere before the next starts.
    for m in request.markers {
        response.markers.push(write_one(shard, m).await);
    }
    response
}

/// Writes one marker to its partitions, owners in parallel; answers each
/// partition in request order.
async fn write_one(shard: &Rc<Shard>, m: WritableTxnMarker) -> WritableTxnMarkerResult {
    let marker = TxnMarker {
        producer_id: m.producer_id.0,
        producer_epoch: m.producer_epoch,
        commit: m.transaction_result,
        coordinator_epoch: m.coordinator_epoch,
    };
    let table = shard.topics();
    // (topic index, partition) → error; filled by the owners' answers.
    let mut answers: BTreeMap<(usize, i32), ErrorCode> = BTreeMap::new();
    let mut by_owner: BTreeMap<ShardId, Vec<(TopicHandle, i32)>> = BTreeMap::new();
    let mut handles: Vec<Option<TopicHandle>> = Vec::with_capacity(m.topics.len());
    for (ti, t) in m.topics.iter().enumerate() {
        let handle = table.handle(t.name.0.as_str());
        for &p in &t.partition_indexes {
            let owner = handle.as_ref().and_then(|_| router::owner(&table, &t.name.0, p, shard.count));
            match (handle.clone(), owner) {
                (Some(h), Some(owner)) => by_owner.entry(owner).or_default().push((h, p)),
                _ => {
                    answers.insert((ti, p), errors::UNKNOWN_TOPIC_OR_PARTITION);
                }
            }
        }
        handles.push(handle);
    }
    let tasks: Vec<_> = by_owner
        .into_iter()
        .map(|(owner, partitions)| {
            let shard = shard.clone();
            let asked: Vec<(TopicHandle, i32)> = partitions.clone();
            let task =
                glommio::spawn_local(async move { shard.ask(owner, WriteTxnMarkers { marker, partitions }).await });
            (asked, task)
        })
        .collect();
    for (asked, task) in tasks {
        let written: Vec<MarkerWritten> = match task.await {
            Ok(written) => written,
            // The owner is gone (shutdown): nothing was written there.
            Err(_) => asked
                .into_iter()
                .map(|(topic, partition)| MarkerWritten { topic, partition, error: errors::KAFKA_STORAGE_ERROR })
                .collect(),
        };
        for w in written {
            for (ti, h) in handles.iter().enumerate() {
                if h.as_ref().is_some_and(|h| *h == w.topic) {
                    answers.insert((ti, w.partition), w.error);
                }
            }
        }
    }
    let mut result = WritableTxnMarkerResult::default();
    result.producer_id = m.producer_id;
    for (ti, t) in m.topics.into_iter().enumerate() {
        let mut tr = WritableTxnMarkerTopicResult::default();
        tr.name = TopicName(t.name.0.clone());
        for p in t.partition_indexes {
            let mut pr = WritableTxnMarkerPartitionResult::default();
            pr.partition_index = p;
            pr.error_code = answers.get(&(ti, p)).copied().unwrap_or(errors::KAFKA_STORAGE_ERROR);
            tr.partitions.push(pr);
        }
        result.topics.push(tr);
    }
    result
}
