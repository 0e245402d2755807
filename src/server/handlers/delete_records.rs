//! DeleteRecords, versions 0–2: moves partitions' log start offsets up (the
//! owner persists the new start and deletes the segments wholly below it).
//! Offset -1 means the high watermark.

use std::rc::Rc;

use kafka_protocol::messages::{
    delete_records_response::{DeleteRecordsPartitionResult, DeleteRecordsTopicResult},
    DeleteRecordsRequest, DeleteRecordsResponse,
};

use crate::protocol::errors;
use crate::shard::{messages::DeleteRecords, router, Shard};

pub async fn handle(shard: &Rc<Shard>, request: DeleteRecordsRequest) -> DeleteRecordsResponse {
    let table = shard.topics();
    let mut response = DeleteRecordsResponse::default();
    for topic in request.topics {
        let name = topic.name.0.as_str();
        // The table's handle: a reference count per partition, not a copy
        // of the name. A topic without one has no owner to ask.
        let handle = table.handle(name);
        let internal = table.topics.get(name).is_some_and(|m| m.internal);
        let mut tasks = Vec::new();
        for p in topic.partitions {
            let owner = handle.clone().zip(router::owner(&table, name, p.partition_index, shard.count));
            let no_owner = router::no_owner_error(&table, name, p.partition_index);
            let shard = shard.clone();
            tasks.push(glommio::spawn_local(async move {
                let mut r = DeleteRecordsPartitionResult::default();
                r.partition_index = p.partition_index;
                (r.error_code, r.low_watermark) = match owner {
                    None => (no_owner, -1),
                    // Only the broker trims its internal topics (compaction, expiry).
                    Some(_) if internal => (errors::INVALID_TOPIC_EXCEPTION, -1),
                    Some((topic, owner)) => {
                        let call = DeleteRecords { topic, partition: p.partition_index, offset: p.offset };
                        match shard.ask(owner, call).await {
                            Ok(found) => (found.error, found.offset),
                            Err(_) => (errors::KAFKA_STORAGE_ERROR, -1),
                        }
                    }
                };
                r
            }));
        }
        let mut t = DeleteRecordsTopicResult::default();
        t.name = topic.name;
        for task in tasks {
            t.partitions.push(task.await);
        }
        response.topics.push(t);
    }
    response
}
