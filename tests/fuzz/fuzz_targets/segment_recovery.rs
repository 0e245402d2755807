//! Arbitrary bytes as a segment file: recovery must keep a valid prefix (or
//! nothing) and every read afterwards must succeed, never panic.

#![no_main]

use libfuzzer_sys::fuzz_target;
use shardlog::storage::{Clock, Faults, LogConfig, PartitionLog, PartitionName};

fuzz_target!(|data: &[u8]| {
    let data = data.to_vec();
    let dir = std::env::temp_dir().join(format!("shardlog-fuzz-recovery-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("00000000000000000000.log"), &data).unwrap();
    let compacted = data.first().is_some_and(|b| b & 1 == 1);
    let config = LogConfig { compacted, ..LogConfig::default() };
    let d = dir.clone();
    glommio::LocalExecutorBuilder::default()
        .spawn(move || async move {
            let (log, _) = PartitionLog::open(&d, PartitionName("fuzz-0".into()), config, Clock::System, Faults::default())
                .await
                .expect("recovery never fails on bad data, it cuts it");
            let mut offset = log.log_start();
            while offset < log.log_end() {
                let slice = log.read(offset, 1 << 20).await.expect("recovered data reads back");
                let bytes = slice.to_vec();
                let mut at = 0;
                let before = offset;
                while let Ok(h) = shardlog::protocol::record_batch::BatchHeader::parse(&bytes[at..], usize::MAX) {
                    offset = h.last_offset() + 1;
                    at += h.total_bytes();
                    if at >= bytes.len() {
                        break;
                    }
                }
                assert!(offset > before, "a read at {before} made no progress");
            }
            log.close().await.unwrap();
        })
        .unwrap()
        .join()
        .unwrap();
    let _ = std::fs::remove_dir_all(&dir);
});
