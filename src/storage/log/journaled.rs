//! Durable appends through the shard journal (`storage::journal`). Once a
//! log has had a durable append, every batch it writes is also queued in
//! the journal, as the segment write is issued; a durable append then
//! waits for the journal's sync instead of the segment's. Until the journal
//! holds every offset above what the segment has synced (the first durable
//! append), or when the journal failed, the segment is synced as before.

use super::state::{PartitionLog, Pending};
use crate::storage::journal::JournalLink;

impl PartitionLog {
    /// Queues a run about to be written to the segment (offsets assigned)
    /// in the journal, if this log uses it.
    pub(super) fn journal_run(&self, run: &[Pending]) {
        let Some(link) = &self.journal else { return };
        let mut st = self.state.borrow_mut();
        let jt = &mut st.journal;
        let (Some(first), Some(last)) = (run.first(), run.last()) else { return };
        if !jt.wanted {
            return;
        }
        let batches = run.iter().map(|p| bytes::Bytes::copy_from_slice(&p.batch));
        let Some(entry) = link.journal.push(link.key, batches) else { return };
        jt.from.get_or_insert(first.header.base_offset);
        jt.end = last.header.last_offset() + 1;
        jt.entry = entry;
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
