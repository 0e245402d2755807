//! The one seam between storage and glommio's direct-I/O files.
//!
//! Everything storage does to a segment file goes through [`SegmentFile`], so
//! faults can be injected here (see [`Faults`]) and, later, a simulated file
//! can stand in for the real one.
//!
//! **Architecture invariant:** segment data is written only with O_DIRECT
//! (`DmaFile`), from buffers aligned to the device; never through the page
//! cache.

use std::{
    cell::{Cell, OnceCell},
    io,
    os::unix::fs::{FileExt, OpenOptionsExt},
    path::{Path, PathBuf},
    rc::Rc,
    sync::Arc,
};

use bytes::Bytes;
use glommio::io::{DmaBuffer, DmaFile, OpenOptions};

use crate::{
    limits::DMA_ALIGNMENT,
    storage::{
        open_files::{self, Slot},
        page_cache_writer,
    },
};

/// The descriptors an open segment file holds: the direct-I/O writer, the
/// direct reader, and the page-cache reader once a sealed read needs it.
pub struct Handles {
    dma: DmaFile,
    reader: Arc<std::fs::File>,
    buffered: OnceCell<Arc<std::fs::File>>,
    /// The page-cache writer, once `write_cached_at` needs it.
    cached: OnceCell<Arc<std::fs::File>>,
}

/// A fault to inject into the next matching call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// The next `fdatasync` fails with this errno.
    Sync(i32),
    /// The next write fails with this errno.
    Write(i32),
}

/// Fault injection shared by every file of one log. Empty in production; a
/// test arms it to make the next call fail with a chosen errno, as a real
/// disk would (EIO, ENOSPC).
#[derive(Debug, Clone, Default)]
pub struct Faults(Rc<Cell<Option<Fault>>>);

impl Faults {
    pub fn arm(&self, fault: Fault) {
        self.0.set(Some(fault));
    }

    fn take_sync(&self) -> Option<io::Error> {
        match self.0.get() {
            Some(Fault::Sync(errno)) => {
                self.0.set(None);
                Some(io::Error::from_raw_os_error(errno))
            }
            _ => None,
        }
    }

    fn take_write(&self) -> Option<io::Error> {
        match self.0.get() {
            Some(Fault::Write(errno)) => {
                self.0.set(None);
                Some(io::Error::from_raw_os_error(errno))
            }
            _ => None,
        }
    }
}

/// A segment file for direct I/O, read and write, whose descriptors are
/// open only while it is in use (see `storage::open_files`): an idle
/// partition holds none, and a shard holds at most its budget.
///
/// Reads use a second O_DIRECT descriptor with `pread` on glommio's blocking
/// pool: glommio 0.9's io_uring reads (`read_at`, `read_at_aligned`) fail with
/// EOPNOTSUPP on the 6.18 kernels we run on, while its writes and syncs work.
/// The reads stay direct (no page cache) and off the shard's thread.
///
/// A file reopened by path after its descriptors were closed must still be
/// the same file: compaction renames a cleaned file over the same name and
/// retention removes names. The first open records the file's device and
/// inode; a reopen that finds another file (or none) fails with
/// [`io::ErrorKind::NotFound`], and a reader locates again.
pub struct SegmentFile {
    path: PathBuf,
    faults: Faults,
    slot: Rc<Slot>,
    /// (device major << 32 | minor, inode) of the file first opened here.
    identity: Cell<Option<(u64, u64)>>,
}

/// Settles, for the calling thread, glommio's guess of whether the data
/// disk takes polled I/O, before any segment opens.
///
/// glommio decides per device, once per thread, by reading the first block
/// of the first `DmaFile` it opens through its polled ring. Our first file
/// is usually a new, empty segment: a read past its end succeeds without
/// reaching the device, so glommio concludes the disk is pollable and sends
/// every later direct write to its polled ring. On a disk without poll
/// queues (virtio, and NVMe unless `nvme.poll_queues` is set) those writes
/// still complete by interrupt, but the shard must spin in the kernel to
/// reap them: its core stays busy while a write is in flight, and the
/// kernel's io workers (which run the shard's `fdatasync`s) and any helper
/// thread on that core wait behind it. Opening a file that has a block of
/// data first makes the probe reach the device and answer truthfully.
/// `owner` names the probe file, so that shards sharing `dir` never touch
/// each other's (glommio looks the path up again while opening).
pub async fn settle_poll_probe(dir: &Path, owner: usize) -> io::Result<()> {
    let path = dir.join(format!(".poll-probe-{owner}"));
    std::fs::write(&path, vec![0u8; 4096])?;
    let opened = OpenOptions::new().read(true).dma_open(&path).await;
    let _ = std::fs::remove_file(&path);
    opened?.close().await.map_err(io::Error::from)
}

