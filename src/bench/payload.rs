//! What the load generator puts in each record, and how it builds batches.
//!
//! Every value starts with a 28-byte stamp — a marker, the sender stream,
//! the record's sequence number within its (stream, partition) and its
//! intended send time in wall-clock nanoseconds — followed by
//! incompressible filler copied from a template made once. A consumer reads
//! the stamp back to measure end-to-end latency and to check that every
//! record arrived exactly once and in order.

use bytes::BufMut;

use crate::protocol::{
    record_batch::{crc32c, ATTR_TRANSACTIONAL, HEADER_BYTES, MAGIC_V2},
    varint::put_varlong,
};

use super::schedule::SplitMix;

/// Marks a value written by `shardlog bench`.
pub const MAGIC: u32 = 0x534c_4231; // "SLB1"
/// Bytes of the stamp at the start of every value.
pub const STAMP_BYTES: usize = 4 + 4 + 8 + 8 + 4;

/// The stamp at the start of a value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stamp {
    pub run: u32,
    pub stream: u32,
    pub seq: u64,
    /// Intended send time, nanoseconds since the Unix epoch.
    pub intended_ns: i64,
}

impl Stamp {
    pub fn write(&self, out: &mut [u8]) {
        out[0..4].copy_from_slice(&MAGIC.to_be_bytes());
        out[4..8].copy_from_slice(&self.run.to_be_bytes());
        out[8..16].copy_from_slice(&self.seq.to_be_bytes());
        out[16..24].copy_from_slice(&self.intended_ns.to_be_bytes());
        out[24..28].copy_from_slice(&self.stream.to_be_bytes());
    }

    /// The stamp of a value, if it carries one.
    pub fn read(value: &[u8]) -> Option<Self> {
        if value.len() < STAMP_BYTES || value[0..4] != MAGIC.to_be_bytes() {
            return None;
        }
        let be32 = |at: usize| u32::from_be_bytes(value[at..at + 4].try_into().expect("4 bytes"));
        let be64 = |at: usize| u64::from_be_bytes(value[at..at + 8].try_into().expect("8 bytes"));
        Some(Self { run: be32(4), seq: be64(8), intended_ns: be64(16) as i64, stream: be32(24) })
    }
}

/// One record waiting to be sent.
#[derive(Debug, Clone, Copy)]
pub struct Pending {
    pub intended: std::time::Instant,
    pub intended_ns: i64,
    pub seq: u64,
    pub key: Option<u64>,
}

/// Builds uncompressed v2 record batches from pending records, reusing one
/// value template: the per-record work is a stamp, a copy and two varints.
pub struct BatchBuilder {
    template: Vec<u8>,
    run: u32,
    stream: u32,
    /// A transactional producer's id and epoch (`None`: no producer id, as
    /// a plain non-idempotent producer sends).
    producer: Option<(i64, i16)>,
}

impl BatchBuilder {
    /// `record_size` is the value size; it must hold the stamp.
    pub fn new(record_size: usize, run: u32, stream: u32) -> Self {
        assert!(record_size >= STAMP_BYTES, "records must be at least {STAMP_BYTES} bytes");
        let mut rng = SplitMix::new(0x5eed ^ u64::from(stream));
        let template = (0..record_size).map(|_| rng.next_u64() as u8).collect();
        Self { template, run, stream, producer: None }
    }

    /// Batches built from now on belong to transactional producer
    /// `producer_id` at `epoch`: they carry its id, epoch and each batch's
    /// base sequence (its first record's stamp sequence, which counts the
    /// partition's records from 0 as the broker's sequence check does), and
    /// the transactional attribute.
    pub fn transactional(&mut self, producer_id: i64, epoch: i16) {
        self.producer = Some((producer_id, epoch));
    }

    /// The bytes one record takes in a batch (for sizing batches).
    pub fn record_bytes(&self, key: Option<u64>) -> usize {
        let key = key.map_or(0, |k| key_text(k).len());
        // length varint + attributes + deltas + key + value + headers, bounded.
        5 + 1 + 10 + 5 + 5 + key + 5 + self.template.len() + 1
    }

