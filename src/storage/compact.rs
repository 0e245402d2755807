//! Log compaction (`cleanup.policy=compact`): keep only the newest record of
//! each key in the sealed segments, and drop tombstones (null values) once
//! they are older than `delete.retention.ms`.
//!
//! One pass: read the sealed segments and note, per key, the offset of its
//! newest record (records of the active segment count too, up to the
//! durable offset, so they can supersede older ones; the active segment
//! itself is never rewritten). Then the sealed segments are cleaned and
//! merged, consecutive ones together while they fit in `segment.bytes`, so
//! a cleaned log has few files and its size follows its live keys. Offsets
//! never change: kept records keep theirs, so a cleaned log has gaps, which
//! readers and recovery accept for compacted logs.
//!
//! Replacing segments on disk is `storage::swap` (crash-safe at any point).
//! The pass reaches the log only through what it lends a compaction pass
//! (`PartitionLog::begin_compaction`, `CompactionPass`: segment snapshots
//! and a typed swap of sealed segments) and its public accessors.
//!
//! Transactions: only what is stable is cleaned. Records at or past the
//! last stable offset are kept and note no key (an open transaction may
//! still abort); records of aborted transactions are dropped and never
//! count as a key's newest value, so an abort cannot shadow the committed
//! value before it; control batches (markers) are kept whole.
//!
//! **The one exception to "storage never parses records":** the cleaner
//! must read keys. It rewrites uncompressed batches record by record,
//! keeping each batch's base offset, last offset delta, timestamps and
//! producer fields; compressed batches are kept whole (not cleaned).

use std::{collections::HashMap, path::Path, rc::Rc};

use crate::{
    limits::{self, DMA_ALIGNMENT},
    protocol::record_batch::{self, BatchHeader},
    storage::{
        error::StorageError,
        file::SegmentFile,
        index::SegmentIndex,
        log::{CompactionPass, PartitionLog, SegmentSnapshot},
        producers,
        segment::{self, Segment},
        swap,
        zero_ahead::ZeroAhead,
    },
};

/// What one cleaning pass did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct CompactionReport {
    /// Sealed segments replaced (merged, rewritten or removed).
    pub segments_merged: usize,
    pub records_before: u64,
    pub records_after: u64,
    pub bytes_before: u64,
    pub bytes_after: u64,
}

impl PartitionLog {
    /// Cleans the sealed segments (see the module documentation). Runs one
    /// pass at a time per log; appends continue meanwhile.
    pub async fn compact(&self, now_ms: i64) -> Result<CompactionReport, StorageError> {
        let mut report = CompactionReport::default();
        let Some(pass) = self.begin_compaction().await else {
            return Ok(report); // nothing sealed since the last pass
        };
        let sealed = pass.sealed();
        if sealed.is_empty() {
            return Ok(report);
        }
        // Pass 1: the newest offset of every key, among stable records.
        let txns = Txns::of(self);
        let mut newest: HashMap<Vec<u8>, i64> = HashMap::new();
        let mut contents = Vec::with_capacity(sealed.len());
        for seg in &sealed {
            let bytes = read_whole(self, seg).await?;
            note_newest(&mut newest, &bytes, txns.stable_end, &txns);
            contents.push(bytes);
        }
        let active = pass.active();
        let below = self.durable_offset().min(txns.stable_end);
        note_newest(&mut newest, &read_whole(self, &active).await?, below, &txns);
        // Pass 2: clean each sealed segment in memory.
        let tombstone_horizon = now_ms - self.config().delete_retention_ms;
        let mut cleaned: Vec<Vec<u8>> = Vec::with_capacity(sealed.len());
        for (seg, bytes) in sealed.iter().zip(&contents) {
            // A segment's worth of record parsing at a time, then let
            // requests run if they are waiting (compaction runs in the
            // shard's background queue).
            glommio::yield_if_needed().await;
            let out = clean_segment(bytes, &newest, tombstone_horizon, &txns, &mut report);
            report.bytes_before += seg.size;
            report.bytes_after += out.len() as u64;
            cleaned.push(out);
        }
        // Pass 3: merge neighbours that fit in one segment and replace them.
        let limit = self.config().segment_bytes;
        let mut i = 0;
        while i < sealed.len() {
            let mut j = i + 1;
            let mut bytes = cleaned[i].len() as u64;
            while j < sealed.len()
                && bytes + cleaned[j].len() as u64 <= limit
                && sealed[j].next_offset - sealed[i].base < limits::SEGMENT_OFFSETS_MAX / 2
            {
                bytes += cleaned[j].len() as u64;
                j += 1;
            }
            let unchanged = j == i + 1 && cleaned[i].len() as u64 == sealed[i].size;
            if !unchanged {
                let merged: Vec<u8> = cleaned[i..j].concat();
                let group = &sealed[i..j];
                if replace_group(self, &pass, group, merged).await? {
                    report.segments_merged += group.len();
                }
            }
            i = j;
        }
        pass.finish();
        if report.segments_merged > 0 {
            log::info!(
                "partition {}: compacted {} segment(s) into {}: {} -> {} records, {} -> {} bytes",
                self.name(),
                report.segments_merged,
                self.segment_count() - 1,
                report.records_before,
                report.records_after,
                report.bytes_before,
                report.bytes_after
            );
        }
        Ok(report)
    }
}

