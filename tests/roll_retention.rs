//! Segments roll on size and on age; retention deletes whole old segments by
//! size and by age, and the log start offset moves with it.

mod common;

use std::{cell::Cell, rc::Rc};

use common::{open, open_with, random_batch, run, Rng};
use shardlog::{
    protocol::record_batch::{encode_batch, Record},
    storage::{Clock, Durability, LogConfig, StorageError},
};

fn log_files(dir: &std::path::Path, suffix: &str) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(suffix))
        .collect();
    names.sort();
    names
}

#[test]
fn rolls_on_size_with_twenty_digit_names_and_sealed_indices() {
    run(|| async {
        let dir = common::tempdir().unwrap();
        let config = LogConfig { segment_bytes: 16 << 10, index_interval_bytes: 1024, ..LogConfig::default() };
        let (log, _) = open(dir.path(), config).await;
        let mut rng = Rng::new(11);
        for _ in 0..100 {
            log.append(random_batch(&mut rng, 2, 400), Durability::Written).await.unwrap();
        }
        let segments = log.segments();
        assert!(segments.len() >= 4, "rolled into {} segments", segments.len());
        for (base, size) in &segments {
            assert!(*size <= 16 << 10, "segment {base} holds {size} bytes");
        }
        let names = log_files(dir.path(), ".log");
        let expected: Vec<String> = segments.iter().map(|(b, _)| format!("{b:020}.log")).collect();
        assert_eq!(names, expected);
        // Sealed segments get their indices in the background, off the
        // append path; once settled they are on disk, and the active one
        // gets them at close.
        log.settle().await;
        assert_eq!(log_files(dir.path(), ".index").len(), segments.len() - 1);
        for (base, size) in &segments[..segments.len() - 1] {
            let on_disk = std::fs::metadata(dir.path().join(format!("{base:020}.log"))).unwrap().len();
            assert_eq!(on_disk, *size, "sealed segment {base} trimmed to its data once settled");
        }
        log.close().await.unwrap();
        assert_eq!(log_files(dir.path(), ".timeindex").len(), segments.len());
        for (base, size) in &segments {
            let on_disk = std::fs::metadata(dir.path().join(format!("{base:020}.log"))).unwrap().len();
            assert_eq!(on_disk, *size, "sealed segment {base} trimmed to its data");
        }
    });
}

#[test]
fn rolls_on_age() {
    run(|| async {
        let dir = common::tempdir().unwrap();
        let now = Rc::new(Cell::new(1_000_000));
        let config = LogConfig { segment_ms: 60_000, ..LogConfig::default() };
        let (log, _) = open_with(dir.path(), config, Clock::Manual(now.clone())).await;
        let mut rng = Rng::new(12);
        log.append(random_batch(&mut rng, 1, 10), Durability::Written).await.unwrap();
        now.set(now.get() + 59_000);
        log.append(random_batch(&mut rng, 1, 10), Durability::Written).await.unwrap();
        assert_eq!(log.segment_count(), 1, "younger than segment.ms");
        now.set(now.get() + 2_000);
        let info = log.append(random_batch(&mut rng, 1, 10), Durability::Written).await.unwrap();
        assert_eq!(log.segments().last().unwrap().0, info.base_offset, "rolled before the append");
    });
}

#[test]
fn retention_by_size_deletes_oldest_segments_and_moves_log_start() {
    run(|| async {
        let dir = common::tempdir().unwrap();
        let config = LogConfig {
            segment_bytes: 8 << 10,
            retention_bytes: Some(24 << 10),
            retention_ms: None,
            ..LogConfig::default()
        };
        let (log, _) = open(dir.path(), config).await;
        let mut rng = Rng::new(13);
        for _ in 0..80 {
            log.append(random_batch(&mut rng, 2, 500), Durability::Written).await.unwrap();
        }
        let before = log.segments();
        let outcome = log.enforce_retention().await.unwrap();
        let after = log.segments();
        assert!(outcome.segments_deleted > 0 && after.len() < before.len());
        assert_eq!(log.log_start(), after[0].0, "log start is the first kept segment");
        assert_eq!(outcome.log_start, after[0].0);
        let kept: u64 = after.iter().skip(1).map(|s| s.1).sum();
        assert!(kept < 24 << 10, "beyond the oldest kept segment, less than retention.bytes remain");
        for (base, _) in &before[..outcome.segments_deleted] {
            assert!(!dir.path().join(format!("{base:020}.log")).exists(), "segment {base} deleted from disk");
        }
        let err = log.read(log.log_start() - 1, 100).await.unwrap_err();
        assert!(matches!(err, StorageError::OffsetOutOfRange { .. }), "got {err}");
        assert!(!log.read(log.log_start(), 100).await.unwrap().is_empty());
        drop(log);
        let (log, _) = open(dir.path(), LogConfig::default()).await;
        assert_eq!(log.log_start(), after[0].0, "log start survives reopen");
    });
}

