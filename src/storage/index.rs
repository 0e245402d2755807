//! Sparse per-segment indices, kept in memory and written to disk when a
//! segment is sealed (rolled or closed cleanly).
//!
//! - Offset index: `(relative base offset: u32, file position: u32)`, one entry
//!   every `index_interval_bytes` of log. A lookup gives a position at or
//!   before the wanted batch; the reader walks headers from there.
//! - Time index: `(max timestamp so far: i64, relative offset: u32)`, added
//!   with the offset entries whenever the largest timestamp grew.
//!
//! Both are pure data: they are rebuilt from the segment when missing or
//! suspect, so they never need to be durable before the data they describe.

/// Bytes of one offset index entry on disk.
pub const OFFSET_ENTRY_BYTES: usize = 8;
/// Bytes of one time index entry on disk.
pub const TIME_ENTRY_BYTES: usize = 12;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OffsetEntry {
    pub relative_offset: u32,
    pub position: u32,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimeEntry {
    pub timestamp: i64,
    pub relative_offset: u32,
}

/// Both indices of one segment, plus the bookkeeping that decides when the
/// next entry is due.
#[derive(Debug, Clone, Default)]
pub struct SegmentIndex {
    offsets: Vec<OffsetEntry>,
    times: Vec<TimeEntry>,
    bytes_since_entry: u64,
    interval_bytes: u64,
}

impl SegmentIndex {
    pub fn new(interval_bytes: u32) -> Self {
        Self { interval_bytes: u64::from(interval_bytes), ..Self::default() }
    }

    /// Records a batch appended at `position`. The first batch of a segment is
    /// always indexed, then one entry per interval.
    pub fn on_batch(&mut self, relative_offset: u32, position: u32, batch_bytes: u64, max_timestamp: i64) {
        if self.offsets.is_empty() || self.bytes_since_entry >= self.interval_bytes {
            self.offsets.push(OffsetEntry { relative_offset, position });
            let newest = self.times.last().map_or(i64::MIN, |t| t.timestamp);
            if max_timestamp > newest {
                self.times.push(TimeEntry { timestamp: max_timestamp, relative_offset });
            }
            self.bytes_since_entry = 0;
        }
        self.bytes_since_entry += batch_bytes;
    }

    /// Position of the last indexed batch whose base offset is `<= relative`,
    /// or 0 when the segment has no earlier entry.
    pub fn lookup(&self, relative_offset: u32) -> u32 {
        let idx = self.offsets.partition_point(|e| e.relative_offset <= relative_offset);
        if idx == 0 {
            0
        } else {
            self.offsets[idx - 1].position
        }
    }

    /// Relative offset of the first indexed batch whose max timestamp is at
    /// least `timestamp` (the ListOffsets-by-time lookup), if any.
    pub fn lookup_time(&self, timestamp: i64) -> Option<u32> {
        let idx = self.times.partition_point(|e| e.timestamp < timestamp);
        self.times.get(idx).map(|e| e.relative_offset)
    }

    /// Relative offset from which to scan for the first batch whose max
    /// timestamp reaches `timestamp`: the entry before the first time entry
    /// that reaches it (the batch can lie between the two), or 0.
    pub fn lookup_time_floor(&self, timestamp: i64) -> u32 {
        let idx = self.times.partition_point(|e| e.timestamp < timestamp);
        if idx == 0 {
            0
        } else {
            self.times[idx - 1].relative_offset
        }
    }

    /// The last offset entry: where a re-scan after loading can start.
    pub fn last_entry(&self) -> Option<OffsetEntry> {
        self.offsets.last().copied()
    }

    pub fn offset_entries(&self) -> &[OffsetEntry] {
        &self.offsets
    }

    pub fn encode_offsets(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.offsets.len() * OFFSET_ENTRY_BYTES);
        for e in &self.offsets {
            out.extend_from_slice(&e.relative_offset.to_be_bytes());
            out.extend_from_slice(&e.position.to_be_bytes());
        }
        out
    }

    pub fn encode_times(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.times.len() * TIME_ENTRY_BYTES);
        for e in &self.times {
            out.extend_from_slice(&e.timestamp.to_be_bytes());
            out.extend_from_slice(&e.relative_offset.to_be_bytes());
        }
        out
    }

    /// Loads index files written at seal time. Returns `None` when they are
    /// not exactly what a seal would have written for a segment of
    /// `segment_bytes`: then the caller rebuilds from the data.
    pub fn decode(offsets: &[u8], times: &[u8], interval_bytes: u32, segment_bytes: u64) -> Option<Self> {
        if !offsets.len().is_multiple_of(OFFSET_ENTRY_BYTES) || !times.len().is_multiple_of(TIME_ENTRY_BYTES) {
            return None;
        }
        let mut index = Self::new(interval_bytes);
        for chunk in offsets.chunks_exact(OFFSET_ENTRY_BYTES) {
            let e = OffsetEntry {
                relative_offset: u32::from_be_bytes(chunk[..4].try_into().ok()?),
                position: u32::from_be_bytes(chunk[4..].try_into().ok()?),
            };
            let ordered =
                index.offsets.last().is_none_or(|p| p.relative_offset < e.relative_offset && p.position < e.position);
            if !ordered || u64::from(e.position) >= segment_bytes {
                return None;
            }
            index.offsets.push(e);
        }
        for chunk in times.chunks_exact(TIME_ENTRY_BYTES) {
            let e = TimeEntry {
                timestamp: i64::from_be_bytes(chunk[..8].try_into().ok()?),
                relative_offset: u32::from_be_bytes(chunk[8..].try_into().ok()?),
            };
            if index.times.last().is_some_and(|p| p.timestamp >= e.timestamp) {
                return None;
            }
            index.times.push(e);
        }
        if segment_bytes > 0 && index.offsets.first().map(|e| e.position) != Some(0) {
            return None;
        }
        // The caller re-scans from the last entry's batch, which counts from 0.
        index.bytes_since_entry = 0;
        Some(index)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sparse_entries_and_lookup() {
        let mut idx = SegmentIndex::new(100);
        let mut pos = 0u32;
        for rel in 0..50u32 {
            idx.on_batch(rel, pos, 30, 1000 + i64::from(rel));
            pos += 30;
        }
        // One entry at the start, then one each time 100+ bytes accumulated.
        let entries = idx.offset_entries();
        assert_eq!(entries[0], OffsetEntry { relative_offset: 0, position: 0 });
        assert_eq!(entries[1], OffsetEntry { relative_offset: 4, position: 120 });
        assert_eq!(idx.lookup(3), 0);
        assert_eq!(idx.lookup(4), 120);
        assert_eq!(idx.lookup(7), 120);
        assert_eq!(idx.lookup_time(1005), Some(8));
        assert_eq!(idx.lookup_time(5000), None);
    }

    #[test]
    fn encode_decode_round_trip_and_rejects_damage() {
        let mut idx = SegmentIndex::new(64);
        for rel in 0..20u32 {
            idx.on_batch(rel * 3, rel * 40, 40, i64::from(rel));
        }
        let (o, t) = (idx.encode_offsets(), idx.encode_times());
        let back = SegmentIndex::decode(&o, &t, 64, 800).expect("round trip");
        assert_eq!(back.offset_entries(), idx.offset_entries());
        assert!(SegmentIndex::decode(&o[..o.len() - 1], &t, 64, 800).is_none());
        assert!(SegmentIndex::decode(&o, &t, 64, 100).is_none(), "position past segment end");
        let mut swapped = o.clone();
        swapped.rotate_left(OFFSET_ENTRY_BYTES);
        assert!(SegmentIndex::decode(&swapped, &t, 64, 800).is_none());
    }
}
