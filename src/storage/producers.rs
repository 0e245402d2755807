//! Idempotent producers: per producer id, the epoch and the sequence ranges
//! of its last five batches in this partition, so a retried batch is
//! recognised and answered with its original offsets instead of being
//! written twice.
//!
//! Everything comes from batch headers (producer id, epoch, base sequence,
//! last offset delta): no record is read. The state is snapshotted to
//! `<offset>.snapshot` when the log writes its checkpoint (segment roll,
//! clean shutdown) and rebuilt on open from the newest snapshot plus the
//! batches after it, so a retry after a broker crash is still a duplicate.

use std::collections::{HashMap, VecDeque};

use crate::protocol::record_batch::BatchHeader;

/// Batches remembered per producer, as Kafka (and `max.in.flight` ≤ 5).
pub const BATCHES_KEPT: usize = 5;

const SNAPSHOT_HEADER: &str = "shardlog-producers v1";

/// `<log offset, 20 digits>.snapshot` beside the segments.
pub const SNAPSHOT_SUFFIX: &str = "snapshot";

/// Snapshot files in `dir`, by the offset they cover.
fn snapshots(dir: &std::path::Path) -> std::io::Result<Vec<(i64, std::path::PathBuf)>> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if let Some(offset) = name.strip_suffix(".snapshot").and_then(|s| s.parse().ok()) {
            out.push((offset, entry.path()));
        }
    }
    out.sort();
    Ok(out)
}

/// Removes snapshots older than the one at `keep`, and any beyond it.
pub fn remove_old_snapshots(dir: &std::path::Path, keep: i64) -> std::io::Result<()> {
    for (offset, path) in snapshots(dir)? {
        if offset != keep {
            std::fs::remove_file(path)?;
        }
    }
    Ok(())
}

/// The newest readable snapshot at or below `log_end`: a snapshot beyond
/// the log end (a crash cut the log back) describes batches that are gone.
pub fn load_newest_snapshot(dir: &std::path::Path, log_end: i64) -> Option<(i64, ProducerStates)> {
    let mut all = snapshots(dir).ok()?;
    all.retain(|(o, _)| *o <= log_end);
    all.iter().rev().find_map(|(_, path)| std::fs::read(path).ok().and_then(|b| ProducerStates::decode(&b)))
}

/// One remembered batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchRange {
    pub first_seq: i32,
    pub last_seq: i32,
    /// -1 until the batch is written (its offsets are assigned then).
    pub base_offset: i64,
    pub last_offset: i64,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProducerEntry {
    pub epoch: i16,
    pub batches: VecDeque<BatchRange>,
}

/// What to do with an idempotent batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sequenced {
    /// The next batch in sequence: append it.
    Append,
    /// Already written: answer with these offsets, write nothing.
    Duplicate { base_offset: i64, last_offset: i64 },
    /// Already queued but not yet written: the client should retry.
    InFlight,
}

/// Why an idempotent batch was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SequenceError {
    /// Not the next sequence number (OUT_OF_ORDER_SEQUENCE_NUMBER).
    OutOfOrder { producer_id: i64, expected: i32, got: i32 },
    /// An older epoch than this partition has seen (INVALID_PRODUCER_EPOCH).
    StaleEpoch { producer_id: i64, current: i16, got: i16 },
    /// No state for this producer and the batch does not start a sequence
    /// (UNKNOWN_PRODUCER_ID).
    UnknownProducer { producer_id: i64, got: i32 },
}

impl std::fmt::Display for SequenceError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::OutOfOrder { producer_id, expected, got } => {
                write!(f, "producer {producer_id}: sequence {got} out of order, expected {expected}")
            }
            Self::StaleEpoch { producer_id, current, got } => {
                write!(f, "producer {producer_id}: epoch {got} is older than the current {current}")
            }
            Self::UnknownProducer { producer_id, got } => {
                write!(f, "producer {producer_id}: unknown here, and sequence {got} does not start one")
            }
        }
    }
}

fn next_seq(seq: i32) -> i32 {
    if seq == i32::MAX {
        0
    } else {
        seq + 1
    }
}

