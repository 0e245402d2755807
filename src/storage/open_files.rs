//! Segment files hold descriptors only while they are in use.
//!
//! Each shard (one thread, so thread-local and lock-free) keeps at most its
//! budget of segment files open. A file opens on first use, and past the
//! budget the least recently used one not busy with an operation closes.
//! This is the CLOCK approximation of LRU: a use sets the file's reference
//! bit, and the hand clears bits until it finds a file used neither since
//! its last pass nor now. Maintenance calls [`close_idle`] periodically, so
//! a partition nobody touches soon holds no descriptor at all.

use std::{
    cell::{Cell, RefCell},
    rc::{Rc, Weak},
};

use crate::storage::file::Handles;

/// One segment file's place in the shard's table of open files.
#[derive(Default)]
pub struct Slot {
    handles: RefCell<Option<Rc<Handles>>>,
    referenced: Cell<bool>,
}

/// What a shard's table holds and has done, for `/metrics`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct OpenFilesUsage {
    pub open: u64,
    pub limit: u64,
    /// Files opened (first opens and reopens) since start.
    pub opens: u64,
    /// Files closed to make room or because they were idle.
    pub closes: u64,
}

struct Table {
    ring: RefCell<Vec<Weak<Slot>>>,
    hand: Cell<usize>,
    open: Cell<usize>,
    limit: Cell<usize>,
    opens: Cell<u64>,
    closes: Cell<u64>,
    warned: Cell<bool>,
}

thread_local! {
    static TABLE: Table = const { Table {
        ring: RefCell::new(Vec::new()),
        hand: Cell::new(0),
        open: Cell::new(0),
        limit: Cell::new(usize::MAX),
        opens: Cell::new(0),
        closes: Cell::new(0),
        warned: Cell::new(false),
    } };
}

/// Sets how many segment files this shard keeps open (each holds up to
/// three descriptors), closing the excess now where it can.
pub fn set_limit(files: usize) {
    TABLE.with(|t| t.limit.set(files.max(1)));
    make_room_for(0);
}

pub fn usage() -> OpenFilesUsage {
    TABLE.with(|t| OpenFilesUsage {
        open: t.open.get() as u64,
        limit: t.limit.get() as u64,
        opens: t.opens.get(),
        closes: t.closes.get(),
    })
}

/// The slot's descriptors if open, marking them used.
pub(crate) fn touch(slot: &Slot) -> Option<Rc<Handles>> {
    let handles = slot.handles.borrow().clone()?;
    slot.referenced.set(true);
    Some(handles)
}

/// Closes files until one more fits the budget.
pub(crate) fn make_room() {
    make_room_for(1);
}

fn make_room_for(more: usize) {
    TABLE.with(|t| {
        while t.open.get() + more > t.limit.get() {
            if !t.evict_one() {
                if !t.warned.replace(true) {
                    log::warn!(
                        "{} segment files are in use at once, more than this shard's budget of {}: \
                         opening past it (logged once)",
                        t.open.get(),
                        t.limit.get()
                    );
                }
                break;
            }
        }
    });
}

/// Records that the slot's file was just opened.
pub(crate) fn opened(slot: &Rc<Slot>, handles: Rc<Handles>) {
    *slot.handles.borrow_mut() = Some(handles);
    slot.referenced.set(true);
    TABLE.with(|t| {
        t.open.set(t.open.get() + 1);
        t.opens.set(t.opens.get() + 1);
        t.ring.borrow_mut().push(Rc::downgrade(slot));
    });
}

/// Takes the slot's descriptors out of the table (they close when the last
/// holder drops them).
pub(crate) fn take(slot: &Slot) -> Option<Rc<Handles>> {
    let handles = slot.handles.borrow_mut().take()?;
    TABLE.with(|t| {
        t.open.set(t.open.get() - 1);
        t.closes.set(t.closes.get() + 1);
    });
    Some(handles)
}

/// Closes every file not used since the previous call and not busy now.
pub fn close_idle() -> usize {
    TABLE.with(|t| {
        let mut closed = 0;
        let mut i = 0;
        loop {
            let slot = {
                let ring = t.ring.borrow();
                match ring.get(i) {
                    Some(weak) => weak.upgrade(),
                    None => break,
                }
            };
            match slot {
                Some(slot) if slot.handles.borrow().is_some() => {
                    if !slot.referenced.replace(false) && !busy(&slot) {
                        t.close_at(i, &slot);
                        closed += 1;
                    } else {
                        i += 1;
                    }
                }
                // Its file was dropped or closed: forget it.
                _ => {
                    t.ring.borrow_mut().swap_remove(i);
                }
            }
        }
        closed
    })
}

/// Held by an operation in flight (beyond the slot's own reference), or
/// its page-cache descriptor by a sendfile still under way.
fn busy(slot: &Slot) -> bool {
    slot.handles.borrow().as_ref().is_some_and(|h| Rc::strong_count(h) > 1 || h.sending())
}

impl Table {
    /// Closes the open file at ring position `i`, which leaves the ring: a
    /// slot is in the ring exactly while its file is open (or until a
    /// dropped file's entry is next passed).
    fn close_at(&self, i: usize, slot: &Slot) {
        take(slot);
        self.ring.borrow_mut().swap_remove(i);
    }

    /// Closes one file the hand finds unused since its last pass and not
    /// busy. False when every open file is busy.
    fn evict_one(&self) -> bool {
        let mut steps = 0;
        loop {
            let len = self.ring.borrow().len();
            if len == 0 || steps > 2 * len {
                return false;
            }
            let i = self.hand.get() % len;
            let slot = self.ring.borrow()[i].upgrade();
            match slot {
                Some(slot) if slot.handles.borrow().is_some() => {
                    steps += 1;
                    self.hand.set(i + 1);
                    if !slot.referenced.replace(false) && !busy(&slot) {
                        self.close_at(i, &slot);
                        return true;
                    }
                }
                _ => {
                    self.ring.borrow_mut().swap_remove(i);
                }
            }
        }
    }
}
