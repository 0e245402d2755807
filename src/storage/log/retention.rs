//! Trimming the log from the front: retention by bytes and by time (whole
//! sealed segments, oldest first) and DeleteRecords (a log start that moves
//! up, persisted in the partition directory).

use std::path::Path;

use super::state::PartitionLog;
use crate::storage::{error::StorageError, file, segment, txn_index};

/// How a retention pass changed the log.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct RetentionOutcome {
    pub segments_deleted: usize,
    pub bytes_deleted: u64,
    pub log_start: i64,
}

impl PartitionLog {
    /// Deletes whole segments, oldest first, beyond `retention.bytes` or older
    /// than `retention.ms`. The active segment is never deleted.
    pub async fn enforce_retention(&self) -> Result<RetentionOutcome, StorageError> {
        // Settle before taking the permit, so appends rarely wait for it;
        // again under the permit for a roll that happened meanwhile.
        self.settle().await;
        let _permit = self.write_permit.acquire_permit(1).await.expect("write permit: never closed");
        self.settle().await;
        if !self.config.delete || self.ensure_open().is_err() {
            return Ok(RetentionOutcome { log_start: self.log_start(), ..RetentionOutcome::default() });
        }
        let now = self.clock.now_ms();
        let victims = {
            let mut st = self.state.borrow_mut();
            let mut total: u64 = st.segments.values().map(|s| s.size).sum();
            let mut victims = Vec::new();
            // An open transaction's records stay until its marker: the
            // segment holding its first offset, and all after, are kept.
            let first_open = st.producers.first_open_offset();
            while st.segments.len() > 1 {
                let oldest = st.segments.values().next().expect("len > 1");
                if first_open.is_some_and(|first| oldest.next_offset > first) {
                    break;
                }
                let over_size = self.config.retention_bytes.is_some_and(|max| total - oldest.size >= max);
                let too_old = self.config.retention_ms.is_some_and(|ms| now - oldest.retention_timestamp() > ms);
                if !(over_size || too_old) {
                    break;
                }
                let (_, seg) = st.segments.pop_first().expect("len > 1");
                total -= seg.size;
                victims.push(seg);
            }
            st.log_start = st.log_start.max(st.segments.values().next().expect("active remains").base_offset);
            let log_start = st.log_start;
            st.cache.trim_before(log_start);
            // Index files of segments compaction merged away are named by
            // bases no segment has any more: they go by their entries.
            let stale_indices = st.aborted.drop_before(log_start);
            (victims, stale_indices)
        };
        let (victims, stale_indices) = victims;
        self.remove_txn_indices(stale_indices).await?;
        let mut outcome = RetentionOutcome { log_start: self.log_start(), ..RetentionOutcome::default() };
        for seg in &victims {
            outcome.segments_deleted += 1;
            outcome.bytes_deleted += seg.size;
            self.remove_segment_files(seg.path()).await?;
        }
        Ok(outcome)
    }

    /// DeleteRecords: moves the log start up to `offset` (-1: the log end),
    /// persists it (so a restart keeps it), and deletes the segments wholly
    /// below it. Returns the new log start (Kafka's low watermark).
    pub async fn delete_records(&self, offset: i64) -> Result<i64, StorageError> {
        self.settle().await;
        let _permit = self.write_permit.acquire_permit(1).await.expect("write permit: never closed");
        self.settle().await;
        self.ensure_open()?;
        let (log_start, log_end) = (self.log_start(), self.log_end());
        let target = if offset == -1 { log_end } else { offset };
        if !(0..=log_end).contains(&target) {
            return Err(StorageError::OffsetOutOfRange { partition: self.name.clone(), offset, log_start, log_end });
        }
        if target <= log_start {
            return Ok(log_start);
        }
        let path = self.dir.join(LOG_START_FILE);
        let (name, to_write) = (self.name.clone(), path.clone());
        glommio::executor()
            .spawn_blocking(move || file::write_atomically(&to_write, format!("{target}\n").as_bytes()))
            .await
            .map_err(|e| StorageError::from_io(&name, &path, "write log start", e))?;
        let victims = {
            let mut st = self.state.borrow_mut();
            st.log_start = target;
            let mut victims = Vec::new();
            while st.segments.len() > 1 && st.segments.values().next().is_some_and(|s| s.next_offset <= target) {
                victims.push(st.segments.pop_first().expect("len > 1").1);
            }
            st.cache.trim_before(target);
            let stale_indices = st.aborted.drop_before(target);
            (victims, stale_indices)
        };
        let (victims, stale_indices) = victims;
        self.remove_txn_indices(stale_indices).await?;
        for seg in &victims {
            self.remove_segment_files(seg.path()).await?;
        }
        Ok(target)
    }

    /// Removes the `.txnindex` files of these bases (all their entries
    /// are below the log start).
    async fn remove_txn_indices(&self, bases: Vec<i64>) -> Result<(), StorageError> {
        if bases.is_empty() {
            return Ok(());
        }
        let (dir, name) = (self.dir.clone(), self.name.clone());
        glommio::executor()
            .spawn_blocking(move || {
                for base in bases {
                    let path = txn_index::path(&dir, base);
                    match std::fs::remove_file(&path) {
                        Ok(()) => {}
                        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                        Err(e) => {
                            return Err(StorageError::from_io(&name, &path, "delete aborted-transactions index", e))
                        }
                    }
                }
                Ok(())
            })
            .await
    }

    async fn remove_segment_files(&self, log_path: &Path) -> Result<(), StorageError> {
        let log_path = log_path.to_path_buf();
        let dir = self.dir.clone();
        let name = self.name.clone();
        glommio::executor()
            .spawn_blocking(move || {
                let suffixes = [
                    txn_index::TXN_INDEX_SUFFIX,
                    segment::INDEX_SUFFIX,
                    segment::TIME_INDEX_SUFFIX,
                    segment::LOG_SUFFIX,
                ];
                for suffix in suffixes {
                    let path = log_path.with_extension(suffix);
                    match std::fs::remove_file(&path) {
                        Ok(()) => {}
                        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                        Err(e) => return Err(StorageError::from_io(&name, &path, "delete segment", e)),
                    }
                }
                file::sync_dir(&dir).map_err(|e| StorageError::from_io(&name, &dir, "sync directory", e))
            })
            .await
    }
}

/// The log start a DeleteRecords set, in the partition directory (Kafka keeps
/// it in a log-start-offset checkpoint); absent until the first one.
const LOG_START_FILE: &str = "log-start-offset";

/// The persisted log start, if any (a file that cannot be read counts as
/// none: the first segment's base is then the start, as before the delete).
pub(super) fn read_log_start(dir: &Path) -> Option<i64> {
    std::fs::read_to_string(dir.join(LOG_START_FILE)).ok()?.trim().parse().ok()
}
