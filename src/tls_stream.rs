//! rustls driven over a glommio `TcpStream` on the calling thread's
//! executor: the broker's SSL listeners (`server::tls`) and `bench --tls`'s
//! load cores both use it, with a `ServerConnection` or a
//! `ClientConnection`.
//!
//! TLS bytes move between rustls and the socket through a small adapter:
//! reads through glommio's readiness-aware `poll_read`, writes with one
//! `writev` of rustls' queued records straight on the descriptor (the
//! socket must be non-blocking), falling back to glommio's `poll_write` to
//! wait when the socket is full. A connection's reader and writer tasks
//! may share one `TlsStream` (each poll borrows it briefly); only the
//! writer waits for room to write, so the reader never takes over the
//! writer's wake-up (glommio keeps one waiter per direction).

#![allow(unsafe_code)]

use std::{
    io::{self, IoSlice, Read, Write},
    pin::Pin,
    task::{ready, Context, Poll},
};

use futures_lite::{AsyncRead, AsyncWrite};
use glommio::net::TcpStream;
use rustls::Connection;

/// Encrypted bytes rustls may hold for the socket before a write waits
/// (its default is 64 KiB): a 1 MiB fetch goes out in a few `writev`s
/// rather than sixteen.
const TLS_SEND_BUFFER_BYTES: usize = 1 << 20;

/// One TLS connection over a glommio socket.
pub struct TlsStream {
    tcp: TcpStream,
    tls: Connection,
    fd: i32,
}

/// The socket seen by rustls from a poll: `WouldBlock` stands for
/// `Pending` (the waker is registered by glommio).
struct PollIo<'a, 'b> {
    tcp: &'a mut TcpStream,
    cx: &'a mut Context<'b>,
    fd: i32,
    /// Whether a full socket may register the waker (the writer's side).
    may_wait: bool,
}

impl Read for PollIo<'_, '_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match Pin::new(&mut *self.tcp).poll_read(self.cx, buf) {
            Poll::Ready(r) => r,
            Poll::Pending => Err(io::ErrorKind::WouldBlock.into()),
        }
    }
}

impl Write for PollIo<'_, '_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.write_vectored(&[IoSlice::new(buf)])
    }

    fn write_vectored(&mut self, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
        match writev(self.fd, bufs) {
            Err(e) if e.kind() == io::ErrorKind::WouldBlock && self.may_wait => {
                let first = bufs.iter().find(|b| !b.is_empty()).map_or(&[][..], |b| &b[..]);
                match Pin::new(&mut *self.tcp).poll_write(self.cx, first) {
                    Poll::Ready(r) => r,
                    Poll::Pending => Err(io::ErrorKind::WouldBlock.into()),
                }
            }
            other => other,
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

fn invalid(e: rustls::Error) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, format!("TLS: {e}"))
}

impl TlsStream {
    pub fn new(tcp: TcpStream, tls: impl Into<Connection>, fd: i32) -> Self {
        let mut tls = tls.into();
        tls.set_buffer_limit(Some(TLS_SEND_BUFFER_BYTES));
        Self { tcp, tls, fd }
    }

    pub fn connection(&self) -> &Connection {
        &self.tls
    }

    /// Shuts the socket down both ways now (the peer sees the end).
    pub fn shutdown_now(&self) {
        let _ = socket2::SockRef::from(&self.tcp).shutdown(std::net::Shutdown::Both);
    }

    /// Writes the records rustls has queued; `may_wait` as in `PollIo`.
    fn poll_send(&mut self, cx: &mut Context<'_>, may_wait: bool) -> Poll<io::Result<()>> {
        while self.tls.wants_write() {
            let mut io = PollIo { tcp: &mut self.tcp, cx, fd: self.fd, may_wait };
            match self.tls.write_tls(&mut io) {
                Ok(0) => return Poll::Ready(Err(io::ErrorKind::WriteZero.into())),
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Poll::Pending,
                Err(e) => return Poll::Ready(Err(e)),
            }
        }
        Poll::Ready(Ok(()))
    }

    /// Reads TLS bytes from the socket into rustls and processes them.
    /// `Ok(0)`: the peer closed its side.
    fn poll_receive(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<usize>> {
        let mut io = PollIo { tcp: &mut self.tcp, cx, fd: self.fd, may_wait: false };
        let n = match self.tls.read_tls(&mut io) {
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Poll::Pending,
            Err(e) => return Poll::Ready(Err(e)),
        };
        if let Err(e) = self.tls.process_new_packets() {
            // rustls queued an alert saying why; send it if the socket
            // takes it now, then the connection closes.
            let _ = self.poll_send(cx, false);
            return Poll::Ready(Err(invalid(e)));
        }
        Poll::Ready(Ok(n))
    }

    pub fn poll_handshake(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        loop {
            ready!(self.poll_send(cx, true))?;
            if !self.tls.is_handshaking() {
                return Poll::Ready(Ok(()));
            }
            if ready!(self.poll_receive(cx))? == 0 {
                return Poll::Ready(Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "closed by the client during the TLS handshake",
                )));
            }
        }
    }
}

impl AsyncRead for TlsStream {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut [u8]) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        loop {
            match this.tls.reader().read(buf) {
                // 0: the client sent close_notify.
                Ok(n) => return Poll::Ready(Ok(n)),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                // UnexpectedEof: the socket closed without close_notify.
                Err(e) => return Poll::Ready(Err(e)),
            }
            // Anything reading queued (a KeyUpdate's answer) goes out if
            // the socket has room; otherwise with the next response.
            let _ = this.poll_send(cx, false);
            ready!(this.poll_receive(cx))?;
        }
    }
}

impl AsyncWrite for TlsStream {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let mut taken = 0;
        loop {
            taken += this.tls.writer().write(&buf[taken..])?;
            match this.poll_send(cx, true) {
                Poll::Ready(Ok(())) if taken < buf.len() => {}
                Poll::Ready(Ok(())) => return Poll::Ready(Ok(taken)),
                Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                Poll::Pending if taken == 0 => return Poll::Pending,
                Poll::Pending => return Poll::Ready(Ok(taken)),
            }
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.get_mut().poll_send(cx, true)
    }

    fn poll_close(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        this.tls.send_close_notify();
        ready!(this.poll_send(cx, true))?;
        Pin::new(&mut this.tcp).poll_close(cx)
    }
}

/// `writev(2)` on a non-blocking socket.
pub(crate) fn writev(fd: i32, slices: &[IoSlice<'_>]) -> io::Result<usize> {
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
