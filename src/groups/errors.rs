//! What can go wrong between the coordinator and its `__consumer_offsets`
//! partitions, as types: the caller decides the Kafka error code and the
//! log line from the case, not from a message.

use std::fmt;

use super::records::DecodeError;

/// Why records could not be made durable in a group's `__consumer_offsets`
/// partition. Every case leaves the coordinator's caches as they were.
#[derive(Debug)]
#[non_exhaustive]
pub enum StoreError {
    /// The shard is stopping; its partitions are closing.
    ShuttingDown,
    /// The partition is not open on the coordinator's shard (its topic table
    /// moved on, or it failed to open).
    NotOpen { partition: i32 },
    /// The partition is replicated and this broker stopped leading it, or
    /// its in-sync replicas did not take the records in time: the message
    /// says which, naming the partition.
    NotLeader(String),
    /// The log refused or failed the append (full disk, failed write or
    /// sync). Kept as the storage layer's own error, which names the
    /// partition and file.
    Storage(Box<dyn std::error::Error + 'static>),
}

impl fmt::Display for StoreError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::ShuttingDown => f.write_str("the shard is shutting down"),
            Self::NotOpen { partition } => write!(f, "{}-{partition} is not open on this shard", super::OFFSETS_TOPIC),
            Self::NotLeader(message) => f.write_str(message),
            Self::Storage(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for StoreError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Storage(e) => Some(e.as_ref()),
            _ => None,
        }
    }
}

/// A `__consumer_offsets` record the coordinator could not read at start;
/// the record is skipped and the rest of the partition still loads.
#[derive(Debug)]
pub enum ReplayError {
    Key(DecodeError),
    OffsetValue(DecodeError),
    GroupValue(DecodeError),
}

impl fmt::Display for ReplayError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Key(e) => write!(f, "key: {e}"),
            Self::OffsetValue(e) => write!(f, "offset value: {e}"),
            Self::GroupValue(e) => write!(f, "group value: {e}"),
        }
    }
}

impl std::error::Error for ReplayError {}
