//! ListOffsets, versions 1–9: earliest (-2), latest (-1), the record with the
//! largest timestamp (-3, v7+), earliest local (-4, v8+), latest tiered (-5,
//! v9+), or the first offset at or after a timestamp, found through the time
//! index. The partition's leader epoch is answered from v4, the version that
//! has the field; from v4 too, in a quorum, the client's
//! `current_leader_epoch` is checked as a fetch's is (older:
//! FENCED_LEADER_EPOCH, newer: UNKNOWN_LEADER_EPOCH, -1: not checked).
//! With isolation_level 1 (read_committed, v2+) latest is the last stable
//! offset.

use std::rc::Rc;

use kafka_protocol::messages::{
    list_offsets_response::{ListOffsetsPartitionResponse, ListOffsetsTopicResponse},
    ListOffsetsRequest, ListOffsetsResponse,
};

use crate::protocol::errors;
use crate::shard::{
    messages::{ListOffset, OffsetFound, OffsetListed},
    router, Shard,
};

pub async fn handle(shard: &Rc<Shard>, request: ListOffsetsRequest, version: i16) -> ListOffsetsResponse {
    let table = shard.topics();
    let mut response = ListOffsetsResponse::default();
    let read_committed = request.isolation_level == 1;
    for topic in request.topics {
        // The table's handle: a reference count per partition, not a copy
        // of the name. A topic without one has no owner to ask.
        let handle = table.handle(topic.name.0.as_str());
        let mut tasks = Vec::new();
        for p in topic.partitions {
            let owner = router::owner(&table, &topic.name.0, p.partition_index, shard.count);
            let no_owner = router::no_owner_error(&table, &topic.name.0, p.partition_index);
            let (shard, owner) = (shard.clone(), handle.clone().zip(owner));
            tasks.push(glommio::spawn_local(async move {
                let mut r = ListOffsetsPartitionResponse::default();
                r.partition_index = p.partition_index;
                let Some((name, owner)) = owner else {
                    r.error_code = no_owner;
                    r.offset = -1;
                    r.timestamp = -1;
                    return r;
                };
                let leader_epoch = if version >= 4 { p.current_leader_epoch } else { -1 };
                let (partition, timestamp) = (p.partition_index, p.timestamp);
                let call = ListOffset { topic: name, partition, timestamp, read_committed, leader_epoch };
                let Ok(OffsetListed { found: OffsetFound { error, offset, timestamp }, leader_epoch }) =
                    shard.ask(owner, call).await
                else {
                    r.error_code = errors::KAFKA_STORAGE_ERROR;
                    r.offset = -1;
                    r.timestamp = -1;
                    return r;
                };
                r.error_code = error;
                r.offset = offset;
                r.timestamp = timestamp;
                // Before v4 the field does not exist: left at its default
                // (-1) the response can be encoded.
                if version >= 4 {
                    r.leader_epoch = leader_epoch;
                }
                r
            }));
        }
        let mut t = ListOffsetsTopicResponse::default();
        t.name = topic.name;
        for task in tasks {
            t.partitions.push(task.await);
        }
        response.topics.push(t);
    }
    response
}
