//! Group commit: durable appends that arrive together share fdatasyncs.

mod common;

use common::{open, random_batch, run, Rng};
use shardlog::storage::{Durability, LogConfig};

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
