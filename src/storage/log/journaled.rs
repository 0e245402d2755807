//! Appends through the shard journal (`storage::journal`). With
//! write-behind every batch goes to the journal first (`behind`); without
//! it, once a log has had a durable append, every batch it writes is also
//! queued in the journal, as the segment write is issued; a durable append then
//! waits for the journal's sync instead of the segment's. Until the journal
//! holds every offset above what the segment has synced (the first durable
//! append), or when the journal failed, the segment is synced as before.

use super::{
    behind::BEHIND_BYTES,
    state::{PartitionLog, Pending},
};
use crate::storage::journal::JournalLink;

impl PartitionLog {
    /// Whether appends are answered from the journal's write, their segment
    /// writes following in the background (`behind`): not while the last
    /// segment write failed.
    pub(super) fn writes_behind(&self) -> bool {
        !self.behind.delay.is_zero()
            && !self.behind.stalled()
            && self.journal.as_ref().is_some_and(|l| !l.journal.failed())
    }

    /// Queues a run about to be written (offsets assigned) in the journal,
    /// if this log uses it (sharing `batches`, the run's bytes); returns
    /// the entry holding it.
    ///
    /// Under write-behind, a run of acks=1 appends of `BEHIND_BYTES` or
    /// more skips the journal and writes its segment at once (after the
    /// staged bytes): write-behind would start that segment write at once
    /// anyway, so the journal would only write the bytes a second time.
    /// The journal then no longer holds every offset since `from`, so it
    /// starts over with its next run, and a durable append syncs the
    /// segment until a sync covers the gap.
    pub(super) fn journal_run(&self, run: &[Pending], batches: &[bytes::Bytes]) -> Option<u64> {
        let link = self.journal.as_ref()?;
        let behind = self.writes_behind();
        let mut st = self.state.borrow_mut();
        let jt = &mut st.journal;
        let (first, last) = (run.first()?, run.last()?);
        if !jt.wanted && !behind {
            return None;
        }
        let bytes: usize = batches.iter().map(bytes::Bytes::len).sum();
        if behind && !jt.wanted && bytes as u64 >= BEHIND_BYTES && !run.iter().any(|p| p.synced) {
            jt.from = None;
            return None;
        }
        let entry = link.journal.push(link.key, batches.iter().cloned(), run.iter().any(|p| p.synced))?;
        jt.from.get_or_insert(first.header.base_offset);
        jt.end = last.header.last_offset() + 1;
        jt.entry = entry;
        Some(entry)
    }

    /// The journal entry to wait for to make every offset below `target`
    /// durable; `None` when the segment must be synced instead.
    pub(super) fn journal_through(&self, link: &JournalLink, target: i64) -> Option<u64> {
        let mut st = self.state.borrow_mut();
        let st = &mut *st;
        if st.failed || st.durable_offset >= target || link.journal.failed() {
            return None;
        }
        let jt = &mut st.journal;
        jt.wanted = true;
        let whole = jt.from.is_some_and(|from| from <= st.durable_offset);
        (whole && jt.end >= target).then_some(jt.entry)
    }
}
