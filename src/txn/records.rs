//! The records of `__transaction_state`, in Kafka's own schemas
//! (`TransactionLogKey`, `TransactionLogValue`), so Kafka's tooling can read
//! our log and we can read theirs:
//!
//! - key v0: the transactional id;
//! - value v0: producer id, producer epoch, timeout, status, partitions
//!   (topic, partition ids), last update and start timestamps;
//! - value v1 is v0 made flexible (compact strings and arrays, tagged
//!   fields) with three tagged fields: previous producer id (tag 0), next
//!   producer id (tag 1) and client transaction version (tag 2).
//!
//! We write v0 (every Kafka since 0.11 reads it) and read v0 and v1.
//! A record with a null value is a tombstone: the transactional id expired.

use bytes::{Buf, BufMut};

use crate::groups::records::{get_i16, get_i32, get_i64, get_str, need, put_str, DecodeError};

use super::TxnState;

/// What `__transaction_state` keeps per transactional id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TxnValue {
    pub producer_id: i64,
    /// v1's tagged `PreviousProducerId`; -1 when absent (always, in v0).
    pub previous_producer_id: i64,
    pub producer_epoch: i16,
    pub timeout_ms: i32,
    pub state: TxnState,
    /// (topic, partition ids), topics in order.
    pub partitions: Vec<(String, Vec<i32>)>,
    pub last_update_ms: i64,
    pub start_ms: i64,
}

/// Key v0: version 0, then the transactional id.
pub fn encode_key(transactional_id: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(4 + transactional_id.len());
    out.put_i16(0);
    put_str(&mut out, transactional_id);
    out
}

pub fn decode_key(mut buf: &[u8]) -> Result<String, DecodeError> {
    match get_i16(&mut buf)? {
        0 => get_str(&mut buf),
        v => Err(DecodeError(format!("unknown transaction log key version {v}"))),
    }
}

impl TxnValue {
    /// Value v0.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::new();
        out.put_i16(0);
        out.put_i64(self.producer_id);
        out.put_i16(self.producer_epoch);
        out.put_i32(self.timeout_ms);
        out.put_i8(self.state.code());
        out.put_i32(self.partitions.len() as i32);
        for (topic, ids) in &self.partitions {
            put_str(&mut out, topic);
            out.put_i32(ids.len() as i32);
            for id in ids {
                out.put_i32(*id);
            }
        }
        out.put_i64(self.last_update_ms);
        out.put_i64(self.start_ms);
        out
    }

    pub fn decode(mut buf: &[u8]) -> Result<Self, DecodeError> {
        let version = get_i16(&mut buf)?;
        let flexible = match version {
            0 => false,
            1 => true,
            v => return Err(DecodeError(format!("unknown transaction log value version {v}"))),
        };
        let producer_id = get_i64(&mut buf)?;
        let producer_epoch = get_i16(&mut buf)?;
        let timeout_ms = get_i32(&mut buf)?;
        need(buf, 1, "status")?;
        let code = buf.get_i8();
        let state =
            TxnState::from_code(code).ok_or_else(|| DecodeError(format!("unknown transaction status {code}")))?;
        let count = get_len(&mut buf, flexible)?;
        let mut partitions = Vec::new();
        for _ in 0..count {
            let topic = if flexible { get_compact_str(&mut buf)? } else { get_str(&mut buf)? };
            let n = get_len(&mut buf, flexible)?;
            need(buf, n * 4, "partition ids")?;
            let ids = (0..n).map(|_| buf.get_i32()).collect();
            if flexible {
                skip_tagged(&mut buf, |_, _| Ok(()))?;
            }
            partitions.push((topic, ids));
        }
        let last_update_ms = get_i64(&mut buf)?;
        let start_ms = get_i64(&mut buf)?;
        let mut previous_producer_id = -1;
        if flexible {
            skip_tagged(&mut buf, |tag, mut body| {
                if tag == 0 {
                    previous_producer_id = get_i64(&mut body)?;
                }
                Ok(())
            })?;
        }
        Ok(Self {
            producer_id,
            previous_producer_id,
            producer_epoch,
            timeout_ms,
            state,
            partitions,
            last_update_ms,
            start_ms,
        })
    }
}

