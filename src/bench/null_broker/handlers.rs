//! The APIs the null broker answers, and only those (each listed in
//! `SUPPORTED` with its versions). Produce and Fetch, the measured path,
//! are done by hand (`wire.rs`); the rest go through the protocol crate.

use std::{ops::Range, rc::Rc, time::Duration};

use bytes::{Bytes, BytesMut};
use kafka_protocol::{
    messages::{
        api_versions_response::ApiVersion,
        create_topics_response::CreatableTopicResult,
        list_offsets_response::{ListOffsetsPartitionResponse, ListOffsetsTopicResponse},
        metadata_response::{MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic},
        AddPartitionsToTxnRequest, ApiKey, ApiVersionsResponse, CreateTopicsRequest, CreateTopicsResponse,
        EndTxnRequest, FetchRequest, FindCoordinatorRequest, InitProducerIdRequest, ListOffsetsRequest,
        ListOffsetsResponse, MetadataRequest, MetadataResponse, RequestHeader, TopicName,
    },
    protocol::{Decodable, Encodable, StrBytes},
};

use super::{
    connection::Conn,
    state::Core,
    tail::codes,
    txn,
    wire::{self, FetchedPartition, ProducedPartition},
};
use crate::{
    limits::{BATCH_BYTES_MAX, FETCH_RESPONSE_BYTES_MAX},
    protocol::record_batch::{patch_base_offset, BatchHeader, ATTR_CONTROL, ATTR_TRANSACTIONAL},
};

/// The APIs and versions advertised: the ones `shardlog bench` and
/// librdkafka producers (transactional ones too, `txn.rs`) and `assign()`
/// consumers need. FindCoordinator finds transactional ids' coordinator
/// only; a group lookup is answered COORDINATOR_NOT_AVAILABLE.
pub const SUPPORTED: &[(ApiKey, i16, i16)] = &[
    (ApiKey::Produce, 3, 9),
    (ApiKey::Fetch, 4, 12),
    (ApiKey::ListOffsets, 1, 6),
    (ApiKey::Metadata, 0, 12),
    (ApiKey::FindCoordinator, 0, 4),
    (ApiKey::ApiVersions, 0, 3),
    (ApiKey::CreateTopics, 2, 7),
    (ApiKey::InitProducerId, 0, 4),
    (ApiKey::AddPartitionsToTxn, 0, 3),
    (ApiKey::EndTxn, 0, 3),
];

/// Longest long poll honoured, whatever `max_wait_ms` asks (Kafka clients
/// ask 100–500 ms).
const FETCH_WAIT_MAX: Duration = Duration::from_secs(30);

fn supported(key: ApiKey, version: i16) -> bool {
    SUPPORTED.iter().any(|&(k, min, max)| k == key && (min..=max).contains(&version))
}

