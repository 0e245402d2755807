//! The broker's global allocator: the system allocator, except that very
//! large blocks are reserved lazily (anonymous `mmap` with
//! `MAP_NORESERVE`) instead of being committed up front.
//!
//! Why: the protocol crate sizes a decoded array with `Vec::with_capacity`
//! of the element count the request claims, before reading any element. A
//! 20-byte request claiming two billion topics asked for ~120 GB, and a
//! refused allocation aborts the process: any client could kill the broker
//! (found by the `request_frame` fuzz target). Reserved lazily, such a block
//! costs only address space; decoding then fails on the missing elements
//! and the block is returned untouched. Memory actually written is still
//! bounded by what the request carries.

#![allow(unsafe_code)]

use std::alloc::{GlobalAlloc, Layout, System};

/// Blocks at least this large are reserved lazily.
const LAZY_BYTES: usize = 1 << 30;
const PAGE: usize = 4096;

pub struct LazyHugeAlloc;

fn is_lazy(layout: &Layout) -> bool {
    layout.size() >= LAZY_BYTES && layout.align() <= PAGE
}

// SAFETY: every block is either the system allocator's (and returned to it)
// or a private anonymous mapping of exactly `layout.size()` bytes (and
// unmapped with that size); `is_lazy` decides which, from the layout alone,
// the same way on allocation and deallocation.
unsafe impl GlobalAlloc for LazyHugeAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if !is_lazy(&layout) {
            return System.alloc(layout);
        }
        let p = libc::mmap(
            std::ptr::null_mut(),
            layout.size(),
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
            -1,
            0,
        );
        if p == libc::MAP_FAILED {
            std::ptr::null_mut()
        } else {
            p.cast()
        }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if is_lazy(&layout) {
            self.alloc(layout) // fresh anonymous pages are zero
        } else {
            System.alloc_zeroed(layout)
        }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        if is_lazy(&layout) {
            libc::munmap(ptr.cast(), layout.size());
        } else {
            System.dealloc(ptr, layout)
        }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let new_layout = Layout::from_size_align_unchecked(new_size, layout.align());
        if !is_lazy(&layout) && !is_lazy(&new_layout) {
            return System.realloc(ptr, layout, new_size);
        }
        let new = self.alloc(new_layout);
        if !new.is_null() {
            std::ptr::copy_nonoverlapping(ptr, new, layout.size().min(new_size));
            self.dealloc(ptr, layout);
        }
        new
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_huge_reservation_costs_nothing_until_written() {
        let a = LazyHugeAlloc;
        let layout = Layout::from_size_align(120 << 30, 8).unwrap();
        // SAFETY: the layout is valid and non-zero; the block is written
        // within bounds and freed with the same layout.
        unsafe {
            let p = a.alloc(layout);
            assert!(!p.is_null(), "120 GiB reserved lazily");
            *p = 7;
            *p.add((120 << 30) - 1) = 9;
            assert_eq!((*p, *p.add((120 << 30) - 1)), (7, 9));
            a.dealloc(p, layout);
            let small = Layout::from_size_align(64, 8).unwrap();
            let q = a.alloc(small);
            let q = a.realloc(q, small, 2 << 30);
            assert!(!q.is_null());
            a.dealloc(q, Layout::from_size_align(2 << 30, 8).unwrap());
        }
    }
}