#[test]
fn retention_by_age_uses_the_newest_timestamp_of_each_segment() {
    run(|| async {
        let dir = common::tempdir().unwrap();
        let now = Rc::new(Cell::new(10_000_000));
        let config = LogConfig { segment_bytes: 4096, retention_ms: Some(100_000), ..LogConfig::default() };
        let (log, _) = open_with(dir.path(), config, Clock::Manual(now.clone())).await;
        let value = vec![7u8; 1500];
        for i in 0..12i64 {
            // Timestamps one minute apart, the last at "now".
            let ts = now.get() - (11 - i) * 60_000;
            let batch = encode_batch(&[Record { key: None, value: Some(&value), timestamp_delta: 0 }], ts);
            log.append(bytes::BytesMut::from(&batch[..]), Durability::Written).await.unwrap();
        }
        let outcome = log.enforce_retention().await.unwrap();
        assert!(outcome.segments_deleted > 0, "old segments expired");
        // Every kept batch is younger than retention.ms, or shares a segment
        // with one that is (whole segments only).
        let first = log.read(log.log_start(), 1).await.unwrap().to_vec();
        let h = shardlog::protocol::record_batch::check_batch(&first, 1 << 20).unwrap();
        assert!(
            now.get() - h.max_timestamp <= 100_000 + 120_000,
            "oldest kept batch is {} ms old",
            now.get() - h.max_timestamp
        );
        assert!(log.log_start() > 0);
    });
}

/// A crash after a roll but before its background work trimmed the sealed
/// segment leaves that segment with zeros after its last batch (the padding
/// of its last aligned write, or blocks zeroed ahead of the write head), and
/// no index files or checkpoint for the roll. Recovery trims the zeros and
/// keeps every later segment: they hold acknowledged data.
#[test]
fn a_crash_before_a_sealed_segment_is_trimmed_keeps_the_later_segments() {
    run(|| async {
        let dir = common::tempdir().unwrap();
        let config = LogConfig { segment_bytes: 16 << 10, index_interval_bytes: 1024, ..LogConfig::default() };
        let (log, _) = open(dir.path(), config.clone()).await;
        let mut rng = Rng::new(23);
        for _ in 0..120 {
            log.append(random_batch(&mut rng, 2, 400), Durability::Synced).await.unwrap();
        }
        let before = common::read_all(&log, 0).await;
        let end = log.log_end();
        let segments = log.segments();
        assert!(segments.len() >= 3, "rolled into {} segments", segments.len());
        log.close().await.unwrap();

        // Put every sealed segment back as the roll left it: zeros after
        // its data, no index files, no checkpoint past the first segment.
        for (base, _) in &segments[..segments.len() - 1] {
            let path = dir.path().join(format!("{base:020}.log"));
            let mut bytes = std::fs::read(&path).unwrap();
            bytes.resize(bytes.len() + 3000 + (1 << 20), 0);
            std::fs::write(&path, bytes).unwrap();
            for suffix in ["index", "timeindex"] {
                let _ = std::fs::remove_file(dir.path().join(format!("{base:020}.{suffix}")));
            }
        }
        for entry in std::fs::read_dir(dir.path()).unwrap() {
            let name = entry.unwrap().file_name().to_string_lossy().into_owned();
            if name == "recovery-point" {
                std::fs::remove_file(dir.path().join(name)).unwrap();
            }
        }

        let (log, report) = open(dir.path(), config).await;
        assert_eq!(log.segments().len(), segments.len(), "every segment kept: {report:?}");
        assert_eq!(log.log_end(), end, "log end after recovery");
        assert_eq!(common::read_all(&log, 0).await, before, "the same batches, front to back");
        for (base, size) in &log.segments()[..segments.len() - 1] {
            let on_disk = std::fs::metadata(dir.path().join(format!("{base:020}.log"))).unwrap().len();
            assert_eq!(on_disk, *size, "sealed segment {base} trimmed to its data");
        }
        log.close().await.unwrap();
    });
}
