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
//!
//! Transactions: each producer's open transaction in this partition is the
//! first offset of its first transactional batch after its last marker
//! (`txn_first`); the smallest of them is the last stable offset. A marker
//! ends it; an abort yields the entry for the aborted-transactions index.
//! A transaction whose commit the coordinator has durably decided, its
//! marker on the way, no longer holds read_committed readers back
//! ([`ProducerStates::decide_commit`]); it stays open, held in memory
//! only, until the marker is written.

use std::collections::{BTreeSet, HashMap, HashSet, VecDeque};

use crate::protocol::record_batch::{BatchHeader, ATTR_CONTROL, ATTR_TRANSACTIONAL};

/// Batches remembered per producer, as Kafka (and `max.in.flight` ≤ 5).
pub const BATCHES_KEPT: usize = 5;

/// v2 adds each producer's open transaction; v1 files are still read.
const SNAPSHOT_HEADER: &str = "shardlog-producers v2";
const SNAPSHOT_HEADER_V1: &str = "shardlog-producers v1";

/// `<log offset, 20 digits>.snapshot` beside the segments.
pub const SNAPSHOT_SUFFIX: &str = "snapshot";

/// Snapshot files in `dir`, by the offset they cover.
pub(crate) fn snapshots(dir: &std::path::Path) -> std::io::Result<Vec<(i64, std::path::PathBuf)>> {
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
    /// First offset of this producer's open transaction here, if any.
    pub txn_first: Option<i64>,
}

/// A transaction that ended here: what a marker completed. For an abort,
/// the entry of the aborted-transactions index (`storage::txn_index`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AbortedTxn {
    pub producer_id: i64,
    pub first_offset: i64,
    /// The marker's offset.
    pub last_offset: i64,
    /// The last stable offset once this transaction ended: no transaction
    /// still open then starts below it (lets a reader stop scanning).
    pub last_stable_offset: i64,
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

/// Whether a batch is transactional data (not a marker).
pub fn is_transactional_data(h: &BatchHeader) -> bool {
    h.attributes & ATTR_TRANSACTIONAL != 0 && h.attributes & ATTR_CONTROL == 0 && h.producer_id >= 0
}