    /// Appends one batch holding `records` (in order) to `out`, stamped with
    /// create time `now_ms`.
    pub fn build(&mut self, records: &[Pending], now_ms: i64, out: &mut Vec<u8>) {
        assert!(!records.is_empty(), "a batch holds at least one record");
        let start = out.len();
        out.resize(start + HEADER_BYTES, 0);
        let value_len = self.template.len();
        let mut key_buf = Vec::new();
        for (delta, r) in records.iter().enumerate() {
            key_buf.clear();
            if let Some(k) = r.key {
                key_buf.extend_from_slice(key_text(k).as_bytes());
            }
            let mut head = [0u8; 32];
            let mut h = &mut head[..];
            h.put_u8(0); // attributes
            put_varlong(&mut h, 0); // timestamp delta: one create time per batch
            put_varlong(&mut h, delta as i64);
            if r.key.is_some() {
                put_varlong(&mut h, key_buf.len() as i64);
            } else {
                put_varlong(&mut h, -1);
            }
            let head_len = 32 - h.len();
            let mut value_head = [0u8; 10];
            let mut v = &mut value_head[..];
            put_varlong(&mut v, value_len as i64);
            let value_head_len = 10 - v.len();
            let body = head_len + key_buf.len() + value_head_len + value_len + 1;
            put_varlong(out, body as i64);
            out.extend_from_slice(&head[..head_len]);
            out.extend_from_slice(&key_buf);
            out.extend_from_slice(&value_head[..value_head_len]);
            let at = out.len();
            out.extend_from_slice(&self.template);
            Stamp { run: self.run, stream: self.stream, seq: r.seq, intended_ns: r.intended_ns }
                .write(&mut out[at..at + STAMP_BYTES]);
            out.push(0); // no headers
        }
        let batch = &mut out[start..];
        let count = records.len() as i32;
        let put = |b: &mut [u8], at: usize, v: &[u8]| b[at..at + v.len()].copy_from_slice(v);
        put(batch, 8, &((batch.len() - 12) as i32).to_be_bytes()); // batch length
        put(batch, 12, &(-1i32).to_be_bytes()); // partition leader epoch
        batch[16] = MAGIC_V2 as u8;
        put(batch, 23, &(count - 1).to_be_bytes()); // last offset delta
        put(batch, 27, &now_ms.to_be_bytes()); // base timestamp
        put(batch, 35, &now_ms.to_be_bytes()); // max timestamp
        let (producer_id, epoch, base_sequence) = match self.producer {
            Some((id, epoch)) => {
                put(batch, 21, &ATTR_TRANSACTIONAL.to_be_bytes()); // attributes
                (id, epoch, records[0].seq as i32)
            }
            None => (-1, -1, -1),
        };
        put(batch, 43, &producer_id.to_be_bytes());
        put(batch, 51, &epoch.to_be_bytes());
        put(batch, 53, &base_sequence.to_be_bytes());
        put(batch, 57, &count.to_be_bytes());
        let crc = crc32c(&batch[21..]);
        put(batch, 17, &crc.to_be_bytes());
    }
}

/// The key text of key number `k` (`--keys`).
pub fn key_text(k: u64) -> String {
    format!("key-{k}")
}

/// Kafka's default partitioner for keyed records: murmur2 of the key bytes,
/// made positive, modulo the partition count (as the Java client and
/// librdkafka's `murmur2_random` do).
pub fn partition_for_key(key: &[u8], partitions: i32) -> i32 {
    (murmur2(key) & 0x7fff_ffff) as i32 % partitions
}

/// Kafka's `Utils.murmur2`.
pub fn murmur2(data: &[u8]) -> u32 {
    const SEED: u32 = 0x9747_b28c;
    const M: u32 = 0x5bd1_e995;
    const R: u32 = 24;
    let len = data.len();
    let mut h = SEED ^ len as u32;
    let chunks = data.chunks_exact(4);
    let tail = chunks.remainder();
    for c in chunks {
        let mut k = u32::from_le_bytes([c[0], c[1], c[2], c[3]]);
        k = k.wrapping_mul(M);
        k ^= k >> R;
        k = k.wrapping_mul(M);
        h = h.wrapping_mul(M);
        h ^= k;
    }
    if tail.len() >= 3 {
        h ^= u32::from(tail[2]) << 16;
    }
    if tail.len() >= 2 {
        h ^= u32::from(tail[1]) << 8;
    }
    if !tail.is_empty() {
        h ^= u32::from(tail[0]);
        h = h.wrapping_mul(M);
    }
    h ^= h >> 13;
    h = h.wrapping_mul(M);
    h ^= h >> 15;
    h
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::record_batch::{check_produced_batch, read_records};

    #[test]
    fn built_batches_pass_the_brokers_own_checks_and_carry_their_stamps() {
        let mut b = BatchBuilder::new(100, 9, 3);
        let now = std::time::Instant::now();
        let records: Vec<Pending> = (0..5)
            .map(|i| Pending {
                intended: now,
                intended_ns: 1_000 + i,
                seq: 40 + i as u64,
                key: (i % 2 == 0).then_some(i as u64),
            })
            .collect();
        let mut out = vec![7u8; 3]; // appends after what is there
        b.build(&records, 1_800_000_000_000, &mut out);
        let batch = &out[3..];
        let header = check_produced_batch(batch, 1 << 20).expect("a valid batch");
        assert_eq!(header.records_count, 5);
        let read = read_records(batch).unwrap();
        for (i, r) in read.iter().enumerate() {
            assert_eq!(r.offset, i as i64);
            assert_eq!(r.value.unwrap().len(), 100);
            let s = Stamp::read(r.value.unwrap()).unwrap();
            assert_eq!(s, Stamp { run: 9, stream: 3, seq: 40 + i as u64, intended_ns: 1_000 + i as i64 });
            assert_eq!(r.key.map(|k| k.to_vec()), (i % 2 == 0).then(|| key_text(i as u64).into_bytes()));
        }
        assert!(batch.len() <= 61 + 5 * b.record_bytes(Some(4)));
    }

    #[test]
    fn murmur2_matches_kafkas_published_values() {
        // From Kafka's UtilsTest.testMurmur2.
        let cases: [(&[u8], i32); 4] = [
            (b"21", -973932308),
            (b"foobar", -790332482),
            (b"a-little-bit-long-string", -985981536),
            (b"a-little-bit-longer-string", -1486304829),
        ];
        for (key, want) in cases {
            assert_eq!(murmur2(key) as i32, want, "{}", String::from_utf8_lossy(key));
        }
    }
}