/// Answers one request (the frame after its size prefix) into `conn`.
/// Err: close the connection, for the reason given.
pub async fn handle(core: &Rc<Core>, frame: BytesMut, conn: &mut Conn) -> Result<(), String> {
    let api_key = i16::from_be_bytes([frame[0], frame[1]]);
    let version = i16::from_be_bytes([frame[2], frame[3]]);
    let correlation_id = i32::from_be_bytes([frame[4], frame[5], frame[6], frame[7]]);
    let key = ApiKey::try_from(api_key).map_err(|_| format!("unknown API key {api_key}"))?;
    if key == ApiKey::ApiVersions {
        // Answered with a v0 header always, and in v0 when the version is
        // one we do not speak, so the client can retry with ours.
        let (version, error) = if supported(key, version) { (version, 0) } else { (0, codes::UNSUPPORTED_VERSION) };
        conn.push([respond(correlation_id, version, 0, &api_versions(error))?]);
        return Ok(());
    }
    if !supported(key, version) {
        return Err(format!("{key:?} v{version} is not served by the null broker"));
    }
    let flexible_header = key.request_header_version(version) >= 2;
    if key == ApiKey::Produce {
        let body = wire::skip_header(&frame, flexible_header)?;
        conn.push(produce(core, frame, body, version, correlation_id)?);
        return Ok(());
    }
    let mut body = frame.freeze();
    RequestHeader::decode(&mut body, key.request_header_version(version))
        .map_err(|e| format!("bad {key:?} v{version} header: {e}"))?;
    let header_version = key.response_header_version(version);
    let bad = |e: String| format!("cannot decode {key:?} v{version}: {e}");
    match key {
        ApiKey::Fetch => {
            let request = FetchRequest::decode(&mut body, version).map_err(|e| bad(e.to_string()))?;
            // A long poll holds this connection: send what is owed first.
            conn.flush().await.map_err(|e| format!("write failed: {e}"))?;
            let topics = fetch(core, request).await;
            conn.push(wire::fetch_response(correlation_id, version, &topics));
        }
        ApiKey::Metadata => {
            let request = MetadataRequest::decode(&mut body, version).map_err(|e| bad(e.to_string()))?;
            let response = metadata(core, request, version).await;
            conn.push([respond(correlation_id, version, header_version, &response)?]);
        }
        ApiKey::CreateTopics => {
            let request = CreateTopicsRequest::decode(&mut body, version).map_err(|e| bad(e.to_string()))?;
            let response = create_topics(core, request).await;
            conn.push([respond(correlation_id, version, header_version, &response)?]);
        }
        ApiKey::ListOffsets => {
            let request = ListOffsetsRequest::decode(&mut body, version).map_err(|e| bad(e.to_string()))?;
            conn.push([respond(correlation_id, version, header_version, &list_offsets(core, request))?]);
        }
        ApiKey::FindCoordinator => {
            let request = FindCoordinatorRequest::decode(&mut body, version).map_err(|e| bad(e.to_string()))?;
            let response = txn::find_coordinator(core, request, version);
            conn.push([respond(correlation_id, version, header_version, &response)?]);
        }
        ApiKey::InitProducerId => {
            let request = InitProducerIdRequest::decode(&mut body, version).map_err(|e| bad(e.to_string()))?;
            let response = txn::init_producer_id(core, request).await;
            conn.push([respond(correlation_id, version, header_version, &response)?]);
        }
        ApiKey::AddPartitionsToTxn => {
            let request = AddPartitionsToTxnRequest::decode(&mut body, version).map_err(|e| bad(e.to_string()))?;
            let response = txn::add_partitions(core, request);
            conn.push([respond(correlation_id, version, header_version, &response)?]);
        }
        ApiKey::EndTxn => {
            let request = EndTxnRequest::decode(&mut body, version).map_err(|e| bad(e.to_string()))?;
            let response = txn::end_txn(core, request).await;
            conn.push([respond(correlation_id, version, header_version, &response)?]);
        }
        other => return Err(format!("{other:?} is advertised but not answered")),
    }
    Ok(())
}

/// Size prefix + response header + body, through the protocol crate.
fn respond<R: Encodable>(correlation_id: i32, version: i16, header_version: i16, body: &R) -> Result<Bytes, String> {
    let body_len = body.compute_size(version).map_err(|e| format!("cannot size a response: {e}"))?;
    let mut out = wire::response_start(correlation_id, header_version >= 1, 9 + body_len);
    body.encode(&mut out, version).map_err(|e| format!("cannot encode a response: {e}"))?;
    wire::finish(&mut out, 0);
    Ok(out.freeze())
}

fn api_versions(error: i16) -> ApiVersionsResponse {
    let mut response = ApiVersionsResponse::default();
    response.error_code = error;
    response.api_keys = SUPPORTED
        .iter()
        .map(|&(key, min, max)| {
            let mut v = ApiVersion::default();
            v.api_key = key as i16;
            v.min_version = min;
            v.max_version = max;
            v
        })
        .collect();
    response
}

/// Where a partition's batches sit in the request frame, and the offsets
/// they were given: (range, base offset, last offset).
type Placed = Vec<(Range<usize>, i64, i64)>;

/// Each topic's answers (its name's range in the frame, its partitions).
type Answers = Vec<(Range<usize>, Vec<ProducedPartition>)>;

