//! The broker's memory budget: `--memory` (or `memory` in the TOML file),
//! split evenly over the shards. Each shard's share covers
//! - requests read but not yet answered: the in-flight budget, at most a
//!   quarter of the share; a connection that would pass it is not read
//!   (produce backpressure, see `server::connection`);
//! - a fixed part for the shard's runtime, buffers and connections;
//! - the state of each partition it serves (index, tail block, producers);
//! - and the batch cache, which gets the rest and evicts its oldest batches
//!   to stay within it (`storage::batch_cache`).
//!
//! The default is a quarter of the machine's memory: shardlog writes with
//! direct I/O, but sealed segments are read through the page cache, which
//! should keep the rest.

/// The default budget is this fraction of physical memory.
pub const DEFAULT_SHARE: (u64, u64) = (1, 4);
/// Per shard, for everything that is neither cache, requests nor partitions.
pub const SHARD_BASE_BYTES: u64 = 64 << 20;
/// Accounted per partition. An idle one measured about 6 KB (10,000 idle
/// partitions: 58 MB); a busy one adds its sparse index and tail block.
pub const PARTITION_STATE_BYTES: u64 = 16 << 10;
/// The cache never gets less than this, even when partitions take the rest.
pub const CACHE_MIN_BYTES: u64 = 16 << 20;
/// The in-flight request budget gets at most this share of a shard's part.
const REQUESTS_SHARE: u64 = 4;

/// One shard's part of the budget.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MemoryBudget {
    pub total: u64,
    pub per_shard: u64,
    /// Bytes of requests in flight on the shard (all its connections).
    pub requests: u64,
}

impl MemoryBudget {
    /// Splits `total` over `shards`; `requests_max` is the configured
    /// in-flight budget per shard, lowered to a quarter of the share.
    pub fn new(total: u64, shards: usize, requests_max: u64) -> Result<Self, String> {
        let per_shard = total / shards.max(1) as u64;
        let requests = requests_max.min(per_shard / REQUESTS_SHARE).max(1);
        let least = SHARD_BASE_BYTES + CACHE_MIN_BYTES;
        if per_shard < least + requests {
            return Err(format!(
                "--memory {} gives each of {shards} shard(s) {}; a shard needs at least {} ({} base, {} cache, \
                 a quarter for requests): raise --memory or use fewer --cores",
                show(total),
                show(per_shard),
                show(least * REQUESTS_SHARE / (REQUESTS_SHARE - 1)),
                show(SHARD_BASE_BYTES),
                show(CACHE_MIN_BYTES),
            ));
        }
        Ok(Self { total, per_shard, requests })
    }

    /// What the batch cache may hold on a shard serving `partitions`.
    pub fn cache_limit(&self, partitions: u64) -> u64 {
        let taken = SHARD_BASE_BYTES + self.requests + partitions.saturating_mul(PARTITION_STATE_BYTES);
        self.per_shard.saturating_sub(taken).max(CACHE_MIN_BYTES)
    }

    /// Partitions one shard can serve and still leave the cache its minimum.
    pub fn partitions_per_shard(&self) -> u64 {
        self.per_shard.saturating_sub(SHARD_BASE_BYTES + self.requests + CACHE_MIN_BYTES) / PARTITION_STATE_BYTES
    }

    /// Refuses to start when the partitions on disk need more than the budget.
    pub fn check_start(&self, partitions: u64, shards: usize) -> Result<(), String> {
        let per_shard = partitions.div_ceil(shards.max(1) as u64);
        if per_shard <= self.partitions_per_shard() {
            return Ok(());
        }
        let need = shards as u64 * (SHARD_BASE_BYTES + CACHE_MIN_BYTES + per_shard * PARTITION_STATE_BYTES) * 4 / 3;
        Err(format!(
            "{partitions} partitions ({per_shard} per shard, {} of state each) need a memory budget of about {}; \
             --memory is {}: raise it (for example --memory {}GiB) or delete topics",
            show(PARTITION_STATE_BYTES),
            show(need),
            show(self.total),
            need.div_ceil(1 << 30)
        ))
    }
}

/// The budget when none is configured: a quarter of physical memory.
pub fn default_total() -> u64 {
    let (num, den) = DEFAULT_SHARE;
    physical_memory().map_or(4 << 30, |m| m / den * num)
}

