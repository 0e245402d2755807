//! The page-cache journal's writes (`--journal-page-cache`): a `pwrite`
//! on the shard's thread, and the writeback and any write that may block
//! on a thread of the shard's own.
//!
//! A `pwrite` into the page cache is a copy of a few µs while the device
//! keeps up, so the shard makes it itself: handing every write to another
//! thread cost a futex wake per write, and on a 2-core host the woken
//! thread ran on the shard's own core and preempted it (without the
//! hand-off the broker's CPU at 10k msg/s fell from 90% to 79% of a core;
//! perf/README.md, "The journal's copy back on the shard thread").
//!
//! Under writeback, though, the kernel throttles a writer (dirty page
//! limits, pages still under writeback), and `sync_file_range` waits for
//! room in the device's queue: traced at 50k msg/s, such calls held the
//! shard thread 2–5.4 ms each, and every request of the shard waited with
//! them. So `sync_file_range` always runs on the writer thread, and a
//! `pwrite` that took longer than `SLOW_WRITE` sends the shard's writes
//! there too for `HAND_OFF_FOR`: the shard hands the encoded bytes over a
//! channel and serves other requests while the copy waits.
//!
//! The writer is not one of io_uring's io workers (an ext4 buffered write
//! submitted on the shard's ring goes to them): those run on the shard's
//! core and took it from the shard. This thread may run on any CPU the
//! process may use (not just the shard's), and sleeps while it waits.
//! One writer per shard thread, started at its first hand-off; it ends
//! when the shard thread does.

use std::{
    cell::{Cell, RefCell},
    fs::File,
    io,
    os::{fd::AsRawFd, unix::fs::FileExt},
    sync::{mpsc, Arc},
    time::{Duration, Instant},
};

use futures_channel::oneshot;

/// Writeback is started for each whole MiB written, so the sync of a full
/// journal file finds a MiB or two left to write, not the whole file.
const WRITEBACK_CHUNK: u64 = 1 << 20;

/// A `pwrite` on the shard's thread slower than this was throttled or
/// waited for a page: the kernel is pushing back.
const SLOW_WRITE: Duration = Duration::from_micros(500);

/// How long the shard's writes go to its writer thread after a slow one.
const HAND_OFF_FOR: Duration = Duration::from_secs(1);

struct Job {
    file: Arc<File>,
    /// The bytes to write at `pos`; empty for writeback of what the shard
    /// wrote itself (`pos .. pos + span`).
    buf: Vec<u8>,
    pos: u64,
    span: u64,
    done: Option<oneshot::Sender<io::Result<()>>>,
}

thread_local! {
    /// This shard thread's writer, once started.
    static WRITER: RefCell<Option<mpsc::Sender<Job>>> = const { RefCell::new(None) };
    /// Until when this shard's writes go to its writer thread (set by a
    /// slow `pwrite` on the shard's thread).
    static HANDED_OFF_UNTIL: Cell<Option<Instant>> = const { Cell::new(None) };
}

/// Writes all of `buf` at `pos` of `file` through the page cache; done
/// once the kernel holds the copy. On the calling shard's thread unless a
/// recent write there was slow (then on its writer thread).
pub async fn write(file: Arc<File>, buf: Vec<u8>, pos: u64) -> io::Result<()> {
    let now = Instant::now();
    if HANDED_OFF_UNTIL.get().is_none_or(|until| now >= until) {
        file.write_all_at(&buf, pos)?;
        let took = now.elapsed();
        if took > SLOW_WRITE {
            log::info!(
                "page-cache journal: a {} B write took {:.1} ms on the shard's thread; its writes go to its writer thread for {} s",
                buf.len(),
                took.as_secs_f64() * 1e3,
                HAND_OFF_FOR.as_secs()
            );
            HANDED_OFF_UNTIL.set(Some(Instant::now() + HAND_OFF_FOR));
        }
        let span = buf.len() as u64;
        if crosses_chunk(pos, span) {
            send(Job { file, buf: Vec::new(), pos, span, done: None })?;
        }
        return Ok(());
    }
    let (done, answer) = oneshot::channel();
    let span = buf.len() as u64;
    send(Job { file, buf, pos, span, done: Some(done) })?;
    answer.await.unwrap_or_else(|_| Err(io::Error::other("the shard's page-cache writer thread dropped a write")))
}

