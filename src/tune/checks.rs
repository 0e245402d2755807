//! Every check `shardlog tune` makes: read the current value under a root
//! (`/` on a real host, a fake tree in tests), compare it with the
//! profile, and say what `apply` would write.

use std::path::{Path, PathBuf};

use super::profile::{format_cpu_list, parse_cpu_list, IrqPolicy, Profile};

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    /// As recommended.
    Ok,
    /// Not present on this machine (no cpufreq in a VM, no NVMe device…).
    Absent,
    /// Differs; `apply` can set it.
    Tune,
    /// Differs; needs a human (a reboot parameter, a service to stop…).
    Manual,
    /// The broker cannot run well, or at all, as things are.
    Blocks,
}

impl Status {
    pub fn label(self) -> &'static str {
        match self {
            Status::Ok => "ok",
            Status::Absent => "n/a",
            Status::Tune => "tune",
            Status::Manual => "manual",
            Status::Blocks => "BLOCKS",
        }
    }
}

/// One change `apply` makes, and how to take it back.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Change {
    /// Write `value` to a sysfs/procfs file that now holds `old`.
    Write { path: PathBuf, value: String, old: String },
    /// Create a file that does not exist yet (undo: remove it).
    Create { path: PathBuf, content: String },
}

impl Change {
    /// The shell command that makes the change.
    pub fn command(&self) -> String {
        match self {
            Change::Write { path, value, .. } => format!("echo '{value}' > {}", path.display()),
            Change::Create { path, content } => {
                format!("printf '%s' '{}' > {}", content.replace('\'', "'\\''"), path.display())
            }
        }
    }

    /// The shell command that undoes it.
    pub fn undo(&self) -> String {
        match self {
            Change::Write { path, old, .. } => format!("echo '{old}' > {}", path.display()),
            Change::Create { path, .. } => format!("rm {}", path.display()),
        }
    }

    pub fn apply(&self) -> Result<(), String> {
        match self {
            Change::Write { path, value, .. } => {
                std::fs::write(path, format!("{value}\n")).map_err(|e| format!("{}: {e}", path.display()))
            }
            Change::Create { path, content } => {
                if let Some(dir) = path.parent() {
                    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
                }
                std::fs::write(path, content).map_err(|e| format!("{}: {e}", path.display()))
            }
        }
    }
}

#[derive(Debug, Clone, serde::Serialize)]
pub struct Finding {
    pub setting: String,
    pub current: String,
    pub recommended: String,
    pub status: Status,
    pub why: String,
    pub changes: Vec<Change>,
}

impl Finding {
    pub(super) fn new(
        setting: impl Into<String>,
        current: impl Into<String>,
        recommended: impl Into<String>,
        why: &str,
    ) -> Self {
        Self {
            setting: setting.into(),
            current: current.into(),
            recommended: recommended.into(),
            status: Status::Ok,
            why: why.into(),
            changes: Vec::new(),
        }
    }

    pub(super) fn status(mut self, s: Status) -> Self {
        self.status = s;
        self
    }

    pub(super) fn with_changes(mut self, changes: Vec<Change>) -> Self {
        self.status = if changes.is_empty() { Status::Ok } else { Status::Tune };
        self.changes = changes;
        self
    }
}

/// The host as seen under `root`.
pub struct Host {
    root: PathBuf,
}

impl Host {
    pub fn new(root: &Path) -> Self {
        Self { root: root.to_path_buf() }
    }

    pub fn path(&self, rel: &str) -> PathBuf {
        self.root.join(rel.trim_start_matches('/'))
    }

    pub(super) fn read(&self, rel: &str) -> Option<String> {
        std::fs::read_to_string(self.path(rel)).ok().map(|s| s.trim().to_string())
    }

