//! Offsets committed inside a transaction (TxnOffsetCommit): appended to
//! the group's `__consumer_offsets` partition as a transactional batch of
//! the producer, then kept pending per producer, invisible to OffsetFetch,
//! until the transaction's marker lands on that partition: a commit marker
//! moves them into the offset cache, an abort drops them. Replay at start
//! does the same with the batches and markers it reads back.

use std::{collections::HashMap, rc::Rc};

use kafka_protocol::messages::{
    txn_offset_commit_response::{TxnOffsetCommitResponsePartition, TxnOffsetCommitResponseTopic},
    TxnOffsetCommitRequest, TxnOffsetCommitResponse,
};

use super::{
    coordinator::{Coordinator, State},
    records::{self, Key, OffsetValue},
    ReplayError,
};
use crate::protocol::errors::*;

/// One offset waiting for its transaction's marker.
#[derive(Debug, Clone)]
pub(super) struct PendingOffset {
    pub group: String,
    pub topic: String,
    pub partition: i32,
    pub value: OffsetValue,
}

/// What waits for markers, per producer id, and the newest epoch seen of
/// each producer id (in a commit or a marker): a commit from an older
/// epoch is a fenced zombie's and is refused, as Kafka's log refuses its
/// batch, so it can never ride on its successor's commit marker.
#[derive(Debug, Default)]
pub(super) struct TxnPending {
    offsets: HashMap<i64, Vec<PendingOffset>>,
    epochs: HashMap<i64, i16>,
}

impl TxnPending {
    /// Drops the pending offsets of the groups `gone` names.
    pub(super) fn forget(&mut self, gone: impl Fn(&str) -> bool) {
        for pending in self.offsets.values_mut() {
            pending.retain(|o| !gone(&o.group));
        }
        self.offsets.retain(|_, pending| !pending.is_empty());
    }

    /// Whether `epoch` is older than one already seen for `producer_id`;
    /// otherwise it becomes the newest.
    fn fenced(&mut self, producer_id: i64, epoch: i16) -> bool {
        let newest = self.epochs.entry(producer_id).or_insert(epoch);
        if epoch < *newest {
            return true;
        }
        *newest = epoch;
        false
    }
}

/// A commit's group check: a consumer that names its generation (v3+) must
/// be a member of it, as for OffsetCommit; a producer that does not
/// (generation -1) commits as the group's administrator would.
fn group_error(c: &Coordinator, req: &TxnOffsetCommitRequest, group_id: &str) -> Option<i16> {
    if group_id.is_empty() {
        return Some(INVALID_GROUP_ID);
    }
    if req.generation_id < 0 {
        return None;
    }
    let groups = c.groups.borrow();
    match groups.get(group_id) {
        None => Some(ILLEGAL_GENERATION),
        Some(g) if g.state == State::Empty => Some(ILLEGAL_GENERATION),
        Some(g) if !g.members.contains_key(req.member_id.as_str()) => Some(UNKNOWN_MEMBER_ID),
        Some(g) if g.generation != req.generation_id => Some(ILLEGAL_GENERATION),
        Some(_) => None,
    }
}

