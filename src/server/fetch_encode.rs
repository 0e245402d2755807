//! Hand-written Fetch response encoder (v4–v17) that leaves record bytes
//! where they are: the output is a list of chunks in which the stored
//! batches appear as the very chunks the log returned (cached buffers, or
//! ranges of sealed segment files), to be written with vectored writes and
//! `sendfile`. The protocol crate's encoder would copy them.
//!
//! Checked against the crate's encoder for every version in the tests below.

use bytes::{BufMut, BytesMut};

use crate::{protocol::varint::put_uvarint, storage::Chunk};

/// One partition of the response, in request order.
pub struct PartitionOut {
    pub partition: i32,
    pub error: i16,
    pub high_watermark: i64,
    pub last_stable_offset: i64,
    pub log_start: i64,
    /// The replica the consumer should fetch from instead (v11+; -1: none).
    pub preferred_read_replica: i32,
    /// Aborted transactions, (producer id, first offset), for read_committed.
    pub aborted: Vec<(i64, i64)>,
    pub records: Vec<Chunk>,
}

pub struct TopicOut {
    /// Written up to v12.
    pub name: crate::shard::topics::TopicHandle,
    /// Written from v13, which names topics by id.
    pub id: uuid::Uuid,
    pub partitions: Vec<PartitionOut>,
}

/// Encodes a whole response frame (size prefix, header, body) as chunks.
pub fn encode(correlation_id: i32, version: i16, answer: &crate::server::handlers::fetch::FetchAnswer) -> Vec<Chunk> {
    let topics = &answer.topics;
    let flexible = version >= 12;
    let mut parts: Vec<Chunk> = Vec::new();
    let mut cur = BytesMut::with_capacity(256);
    cur.put_i32(0); // size, patched below
    cur.put_i32(correlation_id);
    if flexible {
        cur.put_u8(0); // response header tagged fields
    }
    cur.put_i32(0); // throttle_time_ms
    if version >= 7 {
        cur.put_i16(answer.error);
        cur.put_i32(answer.session_id);
    }
    put_len(&mut cur, topics.len(), flexible);
    for t in topics {
        if version >= 13 {
            cur.put_slice(t.id.as_bytes());
        } else {
            put_str(&mut cur, &t.name, flexible);
        }
        put_len(&mut cur, t.partitions.len(), flexible);
        for p in &t.partitions {
            cur.put_i32(p.partition);
            cur.put_i16(p.error);
            cur.put_i64(p.high_watermark);
            cur.put_i64(p.last_stable_offset);
            if version >= 5 {
                cur.put_i64(p.log_start);
            }
            put_len(&mut cur, p.aborted.len(), flexible);
            for &(producer_id, first_offset) in &p.aborted {
                cur.put_i64(producer_id);
                cur.put_i64(first_offset);
                if flexible {
                    cur.put_u8(0); // aborted transaction tagged fields
                }
            }
            if version >= 11 {
                cur.put_i32(p.preferred_read_replica);
            }
            let len: usize = p.records.iter().map(Chunk::len).sum();
            if flexible {
                put_uvarint(&mut cur, len as u64 + 1);
            } else {
                cur.put_i32(len as i32);
            }
            for chunk in p.records.iter().filter(|c| !c.is_empty()) {
                parts.push(std::mem::take(&mut cur).freeze().into());
                parts.push(chunk.clone());
            }
            if flexible {
                cur.put_u8(0); // partition tagged fields
            }
        }
        if flexible {
            cur.put_u8(0); // topic tagged fields
        }
    }
    if flexible {
        cur.put_u8(0); // response tagged fields
    }
    parts.push(cur.freeze().into());
    let total: usize = parts.iter().map(Chunk::len).sum();
    if let Chunk::Memory(head) = &parts[0] {
        let mut first = BytesMut::from(&head[..]);
        first[..4].copy_from_slice(&((total - 4) as i32).to_be_bytes());
        parts[0] = first.freeze().into();
    }
    parts.retain(|p| !p.is_empty());
    parts
}

fn put_len(buf: &mut BytesMut, n: usize, flexible: bool) {
    if flexible {
        put_uvarint(buf, n as u64 + 1)
    } else {
        buf.put_i32(n as i32)
    }
}

