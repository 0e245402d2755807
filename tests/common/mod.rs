//! Helpers shared by the storage scenario tests: a runtime, a seeded PRNG and
//! batch generators.
#![allow(dead_code)]

pub mod acls;
pub mod broker;
pub mod child;
pub mod cluster;
pub mod consume;
pub mod consumer_cli;
pub mod load;
pub mod members;
pub mod netns;
pub mod null_broker;
pub mod offsets_schema;
pub mod produce;
pub mod proxy;
pub mod sasl;
pub mod scrape;
pub mod tls;
pub mod txn;
pub mod wire;

use std::{future::Future, path::Path, rc::Rc};

use bytes::BytesMut;
use glommio::LocalExecutorBuilder;
use shardlog::{
    protocol::record_batch::{encode_batch, Record},
    storage::{Clock, Faults, LogConfig, PartitionLog, PartitionName, RecoveryReport},
};

/// Runs `f` on a fresh glommio executor on this thread.
pub fn run<F, Fut, T>(f: F) -> T
where
    F: FnOnce() -> Fut + Send + 'static,
    Fut: Future<Output = T> + 'static,
    T: Send + 'static,
{
    LocalExecutorBuilder::default()
        .spawn(f)
        .expect("start a glommio executor")
        .join()
        .expect("executor thread finished")
}

/// xorshift64*: small, seedable, good enough to pick test cases.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Self(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
    pub fn fill(&mut self, buf: &mut [u8]) {
        for chunk in buf.chunks_mut(8) {
            let v = self.next().to_le_bytes();
            chunk.copy_from_slice(&v[..chunk.len()]);
        }
    }
}

/// A producer-style batch of `records` records with random keys and values of
/// up to `value_max` bytes.
pub fn random_batch(rng: &mut Rng, records: usize, value_max: usize) -> BytesMut {
    let mut keys = Vec::with_capacity(records);
    let mut values = Vec::with_capacity(records);
    for _ in 0..records {
        let mut k = vec![0u8; 1 + rng.below(16) as usize];
        rng.fill(&mut k);
        let mut v = vec![0u8; rng.below(value_max as u64 + 1) as usize];
        rng.fill(&mut v);
        keys.push(k);
        values.push(v);
    }
    let recs: Vec<Record<'_>> = keys
        .iter()
        .zip(&values)
        .enumerate()
        .map(|(i, (k, v))| Record { key: Some(k), value: Some(v), timestamp_delta: i as i64 })
        .collect();
    let ts = 1_700_000_000_000 + rng.below(1_000_000) as i64;
    BytesMut::from(&encode_batch(&recs, ts)[..])
}

pub fn name() -> PartitionName {
    PartitionName("test-0".to_string())
}

pub async fn open(dir: &Path, config: LogConfig) -> (Rc<PartitionLog>, RecoveryReport) {
    open_with(dir, config, Clock::System).await
}

pub async fn open_with(dir: &Path, config: LogConfig, clock: Clock) -> (Rc<PartitionLog>, RecoveryReport) {
    let (log, report) = PartitionLog::open(dir, name(), config, clock, Faults::default())
        .await
        .unwrap_or_else(|e| panic!("open {}: {e}", dir.display()));
    (Rc::new(log), report)
}

/// Reads everything from `from` to the log end, batch by batch.
pub async fn read_all(log: &PartitionLog, from: i64) -> Vec<u8> {
    let mut out = Vec::new();
    let mut offset = from;
    while offset < log.log_end() {
        let slice = log.read(offset, 64 << 10).await.expect("read within range");
        let bytes = slice.to_vec();
        assert!(!bytes.is_empty(), "read at {offset} below log end {} returned nothing", log.log_end());
        offset = last_offset_of_batches(&bytes) + 1;
        out.extend_from_slice(&bytes);
    }
    out
}

/// Walks concatenated batches, returning `(base_offset, last_offset, len)`.
pub fn batches_in(mut bytes: &[u8]) -> Vec<(i64, i64, usize)> {
    let mut out = Vec::new();
    while !bytes.is_empty() {
        let h = shardlog::protocol::record_batch::check_batch(bytes, 64 << 20).expect("whole valid batches");
        out.push((h.base_offset, h.last_offset(), h.total_bytes()));
        bytes = &bytes[h.total_bytes()..];
    }
    out
}

fn last_offset_of_batches(bytes: &[u8]) -> i64 {
    batches_in(bytes).last().expect("at least one batch").1
}

/// Copies every regular file of `from` into a new directory `to`.
pub fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        if entry.file_type().unwrap().is_file() {
            std::fs::copy(entry.path(), to.join(entry.file_name())).unwrap();
        }
    }
}

/// A temporary directory on the build disk (`target/tmp`): direct I/O needs a
/// real file system, and /tmp may be tmpfs or overlay.
pub fn tempdir() -> std::io::Result<tempfile::TempDir> {
    tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR"))
}

/// A random producer batch as plain bytes (for the wire-level tests).
pub fn free_batch_bytes(rng: &mut Rng, records: usize) -> Vec<u8> {
    random_batch(rng, records, 300).to_vec()
}