pub(super) async fn commit(c: &Rc<Coordinator>, req: TxnOffsetCommitRequest) -> TxnOffsetCommitResponse {
    let group_id = req.group_id.0.to_string();
    let (producer_id, producer_epoch) = (req.producer_id.0, req.producer_epoch);
    let fenced = c.pending_txn.borrow_mut().fenced(producer_id, producer_epoch);
    let group_error = if fenced { Some(PRODUCER_FENCED) } else { group_error(c, &req, &group_id) };
    let commit_ts = c.now_ms();
    let mut response = TxnOffsetCommitResponse::default();
    let mut to_write: Vec<PendingOffset> = Vec::new();
    for t in &req.topics {
        let mut rt = TxnOffsetCommitResponseTopic::default();
        rt.name = t.name.clone();
        for p in &t.partitions {
            let metadata = p.committed_metadata.as_ref().map(|m| m.to_string()).unwrap_or_default();
            let code = if let Some(e) = group_error {
                e
            } else if !c.host.partition_exists(t.name.0.as_str(), p.partition_index) {
                UNKNOWN_TOPIC_OR_PARTITION
            } else if metadata.len() > c.settings().max_metadata_bytes {
                OFFSET_METADATA_TOO_LARGE
            } else {
                let value = OffsetValue {
                    offset: p.committed_offset,
                    leader_epoch: p.committed_leader_epoch,
                    metadata,
                    commit_timestamp: commit_ts,
                    expire_timestamp: -1,
                };
                let (topic, partition) = (t.name.0.to_string(), p.partition_index);
                to_write.push(PendingOffset { group: group_id.clone(), topic, partition, value });
                NONE
            };
            let mut rp = TxnOffsetCommitResponsePartition::default();
            rp.partition_index = p.partition_index;
            rp.error_code = code;
            rt.partitions.push(rp);
        }
        response.topics.push(rt);
    }
    if to_write.is_empty() {
        return response;
    }
    let records = to_write
        .iter()
        .map(|o| {
            let key = Key::Offset { group: o.group.clone(), topic: o.topic.clone(), partition: o.partition };
            (key.encode(), Some(o.value.encode()))
        })
        .collect();
    let partition = records::partition_for(&group_id, c.settings().offsets_partitions);
    match c.host.append_transactional(partition, records, producer_id, producer_epoch).await {
        Ok(()) => c.pending_txn.borrow_mut().offsets.entry(producer_id).or_default().extend(to_write),
        Err(e) => {
            log::warn!("group {group_id}: transactional commit of producer {producer_id} not stored: {e}");
            for p in response.topics.iter_mut().flat_map(|t| t.partitions.iter_mut()) {
                if p.error_code == NONE {
                    p.error_code = COORDINATOR_NOT_AVAILABLE;
                }
            }
        }
    }
    response
}

impl Coordinator {
    /// A transaction marker of `producer_id` landed on partition
    /// `partition` of `__consumer_offsets`: its pending offsets for the
    /// groups of that partition are committed or dropped.
    pub fn on_txn_marker(&self, partition: i32, producer_id: i64, producer_epoch: i16, commit: bool) {
        let partitions = self.settings().offsets_partitions;
        let mut all = self.pending_txn.borrow_mut();
        // A marker's epoch is the newest (a fencing abort bumps it).
        all.fenced(producer_id, producer_epoch);
        let pending = &mut all.offsets;
        let Some(waiting) = pending.get_mut(&producer_id) else { return };
        let (here, elsewhere): (Vec<_>, Vec<_>) = std::mem::take(waiting)
            .into_iter()
            .partition(|o| records::partition_for(&o.group, partitions) == partition);
        *waiting = elsewhere;
        if waiting.is_empty() {
            pending.remove(&producer_id);
        }
        if commit {
            let mut offsets = self.offsets.borrow_mut();
            for o in here {
                offsets.entry(o.group).or_default().insert((o.topic, o.partition), o.value);
            }
        }
    }

    /// An offset record of a transactional batch read back at start: it
    /// waits for its marker like a live one.
    pub fn replay_txn_offset(
        &self,
        producer_id: i64,
        producer_epoch: i16,
        key: &[u8],
        value: Option<&[u8]>,
    ) -> Result<(), ReplayError> {
        let key = Key::decode(key).map_err(ReplayError::Key)?;
        self.pending_txn.borrow_mut().fenced(producer_id, producer_epoch);
        self.replayed.set(self.replayed.get() + 1);
        let (Key::Offset { group, topic, partition }, Some(v)) = (key, value) else { return Ok(()) };
        let value = OffsetValue::decode(v).map_err(ReplayError::OffsetValue)?;
        self.pending_txn.borrow_mut().offsets.entry(producer_id).or_default().push(PendingOffset {
            group,
            topic,
            partition,
            value,
        });
        Ok(())
    }

    /// How many offsets wait for a transaction marker.
    pub fn pending_txn_offsets(&self) -> usize {
        self.pending_txn.borrow().offsets.values().map(Vec::len).sum()
    }
}
