//! Writing a response made of several buffers with `writev`, so stored
//! record batches go from their buffers to the socket without a copy in
//! user space. glommio's stream writes one slice at a time, so this reaches
//! for the socket's descriptor and falls back to glommio's readiness-aware
//! write when the socket buffer is full.

#![allow(unsafe_code)]

use std::io::{self, IoSlice};

use bytes::{Buf, Bytes};
use futures_lite::{AsyncWrite, AsyncWriteExt};

/// Most buffers handed to one `writev` (Linux's IOV_MAX).
const IOV_MAX: usize = 1024;

/// Writes every part to the socket `fd`, which `stream` wraps.
pub async fn write_all(fd: i32, stream: &mut (impl AsyncWrite + Unpin), mut parts: Vec<Bytes>) -> io::Result<()> {
    parts.retain(|p| !p.is_empty());
    let mut first = 0;
    while first < parts.len() {
        let slices: Vec<IoSlice<'_>> = parts[first..].iter().take(IOV_MAX).map(|p| IoSlice::new(p)).collect();
        match writev(fd, &slices) {
            Ok(mut written) => {
                while written > 0 {
                    let n = written.min(parts[first].len());
                    parts[first].advance(n);
                    written -= n;
                    if parts[first].is_empty() {
                        first += 1;
                    }
                }
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                // Socket buffer full: let glommio wait for room while it
                // writes the next buffer, then go back to vectored writes.
                stream.write_all(&parts[first]).await?;
                first += 1;
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

fn writev(fd: i32, slices: &[IoSlice<'_>]) -> io::Result<usize> {
    // SAFETY: `IoSlice` is guaranteed ABI-compatible with `struct iovec` on
    // Unix; the slices borrow live buffers for the duration of the call, and
    // `fd` belongs to a stream the caller holds open.
    let n = unsafe { libc::writev(fd, slices.as_ptr().cast::<libc::iovec>(), slices.len() as libc::c_int) };
    if n < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(n as usize)
    }
}
