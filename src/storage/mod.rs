//! Per-partition storage: segment files of Kafka record batches written with
//! direct I/O, sparse indices, a tail cache, group-committed syncs, recovery
//! and retention.
//!
//! **Architecture invariant:** storage never parses records. It reads batch
//! headers (offsets, lengths, timestamps, CRC) and treats the rest as bytes.

pub mod background;
pub mod batch_cache;
pub mod chunk;
pub mod compact;
pub mod config;
pub mod error;
pub mod file;
pub mod index;
pub mod journal;
pub mod log;
pub mod open_files;
pub mod page_cache_writer;
pub mod producers;
pub mod recovery;
pub mod replica_files;
pub mod segment;
pub mod swap;
#[cfg(test)]
pub(crate) mod testing;
pub mod txn_index;
pub mod zero_ahead;

pub use chunk::{Chunk, FileRange};
pub use config::{Clock, LogConfig};
pub use error::{PartitionName, StorageError};
pub use file::{Fault, Faults};
pub use log::{AppendInfo, AppendTimings, Durability, PartitionLog, ReadSlice, RetentionOutcome};
pub use recovery::RecoveryReport;
