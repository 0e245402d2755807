//! Model-based test: random appends (random sizes, record counts, durability,
//! concurrency), rolls, clean and crash reopens, retention and reads, each
//! checked against a plain in-memory list of the batches appended.

mod common;

use std::rc::Rc;

use common::{batches_in, open, random_batch, run, Rng};
use shardlog::{
    protocol::record_batch::patch_base_offset,
    storage::{batch_cache, open_files, Durability, LogConfig, PartitionLog, StorageError},
};

struct ModelBatch {
    base: i64,
    last: i64,
    bytes: Vec<u8>,
}

fn config() -> LogConfig {
    LogConfig {
        segment_bytes: 96 << 10,
        retention_bytes: Some(768 << 10),
        retention_ms: None,
        preallocate_step_bytes: 64 << 10,
        cache_bytes: 48 << 10,
        ..LogConfig::default()
    }
}

#[test]
fn random_operations_match_the_model() {
    model_runs(1..=12, None);
}

/// The same with the shard's resources squeezed: one segment file open at a
/// time (every other file's descriptors close, and reopen on use), and a
/// shard-wide batch cache of 16 KiB.
#[test]
fn random_operations_match_the_model_with_one_open_file_and_a_tiny_cache() {
    model_runs(101..=106, Some((1, 16 << 10)));
}

fn model_runs(seeds: std::ops::RangeInclusive<u64>, squeeze: Option<(usize, usize)>) {
    for seed in seeds {
        run(move || async move {
            if let Some((files, cache)) = squeeze {
                open_files::set_limit(files);
                batch_cache::shard_cache().set_limit(cache);
            }
            let dir = common::tempdir().unwrap();
            let mut rng = Rng::new(seed);
            let (mut log, _) = open(dir.path(), config()).await;
            let mut model: Vec<ModelBatch> = Vec::new();
            let mut reads = (0u64, 0u64); // (cache, disk), summed over reopens
            let tally = |log: &PartitionLog, reads: &mut (u64, u64)| {
                reads.0 += log.stats().cache_reads.get();
                reads.1 += log.stats().disk_reads.get();
            };
            for step in 0..260 {
                let what = rng.below(100);
                let ctx = format!("seed {seed} step {step}");
                if what < 50 {
                    append_one(&log, &mut rng, &mut model, &ctx).await;
                } else if what < 56 {
                    append_concurrently(&log, &mut rng, &mut model, &ctx).await;
                } else if what < 82 {
                    check_random_read(&log, &mut rng, &model, &ctx).await;
                } else if what < 87 {
                    log.close().await.unwrap();
                    tally(&log, &mut reads);
                    drop(log);
                    log = open(dir.path(), config()).await.0;
                    check_bounds(&log, &model, &ctx);
                } else if what < 92 {
                    // A crash: no close, no final checkpoint; the I/O in
                    // flight lands, nothing after it runs.
                    tally(&log, &mut reads);
                    log.halt().await;
                    drop(log);
                    log = open(dir.path(), config()).await.0;
                    check_bounds(&log, &model, &ctx);
                } else {
                    let outcome = log.enforce_retention().await.unwrap();
                    model.retain(|b| b.last >= outcome.log_start);
                    check_bounds(&log, &model, &ctx);
                    let segs = log.segments();
                    let oldest = segs[0].1;
                    assert!(
                        segs.len() == 1 || log.size_bytes() - oldest < 768 << 10,
                        "{ctx}: retention left more than retention.bytes beyond the oldest segment"
                    );
                }
            }
            // Finally every remaining byte, read front to back, is the model.
            let all = common::read_all(&log, log.log_start()).await;
            let expected: Vec<u8> = model.iter().flat_map(|b| b.bytes.iter().copied()).collect();
            assert!(all == expected, "seed {seed}: full read differs from the model");
            assert!(log.segment_count() > 1, "seed {seed}: the workload rolled segments");
            tally(&log, &mut reads);
            assert!(reads.0 > 0 && reads.1 > 0, "seed {seed}: both read paths ran: {reads:?}");
            if squeeze.is_some() {
                let files = open_files::usage();
                assert!(files.open <= 1 && files.closes > 10, "seed {seed}: files were closed and reopened: {files:?}");
                assert!(batch_cache::shard_cache().usage().evicted_bytes > 0, "seed {seed}: the shard budget evicted");
            }
        });
    }
}

