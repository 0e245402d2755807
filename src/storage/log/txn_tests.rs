//! Transactions in one partition's log: open transactions and the LSO,
//! aborted-index entries and their `.txnindex` files, and all of it again
//! after a reopen without `close` (an unclean stop).

use std::{path::Path, rc::Rc};

use bytes::BytesMut;

use super::{Durability, PartitionLog};
use crate::{
    protocol::record_batch::{self, Record, TxnMarker},
    storage::{
        producers::AbortedTxn,
        testing::{make_transactional, open_log, run, tempdir},
        LogConfig,
    },
};

/// A transactional batch of `n` records.
fn txn_batch(producer_id: i64, epoch: i16, base_sequence: i32, n: usize) -> BytesMut {
    let values: Vec<Vec<u8>> =
        (0..n).map(|i| format!("p{producer_id}-{}", base_sequence as usize + i).into_bytes()).collect();
    let records: Vec<Record<'_>> =
        values.iter().map(|v| Record { key: Some(b"k"), value: Some(v), timestamp_delta: 0 }).collect();
    let mut b = record_batch::encode_batch(&records, 1_790_000_000_000);
    make_transactional(&mut b, producer_id, epoch, base_sequence);
    BytesMut::from(&b[..])
}

fn marker(producer_id: i64, commit: bool) -> TxnMarker {
    TxnMarker { producer_id, producer_epoch: 0, commit, coordinator_epoch: 3 }
}

async fn open(dir: &Path, config: &LogConfig) -> Rc<PartitionLog> {
    open_log(dir, "txn-test-0", config).await
}

#[test]
fn lso_aborted_index_and_an_unclean_reopen() {
    run(|| async {
        let dir = tempdir();
        let config = LogConfig::default();
        let log = open(dir.path(), &config).await;
        let (a, b) = (41, 42);
        // a: 0..=1, b: 2, a: 3; then a aborts (marker 4), b stays open.
        assert_eq!(log.append(txn_batch(a, 0, 0, 2), Durability::Synced).await.unwrap().base_offset, 0);
        assert_eq!(log.append(txn_batch(b, 0, 0, 1), Durability::Synced).await.unwrap().base_offset, 2);
        assert_eq!(log.append(txn_batch(a, 0, 2, 1), Durability::Synced).await.unwrap().base_offset, 3);
        assert_eq!(log.last_stable_offset(), 0);
        assert_eq!(log.append_marker(marker(a, false), 0, Durability::Synced).await.unwrap().base_offset, 4);
        assert_eq!(log.last_stable_offset(), 2, "b's transaction now holds the LSO");
        let abort_a = AbortedTxn { producer_id: a, first_offset: 0, last_offset: 4, last_stable_offset: 2 };
        assert_eq!(log.aborted_index(), vec![abort_a]);
        // A read_committed read stops below the LSO, on a batch boundary.
        let below = log.read_below(0, 1 << 20, log.last_stable_offset()).await.unwrap();
        assert_eq!(record_batch::BatchHeader::parse(&below.to_vec(), usize::MAX).unwrap().last_offset(), 1);
        assert_eq!(below.to_vec().len(), log.read(0, 1 << 20).await.unwrap().chunks[0].len());
        assert!(log.read_below(2, 1 << 20, 2).await.unwrap().is_empty());
        assert_eq!(log.aborted_transactions(0, 2), vec![abort_a]);
        // A stale epoch's marker is refused and writes nothing.
        let end = log.log_end();
        let stale = TxnMarker { producer_epoch: -1, ..marker(b, true) };
        assert!(log.append_marker(stale, 0, Durability::Synced).await.is_err());
        assert_eq!(log.log_end(), end);
        // b writes more, then the broker stops without close.
        assert_eq!(log.append(txn_batch(b, 0, 1, 2), Durability::Synced).await.unwrap().base_offset, 5);
        drop(log);
        let log = open(dir.path(), &config).await;
        assert_eq!(log.log_end(), 7);
        assert_eq!(log.open_transactions(), vec![(2, b)], "b's transaction is open again");
        assert_eq!(log.last_stable_offset(), 2);
        assert_eq!(log.aborted_index(), vec![abort_a], "rebuilt from the batches");
        // b commits: nothing is open, the LSO is the log end.
        assert_eq!(log.append_marker(marker(b, true), 0, Durability::Synced).await.unwrap().base_offset, 7);
        assert_eq!(log.last_stable_offset(), 8);
        assert_eq!(log.aborted_index(), vec![abort_a], "a commit adds no entry");
        // The sequence continues after the reopen.
        assert_eq!(log.append(txn_batch(b, 0, 3, 1), Durability::Synced).await.unwrap().base_offset, 8);
        assert_eq!(log.last_stable_offset(), 8, "a new transaction of b");
        log.close().await.unwrap();
    });
}

