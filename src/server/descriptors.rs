//! Open file descriptors. Segment files hold theirs only while in use
//! (`storage::open_files`), so the open-files limit no longer caps how many
//! partitions a broker serves: it sets how many segment files each shard
//! keeps open at once. Half of the limit, after a reserve, goes to segment
//! files, split over the shards; the other half is left for connections.
//!
//! At start the soft limit is raised to the hard one, and a limit too low
//! for even a few open files per shard is refused with the numbers.

/// Descriptors an open segment file holds: its direct-I/O writer, its
/// direct reader and, for sealed segments, a page-cache reader.
pub const PER_OPEN_FILE: u64 = 3;
/// Descriptors kept for everything that is neither a segment file nor a
/// connection: rings, eventfds, listeners, the data directory's lock.
pub const RESERVED: u64 = 256;
/// The fewest segment files a shard can work with (an append, a roll, a
/// compaction and a few reads at once).
pub const MIN_OPEN_FILES_PER_SHARD: u64 = 8;

/// The process's open-files limit after start-up raised it.
#[derive(Debug, Clone, Copy)]
pub struct Nofile {
    pub soft: u64,
    pub hard: u64,
    /// The soft limit before it was raised, if it was.
    pub raised_from: Option<u64>,
}

impl Nofile {
    /// Segment files each of `shards` shards may keep open.
    pub fn open_files_per_shard(&self, shards: usize) -> u64 {
        self.soft.saturating_sub(RESERVED) / 2 / PER_OPEN_FILE / shards.max(1) as u64
    }
}

/// Raises the soft RLIMIT_NOFILE to the hard limit (capped by the kernel's
/// `fs.nr_open` when the hard limit is unlimited) and returns the result.
#[allow(unsafe_code)]
pub fn raise_soft_limit() -> std::io::Result<Nofile> {
    let mut rl = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: getrlimit writes the struct it is given.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut rl) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    let before = rl.rlim_cur;
    let mut target = rl.rlim_max;
    if target == libc::RLIM_INFINITY {
        let nr_open = std::fs::read_to_string("/proc/sys/fs/nr_open").ok().and_then(|s| s.trim().parse().ok());
        target = nr_open.unwrap_or(1 << 20);
    }
    if target > before {
        let raised = libc::rlimit { rlim_cur: target, rlim_max: rl.rlim_max };
        // SAFETY: setrlimit reads the struct it is given.
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
        return Ok(Nofile { soft: target, hard: rl.rlim_max, raised_from: Some(before) });
    }
    Ok(Nofile { soft: before, hard: rl.rlim_max, raised_from: None })
}

/// Refuses to start when the limit leaves a shard too few open files.
pub fn check_start(shards: usize, nofile: &Nofile) -> Result<(), String> {
    if nofile.open_files_per_shard(shards) >= MIN_OPEN_FILES_PER_SHARD {
        return Ok(());
    }
    let need = RESERVED + 2 * PER_OPEN_FILE * MIN_OPEN_FILES_PER_SHARD * shards as u64;
    Err(format!(
        "the open-files limit {} (hard limit {}) leaves each of {shards} shard(s) room for {} segment files; at least \
         {MIN_OPEN_FILES_PER_SHARD} are needed, so the limit must be at least {need}: raise it with `ulimit -n {need}` or \
         LimitNOFILE={need} in the service unit",
        nofile.soft,
        hard_text(nofile.hard),
        nofile.open_files_per_shard(shards),
    ))
}

fn hard_text(hard: u64) -> String {
    if hard == libc::RLIM_INFINITY {
        "unlimited".into()
    } else {
        hard.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn half_the_limit_after_the_reserve_goes_to_segment_files() {
        let nofile = Nofile { soft: 20_000, hard: 20_000, raised_from: None };
        assert_eq!(nofile.open_files_per_shard(1), 3_290);
        assert_eq!(nofile.open_files_per_shard(2), 1_645);
        assert!(check_start(2, &nofile).is_ok());
        let low = Nofile { soft: 300, hard: 4096, raised_from: None };
        assert_eq!(low.open_files_per_shard(1), 7);
        let e = check_start(1, &low).unwrap_err();
        assert!(
            e.starts_with("the open-files limit 300 (hard limit 4096) leaves each of 1 shard(s) room for 7"),
            "{e}"
        );
        assert!(e.contains("ulimit -n 304"), "{e}");
    }
}
