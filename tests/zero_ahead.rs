//! Zero-ahead (`storage::zero_ahead`): the active segment's file is written
//! with zeros ahead of its data in the background, appends land in those
//! blocks and read back whole, a crash image with the zeros recovers every
//! synced batch, and a clean close leaves the file exactly its data.

mod common;

use std::time::Duration;

use common::{open, random_batch, run, Rng};
use shardlog::storage::{Durability, LogConfig, PartitionLog};

const WINDOW: u64 = 256 << 10;

fn file_len(dir: &std::path::Path, base: i64) -> u64 {
    std::fs::metadata(dir.join(format!("{base:020}.log"))).unwrap().len()
}

/// Waits (bounded) until the background zero job has written ahead of the
/// active segment's data; returns the file length it reached.
async fn zeroed_ahead(dir: &std::path::Path, log: &PartitionLog) -> u64 {
    let (base, size) = *log.segments().last().unwrap();
    for _ in 0..500 {
        let len = file_len(dir, base);
        if len > size {
            return len;
        }
        glommio::timer::sleep(Duration::from_millis(10)).await;
    }
    panic!("no zeros written ahead of segment {base} ({size} bytes of data) within 5 s");
}

#[test]
fn appends_land_in_zeroed_blocks_and_a_crash_image_recovers_every_synced_batch() {
    run(|| async {
        let dir = common::tempdir().unwrap();
        let config = LogConfig { segment_bytes: 8 << 20, zero_ahead_bytes: WINDOW, ..LogConfig::default() };
        let (log, _) = open(dir.path(), config.clone()).await;
        let mut rng = Rng::new(71);
        for _ in 0..20 {
            log.append(random_batch(&mut rng, 3, 300), Durability::Synced).await.unwrap();
        }
        let len = zeroed_ahead(dir.path(), &log).await;
        let (base, size) = *log.segments().last().unwrap();
        assert!(len <= size.next_multiple_of(4096) + WINDOW, "zeroed to {len}, data {size}, window {WINDOW}");
        let bytes = std::fs::read(dir.path().join(format!("{base:020}.log"))).unwrap();
        assert!(bytes[size.next_multiple_of(4096) as usize..].iter().all(|&b| b == 0), "zeros past the data");

        // More appends, now into blocks written before; then a crash image.
        let extending = log.stats().extending_writes.get();
        assert!(extending >= 1, "the first append extended the file");
        for _ in 0..200 {
            log.append(random_batch(&mut rng, 3, 300), Durability::Synced).await.unwrap();
        }
        assert_eq!(log.stats().extending_writes.get(), extending, "appends inside the zeroed window overwrite");
        let stored = common::read_all(&log, 0).await;
        let batches = common::batches_in(&stored);
        assert_eq!(batches.len(), 220, "every append reads back");
        assert_eq!(batches.last().unwrap().1 + 1, log.log_end());
        let image = common::tempdir().unwrap();
        common::copy_dir(dir.path(), image.path());
        let (size_at_crash, len_at_crash) = (log.segments().last().unwrap().1, file_len(image.path(), base));
        assert!(
            len_at_crash > size_at_crash,
            "the image holds zeros past the data ({len_at_crash} vs {size_at_crash})"
        );

        let (recovered, report) = open(image.path(), config.clone()).await;
        assert_eq!(recovered.log_end(), log.log_end(), "log end after recovery: {report:?}");
        assert_eq!(common::read_all(&recovered, 0).await, stored, "the same bytes, front to back");
        assert!(
            report.cuts.iter().all(|c| c.reason.contains("zero padding")),
            "only padding trimmed: {:?}",
            report.cuts
        );
        assert_eq!(file_len(image.path(), base), size_at_crash, "recovery trimmed the zeros");
        // The recovered log appends (zeroing again from its new head).
        recovered.append(random_batch(&mut rng, 1, 100), Durability::Synced).await.unwrap();
        assert_eq!(recovered.log_end(), log.log_end() + 1);
        recovered.close().await.unwrap();

        log.close().await.unwrap();
        assert_eq!(file_len(dir.path(), base), size_at_crash, "a clean close leaves exactly the data");
    });
}

#[test]
fn a_roll_trims_the_zeros_of_the_sealed_segment_and_zero_turns_it_off() {
    run(|| async {
        let dir = common::tempdir().unwrap();
        let config = LogConfig { segment_bytes: 32 << 10, zero_ahead_bytes: WINDOW, ..LogConfig::default() };
        let (log, _) = open(dir.path(), config).await;
        let mut rng = Rng::new(72);
        for _ in 0..300 {
            log.append(random_batch(&mut rng, 2, 400), Durability::Synced).await.unwrap();
        }
        log.settle().await;
        let segments = log.segments();
        assert!(segments.len() >= 4, "rolled into {} segments", segments.len());
        for (base, size) in &segments[..segments.len() - 1] {
            assert!(*size <= 32 << 10, "segment {base}: {size} bytes");
            assert_eq!(file_len(dir.path(), *base), *size, "sealed segment {base} trimmed to its data");
        }
        let before = common::read_all(&log, 0).await;
        log.close().await.unwrap();
        let (log, report) = open(dir.path(), LogConfig { segment_bytes: 32 << 10, ..LogConfig::default() }).await;
        assert!(report.cuts.is_empty(), "a clean close leaves nothing to cut: {:?}", report.cuts);
        assert_eq!(common::read_all(&log, 0).await, before);
        log.close().await.unwrap();

        // zero_ahead_bytes = 0: the file never runs ahead of its data.
        let off = common::tempdir().unwrap();
        let config = LogConfig { zero_ahead_bytes: 0, ..LogConfig::default() };
        let (log, _) = open(off.path(), config).await;
        for _ in 0..50 {
            log.append(random_batch(&mut rng, 2, 400), Durability::Synced).await.unwrap();
        }
        glommio::timer::sleep(Duration::from_millis(100)).await;
        let (base, size) = *log.segments().last().unwrap();
        assert_eq!(file_len(off.path(), base), size.next_multiple_of(4096), "no zeros ahead");
        // Each append that reaches a new block extends the file (one that
        // stays in the last partial block rewrites it in place).
        let extending = log.stats().extending_writes.get();
        assert!(
            (size.div_ceil(4096) / 2..=size.div_ceil(4096)).contains(&extending),
            "{extending} extending writes for {size} bytes"
        );
        log.close().await.unwrap();
    });
}