/// `MemTotal` from /proc/meminfo.
pub fn physical_memory() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = text.lines().find(|l| l.starts_with("MemTotal:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// Parses a byte count: `2147483648`, `2GiB`, `512MiB`, `64KiB`, or with
/// decimal units `2GB`, `512MB` (powers of 1000), case-insensitive.
pub fn parse_size(text: &str) -> Result<u64, String> {
    let t = text.trim();
    let split = t.find(|c: char| !c.is_ascii_digit() && c != '.').unwrap_or(t.len());
    let (number, unit) = t.split_at(split);
    let unit = unit.trim().to_ascii_lowercase();
    let scale: u64 = match unit.as_str() {
        "" | "b" => 1,
        "k" | "kib" => 1 << 10,
        "m" | "mib" => 1 << 20,
        "g" | "gib" => 1 << 30,
        "t" | "tib" => 1 << 40,
        "kb" => 1_000,
        "mb" => 1_000_000,
        "gb" => 1_000_000_000,
        "tb" => 1_000_000_000_000,
        _ => return Err(format!("{text:?}: unknown unit {unit:?} (use bytes, KiB, MiB, GiB or TiB)")),
    };
    let value: f64 = number.parse().map_err(|_| format!("{text:?}: expected a size such as 2GiB or 512MiB"))?;
    if !value.is_finite() || value <= 0.0 {
        return Err(format!("{text:?}: a size must be positive"));
    }
    Ok((value * scale as f64) as u64)
}

/// Bytes in binary units, one decimal: "1.5 GiB".
pub fn show(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut value = bytes as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit < UNITS.len() - 1 {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{bytes} B")
    } else {
        format!("{value:.1} {}", UNITS[unit])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse_in_binary_and_decimal_units() {
        assert_eq!(parse_size("2GiB").unwrap(), 2 << 30);
        assert_eq!(parse_size("512 MiB").unwrap(), 512 << 20);
        assert_eq!(parse_size("1.5g").unwrap(), 3 << 29);
        assert_eq!(parse_size("2GB").unwrap(), 2_000_000_000);
        assert_eq!(parse_size("4096").unwrap(), 4096);
        assert!(parse_size("2 parsecs").unwrap_err().contains("unknown unit"));
        assert!(parse_size("GiB").is_err() && parse_size("0").is_err() && parse_size("-1G").is_err());
        assert_eq!(show(3 << 29), "1.5 GiB");
        assert_eq!(show(100), "100 B");
    }

    #[test]
    fn a_shard_share_pays_requests_base_and_partitions_before_the_cache() {
        let b = MemoryBudget::new(2 << 30, 2, 512 << 20).unwrap();
        assert_eq!(b.per_shard, 1 << 30);
        assert_eq!(b.requests, 256 << 20, "a quarter of the share, below the configured 512 MiB");
        assert_eq!(b.cache_limit(0), (1 << 30) - (256 << 20) - (64 << 20));
        assert_eq!(b.cache_limit(2500), (1 << 30) - (256 << 20) - (64 << 20) - 2500 * (16 << 10));
        // So many partitions that the cache keeps only its minimum.
        assert_eq!(b.partitions_per_shard(), ((1 << 30) - (256 << 20) - (64 << 20) - (16 << 20)) / (16 << 10));
        assert_eq!(b.cache_limit(1_000_000), CACHE_MIN_BYTES);
        assert!(b.check_start(2 * 44_032, 2).is_ok());
        let e = b.check_start(2 * 44_033, 2).unwrap_err();
        assert!(
            e.starts_with("88066 partitions (44033 per shard, 16.0 KiB of state each) need a memory budget"),
            "{e}"
        );
        let small = MemoryBudget::new(8 << 30, 1, 64 << 20).unwrap();
        assert_eq!(small.requests, 64 << 20, "the configured budget when it is below a quarter");
    }

    #[test]
    fn a_budget_too_small_for_one_shard_is_refused_with_the_numbers() {
        let e = MemoryBudget::new(100 << 20, 2, 512 << 20).unwrap_err();
        assert!(e.starts_with("--memory 100.0 MiB gives each of 2 shard(s) 50.0 MiB"), "{e}");
        assert!(MemoryBudget::new(128 << 20, 1, 512 << 20).is_ok());
    }
}
