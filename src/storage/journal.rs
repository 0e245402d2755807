//! The shard journal: a durable append costs one write and one `fdatasync`
//! per turn of the shard's loop, however many partitions the turn touched.
//!
//! Without it, acks=all syncs every partition's active segment: a produce
//! request over 16 partitions waits for 16 device flushes. With it, each
//! durable append's batches (already written to their segment, not synced)
//! are copied into the shard's journal, and every append queued while one
//! journal write is in flight goes into the next write, behind one sync
//! (`cargo bench --bench journal_floor` measured the device's part of a
//! durable append 9× shorter at p50 this way).
//!
//! Segments are then synced in the background: when a journal file is full
//! the shard syncs every partition with unsynced data (a checkpoint,
//! `spawn_checkpoints` in `shard::journal_glue`) and the file is retired:
//! recycled as a later file, or deleted. The next file is made ready before
//! the active one fills (`prepare`), from a retired file or, while a
//! shard owns fewer than [`FILES_KEPT`], a new one, so a rotation does not
//! wait for a file to be written with zeros when a checkpoint is slow. At
//! start-up, before any partition opens, every journal file left is read
//! ([`read_all`]); each partition appends the journal's batches that
//! continue its recovered log, syncs, and once every shard is up the old
//! files are removed.
//!
//! Files live in `<data dir>/journal/`, named `GGGGGG-SSS-NNNNNNNN.jnl`
//! (generation, shard, file number). A generation is one run of the broker.
//! Each write is a run of entries padded with zeros to the block size:
//!
//! ```text
//! magic u32 | length u32 | crc32c u32 (of what follows it) |
//! generation u32 | file number u32 | topic id [16] | partition i32 | batch
//! ```
//!
//! Reading a file stops at the first entry that is torn, fails its CRC, or
//! belongs to another file (a recycled file still holds its old entries).

use std::{
    cell::{Cell, RefCell},
    collections::VecDeque,
    io,
    path::{Path, PathBuf},
    rc::Rc,
};

use bytes::Bytes;
use futures_channel::oneshot;

use crate::{
    limits::{DMA_ALIGNMENT, WRITE_BYTES_MAX},
    protocol::record_batch::crc32c,
    storage::file::{self, Faults, SegmentFile},
};

#[path = "journal_replay.rs"]
mod replay;
pub use replay::{read_all, Replay};

pub const DIR: &str = "journal";
const MAGIC: u32 = 0x534c_4a31;
const HEADER: usize = 40;
/// The smallest journal file: room for the largest write.
const FILE_BYTES_MIN: u64 = 2 * WRITE_BYTES_MAX as u64;
/// The journal files a shard keeps (active, spare, full and retired for
/// reuse) before it waits for a checkpoint to free one: room for a
/// checkpoint that takes as long as four files to fill (at 50k msg/s of
/// 1 KiB, checkpoints of 32 partitions took up to 1.6 s, 2.5 files).
pub const FILES_KEPT: usize = 6;
/// Journal writes in flight at once.
const WRITES_IN_FLIGHT: usize = 2;

/// The partition an entry belongs to: the topic's id, not its name, so a
/// topic deleted and created again never receives the old one's batches.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct JournalKey {
    pub topic_id: [u8; 16],
    pub partition: i32,
}

/// What a partition log holds to use its shard's journal.
#[derive(Clone)]
pub struct JournalLink {
    pub journal: Rc<Journal>,
    pub key: JournalKey,
}

struct Active {
    file: Rc<SegmentFile>,
    number: u32,
    pos: u64,
}

