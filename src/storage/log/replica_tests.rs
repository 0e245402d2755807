//! A follower's copy of a leader's log (`append_copied`): the same bytes at
//! the same offsets, the leader's transactions and producers known, a fetch
//! answer cut mid-batch taken in two goes, and a batch that would leave a
//! gap refused.

use bytes::BytesMut;

use super::Durability;
use crate::{
    protocol::record_batch::{self, Record, TxnMarker},
    storage::{
        error::StorageError,
        testing::{make_transactional, open_log, run, tempdir},
        LogConfig,
    },
};

fn plain(i: usize) -> BytesMut {
    let value = format!("record-{i}-{}", "y".repeat(100 + i));
    let records = [Record { key: Some(b"k"), value: Some(value.as_bytes()), timestamp_delta: 0 }];
    BytesMut::from(&record_batch::encode_batch(&records, 1_790_000_000_000 + i as i64)[..])
}

/// A transactional batch of two records from producer 77, epoch 0.
fn transactional(base_sequence: i32) -> BytesMut {
    let records = [
        Record { key: None, value: Some(b"t-a"), timestamp_delta: 0 },
        Record { key: None, value: Some(b"t-b"), timestamp_delta: 1 },
    ];
    let mut b = record_batch::encode_batch(&records, 1_790_000_000_500);
    make_transactional(&mut b, 77, 0, base_sequence);
    BytesMut::from(&b[..])
}

/// Every batch of `log` from offset 0, concatenated (reads stop at
/// segment ends, so this reads on until the log end).
async fn whole(log: &super::PartitionLog) -> Vec<u8> {
    let mut out = Vec::new();
    let mut offset = 0;
    while offset < log.log_end() {
        let bytes = log.read(offset, 1 << 20).await.unwrap().to_vec();
        let mut at = 0;
        while at < bytes.len() {
            let h = record_batch::BatchHeader::parse(&bytes[at..], usize::MAX).unwrap();
            offset = h.last_offset() + 1;
            at += h.total_bytes();
        }
        out.extend_from_slice(&bytes);
    }
    out
}

/// Equal byte strings, without printing them whole when they are not.
fn same(a: &[u8], b: &[u8], what: &str) {
    assert!(a == b, "{what}: {} bytes against {}", a.len(), b.len());
}

#[test]
fn a_follower_holds_the_leaders_bytes_at_the_leaders_offsets() {
    run(|| async {
        let (ldir, fdir) = (tempdir(), tempdir());
        let config = LogConfig::default();
        let leader = open_log(ldir.path(), "copied-0", &config).await;
        for i in 0..5 {
            leader.append(plain(i), Durability::Written).await.unwrap();
        }
        leader.append(transactional(0), Durability::Written).await.unwrap();
        let marker = TxnMarker { producer_id: 77, producer_epoch: 0, commit: false, coordinator_epoch: 1 };
        leader.append_marker(marker, 1_790_000_001_000, Durability::Written).await.unwrap();
        leader.append(plain(5), Durability::Synced).await.unwrap();
        let all = leader.read(0, 1 << 20).await.unwrap().to_vec();

        let follower = open_log(fdir.path(), "copied-0", &config).await;
        // A fetch answer cut inside the third batch: two go in, the rest
        // waits for the next fetch.
        let first_two = record_batch::BatchHeader::parse(&all, usize::MAX).unwrap().total_bytes();
        let second = record_batch::BatchHeader::parse(&all[first_two..], usize::MAX).unwrap().total_bytes();
        let cut = first_two + second + 10;
        assert_eq!(follower.append_copied(&all[..cut]).await.unwrap(), 2);
        // Fetched again from its end, and once more from the start: what
        // it holds is skipped, not written twice.
        assert_eq!(follower.append_copied(&all[first_two + second..]).await.unwrap(), leader.log_end());
        assert_eq!(follower.append_copied(&all).await.unwrap(), leader.log_end());
        same(&whole(&follower).await, &all, "the follower's log is the leader's, byte for byte");
        assert_eq!(follower.last_stable_offset(), leader.last_stable_offset());
        assert_eq!(follower.aborted_index(), leader.aborted_index(), "the leader's aborted transaction is known");
        assert_eq!(
            follower.producer(77).map(|p| (p.epoch, p.batches.len(), p.txn_first)),
            leader.producer(77).map(|p| (p.epoch, p.batches.len(), p.txn_first)),
            "the producer's sequence is known, for when this follower leads"
        );

        // A batch beyond the end (records missed) is refused by name.
        let mut far = plain(9);
        record_batch::patch_base_offset(&mut far, leader.log_end() + 5);
        match follower.append_copied(&far).await {
            Err(StorageError::InvalidBatch { partition, .. }) => assert_eq!(partition.0, "copied-0"),
            other => panic!("a gap must be refused, got {other:?}"),
        }
        follower.sync_through(follower.log_end()).await.unwrap();
        follower.close().await.unwrap();
        drop(follower);
        let reopened = open_log(fdir.path(), "copied-0", &config).await;
        same(&whole(&reopened).await, &all, "and so it reopens");
    });
}

