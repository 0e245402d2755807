//! Errors that storage operations can meet in operation. Each names the
//! partition and, where a file is involved, the file.

use std::{fmt, io, path::PathBuf};

use crate::protocol::record_batch::BatchError;

/// Identifies a partition in errors and logs: `topic-partition`, as Kafka
/// names partition directories.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct PartitionName(pub String);

impl fmt::Display for PartitionName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[derive(Debug)]
#[non_exhaustive]
pub enum StorageError {
    /// The producer's batch failed validation; nothing was written.
    InvalidBatch { partition: PartitionName, reason: BatchError },
    /// An idempotent producer's batch is out of sequence or from a fenced
    /// epoch; nothing was written.
    Sequence { partition: PartitionName, reason: crate::storage::producers::SequenceError },
    /// A retry of an idempotent batch whose first copy is still being
    /// written; the client should retry (retriable).
    DuplicateInFlight { partition: PartitionName },
    /// The requested offset is outside `[log_start, log_end]`.
    OffsetOutOfRange { partition: PartitionName, offset: i64, log_start: i64, log_end: i64 },
    /// The file system is full (ENOSPC). Nothing was acknowledged; the append
    /// may be retried once space is freed.
    NoSpace { partition: PartitionName, file: PathBuf },
    /// An I/O call failed (EIO and anything else not listed).
    Io { partition: PartitionName, file: PathBuf, op: &'static str, source: io::Error },
    /// `fdatasync` failed. The kernel may have dropped the dirty data, so the
    /// partition now refuses writes until it is reopened and recovered.
    SyncFailed { partition: PartitionName, file: PathBuf, source: io::Error },
    /// An earlier `fdatasync` failed; writes are refused until reopen.
    WritesRefused { partition: PartitionName },
    /// The log was closed (its topic deleted, reconfigured or moved): work
    /// that still reached this log object is refused, since its directory
    /// may already belong to a new one.
    Closed { partition: PartitionName },
    /// On-disk bytes that passed recovery no longer parse.
    Corrupt { partition: PartitionName, file: PathBuf, position: u64, reason: BatchError },
    /// A data-directory file (checkpoint, index) is malformed.
    BadFile { partition: PartitionName, file: PathBuf, reason: String },
}

impl StorageError {
    /// Maps an I/O failure to the typed error for its errno.
    pub(crate) fn from_io(
        partition: &PartitionName,
        file: &std::path::Path,
        op: &'static str,
        source: io::Error,
    ) -> Self {
        if source.raw_os_error() == Some(libc::ENOSPC) {
            return Self::NoSpace { partition: partition.clone(), file: file.to_path_buf() };
        }
        Self::Io { partition: partition.clone(), file: file.to_path_buf(), op, source }
    }

    /// The same error for another waiter of a failed group write. I/O sources
    /// are rebuilt from their errno or kind, since `io::Error` is not `Clone`.
    pub(crate) fn duplicate(&self) -> Self {
        let io_copy = |e: &io::Error| match e.raw_os_error() {
            Some(errno) => io::Error::from_raw_os_error(errno),
            None => io::Error::new(e.kind(), e.to_string()),
        };
        match self {
            Self::InvalidBatch { partition, reason } => {
                Self::InvalidBatch { partition: partition.clone(), reason: reason.clone() }
            }
            Self::Sequence { partition, reason } => Self::Sequence { partition: partition.clone(), reason: *reason },
            Self::DuplicateInFlight { partition } => Self::DuplicateInFlight { partition: partition.clone() },
            Self::OffsetOutOfRange { partition, offset, log_start, log_end } => Self::OffsetOutOfRange {
                partition: partition.clone(),
                offset: *offset,
                log_start: *log_start,
                log_end: *log_end,
            },
            Self::NoSpace { partition, file } => Self::NoSpace { partition: partition.clone(), file: file.clone() },
            Self::Io { partition, file, op, source } => {
                Self::Io { partition: partition.clone(), file: file.clone(), op, source: io_copy(source) }
            }
            Self::SyncFailed { partition, file, source } => {
                Self::SyncFailed { partition: partition.clone(), file: file.clone(), source: io_copy(source) }
            }
            Self::WritesRefused { partition } => Self::WritesRefused { partition: partition.clone() },
            Self::Closed { partition } => Self::Closed { partition: partition.clone() },
            Self::Corrupt { partition, file, position, reason } => Self::Corrupt {
                partition: partition.clone(),
                file: file.clone(),
                position: *position,
                reason: reason.clone(),
            },
            Self::BadFile { partition, file, reason } => {
                Self::BadFile { partition: partition.clone(), file: file.clone(), reason: reason.clone() }
            }
        }
    }

    /// True when retrying later may succeed without operator action on the
    /// partition (Kafka answers these with a retriable error code).
    pub fn is_retriable(&self) -> bool {
        matches!(self, Self::NoSpace { .. } | Self::DuplicateInFlight { .. } | Self::Closed { .. })
    }
}

impl fmt::Display for StorageError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::InvalidBatch { partition, reason } => {
                write!(f, "partition {partition}: batch rejected: {reason}")
            }
            Self::Sequence { partition, reason } => write!(f, "partition {partition}: batch rejected: {reason}"),
            Self::DuplicateInFlight { partition } => {
                write!(f, "partition {partition}: an earlier copy of this batch is still being written; retry")
            }
            Self::OffsetOutOfRange { partition, offset, log_start, log_end } => {
                write!(f, "partition {partition}: offset {offset} out of range [{log_start}, {log_end}]")
            }
            Self::NoSpace { partition, file } => {
                write!(f, "partition {partition}: no space left writing {}", file.display())
            }
            Self::Io { partition, file, op, source } => {
                write!(f, "partition {partition}: {op} {} failed: {source}", file.display())
            }
            Self::SyncFailed { partition, file, source } => write!(
                f,
                "partition {partition}: fdatasync of {} failed: {source}; writes refused until reopen",
                file.display()
            ),
            Self::WritesRefused { partition } => {
                write!(f, "partition {partition}: writes refused after an earlier fdatasync failure; reopen to recover")
            }
            Self::Closed { partition } => {
                write!(f, "partition {partition}: this log was closed (topic deleted, reconfigured or moved); retry")
            }
            Self::Corrupt { partition, file, position, reason } => {
                write!(f, "partition {partition}: corrupt batch in {} at byte {position}: {reason}", file.display())
            }
            Self::BadFile { partition, file, reason } => {
                write!(f, "partition {partition}: bad file {}: {reason}", file.display())
            }
        }
    }
}

impl std::error::Error for StorageError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Io { source, .. } | Self::SyncFailed { source, .. } => Some(source),
            Self::InvalidBatch { reason, .. } | Self::Corrupt { reason, .. } => Some(reason),
            _ => None,
        }
    }
}
