//! Produce, versions 3–11 (v0–v2 are advertised but refused, see
//! `handlers::SUPPORTED`; v10–v11 add only KIP-951's leader hints, which a
//! broker that leads every partition never sends). Each partition's batch goes to its owner shard;
//! partitions on different shards are appended concurrently. acks=0 gets no
//! response, acks=1 an answer once written, acks=-1 once fdatasync'd.
//! Transactional producers (a transactional id, batches with the
//! transactional attribute) are served the same way; their batches open a
//! transaction in the partition (`storage::producers`).

use std::{rc::Rc, time::Instant};

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::{
    produce_response::{BatchIndexAndErrorMessage, PartitionProduceResponse, TopicProduceResponse},
    ProduceRequest, ProduceResponse, TopicName,
};

use crate::protocol::errors::{self, ErrorCode};
use crate::{
    limits,
    metrics::stages::{AppendStages, RequestTrace},
    protocol::record_batch::BatchHeader,
    server::handlers::{create_topics::create, str_bytes},
    shard::{
        messages::{NewTopic, Produce, Produced},
        router,
        topics::{validate_topic_name, TopicHandle},
        Shard,
    },
};

struct PartitionResult {
    error: ErrorCode,
    base_offset: i64,
    log_start: i64,
    message: Option<String>,
    /// Records rejected one by one (KIP-467): index among the partition's
    /// records in this request, reason.
    /// Encoded from Produce v8, the version that has the field.
    record_errors: Vec<(i32, String)>,
}

/// Returns `None` for acks=0: the client expects no response. Charges the
/// handler's time to `trace` along the partition that finished last.
pub async fn handle(shard: &Rc<Shard>, request: ProduceRequest, trace: &RequestTrace) -> Option<ProduceResponse> {
    let mut critical = Critical::default();
    let response = respond(shard, request, &mut critical).await;
    trace.lap_through(&critical.stages);
    response
}

/// The partition append that finished last: the request's critical path.
#[derive(Default)]
struct Critical {
    finished: Option<Instant>,
    stages: AppendStages,
}

impl Critical {
    fn offer(&mut self, finished: Instant, stages: AppendStages) {
        if self.finished.is_none_or(|f| finished >= f) {
            *self = Critical { finished: Some(finished), stages };
        }
    }
}

async fn respond(shard: &Rc<Shard>, request: ProduceRequest, critical: &mut Critical) -> Option<ProduceResponse> {
    let acks = request.acks;
    // A transactional id needs nothing here: its batches carry the
    // transactional attribute and are checked by the log like any
    // idempotent batch; their visibility (LSO, aborted index) is the log's.
    if !matches!(acks, -1..=1) {
        return Some(reject_all(&request, errors::INVALID_REQUIRED_ACKS, "acks must be 0, 1 or -1"));
    }
    auto_create(shard, &request).await;
    let table = shard.topics();
    let mut tasks = Vec::new();
    // Take the records out of the request, so a batch whose buffer nobody
    // else shares can be appended without a copy (see `split_batches`).
    for topic in request.topic_data {
        // The table's handle: each partition's task and append takes a
        // reference count, not a copy of the name. A topic the table does
        // not hold is answered without a cross-shard call, but its answer
        // still names it.
        let requested = topic.name.0.as_str();
        let (name, meta) = match table.topics.get_key_value(requested) {
            Some((handle, meta)) => (handle.clone(), Some(meta)),
            None => (TopicHandle::from(requested), None),
        };
        // Only the broker writes its internal topics, as in Kafka.
        let internal = meta.is_some_and(|m| m.internal);
        // A name Kafka would refuse is an error the producer gives up on at
        // once, not an unknown topic it retries until its messages expire.
        let illegal = validate_topic_name(&name).err();
        // The config itself, not a parsed LogConfig: this is the hot path.
        let compacted = meta
            .and_then(|m| m.configs.get("cleanup.policy"))
            .is_some_and(|p| p.split(',').any(|s| s.trim() == "compact"));
        for p in topic.partition_data {
            let owner = router::owner(&table, &name, p.index, shard.count);
            // Looked up only on the error path: the hot path asks nothing more.
            let no_owner = if owner.is_none() { router::no_owner_error(&table, &name, p.index) } else { errors::NONE };
            let (shard, name, index, records) = (shard.clone(), name.clone(), p.index, p.records);
            let illegal = illegal.clone();
            tasks.push(glommio::spawn_local(async move {
                let mut stages = AppendStages::default();
                let result = match (owner, records) {
                    _ if illegal.is_some() => {
                        failed(errors::INVALID_TOPIC_EXCEPTION, illegal.map(|m| format!("topic {name:?}: {m}")))
                    }
                    _ if internal => failed(
                        errors::INVALID_TOPIC_EXCEPTION,
                        Some(format!("cannot produce to internal topic {name}")),
                    ),
                    (None, _) => failed(no_owner, None),
                    (Some(_), None) => failed(errors::INVALID_RECORD, Some("no records".into())),
                    (Some(owner), Some(records)) => {
                        let mode = (acks == -1, compacted);
                        append_all(&shard, owner, (&name, index), records, mode, &mut stages).await
                    }
                };
                (name, index, result, Instant::now(), stages)
            }));
        }
    }
    let mut response = ProduceResponse::default();
    for task in tasks {
        let (name, index, r, finished, stages) = task.await;
        critical.offer(finished, stages);
        crate::metrics::ShardMetrics::error(&shard.metrics.produce_errors, r.error);
        let mut pr = PartitionProduceResponse::default();
        pr.index = index;
        pr.error_code = r.error;
        pr.base_offset = r.base_offset;
        pr.log_append_time_ms = -1;
        pr.log_start_offset = r.log_start;
        pr.error_message = r.message.as_deref().map(str_bytes);
        pr.record_errors = r
            .record_errors
            .iter()
            .map(|(i, m)| {
                let mut e = BatchIndexAndErrorMessage::default();
                e.batch_index = *i;
                e.batch_index_error_message = Some(str_bytes(m));
                e
            })
            .collect();
        match response.responses.iter_mut().find(|t| t.name.0.as_str() == name.as_str()) {
            Some(t) => t.partition_responses.push(pr),
            None => {
                let mut t = TopicProduceResponse::default();
                t.name = TopicName(str_bytes(&name));
                t.partition_responses.push(pr);
                response.responses.push(t);
            }
        }
    }
    (acks != 0).then_some(response)
}

