//! The journal's file format: entries read back up to a torn one, recycled
//! files, padding, names.

use super::*;

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
