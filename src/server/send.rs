//! Writing a response made of chunks without copying stored bytes in user
//! space: runs of in-memory buffers go out with one `writev`, ranges of
//! sealed segment files with `sendfile(2)` from the page cache (measured
//! twice as fast as a direct read + write for cold data; see
//! `perf/README.md`). glommio's stream writes one slice at a time and knows
//! nothing of files, so this reaches for the socket's descriptor; when the
//! socket buffer is full it falls back to glommio's readiness-aware write.

#![allow(unsafe_code)]

use std::{
    io::{self, IoSlice},
    os::fd::AsRawFd,
};

use bytes::{Buf, Bytes};
use futures_lite::{AsyncWrite, AsyncWriteExt};

use crate::storage::{Chunk, FileRange};

/// Most buffers handed to one `writev` (Linux's IOV_MAX).
const IOV_MAX: usize = 1024;

/// How long a `sendfile` job waits for room in the socket before handing
/// the rest back to the shard, which waits without holding a pool thread.
const SOCKET_WAIT_MS: i32 = 20;

/// Bytes of a file range copied through glommio's write when the socket
/// stayed full: enough to wait for the client, small enough to bound memory.
const FALLBACK_PIECE: usize = 256 << 10;

/// Puts the socket in non-blocking mode, which the writes here rely on:
/// glommio leaves accepted sockets blocking (its own sends pass
/// MSG_DONTWAIT or go through io_uring, which polls either way), and a
/// blocking `writev` into a full socket would stall the whole shard.
pub fn set_nonblocking(fd: i32) -> io::Result<()> {
    // SAFETY: fcntl on a descriptor the caller holds open.
    let flags = unsafe { libc::fcntl(fd, libc::F_GETFL) };
    if flags < 0 || unsafe { libc::fcntl(fd, libc::F_SETFL, flags | libc::O_NONBLOCK) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Writes every chunk, in order, to the socket `fd`, which `stream` wraps.
pub async fn write_all(fd: i32, stream: &mut (impl AsyncWrite + Unpin), parts: Vec<Chunk>) -> io::Result<()> {
    let mut memory: Vec<Bytes> = Vec::new();
    for part in parts {
        match part {
            Chunk::Memory(b) => memory.push(b),
            Chunk::File(range) => {
                write_buffers(fd, stream, std::mem::take(&mut memory)).await?;
                send_range(fd, stream, range).await?;
            }
        }
    }
    write_buffers(fd, stream, memory).await
}

/// Sends a file range with `sendfile` on the blocking pool (a page-cache
/// miss reads the disk, which must not stall the shard).
async fn send_range(fd: i32, stream: &mut (impl AsyncWrite + Unpin), mut range: FileRange) -> io::Result<()> {
    while range.len > 0 {
        // The job gets its own descriptor for the socket, so it can never
        // write to a reused descriptor number if this connection closes.
        let socket = dup(fd)?;
        let job = range.clone();
        let sent = glommio::executor().spawn_blocking(move || sendfile_all(&socket, &job)).await?;
        range.pos += sent as u64;
        range.len -= sent;
        if range.len > 0 {
            // The client is not reading: copy a piece and let glommio wait
            // for room, then try sendfile again.
            log::debug!("socket full: {} bytes of {} left, waiting for the client", range.len, range.path.display());
            let piece_len = range.len.min(FALLBACK_PIECE);
            let job = range.clone();
            let piece = glommio::executor().spawn_blocking(move || job.read(0, piece_len)).await?;
            stream.write_all(&piece).await?;
            range.pos += piece_len as u64;
            range.len -= piece_len;
        }
    }
    Ok(())
}

/// Sends as much of `range` as the socket takes, waiting up to
/// `SOCKET_WAIT_MS` for room each time it is full. Returns the bytes sent.
fn sendfile_all(socket: &std::os::fd::OwnedFd, range: &FileRange) -> io::Result<usize> {
    let mut offset = range.pos as libc::off_t;
    let mut sent = 0usize;
    while sent < range.len {
        // SAFETY: both descriptors are open for the duration of the call;
        // `offset` is a valid pointer the kernel advances.
        let n = unsafe { libc::sendfile(socket.as_raw_fd(), range.file.as_raw_fd(), &mut offset, range.len - sent) };
        if n > 0 {
            sent += n as usize;
            continue;
        }
        if n == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                format!("{}: ends before byte {}", range.path.display(), range.pos as usize + range.len),
            ));
        }
        let e = io::Error::last_os_error();
        match e.kind() {
            io::ErrorKind::Interrupted => {}
            io::ErrorKind::WouldBlock => {
                if !wait_writable(socket.as_raw_fd())? {
                    break;
                }
            }
            _ => return Err(e),
        }
    }
    Ok(sent)
}

/// Waits up to `SOCKET_WAIT_MS` for room in the socket.
fn wait_writable(fd: i32) -> io::Result<bool> {
    let mut pfd = libc::pollfd { fd, events: libc::POLLOUT, revents: 0 };
    // SAFETY: one valid pollfd for the duration of the call.
    let n = unsafe { libc::poll(&mut pfd, 1, SOCKET_WAIT_MS) };
    match n {
        n if n > 0 => Ok(true),
        0 => Ok(false),
        _ => {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                Ok(true)
            } else {
                Err(e)
            }
        }
    }
}

fn dup(fd: i32) -> io::Result<std::os::fd::OwnedFd> {
    // SAFETY: `fd` belongs to a stream the caller holds open; the borrow
    // lasts only for the duplication, which yields a descriptor we own.
    let borrowed = unsafe { std::os::fd::BorrowedFd::borrow_raw(fd) };
    borrowed.try_clone_to_owned()
}

/// Writes buffers with `writev`.
async fn write_buffers(fd: i32, stream: &mut (impl AsyncWrite + Unpin), mut parts: Vec<Bytes>) -> io::Result<()> {
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
    crate::tls_stream::writev(fd, slices)
}
