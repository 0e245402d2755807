//! One partition's log: appends, group-committed syncs, reads by offset,
//! rolling, retention and clean shutdown.
//!
//! A `PartitionLog` lives on one shard and is used by many tasks of that shard
//! at once (through `Rc`). Appends are serialised by a write permit so offsets
//! are assigned in order and the tail block is rewritten by one writer at a
//! time; syncs are serialised by a sync permit, and every durable appender
//! queued behind a running `fdatasync` is covered by the next one: that is the
//! group commit. No `RefCell` borrow is held across an `.await`.
//!
//! The log is one type, `PartitionLog`, whose state is in `state`; each job
//! is a module of its own, an `impl PartitionLog` over that state. Reading
//! order, and the direction of use (each uses only those above it):
//!
//! - `state` — `PartitionLog`, `LogState` (segments, tail block, cache, the
//!   append queue, producers), `LogStats`, the accessors.
//! - `behind` — the active segment's bytes on their way to its file, and
//!   write-behind: with a journal, appends are answered once the journal
//!   holds them and reach the segment later, in larger writes.
//! - `group_commit` — `sync_through`: one `fdatasync` for all who wait.
//! - `journaled` — or, with a shard journal, one journal write for all.
//! - `seal` — `roll`, and the background work a roll leaves (`SealWork`,
//!   `CheckpointWork`) that `settle` waits for.
//! - `append` — the append queue flushed as DMA write runs (`append` →
//!   `flush_pending` → `write_run` → `commit_batch`).
//! - `read` — `read` (tail cache, active segment by direct read, sealed
//!   segments by sendfile range) and `offset_for_timestamp`; the free
//!   functions there walk batch headers in segment files.
//! - `replica` — a follower's append: batches copied from the leader, kept
//!   at the leader's offsets.
//! - `retention` — retention by bytes and time, and DeleteRecords.
//! - `cleaning` — what the log lends a compaction pass (`storage::compact`):
//!   segment snapshots and a typed swap of sealed segments.
//! - `lifecycle` — `open` (recovery, checkpoint, producer state rebuild) and
//!   `close`.
//!
//! This file only names the modules and what they export.

mod append;
mod behind;
mod cleaning;
#[cfg(test)]
mod close_tests;
mod group_commit;
#[cfg(test)]
mod journal_tests;
mod journaled;
mod lifecycle;
mod read;
mod replica;
#[cfg(test)]
mod replica_tests;
mod retention;
#[cfg(test)]
mod roll_tests;
mod seal;
mod state;
#[cfg(test)]
mod txn_tests;

pub use append::{AppendTimings, Durability};
pub(crate) use cleaning::{CompactionPass, SegmentSnapshot};
pub use read::ReadSlice;
pub use retention::RetentionOutcome;
pub use state::{AppendInfo, LogStats, PartitionLog};