impl Handles {
    /// A fetch still holds the page-cache descriptor (see `storage::chunk`).
    pub(crate) fn sending(&self) -> bool {
        self.buffered.get().is_some_and(|f| Arc::strong_count(f) > 1)
    }
}

impl SegmentFile {
    /// Creates a new, empty file; fails if it exists.
    pub async fn create(path: &Path, faults: Faults) -> io::Result<Self> {
        let file = Self::closed(path, faults);
        file.open_with(true).await?;
        Ok(file)
    }

    /// Opens an existing file for reading and writing.
    pub async fn open(path: &Path, faults: Faults) -> io::Result<Self> {
        let file = Self::closed(path, faults);
        file.open_with(false).await?;
        Ok(file)
    }

    fn closed(path: &Path, faults: Faults) -> Self {
        Self { path: path.to_path_buf(), faults, slot: Rc::new(Slot::default()), identity: Cell::new(None) }
    }

    /// Keeps the descriptors open (reopening them if need be) for as long
    /// as the returned handle lives.
    pub(crate) async fn hold(&self) -> io::Result<Rc<Handles>> {
        self.handles().await
    }

    /// The open descriptors, reopening the file if they were closed. The
    /// returned handle keeps them open until it is dropped.
    async fn handles(&self) -> io::Result<Rc<Handles>> {
        if let Some(h) = open_files::touch(&self.slot) {
            return Ok(h);
        }
        self.open_with(false).await
    }

