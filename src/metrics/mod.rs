//! Prometheus metrics: counters kept per shard in plain cells (no locks,
//! no atomics — a shard's counters are touched by its own thread only),
//! gathered by message passing when `/metrics` is scraped, and written in
//! the OpenMetrics text format by the `prometheus-client` crate.
//!
//! - `buckets`: fixed-bucket histograms (request and fsync latency, group
//!   commit size);
//! - `ShardMetrics`: what one shard counts outside its logs (requests,
//!   errors, long-poll waiters, cross-shard messages);
//! - `snapshot`: a shard's `Send` copy of everything, partitions and groups
//!   included;
//! - `expose`: the Collector that encodes snapshots of all shards;
//! - `http`: the tiny HTTP endpoint on shard 0.

pub mod buckets;
pub mod expose;
pub mod http;
pub mod snapshot;

use std::{
    cell::{Cell, RefCell},
    collections::BTreeMap,
};

use buckets::{BucketSnapshot, Buckets};

/// One shard's counters outside its partition logs.
#[derive(Debug, Default)]
pub struct ShardMetrics {
    /// (API key, version) → latency of each request handled here.
    requests: RefCell<BTreeMap<(i16, i16), Buckets>>,
    /// Error code → partitions a produce answered with it.
    pub produce_errors: RefCell<BTreeMap<i16, u64>>,
    pub fetch_errors: RefCell<BTreeMap<i16, u64>>,
    /// Fetches waiting for data right now.
    pub long_poll_waiters: Cell<u64>,
    pub cross_shard_sent: Cell<u64>,
    pub cross_shard_received: Cell<u64>,
    /// Calls to other shards not yet answered.
    pub cross_shard_outstanding: Cell<u64>,
}

impl ShardMetrics {
    pub fn request(&self, api_key: i16, version: i16, seconds: f64) {
        self.requests
            .borrow_mut()
            .entry((api_key, version))
            .or_insert_with(|| Buckets::new(buckets::LATENCY_SECONDS))
            .observe(seconds);
    }

    pub fn error(map: &RefCell<BTreeMap<i16, u64>>, code: i16) {
        if code != 0 {
            *map.borrow_mut().entry(code).or_default() += 1;
        }
    }

    pub fn requests(&self) -> Vec<((i16, i16), BucketSnapshot)> {
        self.requests.borrow().iter().map(|(k, b)| (*k, b.snapshot())).collect()
    }
}

pub fn add(cell: &Cell<u64>, by: u64) {
    cell.set(cell.get() + by);
}

pub fn sub(cell: &Cell<u64>, by: u64) {
    cell.set(cell.get().saturating_sub(by));
}
