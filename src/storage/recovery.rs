//! Opening a partition directory: find the segments, trust what the last
//! checkpoint says was made durable, validate everything after it, and cut a
//! torn or corrupt tail.
//!
//! The checkpoint (`recovery-point`) names a segment and a byte position up
//! to which the log was fdatasync'd and found whole. It is written at clean
//! shutdown, after each roll, and after every recovery. Batches before it get
//! a header walk only; batches after it get their CRC checked and must
//! continue the offsets exactly. The first failure ends the log: the segment
//! is truncated there and later segments are deleted, each cut logged.

use std::{
    io,
    path::{Path, PathBuf},
    rc::Rc,
};

use crate::{
    protocol::record_batch::BatchError,
    storage::{
        config::LogConfig,
        error::{PartitionName, StorageError},
        file::{self, Faults, SegmentFile},
        index::SegmentIndex,
        segment::{self, scan, ScanRules, Segment},
        swap, txn_index,
        zero_ahead::ZeroAhead,
    },
};

pub const CHECKPOINT_FILE: &str = "recovery-point";
const CHECKPOINT_HEADER: &str = "shardlog-recovery-point v1";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Checkpoint {
    pub segment_base: i64,
    pub position: u64,
}

/// One piece of data recovery removed.
#[derive(Debug, Clone)]
pub struct Cut {
    pub file: PathBuf,
    pub position: u64,
    pub bytes: u64,
    pub reason: String,
}

/// What opening the log found and did.
#[derive(Debug, Default, Clone)]
pub struct RecoveryReport {
    pub segments: usize,
    pub batches_scanned: u64,
    pub bytes_verified: u64,
    pub checkpoint: Option<Checkpoint>,
    pub cuts: Vec<Cut>,
    /// Batches the shard journal gave back after recovery.
    pub journal_batches: usize,
}

pub fn encode_checkpoint(cp: Checkpoint) -> Vec<u8> {
    format!("{CHECKPOINT_HEADER}\n{} {}\n", cp.segment_base, cp.position).into_bytes()
}

fn decode_checkpoint(text: &str) -> Option<Checkpoint> {
    let mut lines = text.lines();
    if lines.next()? != CHECKPOINT_HEADER {
        return None;
    }
    let mut fields = lines.next()?.split(' ');
    let segment_base = fields.next()?.parse().ok()?;
    let position = fields.next()?.parse().ok()?;
    Some(Checkpoint { segment_base, position })
}

fn read_checkpoint(dir: &Path, name: &PartitionName) -> Option<Checkpoint> {
    let path = dir.join(CHECKPOINT_FILE);
    let text = std::fs::read_to_string(&path).ok()?;
    let cp = decode_checkpoint(&text);
    if cp.is_none() {
        log::warn!("partition {name}: ignoring malformed {}; validating every segment", path.display());
    }
    cp
}

/// Lists segment base offsets in order and removes leftovers of interrupted
/// atomic writes.
pub(crate) fn list_segments(dir: &Path) -> io::Result<Vec<i64>> {
    let mut bases = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if name.ends_with(".tmp") {
            // A writer still finishing (an earlier handle's checkpoint, say)
            // may rename its file away between the listing and the removal.
            match std::fs::remove_file(entry.path()) {
                Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
                _ => {}
            }
        } else if let Some(base) = segment::parse_segment_name(&name) {
            bases.push(base);
        }
    }
    bases.sort_unstable();
    Ok(bases)
}

