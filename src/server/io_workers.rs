//! How many kernel workers may run a shard's blocking io_uring work.
//!
//! glommio submits each segment's `fdatasync` (and DMA writes the kernel
//! cannot complete inline) on its io_uring; the kernel runs them in its
//! io-wq worker threads, which belong to the submitting thread (the shard)
//! and share its CPU affinity. The number of "bounded" workers is capped
//! per thread, and the cap we found was too low for a shard syncing many
//! partitions at once. The cap lives in the thread's io-wq, shared by all
//! of its rings, so a small ring of our own can raise it for glommio's
//! (`IORING_REGISTER_IOWQ_MAX_WORKERS`; glommio does not expose its rings).

use crate::limits;

/// Raises the calling thread's bounded io-wq worker cap to
/// `IO_WORKERS_BOUNDED_PER_SHARD`; returns the cap it found. Must run on
/// the shard's thread, after glommio set up its rings.
pub fn raise_worker_cap() -> std::io::Result<u32> {
    let ring = io_uring::IoUring::new(2)?;
    // [bounded, unbounded]; 0 leaves a limit as it is and reads it back.
    let mut found = [0u32; 2];
    ring.submitter().register_iowq_max_workers(&mut found)?;
    let mut wanted = [limits::IO_WORKERS_BOUNDED_PER_SHARD, 0];
    ring.submitter().register_iowq_max_workers(&mut wanted)?;
    Ok(found[0])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cap_is_raised_for_the_shard_thread() {
        let (first, second) = glommio::LocalExecutorBuilder::default()
            .spawn(|| async { (raise_worker_cap().unwrap(), raise_worker_cap().unwrap()) })
            .unwrap()
            .join()
            .unwrap();
        assert!(first > 0, "the kernel reported a cap");
        assert_eq!(second, limits::IO_WORKERS_BOUNDED_PER_SHARD, "the second call finds the raised cap");
    }
}
