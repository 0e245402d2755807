//! Transaction markers for partitions another broker of the quorum leads
//! (`cluster_topics`): the coordinator sends them to that broker with
//! Kafka's inter-broker WriteTxnMarkers (v1), as Kafka's coordinator does,
//! on the shard's blocking pool (a few per transaction, never on produce
//! or fetch). A broker that cannot be reached is answered, per partition,
//! NOT_LEADER_OR_FOLLOWER, which the coordinator retries.

use kafka_protocol::messages::{
    write_txn_markers_request::{WritableTxnMarker, WritableTxnMarkerTopic},
    ApiKey, ProducerId, TopicName, WriteTxnMarkersRequest, WriteTxnMarkersResponse,
};

use crate::{
    protocol::{
        errors::{self, ErrorCode},
        record_batch::TxnMarker,
    },
    shard::Shard,
};

/// Writes `marker` to `partitions` on the broker `node`; one answer per
/// partition asked.
pub async fn write_on(
    shard: &Shard,
    node: i32,
    marker: TxnMarker,
    partitions: Vec<(String, i32)>,
) -> Vec<(String, i32, ErrorCode)> {
    let listener = shard.settings.listeners.first().map(|l| l.listener.clone()).unwrap_or_default();
    let Some((host, port)) = crate::controller::broker_address(&shard.settings, &listener, node) else {
        return every(partitions, errors::NOT_LEADER_OR_FOLLOWER);
    };
    let request = request(&marker, &partitions);
    let addr = format!("{host}:{port}");
    let answered = glommio::executor()
        .spawn_blocking(move || {
            let mut client = crate::client::Client::connect(&addr, "shardlog-txn-coordinator")?;
            let response: WriteTxnMarkersResponse = client.call(ApiKey::WriteTxnMarkers, 1, &request)?;
            Ok::<_, crate::client::ClientError>(response)
        })
        .await;
    let response = match answered {
        Ok(r) => r,
        Err(e) => {
            log::warn!("shard {}: transaction markers for broker {node} not written: {e}", shard.id);
            return every(partitions, errors::NOT_LEADER_OR_FOLLOWER);
        }
    };
    let written: Vec<(String, i32, ErrorCode)> = response
        .markers
        .iter()
        .flat_map(|m| &m.topics)
        .flat_map(|t| t.partitions.iter().map(move |p| (t.name.0.to_string(), p.partition_index, p.error_code)))
        .collect();
    partitions
        .into_iter()
        .map(|(t, p)| {
            let error =
                written.iter().find(|(wt, wp, _)| *wt == t && *wp == p).map_or(errors::NOT_LEADER_OR_FOLLOWER, |w| w.2);
            (t, p, error)
        })
        .collect()
}

fn request(marker: &TxnMarker, partitions: &[(String, i32)]) -> WriteTxnMarkersRequest {
    let mut m = WritableTxnMarker::default();
    m.producer_id = ProducerId(marker.producer_id);
    m.producer_epoch = marker.producer_epoch;
    m.transaction_result = marker.commit;
    m.coordinator_epoch = marker.coordinator_epoch;
    for (topic, partition) in partitions {
        match m.topics.iter_mut().find(|t| t.name.0.as_str() == topic) {
            Some(t) => t.partition_indexes.push(*partition),
            None => {
                let mut t = WritableTxnMarkerTopic::default();
                t.name = TopicName(kafka_protocol::protocol::StrBytes::from_string(topic.clone()));
                t.partition_indexes.push(*partition);
                m.topics.push(t);
            }
        }
    }
    let mut request = WriteTxnMarkersRequest::default();
    request.markers.push(m);
    request
}

fn every(partitions: Vec<(String, i32)>, error: ErrorCode) -> Vec<(String, i32, ErrorCode)> {
    partitions.into_iter().map(|(t, p)| (t, p, error)).collect()
}
