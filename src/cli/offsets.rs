//! `shardlog offsets dump`: the records of `__consumer_offsets` (or, with
//! `--topic __transaction_state`, of the transaction coordinator), read
//! straight from the segment files (read-only, safe beside a running
//! broker: a batch still being written ends the walk of its file).

use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use crate::{
    groups::{
        records::{self, GroupValue, Key, OffsetValue},
        OFFSETS_TOPIC,
    },
    protocol::record_batch::{self, BatchHeader},
    storage::segment,
    txn::{
        records::{self as txn_records, TxnValue},
        TXN_TOPIC,
    },
};

pub fn dump(data_dir: &Path, topic: &str, group: Option<&str>, as_json: bool) -> Result<(), String> {
    if topic == TXN_TOPIC {
        if group.is_some() {
            return Err(format!("--group applies to {OFFSETS_TOPIC}, not {TXN_TOPIC}"));
        }
        return each_record(data_dir, TXN_TOPIC, None, &mut |key, value| {
            let id = txn_records::decode_key(key).map_err(|e| e.to_string())?;
            let line = if as_json { txn_json_line(&id, value)? } else { txn_text_line(&id, value)? };
            println!("{line}");
            Ok(())
        });
    }
    if topic != OFFSETS_TOPIC {
        return Err(format!("--topic must be {OFFSETS_TOPIC} or {TXN_TOPIC}, not {topic}"));
    }
    let only = match group {
        Some(g) => Some(records::partition_for(g, partitions_of(data_dir, OFFSETS_TOPIC)?.len() as i32)),
        None => None,
    };
    each_record(data_dir, OFFSETS_TOPIC, only, &mut |key, value| {
        let key = Key::decode(key).map_err(|e| e.to_string())?;
        if group.is_some_and(|g| g != key.group()) {
            return Ok(());
        }
        let line = if as_json { json_line(&key, value) } else { text_line(&key, value) };
        println!("{}", line?);
        Ok(())
    })
}

/// Takes one record's key and value (`None`: a tombstone).
type EachRecord<'a> = dyn FnMut(&[u8], Option<&[u8]>) -> Result<(), String> + 'a;

/// Hands every keyed record of `topic`'s data batches to `each`, partition
/// by partition in offset order (`only`: one partition). Control batches
/// (transaction markers, also in `__consumer_offsets` since TxnOffsetCommit)
/// carry no offsets or state and are skipped.
fn each_record(data_dir: &Path, topic: &str, only: Option<i32>, each: &mut EachRecord<'_>) -> Result<(), String> {
    let mut partitions = partitions_of(data_dir, topic)?;
    if partitions.is_empty() {
        return Err(format!("{} has no {topic} partitions", data_dir.display()));
    }
    if let Some(wanted) = only {
        partitions.retain(|(p, _)| *p == wanted);
    }
    for (_, dir) in partitions {
        for file in segment_files(&dir)? {
            let bytes = std::fs::read(&file).map_err(|e| format!("cannot read {}: {e}", file.display()))?;
            let mut at = 0;
            while at + record_batch::HEADER_BYTES <= bytes.len() {
                let Ok(header) = BatchHeader::parse(&bytes[at..], usize::MAX) else { break };
                let end = at + header.total_bytes();
                if end > bytes.len() {
                    break; // still being written
                }
                if header.attributes & record_batch::ATTR_CONTROL == 0 {
                    let records = record_batch::read_records(&bytes[at..end])
                        .map_err(|e| format!("{}: batch at byte {at}: {e}", file.display()))?;
                    for r in records {
                        let Some(key) = r.key else { continue };
                        each(key, r.value).map_err(|e| format!("{}: offset {}: {e}", file.display(), r.offset))?;
                    }
                }
                at = end;
            }
        }
    }
    Ok(())
}