    async fn open_with(&self, create_new: bool) -> io::Result<Rc<Handles>> {
        let dma = OpenOptions::new().read(true).write(true).create_new(create_new).dma_open(&self.path).await?;
        // glommio stat'ed the file while opening it; the reader opens that
        // very inode (not the path again, which a rename could move on).
        let found = (u64::from(dma.dev_major()) << 32 | u64::from(dma.dev_minor()), dma.inode());
        match self.identity.get() {
            None => self.identity.set(Some(found)),
            Some(first) if first != found => {
                return Err(io::Error::new(
                    io::ErrorKind::NotFound,
                    format!("{}: replaced since this segment was opened", self.path.display()),
                ));
            }
            Some(_) => {}
        }
        // Another task may have reopened it while this one waited.
        if let Some(h) = open_files::touch(&self.slot) {
            return Ok(h);
        }
        let same_inode = format!("/proc/self/fd/{}", std::os::fd::AsRawFd::as_raw_fd(&dma));
        let reader = std::fs::OpenOptions::new().read(true).custom_flags(libc::O_DIRECT).open(same_inode)?;
        open_files::make_room();
        let handles =
            Rc::new(Handles { dma, reader: Arc::new(reader), buffered: OnceCell::new(), cached: OnceCell::new() });
        open_files::opened(&self.slot, handles.clone());
        Ok(handles)
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// A zero-length buffer of `len` bytes (a multiple of the alignment)
    /// suitable for direct I/O.
    pub fn alloc(&self, len: usize) -> DmaBuffer {
        glommio::allocate_dma_buffer(len)
    }

    /// Writes the whole buffer at an aligned position.
    pub async fn write_at(&self, buf: DmaBuffer, pos: u64) -> io::Result<()> {
        if let Some(err) = self.faults.take_write() {
            return Err(err);
        }
        self.write_padding_at(buf, pos).await
    }

    /// Writes the whole buffer at `pos` through the page cache (a shard
    /// journal with `journal_page_cache`; never a segment): done once the
    /// kernel holds a copy. `fdatasync` makes it durable like any write.
    ///
    /// A plain `pwrite` on the shard's thread, moved to the shard's
    /// page-cache writer thread for a while after one was slow (see
    /// `storage::page_cache_writer`); not through io_uring, which hands an
    /// ext4 buffered write to its io workers on the shard's core.
    pub async fn write_cached_at(&self, buf: Vec<u8>, pos: u64) -> io::Result<()> {
        use std::os::fd::AsRawFd;
        if let Some(err) = self.faults.take_write() {
            return Err(err);
        }
        let handles = self.handles().await?;
        if handles.cached.get().is_none() {
            let w = self.reopen(handles.dma.as_raw_fd(), std::fs::OpenOptions::new().write(true), "writes")?;
            let _ = handles.cached.set(Arc::new(w));
        }
        let writer = handles.cached.get().expect("set above").clone();
        let written = page_cache_writer::write(writer, buf, pos).await;
        drop(handles); // held through the write: it counts in the descriptor budget
        written
            .map_err(|e| io::Error::new(e.kind(), format!("{}: page-cache write at {pos}: {e}", self.path.display())))
    }

    /// Writes padding (zeros written ahead of the appends): like `write_at`,
    /// but an armed fault is left for the append it was meant for.
    pub async fn write_padding_at(&self, buf: DmaBuffer, pos: u64) -> io::Result<()> {
        let len = buf.len();
        let written = self.handles().await?.dma.write_at(buf, pos).await?;
        if written != len {
            // A short O_DIRECT write means the device ran out of room mid-way.
            return Err(io::Error::from_raw_os_error(libc::ENOSPC));
        }
        Ok(())
    }

    /// Reads up to `len` bytes at `pos` (any alignment: the request is widened
    /// to aligned bounds and the result sliced, without a copy). Shorter only
    /// at the end of the file.
    pub async fn read_at(&self, pos: u64, len: usize) -> io::Result<Bytes> {
        let handles = self.handles().await?;
        let reader = handles.reader.clone();
        let read = glommio::executor().spawn_blocking(move || read_direct(&reader, pos, len)).await;
        drop(handles);
        read
    }

    /// The file opened for page-cache reads (sealed segments only: see
    /// `storage::chunk`).
    ///
    /// Reopened through `/proc/self/fd` from the descriptor this file already
    /// holds, never by path, so a reader still holding this segment sees the
    /// bytes it located, whatever the name means by the time it sends them.
    pub async fn buffered(&self) -> io::Result<Arc<std::fs::File>> {
        use std::os::fd::AsRawFd;
        let handles = self.handles().await?;
        if let Some(f) = handles.buffered.get() {
            return Ok(f.clone());
        }
        let f = self.reopen(handles.reader.as_raw_fd(), std::fs::OpenOptions::new().read(true), "reads")?;
        Ok(handles.buffered.get_or_init(|| Arc::new(f)).clone())
    }

    /// `fd`'s file opened again with `options` for page-cache `use_`,
    /// through `/proc/self/fd`: the very inode this file holds, whatever
    /// its name means by now.
    fn reopen(&self, fd: std::os::fd::RawFd, options: &std::fs::OpenOptions, use_: &str) -> io::Result<std::fs::File> {
        options.open(format!("/proc/self/fd/{fd}")).map_err(|e| {
            io::Error::new(e.kind(), format!("{}: reopen for page-cache {use_}: {e}", self.path.display()))
        })
    }

    pub async fn fdatasync(&self) -> io::Result<()> {
        if let Some(err) = self.faults.take_sync() {
            return Err(err);
        }
        Ok(self.handles().await?.dma.fdatasync().await?)
    }

    /// Reserves blocks up to `len` without changing the visible file size, so
    /// the size after a crash still tells how far writes got.
    pub async fn preallocate(&self, len: u64) -> io::Result<()> {
        Ok(self.handles().await?.dma.pre_allocate(len, true).await?)
    }

    pub async fn truncate(&self, len: u64) -> io::Result<()> {
        Ok(self.handles().await?.dma.truncate(len).await?)
    }

    pub async fn size(&self) -> io::Result<u64> {
        Ok(self.handles().await?.dma.file_size().await?)
    }

    /// Closes the descriptors now (they reopen if the file is used again).
    pub async fn close(self) -> io::Result<()> {
        match open_files::take(&self.slot).map(Rc::try_unwrap) {
            Some(Ok(handles)) => Ok(handles.dma.close().await?),
            // In use by a read in flight: closed when it ends.
            _ => Ok(()),
        }
    }
}

impl Drop for SegmentFile {
    fn drop(&mut self) {
        open_files::take(&self.slot);
    }
}

/// One aligned O_DIRECT `pread` of the range covering `[pos, pos + len)`.
fn read_direct(file: &std::fs::File, pos: u64, len: usize) -> io::Result<Bytes> {
    let align = DMA_ALIGNMENT as usize;
    let start = pos & !(DMA_ALIGNMENT - 1);
    let skip = (pos - start) as usize;
    let span = (skip + len).div_ceil(align) * align;
    // Over-allocate and read into the aligned window inside, so the buffer
    // meets O_DIRECT's address alignment without unsafe code.
    let mut buf = vec![0u8; span + align];
    let at = buf.as_ptr().align_offset(align);
    let mut done = 0usize;
    while done < span {
        let n = file.read_at(&mut buf[at + done..at + span], start + done as u64)?;
        done += n;
        // End of file. A file whose size is not block-aligned (an active
        // segment recovery trimmed to its last batch) ends mid-block: a
        // second O_DIRECT pread there would be misaligned (EINVAL).
        if n == 0 || !done.is_multiple_of(align) {
            break;
        }
    }
    let end = done.min(skip + len).max(skip);
    Ok(Bytes::from(buf).slice(at + skip..at + end))
}

/// Writes a small file atomically: write a temporary, fsync it, rename over
/// the target, fsync the directory. Used for checkpoints and index files,
/// which are written at roll and shutdown, off the append path.
pub fn write_atomically(path: &Path, bytes: &[u8]) -> io::Result<()> {
    use std::io::Write;
    // The whole name and ".tmp" (a segment's index files must not share
    // one temporary: the blocking pool may write both at once).
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    let tmp = PathBuf::from(tmp);
    let mut file = std::fs::File::create(&tmp)?;
    file.write_all(bytes)?;
    file.sync_data()?;
    drop(file);
    std::fs::rename(&tmp, path)?;
    sync_dir(path.parent().unwrap_or(Path::new(".")))
}

/// Makes a directory's entries (created, renamed, removed files) durable.
pub fn sync_dir(dir: &Path) -> io::Result<()> {
    std::fs::File::open(dir)?.sync_all()
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::OpenOptionsExt;

    #[test]
    fn a_direct_read_past_an_unaligned_end_returns_up_to_the_end() {
        let dir = crate::storage::testing::tempdir();
        let path = dir.path().join("segment");
        let content: Vec<u8> = (0..5000u32).map(|i| (i % 251) as u8).collect();
        std::fs::write(&path, &content).unwrap();
        let file = std::fs::OpenOptions::new().read(true).custom_flags(libc::O_DIRECT).open(&path).unwrap();
        for (pos, len) in [(0u64, 8192usize), (4100, 4000), (4999, 1), (0, 5000), (5000, 10)] {
            let got = super::read_direct(&file, pos, len).unwrap_or_else(|e| panic!("read {len} at {pos}: {e}"));
            let end = (pos as usize + len).min(content.len());
            assert_eq!(&got[..], &content[pos as usize..end], "read {len} at {pos}");
        }
    }

    /// The race behind it: the first pread stops at the old unaligned end,
    /// an append then extends the file, and a second pread from that end
    /// would be misaligned below the new end. Reads meanwhile must get the
    /// old end's bytes or more, never an error.
    #[test]
    fn a_direct_read_racing_an_extending_write_sees_no_error() {
        use std::os::unix::fs::FileExt;
        let dir = crate::storage::testing::tempdir();
        let path = dir.path().join("segment");
        let content: Vec<u8> = (0..8192u32).map(|i| (i % 251) as u8).collect();
        std::fs::write(&path, &content[..5000]).unwrap();
        let writer_path = path.clone();
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let stopped = stop.clone();
        let page = content.clone();
        let writer = std::thread::spawn(move || {
            let f = std::fs::OpenOptions::new().write(true).open(&writer_path).unwrap();
            while !stopped.load(std::sync::atomic::Ordering::Relaxed) {
                f.set_len(5000).unwrap();
                f.write_all_at(&page[5000..], 5000).unwrap();
            }
        });
        let file = std::fs::OpenOptions::new().read(true).custom_flags(libc::O_DIRECT).open(&path).unwrap();
        let mut failures = 0;
        for _ in 0..10_000 {
            match super::read_direct(&file, 0, 8192) {
                Ok(got) => assert!(got.len() >= 5000 && got[..] == content[..got.len()], "{} bytes", got.len()),
                Err(_) => failures += 1,
            }
        }
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        writer.join().unwrap();
        assert_eq!(failures, 0, "reads that failed while the file grew");
    }
}
