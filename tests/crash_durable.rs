//! SIGKILL a child process in the middle of durable appends, many times, and
//! check that every append it acknowledged as durable is in the log, byte for
//! byte, after each restart.
//!
//! The child is this same test binary, re-run with `SHARDLOG_CRASH_CHILD` set.

mod common;

use std::{
    io::{BufRead, BufReader},
    process::{Command, Stdio},
    rc::Rc,
};

use common::{open, random_batch, run, Rng};
use shardlog::{
    protocol::record_batch::patch_base_offset,
    storage::{Durability, LogConfig},
};

const CHILD_ENV: &str = "SHARDLOG_CRASH_CHILD";
const APPENDERS: usize = 4;

fn config() -> LogConfig {
    LogConfig { segment_bytes: 256 << 10, preallocate_step_bytes: 128 << 10, ..LogConfig::default() }
}

/// Appends durable batches from several tasks until killed, printing one
/// `ACK base last crc` line per acknowledged batch (CRC-32C of the bytes as
/// stored, base offset included).
fn child(dir: String, seed: u64) {
    run(move || async move {
        let (log, _) = open(std::path::Path::new(&dir), config()).await;
        let mut tasks = Vec::new();
        for t in 0..APPENDERS {
            let log = Rc::clone(&log);
            tasks.push(glommio::spawn_local(async move {
                let mut rng = Rng::new(seed * 100 + t as u64);
                loop {
                    let records = 1 + rng.below(8) as usize;
                    let batch = random_batch(&mut rng, records, 2000);
                    let mut stored = batch.to_vec();
                    let info = log.append(batch, Durability::Synced).await.expect("durable append");
                    patch_base_offset(&mut stored, info.base_offset);
                    println!("ACK {} {} {:08x}", info.base_offset, info.last_offset, crc32c::crc32c(&stored));
                }
            }));
        }
        for t in tasks {
            t.await;
        }
    });
}

#[test]
fn sigkill_during_durable_appends_loses_nothing_acknowledged() {
    if let Ok(dir) = std::env::var(CHILD_ENV) {
        let seed = std::env::var("SHARDLOG_CRASH_SEED").unwrap().parse().unwrap();
        return child(dir, seed);
    }
    let dir = common::tempdir().unwrap();
    let mut acked: Vec<(i64, i64, u32)> = Vec::new();
    let mut rng = Rng::new(2024);
    for round in 0..8u64 {
        let kill_after = 20 + rng.below(300) as usize;
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args([
                "sigkill_during_durable_appends_loses_nothing_acknowledged",
                "--exact",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(CHILD_ENV, dir.path())
            .env("SHARDLOG_CRASH_SEED", round.to_string())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("start child");
        let mut seen = 0;
        let lines = BufReader::new(child.stdout.take().unwrap()).lines();
        for line in lines {
            let line = line.unwrap();
            let Some(rest) = line.strip_prefix("ACK ") else { continue };
            let f: Vec<&str> = rest.split(' ').collect();
            acked.push((f[0].parse().unwrap(), f[1].parse().unwrap(), u32::from_str_radix(f[2], 16).unwrap()));
            seen += 1;
            if seen == kill_after {
                break;
            }
        }
        child.kill().expect("SIGKILL the child");
        child.wait().unwrap();
        assert_eq!(seen, kill_after, "round {round}: child acknowledged {seen} appends before dying by itself");
    }
    let mut ranges: Vec<(i64, i64)> = acked.iter().map(|a| (a.0, a.1)).collect();
    ranges.sort_unstable();
    assert!(ranges.windows(2).all(|w| w[0].1 < w[1].0), "acknowledged offset ranges never overlap");
    let dir_path = dir.path().to_path_buf();
    let checked = run(move || async move {
        let (log, _) = open(&dir_path, config()).await;
        for &(base, last, crc) in &acked {
            let slice = log.read(base, 1).await.unwrap_or_else(|e| panic!("acked batch at {base}: {e}"));
            let bytes = slice.to_vec();
            let batches = common::batches_in(&bytes);
            let (got_base, got_last, len) = batches[0];
            assert_eq!((got_base, got_last), (base, last), "acked batch at {base} has other offsets");
            assert_eq!(crc32c::crc32c(&bytes[..len]), crc, "acked batch at {base} has other bytes");
        }
        acked.len()
    });
    assert!(checked >= 8 * 20, "checked {checked} acknowledged batches");
}
