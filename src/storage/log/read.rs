//! Reads by offset: from the tail cache (the very buffers appended), from
//! the active segment by direct read, or from a sealed segment as a byte
//! range for `sendfile` (its batch headers walked through the page cache);
//! and the offset for a timestamp (ListOffsets). Only batch headers are
//! parsed, never records.

use std::{path::Path, rc::Rc, sync::Arc};

use bytes::Bytes;

use super::state::{bump, LogState, PartitionLog};
use crate::{
    limits,
    protocol::record_batch::{self, BatchHeader},
    storage::{
        chunk::{Chunk, FileRange},
        error::{PartitionName, StorageError},
        file,
    },
};

/// Whole batches from a read, with the log bounds at the time of the read.
#[derive(Debug)]
pub struct ReadSlice {
    /// Whole batches: buffers from the tail cache (the very ones appended),
    /// a slice of one direct read of the active segment, or a range of a
    /// sealed segment to be sent from the page cache. No byte was copied to
    /// build them.
    pub chunks: Vec<Chunk>,
    pub log_start: i64,
    pub log_end: i64,
}

impl ReadSlice {
    pub fn len(&self) -> usize {
        self.chunks.iter().map(|c| c.len()).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Copies the bytes out, reading file ranges with blocking reads (tests
    /// and tools; the fetch path sends chunks as they are).
    pub fn to_vec(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.len());
        for c in &self.chunks {
            out.extend_from_slice(&c.to_bytes().unwrap_or_else(|e| panic!("reading a stored range: {e}")));
        }
        out
    }
}

impl PartitionLog {
    /// Reads whole batches starting with the one that contains `offset`, up
    /// to `max_bytes` (the first batch is returned even when larger). Returns
    /// an empty slice at the log end.
    pub async fn read(&self, offset: i64, max_bytes: usize) -> Result<ReadSlice, StorageError> {
        self.read_below(offset, max_bytes, i64::MAX).await
    }

    /// [`Self::read`], returning only batches that start below `upper`
    /// (a read_committed fetch passes the last stable offset, which is
    /// always a batch boundary, so the batches returned are whole and end
    /// below it). Empty when `offset` is at or past `upper`.
    pub async fn read_below(&self, offset: i64, max_bytes: usize, upper: i64) -> Result<ReadSlice, StorageError> {
        let mut from = offset;
        let mut relocations = 0;
        loop {
            let (log_start, log_end, target) = {
                let st = self.state.borrow();
                let (log_start, log_end) = (st.log_start, st.next_offset);
                if from < log_start || from > log_end {
                    return Err(StorageError::OffsetOutOfRange {
                        partition: self.name.clone(),
                        offset,
                        log_start,
                        log_end,
                    });
                }
                if from == log_end || from >= upper {
                    return Ok(ReadSlice { chunks: Vec::new(), log_start, log_end });
                }
                if let Some(mut chunks) = st.cache.read(from, max_bytes) {
                    bump(&self.stats.cache_reads, 1);
                    // Each cached buffer is one batch, as appended.
                    chunks.retain(|b| BatchHeader::parse(b, usize::MAX).is_ok_and(|h| h.base_offset < upper));
                    let next = chunks.last().and_then(|b| last_offset_in(b)).map_or(from, |l| l + 1);
                    let chunks: Vec<Chunk> = chunks.into_iter().map(Chunk::Memory).collect();
                    self.count_read(&chunks, offset, next);
                    return Ok(ReadSlice { chunks, log_start, log_end });
                }
                (log_start, log_end, self.locate(&st, from))
            };
            let (file, start, seg_end, seg_next) = target;
            let sealed = seg_next < log_end;
            if !sealed && from >= self.behind.written().1 {
                // Answered from the journal, not yet in the segment, and no
                // longer cached: the segment write comes first.
                self.behind.flush().await?;
                continue;
            }
            bump(&self.stats.disk_reads, 1);
            let found = if sealed {
                locate_sealed(&file, start, seg_end, from, max_bytes, upper).await
            } else {
                read_segment(&file, start, seg_end, from, max_bytes, upper, self.config.index_interval_bytes)
                    .await
                    .map(|found| found.map(|b| (last_offset_in(&b).map_or(from, |l| l + 1), Chunk::Memory(b))))
            };
            // A sealed segment whose descriptors were closed was replaced
            // (compaction) or removed (retention) before it reopened: locate
            // the offset again in what the log holds now.
            if let Err(ReadError::Io(e)) = &found {
                if e.kind() == std::io::ErrorKind::NotFound && relocations < RELOCATIONS_MAX {
                    relocations += 1;
                    continue;
                }
            }
            match found.map_err(|e| e.into_storage(&self.name, file.path()))? {
                Some((next, chunk)) => {
                    // Empty when the first batch starts at or past `upper`.
                    let chunks: Vec<Chunk> = Some(chunk).filter(|c| !c.is_empty()).into_iter().collect();
                    self.count_read(&chunks, offset, next);
                    return Ok(ReadSlice { chunks, log_start, log_end });
                }
                // The offset fell in a gap at the end of a compacted segment.
                None => from = seg_next,
            }
        }
    }