/// `(partition, directory)` of every partition of `topic` on disk.
fn partitions_of(data_dir: &Path, topic: &str) -> Result<Vec<(i32, PathBuf)>, String> {
    let entries = std::fs::read_dir(data_dir).map_err(|e| format!("cannot list {}: {e}", data_dir.display()))?;
    let prefix = format!("{topic}-");
    let mut out: Vec<(i32, PathBuf)> = entries
        .filter_map(Result::ok)
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            name.strip_prefix(&prefix).and_then(|p| p.parse().ok()).map(|p| (p, e.path()))
        })
        .collect();
    out.sort();
    Ok(out)
}

/// A `__transaction_state` record in Kafka's TransactionLogMessageFormatter
/// spirit: the id, then the stored metadata.
fn txn_text_line(id: &str, value: Option<&[u8]>) -> Result<String, String> {
    let Some(v) = value else { return Ok(format!("{id}::NULL")) };
    let v = TxnValue::decode(v).map_err(|e| e.to_string())?;
    let partitions: Vec<String> =
        v.partitions.iter().flat_map(|(t, ps)| ps.iter().map(move |p| format!("{t}-{p}"))).collect();
    Ok(format!(
        "{id}::TransactionMetadata(producerId={}, producerEpoch={}, txnTimeoutMs={}, state={}, \
         topicPartitions=[{}], txnStartTimestamp={}, txnLastUpdateTimestamp={})",
        v.producer_id,
        v.producer_epoch,
        v.timeout_ms,
        v.state.name(),
        partitions.join(","),
        v.start_ms,
        v.last_update_ms
    ))
}

/// Kafka's JSON formatter shape for `__transaction_state`.
fn txn_json_line(id: &str, value: Option<&[u8]>) -> Result<String, String> {
    let key = json!({"version": 0, "data": {"transactionalId": id}});
    let value = match value {
        None => Value::Null,
        Some(bytes) => {
            let v = TxnValue::decode(bytes).map_err(|e| e.to_string())?;
            let partitions: Vec<Value> =
                v.partitions.iter().map(|(t, ps)| json!({"topic": t, "partitionIds": ps})).collect();
            json!({"version": i16::from_be_bytes([bytes[0], bytes[1]]), "data": {
                "producerId": v.producer_id,
                "producerEpoch": v.producer_epoch,
                "transactionTimeoutMs": v.timeout_ms,
                "transactionStatus": v.state.code(),
                "transactionPartitions": partitions,
                "transactionLastUpdateTimestampMs": v.last_update_ms,
                "transactionStartTimestampMs": v.start_ms,
            }})
        }
    };
    Ok(json!({"key": key, "value": value}).to_string())
}

fn segment_files(dir: &Path) -> Result<Vec<PathBuf>, String> {
    let entries = std::fs::read_dir(dir).map_err(|e| format!("cannot list {}: {e}", dir.display()))?;
    let mut files: Vec<(i64, PathBuf)> = entries
        .filter_map(Result::ok)
        .filter_map(|e| segment::parse_segment_name(&e.file_name().to_string_lossy()).map(|b| (b, e.path())))
        .collect();
    files.sort();
    Ok(files.into_iter().map(|(_, p)| p).collect())
}

fn opt(v: i64) -> String {
    if v < 0 {
        "None".into()
    } else {
        v.to_string()
    }
}

