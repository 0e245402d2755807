//! Durable appends through the shard journal: what the journal holds brings
//! back acknowledged batches whose segment writes never reached the disk.

use std::{path::Path, rc::Rc};

use bytes::{Bytes, BytesMut};

use super::{Durability, PartitionLog};
use crate::{
    protocol::record_batch,
    storage::{
        file::Fault,
        journal::{self, Journal, JournalKey, JournalLink},
        testing::{make_transactional, one_record, run, tempdir},
        Clock, Faults, LogConfig, PartitionName,
    },
};

const KEY: JournalKey = JournalKey { topic_id: [9; 16], partition: 0 };

fn batch(i: usize) -> BytesMut {
    one_record(&format!("record-{i}-{}", "y".repeat(300 + i)))
}

async fn open(data: &Path, generation: u32, replay: &[Bytes]) -> (Rc<PartitionLog>, Rc<Journal>) {
    open_with(data, generation, replay, LogConfig::default()).await
}

async fn open_with(
    data: &Path,
    generation: u32,
    replay: &[Bytes],
    config: LogConfig,
) -> (Rc<PartitionLog>, Rc<Journal>) {
    open_journaled(data, generation, replay, config, false).await
}

/// `page_cache`: the journal writes through the page cache.
async fn open_journaled(
    data: &Path,
    generation: u32,
    replay: &[Bytes],
    config: LogConfig,
    page_cache: bool,
) -> (Rc<PartitionLog>, Rc<Journal>) {
    let journal = Journal::create(data, generation, 0, 8 << 20).await.expect("journal");
    journal.page_cache.set(page_cache);
    let link = JournalLink { journal: journal.clone(), key: KEY };
    let (log, _) = PartitionLog::open_journaled(
        &data.join("t-0"),
        PartitionName("t-0".into()),
        config,
        Clock::System,
        Faults::default(),
        Some(link),
        replay,
    )
    .await
    .expect("open");
    (Rc::new(log), journal)
}

/// After a crash: the log reopened with the batches its journals hold.
async fn reopened_from_journals(data: &Path, config: LogConfig) -> Rc<PartitionLog> {
    let replay = journal::read_all(data).expect("read journals");
    open_with(data, replay.generation, replay.batches(&KEY), config).await.0
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
        // Each append writes its segment before it is answered.
        let direct = LogConfig { write_behind_ms: 0, ..LogConfig::default() };
        let (log, journal) = open_with(&data, 0, &[], direct.clone()).await;
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

        let log = reopened_from_journals(&data, direct).await;
        assert_eq!(log.log_end(), 3);
        assert_eq!(stored(&log).await, expected, "batch 3 at offset 2, not the failed batch 2");
    });
}

/// A log with write-behind whose timed segment writes wait `ms`.
fn behind(ms: u64) -> LogConfig {
    LogConfig { write_behind_ms: ms, ..LogConfig::default() }
}

#[test]
fn acks_1_appends_answered_from_the_journal_come_back_after_a_crash() {
    acks_1_appends_come_back_after_a_crash(false);
}

#[test]
fn acks_1_appends_answered_from_a_page_cache_journal_come_back_after_a_crash() {
    acks_1_appends_come_back_after_a_crash(true);
}

fn acks_1_appends_come_back_after_a_crash(page_cache: bool) {
    run(move || async move {
        let dir = tempdir();
        let data = dir.path().to_path_buf();
        // Segment writes a minute away: the journal alone holds the appends.
        let (log, journal) = open_journaled(&data, 0, &[], behind(60_000), page_cache).await;
        for i in 0..40 {
            log.append(batch(i), Durability::Written).await.unwrap();
        }
        assert_eq!(log.stats().segment_writes.get(), 0, "answered before any segment write");
        assert_eq!(journal.stats.syncs.get(), 0, "nobody asked for a sync");
        assert_eq!(journal.stats.entries.get(), 40, "every append went through the journal");
        let expected = stored(&log).await;
        assert_eq!(last_offset_in(&expected), 39);
        drop(log); // a crash: nothing more reaches the segment
        drop(journal);
        let (log, _) = open_with(&data, 1, &[], behind(0)).await;
        assert_eq!(log.log_end(), 0, "the segment itself holds none of them");
        drop(log);

        let log = reopened_from_journals(&data, behind(0)).await;
        assert_eq!(log.log_end(), 40, "every answered batch is back");
        assert_eq!(stored(&log).await, expected, "byte for byte");
    });
}