fn put_str(buf: &mut BytesMut, s: &str, flexible: bool) {
    if flexible {
        put_uvarint(buf, s.len() as u64 + 1);
    } else {
        buf.put_i16(s.len() as i16);
    }
    buf.put_slice(s.as_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::server::handlers::fetch::FetchAnswer;
    use bytes::Bytes;
    use kafka_protocol::{
        messages::{
            fetch_response::{FetchableTopicResponse, PartitionData},
            ApiKey, FetchResponse, TopicName,
        },
        protocol::{Encodable, StrBytes},
    };

    fn sample() -> Vec<TopicOut> {
        vec![
            TopicOut {
                name: "alpha".into(),
                id: uuid::Uuid::from_u128(0x0123_4567_89ab_cdef_0011_2233_4455_6677),
                partitions: vec![
                    PartitionOut {
                        partition: 0,
                        error: 0,
                        high_watermark: 42,
                        last_stable_offset: 42,
                        log_start: 3,
                        preferred_read_replica: -1,
                        aborted: vec![(77, 10), (78, 12)],
                        records: vec![Bytes::from_static(b"first-batch").into(), Bytes::from_static(b"second").into()],
                    },
                    PartitionOut {
                        partition: 5,
                        error: 1,
                        high_watermark: 7,
                        last_stable_offset: 7,
                        log_start: 0,
                        preferred_read_replica: 3,
                        aborted: vec![],
                        records: vec![],
                    },
                ],
            },
            TopicOut {
                name: "b".repeat(300).as_str().into(),
                id: uuid::Uuid::from_u128(u128::MAX - 5),
                partitions: vec![PartitionOut {
                    partition: 2,
                    error: 0,
                    high_watermark: 1 << 40,
                    last_stable_offset: 1 << 40,
                    log_start: 9,
                    preferred_read_replica: -1,
                    aborted: vec![],
                    records: vec![Bytes::from(vec![7u8; 200]).into(), file_chunk()],
                }],
            },
        ]
    }

    /// The same response through the protocol crate's encoder.
    fn reference(correlation_id: i32, version: i16, answer: &FetchAnswer) -> Vec<u8> {
        let topics = &answer.topics;
        let mut r = FetchResponse::default();
        if version >= 7 {
            r.error_code = answer.error;
            r.session_id = answer.session_id;
        }
        for t in topics {
            let mut ft = FetchableTopicResponse::default();
            ft.topic = TopicName(StrBytes::from_string(t.name.to_string()));
            ft.topic_id = t.id;
            for p in &t.partitions {
                let mut pd = PartitionData::default();
                pd.partition_index = p.partition;
                pd.error_code = p.error;
                pd.high_watermark = p.high_watermark;
                pd.last_stable_offset = p.last_stable_offset;
                pd.log_start_offset = p.log_start;
                pd.aborted_transactions = Some(
                    p.aborted
                        .iter()
                        .map(|&(pid, first)| {
                            let mut a = kafka_protocol::messages::fetch_response::AbortedTransaction::default();
                            a.producer_id = pid.into();
                            a.first_offset = first;
                            a
                        })
                        .collect(),
                );
                // Not in the version before 11: the crate refuses to encode it.
                pd.preferred_read_replica = if version >= 11 { p.preferred_read_replica } else { -1 }.into();
                pd.records = Some(concat(&p.records).into());
                ft.partitions.push(pd);
            }
            r.responses.push(ft);
        }
        let header_version = ApiKey::Fetch.response_header_version(version);
        let mut body = BytesMut::new();
        body.put_i32(correlation_id);
        if header_version >= 1 {
            body.put_u8(0);
        }
        r.encode(&mut body, version).unwrap();
        let mut out = (body.len() as i32).to_be_bytes().to_vec();
        out.extend_from_slice(&body);
        out
    }

    #[test]
    fn matches_the_protocol_crate_for_every_served_version() {
        let answer = FetchAnswer { error: 0, session_id: 77, topics: sample() };
        for version in 4..=17 {
            let ours: Vec<u8> = concat(&encode(99, version, &answer));
            assert_eq!(ours, reference(99, version, &answer), "fetch response v{version}");
        }
        let refused = FetchAnswer { error: 70, session_id: 0, topics: Vec::new() };
        assert_eq!(concat(&encode(5, 12, &refused)), reference(5, 12, &refused), "a session error");
    }

    #[test]
    fn record_chunks_are_passed_through_not_copied() {
        let answer = FetchAnswer { error: 0, session_id: 0, topics: sample() };
        let parts = encode(1, 12, &answer);
        let Chunk::Memory(chunk) = &answer.topics[0].partitions[0].records[0] else { unreachable!() };
        let same_buffer = |p: &Chunk| matches!(p, Chunk::Memory(b) if b.as_ptr() == chunk.as_ptr());
        assert!(parts.iter().any(same_buffer), "the stored buffer itself is in the output");
        let ranges = parts.iter().filter(|p| matches!(p, Chunk::File(r) if r.len == FILE_CHUNK.len())).count();
        assert_eq!(ranges, 1, "the file range is passed on as a range");
    }

    const FILE_CHUNK: &[u8] = b"a batch still on disk";

    /// A range in the middle of a real file.
    fn file_chunk() -> Chunk {
        static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("shardlog-fetch-encode-{}-{n}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("segment");
        let mut content = b"before|".to_vec();
        content.extend_from_slice(FILE_CHUNK);
        content.extend_from_slice(b"|after");
        std::fs::write(&path, &content).unwrap();
        let file = std::fs::File::open(&path).unwrap();
        let _ = std::fs::remove_dir_all(&dir); // the open descriptor keeps the bytes
        Chunk::File(crate::storage::FileRange {
            file: std::sync::Arc::new(file),
            path: std::sync::Arc::new(path),
            pos: 7,
            len: FILE_CHUNK.len(),
        })
    }

    fn concat(chunks: &[Chunk]) -> Vec<u8> {
        chunks.iter().flat_map(|c| c.to_bytes().unwrap().to_vec()).collect()
    }
}
