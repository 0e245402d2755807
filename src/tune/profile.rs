//! A tuning profile: what `shardlog tune` recommends, read from TOML
//! (`tuning/*.toml`). Every field has a default, so an empty file (or no
//! `--profile`) means the default profile.

use serde::Deserialize;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum IrqPolicy {
    /// NIC and NVMe interrupts on `irq_cores` only, off the broker's cores.
    Away,
    /// One interrupt per core, round-robin over every online core.
    Spread,
    /// Not checked.
    Leave,
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Profile {
    /// Cores the broker's shards run on (a CPU list like "1-7"); empty means
    /// every online core except `irq_cores` (all of them if that leaves none).
    pub broker_cores: String,
    pub irq_policy: IrqPolicy,
    /// Cores that take NIC and NVMe interrupts under `irq_policy = "away"`.
    pub irq_cores: String,
    pub governor: String,
    /// Idle states whose exit latency exceeds this many µs are disabled on
    /// broker cores.
    pub max_cstate_latency_us: u64,
    /// Transparent huge pages mode.
    pub thp: String,
    pub swappiness: u64,
    pub aio_max_nr: u64,
    pub nofile: u64,
    /// Locked-memory limit in KiB; 0 means unlimited.
    pub memlock_kib: u64,
    pub clocksource: String,
    /// Block devices checked (name prefixes under /sys/block).
    pub devices: Vec<String>,
    pub scheduler: String,
    pub nomerges: u64,
    /// "write back" or "write through"; empty leaves the device's own mode
    /// (only a device with power-loss protection should say write through).
    pub write_cache: String,
    /// Largest socket buffer (net.core.[rw]mem_max, tcp_[rw]mem max).
    pub net_buffer_bytes: u64,
    pub somaxconn: u64,
}

impl Default for Profile {
    fn default() -> Self {
        Self {
            broker_cores: String::new(),
            irq_policy: IrqPolicy::Away,
            irq_cores: "0".into(),
            governor: "performance".into(),
            max_cstate_latency_us: 10,
            thp: "madvise".into(),
            swappiness: 1,
            aio_max_nr: 1_048_576,
            nofile: 1_048_576,
            memlock_kib: 0,
            clocksource: "tsc".into(),
            devices: vec!["nvme".into()],
            scheduler: "none".into(),
            nomerges: 2,
            write_cache: String::new(),
            net_buffer_bytes: 16 << 20,
            somaxconn: 4096,
        }
    }
}

impl Profile {
    pub fn load(path: &std::path::Path) -> Result<Self, String> {
        let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
        toml::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))
    }
}

/// Parses a Linux CPU list ("0-3,8,10-11").
pub fn parse_cpu_list(s: &str) -> Result<Vec<usize>, String> {
    let mut out = Vec::new();
    for part in s.trim().split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let bad = || format!("{s:?} is not a CPU list like 0-3,8");
        match part.split_once('-') {
            Some((a, b)) => {
                let (a, b): (usize, usize) = (a.parse().map_err(|_| bad())?, b.parse().map_err(|_| bad())?);
                if a > b || b > 4095 {
                    return Err(bad());
                }
                out.extend(a..=b);
            }
            None => out.push(part.parse().map_err(|_| bad())?),
        }
    }
    out.sort_unstable();
    out.dedup();
    Ok(out)
}

/// Formats CPUs as a list with ranges ("0-3,8").
pub fn format_cpu_list(cpus: &[usize]) -> String {
    let mut sorted = cpus.to_vec();
    sorted.sort_unstable();
    sorted.dedup();
    let mut parts = Vec::new();
    let mut i = 0;
    while i < sorted.len() {
        let mut j = i;
        while j + 1 < sorted.len() && sorted[j + 1] == sorted[j] + 1 {
            j += 1;
        }
        parts.push(if i == j { sorted[i].to_string() } else { format!("{}-{}", sorted[i], sorted[j]) });
        i = j + 1;
    }
    parts.join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_lists_round_trip() {
        assert_eq!(parse_cpu_list("0-3,8,10-11").unwrap(), vec![0, 1, 2, 3, 8, 10, 11]);
        assert_eq!(format_cpu_list(&[11, 0, 1, 2, 3, 8, 10]), "0-3,8,10-11");
        assert_eq!(parse_cpu_list(" 5\n").unwrap(), vec![5]);
        assert!(parse_cpu_list("3-1").is_err());
        assert!(parse_cpu_list("a").is_err());
    }

    #[test]
    fn shipped_profiles_parse() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tuning");
        let mut n = 0;
        for e in std::fs::read_dir(dir).unwrap() {
            let path = e.unwrap().path();
            if path.extension().is_some_and(|x| x == "toml") {
                Profile::load(&path).unwrap();
                n += 1;
            }
        }
        assert!(n >= 2, "tuning/ ships its profiles");
    }

    #[test]
    fn the_built_in_profile_is_tuning_default_toml() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tuning/default.toml");
        assert_eq!(Profile::load(&path).unwrap(), Profile::default());
    }
}