    pub(super) fn list(&self, rel: &str) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(self.path(rel))
            .map(|d| d.filter_map(|e| e.ok()).map(|e| e.file_name().to_string_lossy().into_owned()).collect())
            .unwrap_or_default();
        names.sort_by_key(|n| natural_key(n));
        names
    }

    pub(super) fn write_change(&self, rel: &str, current: &str, value: &str) -> Change {
        Change::Write { path: self.path(rel), value: value.into(), old: current.into() }
    }

    pub fn online_cpus(&self) -> Vec<usize> {
        self.read("sys/devices/system/cpu/online").and_then(|s| parse_cpu_list(&s).ok()).unwrap_or_default()
    }
}

/// "cpu10" sorts after "cpu9".
fn natural_key(s: &str) -> (String, u64) {
    let digits: String =
        s.chars().rev().take_while(char::is_ascii_digit).collect::<Vec<_>>().into_iter().rev().collect();
    (s[..s.len() - digits.len()].to_string(), digits.parse().unwrap_or(0))
}

/// The value in brackets of a sysfs choice list ("always [madvise] never").
fn selected(choices: &str) -> String {
    match (choices.find('['), choices.find(']')) {
        (Some(a), Some(b)) if a < b => choices[a + 1..b].to_string(),
        _ => choices.trim().to_string(),
    }
}

pub fn broker_cores(host: &Host, p: &Profile) -> Result<Vec<usize>, String> {
    let online = host.online_cpus();
    if !p.broker_cores.trim().is_empty() {
        return parse_cpu_list(&p.broker_cores);
    }
    let irq = if p.irq_policy == IrqPolicy::Away { parse_cpu_list(&p.irq_cores)? } else { Vec::new() };
    let rest: Vec<usize> = online.iter().copied().filter(|c| !irq.contains(c)).collect();
    Ok(if rest.is_empty() { online } else { rest })
}

/// Runs every check.
pub fn check_all(host: &Host, p: &Profile) -> Result<Vec<Finding>, String> {
    let cores = broker_cores(host, p)?;
    let mut out = vec![governor(host, p, &cores), cstates(host, p, &cores)];
    out.extend(irqs(host, p, &cores)?);
    out.extend(super::threads::kernel_threads(host, &cores));
    out.push(thp(host, p));
    out.push(at_most(
        host,
        "vm.swappiness",
        "proc/sys/vm/swappiness",
        p.swappiness,
        "the broker's memory (batch cache, offsets) must not be swapped out behind its back; 1 swaps only to avoid OOM",
    ));
    out.push(at_least(
        host,
        "fs.aio-max-nr",
        "proc/sys/fs/aio-max-nr",
        p.aio_max_nr,
        "asynchronous I/O contexts for direct I/O on many shards and files",
    ));
    out.extend(limits(host, p));
    out.push(clocksource(host, p));
    out.extend(block_devices(host, p));
    out.push(at_least(
        host,
        "net.core.rmem_max",
        "proc/sys/net/core/rmem_max",
        p.net_buffer_bytes,
        "large socket receive buffers let one connection carry a fast producer",
    ));
    out.push(at_least(
        host,
        "net.core.wmem_max",
        "proc/sys/net/core/wmem_max",
        p.net_buffer_bytes,
        "large socket send buffers let a fetch response leave without waits",
    ));
    out.push(tcp_mem(host, "net.ipv4.tcp_rmem", "proc/sys/net/ipv4/tcp_rmem", p.net_buffer_bytes));
    out.push(tcp_mem(host, "net.ipv4.tcp_wmem", "proc/sys/net/ipv4/tcp_wmem", p.net_buffer_bytes));
    out.push(at_least(
        host,
        "net.core.somaxconn",
        "proc/sys/net/core/somaxconn",
        p.somaxconn,
        "a burst of client connections is queued, not refused",
    ));
    out.push(io_uring(host));
    Ok(out)
}

