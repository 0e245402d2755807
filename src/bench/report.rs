//! How a run is shown: the live progress line, the final table, the JSON
//! result (with full histograms in HdrHistogram's encoded form) and SVG
//! plots.

use std::{io::Write, path::Path};

use hdrhistogram::{
    serialization::{Serializer, V2DeflateSerializer},
    Histogram,
};
use plotters::prelude::*;
use serde_json::{json, Value};

/// The percentiles of the final table.
pub const PERCENTILES: [(f64, &str); 5] =
    [(50.0, "p50"), (90.0, "p90"), (99.0, "p99"), (99.9, "p99.9"), (99.99, "p99.99")];

pub fn ms(micros: u64) -> f64 {
    micros as f64 / 1000.0
}

/// p50 … p99.99 and max, in milliseconds.
pub fn percentiles_json(h: &Histogram<u64>) -> Value {
    let mut out = serde_json::Map::new();
    for (q, name) in PERCENTILES {
        out.insert(format!("{name}_ms"), json!(ms(h.value_at_percentile(q))));
    }
    out.insert("max_ms".into(), json!(ms(h.max())));
    out.insert("mean_ms".into(), json!(h.mean() / 1000.0));
    out.insert("count".into(), json!(h.len()));
    Value::Object(out)
}

/// HdrHistogram's compressed V2 encoding, base64 — what `HistogramLogReader`
/// and the HdrHistogram plotter read.
pub fn encoded(h: &Histogram<u64>) -> String {
    use base64::Engine;
    let mut buf = Vec::new();
    V2DeflateSerializer::new().serialize(h, &mut buf).expect("serialising to memory");
    base64::engine::general_purpose::STANDARD.encode(buf)
}

pub fn decode(encoded: &str) -> Result<Histogram<u64>, String> {
    use base64::Engine;
    let bytes = base64::engine::general_purpose::STANDARD.decode(encoded).map_err(|e| e.to_string())?;
    hdrhistogram::serialization::Deserializer::new()
        .deserialize(&mut &bytes[..])
        .map_err(|e| format!("histogram: {e:?}"))
}

/// One row of the final table.
pub fn table_row(name: &str, h: &Histogram<u64>) -> String {
    let mut row = format!("{name:<24}");
    for (q, _) in PERCENTILES {
        row += &format!(" {:>9.3}", ms(h.value_at_percentile(q)));
    }
    row + &format!(" {:>9.3}", ms(h.max()))
}

pub fn table_header() -> String {
    let mut row = format!("{:<24}", "latency (ms)");
    for (_, name) in PERCENTILES {
        row += &format!(" {name:>9}");
    }
    row + &format!(" {:>9}", "max")
}

/// CPU model, online cores, kernel.
pub fn machine() -> Value {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let cpu = cpuinfo
        .lines()
        .find(|l| l.starts_with("model name"))
        .and_then(|l| l.split(':').nth(1))
        .unwrap_or("unknown")
        .trim()
        .to_string();
    let cores = cpuinfo.lines().filter(|l| l.starts_with("processor")).count();
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default().trim().to_string();
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default().trim().to_string();
    json!({ "cpu": cpu, "cores": cores, "kernel": kernel, "hostname": host })
}

/// The commit this binary was built from (`build.rs`).
pub fn commit() -> &'static str {
    env!("SHARDLOG_COMMIT")
}

/// The live line printed once a second.
pub struct Progress {
    tty: bool,
    last: std::time::Instant,
    last_count: u64,
    last_bytes: u64,
}

/// One progress line: `done_s` of `total_s` seconds; `count`/`bytes` are
/// running totals.
pub struct Tick<'a> {
    pub what: &'a str,
    pub done_s: f64,
    pub total_s: f64,
    pub count: u64,
    pub bytes: u64,
    pub p99_us: Option<u64>,
    pub note: &'a str,
}

impl Default for Progress {
    fn default() -> Self {
        Self::new()
    }
}

