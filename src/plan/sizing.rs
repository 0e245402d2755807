//! The sizing arithmetic of `shardlog plan`: pure functions from a
//! workload, a machine shape and measured figures to resource needs, each
//! with the formula and inputs that produced it. Nothing is invented: a
//! figure that needs a missing measurement is reported missing.

use serde::Deserialize;

/// What the user must carry, and on what machines (`workload.toml`).
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Workload {
    pub name: String,
    /// Produced bytes a second (before compression), average and peak.
    pub ingress_avg_mb_per_s: f64,
    pub ingress_peak_mb_per_s: f64,
    /// Records a second; derived from MB/s and the record size when absent.
    pub records_avg_per_s: Option<f64>,
    pub records_peak_per_s: Option<f64>,
    pub record_bytes: u64,
    pub topics: u32,
    pub partitions: u32,
    /// Consumer groups that each read everything.
    #[serde(default = "one")]
    pub consumer_groups: u32,
    /// Share of consumer reads that miss the batch cache and go to disk
    /// (lagging consumers, replays).
    #[serde(default = "catch_up")]
    pub catch_up_fraction: f64,
    pub retention_hours: Option<f64>,
    pub retention_bytes_per_partition: Option<u64>,
    /// Stored bytes per produced byte (1.0: uncompressed).
    #[serde(default = "one_f")]
    pub compression_ratio: f64,
    #[serde(default = "one")]
    pub replication_factor: u32,
    /// "1" or "all": which measured runs apply.
    #[serde(default = "acks_all")]
    pub acks: String,
    pub latency_objective_p99_ms: f64,
    /// Yearly growth of ingress (0.5 = +50% a year).
    #[serde(default)]
    pub growth_per_year: f64,
    #[serde(default = "one_f")]
    pub horizon_years: f64,
    /// Spare capacity kept at peak (0.3 = plan to 70% utilisation).
    #[serde(default = "headroom")]
    pub headroom: f64,
    /// Extra writes per stored byte for compacted topics (the cleaner).
    #[serde(default)]
    pub compaction_overhead: f64,
    /// Seconds of newest data each partition keeps in the batch cache so
    /// tailing consumers never touch the disk.
    #[serde(default = "cache_seconds")]
    pub cache_seconds: f64,
    pub machine: MachineShape,
}

/// The machines to buy.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct MachineShape {
    pub cores: u32,
    /// Cores kept for interrupts and the OS (not running shards).
    #[serde(default = "one")]
    pub reserved_cores: u32,
    pub disks: u32,
    pub disk_capacity_gb: f64,
    pub network_gbps: f64,
    pub memory_gb: f64,
    /// Share of memory given to the batch cache.
    #[serde(default = "half")]
    pub cache_memory_fraction: f64,
}

fn one() -> u32 {
    1
}
fn one_f() -> f64 {
    1.0
}
fn half() -> f64 {
    0.5
}
fn catch_up() -> f64 {
    0.1
}
fn acks_all() -> String {
    "all".into()
}
fn headroom() -> f64 {
    0.3
}
fn cache_seconds() -> f64 {
    10.0
}

/// Figures measured on the user's hardware.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Measured {
    /// One shard's latency against throughput (bench sweep): (achieved MB/s,
    /// p99 ms), in rate order.
    pub sweep: Vec<(f64, f64)>,
    /// The sweep's highest sustained MB/s (saturation), if it saturated.
    pub saturation_mb_per_s: Option<f64>,
    /// Sequential write and read bandwidth of one disk, MB/s (iotune).
    pub disk_write_mb_per_s: Option<f64>,
    pub disk_read_mb_per_s: Option<f64>,
    /// What one replica past the leader costs in CPU against a produce of
    /// the same bytes (`perf/cluster-bench.sh`'s replication-cost.json).
    pub replication_cost: Option<f64>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Resource {
    Cpu,
    DiskWrite,
    DiskRead,
    DiskCapacity,
    NetworkIn,
    NetworkOut,
    Memory,
    Replication,
}

impl Resource {
    pub fn label(self) -> &'static str {
        match self {
            Resource::Cpu => "CPU (shards)",
            Resource::DiskWrite => "disk write bandwidth",
            Resource::DiskRead => "disk read bandwidth",
            Resource::DiskCapacity => "disk capacity",
            Resource::NetworkIn => "network in",
            Resource::NetworkOut => "network out",
            Resource::Memory => "memory (batch cache, partition state)",
            Resource::Replication => "replication factor",
        }
    }
}