/// Produce: offsets assigned, batches patched in the frame and kept as
/// slices of it, answered at once. Nothing is awaited, so no other request
/// on this core runs between assigning offsets and storing the batches.
fn produce(
    core: &Core,
    mut frame: BytesMut,
    body: usize,
    version: i16,
    correlation: i32,
) -> Result<Vec<Bytes>, String> {
    let request = wire::parse_produce(&frame, body, version)?;
    let refuse = if !matches!(request.acks, -1..=1) { Some(codes::INVALID_REQUIRED_ACKS) } else { None };
    let (answers, placed) = assign_offsets(core, &frame, &request, refuse);
    for (_, _, batches) in &placed {
        for (range, base, _) in batches {
            patch_base_offset(&mut frame[range.clone()], *base);
        }
    }
    let frame = frame.freeze();
    if !placed.is_empty() {
        store(core, &frame, &request, placed);
        core.notify.notify();
    }
    if request.acks == 0 {
        return Ok(Vec::new());
    }
    Ok(vec![wire::produce_response(correlation, version, &frame, &answers)])
}

/// Checks each partition's batches and takes offsets for them: the
/// answers, and (topic, partition, batches) for `store`.
fn assign_offsets(
    core: &Core,
    frame: &[u8],
    request: &wire::ProduceRequest,
    refuse: Option<i16>,
) -> (Answers, Vec<(usize, i32, Placed)>) {
    let mut topics = core.topics.borrow_mut();
    let mut answers = Vec::with_capacity(request.topics.len());
    let mut placed = Vec::new();
    for (t, topic) in request.topics.iter().enumerate() {
        let name = std::str::from_utf8(&frame[topic.name.clone()]).unwrap_or("");
        let mut state = topics.get_mut(name);
        let mut partitions = Vec::with_capacity(topic.partitions.len());
        for (index, records) in &topic.partitions {
            let mut answer = ProducedPartition { index: *index, error: 0, base_offset: -1, log_start: -1 };
            let tail = state.as_mut().and_then(|s| s.tails.get_mut(usize::try_from(*index).ok()?));
            answer.error = match (refuse, tail, records) {
                (Some(code), _, _) => code,
                (None, None, _) => codes::UNKNOWN_TOPIC_OR_PARTITION,
                (None, Some(None), _) => codes::NOT_LEADER_OR_FOLLOWER,
                (None, Some(Some(_)), None) => codes::CORRUPT_MESSAGE,
                (None, Some(Some(tail)), Some(range)) => match split_batches(frame, range.clone()) {
                    None => codes::CORRUPT_MESSAGE,
                    Some(batches) => {
                        let here: Placed = batches
                            .into_iter()
                            .map(|(r, count, txn_producer)| {
                                let base = tail.reserve(count);
                                if let Some(producer_id) = txn_producer {
                                    tail.open_txn(producer_id, base);
                                }
                                (r, base, base + count - 1)
                            })
                            .collect();
                        (answer.base_offset, answer.log_start) = (here[0].1, tail.start);
                        placed.push((t, *index, here));
                        0
                    }
                },
            };
            partitions.push(answer);
        }
        answers.push((topic.name.clone(), partitions));
    }
    (answers, placed)
}

/// Keeps the patched batches in their partitions' tails.
fn store(core: &Core, frame: &Bytes, request: &wire::ProduceRequest, placed: Vec<(usize, i32, Placed)>) {
    let mut topics = core.topics.borrow_mut();
    for (t, index, batches) in placed {
        let name = std::str::from_utf8(&frame[request.topics[t].name.clone()]).unwrap_or("");
        let tail = topics.get_mut(name).and_then(|s| s.tails.get_mut(index as usize)).and_then(Option::as_mut);
        let tail = tail.expect("a partition that took offsets in this request still exists");
        for (range, base, last) in batches {
            tail.push(base, last, frame.slice(range));
        }
    }
}

/// One batch in a request: its range, record count, and the producer id
/// of a transactional batch.
type Split = (Range<usize>, i64, Option<i64>);

/// The record batches in a partition's records. `None` if any is malformed
/// (the header is checked, not the CRC: the floor leaves out what a real
/// broker must do with the bytes).
fn split_batches(frame: &[u8], records: Range<usize>) -> Option<Vec<Split>> {
    let mut out = Vec::with_capacity(1);
    let mut pos = records.start;
    while pos < records.end {
        let h = BatchHeader::parse(&frame[pos..records.end], BATCH_BYTES_MAX).ok()?;
        let end = pos + h.total_bytes();
        if end > records.end || h.records_count < 1 || h.last_offset_delta != h.records_count - 1 {
            return None;
        }
        let transactional = h.attributes & ATTR_TRANSACTIONAL != 0 && h.attributes & ATTR_CONTROL == 0;
        out.push((pos..end, i64::from(h.records_count), transactional.then_some(h.producer_id)));
        pos = end;
    }
    (!out.is_empty()).then_some(out)
}

