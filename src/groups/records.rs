//! The records of `__consumer_offsets`, in Kafka's own schemas, so Kafka's
//! tooling can read our log and we can read theirs:
//!
//! - offset commit: key v1 `(group, topic, partition)`; value v3 `(offset,
//!   leader epoch, metadata, commit timestamp)`, or v1 `(offset, metadata,
//!   commit timestamp, expire timestamp)` when the commit carries an expiry;
//! - group metadata: key v2 `(group)`; value v3 (protocol type, generation,
//!   protocol, leader, state timestamp, members);
//! - a record with a null value is a tombstone: the key is deleted.
//!
//! Every field is big-endian; strings are an `i16` length and UTF-8 bytes
//! (-1 for null); byte arrays an `i32` length. Decoding reads versions 0–3
//! of each (the non-flexible ones Kafka has written) and rejects the rest.

use bytes::{Buf, BufMut};

/// Which key a record carries.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Key {
    Offset { group: String, topic: String, partition: i32 },
    Group { group: String },
}

/// A committed offset as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OffsetValue {
    pub offset: i64,
    /// -1 when unknown.
    pub leader_epoch: i32,
    pub metadata: String,
    pub commit_timestamp: i64,
    /// -1: none (expiry then follows the group's state and the retention).
    pub expire_timestamp: i64,
}

/// A group's membership as stored after each completed rebalance.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct GroupValue {
    pub protocol_type: String,
    pub generation: i32,
    pub protocol: Option<String>,
    pub leader: Option<String>,
    pub state_timestamp: i64,
    pub members: Vec<MemberValue>,
}

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct MemberValue {
    pub member_id: String,
    pub group_instance_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub rebalance_timeout_ms: i32,
    pub session_timeout_ms: i32,
    pub subscription: Vec<u8>,
    pub assignment: Vec<u8>,
}

/// Why a record could not be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecodeError(pub String);

impl std::fmt::Display for DecodeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl Key {
    pub fn group(&self) -> &str {
        match self {
            Key::Offset { group, .. } | Key::Group { group } => group,
        }
    }

    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::new();
        match self {
            Key::Offset { group, topic, partition } => {
                out.put_i16(1);
                put_str(&mut out, group);
                put_str(&mut out, topic);
                out.put_i32(*partition);
            }
            Key::Group { group } => {
                out.put_i16(2);
                put_str(&mut out, group);
            }
        }
        out
    }

    pub fn decode(mut buf: &[u8]) -> Result<Self, DecodeError> {
        let version = get_i16(&mut buf)?;
        match version {
            0 | 1 => {
                let group = get_str(&mut buf)?;
                let topic = get_str(&mut buf)?;
                let partition = get_i32(&mut buf)?;
                Ok(Key::Offset { group, topic, partition })
            }
            2 => Ok(Key::Group { group: get_str(&mut buf)? }),
            v => Err(DecodeError(format!("unknown key version {v}"))),
        }
    }
}

impl OffsetValue {
    /// Value v3, or v1 when there is an expiry (v3 has no field for it).
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::new();
        if self.expire_timestamp >= 0 {
            out.put_i16(1);
            out.put_i64(self.offset);
            put_str(&mut out, &self.metadata);
            out.put_i64(self.commit_timestamp);
            out.put_i64(self.expire_timestamp);
        } else {
            out.put_i16(3);
            out.put_i64(self.offset);
            out.put_i32(self.leader_epoch);
            put_str(&mut out, &self.metadata);
            out.put_i64(self.commit_timestamp);
        }
        out
    }

    pub fn decode(mut buf: &[u8]) -> Result<Self, DecodeError> {
        let version = get_i16(&mut buf)?;
        if !(0..=3).contains(&version) {
            return Err(DecodeError(format!("unknown offset value version {version}")));
        }
        let offset = get_i64(&mut buf)?;
        let leader_epoch = if version >= 3 { get_i32(&mut buf)? } else { -1 };
        let metadata = get_str(&mut buf)?;
        let commit_timestamp = get_i64(&mut buf)?;
        let expire_timestamp = if version == 1 { get_i64(&mut buf)? } else { -1 };
        Ok(Self { offset, leader_epoch, metadata, commit_timestamp, expire_timestamp })
    }
}

