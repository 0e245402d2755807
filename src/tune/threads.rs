//! Kernel threads kept off the broker's cores: the unbound workqueues'
//! workers (through their cpumask) and DAMON's `kdamond` threads.

use super::{
    checks::{Finding, Host, Status},
    profile::{format_cpu_list, parse_cpu_list},
};

/// Kernel threads that may run anywhere, kept off the broker's cores: the
/// unbound workqueues' workers (writeback, and much else) through their
/// cpumask, and DAMON's `kdamond` threads, which a guest kernel may run for
/// proactive reclaim. On a 2-core VM one preempted a shard for 4 and 8 ms
/// within five seconds (perf/README.md).
pub(super) fn kernel_threads(host: &Host, cores: &[usize]) -> Vec<Finding> {
    let why = "a kernel thread that runs on a broker core preempts its shard for as long as it runs";
    let housekeeping: Vec<usize> = host.online_cpus().into_iter().filter(|c| !cores.contains(c)).collect();
    let rel = "sys/devices/virtual/workqueue/cpumask";
    let workqueues = match (host.read(rel), housekeeping.is_empty()) {
        (None, _) => Finding::new("unbound workqueues", "no workqueue cpumask", "-", why).status(Status::Absent),
        (Some(current), true) => {
            Finding::new("unbound workqueues", current, "no core is free of shards", why).status(Status::Absent)
        }
        (Some(current), false) => {
            let allowed = parse_cpumask(&current).unwrap_or_default();
            let want = format_cpumask(&housekeeping);
            let on_broker = allowed.iter().any(|c| cores.contains(c));
            let changes = if on_broker { vec![host.write_change(rel, &current, &want)] } else { Vec::new() };
            Finding::new(
                "unbound workqueues",
                format!("cpus {}", format_cpu_list(&allowed)),
                format!("cpus {} (off broker cpus {})", format_cpu_list(&housekeeping), format_cpu_list(cores)),
                why,
            )
            .with_changes(changes)
        }
    };
    let mut on_broker = Vec::new();
    let mut seen = 0;
    for pid in host.list("proc").into_iter().filter(|d| d.chars().all(|c| c.is_ascii_digit())) {
        if !host.read(&format!("proc/{pid}/comm")).is_some_and(|c| c.starts_with("kdamond")) {
            continue;
        }
        seen += 1;
        let status = host.read(&format!("proc/{pid}/status")).unwrap_or_default();
        let allowed = status
            .lines()
            .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
            .and_then(|l| parse_cpu_list(l).ok())
            .unwrap_or_default();
        if allowed.iter().any(|c| cores.contains(c)) {
            on_broker.push((pid, allowed));
        }
    }
    let damon = if seen == 0 {
        Finding::new("DAMON threads (kdamond)", "none running", "-", why).status(Status::Absent)
    } else if on_broker.is_empty() {
        Finding::new("DAMON threads (kdamond)", format!("{seen} off broker cpus"), "off broker cpus", why)
    } else if housekeeping.is_empty() {
        Finding::new("DAMON threads (kdamond)", format!("{seen} running"), "no core is free of shards", why)
            .status(Status::Manual)
    } else {
        let current = on_broker.iter().map(|(pid, a)| format!("{pid}→{}", format_cpu_list(a))).collect::<Vec<_>>();
        let commands = on_broker
            .iter()
            .map(|(pid, _)| format!("taskset -pc {} {pid}", format_cpu_list(&housekeeping)))
            .collect::<Vec<_>>();
        Finding::new("DAMON threads (kdamond)", current.join(" "), commands.join("; "), why).status(Status::Manual)
    };
    vec![workqueues, damon]
}

/// A kernel cpumask ("3", "ff,ffffffff": 32-bit hex words, most
/// significant first) as a CPU list.
fn parse_cpumask(mask: &str) -> Option<Vec<usize>> {
    let digits: String = mask.trim().chars().filter(|c| *c != ',').collect();
    let mut cpus = Vec::new();
    for (i, d) in digits.chars().rev().enumerate() {
        let v = d.to_digit(16)?;
        cpus.extend((0..4).filter(|b| v & (1 << b) != 0).map(|b| i * 4 + b as usize));
    }
    Some(cpus)
}

/// A CPU list as a kernel cpumask, the form `parse_cpumask` reads.
fn format_cpumask(cpus: &[usize]) -> String {
    let words = cpus.iter().max().map_or(1, |m| m / 32 + 1);
    let mut bits = vec![0u32; words];
    for c in cpus {
        bits[c / 32] |= 1 << (c % 32);
    }
    let mut out = format!("{:x}", bits[words - 1]);
    for w in bits[..words - 1].iter().rev() {
        out += &format!(",{w:08x}");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpumasks_read_and_write_the_kernels_form() {
        assert_eq!(parse_cpumask("3"), Some(vec![0, 1]));
        assert_eq!(parse_cpumask("1,00000000\n"), Some(vec![32]));
        assert_eq!(parse_cpumask("a0"), Some(vec![5, 7]));
        assert_eq!(parse_cpumask("xyz"), None);
        assert_eq!(format_cpumask(&[0]), "1");
        assert_eq!(format_cpumask(&[1, 33]), "2,00000002");
        let cpus = vec![0, 3, 31, 32, 63, 64];
        assert_eq!(parse_cpumask(&format_cpumask(&cpus)), Some(cpus));
    }
}
