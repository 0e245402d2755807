//! The aborted-transactions index: per segment, the transactions aborted by
//! a marker in that segment, which a read_committed fetch hands to the
//! client so it can drop their records (Kafka's `TransactionIndex`).
//!
//! In memory the entries are kept by the base of the segment that holds
//! their marker; on disk each segment's entries are `<base>.txnindex`
//! beside it, in Kafka's format (per entry: version i16 = 0, producer id
//! i64, first offset i64, last offset i64, last stable offset i64, all big
//! endian). A segment's file is written when it is sealed (roll, close), in
//! the seal's background work, never on the append path; recovery rebuilds
//! the active segment's entries beyond its file from the batches.

use std::{
    collections::BTreeMap,
    path::{Path, PathBuf},
};

use crate::storage::producers::AbortedTxn;

pub const TXN_INDEX_SUFFIX: &str = "txnindex";

/// Bytes per entry on disk.
const ENTRY_BYTES: usize = 2 + 8 * 4;

/// Kafka's entry version.
const ENTRY_VERSION: i16 = 0;

/// Encodes entries as a `.txnindex` file.
pub fn encode(entries: &[AbortedTxn]) -> Vec<u8> {
    let mut out = Vec::with_capacity(entries.len() * ENTRY_BYTES);
    for e in entries {
        out.extend_from_slice(&ENTRY_VERSION.to_be_bytes());
        for v in [e.producer_id, e.first_offset, e.last_offset, e.last_stable_offset] {
            out.extend_from_slice(&v.to_be_bytes());
        }
    }
    out
}

/// Decodes a `.txnindex` file; a torn last entry is left out, and an entry
/// of another version ends the file (nothing after it can be trusted).
pub fn decode(bytes: &[u8]) -> Vec<AbortedTxn> {
    let mut out = Vec::with_capacity(bytes.len() / ENTRY_BYTES);
    for e in bytes.chunks_exact(ENTRY_BYTES) {
        if i16::from_be_bytes([e[0], e[1]]) != ENTRY_VERSION {
            break;
        }
        let at = |i: usize| {
            let start = 2 + 8 * i;
            let mut v = [0u8; 8];
            v.copy_from_slice(&e[start..start + 8]);
            i64::from_be_bytes(v)
        };
        out.push(AbortedTxn { producer_id: at(0), first_offset: at(1), last_offset: at(2), last_stable_offset: at(3) });
    }
    out
}

/// `<base, 20 digits>.txnindex` in `dir`.
pub fn path(dir: &Path, base: i64) -> PathBuf {
    dir.join(format!("{base:020}.{TXN_INDEX_SUFFIX}"))
}

/// The aborted transactions of one partition, by segment.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AbortedIndex {
    /// Segment base → its entries, in marker (last offset) order.
    segments: BTreeMap<i64, Vec<AbortedTxn>>,
}