impl Progress {
    pub fn new() -> Self {
        use std::io::IsTerminal;
        Self { tty: std::io::stderr().is_terminal(), last: std::time::Instant::now(), last_count: 0, last_bytes: 0 }
    }

    pub fn tick(&mut self, t: Tick<'_>) {
        let Tick { what, done_s: done, total_s: total, count, bytes, p99_us, note } = t;
        let now = std::time::Instant::now();
        let dt = (now - self.last).as_secs_f64().max(1e-6);
        let rate = (count - self.last_count.min(count)) as f64 / dt;
        let mbps = (bytes - self.last_bytes.min(bytes)) as f64 / dt / 1e6;
        (self.last, self.last_count, self.last_bytes) = (now, count, bytes);
        let frac = (done / total).clamp(0.0, 1.0);
        let width = 20;
        let filled = (frac * width as f64).round() as usize;
        let bar: String = "#".repeat(filled) + &".".repeat(width - filled);
        let p99 = p99_us.map_or("-".to_string(), |v| format!("{:.3} ms", ms(v)));
        let line = format!(
            "{what} [{bar}] {:>5.1}s/{total:.0}s {rate:>10.0} msg/s {mbps:>9.2} MB/s  p99 so far {p99} {note}",
            done.min(total)
        );
        let mut err = std::io::stderr().lock();
        if self.tty {
            let _ = write!(err, "\r{line:<110}");
        } else {
            let _ = writeln!(err, "{line}");
        }
        let _ = err.flush();
    }

    pub fn finish(&self) {
        if self.tty {
            eprintln!();
        }
    }
}

/// Percentile distribution on the "nines" axis: x = -log10(1 - q), so 90%,
/// 99%, 99.9% … sit evenly apart; y is latency on a log scale.
pub fn percentile_plot(path: &Path, title: &str, series: &[(&str, &Histogram<u64>)]) -> Result<(), String> {
    let max_nines = series.iter().map(|(_, h)| (h.len().max(10) as f64).log10()).fold(1.0, f64::max).min(6.0);
    let points: Vec<(&str, Vec<(f64, f64)>)> = series
        .iter()
        .filter(|(_, h)| !h.is_empty())
        .map(|(name, h)| {
            let steps = 300;
            let pts = (0..=steps)
                .map(|i| {
                    let x = max_nines * i as f64 / steps as f64;
                    let q = 1.0 - 10f64.powf(-x);
                    (x, ms(h.value_at_quantile(q)).max(0.001))
                })
                .collect();
            (*name, pts)
        })
        .collect();
    let (lo, hi) = points
        .iter()
        .flat_map(|(_, p)| p.iter().map(|(_, y)| *y))
        .fold((f64::MAX, f64::MIN), |(lo, hi), y| (lo.min(y), hi.max(y)));
    let (lo, hi) = if lo > hi { (0.01, 1.0) } else { (lo / 1.5, hi * 1.5) };
    let root = SVGBackend::new(path, (900, 540)).into_drawing_area();
    let fail = |e: &dyn std::fmt::Display| format!("{}: {e}", path.display());
    root.fill(&WHITE).map_err(|e| fail(&e))?;
    let mut chart = crate::bench::plot::frame(&root, title)
        .build_cartesian_2d(0f64..max_nines, (lo..hi).log_scale())
        .map_err(|e| fail(&e))?;
    chart
        .configure_mesh()
        .x_labels((max_nines.floor() as usize + 1).max(2))
        .x_label_formatter(&|x| nines_label(*x))
        .y_label_formatter(&|y| format!("{y}"))
        .x_desc("percentile")
        .y_desc("latency (ms)")
        .draw()
        .map_err(|e| fail(&e))?;
    let colors = [RED, BLUE, GREEN, MAGENTA, CYAN, BLACK];
    for (i, (name, pts)) in points.into_iter().enumerate() {
        let color = colors[i % colors.len()];
        chart
            .draw_series(LineSeries::new(pts, color.stroke_width(2)))
            .map_err(|e| fail(&e))?
            .label(name)
            .legend(crate::bench::plot::swatch(color.stroke_width(2)));
    }
    crate::bench::plot::legend(&mut chart)?;
    root.present().map_err(|e| fail(&e))
}