/// One shard's journal. Lives on the shard's thread.
pub struct Journal {
    dir: PathBuf,
    generation: u32,
    shard: usize,
    file_bytes: u64,
    active: RefCell<Active>,
    /// The next file, made ready in the background after each rotation.
    spare: RefCell<Option<Active>>,
    preparing: Cell<bool>,
    /// A rotation waiting for the spare being prepared.
    spare_waiters: RefCell<Vec<oneshot::Sender<()>>>,
    /// Why the last preparation failed, for the rotation waiting on it.
    prepare_error: RefCell<Option<io::Error>>,
    /// Files written full, with the last entry number each holds, oldest first.
    full: RefCell<VecDeque<(PathBuf, u64)>>,
    /// Retired files kept to be reused as spares.
    recycled: RefCell<Vec<PathBuf>>,
    queue: RefCell<VecDeque<(u64, JournalKey, Bytes)>>,
    /// Entry numbers: the last queued and the last made durable.
    pushed: Cell<u64>,
    durable: Cell<u64>,
    /// Appenders waiting for their entry to be durable.
    waiters: Waiters,
    /// Appends waiting for their entry's write (write-behind's answer).
    written_waiters: Waiters,
    /// The last entry pushed by an appender that will wait for its sync:
    /// a sync starts as soon as its write completes. Entries nobody waits
    /// for are synced once their file is left (or by a later sync).
    sync_wanted: Cell<u64>,
    /// The file last left with writes no sync covered yet: a sync runs
    /// although nobody waits for one, and covers it before the active
    /// file, so `durable` never counts an entry of a file not synced.
    left: RefCell<Option<Rc<SegmentFile>>>,
    /// Writes issued and not yet done, in order: (id, the entry number
    /// through which it and those before it hold whole entries, done).
    flights: RefCell<VecDeque<(u64, u64, bool)>>,
    next_write: Cell<u64>,
    in_flight: Cell<usize>,
    /// Entries whose writes (and every write before) completed.
    written_through: Cell<u64>,
    syncing: Cell<bool>,
    writing: Cell<bool>,
    failed: Cell<bool>,
    /// Writes go through the page cache (`ServeConfig::journal_page_cache`).
    pub page_cache: Cell<bool>,
    pub stats: JournalStats,
}

/// Callers waiting for an entry number to be reached (written, or durable).
#[derive(Default)]
struct Waiters(RefCell<Vec<(u64, oneshot::Sender<bool>)>>);

impl Waiters {
    /// Told true once `number` is reached, false if the journal fails first.
    fn add(&self, number: u64) -> oneshot::Receiver<bool> {
        let (tx, rx) = oneshot::channel();
        self.0.borrow_mut().push((number, tx));
        rx
    }

    /// Tells every waiter for an entry through `through`.
    fn release(&self, through: u64) {
        let ready: Vec<_> = {
            let mut waiting = self.0.borrow_mut();
            let (ready, keep) = std::mem::take(&mut *waiting).into_iter().partition(|(n, _)| *n <= through);
            *waiting = keep;
            ready
        };
        for (_, tx) in ready {
            let _ = tx.send(true);
        }
    }

    /// Tells every waiter the journal failed.
    fn fail(&self) {
        let failed = std::mem::take(&mut *self.0.borrow_mut());
        for (_, tx) in failed {
            let _ = tx.send(false);
        }
    }
}

#[derive(Debug, Default)]
pub struct JournalStats {
    pub writes: Cell<u64>,
    pub syncs: Cell<u64>,
    pub bytes: Cell<u64>,
    pub entries: Cell<u64>,
    pub rotations: Cell<u64>,
    /// Rotations that found no spare ready: they waited for the one being
    /// prepared, or made the next file on the write path.
    pub rotation_waits: Cell<u64>,
}

fn file_name(generation: u32, shard: usize, number: u32) -> String {
    format!("{generation:06}-{shard:03}-{number:08}.jnl")
}

fn parse_name(name: &str) -> Option<(u32, usize, u32)> {
    let mut parts = name.strip_suffix(".jnl")?.split('-');
    let (g, s, n) = (parts.next()?.parse().ok()?, parts.next()?.parse().ok()?, parts.next()?.parse().ok()?);
    parts.next().is_none().then_some((g, s, n))
}

fn align_up(n: u64) -> u64 {
    n.div_ceil(DMA_ALIGNMENT) * DMA_ALIGNMENT
}

/// A file of `len` zeros, with its name durable in `dir`: written with
/// zeros (a write into an allocated but unwritten extent changes metadata,
/// which the next `fdatasync` must commit), or if `sparse` made at once,
/// costing that metadata until written through.
fn allocate_file(dir: &Path, path: &Path, len: u64, sparse: bool) -> io::Result<()> {
    use std::io::Write;
    let mut f = std::fs::OpenOptions::new().write(true).create_new(true).open(path)?;
    let made = (|| {
        if sparse {
            f.set_len(len)?;
        } else {
            let zeros = vec![0u8; 1 << 20];
            let mut left = len;
            while left > 0 {
                let n = left.min(zeros.len() as u64) as usize;
                f.write_all(&zeros[..n])?;
                left -= n as u64;
            }
        }
        f.sync_all()
    })();
    if let Err(e) = made {
        let _ = std::fs::remove_file(path); // a full disk keeps no half file
        return Err(e);
    }
    file::sync_dir(dir)
}

