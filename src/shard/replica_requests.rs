//! The requests a follower sends its leader (`replication`): Fetch as a
//! replica for every partition it follows there, and OffsetForLeaderEpoch
//! for the partitions whose epoch it has not checked.

use std::rc::Rc;

use kafka_protocol::messages::{
    fetch_request::{FetchPartition, FetchTopic},
    offset_for_leader_epoch_request::{OffsetForLeaderPartition, OffsetForLeaderTopic},
    ApiKey, BrokerId, FetchRequest, FetchResponse, OffsetForLeaderEpochRequest, TopicName,
};

use super::{topics::TopicHandle, Partition};

/// The Fetch version a follower sends (topics by name, replica id in the
/// request, flexible).
pub(super) const REPLICA_FETCH_VERSION: i16 = 12;
/// How long the leader may hold a follower's fetch with nothing new.
const REPLICA_FETCH_WAIT_MS: i32 = 500;
/// Bytes per partition per follower fetch.
const REPLICA_FETCH_PARTITION_BYTES: i32 = 1 << 20;
/// Bytes per follower fetch.
const REPLICA_FETCH_BYTES: i32 = 16 << 20;
/// The OffsetForLeaderEpoch version a follower sends (it carries the
/// replica id).
pub(super) const EPOCH_REQUEST_VERSION: i16 = 3;

pub(super) fn epoch_request(me: i32, asked: &[(TopicHandle, i32, Rc<Partition>)]) -> OffsetForLeaderEpochRequest {
    let mut request = OffsetForLeaderEpochRequest::default();
    request.replica_id = BrokerId(me);
    for (topic, partition, p) in asked {
        let r = p.replica.borrow();
        let mut q = OffsetForLeaderPartition::default();
        q.partition = *partition;
        q.current_leader_epoch = r.epoch;
        q.leader_epoch = r.epochs.last().map_or(0, |&(e, _)| e);
        match request.topics.last_mut().filter(|t| t.topic.0.as_str() == &**topic) {
            Some(t) => t.partitions.push(q),
            None => {
                let mut t = OffsetForLeaderTopic::default();
                t.topic = TopicName(kafka_protocol::protocol::StrBytes::from_string(topic.to_string()));
                t.partitions.push(q);
                request.topics.push(t);
            }
        }
    }
    request
}

pub(super) fn fetch_request(me: i32, followed: &[(TopicHandle, i32, Rc<Partition>)]) -> FetchRequest {
    let mut request = FetchRequest::default();
    request.replica_id = BrokerId(me);
    request.max_wait_ms = REPLICA_FETCH_WAIT_MS;
    request.min_bytes = 1;
    request.max_bytes = REPLICA_FETCH_BYTES;
    request.session_epoch = -1;
    let mut topics: Vec<FetchTopic> = Vec::new();
    for (topic, partition, p) in followed {
        let mut fp = FetchPartition::default();
        fp.partition = *partition;
        fp.fetch_offset = p.log.log_end();
        fp.partition_max_bytes = REPLICA_FETCH_PARTITION_BYTES;
        fp.current_leader_epoch = p.replica.borrow().epoch;
        fp.log_start_offset = -1;
        match topics.last_mut().filter(|t| t.topic.0.as_str() == &**topic) {
            Some(t) => t.partitions.push(fp),
            None => {
                let mut t = FetchTopic::default();
                t.topic = TopicName(kafka_protocol::protocol::StrBytes::from_string(topic.to_string()));
                t.partitions.push(fp);
                topics.push(t);
            }
        }
    }
    request.topics = topics;
    request
}

pub(super) async fn exchange(
    stream: &mut glommio::net::TcpStream,
    correlation: i32,
    request: &FetchRequest,
) -> Result<FetchResponse, crate::client::ClientError> {
    let version = REPLICA_FETCH_VERSION;
    let frame =
        crate::protocol::client::request_frame(ApiKey::Fetch, version, correlation, Some("shardlog-replica"), request)
            .map_err(crate::client::ClientError::from)?;
    crate::client::nonblocking::write_frame(stream, ApiKey::Fetch, version, &frame).await?;
    let response = crate::client::nonblocking::read_response::<FetchResponse>(stream, ApiKey::Fetch, version).await?;
    Ok(response.body)
}

/// A followed partition as a fetch asked for it: its leader epoch
/// (checked against the leader) and where its log ended.
#[derive(Debug, Clone, Copy)]
pub(super) struct Asked {
    epoch: i32,
    log_end: i64,
}

impl Asked {
    pub(super) fn epoch(&self) -> i32 {
        self.epoch
    }

    pub(super) fn now(p: &Partition) -> Self {
        Self { epoch: p.replica.borrow().epoch, log_end: p.log.log_end() }
    }

    /// Still following under the epoch asked, checked, with the log ending
    /// where it did: the answer continues this log.
    pub(super) fn still(&self, p: &Partition) -> bool {
        let r = p.replica.borrow();
        !r.leading && r.epoch == self.epoch && r.checked_epoch == Some(self.epoch) && p.log.log_end() == self.log_end
    }
}