fn nines_label(x: f64) -> String {
    let p = 100.0 * (1.0 - 10f64.powf(-x));
    if x < 0.5 {
        "0%".into()
    } else {
        let decimals = (x - 2.0).ceil().max(0.0) as usize;
        format!("{p:.decimals$}%")
    }
}

/// One step of a sweep, for the latency-vs-throughput plot.
pub struct SweepPoint {
    pub achieved: f64,
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub p999_ms: f64,
}

/// Latency percentiles against achieved throughput, with the saturation
/// point marked.
pub fn sweep_plot(path: &Path, title: &str, points: &[SweepPoint], saturation: Option<f64>) -> Result<(), String> {
    let fail = |e: &dyn std::fmt::Display| format!("{}: {e}", path.display());
    let xmax = points.iter().map(|p| p.achieved).fold(1.0, f64::max) * 1.1;
    let (lo, hi) = points
        .iter()
        .flat_map(|p| [p.p50_ms, p.p99_ms, p.p999_ms])
        .fold((f64::MAX, f64::MIN), |(lo, hi), y| (lo.min(y.max(0.001)), hi.max(y)));
    let (lo, hi) = if lo > hi { (0.01, 1.0) } else { (lo / 1.5, hi * 1.5) };
    let root = SVGBackend::new(path, (900, 540)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| fail(&e))?;
    let mut chart = crate::bench::plot::frame(&root, title)
        .build_cartesian_2d(0f64..xmax, (lo..hi).log_scale())
        .map_err(|e| fail(&e))?;
    chart
        .configure_mesh()
        .x_desc("achieved throughput (msg/s)")
        .y_desc("latency (ms)")
        .x_label_formatter(&|x| format!("{x:.0}"))
        .y_label_formatter(&|y| format!("{y}"))
        .draw()
        .map_err(|e| fail(&e))?;
    let lines: [crate::bench::plot::Series<SweepPoint>; 3] =
        [("p50", BLUE, |p| p.p50_ms), ("p99", RED, |p| p.p99_ms), ("p99.9", MAGENTA, |p| p.p999_ms)];
    for (name, color, get) in lines {
        let pts: Vec<(f64, f64)> = points.iter().map(|p| (p.achieved, get(p).max(0.001))).collect();
        chart
            .draw_series(LineSeries::new(pts.clone(), color.stroke_width(2)))
            .map_err(|e| fail(&e))?
            .label(name)
            .legend(crate::bench::plot::swatch(color.stroke_width(2)));
        chart.draw_series(pts.into_iter().map(|p| Circle::new(p, 3, color.filled()))).map_err(|e| fail(&e))?;
    }
    if let Some(x) = saturation {
        chart
            .draw_series(std::iter::once(PathElement::new(vec![(x, lo), (x, hi)], BLACK.stroke_width(2))))
            .map_err(|e| fail(&e))?
            .label(format!("saturation ≈ {x:.0} msg/s"))
            .legend(crate::bench::plot::swatch(BLACK.stroke_width(2)));
    }
    crate::bench::plot::legend(&mut chart)?;
    root.present().map_err(|e| fail(&e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nines_labels_read_as_percentiles() {
        assert_eq!(nines_label(0.0), "0%");
        assert_eq!(nines_label(1.0), "90%");
        assert_eq!(nines_label(2.0), "99%");
        assert_eq!(nines_label(3.0), "99.9%");
        assert_eq!(nines_label(5.0), "99.999%");
    }

    #[test]
    fn encoded_histograms_decode_to_the_same_counts() {
        let mut h = crate::bench::measure::histogram();
        for v in [5u64, 50, 500, 5000, 5000] {
            h.record(v).unwrap();
        }
        let back = decode(&encoded(&h)).unwrap();
        assert_eq!(back.len(), 5);
        assert_eq!(back.max(), h.max());
        assert_eq!(back.value_at_quantile(0.5), h.value_at_quantile(0.5));
    }
}