impl Journal {
    /// Starts generation `generation`'s journal of `shard` in `data_dir`.
    pub async fn create(data_dir: &Path, generation: u32, shard: usize, file_bytes: u64) -> io::Result<Rc<Self>> {
        let dir = data_dir.join(DIR);
        std::fs::create_dir_all(&dir)?;
        let file_bytes = align_up(file_bytes.max(FILE_BYTES_MIN));
        let first = Self::new_file(&dir, generation, shard, 0, file_bytes, None, false).await?;
        let journal = Rc::new(Self {
            dir,
            generation,
            shard,
            file_bytes,
            active: RefCell::new(first),
            spare: RefCell::new(None),
            preparing: Cell::new(false),
            spare_waiters: RefCell::new(Vec::new()),
            prepare_error: RefCell::new(None),
            full: RefCell::new(VecDeque::new()),
            recycled: RefCell::new(Vec::new()),
            queue: RefCell::new(VecDeque::new()),
            pushed: Cell::new(0),
            durable: Cell::new(0),
            waiters: Waiters::default(),
            written_waiters: Waiters::default(),
            sync_wanted: Cell::new(0),
            left: RefCell::new(None),
            flights: RefCell::new(VecDeque::new()),
            next_write: Cell::new(0),
            in_flight: Cell::new(0),
            written_through: Cell::new(0),
            syncing: Cell::new(false),
            writing: Cell::new(false),
            failed: Cell::new(false),
            page_cache: Cell::new(false),
            stats: JournalStats::default(),
        });
        journal.prepare(false);
        Ok(journal)
    }

    /// File `number`: `reuse` renamed to it if given, else a new one
    /// (`sparse`: not written with zeros, see `allocate_file`).
    async fn new_file(
        dir: &Path,
        generation: u32,
        shard: usize,
        number: u32,
        len: u64,
        reuse: Option<PathBuf>,
        sparse: bool,
    ) -> io::Result<Active> {
        let path = dir.join(file_name(generation, shard, number));
        let (d, p) = (dir.to_path_buf(), path.clone());
        glommio::executor()
            .spawn_blocking(move || match reuse {
                Some(old) => std::fs::rename(&old, &p).and_then(|()| file::sync_dir(&d)),
                None => allocate_file(&d, &p, len, sparse),
            })
            .await?;
        let file = SegmentFile::open(&path, Faults::default()).await?;
        Ok(Active { file: Rc::new(file), number, pos: 0 })
    }

    /// Makes the next file ready in the background, unless one is: a
    /// retired file renamed, or while the shard owns fewer than
    /// [`FILES_KEPT`] files, a new one. At the cap it waits for a retired
    /// file (`retire_through` calls again). Making a file writes all of it
    /// with zeros, so once the shard owns its files it only reuses them: at
    /// every rotation that doubled the device's writes under a steady load.
    /// `now`: even at the cap, as a rotation needs it. Every file is made
    /// here, one at a time, so two never take a number.
    fn prepare(self: &Rc<Self>, now: bool) {
        let allowed = now || !self.recycled.borrow().is_empty() || self.files() < FILES_KEPT;
        if self.spare.borrow().is_some() || !allowed || self.preparing.replace(true) {
            return;
        }
        let number = self.active.borrow().number + 1;
        let reuse = self.recycled.borrow_mut().pop();
        *self.prepare_error.borrow_mut() = None;
        let me = self.clone();
        crate::storage::background::spawn(async move {
            // A rotation waits for it: a sparse file is made at once, where
            // writing 32 MiB of zeros to a loaded device took 100-200 ms.
            match Self::new_file(&me.dir, me.generation, me.shard, number, me.file_bytes, reuse, now).await {
                Ok(next) => *me.spare.borrow_mut() = Some(next),
                Err(e) => {
                    let path = me.dir.join(file_name(me.generation, me.shard, number));
                    let e = io::Error::new(e.kind(), format!("cannot make journal file {}: {e}", path.display()));
                    log::warn!("journal of shard {}: {e}", me.shard);
                    *me.prepare_error.borrow_mut() = Some(e);
                }
            }
            me.preparing.set(false);
            for tx in me.spare_waiters.take() {
                let _ = tx.send(());
            }
        });
    }

    /// The files this journal owns: the active one, the spare (or the one
    /// being prepared), the full ones and those kept for reuse.
    fn files(&self) -> usize {
        let spare = self.spare.borrow().is_some() || self.preparing.get();
        1 + usize::from(spare) + self.full.borrow().len() + self.recycled.borrow().len()
    }