fn last_seq(h: &BatchHeader) -> i32 {
    // Sequences wrap at i32::MAX, like Kafka's DefaultRecordBatch.incrementSequence.
    ((i64::from(h.base_sequence) + i64::from(h.last_offset_delta)) % (i64::from(i32::MAX) + 1)) as i32
}

/// Whether a batch carries idempotence fields.
pub fn is_idempotent(h: &BatchHeader) -> bool {
    h.producer_id >= 0 && h.base_sequence >= 0
}

/// The producers of one partition.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProducerStates {
    producers: HashMap<i64, ProducerEntry>,
}

impl ProducerStates {
    pub fn len(&self) -> usize {
        self.producers.len()
    }

    pub fn is_empty(&self) -> bool {
        self.producers.is_empty()
    }

    pub fn get(&self, producer_id: i64) -> Option<&ProducerEntry> {
        self.producers.get(&producer_id)
    }

    /// Checks an idempotent batch against what this partition has seen.
    pub fn check(&self, h: &BatchHeader) -> Result<Sequenced, SequenceError> {
        let pid = h.producer_id;
        let Some(e) = self.producers.get(&pid) else {
            return if h.base_sequence == 0 {
                Ok(Sequenced::Append)
            } else {
                Err(SequenceError::UnknownProducer { producer_id: pid, got: h.base_sequence })
            };
        };
        if h.producer_epoch < e.epoch {
            return Err(SequenceError::StaleEpoch { producer_id: pid, current: e.epoch, got: h.producer_epoch });
        }
        if h.producer_epoch > e.epoch || e.batches.is_empty() {
            // A new epoch starts its sequence again.
            return if h.base_sequence == 0 {
                Ok(Sequenced::Append)
            } else {
                Err(SequenceError::OutOfOrder { producer_id: pid, expected: 0, got: h.base_sequence })
            };
        }
        let last = last_seq(h);
        if let Some(b) = e.batches.iter().find(|b| b.first_seq == h.base_sequence && b.last_seq == last) {
            return Ok(if b.base_offset < 0 {
                Sequenced::InFlight
            } else {
                Sequenced::Duplicate { base_offset: b.base_offset, last_offset: b.last_offset }
            });
        }
        let expected = next_seq(e.batches.back().expect("not empty").last_seq);
        if h.base_sequence == expected {
            Ok(Sequenced::Append)
        } else {
            Err(SequenceError::OutOfOrder { producer_id: pid, expected, got: h.base_sequence })
        }
    }

    /// Remembers a batch accepted for appending; `base_offset` -1 while its
    /// offsets are not yet assigned.
    pub fn record(&mut self, h: &BatchHeader, base_offset: i64) {
        let e = self.producers.entry(h.producer_id).or_default();
        if h.producer_epoch > e.epoch {
            e.epoch = h.producer_epoch;
            e.batches.clear();
        }
        let range = BatchRange {
            first_seq: h.base_sequence,
            last_seq: last_seq(h),
            base_offset,
            last_offset: if base_offset < 0 { -1 } else { base_offset + i64::from(h.last_offset_delta) },
        };
        if let Some(b) = e.batches.iter_mut().find(|b| b.first_seq == range.first_seq && b.base_offset < 0) {
            *b = range;
            return;
        }
        e.batches.push_back(range);
        while e.batches.len() > BATCHES_KEPT {
            e.batches.pop_front();
        }
    }

    /// Forgets a batch whose write failed, so its retry is appended.
    pub fn forget(&mut self, h: &BatchHeader) {
        if let Some(e) = self.producers.get_mut(&h.producer_id) {
            e.batches.retain(|b| !(b.first_seq == h.base_sequence && b.base_offset < 0));
        }
    }

    /// Text snapshot: a header line with the log offset it covers, then one
    /// line per producer: `id epoch first:last:base:lastoff …`.
    pub fn encode(&self, offset: i64) -> Vec<u8> {
        let mut out = format!("{SNAPSHOT_HEADER} {offset}\n");
        let mut ids: Vec<&i64> = self.producers.keys().collect();
        ids.sort();
        for id in ids {
            let e = &self.producers[id];
            out.push_str(&format!("{id} {}", e.epoch));
            for b in e.batches.iter().filter(|b| b.base_offset >= 0) {
                out.push_str(&format!(" {}:{}:{}:{}", b.first_seq, b.last_seq, b.base_offset, b.last_offset));
            }
            out.push('\n');
        }
        out.into_bytes()
    }