fn get_uvarint(buf: &mut &[u8]) -> Result<u64, DecodeError> {
    let mut value = 0u64;
    for shift in (0..35).step_by(7) {
        need(buf, 1, "varint")?;
        let b = buf.get_u8();
        value |= u64::from(b & 0x7f) << shift;
        if b & 0x80 == 0 {
            return Ok(value);
        }
    }
    Err(DecodeError("varint longer than 5 bytes".into()))
}

/// An array count: `i32` (a null array, -1, reads as empty), or in flexible
/// versions a varint count + 1. Bounded by the bytes left (each element
/// takes at least one), so a corrupt count cannot make us allocate.
fn get_len(buf: &mut &[u8], flexible: bool) -> Result<usize, DecodeError> {
    let n = if flexible {
        get_uvarint(buf)?.saturating_sub(1) as usize
    } else {
        usize::try_from(get_i32(buf)?).unwrap_or(0)
    };
    if n > buf.len() {
        return Err(DecodeError(format!("array of {n} entries in {} bytes", buf.len())));
    }
    Ok(n)
}

fn get_compact_str(buf: &mut &[u8]) -> Result<String, DecodeError> {
    let len = get_uvarint(buf)?;
    let len = usize::try_from(len.checked_sub(1).ok_or_else(|| DecodeError("null topic".into()))?)
        .map_err(|_| DecodeError("string length".into()))?;
    need(buf, len, "string")?;
    let s = std::str::from_utf8(&buf[..len]).map_err(|e| DecodeError(format!("string: {e}")))?.to_string();
    buf.advance(len);
    Ok(s)
}

/// Reads a tagged-field section, handing each field's bytes to `each`.
fn skip_tagged(
    buf: &mut &[u8],
    mut each: impl FnMut(u64, &[u8]) -> Result<(), DecodeError>,
) -> Result<(), DecodeError> {
    let count = get_uvarint(buf)?;
    for _ in 0..count {
        let tag = get_uvarint(buf)?;
        let size = usize::try_from(get_uvarint(buf)?).map_err(|_| DecodeError("tagged field size".into()))?;
        need(buf, size, "tagged field")?;
        each(tag, &buf[..size])?;
        buf.advance(size);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn value() -> TxnValue {
        TxnValue {
            producer_id: 4000,
            previous_producer_id: -1,
            producer_epoch: 3,
            timeout_ms: 60_000,
            state: TxnState::Ongoing,
            partitions: vec![("a".into(), vec![0, 2]), ("b".into(), vec![1])],
            last_update_ms: 1_700_000_000_123,
            start_ms: 1_700_000_000_000,
        }
    }

    #[test]
    fn key_and_value_v0_round_trip() {
        assert_eq!(decode_key(&encode_key("my-txn")).unwrap(), "my-txn");
        // Key v0 byte for byte: version 0, length 2, "id".
        assert_eq!(encode_key("id"), vec![0, 0, 0, 2, b'i', b'd']);
        let v = value();
        assert_eq!(TxnValue::decode(&v.encode()).unwrap(), v);
        assert!(decode_key(&[0, 1, 0, 0]).is_err());
        assert!(TxnValue::decode(&[0, 0, 1]).is_err());
    }

    #[test]
    fn value_v1_with_tagged_fields_is_read() {
        // Built by hand from Kafka's TransactionLogValue.json, version 1.
        let mut b = Vec::new();
        b.put_i16(1);
        b.put_i64(77);
        b.put_i16(5);
        b.put_i32(1000);
        b.put_i8(4); // CompleteCommit
        b.put_u8(2); // one partition entry
        b.put_u8(2); // "t"
        b.put_u8(b't');
        b.put_u8(3); // two ids
        b.put_i32(0);
        b.put_i32(9);
        b.put_u8(0); // entry's tagged fields
        b.put_i64(11);
        b.put_i64(10);
        b.put_u8(2); // two tagged fields
        b.put_u8(0); // PreviousProducerId
        b.put_u8(8);
        b.put_i64(76);
        b.put_u8(2); // ClientTransactionVersion
        b.put_u8(2);
        b.put_i16(0);
        let v = TxnValue::decode(&b).unwrap();
        assert_eq!((v.producer_id, v.previous_producer_id, v.producer_epoch), (77, 76, 5));
        assert_eq!(v.state, TxnState::CompleteCommit);
        assert_eq!(v.partitions, vec![("t".to_string(), vec![0, 9])]);
        assert_eq!((v.last_update_ms, v.start_ms), (11, 10));
    }
}