    fn count_read(&self, chunks: &[Chunk], from: i64, next: i64) {
        bump(&self.stats.bytes_read, chunks.iter().map(|c| c.len() as u64).sum());
        bump(&self.stats.records_read, (next - from).max(0) as u64);
    }

    /// The segment holding `offset` (or the next one, for an offset in a
    /// gap): its file, index position, size and next offset.
    fn locate(&self, st: &LogState, offset: i64) -> (Rc<file::SegmentFile>, u64, u64, i64) {
        let seg = st
            .segments
            .range(..=offset)
            .next_back()
            .filter(|(_, s)| offset < s.next_offset)
            .or_else(|| st.segments.range(offset..).next())
            .map(|(_, s)| s)
            .expect("offset within [log_start, log_end) lies in or before a segment");
        let relative = (offset.max(seg.base_offset) - seg.base_offset) as u32;
        let start = u64::from(seg.index.lookup(relative));
        // The active segment is read only as far as its file holds it.
        let active = seg.base_offset == st.active().base_offset;
        let end = if active { seg.size.min(self.behind.written().0) } else { seg.size };
        (seg.file.clone(), start, end, seg.next_offset)
    }

    /// The first offset whose record timestamp is at least `timestamp`, with
    /// that timestamp (Kafka's ListOffsets by time); `None` when every record
    /// is older. Uses the time index to skip to the right part of the log.
    pub async fn offset_for_timestamp(&self, timestamp: i64) -> Result<Option<(i64, i64)>, StorageError> {
        self.behind.flush().await?;
        let target = {
            let st = self.state.borrow();
            st.segments.values().find(|s| s.max_timestamp >= timestamp).map(|s| {
                let relative = s.index.lookup_time_floor(timestamp);
                (s.file.clone(), u64::from(s.index.lookup(relative)), s.size)
            })
        };
        let Some((file, mut pos, end)) = target else { return Ok(None) };
        while pos < end {
            let len = (limits::READ_WINDOW_BYTES as u64).min(end - pos) as usize;
            let window =
                file.read_at(pos, len).await.map_err(|e| StorageError::from_io(&self.name, file.path(), "read", e))?;
            let mut at = 0;
            while at + record_batch::HEADER_BYTES <= window.len() {
                let h = BatchHeader::parse(&window[at..], limits::BATCH_BYTES_MAX).map_err(|reason| {
                    StorageError::Corrupt {
                        partition: self.name.clone(),
                        file: file.path().to_path_buf(),
                        position: pos + at as u64,
                        reason,
                    }
                })?;
                if at + h.total_bytes() > window.len() {
                    break;
                }
                if let Some((delta, ts)) =
                    record_batch::first_record_at_or_after(&window[at..at + h.total_bytes()], timestamp)
                {
                    return Ok(Some((h.base_offset + i64::from(delta), ts)));
                }
                at += h.total_bytes();
            }
            if at == 0 {
                // A batch larger than the window: read it whole next round.
                let h =
                    BatchHeader::parse(&window, limits::BATCH_BYTES_MAX).map_err(|reason| StorageError::Corrupt {
                        partition: self.name.clone(),
                        file: file.path().to_path_buf(),
                        position: pos,
                        reason,
                    })?;
                let whole = file
                    .read_at(pos, h.total_bytes())
                    .await
                    .map_err(|e| StorageError::from_io(&self.name, file.path(), "read", e))?;
                if let Some((delta, ts)) = record_batch::first_record_at_or_after(&whole, timestamp) {
                    return Ok(Some((h.base_offset + i64::from(delta), ts)));
                }
                at = h.total_bytes();
            }
            pos += at as u64;
        }
        Ok(None)
    }
}

/// Times one read locates its offset again after finding its segment file
/// replaced; each retry sees a newer log, so more means a bug, not a race.
const RELOCATIONS_MAX: u32 = 3;

/// A failure while reading a segment: I/O, or bytes that no longer parse.
enum ReadError {
    Io(std::io::Error),
    Corrupt { position: u64, reason: record_batch::BatchError },
}

impl ReadError {
    fn into_storage(self, name: &PartitionName, file: &Path) -> StorageError {
        match self {
            Self::Io(e) => StorageError::from_io(name, file, "read", e),
            Self::Corrupt { position, reason } => {
                StorageError::Corrupt { partition: name.clone(), file: file.to_path_buf(), position, reason }
            }
        }
    }
}

/// Finds, in a sealed segment, the range of whole batches from the first one
/// whose last offset is at least `offset`, up to `max_bytes` (the first batch
/// always). Only batch headers are read, through the page cache, which then
/// holds the range for `sendfile`. `None` when no batch reaches `offset`.
async fn locate_sealed(
    file: &file::SegmentFile,
    start: u64,
    seg_end: u64,
    offset: i64,
    max_bytes: usize,
    upper: i64,
) -> Result<Option<(i64, Chunk)>, ReadError> {
    let buffered = file.buffered().await.map_err(ReadError::Io)?;
    let path = Arc::new(file.path().to_path_buf());
    let walker = buffered.clone();
    let bounds = Bounds { offset, max_bytes, upper };
    let found = glommio::executor().spawn_blocking(move || walk_headers(&walker, start, seg_end, bounds)).await?;
    Ok(found.map(|(pos, len, last)| (last + 1, Chunk::File(FileRange { file: buffered, path, pos, len }))))
}

/// The last offset of the last whole batch in `bytes` (headers only).
fn last_offset_in(bytes: &[u8]) -> Option<i64> {
    let mut at = 0;
    let mut last = None;
    while at + record_batch::HEADER_BYTES <= bytes.len() {
        let h = BatchHeader::parse(&bytes[at..], usize::MAX).ok()?;
        if at + h.total_bytes() > bytes.len() {
            break;
        }
        last = Some(h.last_offset());
        at += h.total_bytes();
    }
    last
}

/// Bytes read at a time while walking batch headers in a sealed segment:
/// several small batches per read, and little wasted on large ones.
const HEADER_WALK_WINDOW: usize = 16 << 10;

/// What a segment read takes: batches from the one holding `offset`, up to
/// `max_bytes` (the first always), starting below `upper`.
#[derive(Clone, Copy)]
struct Bounds {
    offset: i64,
    max_bytes: usize,
    upper: i64,
}

/// Blocking header walk for [`locate_sealed`]: `(position, length, last
/// offset)`; length 0 when the first batch starts at or past `upper`.
fn walk_headers(
    file: &std::fs::File,
    start: u64,
    seg_end: u64,
    bounds: Bounds,
) -> Result<Option<(u64, usize, i64)>, ReadError> {
    use std::os::unix::fs::FileExt;
    let Bounds { offset, max_bytes, upper } = bounds;
    let mut window = vec![0u8; HEADER_WALK_WINDOW];
    let mut pos = start;
    let mut first: Option<u64> = None;
    let mut taken = 0usize;
    let mut last = offset;
    while pos < seg_end {
        let want = (HEADER_WALK_WINDOW as u64).min(seg_end - pos) as usize;
        let got = file.read_at(&mut window[..want], pos).map_err(ReadError::Io)?;
        if got < record_batch::HEADER_BYTES {
            return Err(ReadError::Corrupt {
                position: pos,
                reason: record_batch::BatchError::Incomplete { needed: record_batch::HEADER_BYTES, have: got },
            });
        }
        let mut at = 0usize;
        while at + record_batch::HEADER_BYTES <= got {
            let header = BatchHeader::parse(&window[at..got], limits::BATCH_BYTES_MAX)
                .map_err(|reason| ReadError::Corrupt { position: pos + at as u64, reason })?;
            let total = header.total_bytes();
            if pos + (at + total) as u64 > seg_end {
                return Err(ReadError::Corrupt {
                    position: pos + at as u64,
                    reason: record_batch::BatchError::Incomplete {
                        needed: total,
                        have: (seg_end - pos - at as u64) as usize,
                    },
                });
            }
            match first {
                None if header.last_offset() < offset => {}
                None if header.base_offset >= upper => return Ok(Some((pos + at as u64, 0, offset - 1))),
                None => {
                    first = Some(pos + at as u64);
                    taken = total;
                    last = header.last_offset();
                }
                Some(begin) => {
                    if taken + total > max_bytes || header.base_offset >= upper {
                        return Ok(Some((begin, taken, last)));
                    }
                    taken += total;
                    last = header.last_offset();
                }
            }
            at += total;
        }
        pos += at as u64;
    }
    Ok(first.map(|begin| (begin, taken, last)))
}

/// Reads whole batches from a segment file, from the first batch whose last
/// offset is at least `offset`. Walks headers from `start` (an index hint);
/// never parses records. `None` when no batch in the segment reaches `offset`.
async fn read_segment(
    file: &file::SegmentFile,
    start: u64,
    seg_end: u64,
    offset: i64,
    max_bytes: usize,
    upper: i64,
    index_interval_bytes: u32,
) -> Result<Option<Bytes>, ReadError> {
    let mut pos = start;
    let want = max_bytes.max(record_batch::HEADER_BYTES);
    while pos < seg_end {
        let len = ((index_interval_bytes as usize + want) as u64).min(seg_end - pos) as usize;
        let window = file.read_at(pos, len).await.map_err(ReadError::Io)?;
        let mut at = 0usize;
        let mut first: Option<(usize, usize)> = None; // (start in window, bytes taken)
        while at + record_batch::HEADER_BYTES <= window.len() {
            let header = BatchHeader::parse(&window[at..], limits::BATCH_BYTES_MAX)
                .map_err(|reason| ReadError::Corrupt { position: pos + at as u64, reason })?;
            let total = header.total_bytes();
            match first {
                None if header.last_offset() < offset => at += total,
                None if header.base_offset >= upper => return Ok(Some(Bytes::new())),
                None => {
                    if at + total > window.len() {
                        // The first batch is larger than the window: read it whole.
                        let start = pos + at as u64;
                        let whole = file.read_at(start, total).await.map_err(ReadError::Io)?;
                        return Ok(Some(whole));
                    }
                    first = Some((at, total));
                    at += total;
                }
                Some((begin, taken)) => {
                    if taken + total > max_bytes || at + total > window.len() || header.base_offset >= upper {
                        break;
                    }
                    first = Some((begin, taken + total));
                    at += total;
                }
            }
        }
        if let Some((begin, taken)) = first {
            return Ok(Some(window.slice(begin..begin + taken)));
        }
        pos += at as u64;
        if at == 0 {
            // Not even one header fits: the segment ends in a partial batch,
            // which recovery and append never leave behind.
            return Err(ReadError::Corrupt {
                position: pos,
                reason: record_batch::BatchError::Incomplete { needed: record_batch::HEADER_BYTES, have: window.len() },
            });
        }
    }
    Ok(None)
}
