//! One segment: a file of whole record batches named by its base offset, with
//! its sparse indices, plus the scanner that walks a segment's batches.

use std::{
    io,
    path::{Path, PathBuf},
    rc::Rc,
};

use crate::{
    limits,
    protocol::record_batch::{check_batch, BatchError, BatchHeader, HEADER_BYTES},
    storage::{file::SegmentFile, index::SegmentIndex, zero_ahead::ZeroAhead},
};

pub const LOG_SUFFIX: &str = "log";
pub const INDEX_SUFFIX: &str = "index";
pub const TIME_INDEX_SUFFIX: &str = "timeindex";

/// `dir/00000000000000000042.<suffix>`: 20 digits, so names sort as offsets.
pub fn segment_path(dir: &Path, base_offset: i64, suffix: &str) -> PathBuf {
    dir.join(format!("{base_offset:020}.{suffix}"))
}

/// The base offset a segment file name encodes, if it is one of ours.
pub fn parse_segment_name(name: &str) -> Option<i64> {
    let stem = name.strip_suffix(".log")?;
    if stem.len() != 20 || !stem.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    stem.parse().ok()
}

pub struct Segment {
    pub base_offset: i64,
    pub file: Rc<SegmentFile>,
    /// Bytes of whole batches; the file may be longer (padding, preallocation).
    pub size: u64,
    /// One past the last offset stored here (== base when empty).
    pub next_offset: i64,
    pub max_timestamp: i64,
    /// When this segment was created or opened, for `segment.ms` and for age
    /// retention of batches without timestamps.
    pub created_ms: i64,
    pub index: SegmentIndex,
    /// Blocks reserved and written ahead of the appends (see
    /// `storage::zero_ahead`); retired once the segment is sealed.
    pub ahead: Rc<ZeroAhead>,
}

impl Segment {
    pub fn path(&self) -> &Path {
        self.file.path()
    }

    /// Newest timestamp for time retention; falls back to the creation time
    /// when no batch carried one.
    pub fn retention_timestamp(&self) -> i64 {
        if self.max_timestamp >= 0 {
            self.max_timestamp
        } else {
            self.created_ms
        }
    }

    /// Records a batch just written at `position`.
    pub fn on_append(&mut self, header: &BatchHeader, position: u64) {
        let bytes = header.total_bytes() as u64;
        let relative = (header.base_offset - self.base_offset) as u32;
        self.index.on_batch(relative, position as u32, bytes, header.max_timestamp);
        self.size = position + bytes;
        self.next_offset = header.last_offset() + 1;
        self.max_timestamp = self.max_timestamp.max(header.max_timestamp);
    }
}

/// What a scan of a segment found.
#[derive(Debug)]
pub struct ScanOutcome {
    /// Bytes of whole, valid batches from the start of the segment.
    pub valid_bytes: u64,
    pub next_offset: i64,
    pub max_timestamp: i64,
    pub batches: u64,
    /// Why the scan stopped before the end of the file, if it did.
    pub stop: Option<BatchError>,
}

/// Rules a scan applies to each batch.
pub struct ScanRules {
    /// Batches at or after this byte get their CRC checked and must continue
    /// the offsets exactly; before it, only headers are read.
    pub verify_from: u64,
    /// Gaps between batches are legal (compacted logs).
    pub allow_gaps: bool,
    /// Highest leader epoch a stored batch may carry.
    pub leader_epoch_max: i32,
}

/// Walks the batches of `file` from byte `start` (a batch boundary whose
/// first offset is at least `next_offset`) to `file_len`, rebuilding `index`
/// and stopping at the first batch that is incomplete or fails the rules.
pub async fn scan(
    file: &SegmentFile,
    file_len: u64,
    start: u64,
    segment: &mut Segment,
    rules: &ScanRules,
) -> io::Result<ScanOutcome> {
    let mut pos = start;
    let mut next = segment.next_offset;
    let mut epoch_floor = 0i32;
    let mut out = ScanOutcome {
        valid_bytes: start,
        next_offset: next,
        max_timestamp: segment.max_timestamp,
        batches: 0,
        stop: None,
    };
    if pos >= file_len {
        return Ok(out);
    }
    let mut window_start = pos;
    let mut window = file.read_at(pos, window_len(file_len - pos, 0)).await?;
    while pos < file_len {
        if pos + HEADER_BYTES as u64 > window_start + window.len() as u64 {
            window_start = pos;
            window = file.read_at(pos, window_len(file_len - pos, HEADER_BYTES)).await?;
        }
        let at = (pos - window_start) as usize;
        let header = match BatchHeader::parse(&window[at..], limits::BATCH_BYTES_MAX) {
            Ok(h) => h,
            Err(e) => {
                out.stop = Some(e);
                break;
            }
        };
        let total = header.total_bytes();
        if pos + total as u64 > file_len {
            out.stop = Some(BatchError::Incomplete { needed: total, have: (file_len - pos) as usize });
            break;
        }
        if pos >= rules.verify_from {
            if at + total > window.len() {
                window_start = pos;
                window = file.read_at(pos, window_len(file_len - pos, total)).await?;
            }
            let at = (pos - window_start) as usize;
            if let Err(e) = check_batch(&window[at..at + total], limits::BATCH_BYTES_MAX) {
                out.stop = Some(e);
                break;
            }
        }
        if let Err(e) = check_sequence(&header, next, epoch_floor, segment.base_offset, pos >= rules.verify_from, rules)
        {
            out.stop = Some(e);
            break;
        }
        epoch_floor = header.leader_epoch;
        segment.on_append(&header, pos);
        pos += total as u64;
        next = header.last_offset() + 1;
        out.batches += 1;
        out.valid_bytes = pos;
        out.next_offset = next;
        out.max_timestamp = segment.max_timestamp;
    }
    Ok(out)
}

/// How much to read for the next window: a full window, but at least `need`
/// and never past the end of the file.
fn window_len(remaining: u64, need: usize) -> usize {
    (limits::READ_WINDOW_BYTES.max(need) as u64).min(remaining) as usize
}

/// Offsets and epochs are not covered by the batch CRC, so recovery checks
/// them against what the log must look like.
fn check_sequence(
    header: &BatchHeader,
    next: i64,
    epoch_floor: i32,
    segment_base: i64,
    verifying: bool,
    rules: &ScanRules,
) -> Result<(), BatchError> {
    let offsets_ok =
        if verifying && !rules.allow_gaps { header.base_offset == next } else { header.base_offset >= next };
    let span = header.last_offset() - segment_base;
    let epoch_ok = header.leader_epoch >= epoch_floor && header.leader_epoch <= rules.leader_epoch_max;
    if !offsets_ok || !(0..=limits::SEGMENT_OFFSETS_MAX).contains(&span) || !epoch_ok {
        return Err(BatchError::BadOffsets {
            base_offset: header.base_offset,
            expected: next,
            leader_epoch: header.leader_epoch,
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_twenty_digits_and_round_trip() {
        let p = segment_path(Path::new("/d"), 42, LOG_SUFFIX);
        assert_eq!(p, Path::new("/d/00000000000000000042.log"));
        assert_eq!(parse_segment_name("00000000000000000042.log"), Some(42));
        assert_eq!(parse_segment_name("42.log"), None);
        assert_eq!(parse_segment_name("00000000000000000042.index"), None);
    }
}
