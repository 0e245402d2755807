//! What one run measured, and its report: the table, the JSON result and
//! the plots.

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde_json::{json, Value};

use super::{
    measure::{ConsumeCounts, ProduceCounts},
    report::{self, percentiles_json},
    BenchArgs, Workload,
};

/// The outcome of one produce (and, for e2e, consume) run.
pub struct Outcome {
    pub produce: ProduceCounts,
    pub consume: Option<ConsumeCounts>,
    pub window: Duration,
    /// librdkafka cannot show when a request left; its "service time" is
    /// enqueue → delivery report.
    pub service_label: &'static str,
    /// Share of the load generator's cores its threads used over the run; near
    /// 1.0 the generator itself queues and the latency figures include it.
    pub generator_cpu: f64,
    pub warmup_s: f64,
}

/// CPU seconds (user + system) this process has used: `/proc/self/stat`
/// fields 14 and 15, in USER_HZ (100 on Linux).
pub fn process_cpu_seconds() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let fields: Vec<&str> = stat.rsplit_once(')').map_or("", |(_, r)| r).split_whitespace().collect();
    let ticks = |i: usize| fields.get(i).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
    (ticks(11) + ticks(12)) as f64 / 100.0
}

/// The generator's CPU use as a share of its cores since `(cpu, at)`.
pub fn generator_cpu_since(w: &Workload, cpu: f64, at: Instant) -> f64 {
    let cores =
        if w.cores.is_empty() { std::thread::available_parallelism().map_or(1, |n| n.get()) } else { w.cores.len() };
    (process_cpu_seconds() - cpu) / (at.elapsed().as_secs_f64().max(1e-3) * cores as f64)
}

impl Outcome {
    pub fn throughput(&self) -> f64 {
        self.produce.measured as f64 / self.elapsed()
    }

    pub(super) fn elapsed(&self) -> f64 {
        self.produce.last_measured_ack.max(self.window.as_secs_f64()).max(1e-9)
    }

    pub fn p99_ms(&self) -> f64 {
        let h = self.consume.as_ref().map_or(&self.produce.latency, |c| &c.latency);
        report::ms(h.value_at_percentile(99.0))
    }

    fn lost(&self) -> u64 {
        match &self.consume {
            None => self.produce.sent - self.produce.acked.min(self.produce.sent),
            Some(c) => {
                let seen: u64 = self
                    .produce
                    .acked_by_stream
                    .iter()
                    .map(|(k, n)| c.streams.get(k).map_or(0, |a| a.seen_below(*n)))
                    .sum();
                self.produce.sent - seen.min(self.produce.sent)
            }
        }
    }

    pub fn ok(&self) -> bool {
        self.produce.failures.is_empty()
            && self.produce.errors.is_empty()
            && self.produce.sent > 0
            && self.lost() == 0
            && self.consume.as_ref().is_none_or(|c| c.failures.is_empty() && c.duplicated == 0 && c.reordered == 0)
    }

    /// "N sent, N acknowledged, 0 lost, 0 duplicated", and what went wrong.
    pub fn verdict(&self) -> String {
        let p = &self.produce;
        let mut s = format!("{} sent, {} acknowledged", p.sent, p.acked);
        if let Some(c) = &self.consume {
            s += &format!(", {} received", c.received - c.foreign);
        }
        s += &format!(", {} lost", self.lost());
        if let Some(c) = &self.consume {
            s += &format!(", {} duplicated, {} out of order", c.duplicated, c.reordered);
        } else {
            s += ", 0 duplicated";
        }
        for (code, n) in &p.errors {
            s += &format!("; {n} records refused with error {code}");
        }
        for f in p.failures.iter().chain(self.consume.iter().flat_map(|c| c.failures.iter())) {
            s += &format!("; {f}");
        }
        s
    }

