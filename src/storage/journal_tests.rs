//! The journal's file format: entries read back up to a torn one, recycled
//! files, padding, names.

use super::*;

use std::path::Path;

fn key(p: i32) -> JournalKey {
    JournalKey { topic_id: [7; 16], partition: p }
}

fn write(entries: &[(JournalKey, &[u8])], generation: u32, number: u32) -> Vec<u8> {
    let mut out = vec![0u8; 8192];
    let mut at = 0;
    for (k, b) in entries {
        at += encode(&mut out[at..], generation, number, k, b);
    }
    out
}

#[test]
fn a_file_reads_back_up_to_its_first_torn_entry() {
    let mut bytes = write(&[(key(1), b"one"), (key(2), b"two"), (key(1), b"three")], 0, 4);
    let whole = decode_file(&Bytes::from(bytes.clone()), 0, 4);
    let got: Vec<_> = whole.iter().map(|(k, b)| (k.partition, b.to_vec())).collect();
    assert_eq!(got, vec![(1, b"one".to_vec()), (2, b"two".to_vec()), (1, b"three".to_vec())]);
    // Corrupt the second entry's payload: the third is not trusted either.
    bytes[HEADER + 3 + HEADER] ^= 0xff;
    assert_eq!(decode_file(&Bytes::from(bytes), 0, 4).len(), 1);
}

#[test]
fn a_recycled_files_old_entries_are_not_read_as_new() {
    // The old file: two writes' worth; the new run overwrote the first block only.
    let mut bytes = write(&[(key(1), &[1u8; 5000])], 0, 3);
    let fresh = write(&[(key(2), b"new")], 0, 9);
    bytes[..4096].copy_from_slice(&fresh[..4096]);
    let got = decode_file(&Bytes::from(bytes), 0, 9);
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].0.partition, 2);
}

#[test]
fn padding_skips_to_the_next_write() {
    let mut bytes = write(&[(key(1), b"a")], 1, 0);
    let second = write(&[(key(1), b"b")], 1, 0);
    bytes[4096..].copy_from_slice(&second[..4096]);
    let got: Vec<_> = decode_file(&Bytes::from(bytes), 1, 0).into_iter().map(|(_, b)| b.to_vec()).collect();
    assert_eq!(got, vec![b"a".to_vec(), b"b".to_vec()]);
}

#[test]
fn names_parse_back() {
    assert_eq!(parse_name(&file_name(12, 3, 45)), Some((12, 3, 45)));
    assert_eq!(parse_name("000001-000-00000002.tmp"), None);
}

/// Writes 1 MiB entries until the journal has rotated `rotations` times in
/// all, letting its background work run between writes.
async fn fill_until(journal: &Rc<Journal>, rotations: u64) {
    while journal.stats.rotations.get() < rotations {
        let number = journal.push(key(1), [Bytes::from(vec![5u8; 1 << 20])], false).expect("journal failed");
        assert!(journal.wait_written(number).await, "journal failed");
        glommio::timer::sleep(std::time::Duration::from_millis(5)).await;
    }
}

fn files_in(data: &Path) -> usize {
    std::fs::read_dir(data.join(DIR)).expect("journal dir").count()
}

#[test]
fn a_slow_checkpoint_does_not_make_a_rotation_wait_for_its_next_file() {
    crate::storage::testing::run(|| async {
        let dir = crate::storage::testing::tempdir();
        let journal = Journal::create(dir.path(), 0, 0, FILE_BYTES_MIN).await.expect("journal");
        // No checkpoint retires a file: the shard makes new ones up to its
        // cap, each ready before the file before it is full.
        let ahead = (FILES_KEPT - 1) as u64;
        fill_until(&journal, ahead).await;
        assert_eq!(journal.stats.rotation_waits.get(), 0, "a rotation waited for its file");
        assert_eq!(files_in(dir.path()), FILES_KEPT, "the cap is reached, not passed");
        // At the cap, one more rotation makes its file itself.
        fill_until(&journal, ahead + 1).await;
        assert_eq!(journal.stats.rotation_waits.get(), 1);
        // A checkpoint retires the full files: kept for reuse to the cap, and
        // the next rotations reuse them without waiting.
        journal.retire_through(journal.pushed()).await;
        glommio::timer::sleep(std::time::Duration::from_millis(50)).await;
        assert_eq!(files_in(dir.path()), FILES_KEPT, "retired files beyond the cap are deleted");
        fill_until(&journal, ahead + 3).await;
        assert_eq!(journal.stats.rotation_waits.get(), 1, "a rotation after the checkpoint waited");
        assert!(!journal.failed());
    });
}
