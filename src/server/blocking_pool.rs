//! Where a shard's blocking work runs: glommio's pool for the system calls
//! io_uring does not serve here (directory syncs, renames, unlinks, small
//! checkpoint files, `pread` fallbacks).
//!
//! glommio's default is one thread pinned to the shard's core. Every
//! partition's roll work then queues on that one thread: at a steady rate
//! the partitions fill their segments together, so sixteen rolls bring some
//! ninety fsyncs (index files, checkpoints, directories) one after another,
//! and a read that must go to the file waits behind all of them. The thread
//! also takes the shard's core from it while it runs. Instead, a few
//! threads, each allowed on every core the process may use: a confined
//! broker (`taskset`) keeps them within its cores, an unconfined one lets
//! the kernel run them beside the shards.

use glommio::{CpuSet, PoolPlacement};

/// Blocking threads per shard: fsyncs of different files run side by side
/// (the filesystem's journal commits them together).
const THREADS: usize = 4;

/// The cores this process may use (its affinity as started), read before
/// any shard pins its thread.
pub fn process_cpus() -> Vec<usize> {
    core_affinity::get_core_ids().map(|ids| ids.into_iter().map(|c| c.id).collect()).unwrap_or_default()
}

/// The placement for a shard's blocking pool: `THREADS` threads over
/// `cpus`; glommio's default (one thread on the shard's own core) when the
/// cores are unknown.
pub fn placement(cpus: &[usize], shard_cpu: usize) -> PoolPlacement {
    let set = CpuSet::online().map(|s| s.filter(|l| cpus.contains(&l.cpu)));
    match set {
        Ok(set) if !set.is_empty() => PoolPlacement::Fenced(THREADS, set),
        _ => PoolPlacement::from(glommio::Placement::Fixed(shard_cpu)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The shard's thread is pinned to its core; its blocking threads may
    /// run on every core the process may use.
    #[test]
    fn a_shards_blocking_threads_are_not_pinned_to_its_core() {
        let cpus = process_cpus();
        assert!(!cpus.is_empty(), "the process's cores are known");
        let shard_cpu = cpus[0];
        let (on_shard, on_blocking) = glommio::LocalExecutorBuilder::new(glommio::Placement::Fixed(shard_cpu))
            .blocking_thread_pool_placement(placement(&cpus, shard_cpu))
            .spawn(|| async {
                let blocking = glommio::executor().spawn_blocking(process_cpus).await;
                (process_cpus(), blocking)
            })
            .unwrap()
            .join()
            .unwrap();
        assert_eq!(on_shard, vec![shard_cpu], "the shard's own thread is pinned");
        assert_eq!(on_blocking, cpus, "a blocking thread may use every core the process may");
    }
}