/// One row of the sizing table.
#[derive(Debug, Clone, PartialEq)]
pub struct Line {
    pub resource: Resource,
    /// What is needed, in `unit`; `None` when a measurement is missing.
    pub need: Option<f64>,
    pub unit: &'static str,
    /// What one machine provides within the headroom.
    pub per_machine: Option<f64>,
    pub machines: Option<u64>,
    pub formula: String,
    pub inputs: String,
    pub note: String,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    pub lines: Vec<Line>,
    pub machines: u64,
    pub limit: Resource,
    /// Shards (cores running shards) in the whole cluster at the plan.
    pub shards: Option<u64>,
    /// MB/s one shard may carry at the objective (from the sweep).
    pub shard_mb_per_s_at_objective: Option<f64>,
    /// MB/s each shard carries at peak with the planned machines.
    pub operating_point_mb_per_s: Option<f64>,
    /// Peak ingress at the end of the horizon, MB/s.
    pub peak_at_horizon: f64,
    pub avg_at_horizon: f64,
    /// True when the latency objective, not saturation, bounds a shard.
    pub latency_bound: bool,
    pub missing: Vec<String>,
    pub assumptions: Vec<String>,
    /// Utilisation at peak of each resource with the planned machines.
    pub utilisation: Vec<(Resource, f64)>,
}

/// The highest throughput one shard sustained with p99 within `objective`;
/// `None` if no measured step met it. Between a step that met it and the
/// next that did not, the crossing is interpolated linearly.
pub fn throughput_at_objective(sweep: &[(f64, f64)], objective_ms: f64) -> Option<f64> {
    let mut best: Option<f64> = None;
    for (i, &(mb, p99)) in sweep.iter().enumerate() {
        if p99 <= objective_ms {
            best = Some(best.map_or(mb, |b: f64| b.max(mb)));
            if let Some(&(next_mb, next_p99)) = sweep.get(i + 1) {
                if next_p99 > objective_ms && next_mb > mb && next_p99 > p99 {
                    let t = (objective_ms - p99) / (next_p99 - p99);
                    best = Some(best.unwrap_or(mb).max(mb + t * (next_mb - mb)));
                }
            }
        }
    }
    best
}

fn ceil_div(need: f64, per: f64) -> u64 {
    if per <= 0.0 {
        return u64::MAX;
    }
    (need / per - 1e-9).ceil().max(0.0) as u64
}

/// The figures every line of a plan is derived from.
struct Basis {
    growth: f64,
    /// Peak and average ingress at the end of the horizon, MB/s.
    peak: f64,
    avg: f64,
    rf: f64,
    /// Produces' worth of CPU per byte produced: 1 + (RF − 1) × a
    /// replica's measured cost (RF when none was measured).
    copies: f64,
    /// The fraction of each resource planned to be used at peak.
    keep: f64,
    /// Bytes stored per byte produced.
    stored: f64,
    /// Consumer groups reading each byte.
    fanout: f64,
    shard_cores: f64,
}

impl Basis {
    fn of(w: &Workload) -> Self {
        let growth = (1.0 + w.growth_per_year).powf(w.horizon_years);
        let shape = &w.machine;
        Basis {
            growth,
            peak: w.ingress_peak_mb_per_s * growth,
            avg: w.ingress_avg_mb_per_s * growth,
            rf: f64::from(w.replication_factor.max(1)),
            copies: f64::from(w.replication_factor.max(1)),
            keep: 1.0 - w.headroom.clamp(0.0, 0.95),
            stored: w.compression_ratio,
            fanout: f64::from(w.consumer_groups),
            shard_cores: f64::from(shape.cores.saturating_sub(shape.reserved_cores).max(1)),
        }
    }
}

