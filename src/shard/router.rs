//! The one place that knows which shard owns a partition.

use crate::protocol::errors::{self, ErrorCode};
use crate::shard::{topics::TopicTable, ShardId};

/// The shard that coordinates topic creation and deletion.
pub const CONTROLLER: ShardId = 0;

/// The owner of `topic`/`partition`, if the topic and partition exist and
/// this broker leads it (in a metadata quorum another broker may). The
/// assignment is persisted with the topic; if the broker now runs fewer
/// shards than when it was made, it folds onto the shards that exist.
pub fn owner(table: &TopicTable, topic: &str, partition: i32, shards: usize) -> Option<ShardId> {
    let meta = table.topics.get(topic)?;
    let assigned = *meta.shards.get(usize::try_from(partition).ok()?)?;
    if table.led_elsewhere(meta, partition).is_some() {
        return None;
    }
    Some(assigned % shards.max(1))
}

/// The shard keeping this broker's copy of `topic`/`partition`, whether
/// it leads the partition or follows its leader (`owner` is for clients,
/// who are served by the leader only).
pub fn host(table: &TopicTable, topic: &str, partition: i32, shards: usize) -> Option<ShardId> {
    let meta = table.topics.get(topic)?;
    let assigned = *meta.shards.get(usize::try_from(partition).ok()?)?;
    table.hosted_here(meta, partition).then_some(assigned % shards.max(1))
}

/// The shard a read of `topic`/`partition` goes to: its owner, or with
/// `any_replica` (a consumer's Fetch v11+, KIP-392) the shard keeping this
/// broker's copy, led here or followed.
pub fn reader(table: &TopicTable, topic: &str, partition: i32, shards: usize, any_replica: bool) -> Option<ShardId> {
    if any_replica {
        host(table, topic, partition, shards)
    } else {
        owner(table, topic, partition, shards)
    }
}

/// Why `topic`/`partition` has no owner here: NOT_LEADER_OR_FOLLOWER when
/// another broker of the quorum leads it (the client refreshes its
/// metadata and goes there), else UNKNOWN_TOPIC_OR_PARTITION.
pub fn no_owner_error(table: &TopicTable, topic: &str, partition: i32) -> ErrorCode {
    match table.topics.get(topic) {
        Some(meta) if table.led_elsewhere(meta, partition).is_some() => errors::NOT_LEADER_OR_FOLLOWER,
        _ => errors::UNKNOWN_TOPIC_OR_PARTITION,
    }
}

/// Spreads a new topic's partitions round-robin over the shards, starting at
/// a shard picked from the name so many small topics do not all start on 0.
pub fn assign(topic: &str, partitions: i32, shards: usize) -> Vec<ShardId> {
    let start = topic.bytes().fold(0usize, |h, b| h.wrapping_mul(31).wrapping_add(b as usize));
    (0..partitions.max(0) as usize).map(|p| (start + p) % shards.max(1)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::shard::topics::{TopicMeta, TopicTable};

    #[test]
    fn assignment_is_deterministic_and_balanced() {
        let a = assign("orders", 6, 2);
        assert_eq!(a, assign("orders", 6, 2));
        assert_eq!(a.iter().filter(|&&s| s == 0).count(), 3);
        let mut table = TopicTable::default();
        table.topics.insert(
            "orders".into(),
            TopicMeta {
                id: crate::shard::topics::TopicId([0; 16]),
                shards: a.clone(),
                configs: Default::default(),
                internal: false,
                leaders: Vec::new(),
                replicas: Default::default(),
            },
        );
        for p in 0..6 {
            assert_eq!(owner(&table, "orders", p, 2), Some(a[p as usize]));
        }
        assert_eq!(owner(&table, "orders", 6, 2), None);
        assert_eq!(owner(&table, "orders", -1, 2), None);
        assert_eq!(owner(&table, "nope", 0, 2), None);
        assert!(owner(&table, "orders", 1, 1) == Some(0), "folds onto fewer shards");
    }
}
