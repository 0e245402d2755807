//! Hand-written Fetch response encoder (v4–v12) that leaves record bytes
//! where they are: the output is a list of buffers in which the stored
//! batches appear as the very `Bytes` the log returned, to be written with
//! one vectored write. The protocol crate's encoder would copy them.
//!
//! Checked against the crate's encoder for every version in the tests below.

use bytes::{BufMut, Bytes, BytesMut};

use crate::protocol::varint::put_uvarint;

/// One partition of the response, in request order.
pub struct PartitionOut {
    pub partition: i32,
    pub error: i16,
    pub high_watermark: i64,
    pub last_stable_offset: i64,
    pub log_start: i64,
    pub records: Vec<Bytes>,
}

pub struct TopicOut {
    pub name: String,
    pub partitions: Vec<PartitionOut>,
}

/// Encodes a whole response frame (size prefix, header, body) as buffers.
pub fn encode(correlation_id: i32, version: i16, topics: &[TopicOut]) -> Vec<Bytes> {
    let flexible = version >= 12;
    let mut parts = Vec::new();
    let mut cur = BytesMut::with_capacity(256);
    cur.put_i32(0); // size, patched below
    cur.put_i32(correlation_id);
    if flexible {
        cur.put_u8(0); // response header tagged fields
    }
    cur.put_i32(0); // throttle_time_ms
    if version >= 7 {
        cur.put_i16(0); // error_code
        cur.put_i32(0); // session_id: no fetch sessions
    }
    put_len(&mut cur, topics.len(), flexible);
    for t in topics {
        put_str(&mut cur, &t.name, flexible);
        put_len(&mut cur, t.partitions.len(), flexible);
        for p in &t.partitions {
            cur.put_i32(p.partition);
            cur.put_i16(p.error);
            cur.put_i64(p.high_watermark);
            cur.put_i64(p.last_stable_offset);
            if version >= 5 {
                cur.put_i64(p.log_start);
            }
            put_len(&mut cur, 0, flexible); // aborted_transactions: empty
            if version >= 11 {
                cur.put_i32(-1); // preferred_read_replica
            }
            let len: usize = p.records.iter().map(Bytes::len).sum();
            if flexible {
                put_uvarint(&mut cur, len as u64 + 1);
            } else {
                cur.put_i32(len as i32);
            }
            for chunk in p.records.iter().filter(|c| !c.is_empty()) {
                parts.push(std::mem::take(&mut cur).freeze());
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
    parts.push(cur.freeze());
    let total: usize = parts.iter().map(Bytes::len).sum();
    let mut first = BytesMut::from(&parts[0][..]);
    first[..4].copy_from_slice(&((total - 4) as i32).to_be_bytes());
    parts[0] = first.freeze();
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
                partitions: vec![
                    PartitionOut {
                        partition: 0,
                        error: 0,
                        high_watermark: 42,
                        last_stable_offset: 42,
                        log_start: 3,
                        records: vec![Bytes::from_static(b"first-batch"), Bytes::from_static(b"second")],
                    },
                    PartitionOut {
                        partition: 5,
                        error: 1,
                        high_watermark: 7,
                        last_stable_offset: 7,
                        log_start: 0,
                        records: vec![],
                    },
                ],
            },
            TopicOut {
                name: "b".repeat(300),
                partitions: vec![PartitionOut {
                    partition: 2,
                    error: 0,
                    high_watermark: 1 << 40,
                    last_stable_offset: 1 << 40,
                    log_start: 9,
                    records: vec![Bytes::from(vec![7u8; 200])],
                }],
            },
        ]
    }

    /// The same response through the protocol crate's encoder.
    fn reference(correlation_id: i32, version: i16, topics: &[TopicOut]) -> Vec<u8> {
        let mut r = FetchResponse::default();
        for t in topics {
            let mut ft = FetchableTopicResponse::default();
            ft.topic = TopicName(StrBytes::from_string(t.name.clone()));
            for p in &t.partitions {
                let mut pd = PartitionData::default();
                pd.partition_index = p.partition;
                pd.error_code = p.error;
                pd.high_watermark = p.high_watermark;
                pd.last_stable_offset = p.last_stable_offset;
                pd.log_start_offset = p.log_start;
                pd.aborted_transactions = Some(Vec::new());
                pd.preferred_read_replica = (-1).into();
                pd.records = Some(p.records.concat().into());
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
        let topics = sample();
        for version in 4..=12 {
            let ours: Vec<u8> = encode(99, version, &topics).concat();
            assert_eq!(ours, reference(99, version, &topics), "fetch response v{version}");
        }
    }

    #[test]
    fn record_chunks_are_passed_through_not_copied() {
        let topics = sample();
        let parts = encode(1, 12, &topics);
        let chunk = &topics[0].partitions[0].records[0];
        assert!(parts.iter().any(|p| p.as_ptr() == chunk.as_ptr()), "the stored buffer itself is in the output");
    }
}
