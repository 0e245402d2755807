//! Prometheus metrics: counters kept per shard in plain cells (no locks,
//! no atomics — a shard's counters are touched by its own thread only),
//! gathered by message passing when `/metrics` is scraped, and written in
//! the OpenMetrics text format by the `prometheus-client` crate.
//!
//! - `buckets`: fixed-bucket histograms (request and fsync latency, group
//!   commit size);
//! - `ShardMetrics`: what one shard counts outside its logs (requests,
//!   their stages, errors, long-poll waiters, cross-shard messages);
//! - `stages`: one request's time split into stages (read wait, decode,
//!   permit, hop, DMA write, fdatasync, encode, socket write, …);
//! - `snapshot`: a shard's `Send` copy of everything, partitions and groups
//!   included;
//! - `expose`: the Collector that encodes snapshots of all shards;
//! - `http`: the tiny HTTP endpoint on shard 0.

pub mod buckets;
pub mod expose;
pub mod http;
pub mod snapshot;
pub mod stages;

use std::{
    cell::{Cell, RefCell},
    collections::BTreeMap,
};

use buckets::{BucketSnapshot, Buckets};
use stages::{RequestTrace, Stage, STAGES};

/// One API's stage histograms, and the total they split.
#[derive(Debug)]
struct ApiStages {
    total: Buckets,
    stages: Vec<Buckets>,
    /// Per bucket of `total` (same bounds, +Inf last), per stage: seconds
    /// spent by the requests whose total fell in that bucket. This gives
    /// the breakdown of the slowest requests (say the p99 bucket and up),
    /// which per-stage percentiles cannot: they do not add up.
    by_total: Vec<Vec<Cell<f64>>>,
}

impl ApiStages {
    fn new() -> Self {
        let bounds = buckets::LATENCY_SECONDS;
        Self {
            total: Buckets::new(bounds),
            stages: STAGES.iter().map(|_| Buckets::new(bounds)).collect(),
            by_total: (0..=bounds.len()).map(|_| STAGES.iter().map(|_| Cell::new(0.0)).collect()).collect(),
        }
    }

    fn observe(&self, trace: &RequestTrace) {
        let total = trace.total().as_secs_f64();
        self.total.observe(total);
        let row = &self.by_total[buckets::bucket_index(buckets::LATENCY_SECONDS, total)];
        for (i, stage) in STAGES.iter().enumerate() {
            let spent = trace.spent(*stage).as_secs_f64();
            self.stages[i].observe(spent);
            row[i].set(row[i].get() + spent);
        }
    }
}

/// A copy of one API's stages: `(stage, histogram)` in `STAGES` order.
#[derive(Debug, Clone, Default)]
pub struct StagesSnapshot {
    pub total: BucketSnapshot,
    pub stages: Vec<(Stage, BucketSnapshot)>,
    /// (upper bound of the total's bucket, seconds per stage in `STAGES`
    /// order), for buckets that saw requests.
    pub by_total: Vec<(f64, Vec<f64>)>,
}

/// One shard's counters outside its partition logs.
#[derive(Debug, Default)]
pub struct ShardMetrics {
    /// (API key, version) → latency of each request handled here.
    requests: RefCell<BTreeMap<(i16, i16), Buckets>>,
    /// API key → its requests' stages (answered requests only).
    stages: RefCell<BTreeMap<i16, ApiStages>>,
    /// Error code → partitions a produce answered with it.
    pub produce_errors: RefCell<BTreeMap<i16, u64>>,
    pub fetch_errors: RefCell<BTreeMap<i16, u64>>,
    /// Error code (TOPIC/GROUP/CLUSTER/TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    /// → checks the ACLs refused.
    pub authorization_denied: RefCell<BTreeMap<i16, u64>>,
    /// Fetches waiting for data right now.
    pub long_poll_waiters: Cell<u64>,
    /// Consumers' partition reads served from a copy this broker follows
    /// (KIP-392), and the leader's answers sending a consumer to one.
    pub follower_reads: Cell<u64>,
    pub read_replica_referrals: Cell<u64>,
    /// Follower fetches answered for a moved high watermark alone.
    pub high_watermark_answers: Cell<u64>,
    pub cross_shard_sent: Cell<u64>,
    pub cross_shard_received: Cell<u64>,
    /// Calls to other shards not yet answered.
    pub cross_shard_outstanding: Cell<u64>,
    /// (SASL mechanism, "success" or "failure") → authentications.
    pub sasl_authentications: RefCell<BTreeMap<(&'static str, &'static str), u64>>,
    /// Listener name → TLS handshakes that failed (bad certificates,
    /// garbage, the handshake deadline).
    pub tls_handshake_failures: RefCell<BTreeMap<String, u64>>,
    /// How late the shard's wake-up probe ran (`shard::maintenance::
    /// spawn_wakeup_probe`): the wait a task woken now has before it runs.
    pub wakeup_lag: Buckets,
}

impl ShardMetrics {
    pub fn request(&self, api_key: i16, version: i16, seconds: f64) {
        self.requests
            .borrow_mut()
            .entry((api_key, version))
            .or_insert_with(|| Buckets::new(buckets::LATENCY_SECONDS))
            .observe(seconds);
    }

    /// Records an answered request's stages, once its response was written.
    pub fn request_stages(&self, api_key: i16, trace: &RequestTrace) {
        self.stages.borrow_mut().entry(api_key).or_insert_with(ApiStages::new).observe(trace);
    }

    pub fn stages(&self) -> Vec<(i16, StagesSnapshot)> {
        let bounds = buckets::LATENCY_SECONDS;
        self.stages
            .borrow()
            .iter()
            .map(|(key, s)| {
                let total = s.total.snapshot();
                let by_total = total
                    .buckets
                    .iter()
                    .zip(&s.by_total)
                    .filter(|((_, n), _)| *n > 0)
                    .map(|((le, _), row)| (*le, row.iter().map(Cell::get).collect()))
                    .collect();
                debug_assert_eq!(s.by_total.len(), bounds.len() + 1);
                let stages = STAGES.iter().zip(&s.stages).map(|(st, b)| (*st, b.snapshot())).collect();
                (*key, StagesSnapshot { total, stages, by_total })
            })
            .collect()
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