/// Opens and validates every segment in `dir`, returning them in offset order
/// (never empty: a fresh directory gets a segment at offset 0).
pub async fn recover(
    dir: &Path,
    name: &PartitionName,
    config: &LogConfig,
    faults: &Faults,
    now_ms: i64,
) -> Result<(Vec<Segment>, RecoveryReport), StorageError> {
    let io_err = |file: &Path, op, e| StorageError::from_io(name, file, op, e);
    std::fs::create_dir_all(dir).map_err(|e| io_err(dir, "create directory", e))?;
    let swaps = swap::finish_swaps(dir).map_err(|e| io_err(dir, "finish compaction", e))?;
    if swaps > 0 {
        log::warn!("partition {name}: finished {swaps} segment replacement(s) a crash interrupted");
    }
    let bases = list_segments(dir).map_err(|e| io_err(dir, "list", e))?;
    let checkpoint = read_checkpoint(dir, name);
    let mut report = RecoveryReport { checkpoint, ..RecoveryReport::default() };
    let mut segments: Vec<Segment> = Vec::with_capacity(bases.len());
    let mut next_offset = bases.first().copied().unwrap_or(0);
    for (i, &base) in bases.iter().enumerate() {
        let path = segment::segment_path(dir, base, segment::LOG_SUFFIX);
        let file = SegmentFile::open(&path, faults.clone()).await.map_err(|e| io_err(&path, "open", e))?;
        let file_len = file.size().await.map_err(|e| io_err(&path, "stat", e))?;
        let trusted = trusted_bytes(checkpoint, base, file_len);
        let file = Rc::new(file);
        let mut seg = Segment {
            base_offset: base,
            ahead: ZeroAhead::new(file.clone(), file_len),
            file,
            size: 0,
            next_offset: next_offset.max(base),
            max_timestamp: -1,
            created_ms: now_ms,
            index: SegmentIndex::new(config.index_interval_bytes),
        };
        let rules =
            ScanRules { verify_from: trusted, allow_gaps: config.compacted, leader_epoch_max: config.leader_epoch };
        let outcome =
            open_segment(&mut seg, file_len, trusted, &rules, config).await.map_err(|e| io_err(&path, "read", e))?;
        report.batches_scanned += outcome.batches;
        report.bytes_verified += outcome.valid_bytes.saturating_sub(trusted);
        next_offset = seg.next_offset;
        let cut_here = outcome.valid_bytes < file_len;
        let mut zeros_only = false;
        if cut_here {
            let (cut, zeros) = cut_tail(&seg, file_len, outcome.valid_bytes, outcome.stop, name).await?;
            report.cuts.push(cut);
            zeros_only = zeros;
        }
        // Zeros after the last batch of a segment that the next one
        // continues are not a torn write: a roll synced the segment before
        // starting the next, and a crash came before the background work
        // trimmed its padding (or the blocks zeroed ahead of its writes).
        // The later segments hold acknowledged data and stay.
        let continued = zeros_only && bases.get(i + 1) == Some(&seg.next_offset);
        segments.push(seg);
        if cut_here && !continued {
            for &later in &bases[i + 1..] {
                report.cuts.push(remove_segment_files(dir, later, name)?);
            }
            // Removed segments must not come back after a crash and be taken
            // for a continuation of the cut one.
            file::sync_dir(dir).map_err(|e| io_err(dir, "sync directory", e))?;
            break;
        }
    }
    if segments.is_empty() {
        segments.push(create_segment(dir, 0, name, config, faults, now_ms).await?);
        sync_segment_dir(dir.to_path_buf(), name.clone()).await?;
    }
    report.segments = segments.len();
    Ok((segments, report))
}

/// Bytes at the start of segment `base` that the checkpoint vouches for.
fn trusted_bytes(checkpoint: Option<Checkpoint>, base: i64, file_len: u64) -> u64 {
    match checkpoint {
        Some(cp) if base < cp.segment_base => file_len,
        Some(cp) if base == cp.segment_base && cp.position <= file_len => cp.position,
        _ => 0,
    }
}

/// Rebuilds a segment's state: from its index files plus a short walk when
/// it is wholly trusted, else by a full walk that verifies past `trusted`.
async fn open_segment(
    seg: &mut Segment,
    file_len: u64,
    trusted: u64,
    rules: &ScanRules,
    config: &LogConfig,
) -> io::Result<segment::ScanOutcome> {
    let file = seg.file.clone();
    if trusted == file_len {
        if let Some(index) = load_index(seg.path(), config, file_len) {
            let last = index.last_entry().expect("decoded index of a non-empty segment has entries");
            seg.index = index;
            seg.next_offset = seg.base_offset + i64::from(last.relative_offset);
            return scan(&file, file_len, u64::from(last.position), seg, rules).await;
        }
    }
    scan(&file, file_len, 0, seg, rules).await
}

fn load_index(log_path: &Path, config: &LogConfig, file_len: u64) -> Option<SegmentIndex> {
    if file_len == 0 {
        return None;
    }
    let offsets = std::fs::read(log_path.with_extension(segment::INDEX_SUFFIX)).ok()?;
    let times = std::fs::read(log_path.with_extension(segment::TIME_INDEX_SUFFIX)).ok()?;
    SegmentIndex::decode(&offsets, &times, config.index_interval_bytes, file_len)
}

