//! The hot path's wire format, by hand: the Produce request is located in
//! place (so its record batches are patched and kept with no further copy),
//! and the Produce and Fetch responses are written directly. The protocol
//! crate would copy the records and allocate per field. Each codec is
//! checked against the crate in the tests below.

use std::ops::Range;

use bytes::{BufMut, Bytes, BytesMut};

use crate::protocol::varint::put_uvarint;

/// Reads big-endian fields from a request, never past its end.
pub struct Cursor<'a> {
    buf: &'a [u8],
    pub pos: usize,
}

impl<'a> Cursor<'a> {
    pub fn new(buf: &'a [u8], pos: usize) -> Self {
        Self { buf, pos }
    }

    fn take(&mut self, n: usize) -> Result<Range<usize>, String> {
        let end = self.pos.checked_add(n).filter(|&e| e <= self.buf.len());
        let end = end.ok_or_else(|| format!("request truncated at byte {} (wanted {n} more)", self.pos))?;
        let range = self.pos..end;
        self.pos = end;
        Ok(range)
    }

    pub fn i16(&mut self) -> Result<i16, String> {
        let r = self.take(2)?;
        Ok(i16::from_be_bytes([self.buf[r.start], self.buf[r.start + 1]]))
    }

    pub fn i32(&mut self) -> Result<i32, String> {
        let r = self.take(4)?;
        Ok(i32::from_be_bytes(self.buf[r].try_into().expect("4 bytes")))
    }