/// The producers of one partition.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProducerStates {
    producers: HashMap<i64, ProducerEntry>,
    /// (first offset, producer id) of every open transaction: derived from
    /// `producers`, kept so the last stable offset is one lookup.
    open: BTreeSet<(i64, i64)>,
    /// Producers whose open transaction here is decided to commit, its
    /// marker not yet written. Never snapshotted: after a crash the
    /// coordinator, whose prepare record holds the decision, writes the
    /// marker again.
    decided: HashSet<i64>,
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

    /// The first offset of the oldest open transaction, if any: the last
    /// stable offset, or the log end when this is `None`.
    pub fn first_open_offset(&self) -> Option<i64> {
        self.open.first().map(|&(offset, _)| offset)
    }

    /// The first offset of the oldest open transaction not yet decided to
    /// commit: where read_committed readers stop (the last stable offset),
    /// or the log end when this is `None`.
    pub fn first_undecided_offset(&self) -> Option<i64> {
        self.open.iter().find(|(_, producer_id)| !self.decided.contains(producer_id)).map(|&(offset, _)| offset)
    }

    /// The coordinator has durably decided to commit this producer's open
    /// transaction and its marker is queued here: its records are
    /// committed, so readers need not wait for the marker's write. Returns
    /// whether an open transaction was decided (the last stable offset may
    /// have moved). A marker of an older epoch decides nothing.
    pub fn decide_commit(&mut self, producer_id: i64, epoch: i16) -> bool {
        match self.producers.get(&producer_id) {
            Some(e) if e.txn_first.is_some() && epoch >= e.epoch => self.decided.insert(producer_id),
            _ => false,
        }
    }

    /// Open transactions, as (first offset, producer id), oldest first.
    pub fn open_transactions(&self) -> impl Iterator<Item = (i64, i64)> + '_ {
        self.open.iter().copied()
    }

    /// Checks a marker's epoch: one older than the producer's current epoch
    /// here comes from a fenced coordinator round (INVALID_PRODUCER_EPOCH).
    pub fn check_marker(&self, producer_id: i64, epoch: i16) -> Result<(), SequenceError> {
        match self.producers.get(&producer_id) {
            Some(e) if epoch < e.epoch => Err(SequenceError::StaleEpoch { producer_id, current: e.epoch, got: epoch }),
            _ => Ok(()),
        }
    }

    /// A transactional data batch written at `base_offset`: opens the
    /// producer's transaction here unless one is open.
    fn open_txn(&mut self, producer_id: i64, base_offset: i64) {
        let e = self.producers.entry(producer_id).or_default();
        if e.txn_first.is_none() {
            e.txn_first = Some(base_offset);
            self.open.insert((base_offset, producer_id));
        }
    }

    /// A marker written at `offset` ends the producer's open transaction
    /// here. A marker without an open transaction is still a completed
    /// (empty) transaction, as in Kafka. Returns the aborted-index entry
    /// for an abort. A newer epoch is taken on, and starts its sequences
    /// again.
    pub fn end_txn(&mut self, producer_id: i64, epoch: i16, commit: bool, offset: i64) -> Option<AbortedTxn> {
        let e = self.producers.entry(producer_id).or_default();
        if epoch > e.epoch {
            e.epoch = epoch;
            e.batches.clear();
        }
        let first = e.txn_first.take();
        if let Some(first) = first {
            self.open.remove(&(first, producer_id));
        }
        self.decided.remove(&producer_id);
        if commit {
            return None;
        }
        Some(AbortedTxn {
            producer_id,
            first_offset: first.unwrap_or(offset),
            last_offset: offset,
            last_stable_offset: self.first_open_offset().unwrap_or(offset + 1),
        })
    }

    /// Remembers a batch accepted for appending; `base_offset` -1 while its
    /// offsets are not yet assigned. A written transactional batch opens
    /// its producer's transaction.
    pub fn record(&mut self, h: &BatchHeader, base_offset: i64) {
        if base_offset >= 0 && is_transactional_data(h) {
            self.open_txn(h.producer_id, base_offset);
        }
        if !is_idempotent(h) {
            return;
        }
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
    /// line per producer: `id epoch txn_first first:last:base:lastoff …`
    /// (`txn_first` -1: no open transaction; v1 lines lack it).
    pub fn encode(&self, offset: i64) -> Vec<u8> {
        let mut out = format!("{SNAPSHOT_HEADER} {offset}\n");
        let mut ids: Vec<&i64> = self.producers.keys().collect();
        ids.sort();
        for id in ids {
            let e = &self.producers[id];
            out.push_str(&format!("{id} {} {}", e.epoch, e.txn_first.unwrap_or(-1)));
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
        let first = lines.next()?;
        let (v2, rest) = match first.strip_prefix(SNAPSHOT_HEADER) {
            Some(rest) => (true, rest),
            None => (false, first.strip_prefix(SNAPSHOT_HEADER_V1)?),
        };
        let offset = rest.trim().parse().ok()?;
        let mut states = Self::default();
        for line in lines {
            let mut fields = line.split(' ');
            let id: i64 = fields.next()?.parse().ok()?;
            let epoch: i16 = fields.next()?.parse().ok()?;
            let txn_first = if v2 { Some(fields.next()?.parse::<i64>().ok()?).filter(|&o| o >= 0) } else { None };
            if let Some(first) = txn_first {
                states.open.insert((first, id));
            }
            let mut e = ProducerEntry { epoch, batches: VecDeque::new(), txn_first };
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

    fn txn_header(pid: i64, epoch: i16, seq: i32, records: i32, base_offset: i64) -> BatchHeader {
        BatchHeader { attributes: ATTR_TRANSACTIONAL, base_offset, ..header(pid, epoch, seq, records) }
    }

    #[test]
    fn two_interleaved_transactions_hold_the_stable_offset() {
        let mut s = ProducerStates::default();
        assert_eq!(s.first_open_offset(), None);
        s.record(&txn_header(1, 0, 0, 2, 10), 10); // producer 1 opens at 10
        s.record(&txn_header(2, 0, 0, 1, 12), 12); // producer 2 opens at 12
        s.record(&txn_header(1, 0, 2, 1, 13), 13); // still producer 1's first at 10
        assert_eq!(s.first_open_offset(), Some(10));
        assert_eq!(s.get(1).and_then(|e| e.txn_first), Some(10));
        // Producer 1 commits at 14: producer 2's transaction now holds the LSO.
        assert_eq!(s.end_txn(1, 0, true, 14), None);
        assert_eq!(s.first_open_offset(), Some(12));
        // A new transaction of producer 1 opens behind it.
        s.record(&txn_header(1, 0, 3, 1, 15), 15);
        assert_eq!(s.first_open_offset(), Some(12));
        // Producer 2 aborts at 16: the entry's LSO is producer 1's open one.
        let aborted = s.end_txn(2, 0, false, 16);
        assert_eq!(
            aborted,
            Some(AbortedTxn { producer_id: 2, first_offset: 12, last_offset: 16, last_stable_offset: 15 })
        );
        assert_eq!(s.first_open_offset(), Some(15));
        let aborted = s.end_txn(1, 0, false, 17);
        assert_eq!(
            aborted,
            Some(AbortedTxn { producer_id: 1, first_offset: 15, last_offset: 17, last_stable_offset: 18 }),
            "none open: the LSO is past the marker"
        );
        assert_eq!(s.first_open_offset(), None);
        // A marker without a transaction is a completed empty one.
        let empty = s.end_txn(9, 0, false, 18);
        assert_eq!(empty.map(|a| (a.first_offset, a.last_offset)), Some((18, 18)));
        // Markers from an older epoch are refused; a newer one restarts sequences.
        assert_eq!(s.end_txn(1, 3, true, 19), None);
        assert_eq!(s.check_marker(1, 2), Err(SequenceError::StaleEpoch { producer_id: 1, current: 3, got: 2 }));
        assert_eq!(s.check(&txn_header(1, 3, 0, 1, 20)), Ok(Sequenced::Append));
    }

    #[test]
    fn a_decided_commit_stops_holding_readers_until_its_marker_ends_it() {
        let mut s = ProducerStates::default();
        s.record(&txn_header(1, 2, 0, 2, 10), 10);
        s.record(&txn_header(2, 0, 0, 1, 12), 12);
        assert!(!s.decide_commit(1, 1), "an older epoch decides nothing");
        assert!(!s.decide_commit(3, 0), "no open transaction, nothing to decide");
        assert_eq!(s.first_undecided_offset(), Some(10));
        assert!(s.decide_commit(1, 2));
        assert_eq!(s.first_undecided_offset(), Some(12), "producer 2 now holds readers");
        assert_eq!(s.first_open_offset(), Some(10), "still open until its marker");
        let snapshot = ProducerStates::decode(&s.encode(13)).expect("decodes").1;
        assert_eq!(snapshot.first_undecided_offset(), Some(10), "a decision is not snapshotted");
        assert!(s.decide_commit(2, 0));
        assert_eq!(s.first_undecided_offset(), None);
        assert_eq!(s.end_txn(1, 2, true, 13), None);
        // Producer 1's next transaction is undecided again.
        s.record(&txn_header(1, 2, 2, 1, 14), 14);
        assert_eq!(s.first_undecided_offset(), Some(14));
        assert_eq!(s.first_open_offset(), Some(12));
    }

    #[test]
    fn snapshot_v2_keeps_open_transactions_and_v1_still_reads() {
        let mut s = ProducerStates::default();
        s.record(&txn_header(5, 1, 0, 3, 40), 40);
        s.record(&header(6, 0, 0, 2), 43);
        let bytes = s.encode(45);
        let text = String::from_utf8(bytes.clone()).unwrap();
        assert_eq!(text, "shardlog-producers v2 45\n5 1 40 0:2:40:42\n6 0 -1 0:1:43:44\n");
        let (offset, back) = ProducerStates::decode(&bytes).expect("v2 decodes");
        assert_eq!((offset, back.first_open_offset()), (45, Some(40)));
        assert_eq!(back, s);
        // A v1 file, as an older broker wrote it: no open transactions.
        let v1 = b"shardlog-producers v1 30\n7 2 0:4:20:24 5:5:25:25\n";
        let (offset, old) = ProducerStates::decode(v1).expect("v1 decodes");
        assert_eq!(offset, 30);
        assert_eq!(old.first_open_offset(), None);
        let e = old.get(7).expect("producer 7");
        assert_eq!((e.epoch, e.batches.len(), e.txn_first), (2, 2, None));
        assert_eq!(old.check(&header(7, 2, 6, 1)), Ok(Sequenced::Append));
    }
}