async fn cut_tail(
    seg: &Segment,
    file_len: u64,
    valid: u64,
    stop: Option<BatchError>,
    name: &PartitionName,
) -> Result<(Cut, bool), StorageError> {
    let path = seg.path().to_path_buf();
    let zero_fill = tail_is_zero(&seg.file, valid, file_len).await.unwrap_or(false);
    seg.file.truncate(valid).await.map_err(|e| StorageError::from_io(name, &path, "truncate", e))?;
    let reason = match (zero_fill, stop) {
        (true, _) => "zero padding after the last batch".to_string(),
        (false, Some(e)) => e.to_string(),
        (false, None) => "bytes after the last batch".to_string(),
    };
    let cut = Cut { file: path, position: valid, bytes: file_len - valid, reason };
    if zero_fill {
        log::debug!(
            "partition {name}: {}: trimmed {} bytes of padding at byte {}",
            cut.file.display(),
            cut.bytes,
            valid
        );
    } else {
        log::warn!(
            "partition {name}: {}: cut {} bytes at byte {} ({})",
            cut.file.display(),
            cut.bytes,
            cut.position,
            cut.reason
        );
    }
    Ok((cut, zero_fill))
}

/// Whether the bytes past the last valid batch are only the zeros a padded
/// direct-I/O write leaves, or blocks zeroed ahead of the writes (not worth
/// a warning), as opposed to torn data.
async fn tail_is_zero(file: &SegmentFile, mut from: u64, to: u64) -> io::Result<bool> {
    while from < to {
        let len = (to - from).min(crate::limits::READ_WINDOW_BYTES as u64) as usize;
        let bytes = file.read_at(from, len).await?;
        if bytes.is_empty() || bytes.iter().any(|&b| b != 0) {
            return Ok(false);
        }
        from += bytes.len() as u64;
    }
    Ok(true)
}

fn remove_segment_files(dir: &Path, base: i64, name: &PartitionName) -> Result<Cut, StorageError> {
    let path = segment::segment_path(dir, base, segment::LOG_SUFFIX);
    let bytes = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
    for suffix in [segment::LOG_SUFFIX, segment::INDEX_SUFFIX, segment::TIME_INDEX_SUFFIX, txn_index::TXN_INDEX_SUFFIX]
    {
        let p = segment::segment_path(dir, base, suffix);
        match std::fs::remove_file(&p) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(StorageError::from_io(name, &p, "remove", e)),
        }
    }
    log::warn!("partition {name}: removed {} ({bytes} bytes) after a cut in an earlier segment", path.display());
    Ok(Cut { file: path, position: 0, bytes, reason: "follows a cut segment".to_string() })
}

/// Syncs the directory of a partition, so a segment created in it stays
/// after a power loss (on glommio's blocking pool).
pub async fn sync_segment_dir(dir: PathBuf, name: PartitionName) -> Result<(), StorageError> {
    let synced = dir.clone();
    glommio::executor()
        .spawn_blocking(move || file::sync_dir(&synced))
        .await
        .map_err(|e| StorageError::from_io(&name, &dir, "sync directory", e))
}

/// Creates an empty segment file. Its directory entry is not synced here:
/// the caller syncs the directory ([`sync_segment_dir`]) before anything in
/// the segment is vouched durable (at once when a log opens empty; in the
/// background after a roll, see `log::seal`).
pub async fn create_segment(
    dir: &Path,
    base: i64,
    name: &PartitionName,
    config: &LogConfig,
    faults: &Faults,
    now_ms: i64,
) -> Result<Segment, StorageError> {
    let path = segment::segment_path(dir, base, segment::LOG_SUFFIX);
    let file = SegmentFile::create(&path, faults.clone())
        .await
        .map_err(|e| StorageError::from_io(name, &path, "create", e))?;
    let file = Rc::new(file);
    Ok(Segment {
        base_offset: base,
        ahead: ZeroAhead::new(file.clone(), 0),
        file,
        size: 0,
        next_offset: base,
        max_timestamp: -1,
        created_ms: now_ms,
        index: SegmentIndex::new(config.index_interval_bytes),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checkpoint_round_trip_and_rejects_junk() {
        let cp = Checkpoint { segment_base: 1234, position: 5678 };
        let text = String::from_utf8(encode_checkpoint(cp)).unwrap();
        assert_eq!(decode_checkpoint(&text), Some(cp));
        assert_eq!(decode_checkpoint("garbage\n1 2\n"), None);
        assert_eq!(decode_checkpoint(&format!("{CHECKPOINT_HEADER}\n1\n")), None);
    }

    #[test]
    fn trust_follows_checkpoint() {
        let cp = Some(Checkpoint { segment_base: 100, position: 50 });
        assert_eq!(trusted_bytes(cp, 0, 999), 999);
        assert_eq!(trusted_bytes(cp, 100, 999), 50);
        assert_eq!(trusted_bytes(cp, 100, 40), 0, "file shorter than the checkpoint is not trusted");
        assert_eq!(trusted_bytes(cp, 200, 999), 0);
        assert_eq!(trusted_bytes(None, 0, 999), 0);
    }
}