    pub fn uvarint(&mut self) -> Result<u64, String> {
        let mut value = 0u64;
        for shift in (0..64).step_by(7) {
            let b = self.buf[self.take(1)?.start];
            value |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err(format!("varint too long at byte {}", self.pos))
    }

    /// A length: i16/i32 in classic versions, unsigned varint + 1 in
    /// flexible ones. `None` for null.
    fn len(&mut self, flexible: bool, wide: bool) -> Result<Option<usize>, String> {
        let n: i64 = match (flexible, wide) {
            (true, _) => self.uvarint()? as i64 - 1,
            (false, true) => i64::from(self.i32()?),
            (false, false) => i64::from(self.i16()?),
        };
        Ok(usize::try_from(n).ok())
    }

    /// A (nullable) string or bytes field: its byte range.
    pub fn bytes(&mut self, flexible: bool, wide: bool) -> Result<Option<Range<usize>>, String> {
        match self.len(flexible, wide)? {
            Some(n) => self.take(n).map(Some),
            None => Ok(None),
        }
    }

    /// An array's element count.
    pub fn count(&mut self, flexible: bool) -> Result<usize, String> {
        Ok(self.len(flexible, true)?.unwrap_or(0))
    }

    /// Skips a flexible version's tagged fields.
    pub fn tagged_fields(&mut self) -> Result<(), String> {
        for _ in 0..self.uvarint()? {
            self.uvarint()?;
            let size = self.uvarint()? as usize;
            self.take(size)?;
        }
        Ok(())
    }
}

/// Skips the request header (v1, or v2 with tagged fields) after the api
/// key, version and correlation id; returns where the body starts.
pub fn skip_header(frame: &[u8], flexible_header: bool) -> Result<usize, String> {
    let mut c = Cursor::new(frame, 8);
    c.bytes(false, false)?; // client_id: a classic nullable string even in v2
    if flexible_header {
        c.tagged_fields()?;
    }
    Ok(c.pos)
}

/// A Produce request, located in its frame: byte ranges, nothing copied.
pub struct ProduceRequest {
    pub acks: i16,
    pub topics: Vec<ProduceTopic>,
}

pub struct ProduceTopic {
    pub name: Range<usize>,
    /// (partition index, its records), in request order.
    pub partitions: Vec<(i32, Option<Range<usize>>)>,
}

/// Produce v3–v9 (v9 is flexible). `body` is where the header ended.
pub fn parse_produce(frame: &[u8], body: usize, version: i16) -> Result<ProduceRequest, String> {
    let flexible = version >= 9;
    let mut c = Cursor::new(frame, body);
    let _transactional_id = c.bytes(flexible, false)?;
    let acks = c.i16()?;
    let _timeout_ms = c.i32()?;
    let n = c.count(flexible)?;
    let mut topics = Vec::with_capacity(n.min(64));
    for _ in 0..n {
        let name = c.bytes(flexible, false)?.ok_or("Produce with a null topic name")?;
        let m = c.count(flexible)?;
        let mut partitions = Vec::with_capacity(m.min(1024));
        for _ in 0..m {
            let index = c.i32()?;
            let records = c.bytes(flexible, true)?;
            if flexible {
                c.tagged_fields()?;
            }
            partitions.push((index, records));
        }
        if flexible {
            c.tagged_fields()?;
        }
        topics.push(ProduceTopic { name, partitions });
    }
    Ok(ProduceRequest { acks, topics })
}

/// One partition's answer to a Produce request.
pub struct ProducedPartition {
    pub index: i32,
    pub error: i16,
    pub base_offset: i64,
    pub log_start: i64,
}

/// Size prefix and response header; the size is patched by `finish`.
pub fn response_start(correlation_id: i32, flexible_header: bool, capacity: usize) -> BytesMut {
    let mut out = BytesMut::with_capacity(capacity);
    out.put_i32(0);
    out.put_i32(correlation_id);
    if flexible_header {
        out.put_u8(0); // no tagged fields
    }
    out
}

/// Patches the size prefix of a response that is `extra` bytes longer than
/// `head` (chunks that follow it).
pub fn finish(head: &mut BytesMut, extra: usize) {
    let size = (head.len() - 4 + extra) as i32;
    head[..4].copy_from_slice(&size.to_be_bytes());
}

/// Produce response v3–v9: per topic (name from the request) its partitions.
pub fn produce_response(
    correlation_id: i32,
    version: i16,
    frame: &[u8],
    topics: &[(Range<usize>, Vec<ProducedPartition>)],
) -> Bytes {
    let flexible = version >= 9;
    let mut out = response_start(correlation_id, flexible, 64 + topics.len() * 64);
    put_len(&mut out, topics.len(), flexible);
    for (name, partitions) in topics {
        put_bytes(&mut out, &frame[name.clone()], flexible);
        put_len(&mut out, partitions.len(), flexible);
        for p in partitions {
            out.put_i32(p.index);
            out.put_i16(p.error);
            out.put_i64(p.base_offset);
            out.put_i64(-1); // log_append_time_ms: CreateTime topics
            if version >= 5 {
                out.put_i64(p.log_start);
            }
            if version >= 8 {
                put_len(&mut out, 0, flexible); // record_errors
                put_null_string(&mut out, flexible); // error_message
            }
            if flexible {
                out.put_u8(0);
            }
        }
        if flexible {
            out.put_u8(0);
        }
    }
    out.put_i32(0); // throttle_time_ms
    if flexible {
        out.put_u8(0);
    }
    finish(&mut out, 0);
    out.freeze()
}

/// One partition of a Fetch response, in request order.
pub struct FetchedPartition {
    pub index: i32,
    pub error: i16,
    pub high_watermark: i64,
    pub last_stable: i64,
    pub log_start: i64,
    /// Aborted transactions a read_committed reader must drop, as
    /// (producer id, first offset).
    pub aborted: Vec<(i64, i64)>,
    /// The stored batches themselves, to be written as they are.
    pub records: Vec<Bytes>,
}

/// Fetch response v4–v12 as chunks: encoded fields interleaved with the
/// stored batches, which are passed on, not copied. The size prefix is a
/// chunk of its own, written once the rest is known.
pub fn fetch_response(correlation_id: i32, version: i16, topics: &[(Bytes, Vec<FetchedPartition>)]) -> Vec<Bytes> {
    let flexible = version >= 12;
    let mut chunks = vec![Bytes::new()];
    let mut cur = BytesMut::with_capacity(256);
    cur.put_i32(correlation_id);
    if flexible {
        cur.put_u8(0); // response header: no tagged fields
    }
    cur.put_i32(0); // throttle_time_ms
    if version >= 7 {
        cur.put_i16(0); // error_code
        cur.put_i32(0); // session_id: no fetch sessions
    }
    put_len(&mut cur, topics.len(), flexible);
    for (name, partitions) in topics {
        put_bytes(&mut cur, name, flexible);
        put_len(&mut cur, partitions.len(), flexible);
        for p in partitions {
            cur.put_i32(p.index);
            cur.put_i16(p.error);
            cur.put_i64(p.high_watermark);
            cur.put_i64(p.last_stable);
            if version >= 5 {
                cur.put_i64(p.log_start);
            }
            put_len(&mut cur, p.aborted.len(), flexible);
            for &(producer_id, first_offset) in &p.aborted {
                cur.put_i64(producer_id);
                cur.put_i64(first_offset);
                if flexible {
                    cur.put_u8(0);
                }
            }
            if version >= 11 {
                cur.put_i32(-1); // preferred_read_replica
            }
            let len: usize = p.records.iter().map(Bytes::len).sum();
            if flexible {
                put_uvarint(&mut cur, len as u64 + 1);
            } else {
                cur.put_i32(len as i32);
            }
            if !p.records.is_empty() {
                chunks.push(std::mem::take(&mut cur).freeze());
                chunks.extend(p.records.iter().cloned());
            }
            if flexible {
                cur.put_u8(0);
            }
        }
        if flexible {
            cur.put_u8(0);
        }
    }
    if flexible {
        cur.put_u8(0);
    }
    chunks.push(cur.freeze());
    let size: usize = chunks.iter().map(Bytes::len).sum();
    chunks[0] = Bytes::copy_from_slice(&(size as i32).to_be_bytes());
    chunks.retain(|c| !c.is_empty());
    chunks
}

fn put_len(out: &mut BytesMut, n: usize, flexible: bool) {
    if flexible {
        put_uvarint(out, n as u64 + 1);
    } else {
        out.put_i32(n as i32);
    }
}

fn put_bytes(out: &mut BytesMut, s: &[u8], flexible: bool) {
    if flexible {
        put_uvarint(out, s.len() as u64 + 1);
    } else {
        out.put_i16(s.len() as i16);
    }
    out.put_slice(s);
}

fn put_null_string(out: &mut BytesMut, flexible: bool) {
    if flexible {
        out.put_u8(0);
    } else {
        out.put_i16(-1);
    }
}