#[test]
fn a_cut_follower_ends_where_its_leader_says_and_copies_on_from_there() {
    run(|| async {
        let (ldir, fdir) = (tempdir(), tempdir());
        // Small segments: the cut falls in one and removes the later ones.
        let config = LogConfig { segment_bytes: 4096, ..LogConfig::default() };
        let leader = open_log(ldir.path(), "cut-0", &config).await;
        for i in 0..40 {
            leader.append(plain(i), Durability::Written).await.unwrap();
        }
        let all = whole(&leader).await;
        let follower = open_log(fdir.path(), "cut-0", &config).await;
        let mut at = 0;
        while at < all.len() {
            // One segment's worth at a time, as fetches would bring it.
            let h = record_batch::BatchHeader::parse(&all[at..], usize::MAX).unwrap();
            follower.append_copied(&all[at..at + h.total_bytes()]).await.unwrap();
            at += h.total_bytes();
        }
        assert_eq!(follower.log_end(), 40);
        // Records the leader never had, at offsets 40..45.
        for i in 100..105 {
            follower.append(plain(i), Durability::Written).await.unwrap();
        }
        assert!(follower.segment_count() > 2, "the test needs several segments");
        follower.sync_through(follower.log_end()).await.unwrap();
        follower.close().await.unwrap();
        drop(follower);
        crate::storage::replica_files::save_epochs(fdir.path(), &[(0, 0), (1, 40)]).unwrap();

        let removed = crate::storage::replica_files::truncate_dir(fdir.path(), 17).unwrap();
        assert!(removed > 0);
        assert_eq!(crate::storage::replica_files::load_epochs(fdir.path()), vec![(0, 0)], "epoch 1 was cut");
        let cut = open_log(fdir.path(), "cut-0", &config).await;
        assert_eq!(cut.log_end(), 17);
        let kept = whole(&cut).await;
        same(&kept, &all[..kept.len()], "what is left is the leader's");
        let mut offset = 17;
        while offset < leader.log_end() {
            let rest = leader.read(offset, 1 << 20).await.unwrap().to_vec();
            offset = cut.append_copied(&rest).await.unwrap();
        }
        assert_eq!(cut.log_end(), 40);
        same(&whole(&cut).await, &all, "and then the leader's whole log");
    });
}

#[test]
fn a_follower_started_over_at_its_leaders_log_start_copies_on_from_there() {
    run(|| async {
        let (ldir, fdir) = (tempdir(), tempdir());
        let config = LogConfig { segment_bytes: 4096, ..LogConfig::default() };
        let leader = open_log(ldir.path(), "over-0", &config).await;
        for i in 0..30 {
            leader.append(plain(i), Durability::Written).await.unwrap();
        }
        // A follower that had only the first records, over several segments.
        let follower = open_log(fdir.path(), "over-0", &config).await;
        let head = leader.read(0, 1 << 20).await.unwrap().to_vec();
        let h = record_batch::BatchHeader::parse(&head, usize::MAX).unwrap();
        follower.append_copied(&head[..h.total_bytes()]).await.unwrap();
        follower.sync_through(follower.log_end()).await.unwrap();
        follower.close().await.unwrap();
        drop(follower);

        let removed = crate::storage::replica_files::start_at(fdir.path(), 22).unwrap();
        assert!(removed > 0);
        let over = open_log(fdir.path(), "over-0", &config).await;
        assert_eq!((over.log_start(), over.log_end()), (22, 22), "empty, starting at the leader's start");
        let mut offset = 22;
        while offset < leader.log_end() {
            let rest = leader.read(offset, 1 << 20).await.unwrap().to_vec();
            offset = over.append_copied(&rest).await.unwrap();
        }
        assert_eq!(over.log_end(), 30);
        over.sync_through(over.log_end()).await.unwrap();
        over.close().await.unwrap();
        drop(over);
        let reopened = open_log(fdir.path(), "over-0", &config).await;
        assert_eq!((reopened.log_start(), reopened.log_end()), (22, 30), "and so it reopens");
        let copied = reopened.read(22, 1 << 20).await.unwrap().to_vec();
        let original = leader.read(22, 1 << 20).await.unwrap().to_vec();
        same(
            &copied[..copied.len().min(original.len())],
            &original[..copied.len().min(original.len())],
            "the leader's bytes",
        );
    });
}
