//! Group commit: durable appends that arrive together share fdatasyncs,
//! within a partition and across a shard's partitions on one device.

mod common;

use std::time::{Duration, Instant};

use common::{open, random_batch, run, Rng};
use shardlog::storage::{device_sync::DeviceSync, Durability, LogConfig};

const APPENDERS: usize = 64;

#[test]
fn concurrent_durable_appends_share_fdatasyncs() {
    run(|| async {
        let dir = common::tempdir().unwrap();
        let (log, _) = open(dir.path(), LogConfig::default()).await;
        let mut rng = Rng::new(5);
        let before = log.stats().syncs.get();
        let mut tasks = Vec::new();
        for _ in 0..APPENDERS {
            let batch = random_batch(&mut rng, 3, 500);
            let log = log.clone();
            tasks.push(glommio::spawn_local(async move { log.append(batch, Durability::Synced).await }));
        }
        let mut lasts = Vec::new();
        for t in tasks {
            let info = t.await.expect("durable append");
            lasts.push(info.last_offset);
        }
        let syncs = log.stats().syncs.get() - before;
        println!("{APPENDERS} concurrent durable appends: {syncs} fdatasyncs");
        assert!(syncs >= 1, "durable appends synced at least once");
        assert!(syncs <= (APPENDERS / 8) as u64, "{syncs} fdatasyncs for {APPENDERS} concurrent appenders");
        let max_last = *lasts.iter().max().unwrap();
        assert!(log.durable_offset() > max_last, "every acknowledged offset is durable");
        assert_eq!(log.log_end(), APPENDERS as i64 * 3);
    });
}

#[test]
fn sequential_durable_appends_each_pay_one_fdatasync() {
    // The counter is real: without concurrency there is nothing to share.
    run(|| async {
        let dir = common::tempdir().unwrap();
        let (log, _) = open(dir.path(), LogConfig::default()).await;
        let mut rng = Rng::new(6);
        let before = log.stats().syncs.get();
        for _ in 0..16 {
            log.append(random_batch(&mut rng, 1, 100), Durability::Synced).await.unwrap();
        }
        assert_eq!(log.stats().syncs.get() - before, 16);
        for _ in 0..16 {
            log.append(random_batch(&mut rng, 1, 100), Durability::Written).await.unwrap();
        }
        assert_eq!(log.stats().syncs.get() - before, 16, "acks=1 appends never sync");
    });
}

/// Partitions of one shard on one device share a device flush: once each
/// partition's zeroed blocks are durable (zero-ahead syncs them in the
/// background), a durable append into them needs no fdatasync of its own,
/// and one flush covers every partition that queued before it started.
#[test]
fn durable_appends_across_partitions_share_the_device_flush() {
    const PARTITIONS: usize = 16;
    run(|| async {
        let dir = common::tempdir().unwrap();
        let mut logs = Vec::new();
        for p in 0..PARTITIONS {
            let sub = dir.path().join(format!("p-{p}"));
            logs.push(open(&sub, LogConfig::default()).await.0);
        }
        let device = DeviceSync::for_dir(dir.path());
        let mut rng = Rng::new(8);
        let started = Instant::now();
        let mut round_syncs = u64::MAX;
        let mut rounds = 0;
        // Early rounds sync files of their own (new segments, zeros not yet
        // durable); the shared flush takes over once the zero jobs land.
        while round_syncs >= PARTITIONS as u64 / 2 && started.elapsed() < Duration::from_secs(20) {
            let before = device.syncs();
            let mut tasks = Vec::new();
            for log in &logs {
                let (log, batch) = (log.clone(), random_batch(&mut rng, 2, 300));
                tasks.push(glommio::spawn_local(async move { log.append(batch, Durability::Synced).await }));
            }
            for (log, t) in logs.iter().zip(tasks) {
                let info = t.await.expect("durable append");
                assert!(log.durable_offset() > info.last_offset, "an acknowledged offset is durable");
            }
            round_syncs = device.syncs() - before;
            rounds += 1;
            glommio::timer::sleep(Duration::from_millis(20)).await;
        }
        let shared: u64 = logs.iter().map(|l| l.stats().shared_syncs.get()).sum();
        println!(
            "{rounds} rounds; the last cost {round_syncs} fdatasyncs for {PARTITIONS} partitions; {shared} shared"
        );
        if device.shared() {
            assert!(round_syncs < PARTITIONS as u64 / 2, "{round_syncs} fdatasyncs for {PARTITIONS} partitions");
            assert!(shared >= PARTITIONS as u64 / 2, "the partitions waited for the shared flush: {shared}");
        } else {
            // Not ext4 or XFS: every partition syncs its own file.
            assert_eq!(shared, 0);
            assert_eq!(round_syncs, PARTITIONS as u64);
        }
        // What was acknowledged reads back after a clean reopen.
        for (p, log) in logs.iter().enumerate() {
            let end = log.log_end();
            log.close().await.unwrap();
            let (again, _) = open(&dir.path().join(format!("p-{p}")), LogConfig::default()).await;
            assert_eq!(again.log_end(), end, "partition {p} after reopen");
            assert_eq!(common::read_all(&again, 0).await.len(), common::read_all(log, 0).await.len());
        }
    });
}