fn failed(error: ErrorCode, message: Option<String>) -> PartitionResult {
    PartitionResult { error, base_offset: -1, log_start: -1, message, record_errors: Vec::new() }
}

/// A compacted topic keeps the latest record per key, so a record without
/// one cannot be kept: Kafka rejects the whole batch with INVALID_RECORD and
/// names each keyless record. Compressed batches are not opened here (the
/// broker never decompresses) and pass unchecked.
fn keyless_records(topic: &str, partition: i32, batches: &[BytesMut]) -> Option<PartitionResult> {
    let mut record_errors = Vec::new();
    // Kafka counts within the partition's one batch; over several batches
    // the count runs on, so each index still names one record.
    let mut index = 0i32;
    for batch in batches {
        let Ok(records) = crate::protocol::record_batch::read_records(batch) else { continue };
        for r in &records {
            if r.key.is_none() {
                let reason = format!("compacted topic {topic} cannot accept a record without a key");
                record_errors.push((index, reason));
            }
            index += 1;
        }
    }
    if record_errors.is_empty() {
        return None;
    }
    let message = format!(
        "one or more records have been rejected: compacted topic partition {topic}-{partition} cannot accept records without a key"
    );
    Some(PartitionResult { record_errors, ..failed(errors::INVALID_RECORD, Some(message)) })
}

async fn auto_create(shard: &Rc<Shard>, request: &ProduceRequest) {
    if !shard.settings.auto_create_topics {
        return;
    }
    let table = shard.topics();
    let missing: Vec<NewTopic> = request
        .topic_data
        .iter()
        .map(|t| t.name.0.as_str())
        // Names are copied only for topics to create, not on every produce.
        .filter(|n| !table.topics.contains_key(*n) && validate_topic_name(n).is_ok())
        .map(|name| NewTopic { name: name.to_string(), partitions: -1, replication_factor: -1, configs: Vec::new() })
        .collect();
    if !missing.is_empty() {
        create(shard, missing, false).await;
    }
}