fn governor(host: &Host, p: &Profile, cores: &[usize]) -> Finding {
    let why = "a broker core must not clock down between requests: frequency ramps add latency";
    let mut seen = Vec::new();
    let mut changes = Vec::new();
    for c in cores {
        let rel = format!("sys/devices/system/cpu/cpu{c}/cpufreq/scaling_governor");
        if let Some(g) = host.read(&rel) {
            if g != p.governor {
                changes.push(host.write_change(&rel, &g, &p.governor));
            }
            if !seen.contains(&g) {
                seen.push(g);
            }
        }
    }
    let setting = format!("CPU frequency governor (cpus {})", format_cpu_list(cores));
    if seen.is_empty() {
        return Finding::new(setting, "no cpufreq", p.governor.clone(), why).status(Status::Absent);
    }
    Finding::new(setting, seen.join(", "), p.governor.clone(), why).with_changes(changes)
}

fn cstates(host: &Host, p: &Profile, cores: &[usize]) -> Finding {
    let why = "waking from a deep idle state takes up to hundreds of µs, paid by the next request";
    let recommended = format!("states with exit latency > {} µs disabled", p.max_cstate_latency_us);
    let mut enabled_deep: Vec<String> = Vec::new();
    let mut changes = Vec::new();
    let mut any = false;
    for c in cores {
        let base = format!("sys/devices/system/cpu/cpu{c}/cpuidle");
        for state in host.list(&base).into_iter().filter(|s| s.starts_with("state")) {
            any = true;
            let dir = format!("{base}/{state}");
            let latency: u64 = host.read(&format!("{dir}/latency")).and_then(|s| s.parse().ok()).unwrap_or(0);
            let disabled = host.read(&format!("{dir}/disable")).unwrap_or_default();
            if latency > p.max_cstate_latency_us && disabled != "1" {
                let name = host.read(&format!("{dir}/name")).unwrap_or(state.clone());
                let label = format!("{name} ({latency} µs)");
                if !enabled_deep.contains(&label) {
                    enabled_deep.push(label);
                }
                changes.push(host.write_change(&format!("{dir}/disable"), &disabled, "1"));
            }
        }
    }
    if !any {
        return Finding::new("CPU idle states", "no cpuidle", recommended, why).status(Status::Absent);
    }
    let current = if enabled_deep.is_empty() {
        "no deep state enabled".to_string()
    } else {
        format!("{} enabled", enabled_deep.join(", "))
    };
    Finding::new("CPU idle states (C-states)", current, recommended, why).with_changes(changes)
}

/// Interrupts of network and NVMe queues, from /proc/interrupts.
fn device_irqs(host: &Host) -> Vec<(u32, String)> {
    let Some(text) = host.read("proc/interrupts") else { return Vec::new() };
    let mut out = Vec::new();
    for line in text.lines().skip(1) {
        let Some((num, rest)) = line.trim_start().split_once(':') else { continue };
        let Ok(irq) = num.trim().parse::<u32>() else { continue };
        let name = rest.split_whitespace().last().unwrap_or("").to_string();
        let device = name.starts_with("nvme")
            || ["eth", "ens", "enp", "eno", "mlx", "i40e", "ice", "ixgbe", "bnxt", "ena"]
                .iter()
                .any(|p| name.starts_with(p))
            || (name.starts_with("virtio") && ["input", "output", "req"].iter().any(|q| name.contains(q)));
        if device {
            out.push((irq, name));
        }
    }
    out
}

