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
        testing::{open_log, run, tempdir},
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
    b[21..23].copy_from_slice(&0x10i16.to_be_bytes());
    b[43..51].copy_from_slice(&77i64.to_be_bytes());
    b[51..53].copy_from_slice(&0i16.to_be_bytes());
    b[53..57].copy_from_slice(&base_sequence.to_be_bytes());
    let crc = record_batch::crc32c(&b[21..]);
    b[17..21].copy_from_slice(&crc.to_be_bytes());
    BytesMut::from(&b[..])
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
        let copy = follower.read(0, 1 << 20).await.unwrap().to_vec();
        assert_eq!(copy, all, "the follower's log is the leader's, byte for byte");
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
        assert_eq!(reopened.read(0, 1 << 20).await.unwrap().to_vec(), all, "and so it reopens");
    });
}
