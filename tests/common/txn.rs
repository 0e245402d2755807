//! Transactional batches and Produce requests over the wire, for tests that
//! play a transactional producer by hand.

use bytes::Bytes;
use kafka_protocol::messages::{list_offsets_request, ApiKey, ListOffsetsRequest, ListOffsetsResponse};
use shardlog::protocol::record_batch::{encode_batch, Record};

use super::wire::{topic_name, Wire};

/// A batch of `values` from producer `producer_id` at `epoch`, starting at
/// `base_sequence`, with the transactional attribute (0x10) when
/// `transactional`. Laid out by hand from Kafka's v2 batch format, its CRC
/// recomputed with an independent CRC-32C.
pub fn batch(producer_id: i64, epoch: i16, base_sequence: i32, values: &[&str], transactional: bool) -> Bytes {
    let records: Vec<Record<'_>> = values
        .iter()
        .enumerate()
        .map(|(i, v)| Record { key: None, value: Some(v.as_bytes()), timestamp_delta: i as i64 })
        .collect();
    let mut b = encode_batch(&records, 1_790_000_000_000);
    if transactional {
        b[21..23].copy_from_slice(&0x10i16.to_be_bytes());
    }
    b[43..51].copy_from_slice(&producer_id.to_be_bytes());
    b[51..53].copy_from_slice(&epoch.to_be_bytes());
    b[53..57].copy_from_slice(&base_sequence.to_be_bytes());
    let crc = crc32c::crc32c(&b[21..]);
    b[17..21].copy_from_slice(&crc.to_be_bytes());
    b.into()
}

/// Produce v9 (acks=all) of one batch with a transactional id; returns
/// (error, base offset).
pub fn produce(w: &mut Wire, transactional_id: &str, topic: &str, partition: i32, batch: Bytes) -> (i16, i64) {
    super::wire::produce_as(w, Some(transactional_id), topic, partition, batch, -1)
}

/// ListOffsets v5 latest (-1) of one partition at an isolation level: the
/// log end for read_uncommitted (0), the last stable offset for
/// read_committed (1).
pub fn latest(w: &mut Wire, topic: &str, partition: i32, isolation_level: i8) -> i64 {
    let mut p = list_offsets_request::ListOffsetsPartition::default();
    p.partition_index = partition;
    p.timestamp = -1;
    let mut t = list_offsets_request::ListOffsetsTopic::default();
    t.name = topic_name(topic);
    t.partitions.push(p);
    let mut req = ListOffsetsRequest::default();
    req.replica_id = (-1).into();
    req.isolation_level = isolation_level;
    req.topics.push(t);
    let resp: ListOffsetsResponse = w.call(ApiKey::ListOffsets, 5, &req);
    let p = &resp.topics[0].partitions[0];
    assert_eq!(p.error_code, 0, "ListOffsets {topic}-{partition}");
    p.offset
}

/// What a consumer read: (partition, offset, value) of each record, and each
/// partition's position after them.
#[derive(Debug, PartialEq)]
pub struct Consumed {
    pub records: Vec<(i32, i64, String)>,
    pub positions: std::collections::BTreeMap<i32, i64>,
}

/// What tests/clients/txn_consume.py (a confluent-kafka consumer) reads of
/// `partitions` ("0,1") of `topic` from the beginning to their end at
/// `isolation`.
pub fn consume_python(bootstrap: &str, topic: &str, isolation: &str, partitions: &str) -> Consumed {
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/clients/txn_consume.py");
    let out = std::process::Command::new("python3")
        .arg(script)
        .args([bootstrap, topic, isolation, partitions])
        .output()
        .expect("run python3");
    assert!(
        out.status.success(),
        "confluent-kafka consumer ({isolation}) failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("one JSON object");
    let records = v["records"]
        .as_array()
        .expect("records")
        .iter()
        .map(|r| (r[0].as_i64().unwrap() as i32, r[1].as_i64().unwrap(), r[2].as_str().unwrap().to_string()))
        .collect();
    let positions =
        v["positions"].as_object().unwrap().iter().map(|(k, v)| (k.parse().unwrap(), v.as_i64().unwrap())).collect();
    Consumed { records, positions }
}