    pub fn failed(&self) -> bool {
        self.failed.get()
    }

    /// The number of the last entry queued.
    pub fn pushed(&self) -> u64 {
        self.pushed.get()
    }

    /// Whether full files wait for a checkpoint to retire them.
    pub fn checkpoint_due(&self) -> bool {
        !self.full.borrow().is_empty()
    }

    /// Queues `batches` of `key` and returns the entry number to wait for;
    /// `None` once the journal failed. `sync`: the caller will wait for it
    /// to be durable.
    pub fn push(self: &Rc<Self>, key: JournalKey, batches: impl IntoIterator<Item = Bytes>, sync: bool) -> Option<u64> {
        if self.failed.get() {
            return None;
        }
        let number = self.pushed.get() + 1;
        self.pushed.set(number);
        if sync {
            self.sync_wanted.set(number);
        }
        self.queue.borrow_mut().extend(batches.into_iter().map(|b| (number, key, b)));
        if !self.writing.replace(true) {
            glommio::spawn_local(self.clone().write_loop()).detach();
        }
        Some(number)
    }

    /// Waits until entry `number` is durable: true, or false if the
    /// journal failed first (the caller must make its data durable itself).
    pub async fn wait(self: &Rc<Self>, number: u64) -> bool {
        if let Some(known) = self.known(self.durable.get(), number) {
            return known;
        }
        let rx = self.waiters.add(number);
        self.sync_wanted.set(self.sync_wanted.get().max(number));
        self.start_sync();
        rx.await.unwrap_or(false)
    }

    /// Waits until entry `number`'s write (and every write before it)
    /// completed: true, or false if the journal failed first.
    pub async fn wait_written(&self, number: u64) -> bool {
        if let Some(known) = self.known(self.written_through.get(), number) {
            return known;
        }
        self.written_waiters.add(number).await.unwrap_or(false)
    }

    /// Whether a wait for entry `number`, which `reached` (written or
    /// durable) has come to, is over: true, false once the journal failed,
    /// `None` while it must wait.
    fn known(&self, reached: u64, number: u64) -> Option<bool> {
        if reached >= number {
            Some(true)
        } else if self.failed.get() {
            Some(false)
        } else {
            None
        }
    }

    /// Starts the sync loop if a sync is wanted and none runs.
    fn start_sync(self: &Rc<Self>) {
        if self.wants_sync() && !self.syncing.replace(true) {
            glommio::spawn_local(self.clone().sync_loop()).detach();
        }
    }

    /// A completed write holds entries someone waits to see durable, or
    /// a file was left unsynced.
    fn wants_sync(&self) -> bool {
        let durable = self.durable.get();
        durable < self.written_through.get() && (self.left.borrow().is_some() || self.sync_wanted.get() > durable)
    }

    /// Issues writes while entries are queued and fewer than
    /// `WRITES_IN_FLIGHT` are in flight; each completion starts it again,
    /// and a sync of the completed writes (`sync_loop`). Writes overlap the
    /// sync in flight: appends never wait for a sync to end before their
    /// bytes head for the device.
    async fn write_loop(self: Rc<Self>) {
        // Let the rest of this turn's appends queue behind this write.
        futures_lite::future::yield_now().await;
        loop {
            if self.failed.get() || self.queue.borrow().is_empty() || self.in_flight.get() >= WRITES_IN_FLIGHT {
                break;
            }
            let first = self.queue.borrow().front().map_or(0, |(_, _, b)| HEADER + b.len()) as u64;
            if self.active.borrow().pos + align_up(first) > self.file_bytes {
                if self.in_flight.get() > 0 {
                    break; // the last write to this file restarts the loop
                }
                // A file is left before its writes are synced (a sync under
                // a loaded device took the appends of every partition with
                // it for up to 100 ms), but not two.
                let unsynced = self.durable.get() < self.written_through.get();
                if !unsynced {
                    *self.left.borrow_mut() = None; // every write is durable
                } else if self.left.borrow().is_some() {
                    self.start_sync();
                    break; // the sync restarts the loop
                }
                let leaving = self.active.borrow().file.clone();
                if let Err(e) = self.rotate().await {
                    self.fail(e);
                    break;
                }
                if unsynced {
                    *self.left.borrow_mut() = Some(leaving);
                    self.start_sync();
                }
            }
            self.issue();
        }
        self.writing.set(false);
    }