/// Appends every batch of one partition's records, in order. The response
/// carries the first batch's base offset, as Kafka's does. Adds where the
/// appends' time went to `stages`.
async fn append_all(
    shard: &Rc<Shard>,
    owner: usize,
    (topic, partition): (&TopicHandle, i32),
    records: Bytes,
    (durable, compacted): (bool, bool),
    stages: &mut AppendStages,
) -> PartitionResult {
    let batches = match split_batches(records) {
        Ok(b) => b,
        Err(message) => {
            return failed(errors::CORRUPT_MESSAGE, Some(format!("partition {topic}-{partition}: {message}")))
        }
    };
    if let Some(rejected) = compacted.then(|| keyless_records(topic, partition, &batches)).flatten() {
        return rejected;
    }
    let mut first: Option<PartitionResult> = None;
    for batch in batches {
        let call = Produce { topic: topic.clone(), partition, batch, durable, sent: Instant::now() };
        let Ok(Produced { error, base_offset, log_start, message, stages: spent, finished }) =
            shard.ask(owner, call).await
        else {
            let message = format!("partition {topic}-{partition}: broker shutting down");
            return failed(errors::KAFKA_STORAGE_ERROR, Some(message));
        };
        stages.add(&spent);
        stages.hop += finished.elapsed();
        let result = PartitionResult { error, base_offset, log_start, message, record_errors: Vec::new() };
        if error != errors::NONE {
            return result;
        }
        first.get_or_insert(result);
    }
    first.unwrap_or_else(|| failed(errors::INVALID_RECORD, Some("no records".into())))
}

/// Splits a records field into its batches without copying when the request
/// buffer is not shared; the storage layer then validates each batch.
pub(crate) fn split_batches(mut records: Bytes) -> Result<Vec<BytesMut>, String> {
    let mut out = Vec::new();
    while !records.is_empty() {
        let header = BatchHeader::parse(&records, limits::BATCH_BYTES_MAX).map_err(|e| e.to_string())?;
        let len = header.total_bytes().min(records.len());
        let batch = records.split_to(len);
        out.push(batch.try_into_mut().unwrap_or_else(|shared| BytesMut::from(&shared[..])));
    }
    Ok(out)
}

fn reject_all(request: &ProduceRequest, error: ErrorCode, message: &str) -> ProduceResponse {
    let mut response = ProduceResponse::default();
    for topic in &request.topic_data {
        let mut t = TopicProduceResponse::default();
        t.name = topic.name.clone();
        for p in &topic.partition_data {
            let mut pr = PartitionProduceResponse::default();
            pr.index = p.index;
            pr.error_code = error;
            pr.base_offset = -1;
            pr.log_append_time_ms = -1;
            pr.log_start_offset = -1;
            pr.error_message = Some(str_bytes(message));
            t.partition_responses.push(pr);
        }
        response.responses.push(t);
    }
    response
}

/// The answer to Produce v0–v2: every partition gets UNSUPPORTED_VERSION.
/// Hand-encoded because the protocol crate starts at v3. Request body:
/// acks i16, timeout i32, [topic string, [partition i32, records bytes]].
pub fn unsupported_old_version(mut body: &[u8], version: i16) -> Result<Vec<u8>, String> {
    use bytes::Buf;
    let need = |b: &[u8], n: usize| if b.len() < n { Err("truncated Produce request".to_string()) } else { Ok(()) };
    need(body, 6)?;
    body.advance(6);
    let mut out = Vec::new();
    need(body, 4)?;
    let topics = body.get_i32();
    out.extend_from_slice(&topics.max(0).to_be_bytes());
    for _ in 0..topics.max(0) {
        need(body, 2)?;
        let name_len = body.get_i16().max(0) as usize;
        need(body, name_len + 4)?;
        out.extend_from_slice(&(name_len as i16).to_be_bytes());
        out.extend_from_slice(&body[..name_len]);
        body.advance(name_len);
        let partitions = body.get_i32();
        out.extend_from_slice(&partitions.max(0).to_be_bytes());
        for _ in 0..partitions.max(0) {
            need(body, 8)?;
            let index = body.get_i32();
            let size = body.get_i32().max(0) as usize;
            need(body, size)?;
            body.advance(size);
            out.extend_from_slice(&index.to_be_bytes());
            out.extend_from_slice(&errors::UNSUPPORTED_VERSION.to_be_bytes());
            out.extend_from_slice(&(-1i64).to_be_bytes()); // base offset
            if version >= 2 {
                out.extend_from_slice(&(-1i64).to_be_bytes()); // log append time
            }
        }
    }
    if version >= 1 {
        out.extend_from_slice(&0i32.to_be_bytes()); // throttle time
    }
    Ok(out)
}