fn irqs(host: &Host, p: &Profile, cores: &[usize]) -> Result<Vec<Finding>, String> {
    if p.irq_policy == IrqPolicy::Leave {
        return Ok(Vec::new());
    }
    let why = match p.irq_policy {
        IrqPolicy::Away => "an interrupt on a broker core preempts its shard mid-request",
        _ => "one core taking every queue's interrupts becomes the bottleneck",
    };
    let irqs = device_irqs(host);
    let online = host.online_cpus();
    let mut out = Vec::new();
    if irqs.is_empty() {
        out.push(
            Finding::new("NIC/NVMe IRQ affinity", "no NIC or NVMe interrupts found", "-", why).status(Status::Absent),
        );
        return Ok(out);
    }
    let away = parse_cpu_list(&p.irq_cores)?;
    let mut changes = Vec::new();
    let mut wrong = Vec::new();
    for (k, (irq, name)) in irqs.iter().enumerate() {
        let rel = format!("proc/irq/{irq}/smp_affinity_list");
        let Some(current) = host.read(&rel) else { continue };
        let have = parse_cpu_list(&current).unwrap_or_default();
        let want = match p.irq_policy {
            IrqPolicy::Away => away.clone(),
            _ => vec![online.get(k % online.len().max(1)).copied().unwrap_or(0)],
        };
        let fine = match p.irq_policy {
            IrqPolicy::Away => !have.is_empty() && have.iter().all(|c| !cores.contains(c) || away.contains(c)),
            _ => have == want,
        };
        if !fine {
            wrong.push(format!("{name}→{current}"));
            changes.push(host.write_change(&rel, &current, &format_cpu_list(&want)));
        }
    }
    let recommended = match p.irq_policy {
        IrqPolicy::Away => format!("cpus {} (off broker cpus {})", format_cpu_list(&away), format_cpu_list(cores)),
        _ => "one per core, round-robin".into(),
    };
    let current = if wrong.is_empty() {
        format!("{} interrupts placed", irqs.len())
    } else {
        let mut s = wrong.iter().take(4).cloned().collect::<Vec<_>>().join(" ");
        if wrong.len() > 4 {
            s += &format!(" … ({} of {})", wrong.len(), irqs.len());
        }
        s
    };
    out.push(Finding::new("NIC/NVMe IRQ affinity", current, recommended, why).with_changes(changes));
    // irqbalance rewrites affinities behind our back.
    let running = host
        .list("proc")
        .iter()
        .filter(|d| d.chars().all(|c| c.is_ascii_digit()))
        .any(|pid| host.read(&format!("proc/{pid}/comm")).is_some_and(|c| c == "irqbalance"));
    let f = Finding::new(
        "irqbalance",
        if running { "running" } else { "not running" },
        "not running (or banned from broker cores)",
        "irqbalance moves interrupts back onto broker cores",
    );
    out.push(if running { f.status(Status::Manual) } else { f });
    Ok(out)
}

fn thp(host: &Host, p: &Profile) -> Finding {
    let why = "always-on THP makes khugepaged compact memory under the broker: latency spikes; madvise keeps huge pages where asked for";
    let rel = "sys/kernel/mm/transparent_hugepage/enabled";
    match host.read(rel) {
        None => Finding::new("transparent huge pages", "not available", p.thp.clone(), why).status(Status::Absent),
        Some(choices) => {
            let current = selected(&choices);
            let changes = if current == p.thp { Vec::new() } else { vec![host.write_change(rel, &current, &p.thp)] };
            Finding::new("transparent huge pages", current, p.thp.clone(), why).with_changes(changes)
        }
    }
}

fn numeric(host: &Host, rel: &str) -> Option<(String, u64)> {
    host.read(rel).and_then(|s| s.parse::<u64>().ok().map(|v| (s, v)))
}

fn at_most(host: &Host, name: &str, rel: &str, max: u64, why: &str) -> Finding {
    match numeric(host, rel) {
        None => Finding::new(name, "not available", format!("≤ {max}"), why).status(Status::Absent),
        Some((s, v)) => {
            let changes = if v <= max { Vec::new() } else { vec![host.write_change(rel, &s, &max.to_string())] };
            Finding::new(name, s, format!("≤ {max}"), why).with_changes(changes)
        }
    }
}

fn at_least(host: &Host, name: &str, rel: &str, min: u64, why: &str) -> Finding {
    match numeric(host, rel) {
        None => Finding::new(name, "not available", format!("≥ {min}"), why).status(Status::Absent),
        Some((s, v)) => {
            let changes = if v >= min { Vec::new() } else { vec![host.write_change(rel, &s, &min.to_string())] };
            Finding::new(name, s, format!("≥ {min}"), why).with_changes(changes)
        }
    }
}

