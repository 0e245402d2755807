//! A roll's directory sync runs in the background; the new segment's first
//! sync waits for it, so nothing in the segment is vouched durable before
//! its name is.

use super::Durability;
use crate::storage::{
    testing::{one_record, open_log, run, tempdir},
    LogConfig,
};

#[test]
fn the_new_segments_first_sync_waits_for_the_rolls_directory_sync() {
    run(|| async {
        let dir = tempdir();
        let config = LogConfig { segment_bytes: 4096, ..LogConfig::default() };
        let log = open_log(dir.path(), "rolling-0", &config).await;
        let mut i = 0;
        while log.segment_count() < 2 {
            log.append(one_record(&format!("record-{i}-{}", "x".repeat(300))), Durability::Written).await.unwrap();
            i += 1;
        }
        assert!(log.dir_sync.borrow().is_some(), "the roll left its directory sync to the background");
        let info = log.append(one_record("durable"), Durability::Synced).await.unwrap();
        assert!(log.dir_sync.borrow().is_none(), "the durable append's sync took the directory sync and waited");
        assert_eq!(info.base_offset, i as i64);
        // The new segment is named after its base offset.
        let base = i as i64 - 1;
        let name = format!("{base:020}.log");
        assert!(dir.path().join(&name).exists(), "{name} in the partition's directory");
        log.close().await.unwrap();
        let reopened = open_log(dir.path(), "rolling-0", &config).await;
        assert_eq!(reopened.log_end(), i as i64 + 1, "every append is there after a reopen");
        reopened.close().await.unwrap();
    });
}