fn batch_for(rng: &mut Rng) -> bytes::BytesMut {
    let records = 1 + rng.below(20) as usize;
    let value_max = if rng.below(30) == 0 { 40_000 } else { 1 + rng.below(900) as usize };
    random_batch(rng, records, value_max)
}

fn durability(rng: &mut Rng) -> Durability {
    if rng.below(3) == 0 {
        Durability::Synced
    } else {
        Durability::Written
    }
}

async fn append_one(log: &PartitionLog, rng: &mut Rng, model: &mut Vec<ModelBatch>, ctx: &str) {
    let batch = batch_for(rng);
    let mut expected = batch.to_vec();
    let end_before = log.log_end();
    let info = log.append(batch, durability(rng)).await.unwrap_or_else(|e| panic!("{ctx}: append: {e}"));
    assert_eq!(info.base_offset, end_before, "{ctx}: offsets continue the log");
    patch_base_offset(&mut expected, info.base_offset);
    model.push(ModelBatch { base: info.base_offset, last: info.last_offset, bytes: expected });
}

async fn append_concurrently(log: &Rc<PartitionLog>, rng: &mut Rng, model: &mut Vec<ModelBatch>, ctx: &str) {
    let mut tasks = Vec::new();
    for _ in 0..(2 + rng.below(6)) {
        let batch = batch_for(rng);
        let expected = batch.to_vec();
        let log = log.clone();
        let d = durability(rng);
        tasks.push(glommio::spawn_local(async move { (log.append(batch, d).await, expected) }));
    }
    let mut added = Vec::new();
    for t in tasks {
        let (res, mut expected) = t.await;
        let info = res.unwrap_or_else(|e| panic!("{ctx}: concurrent append: {e}"));
        patch_base_offset(&mut expected, info.base_offset);
        added.push(ModelBatch { base: info.base_offset, last: info.last_offset, bytes: expected });
    }
    added.sort_by_key(|b| b.base);
    for b in added {
        let next = model.last().map_or(b.base, |m| m.last + 1);
        assert_eq!(b.base, next, "{ctx}: concurrent appends got dense offsets");
        model.push(b);
    }
}

fn check_bounds(log: &PartitionLog, model: &[ModelBatch], ctx: &str) {
    let end = model.last().map_or(log.log_start(), |b| b.last + 1);
    assert_eq!(log.log_end(), end, "{ctx}: log end after reopen/retention");
    if let Some(first) = model.first() {
        assert_eq!(log.log_start(), first.base, "{ctx}: log start is the first kept batch");
    }
}

async fn check_random_read(log: &PartitionLog, rng: &mut Rng, model: &[ModelBatch], ctx: &str) {
    let (start, end) = (log.log_start(), log.log_end());
    let offset = start + rng.below((end - start + 1) as u64) as i64;
    let budget_max = if rng.below(2) == 0 { 3000 } else { 200_000 };
    let budget = 1 + rng.below(budget_max) as usize;
    let got = log.read(offset, budget).await.unwrap_or_else(|e| panic!("{ctx}: read {offset}: {e}")).to_vec();
    if offset == end {
        assert!(got.is_empty(), "{ctx}: read at log end is empty");
        return;
    }
    let first = model.partition_point(|b| b.last < offset);
    let batches = batches_in(&got);
    assert!(!batches.is_empty(), "{ctx}: read at {offset} returned nothing");
    let mut pos = 0;
    for (j, (base, _, len)) in batches.iter().enumerate() {
        let want = &model[first + j];
        assert_eq!(*base, want.base, "{ctx}: batch {j} of read at {offset}");
        assert!(got[pos..pos + len] == want.bytes[..], "{ctx}: bytes of batch at {base}");
        pos += len;
    }
    assert!(batches.len() == 1 || got.len() <= budget, "{ctx}: budget {budget} exceeded by {}", got.len());
    if let Some(next) = model.get(first + batches.len()) {
        let segment_bases: Vec<i64> = log.segments().iter().map(|s| s.0).collect();
        let fits = got.len() + next.bytes.len() <= budget;
        assert!(!fits || segment_bases.contains(&next.base), "{ctx}: read at {offset} stopped early");
    }
    // Out of range on both sides is a typed error.
    assert!(matches!(log.read(end + 1, 100).await, Err(StorageError::OffsetOutOfRange { .. })));
    if start > 0 {
        assert!(matches!(log.read(start - 1, 100).await, Err(StorageError::OffsetOutOfRange { .. })));
    }
}
