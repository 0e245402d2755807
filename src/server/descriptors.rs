//! Open file descriptors, the limit that caps how many partitions one
//! broker can serve. Each open partition holds two (its active segment's
//! direct-I/O writer and its reader); sockets, io_uring rings, eventfds and
//! the data directory's lock take the rest.
//!
//! At start the soft limit is raised to the hard one, and a broker whose
//! partitions on disk cannot fit says so with the numbers instead of
//! half-starting; CreateTopics and CreatePartitions refuse what would not
//! fit (`BrokerSettings::max_partitions`).

/// Descriptors each open partition holds.
pub const PER_PARTITION: u64 = 2;
/// Descriptors kept for everything that is not a partition.
pub const RESERVED: u64 = 256;

/// The process's open-files limit after start-up raised it.
#[derive(Debug, Clone, Copy)]
pub struct Nofile {
    pub soft: u64,
    pub hard: u64,
    /// The soft limit before it was raised, if it was.
    pub raised_from: Option<u64>,
}

impl Nofile {
    /// Partitions that fit in the soft limit.
    pub fn max_partitions(&self) -> u64 {
        self.soft.saturating_sub(RESERVED) / PER_PARTITION
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

/// Refuses to start when the partitions on disk cannot all be opened.
pub fn check_start(partitions: u64, nofile: &Nofile) -> Result<(), String> {
    let need = partitions * PER_PARTITION + RESERVED;
    if need <= nofile.soft {
        return Ok(());
    }
    Err(format!(
        "{partitions} partitions need about {need} open files ({PER_PARTITION} each plus {RESERVED}); the limit is {} \
         (hard limit {}); raise it with `ulimit -n {need}` or LimitNOFILE={need} in the service unit, or delete topics",
        nofile.soft,
        hard_text(nofile.hard)
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
    fn the_start_check_counts_two_per_partition_plus_the_reserve() {
        let nofile = Nofile { soft: 1024, hard: 4096, raised_from: None };
        assert_eq!(nofile.max_partitions(), 384);
        assert!(check_start(384, &nofile).is_ok());
        let e = check_start(385, &nofile).unwrap_err();
        assert!(e.starts_with("385 partitions need about 1026 open files"), "{e}");
        assert!(e.contains("the limit is 1024 (hard limit 4096)") && e.contains("ulimit -n 1026"), "{e}");
    }
}
