//! The kernel workers that run a shard's blocking io_uring work: how many
//! there may be, and on which CPUs.
//!
//! glommio submits each segment's `fdatasync` (and DMA writes the kernel
//! cannot complete inline) on its io_uring; the kernel runs them in its
//! io-wq worker threads, which belong to the submitting thread (the shard).
//! Both settings live in the thread's io-wq, shared by all of its rings, so
//! a small ring of our own sets them for glommio's (which it does not
//! expose):
//!
//! - the cap on "bounded" workers (`IORING_REGISTER_IOWQ_MAX_WORKERS`): the
//!   kernel's was too low for a shard syncing many partitions at once;
//! - their CPUs (`IORING_REGISTER_IOWQ_AFF`): they inherit the shard's
//!   pinning, so by default they run on its core and preempt it. At 50k
//!   msg/s acks=all on one shard they did so about 2,500 times a second,
//!   and the shard's page-cache journal writes stalled behind them
//!   (perf/README.md). `--io-workers-cpuset` moves them.

use std::fmt;

use crate::limits;

/// What `set_up` did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Placed {
    /// The bounded-worker cap the kernel had.
    pub found_cap: u32,
    /// The CPUs the workers were moved to; empty if left on the shard's.
    pub cpus: Vec<usize>,
}

impl fmt::Display for Placed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "at most {} (was {})", limits::IO_WORKERS_BOUNDED_PER_SHARD, self.found_cap)?;
        if self.cpus.is_empty() {
            write!(f, ", on the shard's core")
        } else {
            write!(f, ", on cpus {:?}", self.cpus)
        }
    }
}

/// Raises the calling thread's bounded io-wq worker cap to
/// `IO_WORKERS_BOUNDED_PER_SHARD` and, if `cpus` names any, places its
/// workers there. Must run on the shard's thread, after glommio set up its
/// rings. Errors say which of the two failed.
pub fn set_up(cpus: &[usize]) -> Result<Placed, String> {
    let ring = io_uring::IoUring::new(2).map_err(|e| format!("cannot make a ring to configure them: {e}"))?;
    // [bounded, unbounded]; 0 leaves a limit as it is and reads it back.
    let mut found = [0u32; 2];
    let mut wanted = [limits::IO_WORKERS_BOUNDED_PER_SHARD, 0];
    let submitter = ring.submitter();
    submitter
        .register_iowq_max_workers(&mut found)
        .and_then(|()| submitter.register_iowq_max_workers(&mut wanted))
        .map_err(|e| format!("cannot raise their cap (syncs may queue): {e}"))?;
    if !cpus.is_empty() {
        let set = cpu_set(cpus)?;
        submitter
            .register_iowq_aff(&set)
            .map_err(|e| format!("cannot place them on cpus {cpus:?} (they stay on the shard's core): {e}"))?;
    }
    Ok(Placed { found_cap: found[0], cpus: cpus.to_vec() })
}

/// `cpus` as the kernel's CPU set.
#[allow(unsafe_code)]
fn cpu_set(cpus: &[usize]) -> Result<libc::cpu_set_t, String> {
    // SAFETY: cpu_set_t is a plain bit array; all zeros is the empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    for &cpu in cpus {
        if cpu >= 8 * size_of::<libc::cpu_set_t>() {
            return Err(format!("cpu {cpu} is beyond the largest CPU set"));
        }
        // SAFETY: `cpu` is within the set, checked above.
        unsafe { libc::CPU_SET(cpu, &mut set) };
    }
    Ok(set)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cap_is_raised_for_the_shard_thread() {
        let (first, second) = glommio::LocalExecutorBuilder::default()
            .spawn(|| async { (set_up(&[]).unwrap(), set_up(&[]).unwrap()) })
            .unwrap()
            .join()
            .unwrap();
        assert!(first.found_cap > 0, "the kernel reported a cap");
        assert_eq!(second.found_cap, limits::IO_WORKERS_BOUNDED_PER_SHARD, "the second call finds the raised cap");
    }

    /// The CPUs the kernel lets each of the calling thread's io workers
    /// run on, one entry per worker.
    fn workers_cpus() -> Vec<String> {
        let tid = std::fs::read_link("/proc/thread-self").unwrap();
        let name = format!("iou-wrk-{}", tid.file_name().unwrap().to_str().unwrap());
        let mut out = Vec::new();
        for task in std::fs::read_dir("/proc/self/task").unwrap().flatten() {
            let comm = std::fs::read_to_string(task.path().join("comm")).unwrap_or_default();
            if comm.trim() == name {
                let status = std::fs::read_to_string(task.path().join("status")).unwrap();
                let line = status.lines().find(|l| l.starts_with("Cpus_allowed_list:")).unwrap();
                out.push(line.split_whitespace().nth(1).unwrap().to_string());
            }
        }
        out
    }

    /// On a thread pinned to `home`, places its io workers on `placed`
    /// (none: left alone), makes the kernel start one (a forced-async
    /// fsync), and returns `workers_cpus`.
    fn workers_started(home: usize, placed: Option<usize>) -> Vec<String> {
        std::thread::spawn(move || {
            assert!(core_affinity::set_for_current(core_affinity::CoreId { id: home }));
            let mut ring = io_uring::IoUring::new(4).unwrap();
            set_up(&placed.into_iter().collect::<Vec<_>>()).unwrap();
            let file = tempfile::tempfile().unwrap();
            let fd = io_uring::types::Fd(std::os::fd::AsRawFd::as_raw_fd(&file));
            let sync = io_uring::opcode::Fsync::new(fd).build().flags(io_uring::squeue::Flags::ASYNC);
            push(&mut ring, &sync);
            ring.submit_and_wait(1).unwrap();
            workers_cpus()
        })
        .join()
        .unwrap()
    }

    #[allow(unsafe_code)]
    fn push(ring: &mut io_uring::IoUring, e: &io_uring::squeue::Entry) {
        // SAFETY: the entry refers to no buffer.
        unsafe { ring.submission().push(e).unwrap() };
    }

    #[test]
    fn workers_run_on_the_shard_core_unless_placed_elsewhere() {
        let cpus = crate::server::blocking_pool::process_cpus();
        let Some(&[home, other]) = cpus.get(..2).map(|c| <&[usize; 2]>::try_from(c).unwrap()) else {
            return; // one CPU: nowhere else to place them
        };
        let left = workers_started(home, None);
        assert!(!left.is_empty(), "a forced-async fsync starts a worker");
        assert!(left.iter().all(|c| *c == home.to_string()), "inherited from the shard's pinning: {left:?}");
        let placed = workers_started(home, Some(other));
        assert!(!placed.is_empty(), "a forced-async fsync starts a worker");
        assert!(placed.iter().all(|c| *c == other.to_string()), "placed on cpu {other}: {placed:?}");
    }
}