    /// Starts one write of the queued entries that fit the active file.
    fn issue(self: &Rc<Self>) {
        let (file, pos, number) = {
            let a = self.active.borrow();
            (a.file.clone(), a.pos, a.number)
        };
        let room = (self.file_bytes - pos).min(WRITE_BYTES_MAX as u64) as usize;
        let mut taken = Vec::new();
        let mut used = 0usize;
        let covers = {
            let mut queue = self.queue.borrow_mut();
            while let Some((_, _, b)) = queue.front() {
                if !taken.is_empty() && used + HEADER + b.len() > room {
                    break;
                }
                used += HEADER + b.len();
                taken.push(queue.pop_front().expect("front exists"));
            }
            // Entries numbered `last` may continue in the queue (one push
            // split over two writes): only those before it are whole here.
            let last = taken.last().map_or(0, |t| t.0);
            if queue.front().is_some_and(|q| q.0 == last) {
                last - 1
            } else {
                last
            }
        };
        let len = align_up(used as u64) as usize;
        // The page cache takes plain memory, written on another thread.
        let (mut dma, mut plain) =
            if self.page_cache.get() { (None, vec![0u8; len]) } else { (Some(file.alloc(len)), Vec::new()) };
        let bytes = dma.as_mut().map_or(&mut plain[..], |b| b.as_bytes_mut());
        let mut at = 0;
        for (_, key, batch) in &taken {
            at += encode(&mut bytes[at..], self.generation, number, key, batch);
        }
        bytes[at..].fill(0);
        self.active.borrow_mut().pos = pos + len as u64;
        let id = self.next_write.get();
        self.next_write.set(id + 1);
        self.flights.borrow_mut().push_back((id, covers, false));
        self.in_flight.set(self.in_flight.get() + 1);
        self.stats.entries.set(self.stats.entries.get() + taken.len() as u64);
        self.stats.writes.set(self.stats.writes.get() + 1);
        self.stats.bytes.set(self.stats.bytes.get() + len as u64);
        let me = self.clone();
        glommio::spawn_local(async move {
            let written = match dma {
                Some(buf) => file.write_at(buf, pos).await,
                None => file.write_cached_at(plain, pos).await,
            };
            me.in_flight.set(me.in_flight.get() - 1);
            match written {
                Ok(()) => me.written(id),
                Err(e) => me.fail(e),
            }
            me.kick();
        })
        .detach();
    }

    /// Restarts the write loop if entries wait and it is not running.
    fn kick(self: &Rc<Self>) {
        if !self.failed.get() && !self.queue.borrow().is_empty() && !self.writing.replace(true) {
            glommio::spawn_local(self.clone().write_loop()).detach();
        }
    }

    /// Write `id` completed: the entries the completed prefix of writes
    /// covers await the next sync, started now unless one is in flight.
    fn written(self: &Rc<Self>, id: u64) {
        let mut flights = self.flights.borrow_mut();
        if let Some(f) = flights.iter_mut().find(|f| f.0 == id) {
            f.2 = true;
        }
        while let Some(&(_, covers, true)) = flights.front() {
            self.written_through.set(self.written_through.get().max(covers));
            flights.pop_front();
        }
        drop(flights);
        self.written_waiters.release(self.written_through.get());
        self.start_sync();
    }

    /// Syncs the file left unsynced, if any, and the active file until
    /// every completed write is covered.
    async fn sync_loop(self: Rc<Self>) {
        while !self.failed.get() && self.wants_sync() {
            let covers = self.written_through.get();
            let left = self.left.borrow().clone();
            let file = self.active.borrow().file.clone();
            self.stats.syncs.set(self.stats.syncs.get() + 1);
            let mut synced = Ok(());
            if let Some(left) = &left {
                synced = left.fdatasync().await;
            }
            if synced.is_ok() {
                synced = file.fdatasync().await;
            }
            match synced {
                Ok(()) => {
                    // Only a sync that began after the rotation clears it: one
                    // that began before may have missed its last writes.
                    let same = |l: &Rc<SegmentFile>| left.as_ref().is_some_and(|s| Rc::ptr_eq(l, s));
                    if self.left.borrow().as_ref().is_some_and(same) {
                        *self.left.borrow_mut() = None;
                    }
                    self.completed(covers);
                }
                Err(e) => self.fail(e),
            }
        }
        self.syncing.set(false);
        self.kick();
    }

    /// Every entry through `covers` is durable.
    fn completed(&self, covers: u64) {
        self.durable.set(self.durable.get().max(covers));
        self.waiters.release(self.durable.get());
    }