    pub fn print(&self) {
        eprintln!("{}", self.verdict());
        if !self.ok() {
            eprintln!("FAILED: the run's figures are not reported");
            return;
        }
        let mbps = self.produce.measured_bytes as f64 / self.elapsed() / 1e6;
        println!("{}", report::table_header());
        println!("{}", report::table_row("produce (corrected)", &self.produce.latency));
        println!("{}", report::table_row(self.service_label, &self.produce.service));
        if let Some(c) = &self.consume {
            println!("{}", report::table_row("end to end", &c.latency));
        }
        println!(
            "throughput: {:.0} msg/s, {:.2} MB/s ({} records measured)",
            self.throughput(),
            mbps,
            self.produce.measured
        );
        let lag = &self.produce.admit_lag;
        let run_s = (self.window.as_secs_f64() + self.warmup_s).max(1e-3);
        let blocked = self.produce.write_blocked_s / run_s;
        println!(
            "load generator: {:.0}% CPU of its core(s) (spinning included); admission lag p99 {:.3} ms, max {:.3} ms; blocked writing to the broker {:.0}% of the run",
            self.generator_cpu * 100.0,
            report::ms(lag.value_at_percentile(99.0)),
            report::ms(lag.max()),
            blocked * 100.0
        );
        if !lag.is_empty() && lag.value_at_percentile(99.0) > 1000 {
            if blocked > 0.1 {
                eprintln!(
                    "note: records were admitted late because the broker stopped reading (TCP backpressure {:.0}% of the run): that wait is the broker's, and is in the corrected latency",
                    blocked * 100.0
                );
            } else {
                eprintln!(
                    "warning: the load generator fell behind its own schedule (admission lag p99 over 1 ms) without the broker pushing back: its own queueing is in these latencies; give it more cores (--cores) or lower the rate"
                );
            }
        }
    }

    pub fn json(&self, w: &Workload, a: &BenchArgs, mode: &str, client: &str) -> Value {
        let mut v = json!({
            "tool": "shardlog bench",
            "status": if self.ok() { "ok" } else { "failed" },
            "validation": self.verdict(),
            "parameters": w.params(a, mode, client),
            "machine": report::machine(),
            "commit": report::commit(),
            "started_unix_s": SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0),
            "sent": self.produce.sent,
            "acknowledged": self.produce.acked,
            "lost": self.lost(),
            "errors": self.produce.errors.iter().map(|(k, v)| (k.to_string(), json!(v))).collect::<serde_json::Map<_, _>>(),
            "failures": self.produce.failures,
            "generator_cpu_utilisation": self.generator_cpu,
        });
        if self.ok() {
            v["throughput"] = json!({
                "msgs_per_s": self.throughput(),
                "mb_per_s": self.produce.measured_bytes as f64 / self.elapsed() / 1e6,
                "measured_records": self.produce.measured,
                "elapsed_s": self.elapsed(),
            });
            v["latency_ms"] = percentiles_json(&self.produce.latency);
            v["latency_by_minute_ms"] = self
                .produce
                .by_minute
                .iter()
                .enumerate()
                .map(|(i, h)| {
                    let mut m = percentiles_json(h);
                    m["minute"] = json!(i);
                    m
                })
                .collect();
            v["service_time_ms"] = percentiles_json(&self.produce.service);
            v["service_time_is"] = json!(self.service_label);
            v["generator_admission_lag_ms"] = percentiles_json(&self.produce.admit_lag);
            v["generator_write_blocked_s"] = json!(self.produce.write_blocked_s);
            v["histograms"] = json!({
                "unit": "microseconds",
                "encoding": "HdrHistogram V2 compressed, base64",
                "latency": report::encoded(&self.produce.latency),
                "service_time": report::encoded(&self.produce.service),
            });
            if let Some(c) = &self.consume {
                v["e2e_latency_ms"] = percentiles_json(&c.latency);
                v["histograms"]["e2e_latency"] = json!(report::encoded(&c.latency));
            }
        }
        if let Some(c) = &self.consume {
            v["received"] = json!(c.received - c.foreign);
            v["duplicated"] = json!(c.duplicated);
            v["out_of_order"] = json!(c.reordered);
            v["consume_failures"] = json!(c.failures);
        }
        v
    }

    pub(super) fn plot(&self, path: &std::path::Path, title: &str) -> Result<(), String> {
        let mut series = vec![("produce latency (corrected)", &self.produce.latency)];
        series.push((self.service_label, &self.produce.service));
        if let Some(c) = &self.consume {
            series.push(("end-to-end latency", &c.latency));
        }
        report::percentile_plot(path, title, &series)
    }
}
