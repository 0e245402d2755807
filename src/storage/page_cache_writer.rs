//! The page-cache journal's writes (`--journal-page-cache`), made on a
//! thread of the shard's own, never on the shard's thread.
//!
//! A `pwrite` into the page cache is a copy of a few µs while the device
//! keeps up, but under writeback the kernel throttles the writer (dirty
//! page limits, pages still under writeback) and `sync_file_range` waits
//! for room in the device's queue: traced at 50k msg/s, such calls held
//! the shard thread 2–5.4 ms each, and every request of the shard waited
//! with them. Here the shard hands the encoded bytes over a channel and
//! awaits an answer; the writer thread does the copy and starts the
//! writeback, and the shard serves other requests meanwhile.
//!
//! The writer is not one of io_uring's io workers (an ext4 buffered write
//! submitted on the shard's ring goes to them): those run on the shard's
//! core and took it from the shard. This thread may run on any CPU the
//! process may use (not just the shard's), and sleeps while it waits.
//! One writer per shard thread, started at its first write; it ends when
//! the shard thread does.

use std::{
    cell::RefCell,
    fs::File,
    io,
    os::{fd::AsRawFd, unix::fs::FileExt},
    sync::{mpsc, Arc},
};

use futures_channel::oneshot;

/// Writeback is started for each whole MiB written, so the sync of a full
/// journal file finds a MiB or two left to write, not the whole file.
const WRITEBACK_CHUNK: u64 = 1 << 20;

struct Job {
    file: Arc<File>,
    buf: Vec<u8>,
    pos: u64,
    done: oneshot::Sender<io::Result<()>>,
}

thread_local! {
    /// This shard thread's writer, once started.
    static WRITER: RefCell<Option<mpsc::Sender<Job>>> = const { RefCell::new(None) };
}

/// Writes all of `buf` at `pos` of `file` through the page cache, on the
/// calling shard's writer thread; done once the kernel holds the copy.
pub async fn write(file: Arc<File>, buf: Vec<u8>, pos: u64) -> io::Result<()> {
    let (done, answer) = oneshot::channel();
    let job = Job { file, buf, pos, done };
    WRITER.with(|w| {
        let mut w = w.borrow_mut();
        if w.is_none() {
            *w = Some(start()?);
        }
        w.as_ref()
            .expect("started above")
            .send(job)
            .map_err(|_| io::Error::other("the shard's page-cache writer thread has ended"))
    })?;
    answer.await.unwrap_or_else(|_| Err(io::Error::other("the shard's page-cache writer thread dropped a write")))
}

fn start() -> io::Result<mpsc::Sender<Job>> {
    let (jobs, queue) = mpsc::channel::<Job>();
    let name = format!("{}-pcw", std::thread::current().name().unwrap_or("shard"));
    std::thread::Builder::new().name(name).spawn(move || {
        if let Err(e) = widen_affinity() {
            log::warn!("page-cache writer: keeps the shard's CPU affinity: {e}");
        }
        for job in queue {
            let written = job.file.write_all_at(&job.buf, job.pos).map(|()| start_writeback(&job));
            let _ = job.done.send(written);
        }
    })?;
    Ok(jobs)
}

/// Starts writeback of the whole MiBs `job` completed.
#[allow(unsafe_code)]
fn start_writeback(job: &Job) {
    let (from, through) = (
        job.pos / WRITEBACK_CHUNK * WRITEBACK_CHUNK,
        (job.pos + job.buf.len() as u64) / WRITEBACK_CHUNK * WRITEBACK_CHUNK,
    );
    if through > from {
        // SAFETY: a plain syscall on a descriptor `job` holds open.
        let rc = unsafe {
            libc::sync_file_range(
                job.file.as_raw_fd(),
                from as i64,
                (through - from) as i64,
                libc::SYNC_FILE_RANGE_WRITE,
            )
        };
        if rc != 0 {
            // Only a hint: the journal's fdatasync writes what is left.
            log::debug!("page-cache writer: sync_file_range: {}", io::Error::last_os_error());
        }
    }
}

/// Gives the calling thread the process's CPU affinity (the main thread's),
/// in place of the pinned shard's it inherited.
#[allow(unsafe_code)]
fn widen_affinity() -> io::Result<()> {
    // SAFETY: `set` is a plain bitmask the kernel fills and reads; the calls
    // take its size, and pid 0 is the calling thread.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        let size = size_of::<libc::cpu_set_t>();
        if libc::sched_getaffinity(libc::getpid(), size, &mut set) != 0 || libc::sched_setaffinity(0, size, &set) != 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_land_in_order_from_a_pinned_thread_and_the_writer_is_not_pinned() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("j");
        let file = Arc::new(File::create_new(&path).unwrap());
        let allowed = std::thread::available_parallelism().map_or(1, |n| n.get());
        let (read, writer_cpus) = glommio::LocalExecutorBuilder::new(glommio::Placement::Fixed(0))
            .name("pcwt")
            .spawn(move || async move {
                // Two MiB and a bit in three writes, the middle one crossing
                // a MiB boundary; in flight together.
                let a = write(file.clone(), vec![1u8; 700 << 10], 0);
                let b = write(file.clone(), vec![2u8; 700 << 10], 700 << 10);
                let c = write(file.clone(), vec![3u8; 700 << 10], 1400 << 10);
                let (a, b, c) = futures::join!(a, b, c);
                a.and(b).and(c).unwrap();
                let pid = std::process::id();
                let tasks = std::fs::read_dir(format!("/proc/{pid}/task")).unwrap();
                let mut cpus = None;
                for t in tasks.flatten() {
                    // "pcwt-<executor id>-pcw": short enough that the
                    // kernel's 15-byte thread name keeps all of it.
                    let comm = std::fs::read_to_string(t.path().join("comm")).unwrap_or_default();
                    if comm.trim().starts_with("pcwt-") && comm.trim().ends_with("-pcw") {
                        let status = std::fs::read_to_string(t.path().join("status")).unwrap();
                        cpus = status
                            .lines()
                            .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
                            .map(|s| s.trim().to_string());
                    }
                }
                (std::fs::read(&path).unwrap(), cpus)
            })
            .unwrap()
            .join()
            .unwrap();
        assert_eq!(read.len(), 2100 << 10);
        for (i, want) in [1u8, 2, 3].into_iter().enumerate() {
            let part = &read[i * (700 << 10)..(i + 1) * (700 << 10)];
            assert!(part.iter().all(|&b| b == want), "write {i} landed whole");
        }
        let cpus = writer_cpus.expect("a writer thread named *-pcw runs");
        if allowed > 1 {
            assert_ne!(cpus, "0", "the writer left the shard's pinned CPU");
        }
    }
}