    /// Reads a snapshot: the offset it covers and the states.
    pub fn decode(bytes: &[u8]) -> Option<(i64, Self)> {
        let text = std::str::from_utf8(bytes).ok()?;
        let mut lines = text.lines();
        let offset = lines.next()?.strip_prefix(SNAPSHOT_HEADER)?.trim().parse().ok()?;
        let mut states = Self::default();
        for line in lines {
            let mut fields = line.split(' ');
            let id: i64 = fields.next()?.parse().ok()?;
            let epoch: i16 = fields.next()?.parse().ok()?;
            let mut e = ProducerEntry { epoch, batches: VecDeque::new() };
            for f in fields {
                let v: Vec<i64> = f.split(':').map(str::parse).collect::<Result<_, _>>().ok()?;
                if v.len() != 4 {
                    return None;
                }
                e.batches.push_back(BatchRange {
                    first_seq: i32::try_from(v[0]).ok()?,
                    last_seq: i32::try_from(v[1]).ok()?,
                    base_offset: v[2],
                    last_offset: v[3],
                });
            }
            states.producers.insert(id, e);
        }
        Some((offset, states))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(pid: i64, epoch: i16, seq: i32, records: i32) -> BatchHeader {
        BatchHeader {
            base_offset: 0,
            batch_length: 0,
            leader_epoch: 0,
            magic: 2,
            crc: 0,
            attributes: 0,
            last_offset_delta: records - 1,
            base_timestamp: 0,
            max_timestamp: 0,
            producer_id: pid,
            producer_epoch: epoch,
            base_sequence: seq,
            records_count: records,
        }
    }

    #[test]
    fn sequences_duplicates_gaps_and_epochs() {
        let mut s = ProducerStates::default();
        let b0 = header(7, 0, 0, 3);
        assert_eq!(s.check(&b0), Ok(Sequenced::Append));
        s.record(&b0, -1);
        assert_eq!(s.check(&b0), Ok(Sequenced::InFlight), "a retry while the original is queued");
        s.record(&b0, 100);
        assert_eq!(s.check(&b0), Ok(Sequenced::Duplicate { base_offset: 100, last_offset: 102 }));
        let gap = header(7, 0, 5, 1);
        assert_eq!(s.check(&gap), Err(SequenceError::OutOfOrder { producer_id: 7, expected: 3, got: 5 }));
        for i in 0..6 {
            let b = header(7, 0, 3 + i, 1);
            assert_eq!(s.check(&b), Ok(Sequenced::Append));
            s.record(&b, 103 + i64::from(i));
        }
        assert!(matches!(s.check(&b0), Err(SequenceError::OutOfOrder { .. })), "only five batches are kept");
        assert_eq!(s.check(&header(7, 1, 0, 1)), Ok(Sequenced::Append), "a new epoch starts at 0");
        assert!(matches!(s.check(&header(7, 1, 4, 1)), Err(SequenceError::OutOfOrder { expected: 0, .. })));
        s.record(&header(7, 1, 0, 1), 200);
        assert_eq!(s.check(&header(7, 0, 9, 1)), Err(SequenceError::StaleEpoch { producer_id: 7, current: 1, got: 0 }));
        assert_eq!(s.check(&header(8, 0, 3, 1)), Err(SequenceError::UnknownProducer { producer_id: 8, got: 3 }));
        let failed = header(7, 1, 1, 2);
        s.record(&failed, -1);
        s.forget(&failed);
        assert_eq!(s.check(&failed), Ok(Sequenced::Append), "a failed write is appended on retry");
    }

    #[test]
    fn sequence_wraps_and_snapshot_round_trips() {
        let mut s = ProducerStates::default();
        let near_end = header(1, 2, i32::MAX - 1, 3); // i32::MAX - 1, i32::MAX, 0
        s.record(&near_end, 10);
        assert_eq!(s.check(&header(1, 2, 1, 1)), Ok(Sequenced::Append));
        s.record(&header(9, 0, 0, 4), 20);
        let bytes = s.encode(24);
        assert_eq!(ProducerStates::decode(&bytes), Some((24, s)));
        assert_eq!(ProducerStates::decode(b"garbage"), None);
    }
}
