//! The on-disk format is a promise: a log written by the first version is
//! committed under tests/fixtures/log-v1 and must stay readable, byte for
//! byte, by every later version.
//!
//! Regenerate (only when deliberately starting a new format version, in a new
//! folder): `SHARDLOG_WRITE_FIXTURE=1 cargo test --test fixture_v1`.

mod common;

use std::path::{Path, PathBuf};

use common::{copy_dir, open, random_batch, run, Rng};
use shardlog::storage::{Durability, LogConfig};

fn fixture_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/log-v1")
}

fn config() -> LogConfig {
    LogConfig { segment_bytes: 4096, index_interval_bytes: 512, ..LogConfig::default() }
}

/// The manifest: one line per batch, `base last crc32c-of-stored-bytes`.
fn read_manifest() -> Vec<(i64, i64, u32)> {
    let text = std::fs::read_to_string(fixture_dir().join("manifest.txt")).expect("fixture manifest");
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .map(|l| {
            let f: Vec<&str> = l.split(' ').collect();
            (f[0].parse().unwrap(), f[1].parse().unwrap(), u32::from_str_radix(f[2], 16).unwrap())
        })
        .collect()
}

async fn write_fixture(dir: PathBuf) {
    let _ = std::fs::remove_dir_all(&dir);
    let data = dir.join("data");
    let (log, _) = open(&data, config()).await;
    let mut rng = Rng::new(2026);
    for i in 0..24 {
        let d = if i % 3 == 0 { Durability::Synced } else { Durability::Written };
        log.append(random_batch(&mut rng, 1 + (i % 5), 300), d).await.unwrap();
    }
    let mut manifest = String::from("# base last crc32c, written by shardlog storage format v1\n");
    let mut offset = 0;
    while offset < log.log_end() {
        let bytes = log.read(offset, 1).await.unwrap().to_vec();
        let (base, last, len) = common::batches_in(&bytes)[0];
        manifest.push_str(&format!("{base} {last} {:08x}\n", crc32c::crc32c(&bytes[..len])));
        offset = last + 1;
    }
    log.close().await.unwrap();
    std::fs::write(dir.join("manifest.txt"), manifest).unwrap();
}

#[test]
fn log_v1_fixture_stays_readable() {
    if std::env::var_os("SHARDLOG_WRITE_FIXTURE").is_some() {
        run(|| write_fixture(fixture_dir()));
    }
    let manifest = read_manifest();
    assert!(manifest.len() >= 20, "fixture has {} batches", manifest.len());
    let scratch = common::tempdir().unwrap();
    let dir = scratch.path().join("data");
    copy_dir(&fixture_dir().join("data"), &dir);
    run(move || async move {
        let (log, report) = open(&dir, config()).await;
        assert!(report.cuts.is_empty(), "a cleanly closed v1 log needs no cuts: {report:?}");
        assert!(log.segment_count() > 1, "fixture spans several segments");
        assert_eq!(log.log_start(), manifest[0].0);
        assert_eq!(log.log_end(), manifest.last().unwrap().1 + 1);
        for &(base, last, crc) in &manifest {
            // Read from the middle of the batch: Kafka semantics return it whole.
            let bytes = log.read(last, 1).await.unwrap().to_vec();
            let (got_base, got_last, len) = common::batches_in(&bytes)[0];
            assert_eq!((got_base, got_last), (base, last));
            assert_eq!(crc32c::crc32c(&bytes[..len]), crc, "batch {base} bytes");
        }
        let mut rng = Rng::new(1);
        let info = log.append(random_batch(&mut rng, 1, 10), Durability::Synced).await.unwrap();
        assert_eq!(info.base_offset, manifest.last().unwrap().1 + 1, "appends continue after the fixture");
    });
}