pub fn plan(w: &Workload, m: &Measured) -> Plan {
    let mut b = Basis::of(w);
    let mut missing = Vec::new();
    match m.replication_cost {
        Some(c) => b.copies = 1.0 + (b.rf - 1.0) * c,
        None if b.rf > 1.0 => missing.push(
            "no measured replication cost: run perf/cluster-bench.sh and pass its replication-cost.json (--replication); a replica is assumed to cost a produce".into(),
        ),
        None => {}
    }
    let mut assumptions = assumptions(w, &b, m.replication_cost);
    let at_objective = throughput_at_objective(&m.sweep, w.latency_objective_p99_ms);
    let latency_bound = match (at_objective, m.saturation_mb_per_s) {
        (Some(a), Some(s)) => a < 0.95 * s,
        (Some(_), None) => false,
        (None, _) => !m.sweep.is_empty(),
    };
    let mut lines = vec![cpu_line(w, m, &b, at_objective, latency_bound, &mut missing)];
    lines.extend(disk_bandwidth_lines(w, m, &b, &mut missing));
    lines.push(disk_capacity_line(w, &b, &mut missing));
    lines.extend(network_lines(w, &b));
    lines.push(memory_line(w, &b));
    lines.push(Line {
        resource: Resource::Replication,
        need: Some(b.rf),
        unit: "brokers",
        per_machine: Some(1.0),
        machines: Some(w.replication_factor.max(1) as u64),
        formula: "one replica per machine".into(),
        inputs: format!("RF {}", b.rf),
        note: String::new(),
    });

    let (limit, machines) = lines
        .iter()
        .filter_map(|l| l.machines.map(|n| (l.resource, n)))
        .fold((Resource::Replication, 1u64), |(r, n), (r2, n2)| if n2 > n { (r2, n2) } else { (r, n) });
    // A latency objective nobody measured meeting is the limit itself.
    let limit = if at_objective.is_none() && !m.sweep.is_empty() { Resource::Cpu } else { limit };
    let shards = lines[0].need.map(|_| machines * b.shard_cores as u64);
    let operating_point = shards.map(|s| b.peak * b.copies / s as f64);
    let utilisation = lines
        .iter()
        .filter_map(|l| match l.resource {
            Resource::Replication => None,
            Resource::Cpu => {
                Some((Resource::Cpu, b.peak * b.copies / (at_objective? * b.shard_cores * machines as f64)))
            }
            r => Some((r, l.need? / (l.per_machine? / b.keep * machines as f64))),
        })
        .collect();
    if m.disk_read_mb_per_s.is_some() {
        assumptions.push("disk bandwidths are one disk's (iotune) times the disks per machine".into());
    }
    Plan {
        lines,
        machines,
        limit,
        shards,
        shard_mb_per_s_at_objective: at_objective,
        operating_point_mb_per_s: operating_point,
        peak_at_horizon: b.peak,
        avg_at_horizon: b.avg,
        latency_bound,
        missing,
        assumptions,
        utilisation,
    }
}

fn assumptions(w: &Workload, b: &Basis, replica_cost: Option<f64>) -> Vec<String> {
    let shape = &w.machine;
    vec![
        format!(
            "peak and average ingress grow by {:.0}% a year for {} years: ×{:.3}",
            w.growth_per_year * 100.0,
            w.horizon_years,
            b.growth
        ),
        format!(
            "every resource is planned to {:.0}% utilisation at peak (headroom {:.0}%)",
            b.keep * 100.0,
            w.headroom * 100.0
        ),
        match replica_cost {
            Some(c) => format!(
                "replication factor {}: each produced byte is written and carried by {} brokers; a replica past the leader costs {c:.2} of a produce's CPU (measured: the leader's sends and the follower's appends)",
                w.replication_factor, w.replication_factor
            ),
            None => format!(
                "replication factor {}: each produced byte is written and carried by {} brokers, like a produce (followers fetch and append)",
                w.replication_factor, w.replication_factor
            ),
        },
        format!(
            "throughput per shard is what one shard sustained in the sweep with p99 ≤ {} ms; shards scale linearly (one per core, no shared locks)",
            w.latency_objective_p99_ms
        ),
        format!("{} of {} cores per machine run shards; the rest take interrupts", shape.cores.saturating_sub(shape.reserved_cores).max(1), shape.cores),
        format!(
            "tailing consumers read from the batch cache; {:.0}% of consumer reads go to disk (catch-up)",
            w.catch_up_fraction * 100.0
        ),
    ]
}