fn tcp_mem(host: &Host, name: &str, rel: &str, max: u64) -> Finding {
    let why = "TCP autotuning may grow a busy connection's buffer up to this maximum";
    let Some(s) = host.read(rel) else {
        return Finding::new(name, "not available", format!("max ≥ {max}"), why).status(Status::Absent);
    };
    let fields: Vec<&str> = s.split_whitespace().collect();
    let current = fields.join(" ");
    let top = fields.get(2).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
    let changes = if fields.len() == 3 && top < max {
        vec![host.write_change(rel, &current, &format!("{} {} {max}", fields[0], fields[1]))]
    } else {
        Vec::new()
    };
    Finding::new(name, current, format!("max ≥ {max}"), why).with_changes(changes)
}

/// Soft limits of this process ("Max open files 1024 524288 files").
fn process_limit(host: &Host, label: &str) -> Option<(String, Option<u64>)> {
    let text = host.read("proc/self/limits")?;
    let line = text.lines().find(|l| l.starts_with(label))?;
    let soft = line[label.len()..].split_whitespace().next()?.to_string();
    let value = soft.parse::<u64>().ok();
    Some((soft, value))
}

fn limits(host: &Host, p: &Profile) -> Vec<Finding> {
    let conf = host.path("etc/security/limits.d/99-shardlog.conf");
    let memlock = if p.memlock_kib == 0 { "unlimited".to_string() } else { p.memlock_kib.to_string() };
    let content = format!(
        "# Written by `shardlog tune apply`; remove this file to undo.\n* soft nofile {n}\n* hard nofile {n}\n* soft memlock {m}\n* hard memlock {m}\n",
        n = p.nofile,
        m = memlock
    );
    let fix = || {
        if conf.exists() {
            Vec::new()
        } else {
            vec![Change::Create { path: conf.clone(), content: content.clone() }]
        }
    };
    let mut out = Vec::new();
    let nofile_why = "every partition holds segment and index files open, and every client a socket";
    match process_limit(host, "Max open files") {
        None => out.push(
            Finding::new("open files (ulimit -n)", "unknown", format!("≥ {}", p.nofile), nofile_why)
                .status(Status::Absent),
        ),
        Some((soft, v)) => {
            let ok = v.is_none_or(|v| v >= p.nofile); // "unlimited" parses as None
            let f = Finding::new("open files (ulimit -n)", soft, format!("≥ {}", p.nofile), nofile_why);
            out.push(if ok { f } else { finish_limit(f, fix()) });
        }
    }
    let memlock_why = "io_uring and registered DMA buffers count against locked memory";
    match process_limit(host, "Max locked memory") {
        None => out.push(
            Finding::new("locked memory (ulimit -l)", "unknown", memlock.clone(), memlock_why).status(Status::Absent),
        ),
        Some((soft, v)) => {
            let want_bytes = p.memlock_kib.saturating_mul(1024);
            let ok = match v {
                None => true,
                Some(v) => p.memlock_kib != 0 && v >= want_bytes,
            };
            let shown = v.map_or(soft.clone(), |b| format!("{} KiB", b / 1024));
            let want = if p.memlock_kib == 0 { "unlimited".to_string() } else { format!("≥ {} KiB", p.memlock_kib) };
            let f = Finding::new("locked memory (ulimit -l)", shown, want, memlock_why);
            out.push(if ok { f } else { finish_limit(f, fix()) });
        }
    }
    out
}

/// A limit below the recommendation: the limits.d file fixes new logins
/// (a systemd unit needs LimitNOFILE=/LimitMEMLOCK=); already written means
/// only a new session can pick it up.
fn finish_limit(f: Finding, changes: Vec<Change>) -> Finding {
    if changes.is_empty() {
        let mut f = f.status(Status::Manual);
        f.why += " (limits.d file present: start a new session, or set LimitNOFILE=/LimitMEMLOCK= in the unit)";
        f
    } else {
        let mut f = f.with_changes(changes);
        f.why += " (takes effect for new sessions; systemd units: LimitNOFILE=/LimitMEMLOCK=)";
        f
    }
}

