//! A connection's transport: the plain glommio `TcpStream`, or rustls'
//! `ServerConnection` driven over it on the shard's event loop.
//!
//! TLS bytes move between rustls and the socket through two small
//! adapters: reads through glommio's readiness-aware `poll_read`, writes
//! with one `writev` of rustls' queued records straight on the descriptor
//! (the socket is non-blocking, `send::set_nonblocking`), falling back to
//! glommio's `poll_write` to wait when the socket is full. The reader and
//! writer tasks of a connection share the transport as they share the
//! plain stream; only the writer waits for room to write, so the reader
//! never takes over the writer's wake-up (glommio keeps one waiter per
//! direction).

use std::{
    io::{self, IoSlice, Read, Write},
    pin::Pin,
    task::{ready, Context, Poll},
    time::Duration,
};

use futures_lite::{AsyncRead, AsyncWrite, AsyncWriteExt};
use glommio::net::TcpStream;
use rustls::ServerConnection;

use crate::storage::Chunk;

/// Encrypted bytes rustls may hold for the socket before a write waits
/// (its default is 64 KiB): a 1 MiB fetch goes out in a few `writev`s
/// rather than sixteen.
const TLS_SEND_BUFFER_BYTES: usize = 1 << 20;
/// Bytes of a segment file range read into memory at once to be
/// encrypted: bounds the memory a large cold fetch takes per connection.
const FILE_PIECE_BYTES: usize = 1 << 20;
/// A client that has not finished its handshake by then is closed: a
/// slow-loris handshake holds a connection slot, no more.
pub const HANDSHAKE_DEADLINE: Duration = Duration::from_secs(10);

/// One TLS connection over a glommio socket.
pub struct TlsStream {
    tcp: TcpStream,
    tls: ServerConnection,
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
        match crate::server::send::writev(self.fd, bufs) {
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
    pub fn new(tcp: TcpStream, mut tls: ServerConnection, fd: i32) -> Self {
        tls.set_buffer_limit(Some(TLS_SEND_BUFFER_BYTES));
        Self { tcp, tls, fd }
    }

    pub fn connection(&self) -> &ServerConnection {
        &self.tls
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

    fn poll_handshake(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
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

    /// Completes the handshake, or fails at `HANDSHAKE_DEADLINE`.
    pub async fn handshake(&mut self) -> io::Result<()> {
        let handshake = futures_lite::future::poll_fn(|cx| self.poll_handshake(cx));
        futures_lite::future::or(handshake, async {
            glommio::timer::sleep(HANDSHAKE_DEADLINE).await;
            Err(io::Error::new(
                io::ErrorKind::TimedOut,
                format!("TLS handshake not finished within {} s", HANDSHAKE_DEADLINE.as_secs()),
            ))
        })
        .await
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

/// A connection's byte stream, plain or TLS.
pub enum Transport {
    Plain(TcpStream),
    Tls(Box<TlsStream>),
}

impl AsyncRead for Transport {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut [u8]) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Transport::Plain(s) => Pin::new(s).poll_read(cx, buf),
            Transport::Tls(s) => Pin::new(&mut **s).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for Transport {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Transport::Plain(s) => Pin::new(s).poll_write(cx, buf),
            Transport::Tls(s) => Pin::new(&mut **s).poll_write(cx, buf),
        }
    }
    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Transport::Plain(s) => Pin::new(s).poll_flush(cx),
            Transport::Tls(s) => Pin::new(&mut **s).poll_flush(cx),
        }
    }
    fn poll_close(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Transport::Plain(s) => Pin::new(s).poll_close(cx),
            Transport::Tls(s) => Pin::new(&mut **s).poll_close(cx),
        }
    }
}

/// Writes a response over TLS: buffers are encrypted as they are (rustls
/// writes the records into its send queue: the one copy encryption
/// needs); a segment file range, which the plaintext path sends with
/// `sendfile`, is read into memory piece by piece on the blocking pool
/// and encrypted from there.
pub async fn write_chunks(stream: &mut (impl AsyncWrite + Unpin), parts: Vec<Chunk>) -> io::Result<()> {
    for part in parts {
        match part {
            Chunk::Memory(b) => stream.write_all(&b).await?,
            Chunk::File(range) => {
                let mut skip = 0;
                while skip < range.len {
                    let len = (range.len - skip).min(FILE_PIECE_BYTES);
                    let job = range.clone();
                    let piece = glommio::executor().spawn_blocking(move || job.read(skip, len)).await?;
                    stream.write_all(&piece).await?;
                    skip += len;
                }
            }
        }
    }
    stream.flush().await
}
