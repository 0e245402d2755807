//! A shard's group commit across partitions: one device flush makes many
//! partitions' appends durable, where each partition used to run an
//! `fdatasync` of its own.
//!
//! An append that landed in blocks written before (zero-ahead's blocks,
//! see `storage::zero_ahead`) is a plain direct overwrite: the file's size
//! and extents do not change, so all it needs to survive a power loss is a
//! flush of the device's volatile cache issued after the write completed.
//! On ext4 and XFS an `fdatasync` of any file of the filesystem issues that
//! flush, even when the file has nothing of its own to commit (ext4:
//! `ext4_sync_file` → `blkdev_issue_flush`; XFS: `xfs_file_fsync` when the
//! log force was a no-op). So partitions whose unsynced writes are all such
//! overwrites queue here, and one `fdatasync` started after they queued
//! covers all of them: at 16 partitions, one flush in place of 16
//! `fdatasync`s, each a kernel io worker's wakeup on a shard's core.
//!
//! A partition whose writes moved metadata (an extending write, the first
//! blocks of a new segment) still syncs its own file; that sync covers the
//! queue too. Other filesystems (btrfs may skip the flush for an inode it
//! logged already) keep one `fdatasync` per partition.
//!
//! A failed flush may have lost any completed write of the device, so it
//! fails every partition of the shard on that device that was open then
//! ([`DeviceSync::failures`]); a reopen (recovery) clears it for one.

use std::{
    cell::{Cell, RefCell},
    collections::HashMap,
    io,
    os::unix::fs::MetadataExt,
    path::Path,
    rc::Rc,
};

use glommio::sync::Semaphore;

use crate::storage::file::SegmentFile;

const EXT4_SUPER_MAGIC: i64 = 0xEF53;
const XFS_SUPER_MAGIC: i64 = 0x5846_5342;

thread_local! {
    /// This shard's groups, by device number.
    static DEVICES: RefCell<HashMap<u64, Rc<DeviceSync>>> = RefCell::new(HashMap::new());
}

/// The group commit of one shard's partitions on one device.
pub struct DeviceSync {
    /// The filesystem flushes the device on a clean `fdatasync`.
    shared: bool,
    /// One shared flush at a time; those queued behind it find themselves
    /// covered by the next.
    permit: Semaphore,
    /// Tickets handed to partitions that queued for a flush.
    registered: Cell<u64>,
    /// Every ticket up to this one is covered by a flush that succeeded.
    covered: Cell<u64>,
    /// Flushes that failed on this device, ever.
    failures: Cell<u64>,
    /// `fdatasync`s run through this group (shared or a file's own).
    syncs: Cell<u64>,
}

impl DeviceSync {
    /// The group for the device holding `dir` (created if needed).
    pub fn for_dir(dir: &Path) -> Rc<Self> {
        let dev = std::fs::metadata(dir).map(|m| m.dev()).unwrap_or(u64::MAX);
        DEVICES.with(|d| {
            d.borrow_mut()
                .entry(dev)
                .or_insert_with(|| {
                    let shared = dev != u64::MAX && flushes_on_clean_sync(dir).unwrap_or(false);
                    Rc::new(Self {
                        shared,
                        permit: Semaphore::new(1),
                        registered: Cell::new(0),
                        covered: Cell::new(0),
                        failures: Cell::new(0),
                        syncs: Cell::new(0),
                    })
                })
                .clone()
        })
    }

    /// Whether a partition's overwrites may wait for the shared flush.
    pub fn shared(&self) -> bool {
        self.shared
    }

    /// Flushes that failed on this device so far.
    pub fn failures(&self) -> u64 {
        self.failures.get()
    }

    /// `fdatasync`s run through this group so far.
    pub fn syncs(&self) -> u64 {
        self.syncs.get()
    }

    /// `fdatasync` of `file`: its own data and metadata, and a device flush
    /// for every partition queued before it started.
    pub async fn sync_file(&self, file: &SegmentFile) -> io::Result<()> {
        let queued = self.registered.get();
        self.syncs.set(self.syncs.get() + 1);
        match file.fdatasync().await {
            Ok(()) => {
                self.covered.set(self.covered.get().max(queued));
                Ok(())
            }
            Err(e) => {
                self.failures.set(self.failures.get() + 1);
                Err(e)
            }
        }
    }

    /// Makes durable every overwrite that completed before this call, on
    /// any file of the device: waits for a flush that starts after it, or
    /// starts one with `file`. Only for writes that moved no metadata.
    pub async fn flush_shared(&self, file: &SegmentFile) -> io::Result<()> {
        let ticket = self.registered.get() + 1;
        self.registered.set(ticket);
        let _permit = self.permit.acquire_permit(1).await.expect("device flush permit: never closed");
        if self.covered.get() >= ticket {
            return Ok(());
        }
        self.sync_file(file).await
    }
}

/// Whether `dir`'s filesystem is one whose `fdatasync` of a clean file still
/// flushes the device (ext4, XFS).
#[allow(unsafe_code)]
fn flushes_on_clean_sync(dir: &Path) -> io::Result<bool> {
    use std::os::unix::ffi::OsStrExt;
    let path = std::ffi::CString::new(dir.as_os_str().as_bytes())?;
    // SAFETY: statfs is plain old data, for which all zeros is valid.
    let mut st: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: `path` is a valid C string and `st` a writable statfs.
    if unsafe { libc::statfs(path.as_ptr(), &mut st) } != 0 {
        return Err(io::Error::last_os_error());
    }
    #[allow(clippy::unnecessary_cast)] // f_type's width differs by target
    let kind = st.f_type as i64;
    Ok(kind == EXT4_SUPER_MAGIC || kind == XFS_SUPER_MAGIC)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partitions_on_one_device_share_a_group() {
        let dir = tempfile::tempdir().unwrap();
        let (a, b) = (dir.path().join("a"), dir.path().join("b"));
        std::fs::create_dir(&a).unwrap();
        std::fs::create_dir(&b).unwrap();
        assert!(Rc::ptr_eq(&DeviceSync::for_dir(&a), &DeviceSync::for_dir(&b)));
        assert!(!DeviceSync::for_dir(Path::new("/proc")).shared(), "procfs is not a flushing filesystem");
    }
}
