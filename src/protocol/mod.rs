//! Pure Kafka wire-format codecs: no I/O, no runtime, no allocation on the
//! validation path.
//!
//! **Architecture invariant:** nothing in `protocol` touches a file, a socket
//! or a clock. It is tested as plain functions.

pub mod claimed_counts;
pub mod client;
pub mod errors;
pub mod record_batch;
pub mod varint;