impl AbortedIndex {
    /// Loads every `.txnindex` in `dir`, keeping entries whose marker lies in
    /// `[log_start, log_end)` (a crash may have cut the log below a file's
    /// last entries). Unreadable files are logged and skipped: recovery
    /// rebuilds what the batches after the producer snapshot hold.
    pub fn load(dir: &Path, log_start: i64, log_end: i64, partition: &str) -> Self {
        let mut index = Self::default();
        let Ok(entries) = std::fs::read_dir(dir) else { return index };
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            let Some(base) = name.strip_suffix(".txnindex").and_then(|s| s.parse::<i64>().ok()) else { continue };
            match std::fs::read(entry.path()) {
                Ok(bytes) => {
                    let kept: Vec<AbortedTxn> = decode(&bytes)
                        .into_iter()
                        .filter(|e| e.last_offset >= log_start && e.last_offset < log_end)
                        .collect();
                    if !kept.is_empty() {
                        index.segments.insert(base, kept);
                    }
                }
                Err(e) => log::warn!("partition {partition}: reading {}: {e}", entry.path().display()),
            }
        }
        index
    }

    pub fn is_empty(&self) -> bool {
        self.segments.values().all(Vec::is_empty)
    }

    /// Adds the entry of an abort whose marker is in segment `base`, unless
    /// it is there already (recovery replays markers a file may hold).
    pub fn add(&mut self, base: i64, entry: AbortedTxn) {
        let list = self.segments.entry(base).or_default();
        if list.iter().any(|e| e.last_offset == entry.last_offset) {
            return;
        }
        let at = list.partition_point(|e| e.last_offset < entry.last_offset);
        list.insert(at, entry);
    }

    /// The entries of segment `base`.
    pub fn segment(&self, base: i64) -> &[AbortedTxn] {
        self.segments.get(&base).map_or(&[], Vec::as_slice)
    }

    /// Every entry, oldest marker first.
    pub fn all(&self) -> impl Iterator<Item = &AbortedTxn> {
        self.segments.values().flatten()
    }

    /// The aborted transactions that overlap `[from, upper)`: marker at or
    /// after `from`, first offset before `upper` (Kafka's
    /// `collectAbortedTransactions`). Stops at the first entry whose last
    /// stable offset is past `upper`: every transaction aborted after it
    /// started at or after that offset.
    pub fn overlapping(&self, from: i64, upper: i64) -> Vec<AbortedTxn> {
        let mut out = Vec::new();
        // The segment holding `from` may hold entries for it; earlier ones
        // hold only markers before it.
        let start = self.segments.range(..=from).next_back().map_or(i64::MIN, |(&b, _)| b);
        for list in self.segments.range(start..).map(|(_, l)| l) {
            for e in list.iter().filter(|e| e.last_offset >= from) {
                if e.first_offset < upper {
                    out.push(*e);
                }
                if e.last_stable_offset > upper {
                    return out;
                }
            }
        }
        out
    }

    /// Forgets the segments whose every entry ends before `log_start`,
    /// returning their bases (their files go too).
    pub fn drop_before(&mut self, log_start: i64) -> Vec<i64> {
        let gone: Vec<i64> = self
            .segments
            .iter()
            .filter(|(_, l)| l.iter().all(|e| e.last_offset < log_start))
            .map(|(&b, _)| b)
            .collect();
        for b in &gone {
            self.segments.remove(b);
        }
        gone
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn txn(pid: i64, first: i64, last: i64, lso: i64) -> AbortedTxn {
        AbortedTxn { producer_id: pid, first_offset: first, last_offset: last, last_stable_offset: lso }
    }

    #[test]
    fn entries_encode_as_kafka_lays_them_out() {
        let e = txn(7, 10, 20, 15);
        let bytes = encode(&[e]);
        // Laid out by hand from Kafka's AbortedTxn: version, pid, first, last, lso.
        let mut expected = vec![0u8, 0];
        for v in [7i64, 10, 20, 15] {
            expected.extend_from_slice(&v.to_be_bytes());
        }
        assert_eq!(bytes, expected);
        let mut torn = encode(&[e, txn(8, 21, 30, 31)]);
        torn.truncate(torn.len() - 3);
        assert_eq!(decode(&torn), vec![e], "a torn entry is left out");
    }

    #[test]
    fn overlapping_follows_kafka() {
        let mut index = AbortedIndex::default();
        index.add(0, txn(1, 2, 5, 3));
        index.add(0, txn(1, 2, 5, 3));
        index.add(100, txn(2, 3, 120, 121));
        index.add(100, txn(3, 130, 140, 141));
        assert_eq!(index.all().count(), 3, "a replayed entry is not added twice");
        assert_eq!(index.overlapping(0, 4), vec![txn(1, 2, 5, 3), txn(2, 3, 120, 121)]);
        assert_eq!(index.overlapping(6, 200), vec![txn(2, 3, 120, 121), txn(3, 130, 140, 141)]);
        assert_eq!(index.overlapping(141, 200), vec![]);
        assert_eq!(index.drop_before(100), vec![0]);
        assert_eq!(index.segment(0), &[]);
    }
}