/// Whether a write of `span` bytes at `pos` completes a whole MiB.
fn crosses_chunk(pos: u64, span: u64) -> bool {
    (pos + span) / WRITEBACK_CHUNK > pos / WRITEBACK_CHUNK
}

/// Hands `job` to this shard thread's writer, starting it if need be.
fn send(job: Job) -> io::Result<()> {
    WRITER.with(|w| {
        let mut w = w.borrow_mut();
        if w.is_none() {
            *w = Some(start()?);
        }
        w.as_ref()
            .expect("started above")
            .send(job)
            .map_err(|_| io::Error::other("the shard's page-cache writer thread has ended"))
    })
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
            if let Some(done) = job.done {
                let _ = done.send(written);
            }
        }
    })?;
    Ok(jobs)
}

/// Starts writeback of the whole MiBs `job` completed.
#[allow(unsafe_code)]
fn start_writeback(job: &Job) {
    let (from, through) =
        (job.pos / WRITEBACK_CHUNK * WRITEBACK_CHUNK, (job.pos + job.span) / WRITEBACK_CHUNK * WRITEBACK_CHUNK);
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
    fn handed_off_writes_land_in_order_and_the_writer_is_not_pinned() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("j");
        let file = Arc::new(File::create_new(&path).unwrap());
        let allowed = std::thread::available_parallelism().map_or(1, |n| n.get());
        let (read, writer_cpus) = glommio::LocalExecutorBuilder::new(glommio::Placement::Fixed(0))
            .name("pcwt")
            .spawn(move || async move {
                // Two MiB and a bit in three writes, the middle one crossing
                // a MiB boundary; in flight together, on the writer thread
                // (as after a slow write on the shard's).
                HANDED_OFF_UNTIL.set(Some(Instant::now() + HAND_OFF_FOR));
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

    #[test]
    fn writes_handed_off_after_a_slow_one_land_whole_and_in_place() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("j");
        let file = Arc::new(File::create_new(&path).unwrap());
        glommio::LocalExecutorBuilder::new(glommio::Placement::Unbound)
            .spawn(move || async move {
                write(file.clone(), vec![7u8; 8192], 0).await.unwrap();
                assert!(WRITER.with(|w| w.borrow().is_none()), "a quick write stays on the shard's thread");
                // As after a slow write: the next ones go to the writer thread.
                HANDED_OFF_UNTIL.set(Some(Instant::now() + HAND_OFF_FOR));
                let a = write(file.clone(), vec![8u8; 4096], 8192);
                let b = write(file.clone(), vec![9u8; 4096], 12288);
                let (a, b) = futures::join!(a, b);
                a.and(b).unwrap();
                // Neither write completes a MiB: only the hand-off starts it.
                assert!(WRITER.with(|w| w.borrow().is_some()), "the hand-off started the writer thread");
                HANDED_OFF_UNTIL.set(Some(Instant::now()));
                write(file.clone(), vec![10u8; 4096], 16384).await.unwrap();
            })
            .unwrap()
            .join()
            .unwrap();
        let read = std::fs::read(&path).unwrap();
        assert_eq!(read.len(), 20480);
        let runs = [(0, 8192, 7u8), (8192, 12288, 8), (12288, 16384, 9), (16384, 20480, 10)];
        for (from, to, want) in runs {
            assert!(read[from..to].iter().all(|&b| b == want), "bytes {from}..{to} are {want}s");
        }
    }
}