/// CPU: shards at the latency objective.
fn cpu_line(
    w: &Workload,
    m: &Measured,
    b: &Basis,
    at_objective: Option<f64>,
    latency_bound: bool,
    missing: &mut Vec<String>,
) -> Line {
    let (peak, rf, copies, keep, shard_cores) = (b.peak, b.rf, b.copies, b.keep, b.shard_cores);
    if m.sweep.is_empty() {
        missing.push("no bench sweep result: run `shardlog bench sweep` against a one-shard broker".into());
        return unsized_cpu(
            shard_cores,
            format!("peak {peak:.1} MB/s, RF {rf}"),
            "missing: latency-vs-throughput sweep",
        );
    }
    let Some(per_shard) = at_objective else {
        let lowest = m.sweep.iter().map(|s| s.1).fold(f64::MAX, f64::min);
        missing.push(format!(
            "no measured load met p99 ≤ {} ms (lowest measured p99 {lowest:.3} ms): the objective is out of reach on this hardware",
            w.latency_objective_p99_ms
        ));
        let inputs = format!("objective p99 ≤ {} ms; lowest measured p99 {lowest:.3} ms", w.latency_objective_p99_ms);
        return unsized_cpu(shard_cores, inputs, "latency objective not met at any measured load");
    };
    let shards = ceil_div(peak * copies, per_shard * keep);
    Line {
        resource: Resource::Cpu,
        need: Some(shards as f64),
        unit: "shards",
        per_machine: Some(shard_cores),
        machines: Some(ceil_div(shards as f64, shard_cores)),
        formula: "⌈peak × (1 + (RF − 1) × replica cost) ÷ (shard MB/s at objective × (1 − headroom))⌉".into(),
        inputs: format!(
            "peak {peak:.1} MB/s × {copies:.2} (RF {rf}) ÷ ({per_shard:.1} MB/s × {keep:.2}){}",
            m.saturation_mb_per_s.map_or(String::new(), |s| format!("; saturation {s:.1} MB/s"))
        ),
        note: if latency_bound {
            "the latency objective, not throughput, bounds a shard".into()
        } else {
            "a shard is bounded by its throughput".into()
        },
    }
}

/// The CPU line when no shard throughput can be read off the sweep.
fn unsized_cpu(shard_cores: f64, inputs: String, note: &str) -> Line {
    Line {
        resource: Resource::Cpu,
        need: None,
        unit: "shards",
        per_machine: Some(shard_cores),
        machines: None,
        formula: "peak × RF ÷ (shard MB/s at objective × (1 − headroom))".into(),
        inputs,
        note: note.into(),
    }
}

/// Disk bandwidth: writes of every replica, and catch-up reads.
fn disk_bandwidth_lines(w: &Workload, m: &Measured, b: &Basis, missing: &mut Vec<String>) -> [Line; 2] {
    let (peak, rf, keep, stored, fanout) = (b.peak, b.rf, b.keep, b.stored, b.fanout);
    let shape = &w.machine;
    let write_need = peak * rf * stored * (1.0 + w.compaction_overhead);
    let write_per = m.disk_write_mb_per_s.map(|d| d * f64::from(shape.disks) * keep);
    if m.disk_write_mb_per_s.is_none() {
        missing.push("no disk profile: run `shardlog iotune` and pass --io io-properties.toml".into());
    }
    let write = Line {
        resource: Resource::DiskWrite,
        need: Some(write_need),
        unit: "MB/s",
        per_machine: write_per,
        machines: write_per.map(|p| ceil_div(write_need, p)),
        formula: "peak × RF × compression × (1 + compaction overhead)".into(),
        inputs: format!(
            "{peak:.1} × {rf} × {stored} × {:.2}; per machine {} disks × {} MB/s × {keep:.2}",
            1.0 + w.compaction_overhead,
            shape.disks,
            m.disk_write_mb_per_s.map_or("(missing)".into(), |d| format!("{d:.0}"))
        ),
        note: String::new(),
    };
    let read_need = peak * fanout * w.catch_up_fraction * stored;
    let read_per = m.disk_read_mb_per_s.map(|d| d * f64::from(shape.disks) * keep);
    let read = Line {
        resource: Resource::DiskRead,
        need: Some(read_need),
        unit: "MB/s",
        per_machine: read_per,
        machines: read_per.map(|p| ceil_div(read_need, p)),
        formula: "peak × consumer groups × catch-up fraction × compression".into(),
        inputs: format!(
            "{peak:.1} × {fanout} × {} × {stored}; per machine {} disks × {} MB/s × {keep:.2}",
            w.catch_up_fraction,
            shape.disks,
            m.disk_read_mb_per_s.map_or("(missing)".into(), |d| format!("{d:.0}"))
        ),
        note: String::new(),
    };
    [write, read]
}

