//! An independent reader of `__consumer_offsets` records, written for the
//! tests from Kafka's published message schemas (OffsetCommitKey,
//! OffsetCommitValue, GroupMetadataKey in Apache Kafka's
//! `group-coordinator/src/main/resources/common/message/`), not from the
//! broker's code. Non-flexible versions only, which is what Kafka writes.

#![allow(dead_code)]

/// Java's `String.hashCode()` (UTF-16 units, wrapping), and Kafka's
/// partition for a group: `Utils.abs(hash) % partitions`, `abs(MIN) = 0`.
pub fn group_partition(group: &str, partitions: i32) -> i32 {
    let mut h: i32 = 0;
    for unit in group.encode_utf16() {
        h = h.wrapping_mul(31).wrapping_add(unit as i32);
    }
    let abs = if h == i32::MIN { 0 } else { h.abs() };
    abs % partitions
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OffsetsKey {
    /// OffsetCommitKey, versions 0–1.
    Commit { group: String, topic: String, partition: i32 },
    /// GroupMetadataKey, version 2.
    Group { group: String },
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommitValue {
    pub version: i16,
    pub offset: i64,
    pub leader_epoch: i32,
    pub metadata: String,
    pub commit_timestamp: i64,
    pub expire_timestamp: i64,
}

struct Reader<'a>(&'a [u8]);

impl Reader<'_> {
    fn take(&mut self, n: usize) -> &[u8] {
        assert!(self.0.len() >= n, "record shorter than its schema");
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        head
    }
    fn int16(&mut self) -> i16 {
        i16::from_be_bytes(self.take(2).try_into().unwrap())
    }
    fn int32(&mut self) -> i32 {
        i32::from_be_bytes(self.take(4).try_into().unwrap())
    }
    fn int64(&mut self) -> i64 {
        i64::from_be_bytes(self.take(8).try_into().unwrap())
    }
    fn string(&mut self) -> String {
        let n = self.int16();
        assert!(n >= 0, "null string where the schema has none");
        String::from_utf8(self.take(n as usize).to_vec()).unwrap()
    }
}

pub fn decode_key(bytes: &[u8]) -> OffsetsKey {
    let mut r = Reader(bytes);
    match r.int16() {
        0 | 1 => {
            let group = r.string();
            let topic = r.string();
            let partition = r.int32();
            OffsetsKey::Commit { group, topic, partition }
        }
        2 => OffsetsKey::Group { group: r.string() },
        v => panic!("unknown __consumer_offsets key version {v}"),
    }
}

/// OffsetCommitValue: v0 (offset, metadata, commitTimestamp), v1 (+
/// expireTimestamp), v2 (as v0), v3 (offset, leaderEpoch, metadata,
/// commitTimestamp).
pub fn decode_commit_value(bytes: &[u8]) -> CommitValue {
    let mut r = Reader(bytes);
    let version = r.int16();
    let offset = r.int64();
    let leader_epoch = if version >= 3 { r.int32() } else { -1 };
    let metadata = r.string();
    let commit_timestamp = r.int64();
    let expire_timestamp = if version == 1 { r.int64() } else { -1 };
    assert!(r.0.is_empty() || version >= 4, "bytes left after OffsetCommitValue v{version}");
    CommitValue { version, offset, leader_epoch, metadata, commit_timestamp, expire_timestamp }
}