#[test]
fn appends_across_journal_files_come_back_after_a_crash() {
    for page_cache in [false, true] {
        run(move || async move {
            let dir = tempdir();
            let data = dir.path().to_path_buf();
            let (log, journal) = open_journaled(&data, 0, &[], behind(60_000), page_cache).await;
            // 700 × 16 KiB: past the first 8 MiB journal file, which is left
            // before a sync covers it; the last append waits for a sync.
            let value = "z".repeat(16 << 10);
            for i in 0..700 {
                log.append(one_record(&format!("{i}-{value}")), Durability::Written).await.unwrap();
            }
            log.append(batch(700), Durability::Synced).await.unwrap();
            assert!(journal.stats.rotations.get() >= 1, "page cache {page_cache}: no rotation");
            assert!(!journal.failed() && journal.stats.entries.get() == 701, "every append went through the journal");
            let expected = stored(&log).await;
            drop(log); // a crash
            drop(journal);
            let log = reopened_from_journals(&data, behind(0)).await;
            assert_eq!(log.log_end(), 701, "page cache {page_cache}");
            assert_eq!(stored(&log).await, expected, "page cache {page_cache}: byte for byte");
        });
    }
}

#[test]
fn segment_writes_follow_in_the_background_fewer_than_the_appends() {
    run(|| async {
        let dir = tempdir();
        let data = dir.path().to_path_buf();
        let (log, journal) = open_with(&data, 0, &[], behind(5)).await;
        let appends = 60;
        for i in 0..appends {
            log.append(batch(i), Durability::Written).await.unwrap();
        }
        glommio::timer::sleep(std::time::Duration::from_millis(100)).await;
        let writes = log.stats().segment_writes.get();
        assert!((1..appends as u64).contains(&writes), "{writes} segment writes for {appends} appends");
        let expected = stored(&log).await;
        drop(log);
        drop(journal);
        // Without the journal: the segment alone holds every batch.
        let (log, _) = open_with(&data, 1, &[], behind(0)).await;
        assert_eq!(log.log_end(), appends as i64);
        assert_eq!(stored(&log).await, expected);
    });
}

#[test]
fn a_partition_that_staged_a_burst_keeps_little_once_it_is_written() {
    run(|| async {
        let dir = tempdir();
        let data = dir.path().to_path_buf();
        let (log, _journal) = open_with(&data, 0, &[], behind(5)).await;
        let value = "b".repeat(16 << 10);
        let mut most = 0;
        for i in 0..24 {
            log.append(one_record(&format!("{i}-{value}")), Durability::Written).await.unwrap();
            most = most.max(log.behind.tail_capacity());
        }
        assert!(most >= 64 << 10, "{most} bytes staged at most");
        glommio::timer::sleep(std::time::Duration::from_millis(100)).await;
        assert!(log.stats().segment_writes.get() >= 1);
        assert!(log.behind.tail_capacity() <= 8 << 10, "{} bytes kept", log.behind.tail_capacity());
    });
}

#[test]
fn a_read_of_bytes_not_yet_in_the_segment_waits_for_their_write() {
    run(|| async {
        let dir = tempdir();
        let data = dir.path().to_path_buf();
        let uncached = |ms| LogConfig { cache_bytes: 0, ..behind(ms) };
        let (direct, _) = open_with(&data.join("direct"), 0, &[], uncached(0)).await;
        let (log, _) = open_with(&data, 0, &[], uncached(60_000)).await;
        for i in 0..12 {
            direct.append(batch(i), Durability::Written).await.unwrap();
            log.append(batch(i), Durability::Written).await.unwrap();
        }
        assert_eq!(log.stats().segment_writes.get(), 0);
        assert_eq!(log.stats().cache_reads.get(), 0);
        let read = stored(&log).await;
        assert!(log.stats().segment_writes.get() >= 1, "the read wrote the segment first");
        assert_eq!(read, stored(&direct).await, "the same bytes as a log that wrote each append");
    });
}

#[test]
fn rolls_under_write_behind_keep_every_batch_through_a_crash() {
    run(|| async {
        let dir = tempdir();
        let data = dir.path().to_path_buf();
        let small = LogConfig { segment_bytes: 8 << 10, ..behind(60_000) };
        let (log, journal) = open_with(&data, 0, &[], small.clone()).await;
        for i in 0..100 {
            log.append(batch(i), Durability::Written).await.unwrap();
        }
        assert!(log.segments().len() >= 4, "{} segments", log.segments().len());
        let expected = stored(&log).await;
        drop(log);
        drop(journal);
        let log = reopened_from_journals(&data, small).await;
        assert_eq!(log.log_end(), 100);
        assert_eq!(stored(&log).await, expected);
        log.close().await.expect("close");
    });
}