impl GroupValue {
    /// Value v3.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::new();
        out.put_i16(3);
        put_str(&mut out, &self.protocol_type);
        out.put_i32(self.generation);
        put_opt_str(&mut out, self.protocol.as_deref());
        put_opt_str(&mut out, self.leader.as_deref());
        out.put_i64(self.state_timestamp);
        out.put_i32(self.members.len() as i32);
        for m in &self.members {
            put_str(&mut out, &m.member_id);
            put_opt_str(&mut out, m.group_instance_id.as_deref());
            put_str(&mut out, &m.client_id);
            put_str(&mut out, &m.client_host);
            out.put_i32(m.rebalance_timeout_ms);
            out.put_i32(m.session_timeout_ms);
            put_bytes(&mut out, &m.subscription);
            put_bytes(&mut out, &m.assignment);
        }
        out
    }

    pub fn decode(mut buf: &[u8]) -> Result<Self, DecodeError> {
        let version = get_i16(&mut buf)?;
        if !(0..=3).contains(&version) {
            return Err(DecodeError(format!("unknown group value version {version}")));
        }
        let protocol_type = get_str(&mut buf)?;
        let generation = get_i32(&mut buf)?;
        let protocol = get_opt_str(&mut buf)?;
        let leader = get_opt_str(&mut buf)?;
        let state_timestamp = if version >= 2 { get_i64(&mut buf)? } else { -1 };
        let count = get_i32(&mut buf)?;
        if count < 0 || count as usize > buf.len() {
            return Err(DecodeError(format!("bad member count {count}")));
        }
        let mut members = Vec::with_capacity(count as usize);
        for _ in 0..count {
            let member_id = get_str(&mut buf)?;
            let group_instance_id = if version >= 3 { get_opt_str(&mut buf)? } else { None };
            let client_id = get_str(&mut buf)?;
            let client_host = get_str(&mut buf)?;
            let rebalance_timeout_ms = if version >= 1 { get_i32(&mut buf)? } else { -1 };
            let session_timeout_ms = get_i32(&mut buf)?;
            let subscription = get_bytes(&mut buf)?;
            let assignment = get_bytes(&mut buf)?;
            members.push(MemberValue {
                member_id,
                group_instance_id,
                client_id,
                client_host,
                rebalance_timeout_ms,
                session_timeout_ms,
                subscription,
                assignment,
            });
        }
        Ok(Self { protocol_type, generation, protocol, leader, state_timestamp, members })
    }
}

/// Java's `String.hashCode()` of the group id, over its UTF-16 code units,
/// as Kafka uses to place a group.
pub fn java_string_hashcode(s: &str) -> i32 {
    s.encode_utf16().fold(0i32, |h, unit| h.wrapping_mul(31).wrapping_add(i32::from(unit)))
}

/// The `__consumer_offsets` partition of a group: Kafka's
/// `Utils.abs(groupId.hashCode()) % partitions`, where `Utils.abs` maps
/// `i32::MIN` to 0.
pub fn partition_for(group: &str, partitions: i32) -> i32 {
    let h = java_string_hashcode(group);
    let abs = if h == i32::MIN { 0 } else { h.abs() };
    abs % partitions.max(1)
}

pub(crate) fn put_str(out: &mut Vec<u8>, s: &str) {
    out.put_i16(s.len() as i16);
    out.put_slice(s.as_bytes());
}

fn put_opt_str(out: &mut Vec<u8>, s: Option<&str>) {
    match s {
        Some(s) => put_str(out, s),
        None => out.put_i16(-1),
    }
}

fn put_bytes(out: &mut Vec<u8>, b: &[u8]) {
    out.put_i32(b.len() as i32);
    out.put_slice(b);
}