/// Kafka's console-formatter style.
fn text_line(key: &Key, value: Option<&[u8]>) -> Result<String, String> {
    Ok(match (key, value) {
        (Key::Offset { group, topic, partition }, None) => format!("[{group},{topic},{partition}]::NULL"),
        (Key::Offset { group, topic, partition }, Some(v)) => {
            let v = OffsetValue::decode(v).map_err(|e| e.to_string())?;
            format!(
                "[{group},{topic},{partition}]::OffsetAndMetadata(offset={}, leaderEpoch={}, metadata={}, commitTimestamp={}, expireTimestamp={})",
                v.offset,
                opt(i64::from(v.leader_epoch)),
                v.metadata,
                v.commit_timestamp,
                opt(v.expire_timestamp)
            )
        }
        (Key::Group { group }, None) => format!("{group}::NULL"),
        (Key::Group { group }, Some(v)) => {
            let g = GroupValue::decode(v).map_err(|e| e.to_string())?;
            let members: Vec<String> = g
                .members
                .iter()
                .map(|m| {
                    format!(
                        "{}(clientId={}, clientHost={}, sessionTimeout={}, rebalanceTimeout={})",
                        m.member_id, m.client_id, m.client_host, m.session_timeout_ms, m.rebalance_timeout_ms
                    )
                })
                .collect();
            format!(
                "{group}::GroupMetadata(protocolType={}, generation={}, protocol={}, leader={}, members=[{}])",
                g.protocol_type,
                g.generation,
                g.protocol.as_deref().unwrap_or("None"),
                g.leader.as_deref().unwrap_or("None"),
                members.join(", ")
            )
        }
    })
}

/// Kafka's JSON formatter shape: `{"key":{"version":…,"data":{…}},"value":…}`.
fn json_line(key: &Key, value: Option<&[u8]>) -> Result<String, String> {
    let version = |v: &[u8]| i16::from_be_bytes([v[0], v[1]]);
    let (key_json, value_json) = match key {
        Key::Offset { group, topic, partition } => {
            let k = json!({"version": 1, "data": {"group": group, "topic": topic, "partition": partition}});
            let v = match value {
                None => Value::Null,
                Some(bytes) => {
                    let o = OffsetValue::decode(bytes).map_err(|e| e.to_string())?;
                    let ver = version(bytes);
                    let mut data =
                        json!({"offset": o.offset, "metadata": o.metadata, "commitTimestamp": o.commit_timestamp});
                    if ver >= 3 {
                        data["leaderEpoch"] = json!(o.leader_epoch);
                    }
                    if ver == 1 {
                        data["expireTimestamp"] = json!(o.expire_timestamp);
                    }
                    json!({"version": ver, "data": data})
                }
            };
            (k, v)
        }
        Key::Group { group } => {
            let k = json!({"version": 2, "data": {"group": group}});
            let v = match value {
                None => Value::Null,
                Some(bytes) => {
                    let g = GroupValue::decode(bytes).map_err(|e| e.to_string())?;
                    let members: Vec<Value> = g
                        .members
                        .iter()
                        .map(|m| {
                            json!({
                                "memberId": m.member_id,
                                "groupInstanceId": m.group_instance_id,
                                "clientId": m.client_id,
                                "clientHost": m.client_host,
                                "rebalanceTimeout": m.rebalance_timeout_ms,
                                "sessionTimeout": m.session_timeout_ms,
                                "subscription": base64(&m.subscription),
                                "assignment": base64(&m.assignment),
                            })
                        })
                        .collect();
                    json!({"version": version(bytes), "data": {
                        "protocolType": g.protocol_type,
                        "generation": g.generation,
                        "protocol": g.protocol,
                        "leader": g.leader,
                        "currentStateTimestamp": g.state_timestamp,
                        "members": members,
                    }})
                }
            };
            (k, v)
        }
    };
    Ok(json!({"key": key_json, "value": value_json}).to_string())
}

/// Standard Base64 with padding, as Kafka's JSON converters print bytes.
fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let n = chunk.iter().enumerate().fold(0u32, |n, (i, &b)| n | (u32::from(b) << (16 - 8 * i)));
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(ALPHABET[(n >> (18 - 6 * i)) as usize & 63] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn base64_matches_rfc_4648_vectors() {
        for (input, want) in [("", ""), ("f", "Zg=="), ("fo", "Zm8="), ("foo", "Zm9v"), ("foobar", "Zm9vYmFy")] {
            assert_eq!(super::base64(input.as_bytes()), want);
        }
    }
}