/// Disk capacity over retention, at the end of the horizon.
fn disk_capacity_line(w: &Workload, b: &Basis, missing: &mut Vec<String>) -> Line {
    let (avg, rf, stored) = (b.avg, b.rf, b.stored);
    let by_time = w.retention_hours.map(|h| avg * rf * stored * h * 3600.0 / 1000.0); // GB
    let by_size = w.retention_bytes_per_partition.map(|b| b as f64 * f64::from(w.partitions) * rf / 1e9);
    let (capacity_need, capacity_inputs) = match (by_time, by_size) {
        (Some(t), Some(s)) => (Some(t.min(s) * 1.02), format!("min(time {t:.0} GB, size {s:.0} GB) × 1.02 (indexes)")),
        (Some(t), None) => (
            Some(t * 1.02),
            format!(
                "{avg:.1} MB/s × RF {rf} × {stored} × {} h × 3600 s ÷ 1000 × 1.02 (indexes)",
                w.retention_hours.unwrap_or(0.0)
            ),
        ),
        (None, Some(s)) => (
            Some(s * 1.02),
            format!(
                "{} B × {} partitions × RF {rf} × 1.02",
                w.retention_bytes_per_partition.unwrap_or(0),
                w.partitions
            ),
        ),
        (None, None) => {
            missing.push("no retention in the workload: disk capacity cannot be sized".into());
            (None, "retention_hours or retention_bytes_per_partition".into())
        }
    };
    let capacity_per = f64::from(w.machine.disks) * w.machine.disk_capacity_gb * b.keep;
    Line {
        resource: Resource::DiskCapacity,
        need: capacity_need,
        unit: "GB",
        per_machine: Some(capacity_per),
        machines: capacity_need.map(|n| ceil_div(n, capacity_per)),
        formula: "average × RF × compression × retention (time, or size × partitions × RF), at the horizon".into(),
        inputs: capacity_inputs,
        note: String::new(),
    }
}

/// Network, full duplex: in = producers + replication in; out = consumers +
/// replication out.
fn network_lines(w: &Workload, b: &Basis) -> [Line; 2] {
    let (peak, rf, keep, fanout) = (b.peak, b.rf, b.keep, b.fanout);
    let gbps = |mb: f64| mb * 8.0 / 1000.0;
    let net_per = w.machine.network_gbps * keep;
    let net_in = gbps(peak * rf);
    let net_out = gbps(peak * (fanout + rf - 1.0));
    [
        Line {
            resource: Resource::NetworkIn,
            need: Some(net_in),
            unit: "Gb/s",
            per_machine: Some(net_per),
            machines: Some(ceil_div(net_in, net_per)),
            formula: "peak × RF × 8 ÷ 1000".into(),
            inputs: format!("{peak:.1} MB/s × {rf}; per machine {} Gb/s × {keep:.2}", w.machine.network_gbps),
            note: String::new(),
        },
        Line {
            resource: Resource::NetworkOut,
            need: Some(net_out),
            unit: "Gb/s",
            per_machine: Some(net_per),
            machines: Some(ceil_div(net_out, net_per)),
            formula: "peak × (consumer groups + RF − 1) × 8 ÷ 1000".into(),
            inputs: format!("{peak:.1} MB/s × ({fanout} + {rf} − 1)"),
            note: String::new(),
        },
    ]
}

/// Memory for the batch cache (tailing consumers read the last seconds)
/// and for each partition replica's state, which the broker's memory
/// budget accounts at `server::memory::PARTITION_STATE_BYTES` each.
fn memory_line(w: &Workload, b: &Basis) -> Line {
    let (peak, rf, keep) = (b.peak, b.rf, b.keep);
    let shape = &w.machine;
    let state_gb = crate::server::memory::PARTITION_STATE_BYTES as f64 / 1e9;
    let partitions_gb = f64::from(w.partitions) * rf * state_gb;
    let memory_need = peak * rf * w.cache_seconds / 1000.0 + partitions_gb; // GB
    let memory_per = shape.memory_gb * shape.cache_memory_fraction * keep;
    Line {
        resource: Resource::Memory,
        need: Some(memory_need),
        unit: "GB",
        per_machine: Some(memory_per),
        machines: Some(ceil_div(memory_need, memory_per)),
        formula: "peak × RF × cache seconds ÷ 1000 + partitions × RF × partition state".into(),
        inputs: format!(
            "{peak:.1} MB/s × {rf} × {} s + {} × {rf} × {} KiB; per machine {} GB × {} × {keep:.2}",
            w.cache_seconds,
            w.partitions,
            crate::server::memory::PARTITION_STATE_BYTES >> 10,
            shape.memory_gb,
            shape.cache_memory_fraction
        ),
        note: String::new(),
    }
}

#[cfg(test)]
#[path = "sizing_tests.rs"]
mod tests;
