//! Log compaction against a model: random keyed appends (with tombstones)
//! over many small segments, several cleaning passes, reopens (clean and
//! after a simulated crash in the middle of a segment swap). After each
//! pass the log holds, for every key, exactly its newest record (tombstones
//! only while younger than delete.retention.ms), every offset where it was
//! appended, and far fewer bytes.

mod common;

use std::collections::BTreeMap;

use bytes::BytesMut;
use common::{open, run, Rng};
use shardlog::{
    protocol::record_batch::{encode_batch, read_records, BatchHeader, Record},
    storage::{Durability, LogConfig, PartitionLog},
};

const KEYS: u64 = 40;
const NOW: i64 = 1_800_000_000_000;

fn config() -> LogConfig {
    LogConfig {
        segment_bytes: 8 << 10,
        index_interval_bytes: 512,
        compacted: true,
        delete: false,
        delete_retention_ms: 60_000,
        ..LogConfig::default()
    }
}

/// Every record in the log: offset → (key, value).
async fn contents(log: &PartitionLog) -> BTreeMap<i64, (Vec<u8>, Option<Vec<u8>>)> {
    let bytes = common::read_all(log, log.log_start()).await;
    let mut out = BTreeMap::new();
    let mut at = 0;
    while at < bytes.len() {
        let h = BatchHeader::parse(&bytes[at..], usize::MAX).unwrap();
        let end = at + h.total_bytes();
        for r in read_records(&bytes[at..end]).unwrap() {
            out.insert(r.offset, (r.key.unwrap().to_vec(), r.value.map(<[u8]>::to_vec)));
        }
        at = end;
    }
    out
}

/// A key's newest record: (offset, value, timestamp).
type Newest = (i64, Option<Vec<u8>>, i64);

#[test]
fn compaction_keeps_the_newest_record_of_every_key() {
    compaction_run(None);
}

/// The same with one segment file open at a time: cleaned files replace
/// segments whose descriptors were closed, and reads reopen what they need.
#[test]
fn compaction_keeps_the_newest_record_of_every_key_with_one_open_file() {
    compaction_run(Some(1));
}

fn compaction_run(open_files_limit: Option<usize>) {
    run(move || async move {
        if let Some(limit) = open_files_limit {
            shardlog::storage::open_files::set_limit(limit);
        }
        let dir = common::tempdir().unwrap();
        let (mut log, _) = open(dir.path(), config()).await;
        let mut rng = Rng::new(99);
        // key → (offset, value, timestamp) of its newest record
        let mut newest: BTreeMap<Vec<u8>, Newest> = BTreeMap::new();
        let mut appended = 0u64;
        for round in 0..4 {
            for _ in 0..300 {
                let n = 1 + rng.below(4) as usize;
                let mut keys = Vec::new();
                let mut values = Vec::new();
                for _ in 0..n {
                    keys.push(format!("key-{}", rng.below(KEYS)).into_bytes());
                    // One record in ten is a tombstone.
                    values
                        .push((rng.below(10) != 0).then(|| format!("v{}-{}", round, rng.below(1 << 30)).into_bytes()));
                }
                // Old tombstones (round 0) are past delete.retention.ms at NOW.
                let ts = if round == 0 { NOW - 3_600_000 } else { NOW };
                let records: Vec<Record<'_>> = keys
                    .iter()
                    .zip(&values)
                    .map(|(k, v)| Record { key: Some(k), value: v.as_deref(), timestamp_delta: 0 })
                    .collect();
                let info =
                    log.append(BytesMut::from(&encode_batch(&records, ts)[..]), Durability::Synced).await.unwrap();
                for (i, (k, v)) in keys.into_iter().zip(values).enumerate() {
                    newest.insert(k, (info.base_offset + i as i64, v, ts));
                }
                appended += n as u64;
            }
            if round == 2 {
                // A crash after a merged segment was complete (.swap) but
                // before the segments it replaces were removed: recovery
                // finishes the swap and the log reads the same.
                let was = contents(&log).await;
                log.close().await.unwrap();
                drop(log);
                simulate_interrupted_swap(dir.path());
                log = open(dir.path(), config()).await.0;
                assert_eq!(contents(&log).await, was, "log after finishing an interrupted swap");
                assert!(!std::fs::read_dir(dir.path())
                    .unwrap()
                    .any(|e| { e.unwrap().file_name().to_string_lossy().ends_with(".swap") }));
            }
            let before: u64 = log.segments().iter().map(|(_, s)| s).sum();
            let report = log.compact(NOW).await.unwrap();
            let after: u64 = log.segments().iter().map(|(_, s)| s).sum();
            assert!(after < before, "round {round}: {before} -> {after} bytes ({report:?})");
            check(&log, &newest, round).await;
            if round == 1 {
                // Clean reopen.
                log.close().await.unwrap();
                drop(log);
                log = open(dir.path(), config()).await.0;
                check(&log, &newest, round).await;
            }
        }
        let live = contents(&log).await.len();
        eprintln!("{appended} records appended over {KEYS} keys; {live} left; segments {:?}", log.segments());
        assert!(live as u64 <= KEYS + 400, "{live} records left of {appended}");
    });
}