#[test]
fn a_sealed_segment_keeps_its_aborts_in_a_txnindex_file() {
    run(|| async {
        let dir = tempdir();
        // Small segments: each marker soon lands in a segment that seals.
        let config = LogConfig { segment_bytes: 4096, ..LogConfig::default() };
        let log = open(dir.path(), &config).await;
        let mut expected = Vec::new();
        for round in 0..12i32 {
            let pid = 100 + i64::from(round);
            let first = log.append(txn_batch(pid, 0, 0, 40), Durability::Synced).await.unwrap().base_offset;
            let commit = round % 3 == 0;
            let at = log.append_marker(marker(pid, commit), 0, Durability::Synced).await.unwrap().base_offset;
            if !commit {
                expected.push(AbortedTxn {
                    producer_id: pid,
                    first_offset: first,
                    last_offset: at,
                    last_stable_offset: at + 1,
                });
            }
        }
        assert!(log.segment_count() > 2, "rolled into {} segments", log.segment_count());
        assert_eq!(log.aborted_index(), expected);
        log.settle().await;
        // Every sealed segment with an abort has its file, in Kafka's layout.
        let mut on_disk = Vec::new();
        let sealed: Vec<i64> = log.segments().iter().map(|(b, _)| *b).rev().skip(1).collect();
        for base in sealed.into_iter().rev() {
            let path = dir.path().join(format!("{base:020}.txnindex"));
            if let Ok(bytes) = std::fs::read(&path) {
                assert_eq!(bytes.len() % 34, 0, "{}: whole 34-byte entries", path.display());
                for e in bytes.chunks(34) {
                    assert_eq!(&e[..2], &[0, 0], "entry version 0");
                    let at = |i: usize| i64::from_be_bytes(e[2 + 8 * i..10 + 8 * i].try_into().unwrap());
                    on_disk.push(AbortedTxn {
                        producer_id: at(0),
                        first_offset: at(1),
                        last_offset: at(2),
                        last_stable_offset: at(3),
                    });
                }
            }
        }
        assert!(!on_disk.is_empty());
        assert_eq!(on_disk[..], expected[..on_disk.len()], "the files hold the oldest aborts, in order");
        log.close().await.unwrap();
        drop(log);
        // After a close the producer snapshot is at the log end, so no batch
        // is replayed: the aborts come back from the files alone (the
        // active segment's too, written as close sealed it).
        let snapshots = std::fs::read_dir(dir.path())
            .unwrap()
            .filter(|e| e.as_ref().unwrap().file_name().to_string_lossy().ends_with(".snapshot"))
            .count();
        assert_eq!(snapshots, 1);
        let log = open(dir.path(), &config).await;
        assert_eq!(log.aborted_index(), expected);
        assert_eq!(log.last_stable_offset(), log.log_end());
        log.close().await.unwrap();
    });
}

/// A batch of keyed records: transactional (attribute 0x10, producer id,
/// sequence) when `producer` is given, else a plain one.
fn keyed_batch(producer: Option<(i64, i32)>, records: &[(&str, &str)]) -> BytesMut {
    let records: Vec<Record<'_>> = records
        .iter()
        .map(|(k, v)| Record { key: Some(k.as_bytes()), value: Some(v.as_bytes()), timestamp_delta: 0 })
        .collect();
    let mut b = record_batch::encode_batch(&records, 1_790_000_000_000);
    if let Some((producer_id, base_sequence)) = producer {
        make_transactional(&mut b, producer_id, 0, base_sequence);
    }
    BytesMut::from(&b[..])
}

