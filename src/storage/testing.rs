//! What the storage unit tests share: a directory on a real file system, a
//! glommio executor to run a test in, and a partition log opened there.

use std::{path::Path, rc::Rc};

use bytes::BytesMut;

use super::{Clock, Faults, LogConfig, PartitionLog, PartitionName};
use crate::protocol::record_batch::{self, Record};

/// A fresh directory under `target/unit-tmp`: direct I/O needs a real file
/// system, not the tmpfs /tmp may be.
pub fn tempdir() -> tempfile::TempDir {
    let base = Path::new(env!("CARGO_MANIFEST_DIR")).join("target").join("unit-tmp");
    std::fs::create_dir_all(&base).expect("create target/unit-tmp");
    tempfile::tempdir_in(base).expect("tempdir")
}

/// A plain batch of one record, key `k`, holding `value`.
pub fn one_record(value: &str) -> BytesMut {
    let records = [Record { key: Some(b"k"), value: Some(value.as_bytes()), timestamp_delta: 0 }];
    BytesMut::from(&record_batch::encode_batch(&records, 1_790_000_000_000)[..])
}

/// Makes an encoded batch transactional for `producer_id` at `epoch` from
/// `base_sequence`, laid out by hand: attributes 0x10 and the producer
/// fields at their v2 positions, and the CRC over attributes..end
/// recomputed.
pub fn make_transactional(b: &mut [u8], producer_id: i64, epoch: i16, base_sequence: i32) {
    b[21..23].copy_from_slice(&0x10i16.to_be_bytes());
    b[43..51].copy_from_slice(&producer_id.to_be_bytes());
    b[51..53].copy_from_slice(&epoch.to_be_bytes());
    b[53..57].copy_from_slice(&base_sequence.to_be_bytes());
    let crc = record_batch::crc32c(&b[21..]);
    b[17..21].copy_from_slice(&crc.to_be_bytes());
}

/// Runs a test body on a glommio executor of its own.
pub fn run<Fut: std::future::Future<Output = ()> + 'static>(f: impl FnOnce() -> Fut + Send + 'static) {
    glommio::LocalExecutorBuilder::default().spawn(f).expect("executor").join().expect("test thread");
}

/// Opens (recovering) the log of partition `name` in `dir`.
pub async fn open_log(dir: &Path, name: &str, config: &LogConfig) -> Rc<PartitionLog> {
    let name = PartitionName(name.to_string());
    let (log, _) = PartitionLog::open(dir, name, config.clone(), Clock::System, Faults::default())
        .await
        .unwrap_or_else(|e| panic!("open {}: {e}", dir.display()));
    Rc::new(log)
}