/// A segment's bytes, read whole in windows of `READ_WINDOW_BYTES`.
async fn read_whole(log: &PartitionLog, seg: &SegmentSnapshot) -> Result<Vec<u8>, StorageError> {
    let mut out = Vec::with_capacity(seg.size as usize);
    let mut pos = 0u64;
    while pos < seg.size {
        let len = (limits::READ_WINDOW_BYTES as u64).min(seg.size - pos) as usize;
        let chunk = seg
            .file
            .read_at(pos, len)
            .await
            .map_err(|e| StorageError::from_io(log.name(), seg.file.path(), "read for compaction", e))?;
        if chunk.is_empty() {
            break;
        }
        pos += chunk.len() as u64;
        out.extend_from_slice(&chunk);
    }
    Ok(out)
}

/// Replaces consecutive sealed segments with one holding `bytes` (or
/// with nothing, when `bytes` is empty). `false` when retention got to
/// one of them first.
async fn replace_group(
    log: &PartitionLog,
    pass: &CompactionPass<'_>,
    group: &[SegmentSnapshot],
    bytes: Vec<u8>,
) -> Result<bool, StorageError> {
    let first = &group[0];
    let end = group[group.len() - 1].next_offset;
    let dir = log.dir().to_path_buf();
    let name = log.name().clone();
    let io = |path: &Path, op, e| StorageError::from_io(&name, path, op, e);
    let tmp = segment::segment_path(&dir, first.base, "cleaned.tmp");
    let mut seg = Segment {
        base_offset: first.base,
        file: first.file.clone(),
        ahead: ZeroAhead::sealed(first.file.clone(), 0),
        size: 0,
        next_offset: first.base,
        max_timestamp: -1,
        created_ms: 0,
        index: SegmentIndex::new(log.config().index_interval_bytes),
    };
    if !bytes.is_empty() {
        let _ = std::fs::remove_file(&tmp);
        let file = SegmentFile::create(&tmp, Default::default()).await.map_err(|e| io(&tmp, "create", e))?;
        let padded = bytes.len().div_ceil(DMA_ALIGNMENT as usize) * DMA_ALIGNMENT as usize;
        let mut buf = file.alloc(padded);
        buf.as_bytes_mut()[..bytes.len()].copy_from_slice(&bytes);
        buf.as_bytes_mut()[bytes.len()..].fill(0);
        file.write_at(buf, 0).await.map_err(|e| io(&tmp, "write", e))?;
        file.truncate(bytes.len() as u64).await.map_err(|e| io(&tmp, "truncate", e))?;
        file.fdatasync().await.map_err(|e| io(&tmp, "sync", e))?;
        file.close().await.map_err(|e| io(&tmp, "close", e))?;
        for_each_batch(&bytes, |_, header| {
            let position = seg.size;
            seg.on_append(header, position);
        });
    }
    let Some(lock) = pass.lock_sealed(group).await else {
        let _ = std::fs::remove_file(&tmp);
        return Ok(false);
    };
    let bases: Vec<i64> = group.iter().map(|g| g.base).collect();
    let (offsets, times) = (seg.index.encode_offsets(), seg.index.encode_times());
    let has_data = !bytes.is_empty();
    let (job_dir, job_name, base) = (dir.clone(), name.clone(), first.base);
    glommio::executor()
        .spawn_blocking(move || {
            swap::swap_in(&job_dir, &job_name, base, end, &bases, has_data.then_some((tmp, offsets, times)))
        })
        .await?;
    let merged = if has_data {
        let path = segment::segment_path(&dir, first.base, segment::LOG_SUFFIX);
        let file = SegmentFile::open(&path, log.faults().clone()).await.map_err(|e| io(&path, "open", e))?;
        seg.file = Rc::new(file);
        seg.ahead = ZeroAhead::sealed(seg.file.clone(), seg.size);
        // The merged segment covers every offset the group covered, even
        // when its last batches were cleaned away.
        seg.next_offset = end;
        Some(seg)
    } else {
        None
    };
    lock.replace(merged);
    Ok(true)
}