/// Every (offset, key, value, control) left in the log, read back.
async fn contents(log: &PartitionLog) -> Vec<(i64, String, String, bool)> {
    let mut out = Vec::new();
    let mut offset = log.log_start();
    while offset < log.log_end() {
        let bytes = log.read(offset, 1 << 20).await.unwrap().to_vec();
        let mut at = 0;
        while at < bytes.len() {
            let h = record_batch::BatchHeader::parse(&bytes[at..], usize::MAX).unwrap();
            let batch = &bytes[at..at + h.total_bytes()];
            let control = h.attributes & record_batch::ATTR_CONTROL != 0;
            for r in record_batch::read_records(batch).unwrap() {
                let text = |b: Option<&[u8]>| String::from_utf8_lossy(b.unwrap_or_default()).into_owned();
                out.push((r.offset, text(r.key), text(r.value), control));
            }
            offset = h.last_offset() + 1;
            at += h.total_bytes();
        }
    }
    out
}

#[test]
fn compaction_never_lets_an_aborted_record_shadow_a_committed_one() {
    run(|| async {
        let dir = tempdir();
        let config = LogConfig { compacted: true, segment_bytes: 4096, ..LogConfig::default() };
        let log = open(dir.path(), &config).await;
        let w = Durability::Synced;
        log.append(keyed_batch(None, &[("k", "committed"), ("other", "old")]), w).await.unwrap(); // 0, 1
        log.append(keyed_batch(Some((7, 0)), &[("k", "aborted"), ("other", "aborted")]), w).await.unwrap(); // 2, 3
        log.append_marker(marker(7, false), 0, Durability::Synced).await.unwrap(); // 4
        log.append(keyed_batch(Some((8, 0)), &[("other", "new")]), w).await.unwrap(); // 5
        log.append_marker(marker(8, true), 0, Durability::Synced).await.unwrap(); // 6
                                                                                  // Filler of other keys until the records above are sealed.
        let pad = "x".repeat(200);
        let mut filler = 0;
        while log.segment_count() < 3 {
            let key = format!("pad-{filler}");
            log.append(keyed_batch(None, &[(key.as_str(), pad.as_str())]), w).await.unwrap();
            filler += 1;
        }
        log.settle().await;
        let before = contents(&log).await;
        assert!(before.contains(&(2, "k".into(), "aborted".into(), false)));
        log.compact(0).await.unwrap();
        let after = contents(&log).await;
        let of = |key: &str| -> Vec<(i64, String)> {
            after.iter().filter(|r| r.1 == key && !r.3).map(|r| (r.0, r.2.clone())).collect()
        };
        assert_eq!(of("k"), vec![(0, "committed".to_string())], "the abort did not shadow the committed value");
        assert_eq!(of("other"), vec![(5, "new".to_string())], "a committed transaction's value wins");
        let markers: Vec<i64> = after.iter().filter(|r| r.3).map(|r| r.0).collect();
        assert_eq!(markers, vec![4, 6], "markers are kept");
        log.close().await.unwrap();
    });
}

