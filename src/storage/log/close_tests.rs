//! A closed log takes no more work: an append queued behind `close` (a
//! produce that found the partition before its topic was deleted,
//! reconfigured or moved) is refused rather than written into files a new
//! log object may already own, and retention, compaction and DeleteRecords
//! leave the directory alone.

use std::{path::Path, rc::Rc};

use bytes::BytesMut;

use super::{Durability, PartitionLog};
use crate::storage::{
    error::StorageError,
    testing::{one_record, open_log, run, tempdir},
    LogConfig,
};

fn batch(i: usize) -> BytesMut {
    one_record(&format!("record-{i}-{}", "x".repeat(200)))
}

async fn open(dir: &Path, config: &LogConfig) -> Rc<PartitionLog> {
    open_log(dir, "closing-0", config).await
}

fn files(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> =
        std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    names.sort();
    names
}

#[test]
fn an_append_queued_behind_close_is_refused_and_the_reopened_log_ends_where_close_left_it() {
    run(|| async {
        let dir = tempdir();
        let config = LogConfig::default();
        let log = open(dir.path(), &config).await;
        for i in 0..3 {
            log.append(batch(i), Durability::Synced).await.unwrap();
        }
        let (closing, appending) = (log.clone(), log.clone());
        let close = glommio::spawn_local(async move { closing.close().await });
        let late = glommio::spawn_local(async move { appending.append(batch(3), Durability::Synced).await });
        close.await.expect("close");
        match late.await {
            Err(StorageError::Closed { partition }) => assert_eq!(partition.0, "closing-0"),
            other => panic!("an append after close must be refused, got {other:?}"),
        }
        assert!(matches!(log.append(batch(4), Durability::Written).await, Err(StorageError::Closed { .. })));
        assert!(matches!(log.delete_records(1).await, Err(StorageError::Closed { .. })));
        drop(log);
        let reopened = open(dir.path(), &config).await;
        assert_eq!(reopened.log_end(), 3, "nothing written after close");
        assert_eq!(reopened.append(batch(5), Durability::Synced).await.unwrap().base_offset, 3);
        reopened.close().await.unwrap();
    });
}

#[test]
fn retention_and_compaction_leave_a_closed_logs_files_alone() {
    run(|| async {
        let dir = tempdir();
        let config =
            LogConfig { segment_bytes: 4096, retention_bytes: Some(1), cache_bytes: 0, ..LogConfig::default() };
        let log = open(dir.path(), &config).await;
        let mut i = 0;
        while log.segment_count() < 4 {
            log.append(batch(i), Durability::Written).await.unwrap();
            i += 1;
        }
        log.close().await.unwrap();
        let before = files(dir.path());
        // The directory now belongs to whoever opens it next (a topic of the
        // same name created again); the closed log's maintenance pass, still
        // holding it, must not delete or replace files by name there.
        let outcome = log.enforce_retention().await.expect("retention on a closed log");
        assert_eq!(outcome.segments_deleted, 0);
        assert!(log.compact(0).await.is_ok());
        assert_eq!(files(dir.path()), before, "the closed log left its directory as close did");
    });
}
