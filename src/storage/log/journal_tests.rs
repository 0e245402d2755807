//! Durable appends through the shard journal: what the journal holds brings
//! back acknowledged batches whose segment writes never reached the disk.

use std::{path::Path, rc::Rc};

use bytes::{Bytes, BytesMut};

use super::{Durability, PartitionLog};
use crate::{
    protocol::record_batch::{self, Record},
    storage::{
        file::Fault,
        journal::{self, Journal, JournalKey, JournalLink},
        testing::{run, tempdir},
        Clock, Faults, LogConfig, PartitionName,
    },
};

const KEY: JournalKey = JournalKey { topic_id: [9; 16], partition: 0 };

fn batch(i: usize) -> BytesMut {
    let value = format!("record-{i}-{}", "y".repeat(300 + i));
    let records = [Record { key: Some(b"k"), value: Some(value.as_bytes()), timestamp_delta: 0 }];
    BytesMut::from(&record_batch::encode_batch(&records, 1_790_000_000_000)[..])
}

async fn open(data: &Path, generation: u32, replay: &[Bytes]) -> (Rc<PartitionLog>, Rc<Journal>) {
    let journal = Journal::create(data, generation, 0, 8 << 20).await.expect("journal");
    let link = JournalLink { journal: journal.clone(), key: KEY };
    let (log, _) = PartitionLog::open_journaled(
        &data.join("t-0"),
        PartitionName("t-0".into()),
        LogConfig::default(),
        Clock::System,
        Faults::default(),
        Some(link),
        replay,
    )
    .await
    .expect("open");
    (Rc::new(log), journal)
}

/// Every batch of the log, as stored.
async fn stored(log: &PartitionLog) -> Vec<u8> {
    let mut out = Vec::new();
    let mut offset = log.log_start();
    while offset < log.log_end() {
        let slice = log.read(offset, 1 << 20).await.expect("read");
        for chunk in &slice.chunks {
            out.extend_from_slice(&chunk.load().await.expect("load"));
        }
        offset = last_offset_in(&out) + 1;
    }
    out
}

fn last_offset_in(bytes: &[u8]) -> i64 {
    let mut at = 0;
    let mut last = -1;
    while let Ok(h) = record_batch::BatchHeader::parse(&bytes[at..], usize::MAX) {
        last = h.last_offset();
        at += h.total_bytes();
        if at >= bytes.len() {
            break;
        }
    }
    last
}

/// What a power loss does to writes no sync covered: the blocks read as
/// they were before (zeros, ahead of the appends), from `from` on.
fn lose_writes_after(segment: &Path, from: u64) {
    use std::os::unix::fs::FileExt;
    let f = std::fs::OpenOptions::new().write(true).open(segment).expect("segment");
    let len = f.metadata().expect("stat").len();
    f.write_all_at(&vec![0u8; (len - from) as usize], from).expect("zero");
    f.sync_all().expect("sync");
}

fn segment_file(data: &Path) -> std::path::PathBuf {
    let dir = data.join("t-0");
    let mut logs: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "log"))
        .collect();
    logs.sort();
    logs.pop().expect("a segment")
}

#[test]
fn acknowledged_batches_come_back_from_the_journal_when_their_segment_writes_are_lost() {
    run(|| async {
        let dir = tempdir();
        let data = dir.path().to_path_buf();
        let (log, journal) = open(&data, 0, &[]).await;
        // The first durable append syncs the segment: the journal holds
        // nothing of the log yet. The rest wait only for the journal.
        log.append(batch(0), Durability::Synced).await.unwrap();
        let synced_bytes = stored(&log).await.len() as u64;
        let syncs = log.stats().syncs.get();
        for i in 1..40 {
            log.append(batch(i), Durability::Synced).await.unwrap();
        }
        assert_eq!(log.stats().syncs.get(), syncs, "no segment sync after the first durable append");
        assert!(journal.stats.entries.get() >= 39, "the journal took every later batch");
        let expected = stored(&log).await;
        drop(log);
        drop(journal);
        lose_writes_after(&segment_file(&data), synced_bytes);

        let replay = journal::read_all(&data).expect("read journals");
        assert_eq!(replay.generation, 1);
        let (log, _) = open(&data, replay.generation, replay.batches(&KEY)).await;
        assert_eq!(log.log_end(), 40, "every acknowledged batch is back");
        assert_eq!(stored(&log).await, expected, "byte for byte");
        assert!(replay.finish(&data).expect("finish") >= 1);
        let left: Vec<String> = std::fs::read_dir(data.join(journal::DIR))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert!(left.iter().all(|n| n.starts_with("000001-")), "only this run's files are left: {left:?}");
    });
}

#[test]
fn a_run_whose_segment_write_failed_is_superseded_by_the_batch_that_took_its_offset() {
    run(|| async {
        let dir = tempdir();
        let data = dir.path().to_path_buf();
        let (log, journal) = open(&data, 0, &[]).await;
        log.append(batch(0), Durability::Synced).await.unwrap();
        let synced_bytes = stored(&log).await.len() as u64;
        log.append(batch(1), Durability::Synced).await.unwrap();
        log.faults().arm(Fault::Write(libc::EIO));
        assert!(log.append(batch(2), Durability::Synced).await.is_err(), "the armed write fails");
        let info = log.append(batch(3), Durability::Synced).await.unwrap();
        assert_eq!(info.base_offset, 2, "the next batch takes the failed one's offset");
        let expected = stored(&log).await;
        drop(log);
        drop(journal);
        lose_writes_after(&segment_file(&data), synced_bytes);

        let replay = journal::read_all(&data).expect("read journals");
        let (log, _) = open(&data, replay.generation, replay.batches(&KEY)).await;
        assert_eq!(log.log_end(), 3);
        assert_eq!(stored(&log).await, expected, "batch 3 at offset 2, not the failed batch 2");
    });
}
