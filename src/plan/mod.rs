//! `shardlog plan`: a capacity-planning report from measured runs.
//!
//! Inputs: a workload (`workload.toml`: what must be carried, on what
//! machine shape), the `shardlog bench` results directory (the sweep gives
//! one shard's throughput at the latency objective) and optionally the
//! `shardlog iotune` disk profile. `sizing` does the arithmetic; `report`
//! writes HTML and Markdown with embedded SVG plots.

pub mod report;
pub mod sizing;

use std::path::{Path, PathBuf};

use clap::Args;
use serde_json::Value;

use sizing::{Measured, Workload};

#[derive(Args, Debug, Clone)]
pub struct PlanArgs {
    /// What must be carried, and the machine shape (see perf/workloads/).
    #[arg(long)]
    pub workload: PathBuf,
    /// A `shardlog bench` results directory (perf/results/…).
    #[arg(long)]
    pub results: PathBuf,
    /// Disk profile from `shardlog iotune`.
    #[arg(long)]
    pub io: Option<PathBuf>,
    /// A replica's CPU cost against a produce's, from
    /// `perf/cluster-bench.sh` (its replication-cost.json).
    #[arg(long)]
    pub replication: Option<PathBuf>,
    #[arg(long, default_value = "report")]
    pub output: PathBuf,
}

/// The sweep that best matches the workload, as read from a results dir.
#[derive(Debug, Clone, Default)]
pub struct SweepSource {
    pub file: String,
    pub record_size: u64,
    pub acks: String,
    /// (achieved MB/s, p50, p99, p99.9 ms) per step that produced figures.
    pub steps: Vec<(f64, f64, f64, f64)>,
    pub saturation_mb_per_s: Option<f64>,
    pub machine: String,
    pub commit: String,
}

pub fn load_workload(path: &Path) -> Result<Workload, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let w: Workload = toml::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))?;
    if w.ingress_peak_mb_per_s < w.ingress_avg_mb_per_s {
        return Err(format!("{}: peak ingress is below the average", path.display()));
    }
    if !(0.0..1.0).contains(&w.headroom) {
        return Err(format!("{}: headroom must be in [0, 1)", path.display()));
    }
    Ok(w)
}

/// Reads every sweep result in `dir` and keeps the one with the workload's
/// acks and the nearest record size.
pub fn find_sweep(dir: &Path, w: &Workload) -> Result<Option<SweepSource>, String> {
    let entries = std::fs::read_dir(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let mut best: Option<(u64, SweepSource)> = None;
    for e in entries.flatten() {
        let path = e.path();
        if path.extension().is_none_or(|x| x != "json") {
            continue;
        }
        let Ok(text) = std::fs::read_to_string(&path) else { continue };
        let Ok(v) = serde_json::from_str::<Value>(&text) else { continue };
        if v["parameters"]["mode"] != "sweep" {
            continue;
        }
        let acks = v["parameters"]["acks"].as_str().unwrap_or("").to_string();
        if acks != w.acks {
            continue;
        }
        let size = v["parameters"]["record_size"].as_u64().unwrap_or(0);
        let steps: Vec<(f64, f64, f64, f64)> = v["steps"]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter(|s| s["status"] == "ok")
                    .filter_map(|s| {
                        Some((
                            s["achieved_mb_per_s"].as_f64()?,
                            s["latency_ms"]["p50_ms"].as_f64()?,
                            s["latency_ms"]["p99_ms"].as_f64()?,
                            s["latency_ms"]["p99.9_ms"].as_f64()?,
                        ))
                    })
                    .collect()
            })
            .unwrap_or_default();
        let distance = size.abs_diff(w.record_bytes);
        let m = &v["machine"];
        let source = SweepSource {
            file: path.display().to_string(),
            record_size: size,
            acks,
            steps,
            saturation_mb_per_s: v["first_saturated_step"].as_u64().and_then(|_| v["max_sustained_mb_per_s"].as_f64()),
            machine: format!(
                "{}, {} cores, kernel {}",
                m["cpu"].as_str().unwrap_or("?"),
                m["cores"],
                m["kernel"].as_str().unwrap_or("?")
            ),
            commit: v["commit"].as_str().unwrap_or("?").to_string(),
        };
        if best.as_ref().is_none_or(|(d, _)| distance < *d) {
            best = Some((distance, source));
        }
    }
    Ok(best.map(|(_, s)| s))
}

/// A replica's CPU against a produce's, from a replication-cost.json.
pub fn load_replication_cost(path: &Path) -> Result<f64, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let v: Value = serde_json::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))?;
    match v["replica_cpu_per_produce_cpu"].as_f64() {
        Some(c) if c.is_finite() && c >= 0.0 => Ok(c),
        _ => Err(format!("{}: no replica_cpu_per_produce_cpu (a number ≥ 0)", path.display())),
    }
}

pub fn run(a: &PlanArgs) -> Result<(), String> {
    let w = load_workload(&a.workload)?;
    let sweep = find_sweep(&a.results, &w)?;
    let io = a.io.as_deref().map(crate::iotune::IoProperties::load).transpose()?;
    let replication = a.replication.as_deref().map(load_replication_cost).transpose()?;
    let measured = Measured {
        replication_cost: replication,
        sweep: sweep.as_ref().map(|s| s.steps.iter().map(|x| (x.0, x.2)).collect()).unwrap_or_default(),
        saturation_mb_per_s: sweep.as_ref().and_then(|s| s.saturation_mb_per_s),
        disk_write_mb_per_s: io.as_ref().map(|i| i.write_bandwidth_mb_per_s),
        disk_read_mb_per_s: io.as_ref().map(|i| i.read_bandwidth_mb_per_s),
    };
    let plan = sizing::plan(&w, &measured);
    let inputs = report::Inputs {
        workload_file: a.workload.display().to_string(),
        results_dir: a.results.display().to_string(),
        io_file: a.io.as_ref().map(|p| p.display().to_string()),
        sweep,
        io,
        replication: a.replication.as_ref().zip(replication).map(|(p, c)| (p.display().to_string(), c)),
    };
    std::fs::create_dir_all(&a.output).map_err(|e| format!("{}: {e}", a.output.display()))?;
    report::render(&w, &plan, &inputs)?.write(&a.output)?;
    let (html_path, md_path) = (a.output.join("index.html"), a.output.join("report.md"));
    println!("{}: {} machine(s) of {} cores; limit: {}", w.name, plan.machines, w.machine.cores, plan.limit.label());
    for m in &plan.missing {
        println!("missing: {m}");
    }
    println!("report: {} and {}", html_path.display(), md_path.display());
    Ok(())
}
