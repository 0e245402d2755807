//! The report: one self-contained HTML page (inline CSS and SVG, no
//! network) and a Markdown version with the same tables and the plots as
//! SVG files beside it.

use plotters::prelude::*;

use super::{
    sizing::{Plan, Resource, Workload},
    SweepSource,
};
use crate::iotune::IoProperties;

pub struct Inputs {
    pub workload_file: String,
    pub results_dir: String,
    pub io_file: Option<String>,
    pub sweep: Option<SweepSource>,
    pub io: Option<IoProperties>,
    /// `--replication`: the file and a replica's measured CPU cost.
    pub replication: Option<(String, f64)>,
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

fn num(v: f64) -> String {
    if v >= 100.0 {
        format!("{v:.0}")
    } else if v >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

/// The report in both formats, and the plots the Markdown links to.
pub struct Rendered {
    pub html: String,
    pub markdown: String,
    pub latency_svg: String,
    pub capacity_svg: String,
}

impl Rendered {
    /// Writes `index.html`, `report.md`, `latency.svg` and `capacity.svg`.
    pub fn write(&self, dir: &std::path::Path) -> Result<(), String> {
        for (name, text) in [
            ("index.html", &self.html),
            ("report.md", &self.markdown),
            ("latency.svg", &self.latency_svg),
            ("capacity.svg", &self.capacity_svg),
        ] {
            let path = dir.join(name);
            std::fs::write(&path, text).map_err(|e| format!("{}: {e}", path.display()))?;
        }
        Ok(())
    }
}

pub fn render(w: &Workload, plan: &Plan, inputs: &Inputs) -> Result<Rendered, String> {
    let latency_svg = latency_plot(w, plan, inputs.sweep.as_ref())?;
    let capacity_svg = capacity_plot(w, plan)?;
    let tables = Tables {
        workload: workload_rows(w),
        measured: measured_rows(plan, inputs),
        sizing: sizing_rows(plan),
        utilisation: plan
            .utilisation
            .iter()
            .map(|(r, u)| vec![r.label().to_string(), format!("{:.0}%", u * 100.0)])
            .collect(),
        summary: summary(w, plan),
    };
    let html = html(w, plan, inputs, &tables, &latency_svg, &capacity_svg);
    let markdown = markdown(w, plan, inputs, &tables);
    Ok(Rendered { html, markdown, latency_svg, capacity_svg })
}

/// The report's tables as rows of cells, shared by both formats.
struct Tables {
    workload: Vec<Vec<String>>,
    measured: Vec<Vec<String>>,
    sizing: Vec<Vec<String>>,
    utilisation: Vec<Vec<String>>,
    summary: String,
}

const SIZING_HEAD: [&str; 7] = ["resource", "need at peak", "per machine", "machines", "formula", "inputs", "note"];

fn workload_rows(w: &Workload) -> Vec<Vec<String>> {
    let rows: Vec<[String; 2]> = vec![
        ["ingress (avg / peak)".into(), format!("{} / {} MB/s", w.ingress_avg_mb_per_s, w.ingress_peak_mb_per_s)],
        [
            "records (avg / peak)".into(),
            format!(
                "{} / {} per second",
                w.records_avg_per_s.map_or_else(|| num(w.ingress_avg_mb_per_s * 1e6 / w.record_bytes as f64), num),
                w.records_peak_per_s.map_or_else(|| num(w.ingress_peak_mb_per_s * 1e6 / w.record_bytes as f64), num)
            ),
        ],
        ["record size".into(), format!("{} B", w.record_bytes)],
        ["topics / partitions".into(), format!("{} / {}", w.topics, w.partitions)],
        ["consumer groups reading everything".into(), w.consumer_groups.to_string()],
        [
            "retention".into(),
            match (w.retention_hours, w.retention_bytes_per_partition) {
                (Some(h), Some(b)) => format!("{h} h or {b} B per partition"),
                (Some(h), None) => format!("{h} h"),
                (None, Some(b)) => format!("{b} B per partition"),
                (None, None) => "not given".into(),
            },
        ],
        ["compression (stored ÷ produced)".into(), w.compression_ratio.to_string()],
        ["replication factor / acks".into(), format!("{} / {}", w.replication_factor, w.acks)],
        ["latency objective".into(), format!("p99 produce ≤ {} ms at peak", w.latency_objective_p99_ms)],
        ["growth, horizon".into(), format!("{:.0}% a year, {} years", w.growth_per_year * 100.0, w.horizon_years)],
        ["headroom at peak".into(), format!("{:.0}%", w.headroom * 100.0)],
        [
            "machine shape".into(),
            format!(
                "{} cores ({} reserved), {} × {} GB disks, {} Gb/s, {} GB RAM",
                w.machine.cores,
                w.machine.reserved_cores,
                w.machine.disks,
                w.machine.disk_capacity_gb,
                w.machine.network_gbps,
                w.machine.memory_gb
            ),
        ],
    ];
    rows.into_iter().map(|r| r.to_vec()).collect()
}

fn measured_rows(plan: &Plan, inputs: &Inputs) -> Vec<Vec<String>> {
    let mut rows: Vec<[String; 2]> = Vec::new();
    match &inputs.sweep {
        Some(s) => {
            rows.push(["machine measured".into(), s.machine.clone()]);
            rows.push([
                "sweep".into(),
                format!("{} ({} B records, acks={}, commit {})", s.file, s.record_size, s.acks, s.commit),
            ]);
            rows.push([
                "one shard at the objective".into(),
                plan.shard_mb_per_s_at_objective
                    .map_or("objective not met at any measured load".into(), |v| format!("{} MB/s", num(v))),
            ]);
            rows.push([
                "one shard at saturation".into(),
                s.saturation_mb_per_s.map_or("did not saturate in the sweep".into(), |v| format!("{} MB/s", num(v))),
            ]);
        }
        None => rows.push(["sweep".into(), format!("missing in {}", inputs.results_dir)]),
    }
    match (&inputs.io, &inputs.io_file) {
        (Some(io), Some(f)) => rows.push([
            "disk (iotune)".into(),
            format!(
                "{f}: write {} MB/s, read {} MB/s, fdatasync p99 {} µs, random read {} IOPS (qd 32)",
                num(io.write_bandwidth_mb_per_s),
                num(io.read_bandwidth_mb_per_s),
                io.fdatasync_p99_us,
                num(io.random_read_iops_qd32)
            ),
        ]),
        _ => rows.push(["disk (iotune)".into(), "missing (pass --io io-properties.toml)".into()]),
    }
    rows.push(match &inputs.replication {
        Some((f, c)) => ["a replica's CPU against a produce's".into(), format!("{f}: {c:.2}")],
        None => [
            "a replica's CPU against a produce's".into(),
            "not measured (pass --replication replication-cost.json); 1 assumed".into(),
        ],
    });
    rows.into_iter().map(|r| r.to_vec()).collect()
}

fn sizing_rows(plan: &Plan) -> Vec<Vec<String>> {
    plan.lines
        .iter()
        .map(|l| {
            vec![
                l.resource.label().to_string(),
                l.need.map_or("missing".into(), |n| format!("{} {}", num(n), l.unit)),
                l.per_machine.map_or("missing".into(), |n| format!("{} {}", num(n), l.unit)),
                l.machines.map_or("—".into(), |n| n.to_string()),
                l.formula.clone(),
                l.inputs.clone(),
                l.note.clone(),
            ]
        })
        .collect()
}

fn summary(w: &Workload, plan: &Plan) -> String {
    let cpu_unsized = plan.lines.iter().any(|l| l.resource == Resource::Cpu && l.need.is_none());
    let mut summary = if plan.limit == Resource::Cpu && cpu_unsized && plan.shard_mb_per_s_at_objective.is_none() {
        format!(
            "The latency objective (p99 ≤ {} ms) was not met at any measured load on this hardware, so no number of machines of this shape is known to meet it; the other resources alone need {} machine{}.",
            w.latency_objective_p99_ms,
            plan.machines,
            if plan.machines == 1 { "" } else { "s" }
        )
    } else {
        format!(
            "{} machine{} of this shape carry {} MB/s peak ingress at the end of the horizon ({} MB/s today); the limiting resource is {}{}.",
            plan.machines,
            if plan.machines == 1 { "" } else { "s" },
            num(plan.peak_at_horizon),
            w.ingress_peak_mb_per_s,
            plan.limit.label(),
            if plan.limit == Resource::Cpu && plan.latency_bound { " — the latency objective, not throughput" } else { "" }
        )
    };
    if !plan.missing.is_empty() {
        summary += &format!(
            " Incomplete: {} item(s) missing, so resources that need them are not sized (see below).",
            plan.missing.len()
        );
    }

    summary
}

fn html_table(head: &[&str], rows: &[Vec<String>], id: &str) -> String {
    let mut t = format!("<table id=\"{id}\"><thead><tr>");
    for h in head {
        t += &format!("<th>{}</th>", esc(h));
    }
    t += "</tr></thead><tbody>";
    for r in rows {
        t += "<tr>";
        for c in r {
            t += &format!("<td>{}</td>", esc(c));
        }
        t += "</tr>";
    }
    t + "</tbody></table>"
}

fn html_list(items: &[String]) -> String {
    if items.is_empty() {
        return "<p>None.</p>".into();
    }
    format!("<ul>{}</ul>", items.iter().map(|i| format!("<li>{}</li>", esc(i))).collect::<String>())
}

fn md_table(head: &[&str], rows: &[Vec<String>]) -> String {
    let cell = |s: &str| s.replace('|', "\\|");
    let mut t = format!("| {} |\n|{}\n", head.join(" | "), "---|".repeat(head.len()));
    for r in rows {
        t += &format!("| {} |\n", r.iter().map(|c| cell(c)).collect::<Vec<_>>().join(" | "));
    }
    t
}

fn md_list(items: &[String]) -> String {
    if items.is_empty() {
        "None.\n".into()
    } else {
        items.iter().map(|i| format!("- {i}\n")).collect()
    }
}

fn html(w: &Workload, plan: &Plan, inputs: &Inputs, t: &Tables, latency_svg: &str, capacity_svg: &str) -> String {
    format!(
        r#"<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>Capacity plan: {name}</title>
<style>
body {{ font-family: sans-serif; margin: 2em auto; max-width: 1100px; color: #222; }}
table {{ border-collapse: collapse; margin: 1em 0; width: 100%; }}
th, td {{ border: 1px solid #bbb; padding: 4px 8px; text-align: left; vertical-align: top; font-size: 14px; }}
th {{ background: #eee; }}
.limit {{ font-weight: bold; }}
figure {{ margin: 1em 0; }}
</style></head>
<body>
<h1>Capacity plan: {name}</h1>
<p class="limit" id="summary">{summary}</p>
<h2>Workload</h2>{workload}
<h2>Measured</h2>{measured}
<h2>Sizing</h2>{sizing}
<h2>Utilisation at peak with {machines} machine(s)</h2>{util}
<h2>Plots</h2>
<figure id="latency-plot">{latency_svg}<figcaption>One shard's produce latency against throughput (bench sweep), with the objective and the planned operating point.</figcaption></figure>
<figure id="capacity-plot">{capacity_svg}<figcaption>Disk capacity needed over the horizon against what the planned machines hold.</figcaption></figure>
<h2>Missing measurements</h2>{missing}
<h2>Assumptions</h2>{assumptions}
<p>Inputs: workload {wf}; results {rd}; disk profile {io}. Generated by shardlog {commit}.</p>
<script>
// A self-check a headless browser can read back from the DOM.
window.addEventListener('load', function () {{
  var drawn = Array.prototype.filter.call(document.querySelectorAll('svg'), function (s) {{
    var b = s.getBoundingClientRect(); return b.width > 100 && b.height > 100;
  }}).length;
  var rows = document.querySelectorAll('#sizing tbody tr').length;
  document.body.setAttribute('data-check', 'rendered svgs=' + drawn + ' sizing-rows=' + rows);
}});
</script>
</body></html>
"#,
        name = esc(&w.name),
        summary = esc(&t.summary),
        workload = html_table(&["", "workload"], &t.workload, "workload"),
        measured = html_table(&["", "measured"], &t.measured, "measured"),
        sizing = html_table(&SIZING_HEAD, &t.sizing, "sizing"),
        machines = plan.machines,
        util = html_table(&["resource", "utilisation"], &t.utilisation, "utilisation"),
        latency_svg = latency_svg,
        capacity_svg = capacity_svg,
        missing = html_list(&plan.missing),
        assumptions = html_list(&plan.assumptions),
        wf = esc(&inputs.workload_file),
        rd = esc(&inputs.results_dir),
        io = esc(inputs.io_file.as_deref().unwrap_or("none")),
        commit = esc(crate::bench::report::commit()),
    )
}

fn markdown(w: &Workload, plan: &Plan, inputs: &Inputs, t: &Tables) -> String {
    format!(
        "# Capacity plan: {name}\n\n**{summary}**\n\n## Workload\n\n{workload}\n## Measured\n\n{measured}\n## Sizing\n\n{sizing}\n## Utilisation at peak with {machines} machine(s)\n\n{util}\n## Plots\n\n![latency against throughput](latency.svg)\n\n![disk capacity over the horizon](capacity.svg)\n\n## Missing measurements\n\n{missing}\n## Assumptions\n\n{assumptions}\nInputs: workload {wf}; results {rd}; disk profile {io}. Generated by shardlog {commit}.\n",
        name = w.name,
        summary = t.summary,
        workload = md_table(&["", "workload"], &t.workload),
        measured = md_table(&["", "measured"], &t.measured),
        sizing = md_table(&SIZING_HEAD, &t.sizing),
        machines = plan.machines,
        util = md_table(&["resource", "utilisation"], &t.utilisation),
        missing = md_list(&plan.missing),
        assumptions = md_list(&plan.assumptions),
        wf = inputs.workload_file,
        rd = inputs.results_dir,
        io = inputs.io_file.as_deref().unwrap_or("none"),
        commit = crate::bench::report::commit(),
    )
}

fn latency_plot(w: &Workload, plan: &Plan, sweep: Option<&SweepSource>) -> Result<String, String> {
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (900, 460)).into_drawing_area();
        let fail = |e: &dyn std::fmt::Display| format!("latency plot: {e}");
        root.fill(&WHITE).map_err(|e| fail(&e))?;
        let steps = sweep.map(|s| s.steps.clone()).unwrap_or_default();
        if steps.is_empty() {
            root.draw(&Text::new("no bench sweep result: run `shardlog bench sweep`", (40, 200), ("sans-serif", 20)))
                .map_err(|e| fail(&e))?;
        } else {
            let xmax = steps.iter().map(|s| s.0).fold(plan.operating_point_mb_per_s.unwrap_or(0.0), f64::max) * 1.1;
            let ys = steps.iter().flat_map(|s| [s.1, s.2, s.3]).chain([w.latency_objective_p99_ms]);
            let (lo, hi) = ys.fold((f64::MAX, f64::MIN), |(lo, hi), y| (lo.min(y.max(0.001)), hi.max(y)));
            let mut chart = crate::bench::plot::frame(&root, "one shard: produce latency against throughput")
                .build_cartesian_2d(0f64..xmax.max(1.0), (lo / 1.5..hi * 1.5).log_scale())
                .map_err(|e| fail(&e))?;
            chart
                .configure_mesh()
                .x_desc("throughput per shard (MB/s)")
                .y_desc("latency (ms)")
                .y_label_formatter(&|y| format!("{y}"))
                .draw()
                .map_err(|e| fail(&e))?;
            let series: [crate::bench::plot::Series<(f64, f64, f64, f64)>; 3] =
                [("p50", BLUE, |s| s.1), ("p99", RED, |s| s.2), ("p99.9", MAGENTA, |s| s.3)];
            for (name, color, get) in series {
                let pts: Vec<(f64, f64)> = steps.iter().map(|s| (s.0, get(s).max(0.001))).collect();
                chart
                    .draw_series(LineSeries::new(pts.clone(), color.stroke_width(2)))
                    .map_err(|e| fail(&e))?
                    .label(name)
                    .legend(crate::bench::plot::swatch(color.stroke_width(2)));
                chart.draw_series(pts.into_iter().map(|p| Circle::new(p, 3, color.filled()))).map_err(|e| fail(&e))?;
            }
            let objective = w.latency_objective_p99_ms;
            chart
                .draw_series(std::iter::once(PathElement::new(
                    vec![(0.0, objective), (xmax, objective)],
                    BLACK.stroke_width(1),
                )))
                .map_err(|e| fail(&e))?
                .label(format!("objective p99 ≤ {objective} ms"))
                .legend(crate::bench::plot::swatch(BLACK.into()));
            if let Some(op) = plan.operating_point_mb_per_s {
                chart
                    .draw_series(std::iter::once(PathElement::new(
                        vec![(op, lo / 1.5), (op, hi * 1.5)],
                        GREEN.stroke_width(2),
                    )))
                    .map_err(|e| fail(&e))?
                    .label(format!("planned operating point {} MB/s", num(op)))
                    .legend(crate::bench::plot::swatch(GREEN.stroke_width(2)));
            }
            crate::bench::plot::legend(&mut chart)?;
        }
        root.present().map_err(|e| fail(&e))?;
    }
    Ok(svg)
}

fn capacity_plot(w: &Workload, plan: &Plan) -> Result<String, String> {
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (900, 420)).into_drawing_area();
        let fail = |e: &dyn std::fmt::Display| format!("capacity plot: {e}");
        root.fill(&WHITE).map_err(|e| fail(&e))?;
        let need_at_end = plan.lines.iter().find(|l| l.resource == Resource::DiskCapacity).and_then(|l| l.need);
        match need_at_end {
            None => {
                root.draw(&Text::new("no retention given: capacity not sized", (40, 200), ("sans-serif", 20)))
                    .map_err(|e| fail(&e))?;
            }
            Some(end) => {
                let growth = (1.0 + w.growth_per_year).powf(w.horizon_years);
                let months = (w.horizon_years * 12.0).max(1.0);
                let need = |m: f64| end / growth * (1.0 + w.growth_per_year).powf(m / 12.0) / 1000.0; // TB
                let installed = plan.machines as f64 * f64::from(w.machine.disks) * w.machine.disk_capacity_gb / 1000.0;
                let usable = installed * (1.0 - w.headroom);
                let ymax = need(months).max(installed) * 1.15;
                let mut chart = crate::bench::plot::frame(&root, "disk capacity over the horizon")
                    .build_cartesian_2d(0f64..months, 0f64..ymax)
                    .map_err(|e| fail(&e))?;
                chart.configure_mesh().x_desc("months from now").y_desc("TB").draw().map_err(|e| fail(&e))?;
                let pts: Vec<(f64, f64)> = (0..=100).map(|i| months * i as f64 / 100.0).map(|m| (m, need(m))).collect();
                chart
                    .draw_series(LineSeries::new(pts, RED.stroke_width(2)))
                    .map_err(|e| fail(&e))?
                    .label("needed (retention × ingress, growing)")
                    .legend(crate::bench::plot::swatch(RED.stroke_width(2)));
                chart
                    .draw_series(std::iter::once(PathElement::new(
                        vec![(0.0, installed), (months, installed)],
                        BLUE.stroke_width(2),
                    )))
                    .map_err(|e| fail(&e))?
                    .label(format!("installed: {} machines", plan.machines))
                    .legend(crate::bench::plot::swatch(BLUE.stroke_width(2)));
                chart
                    .draw_series(std::iter::once(PathElement::new(
                        vec![(0.0, usable), (months, usable)],
                        BLUE.mix(0.5),
                    )))
                    .map_err(|e| fail(&e))?
                    .label("installed within headroom")
                    .legend(crate::bench::plot::swatch(BLUE.mix(0.5).into()));
                crate::bench::plot::legend(&mut chart)?;
            }
        }
        root.present().map_err(|e| fail(&e))?;
    }
    Ok(svg)
}
