//! Torn and corrupt tails: for the last batch of a log, truncate its segment
//! at every byte and flip every byte in turn. Reopening must keep exactly the
//! batches before it, and appends must continue at the right offset.

mod common;

use std::path::{Path, PathBuf};

use common::{copy_dir, open, random_batch, read_all, run, Rng};
use shardlog::storage::{Durability, LogConfig};

fn config() -> LogConfig {
    LogConfig { segment_bytes: 8 << 10, preallocate_step_bytes: 16 << 10, ..LogConfig::default() }
}

struct Crashed {
    dir: tempfile::TempDir,
    segment: PathBuf,
    prefix: Vec<u8>,
    prefix_end: i64,
    victim: std::ops::Range<u64>,
}

/// Writes a few segments of durable batches, then a last batch, and "crashes"
/// (drops the log without closing it).
async fn crashed_log() -> Crashed {
    let dir = common::tempdir().unwrap();
    let mut rng = Rng::new(42);
    let (log, _) = open(dir.path(), config()).await;
    for _ in 0..30 {
        log.append(random_batch(&mut rng, 4, 400), Durability::Synced).await.unwrap();
    }
    let prefix_end = log.log_end();
    let prefix = read_all(&log, 0).await;
    let victim_bytes = random_batch(&mut rng, 3, 60);
    let victim_len = victim_bytes.len() as u64;
    log.append(victim_bytes, Durability::Synced).await.unwrap();
    let (base, size) = *log.segments().last().unwrap();
    assert!(log.segment_count() > 2, "the prefix spans several segments");
    // Let the last roll's background work (indices, checkpoint) land first:
    // the damage under test is the torn tail, and the copies below need a
    // directory no helper thread is still writing to.
    log.settle().await;
    drop(log);
    let segment = dir.path().join(format!("{base:020}.log"));
    Crashed { dir, segment, prefix, prefix_end, victim: size - victim_len..size }
}

/// Reopens a damaged copy and checks it holds exactly the prefix, then that
/// appends continue at the prefix end and survive another reopen.
async fn check_recovers_prefix(dir: &Path, c: &Crashed, what: &str) {
    let (log, report) = open(dir, config()).await;
    assert_eq!(log.log_end(), c.prefix_end, "{what}: log end after recovery ({report:?})");
    assert!(read_all(&log, 0).await == c.prefix, "{what}: recovered bytes differ from the prefix");
    let mut rng = Rng::new(7);
    let info = log.append(random_batch(&mut rng, 2, 50), Durability::Synced).await.unwrap();
    assert_eq!(info.base_offset, c.prefix_end, "{what}: append continues at the prefix end");
    log.close().await.unwrap();
    drop(log);
    let (log, _) = open(dir, config()).await;
    assert_eq!(log.log_end(), info.last_offset + 1, "{what}: appended batch survives reopen");
}

#[test]
fn truncation_at_every_byte_of_the_last_batch_recovers_the_prefix() {
    run(|| async {
        let c = crashed_log().await;
        let scratch = common::tempdir().unwrap();
        for cut in c.victim.clone() {
            let dir = scratch.path().join(format!("cut-{cut}"));
            copy_dir(c.dir.path(), &dir);
            let seg = dir.join(c.segment.file_name().unwrap());
            std::fs::OpenOptions::new().write(true).open(&seg).unwrap().set_len(cut).unwrap();
            check_recovers_prefix(&dir, &c, &format!("cut at byte {cut}")).await;
            std::fs::remove_dir_all(&dir).unwrap();
        }
    });
}

#[test]
fn a_flipped_byte_anywhere_in_the_last_batch_recovers_the_prefix() {
    run(|| async {
        let c = crashed_log().await;
        let scratch = common::tempdir().unwrap();
        let original = std::fs::read(&c.segment).unwrap();
        for at in c.victim.clone() {
            let dir = scratch.path().join(format!("flip-{at}"));
            copy_dir(c.dir.path(), &dir);
            let mut bytes = original.clone();
            bytes[at as usize] ^= 0xff;
            std::fs::write(dir.join(c.segment.file_name().unwrap()), &bytes).unwrap();
            check_recovers_prefix(&dir, &c, &format!("flip at byte {at}")).await;
            std::fs::remove_dir_all(&dir).unwrap();
        }
    });
}

#[test]
fn an_undamaged_crash_keeps_the_last_batch() {
    run(|| async {
        let c = crashed_log().await;
        let (log, report) = open(c.dir.path(), config()).await;
        assert_eq!(log.log_end(), c.prefix_end + 3, "victim batch of 3 records kept");
        assert!(report.cuts.iter().all(|cut| cut.reason.contains("padding")), "only padding trimmed: {report:?}");
    });
}