/// The log holds each key's newest record at its offset, nothing older, and
/// only tombstones that are still young (sealed segments are cleaned; the
/// active one may still hold superseded records).
async fn check(log: &PartitionLog, newest: &BTreeMap<Vec<u8>, Newest>, round: usize) {
    let stored = contents(log).await;
    let active_base = log.segments().last().unwrap().0;
    for (key, (offset, value, ts)) in newest {
        let dropped_tombstone = value.is_none() && *ts < NOW - config().delete_retention_ms;
        match stored.get(offset) {
            Some((k, v)) => {
                assert_eq!(k, key, "round {round}: offset {offset}");
                assert_eq!(v, value, "round {round}: newest value of {:?}", String::from_utf8_lossy(key));
            }
            None => assert!(dropped_tombstone, "round {round}: newest record of {:?} at {offset} is gone", key),
        }
    }
    for (offset, (key, _)) in &stored {
        if *offset < active_base {
            assert_eq!(newest[key].0, *offset, "round {round}: superseded record at {offset} survived cleaning");
        }
    }
}

/// Leaves what the cleaner leaves when a crash hits mid-swap: a complete
/// `<base>-<end>.swap` holding the merge of the first two segments (their
/// bytes one after the other), with both originals still on disk.
fn simulate_interrupted_swap(dir: &std::path::Path) {
    let mut logs: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".log"))
        .collect();
    logs.sort();
    assert!(logs.len() >= 3, "need two sealed segments, have {logs:?}");
    let first: i64 = logs[0].trim_end_matches(".log").parse().unwrap();
    let third: i64 = logs[2].trim_end_matches(".log").parse().unwrap();
    let mut merged = std::fs::read(dir.join(&logs[0])).unwrap();
    merged.extend(std::fs::read(dir.join(&logs[1])).unwrap());
    std::fs::write(dir.join(format!("{first:020}-{third:020}.swap")), merged).unwrap();
}

/// Compaction renames the cleaned file over a segment's name while a fetch
/// may still hold the old segment: its page-cache view (opened on first use,
/// for sendfile) must be the file it located, not whatever the name means by
/// then. CI once saw a fetch fail with KAFKA_STORAGE_ERROR here.
#[test]
fn a_segments_page_cache_view_follows_its_file_not_its_name() {
    use shardlog::storage::{file::SegmentFile, Faults};
    use std::os::unix::fs::FileExt;
    run(|| async {
        let dir = common::tempdir().unwrap();
        let path = dir.path().join("00000000000000000000.log");
        let file = SegmentFile::create(&path, Faults::default()).await.unwrap();
        let mut buf = file.alloc(4096);
        buf.as_bytes_mut().fill(b'o');
        file.write_at(buf, 0).await.unwrap();
        file.fdatasync().await.unwrap();

        // A cleaned file takes the name, as compaction's swap does.
        let cleaned = dir.path().join("cleaned.tmp");
        std::fs::write(&cleaned, vec![b'n'; 100]).unwrap();
        std::fs::rename(&cleaned, &path).unwrap();

        let view = file.buffered().await.expect("the page-cache view opens after the name moved on");
        let mut got = vec![0u8; 4096];
        view.read_exact_at(&mut got, 0).expect("all 4096 bytes of the original file");
        assert!(got.iter().all(|&b| b == b'o'), "read the renamed-over file, not the segment's own");

        // And after its name is removed outright (retention).
        let gone = dir.path().join("00000000000000000001.log");
        let file = SegmentFile::create(&gone, Faults::default()).await.unwrap();
        let mut buf = file.alloc(4096);
        buf.as_bytes_mut().fill(b'r');
        file.write_at(buf, 0).await.unwrap();
        std::fs::remove_file(&gone).unwrap();
        let mut got = vec![0u8; 10];
        file.buffered().await.expect("an unlinked segment still opens").read_exact_at(&mut got, 4000).unwrap();
        assert_eq!(got, vec![b'r'; 10]);

        // With its descriptors closed (idle twice over), a segment does not
        // reopen whatever file took its name: it says so, and a reader
        // locates its offset again.
        let moved = dir.path().join("00000000000000000002.log");
        let file = SegmentFile::create(&moved, Faults::default()).await.unwrap();
        let mut buf = file.alloc(4096);
        buf.as_bytes_mut().fill(b'o');
        file.write_at(buf, 0).await.unwrap();
        // The first segment's page-cache view is still held above (a
        // sendfile in flight, to the table): let it go, so it may close.
        drop(view);
        shardlog::storage::open_files::close_idle();
        shardlog::storage::open_files::close_idle();
        assert_eq!(shardlog::storage::open_files::usage().open, 0, "every idle file closed");
        std::fs::write(&cleaned, vec![b'n'; 4096]).unwrap();
        std::fs::rename(&cleaned, &moved).unwrap();
        let e = file.read_at(0, 10).await.expect_err("the name now means another file");
        assert_eq!(e.kind(), std::io::ErrorKind::NotFound, "{e}");
        assert!(e.to_string().contains("replaced since this segment was opened"), "{e}");
    });
}