fn clocksource(host: &Host, p: &Profile) -> Finding {
    let why = "reading the clock for every latency measurement must not be a slow path (hpet, acpi_pm)";
    let base = "sys/devices/system/clocksource/clocksource0";
    let Some(current) = host.read(&format!("{base}/current_clocksource")) else {
        return Finding::new("clocksource", "not available", p.clocksource.clone(), why).status(Status::Absent);
    };
    let available = host.read(&format!("{base}/available_clocksource")).unwrap_or_default();
    if current == p.clocksource {
        return Finding::new("clocksource", current, p.clocksource.clone(), why);
    }
    if available.split_whitespace().any(|c| c == p.clocksource) {
        let change = host.write_change(&format!("{base}/current_clocksource"), &current, &p.clocksource);
        Finding::new("clocksource", current, p.clocksource.clone(), why).with_changes(vec![change])
    } else {
        let mut f = Finding::new("clocksource", current, p.clocksource.clone(), why).status(Status::Manual);
        f.why += &format!(" ({} is not available here: {available})", p.clocksource);
        f
    }
}

fn block_devices(host: &Host, p: &Profile) -> Vec<Finding> {
    let devices: Vec<String> = host
        .list("sys/block")
        .into_iter()
        .filter(|d| p.devices.iter().any(|prefix| d.starts_with(prefix.as_str())))
        .collect();
    if devices.is_empty() {
        let f = Finding::new(
            format!("block devices ({}*)", p.devices.join("*, ")),
            "none found",
            "-",
            "scheduler, merges and write cache of the broker's disks",
        );
        return vec![f.status(Status::Absent)];
    }
    let mut out = Vec::new();
    for d in devices {
        let q = format!("sys/block/{d}/queue");
        if let Some(choices) = host.read(&format!("{q}/scheduler")) {
            let current = selected(&choices);
            let changes = if current == p.scheduler {
                Vec::new()
            } else {
                vec![host.write_change(&format!("{q}/scheduler"), &current, &p.scheduler)]
            };
            out.push(
                Finding::new(
                    format!("{d} I/O scheduler"),
                    current,
                    p.scheduler.clone(),
                    "NVMe queues need no reordering; a scheduler only adds CPU and latency",
                )
                .with_changes(changes),
            );
        }
        if let Some(current) = host.read(&format!("{q}/nomerges")) {
            let want = p.nomerges.to_string();
            let changes = if current == want {
                Vec::new()
            } else {
                vec![host.write_change(&format!("{q}/nomerges"), &current, &want)]
            };
            out.push(
                Finding::new(
                    format!("{d} nomerges"),
                    current,
                    want,
                    "the broker already writes large sequential blocks; merge attempts cost CPU per I/O",
                )
                .with_changes(changes),
            );
        }
        if let Some(current) = host.read(&format!("{q}/write_cache")) {
            let why = "write through skips flushes; only safe on devices with power-loss protection";
            if p.write_cache.is_empty() {
                out.push(Finding::new(format!("{d} write cache"), current, "left as is (profile)", why));
            } else {
                let changes = if current == p.write_cache {
                    Vec::new()
                } else {
                    vec![host.write_change(&format!("{q}/write_cache"), &current, &p.write_cache)]
                };
                out.push(
                    Finding::new(format!("{d} write cache"), current, p.write_cache.clone(), why).with_changes(changes),
                );
            }
        }
    }
    out
}

fn io_uring(host: &Host) -> Finding {
    let why = "the broker's shards do all their I/O through io_uring";
    let rel = "proc/sys/kernel/io_uring_disabled";
    match host.read(rel) {
        None => Finding::new("kernel.io_uring_disabled", "no such switch (enabled)", "0", why),
        Some(v) if v == "0" => Finding::new("kernel.io_uring_disabled", v, "0", why),
        Some(v) => {
            let mut f = Finding::new("kernel.io_uring_disabled", v.clone(), "0", why);
            f.changes = vec![host.write_change(rel, &v, "0")];
            f.status = Status::Blocks;
            if v == "1" {
                f.why += " (1: only members of kernel.io_uring_group may use it)";
            }
            f
        }
    }
}
