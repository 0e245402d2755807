//! The group commit: callers queue on the sync permit, and one `fdatasync`
//! covers every append written before it, for all who wait behind it. A
//! failed sync refuses writes until the log is reopened (fsyncgate).

use std::time::Instant;

use super::state::{bump, PartitionLog};
use crate::storage::{error::StorageError, recovery};

impl PartitionLog {
    /// Returns once every offset below `target` is durable: in the shard
    /// journal when the log has one (`journaled`), else (or when the journal
    /// cannot vouch for them) by syncing the segment.
    pub async fn sync_through(&self, target: i64) -> Result<(), StorageError> {
        if let Some(link) = &self.journal {
            if let Some(entry) = self.journal_through(link, target) {
                if link.journal.wait(entry).await {
                    return Ok(());
                }
                // The journal failed: the segment sync makes it durable.
            }
        }
        self.segment_sync_through(target).await
    }

    /// Syncs the segment if anything written is not yet covered by a
    /// segment sync (a journal checkpoint: the journal may then forget it).
    /// A run queued in the journal before this call has finished its
    /// segment write once the write permit is free, so the sync covers it.
    pub async fn sync_segments(&self) -> Result<(), StorageError> {
        drop(self.write_permit.acquire_permit(1).await.expect("write permit: never closed"));
        let end = self.log_end();
        if self.state.borrow().durable_offset >= end {
            return Ok(());
        }
        self.segment_sync_through(end).await
    }

    /// Returns once every offset below `target` is covered by a segment
    /// sync. Callers queue on the sync permit; whoever gets it finds its
    /// data already covered by the sync before it, or syncs everything
    /// written so far for all behind it.
    pub(super) async fn segment_sync_through(&self, target: i64) -> Result<(), StorageError> {
        if self.state.borrow().durable_offset >= target {
            return Ok(());
        }
        let _permit = self.sync_permit.acquire_permit(1).await.expect("sync permit: never closed");
        if self.state.borrow().durable_offset >= target {
            return Ok(());
        }
        self.sync_active().await
    }

    /// Waits for the directory sync of the last roll, if one is pending;
    /// the caller holds the sync permit. A background sync that never
    /// finished (its task was dropped) is done here instead. A failed one
    /// refuses writes, as a failed fdatasync does: the segment's name may
    /// not be on the disk.
    async fn await_dir_sync(&self) -> Result<(), StorageError> {
        let pending = self.dir_sync.borrow_mut().take();
        let Some(job) = pending else { return Ok(()) };
        let synced = match job.await {
            Some(synced) => synced,
            None => recovery::sync_segment_dir(self.dir.clone(), self.name.clone()).await,
        };
        if let Err(e) = &synced {
            self.state.borrow_mut().failed = true;
            log::error!("{e}; refusing writes");
        }
        synced
    }

    /// Syncs the active segment now, whatever was synced before.
    pub(super) async fn force_sync(&self) -> Result<(), StorageError> {
        let _permit = self.sync_permit.acquire_permit(1).await.expect("sync permit: never closed");
        self.sync_active().await
    }

    /// One fdatasync of the active segment, once every byte staged for it
    /// is in the file; the caller holds the sync permit.
    async fn sync_active(&self) -> Result<(), StorageError> {
        if self.state.borrow().failed {
            return Err(StorageError::WritesRefused { partition: self.name.clone() });
        }
        self.behind.flush().await?;
        self.await_dir_sync().await?;
        let (file, upto) = {
            let st = self.state.borrow();
            // Written and committed: a direct write's run is committed just
            // after its write completed.
            (st.active().file.clone(), st.next_offset.min(self.behind.written().1))
        };
        bump(&self.stats.syncs, 1);
        let appends = self.stats.appends.get();
        self.stats.appends_per_sync.observe((appends - self.stats.appends_at_last_sync.get()) as f64);
        self.stats.appends_at_last_sync.set(appends);
        let started = Instant::now();
        let synced = file.fdatasync().await;
        self.stats.sync_seconds.observe(started.elapsed().as_secs_f64());
        match synced {
            Ok(()) => {
                let mut st = self.state.borrow_mut();
                st.durable_offset = st.durable_offset.max(upto);
                Ok(())
            }
            Err(source) => {
                // fsyncgate: after a failed fsync the kernel may have dropped
                // the dirty pages and cleared the error, so a retry could
                // "succeed" over lost data. Refuse writes until recovery.
                self.state.borrow_mut().failed = true;
                log::error!(
                    "partition {}: fdatasync of {} failed: {source}; refusing writes",
                    self.name,
                    file.path().display()
                );
                Err(StorageError::SyncFailed { partition: self.name.clone(), file: file.path().to_path_buf(), source })
            }
        }
    }
}