/// Fetch with long poll: answers once `min_bytes` are there, a partition
/// has an error, or `max_wait_ms` has passed; woken by every produce and
/// marker. A read_committed fetch reads below each last stable offset.
async fn fetch(core: &Rc<Core>, request: FetchRequest) -> Vec<(Bytes, Vec<FetchedPartition>)> {
    let wait = Duration::from_millis(request.max_wait_ms.max(0) as u64).min(FETCH_WAIT_MAX);
    let deadline = std::time::Instant::now() + wait;
    loop {
        let seen = core.notify.generation();
        let (topics, bytes, errors) = collect(core, &request);
        let now = std::time::Instant::now();
        if bytes >= request.min_bytes.max(0) as usize || errors || now >= deadline {
            return topics;
        }
        futures_lite::future::or(core.notify.changed(seen), glommio::timer::sleep(deadline - now)).await;
    }
}

/// What the request's partitions hold now: (topics, record bytes, any error).
fn collect(core: &Core, request: &FetchRequest) -> (Vec<(Bytes, Vec<FetchedPartition>)>, usize, bool) {
    let topics = core.topics.borrow();
    let mut room = (request.max_bytes.max(0) as usize).min(FETCH_RESPONSE_BYTES_MAX);
    let (mut total, mut errors) = (0, false);
    let mut out = Vec::with_capacity(request.topics.len());
    let read_committed = request.isolation_level == 1;
    for t in &request.topics {
        let state = topics.get(t.topic.as_str());
        let mut partitions = Vec::with_capacity(t.partitions.len());
        for p in &t.partitions {
            let mut fp = FetchedPartition {
                index: p.partition,
                error: 0,
                high_watermark: -1,
                last_stable: -1,
                log_start: -1,
                aborted: Vec::new(),
                records: Vec::new(),
            };
            let tail = state.and_then(|s| s.tails.get(usize::try_from(p.partition).ok()?));
            match tail {
                None => fp.error = codes::UNKNOWN_TOPIC_OR_PARTITION,
                Some(None) => fp.error = codes::NOT_LEADER_OR_FOLLOWER,
                Some(Some(tail)) => {
                    (fp.high_watermark, fp.last_stable, fp.log_start) = (tail.end, tail.last_stable(), tail.start);
                    let limit = (p.partition_max_bytes.max(0) as usize).min(room);
                    let upper = if read_committed { fp.last_stable } else { i64::MAX };
                    if total == 0 || limit > 0 {
                        match tail.read(p.fetch_offset, limit, upper, &mut fp.records) {
                            Ok(n) => {
                                total += n;
                                room = room.saturating_sub(n);
                                if read_committed && n > 0 {
                                    fp.aborted = tail.aborted_between(p.fetch_offset, upper);
                                }
                            }
                            Err(code) => fp.error = code,
                        }
                    }
                }
            }
            errors |= fp.error != 0;
            partitions.push(fp);
        }
        out.push((Bytes::copy_from_slice(t.topic.as_bytes()), partitions));
    }
    (out, total, errors)
}

