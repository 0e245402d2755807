//! Disk faults are typed errors; a failed fdatasync makes the partition refuse
//! writes until reopened, while reads keep working.

mod common;

use common::{open, random_batch, read_all, run, Rng};
use shardlog::{
    protocol::record_batch::encode_batch,
    storage::{Durability, Fault, LogConfig, StorageError},
};

#[test]
fn failed_fsync_refuses_writes_until_reopen_and_reads_keep_working() {
    run(|| async {
        let dir = common::tempdir().unwrap();
        let (log, _) = open(dir.path(), LogConfig::default()).await;
        let mut rng = Rng::new(1);
        for _ in 0..3 {
            log.append(random_batch(&mut rng, 2, 300), Durability::Synced).await.unwrap();
        }
        let durable_end = log.log_end();
        let before = read_all(&log, 0).await;
        log.faults().arm(Fault::Sync(libc::EIO));
        let err = log.append(random_batch(&mut rng, 2, 300), Durability::Synced).await.unwrap_err();
        assert!(matches!(err, StorageError::SyncFailed { .. }), "got {err}");
        let text = err.to_string();
        assert!(text.contains("test-0") && text.contains(".log"), "error names partition and file: {text}");
        let err = log.append(random_batch(&mut rng, 1, 10), Durability::Written).await.unwrap_err();
        assert!(matches!(err, StorageError::WritesRefused { .. }), "got {err}");
        let again = log.append(random_batch(&mut rng, 1, 10), Durability::Synced).await.unwrap_err();
        assert!(matches!(again, StorageError::WritesRefused { .. }), "no silent retry of the sync: {again}");
        let after: Vec<u8> = read_all(&log, 0).await;
        assert!(after.starts_with(&before), "reads still serve what was durable");
        assert!(matches!(log.close().await, Err(StorageError::WritesRefused { .. })));
        drop(log);
        let (log, _) = open(dir.path(), LogConfig::default()).await;
        assert!(log.log_end() >= durable_end, "durable data survives");
        assert!(read_all(&log, 0).await.starts_with(&before));
        log.append(random_batch(&mut rng, 1, 10), Durability::Synced).await.expect("writes resume after reopen");
    });
}

#[test]
fn write_errors_are_typed_and_leave_the_log_unchanged() {
    run(|| async {
        let dir = common::tempdir().unwrap();
        let (log, _) = open(dir.path(), LogConfig::default()).await;
        let mut rng = Rng::new(2);
        log.append(random_batch(&mut rng, 2, 3000), Durability::Written).await.unwrap();
        let end = log.log_end();
        let before = read_all(&log, 0).await;

        log.faults().arm(Fault::Write(libc::ENOSPC));
        let err = log.append(random_batch(&mut rng, 2, 3000), Durability::Written).await.unwrap_err();
        assert!(matches!(err, StorageError::NoSpace { .. }) && err.is_retriable(), "got {err}");
        assert_eq!(log.log_end(), end, "nothing was appended");

        log.faults().arm(Fault::Write(libc::EIO));
        let err = log.append(random_batch(&mut rng, 2, 3000), Durability::Written).await.unwrap_err();
        assert!(matches!(err, StorageError::Io { .. }) && !err.is_retriable(), "got {err}");

        let info = log.append(random_batch(&mut rng, 2, 3000), Durability::Synced).await.expect("space is back");
        assert_eq!(info.base_offset, end, "the retried append takes the next offset");
        assert!(read_all(&log, 0).await.starts_with(&before));
        drop(log);
        let (log, _) = open(dir.path(), LogConfig::default()).await;
        assert_eq!(log.log_end(), info.last_offset + 1, "no torn bytes from the failed writes");
    });
}

#[test]
fn invalid_batches_are_rejected_with_the_partition_and_reason() {
    run(|| async {
        let dir = common::tempdir().unwrap();
        let (log, _) = open(dir.path(), LogConfig { max_batch_bytes: 2048, ..LogConfig::default() }).await;
        let good = encode_batch(
            &[shardlog::protocol::record_batch::Record { key: None, value: Some(b"v"), timestamp_delta: 0 }],
            1,
        );
        let mut bad_crc = good.clone();
        *bad_crc.last_mut().unwrap() ^= 1;
        let mut bad_magic = good.clone();
        bad_magic[16] = 1;
        let truncated = good[..good.len() - 1].to_vec();
        let big = random_batch(&mut Rng::new(3), 4, 1000).to_vec();
        for (what, bytes) in [("crc", bad_crc), ("magic", bad_magic), ("truncated", truncated), ("too large", big)] {
            let err = log.append(bytes::BytesMut::from(&bytes[..]), Durability::Written).await.unwrap_err();
            assert!(matches!(err, StorageError::InvalidBatch { .. }), "{what}: got {err}");
            assert!(err.to_string().starts_with("partition test-0: batch rejected"), "{what}: {err}");
        }
        assert_eq!(log.log_end(), 0, "nothing rejected was stored");
        log.append(bytes::BytesMut::from(&good[..]), Durability::Written).await.expect("a valid batch still goes in");
    });
}
