//! A follower's append: batches copied from the partition's leader keep the
//! offsets and leader epoch the leader gave them, so the follower's log is
//! the leader's, byte for byte. They go through the same queue and DMA
//! write runs as a producer's batches (`append`); producer state and
//! transaction markers are applied from them as recovery applies them.

use std::{cell::RefCell, rc::Rc};

use bytes::BytesMut;

use super::state::{PartitionLog, Pending, ResultSlot};
use crate::{
    protocol::record_batch::{self, BatchError},
    storage::error::StorageError,
};

impl PartitionLog {
    /// Appends the batches in `bytes` (a fetch answer's records from the
    /// leader: whole batches, the last perhaps cut short, which is left for
    /// the next fetch) and returns the log end after them. Batches the log
    /// already holds are skipped; one that would leave a gap (only a
    /// compacted topic may have them) or fails its CRC refuses the rest.
    pub async fn append_copied(&self, bytes: &[u8]) -> Result<i64, StorageError> {
        self.ensure_writable()?;
        let invalid = |reason| StorageError::InvalidBatch { partition: self.name.clone(), reason };
        let mut slots: Vec<ResultSlot> = Vec::new();
        let mut next = self.log_end();
        let mut at = 0;
        while at < bytes.len() {
            let header = match record_batch::check_batch(&bytes[at..], self.config.max_batch_bytes) {
                Ok(h) => h,
                Err(BatchError::Incomplete { .. }) => break,
                Err(reason) => return Err(invalid(reason)),
            };
            let total = header.total_bytes();
            if header.last_offset() < next {
                at += total;
                continue;
            }
            let continues = header.base_offset == next || (self.config.compacted && header.base_offset > next);
            if !continues {
                return Err(invalid(BatchError::BadOffsets {
                    base_offset: header.base_offset,
                    expected: next,
                    leader_epoch: header.leader_epoch,
                }));
            }
            let slot: ResultSlot = Rc::new(RefCell::new(None));
            let batch = BytesMut::from(&bytes[at..at + total]);
            self.state.borrow_mut().pending.push(Pending {
                batch,
                header,
                slot: slot.clone(),
                copied: true,
                synced: true,
            });
            slots.push(slot);
            next = header.last_offset() + 1;
            at += total;
        }
        let Some(last) = slots.last() else { return Ok(next) };
        let permit = self.write_permit.acquire_permit(1).await.expect("write permit: never closed");
        if last.borrow().is_none() {
            self.flush_pending(&mut Default::default()).await;
        }
        drop(permit);
        for slot in slots {
            slot.borrow_mut().take().expect("a flush answers every queued append")?;
        }
        Ok(self.log_end())
    }
}