#[test]
fn retention_keeps_an_open_transaction_and_drops_old_aborts_with_their_files() {
    run(|| async {
        let dir = tempdir();
        // No tail cache: reads go to the segment files (sendfile ranges when sealed).
        let config =
            LogConfig { segment_bytes: 4096, retention_bytes: Some(1), cache_bytes: 0, ..LogConfig::default() };
        let log = open(dir.path(), &config).await;
        let w = Durability::Synced;
        // An abort in the first segment, then an open transaction of 9.
        log.append(txn_batch(5, 0, 0, 40), w).await.unwrap();
        log.append_marker(marker(5, false), 0, Durability::Synced).await.unwrap();
        while log.segment_count() < 2 {
            log.append(txn_batch(6, 0, log.producer(6).map_or(0, |p| p.batches.back().unwrap().last_seq + 1), 40), w)
                .await
                .unwrap();
        }
        log.append_marker(marker(6, true), 0, Durability::Synced).await.unwrap();
        let open_at = log.append(txn_batch(9, 0, 0, 40), w).await.unwrap().base_offset;
        while log.segment_count() < 5 {
            let seq = log.producer(9).map_or(0, |p| p.batches.back().unwrap().last_seq + 1);
            log.append(txn_batch(9, 0, seq, 40), w).await.unwrap();
        }
        log.settle().await;
        // A read_committed read of sealed segments (sendfile ranges) stops
        // below the open transaction: every batch up to its start, no more.
        assert_eq!(log.last_stable_offset(), open_at);
        let mut offset = 0;
        loop {
            let slice = log.read_below(offset, 1 << 20, open_at).await.unwrap();
            if slice.is_empty() {
                break;
            }
            let bytes = slice.to_vec();
            let mut at = 0;
            while at < bytes.len() {
                let h = record_batch::BatchHeader::parse(&bytes[at..], usize::MAX).unwrap();
                assert!(h.last_offset() < open_at, "batch {}..={} is past the LSO", h.base_offset, h.last_offset());
                offset = h.last_offset() + 1;
                at += h.total_bytes();
            }
        }
        assert_eq!(offset, open_at, "everything below the LSO was read");
        assert_eq!(log.stats().cache_reads.get(), 0, "from the files, not the cache");
        let first_base = log.segments()[0].0;
        assert!(dir.path().join(format!("{first_base:020}.txnindex")).exists());
        log.enforce_retention().await.unwrap();
        let kept = log.segments();
        let holding = kept.iter().rev().find(|(b, _)| *b <= open_at).map(|(b, _)| *b);
        assert_eq!(kept[0].0, holding.unwrap(), "the segment holding the open transaction's start is kept");
        assert!(log.log_start() <= open_at);
        assert!(log.aborted_index().is_empty(), "the abort went with its segment");
        assert!(!dir.path().join(format!("{first_base:020}.txnindex")).exists(), "and its file");
        // Once it commits, retention may go on.
        log.append_marker(marker(9, true), 0, Durability::Synced).await.unwrap();
        log.enforce_retention().await.unwrap();
        assert!(log.log_start() > open_at);
        log.close().await.unwrap();
    });
}

#[test]
fn a_decided_commit_is_readable_before_its_marker_and_open_again_after_a_crash() {
    run(|| async {
        let dir = tempdir();
        let config = LogConfig::default();
        let log = open(dir.path(), &config).await;
        let (c, d) = (51, 52);
        // c: 0..=2, d: 3, c: 4; c's commit is decided, its marker not yet written.
        log.append(txn_batch(c, 0, 0, 3), Durability::Synced).await.unwrap();
        log.append(txn_batch(d, 0, 0, 1), Durability::Synced).await.unwrap();
        log.append(txn_batch(c, 0, 3, 1), Durability::Synced).await.unwrap();
        assert!(!log.commit_decided(&marker(c, false)), "an abort is never decided early");
        assert_eq!(log.last_stable_offset(), 0);
        assert!(log.commit_decided(&marker(c, true)));
        assert_eq!(log.last_stable_offset(), 3, "d's open transaction holds readers now");
        assert_eq!(log.first_unmarked_offset(), 0, "compaction still waits for c's marker");
        let below = log.read_below(0, 1 << 20, log.last_stable_offset()).await.unwrap();
        assert_eq!(record_batch::BatchHeader::parse(&below.to_vec(), usize::MAX).unwrap().last_offset(), 2);
        assert!(log.commit_decided(&marker(d, true)));
        assert_eq!(log.last_stable_offset(), 5, "both decided: readers go to the log end");
        // The broker dies before either marker is written: the decisions
        // were held in memory only, both transactions are open again.
        log.halt().await;
        drop(log);
        let log = open(dir.path(), &config).await;
        assert_eq!(log.open_transactions(), vec![(0, c), (3, d)]);
        assert_eq!(log.last_stable_offset(), 0);
        // The coordinator writes the markers again from its prepare records.
        assert!(log.commit_decided(&marker(c, true)));
        assert_eq!(log.append_marker(marker(c, true), 0, Durability::Synced).await.unwrap().base_offset, 5);
        assert_eq!(log.last_stable_offset(), 3);
        assert_eq!(log.append_marker(marker(d, true), 0, Durability::Synced).await.unwrap().base_offset, 6);
        assert_eq!(log.last_stable_offset(), 7);
        assert!(log.aborted_index().is_empty());
        log.close().await.unwrap();
    });
}