async fn metadata(core: &Rc<Core>, request: MetadataRequest, version: i16) -> MetadataResponse {
    let wanted: Option<Vec<String>> =
        request.topics.map(|ts| ts.into_iter().filter_map(|t| t.name.map(|n| n.0.to_string())).collect());
    // v0–v3 always allowed auto-creation; from v4 the client says.
    if let (Some(names), true) = (&wanted, version < 4 || request.allow_auto_topic_creation) {
        for name in names {
            let missing = !core.topics.borrow().contains_key(name);
            if missing && !name.is_empty() {
                let _ = core.create_topic(name, -1).await;
            }
        }
    }
    let topics = core.topics.borrow();
    let names: Vec<String> = wanted.unwrap_or_else(|| topics.keys().cloned().collect());
    let mut response = MetadataResponse::default();
    response.brokers = core
        .nodes
        .iter()
        .enumerate()
        .map(|(id, (host, port))| {
            let mut b = MetadataResponseBroker::default();
            b.node_id = (id as i32).into();
            b.host = StrBytes::from_string(host.clone());
            b.port = i32::from(*port);
            b
        })
        .collect();
    response.cluster_id = Some(StrBytes::from_static_str("shardlog-null-broker"));
    response.controller_id = 0.into();
    for name in names {
        let mut topic = MetadataResponseTopic::default();
        match topics.get(&name) {
            None => topic.error_code = codes::UNKNOWN_TOPIC_OR_PARTITION,
            Some(state) => {
                topic.topic_id = state.id;
                topic.partitions = (0..state.partitions)
                    .map(|index| {
                        let leader = core.leader(index).into();
                        let mut p = MetadataResponsePartition::default();
                        p.partition_index = index;
                        p.leader_id = leader;
                        p.replica_nodes = vec![leader];
                        p.isr_nodes = vec![leader];
                        p
                    })
                    .collect();
            }
        }
        topic.name = Some(TopicName(StrBytes::from_string(name)));
        response.topics.push(topic);
    }
    response
}

async fn create_topics(core: &Rc<Core>, request: CreateTopicsRequest) -> CreateTopicsResponse {
    let mut response = CreateTopicsResponse::default();
    for t in request.topics {
        let mut r = CreatableTopicResult::default();
        let name = t.name.0.to_string();
        let outcome = if request.validate_only {
            Ok(())
        } else if t.replication_factor == 0 || t.replication_factor < -1 {
            Err((codes::INVALID_REQUEST, format!("topic {name}: replication factor {}", t.replication_factor)))
        } else {
            core.create_topic(&name, t.num_partitions).await
        };
        if let Err((code, message)) = outcome {
            r.error_code = code;
            r.error_message = Some(StrBytes::from_string(message));
        }
        r.num_partitions = core.topics.borrow().get(&name).map_or(t.num_partitions, |s| s.partitions);
        r.replication_factor = 1;
        r.topic_id = core.topics.borrow().get(&name).map_or_else(uuid::Uuid::nil, |s| s.id);
        r.name = t.name;
        response.topics.push(r);
    }
    response
}