#[test]
fn an_abort_before_a_replayed_batch_survives_two_crashes() {
    run(|| async {
        let dir = tempdir();
        let data = dir.path().to_path_buf();
        // The replayed batch opens a transaction: the producer states are
        // not empty when the log checkpoints at open.
        let txn = |producer: i64, sequence: i32| {
            let mut b = batch(sequence as usize);
            make_transactional(&mut b, producer, 0, sequence);
            b
        };
        let abort = record_batch::TxnMarker { producer_id: 5, producer_epoch: 0, commit: false, coordinator_epoch: 1 };
        let (log, journal) = open_with(&data, 0, &[], behind(5)).await;
        log.append(txn(5, 0), Durability::Synced).await.unwrap();
        log.append_marker(abort, 0, Durability::Synced).await.unwrap();
        glommio::timer::sleep(std::time::Duration::from_millis(50)).await; // in the segment
        log.append(txn(6, 0), Durability::Synced).await.unwrap();
        let aborted = log.aborted_index();
        assert_eq!(aborted.len(), 1);
        drop(log); // the last batch is in the journal only
        drop(journal);

        let replay = journal::read_all(&data).expect("read journals");
        let (log, _) = open_with(&data, replay.generation, replay.batches(&KEY), behind(0)).await;
        assert_eq!(log.log_end(), 3, "the last batch came back from the journal");
        assert_eq!(log.aborted_index(), aborted);
        drop(log);
        let (log, _) = open_with(&data, replay.generation + 1, &[], behind(0)).await;
        assert_eq!(log.aborted_index(), aborted, "still known after a second crash");
    });
}

#[test]
fn a_large_acks_1_run_writes_its_segment_and_the_small_ones_around_it_come_back_after_a_crash() {
    for page_cache in [false, true] {
        run(move || async move {
            let dir = tempdir();
            let data = dir.path().to_path_buf();
            let (log, journal) = open_journaled(&data, 0, &[], behind(60_000), page_cache).await;
            let large = one_record(&"L".repeat(super::behind::BEHIND_BYTES as usize));
            for i in 0..5 {
                log.append(batch(i), Durability::Written).await.unwrap();
            }
            assert_eq!(log.stats().segment_writes.get(), 0, "page cache {page_cache}: small appends wait");
            log.append(large, Durability::Written).await.unwrap();
            let writes = log.stats().segment_writes.get();
            assert!(writes >= 1, "page cache {page_cache}: the large append wrote the segment");
            for i in 6..11 {
                log.append(batch(i), Durability::Written).await.unwrap();
            }
            assert_eq!(journal.stats.entries.get(), 10, "page cache {page_cache}: only the small ones were journaled");
            assert_eq!(log.stats().segment_writes.get(), writes, "page cache {page_cache}: the small ones wait again");
            let expected = stored(&log).await;
            assert_eq!(last_offset_in(&expected), 10);
            drop(log); // a crash: the last five are in the journal only
            drop(journal);
            let (log, _) = open_with(&data, 1, &[], behind(0)).await;
            assert_eq!(log.log_end(), 6, "page cache {page_cache}: the segment holds the first six");
            drop(log);
            let log = reopened_from_journals(&data, behind(0)).await;
            assert_eq!(log.log_end(), 11, "page cache {page_cache}: every answered batch is back");
            assert_eq!(stored(&log).await, expected, "page cache {page_cache}: byte for byte");
        });
    }
}

#[test]
fn a_durable_append_after_a_large_unjournaled_run_syncs_the_segment() {
    run(|| async {
        let dir = tempdir();
        let data = dir.path().to_path_buf();
        let (log, journal) = open_with(&data, 0, &[], behind(60_000)).await;
        log.append(batch(0), Durability::Written).await.unwrap();
        log.append(one_record(&"L".repeat(super::behind::BEHIND_BYTES as usize)), Durability::Written).await.unwrap();
        log.append(batch(2), Durability::Written).await.unwrap();
        let before = log.stats().syncs.get();
        // The journal misses offset 1: its sync alone would not make 0..=3
        // durable.
        log.append(batch(3), Durability::Synced).await.unwrap();
        assert!(log.stats().syncs.get() > before, "the segment was synced");
        // Once the segment's sync covers the gap, the journal holds what follows.
        let syncs = log.stats().syncs.get();
        log.append(batch(4), Durability::Synced).await.unwrap();
        log.append(batch(5), Durability::Synced).await.unwrap();
        assert!(journal.stats.syncs.get() >= 1, "later durable appends wait for the journal");
        assert!(log.stats().syncs.get() <= syncs + 1, "{} segment syncs", log.stats().syncs.get());
    });
}