    fn fail(&self, e: io::Error) {
        if !self.failed.replace(true) {
            log::error!(
                "journal of shard {} ({}): {e}; durable appends fall back to segment syncs",
                self.shard,
                self.dir.display()
            );
        }
        self.queue.borrow_mut().clear();
        self.waiters.fail();
        self.written_waiters.fail();
    }

    /// Moves to the next file; the full one waits for a checkpoint.
    async fn rotate(self: &Rc<Self>) -> io::Result<()> {
        if self.spare.borrow().is_none() {
            // At the cap with a checkpoint behind, or a preparation under
            // way: the appends wait for the file.
            self.stats.rotation_waits.set(self.stats.rotation_waits.get() + 1);
            log::debug!("journal of shard {}: no spare file ready at rotation", self.shard);
            self.prepare(true);
            if self.spare.borrow().is_none() && self.preparing.get() {
                let (tx, rx) = oneshot::channel();
                self.spare_waiters.borrow_mut().push(tx);
                let _ = rx.await;
            }
        }
        let Some(next) = self.spare.borrow_mut().take() else {
            let e = self.prepare_error.borrow_mut().take();
            return Err(e.unwrap_or_else(|| io::Error::other("the next journal file was not made")));
        };
        let old = std::mem::replace(&mut *self.active.borrow_mut(), next);
        // Its writes are done (`left` has it synced if they are not yet).
        // It holds no entry queued after now: a checkpoint that began later
        // covers it.
        self.full.borrow_mut().push_back((old.file.path().to_path_buf(), self.pushed.get()));
        self.stats.rotations.set(self.stats.rotations.get() + 1);
        self.prepare(false);
        Ok(())
    }

    /// Removes every file of this journal (at a clean shutdown, once every
    /// log was synced and closed); nothing may be written to it afterwards.
    pub fn remove_files(&self) -> io::Result<()> {
        self.failed.set(true);
        let mut paths = vec![self.active.borrow().file.path().to_path_buf()];
        paths.extend(self.spare.borrow().as_ref().map(|s| s.file.path().to_path_buf()));
        paths.extend(self.full.borrow().iter().map(|(p, _)| p.clone()));
        paths.extend(self.recycled.borrow().iter().cloned());
        for p in paths {
            match std::fs::remove_file(&p) {
                Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
                _ => {}
            }
        }
        file::sync_dir(&self.dir)
    }

    /// After a checkpoint that synced every partition's segments once
    /// entry `through` was queued: retires the full files it covers (kept
    /// for reuse up to [`FILES_KEPT`] files in all, the rest deleted).
    pub async fn retire_through(self: &Rc<Self>, through: u64) {
        loop {
            let Some((path, last)) = self.full.borrow().front().cloned() else { return };
            if last > through {
                return;
            }
            self.full.borrow_mut().pop_front();
            // Its entries are in synced segments now: it needs no sync.
            if self.left.borrow().as_ref().is_some_and(|l| l.path() == path) {
                *self.left.borrow_mut() = None;
            }
            // Kept if the journal then owns at most `FILES_KEPT` files.
            if self.files() < FILES_KEPT {
                self.recycled.borrow_mut().push(path);
                self.prepare(false);
                continue;
            }
            let shown = path.display().to_string();
            if let Err(e) = glommio::executor().spawn_blocking(move || std::fs::remove_file(path)).await {
                log::warn!("journal of shard {}: cannot remove {shown}: {e}", self.shard);
            }
        }
    }
}

/// Writes one entry at the start of `out`; returns its length.
fn encode(out: &mut [u8], generation: u32, number: u32, key: &JournalKey, batch: &[u8]) -> usize {
    let len = HEADER + batch.len();
    out[0..4].copy_from_slice(&MAGIC.to_le_bytes());
    out[4..8].copy_from_slice(&(batch.len() as u32).to_le_bytes());
    out[12..16].copy_from_slice(&generation.to_le_bytes());
    out[16..20].copy_from_slice(&number.to_le_bytes());
    out[20..36].copy_from_slice(&key.topic_id);
    out[36..40].copy_from_slice(&key.partition.to_le_bytes());
    out[HEADER..len].copy_from_slice(batch);
    let crc = crc32c(&out[12..len]);
    out[8..12].copy_from_slice(&crc.to_le_bytes());
    len
}

#[cfg(test)]
use replay::decode_file;

#[cfg(test)]
#[path = "journal_tests.rs"]
mod tests;