/// Latest (-1), earliest (-2), or the first batch at or after a timestamp.
fn list_offsets(core: &Core, request: ListOffsetsRequest) -> ListOffsetsResponse {
    let topics = core.topics.borrow();
    let mut response = ListOffsetsResponse::default();
    for t in request.topics {
        let state = topics.get(t.name.as_str());
        let mut out = ListOffsetsTopicResponse::default();
        for p in t.partitions {
            let mut r = ListOffsetsPartitionResponse::default();
            r.partition_index = p.partition_index;
            (r.offset, r.timestamp) = (-1, -1);
            match state.and_then(|s| s.tails.get(usize::try_from(p.partition_index).ok()?)) {
                None => r.error_code = codes::UNKNOWN_TOPIC_OR_PARTITION,
                Some(None) => r.error_code = codes::NOT_LEADER_OR_FOLLOWER,
                Some(Some(tail)) => match p.timestamp {
                    -1 if request.isolation_level == 1 => r.offset = tail.last_stable(),
                    -1 => r.offset = tail.end,
                    -2 => r.offset = tail.start,
                    ts => (r.offset, r.timestamp) = tail.offset_for_time(ts).unwrap_or((-1, -1)),
                },
            }
            out.partitions.push(r);
        }
        out.name = t.name;
        response.topics.push(out);
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The size prefix is 4 bytes; bodies we encode by hand must read back
    /// through the protocol crate.
    fn body(frame: &[u8], flexible_header: bool) -> Bytes {
        let skip = 8 + usize::from(flexible_header);
        assert_eq!(i32::from_be_bytes(frame[..4].try_into().unwrap()) as usize, frame.len() - 4);
        Bytes::copy_from_slice(&frame[skip..])
    }

    #[test]
    fn produce_responses_read_back_through_the_protocol_crate() {
        let frame = b"..topic-a..".to_vec();
        for version in 3..=9 {
            let answers = vec![(
                2..9,
                vec![
                    ProducedPartition { index: 4, error: 0, base_offset: 77, log_start: 5 },
                    ProducedPartition { index: 9, error: 3, base_offset: -1, log_start: -1 },
                ],
            )];
            let out = wire::produce_response(11, version, &frame, &answers);
            let mut b = body(&out, version >= 9);
            let r = kafka_protocol::messages::ProduceResponse::decode(&mut b, version).unwrap();
            assert!(b.is_empty(), "v{version}: nothing left over");
            assert_eq!(r.responses.len(), 1);
            assert_eq!(r.responses[0].name.as_str(), "topic-a");
            let p = &r.responses[0].partition_responses;
            assert_eq!((p[0].index, p[0].error_code, p[0].base_offset), (4, 0, 77), "v{version}");
            assert_eq!((p[1].index, p[1].error_code), (9, 3), "v{version}");
            if version >= 5 {
                assert_eq!(p[0].log_start_offset, 5);
            }
        }
    }

    #[test]
    fn fetch_responses_read_back_through_the_protocol_crate() {
        let batch = Bytes::from_static(b"stored batch bytes");
        for version in 4..=12 {
            let topics = vec![(
                Bytes::from_static(b"t"),
                vec![
                    FetchedPartition {
                        index: 1,
                        error: 0,
                        high_watermark: 40,
                        last_stable: 31,
                        log_start: 2,
                        aborted: vec![(77, 12), (78, 20)],
                        records: vec![batch.clone(), batch.clone()],
                    },
                    FetchedPartition {
                        index: 2,
                        error: 1,
                        high_watermark: 9,
                        last_stable: 9,
                        log_start: 0,
                        aborted: vec![],
                        records: vec![],
                    },
                ],
            )];
            let chunks = wire::fetch_response(5, version, &topics);
            assert!(chunks.iter().any(|c| c.as_ptr() == batch.as_ptr()), "the stored bytes are passed on");
            let frame: Vec<u8> = chunks.iter().flat_map(|c| c.to_vec()).collect();
            let mut b = body(&frame, version >= 12);
            let r = kafka_protocol::messages::FetchResponse::decode(&mut b, version).unwrap();
            assert!(b.is_empty(), "v{version}: nothing left over");
            let ps = &r.responses[0].partitions;
            assert_eq!(r.responses[0].topic.as_str(), "t");
            assert_eq!(ps[0].records.as_deref(), Some(&b"stored batch bytesstored batch bytes"[..]));
            assert_eq!((ps[0].high_watermark, ps[1].error_code), (40, 1), "v{version}");
            assert_eq!(ps[0].last_stable_offset, 31, "v{version}");
            let aborted: Vec<(i64, i64)> =
                ps[0].aborted_transactions.iter().flatten().map(|a| (a.producer_id.0, a.first_offset)).collect();
            assert_eq!(aborted, vec![(77, 12), (78, 20)], "v{version}");
        }
    }

    #[test]
    fn produce_requests_are_located_as_the_protocol_crate_encodes_them() {
        use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
        for version in 3..=9 {
            let mut p = PartitionProduceData::default();
            p.index = 7;
            p.records = Some(Bytes::from_static(b"records!"));
            let mut t = TopicProduceData::default();
            t.name = TopicName(StrBytes::from_static_str("orders"));
            t.partition_data = vec![p];
            let mut req = kafka_protocol::messages::ProduceRequest::default();
            req.acks = -1;
            req.topic_data = vec![t];
            let mut header = RequestHeader::default();
            header.request_api_key = 0;
            header.request_api_version = version;
            header.client_id = Some(StrBytes::from_static_str("c"));
            let mut frame = BytesMut::new();
            let header_version = ApiKey::Produce.request_header_version(version);
            header.encode(&mut frame, header_version).unwrap();
            req.encode(&mut frame, version).unwrap();
            let body = wire::skip_header(&frame, header_version >= 2).unwrap();
            let parsed = wire::parse_produce(&frame, body, version).unwrap();
            assert_eq!(parsed.acks, -1);
            assert_eq!(&frame[parsed.topics[0].name.clone()], b"orders", "v{version}");
            let (index, records) = &parsed.topics[0].partitions[0];
            assert_eq!(*index, 7);
            assert_eq!(&frame[records.clone().unwrap()], b"records!", "v{version}");
        }
    }
}