/// What compaction needs to know of transactions: where stable records
/// end (the LSO) and, per producer, the offset ranges of its aborted
/// transactions.
struct Txns {
    stable_end: i64,
    aborted: HashMap<i64, Vec<(i64, i64)>>,
}

impl Txns {
    fn of(log: &PartitionLog) -> Self {
        let mut aborted: HashMap<i64, Vec<(i64, i64)>> = HashMap::new();
        for a in log.aborted_index() {
            aborted.entry(a.producer_id).or_default().push((a.first_offset, a.last_offset));
        }
        Self { stable_end: log.first_unmarked_offset(), aborted }
    }

    /// Whether a data batch belongs to an aborted transaction.
    fn aborted(&self, header: &BatchHeader) -> bool {
        producers::is_transactional_data(header)
            && self
                .aborted
                .get(&header.producer_id)
                .is_some_and(|ranges| ranges.iter().any(|&(first, last)| (first..=last).contains(&header.base_offset)))
    }
}

fn is_control(header: &BatchHeader) -> bool {
    header.attributes & record_batch::ATTR_CONTROL != 0
}

/// Notes, per key, the offset of its newest record in `bytes` below
/// `below`; markers and aborted transactions' records are not values.
fn note_newest(newest: &mut HashMap<Vec<u8>, i64>, bytes: &[u8], below: i64, txns: &Txns) {
    for_each_batch(bytes, |batch, header| {
        if is_control(header) || txns.aborted(header) {
            return;
        }
        if let Ok(records) = record_batch::read_records(batch) {
            for r in records.into_iter().filter(|r| r.offset < below) {
                if let Some(key) = r.key {
                    newest.insert(key.to_vec(), r.offset);
                }
            }
        }
    });
}

/// One sealed segment's batches with only the records `newest` keeps, and
/// tombstones only while newer than `tombstone_horizon`.
fn clean_segment(
    bytes: &[u8],
    newest: &HashMap<Vec<u8>, i64>,
    tombstone_horizon: i64,
    txns: &Txns,
    report: &mut CompactionReport,
) -> Vec<u8> {
    let mut out: Vec<u8> = Vec::with_capacity(bytes.len());
    for_each_batch(bytes, |batch, header| {
        if is_control(header) || header.last_offset() >= txns.stable_end {
            // Markers stay (readers skip them by offset); what is not yet
            // stable is not cleaned.
            out.extend_from_slice(batch);
            return;
        }
        if txns.aborted(header) {
            // Never visible to read_committed readers: dropped whole.
            report.records_before += header.records_count.max(0) as u64;
            return;
        }
        let Ok(records) = record_batch::read_records(batch) else {
            out.extend_from_slice(batch); // compressed: kept whole
            return;
        };
        report.records_before += records.len() as u64;
        let keep: Vec<bool> = records
            .iter()
            .map(|r| match r.key {
                None => true,
                Some(k) => {
                    newest.get(k) == Some(&r.offset) && (r.value.is_some() || header.max_timestamp >= tombstone_horizon)
                }
            })
            .collect();
        let kept = keep.iter().filter(|k| **k).count();
        report.records_after += kept as u64;
        if kept == records.len() {
            out.extend_from_slice(batch);
        } else if kept > 0 {
            out.extend_from_slice(&record_batch::retain_records(batch, &keep));
        }
    });
    out
}

/// Calls `f` with each whole batch in `bytes` and its header.
fn for_each_batch(bytes: &[u8], mut f: impl FnMut(&[u8], &BatchHeader)) {
    let mut at = 0;
    while at + record_batch::HEADER_BYTES <= bytes.len() {
        let Ok(header) = BatchHeader::parse(&bytes[at..], limits::BATCH_BYTES_MAX) else { return };
        let end = at + header.total_bytes();
        if end > bytes.len() {
            return;
        }
        f(&bytes[at..end], &header);
        at = end;
    }
}
