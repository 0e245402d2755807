//! What the log lends a compaction pass (`storage::compact`): snapshots of
//! its segments, and a typed swap of sealed segments for cleaned ones, so
//! compaction never touches the log's state.

use std::rc::Rc;

use glommio::sync::Permit;

use super::state::PartitionLog;
use crate::storage::{file, segment::Segment};

/// A segment as the log held it when asked: what a compaction pass reads,
/// and names when it replaces segments.
pub(crate) struct SegmentSnapshot {
    pub(crate) base: i64,
    pub(crate) file: Rc<file::SegmentFile>,
    pub(crate) size: u64,
    pub(crate) next_offset: i64,
}

impl SegmentSnapshot {
    fn of(s: &Segment) -> Self {
        Self { base: s.base_offset, file: s.file.clone(), size: s.size, next_offset: s.next_offset }
    }
}

/// One compaction pass over a log (`storage::compact`), holding the clean
/// permit: one pass at a time per log. Appends continue meanwhile.
pub(crate) struct CompactionPass<'a> {
    log: &'a PartitionLog,
    _clean: Permit<'a>,
    /// The active segment's base when the pass began: the segments below it
    /// are the ones this pass cleans.
    active_base: i64,
}

/// The write permit, taken to swap a group of sealed segments out; the
/// group was still sealed and unchanged when it was taken.
pub(crate) struct SealedLock<'a> {
    log: &'a PartitionLog,
    _write: Permit<'a>,
    bases: Vec<i64>,
    /// One past the last offset the group covers.
    end: i64,
    /// The group's descriptors, held open until `replace`: between the file
    /// swap on disk and `replace`, readers still locate these segments, and
    /// a closed one could no longer reopen (its name now means the merged
    /// file, or nothing).
    _open: Vec<Rc<file::Handles>>,
}

impl PartitionLog {
    /// Starts a compaction pass once no other runs and the background work of
    /// past rolls has landed (index files of a segment the pass replaces must
    /// not land afterwards). `None` when no segment was sealed since the last
    /// pass finished.
    pub(crate) async fn begin_compaction(&self) -> Option<CompactionPass<'_>> {
        let clean = self.clean_permit.acquire_permit(1).await.expect("clean permit: never closed");
        self.settle().await;
        self.ensure_open().ok()?;
        let active_base = self.state.borrow().active().base_offset;
        if Some(active_base) == self.cleaned_up_to.get() {
            return None;
        }
        Some(CompactionPass { log: self, _clean: clean, active_base })
    }
}

impl<'a> CompactionPass<'a> {
    /// The sealed segments as they are now, oldest first.
    pub(crate) fn sealed(&self) -> Vec<SegmentSnapshot> {
        let st = self.log.state.borrow();
        let n = st.segments.len();
        st.segments.values().take(n.saturating_sub(1)).map(SegmentSnapshot::of).collect()
    }

    /// The active segment as it is now.
    /// The active segment as far as its file holds it (with write-behind
    /// its last bytes may be on their way; they are above the durable
    /// offset, which is all compaction reads of it).
    pub(crate) fn active(&self) -> SegmentSnapshot {
        let mut snapshot = SegmentSnapshot::of(self.log.state.borrow().active());
        snapshot.size = snapshot.size.min(self.log.behind.written().0);
        snapshot
    }

    /// Takes the write permit to swap `group` (consecutive sealed segments,
    /// from [`Self::sealed`]) out. `None` when retention got to one of them
    /// first (or it was replaced since).
    pub(crate) async fn lock_sealed(&self, group: &[SegmentSnapshot]) -> Option<SealedLock<'a>> {
        let log = self.log;
        let write = log.write_permit.acquire_permit(1).await.expect("write permit: never closed");
        if log.ensure_open().is_err() || !group.iter().all(|g| log.still_sealed(g.base, &g.file)) {
            return None;
        }
        let bases = group.iter().map(|g| g.base).collect();
        let end = group[group.len() - 1].next_offset;
        let mut open = Vec::with_capacity(group.len());
        for g in group {
            open.push(g.file.hold().await.ok()?);
        }
        Some(SealedLock { log, _write: write, bases, end, _open: open })
    }

    /// Records that the segments sealed when the pass began are clean: the
    /// next pass waits until another segment is sealed.
    pub(crate) fn finish(self) {
        self.log.cleaned_up_to.set(Some(self.active_base));
    }
}

impl SealedLock<'_> {
    /// Replaces the locked segments with `merged` (or with nothing), once the
    /// files on disk were swapped (`storage::swap`).
    pub(crate) fn replace(self, merged: Option<Segment>) {
        let mut st = self.log.state.borrow_mut();
        for b in &self.bases {
            st.segments.remove(b);
        }
        // Cached batches of these segments are the uncleaned originals.
        st.cache.trim_before(self.end);
        if let Some(seg) = merged {
            st.segments.insert(seg.base_offset, seg);
        }
    }
}

impl PartitionLog {
    fn still_sealed(&self, base: i64, file: &Rc<file::SegmentFile>) -> bool {
        let st = self.state.borrow();
        let is_active = st.segments.keys().next_back() == Some(&base);
        !is_active && st.segments.get(&base).is_some_and(|s| Rc::ptr_eq(&s.file, file))
    }
}