pub(crate) fn need(buf: &[u8], n: usize, what: &str) -> Result<(), DecodeError> {
    if buf.len() < n {
        return Err(DecodeError(format!("truncated {what}: need {n} bytes, have {}", buf.len())));
    }
    Ok(())
}

pub(crate) fn get_i16(buf: &mut &[u8]) -> Result<i16, DecodeError> {
    need(buf, 2, "int16")?;
    Ok(buf.get_i16())
}

pub(crate) fn get_i32(buf: &mut &[u8]) -> Result<i32, DecodeError> {
    need(buf, 4, "int32")?;
    Ok(buf.get_i32())
}

pub(crate) fn get_i64(buf: &mut &[u8]) -> Result<i64, DecodeError> {
    need(buf, 8, "int64")?;
    Ok(buf.get_i64())
}

pub(crate) fn get_opt_str(buf: &mut &[u8]) -> Result<Option<String>, DecodeError> {
    let len = get_i16(buf)?;
    if len < 0 {
        return Ok(None);
    }
    need(buf, len as usize, "string")?;
    let s = std::str::from_utf8(&buf[..len as usize]).map_err(|e| DecodeError(format!("string: {e}")))?.to_string();
    buf.advance(len as usize);
    Ok(Some(s))
}

pub(crate) fn get_str(buf: &mut &[u8]) -> Result<String, DecodeError> {
    get_opt_str(buf)?.ok_or_else(|| DecodeError("null where a string is required".into()))
}

fn get_bytes(buf: &mut &[u8]) -> Result<Vec<u8>, DecodeError> {
    let len = get_i32(buf)?;
    if len < 0 {
        return Ok(Vec::new());
    }
    need(buf, len as usize, "bytes")?;
    let b = buf[..len as usize].to_vec();
    buf.advance(len as usize);
    Ok(b)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn group_placement_matches_java() {
        // Values of "abc".hashCode() and friends as Java computes them.
        assert_eq!(java_string_hashcode(""), 0);
        assert_eq!(java_string_hashcode("abc"), 96354);
        assert_eq!(java_string_hashcode("polygenelubricants"), i32::MIN);
        assert_eq!(partition_for("polygenelubricants", 50), 0);
        // Non-ASCII goes by UTF-16 units: "é" is one unit, 0xE9.
        assert_eq!(java_string_hashcode("é"), 0xE9);
        assert_eq!(partition_for("abc", 50), 96354 % 50);
    }

    #[test]
    fn records_round_trip() {
        let keys =
            [Key::Offset { group: "g".into(), topic: "t".into(), partition: 7 }, Key::Group { group: "g".into() }];
        for k in keys {
            assert_eq!(Key::decode(&k.encode()).unwrap(), k);
        }
        for expire in [-1, 99] {
            let v = OffsetValue {
                offset: 42,
                leader_epoch: if expire < 0 { 3 } else { -1 },
                metadata: "meta".into(),
                commit_timestamp: 1234,
                expire_timestamp: expire,
            };
            assert_eq!(OffsetValue::decode(&v.encode()).unwrap(), v);
        }
        let g = GroupValue {
            protocol_type: "consumer".into(),
            generation: 5,
            protocol: Some("range".into()),
            leader: Some("m1".into()),
            state_timestamp: 77,
            members: vec![MemberValue {
                member_id: "m1".into(),
                group_instance_id: Some("i1".into()),
                client_id: "c".into(),
                client_host: "/127.0.0.1".into(),
                rebalance_timeout_ms: 300,
                session_timeout_ms: 100,
                subscription: vec![1, 2],
                assignment: vec![3],
            }],
        };
        assert_eq!(GroupValue::decode(&g.encode()).unwrap(), g);
        assert!(Key::decode(&[0, 9, 0, 0]).is_err());
        assert!(OffsetValue::decode(&[0, 3, 1]).is_err());
    }
}
