//! The same framing as the blocking client, for the load cores'
//! non-blocking sockets (glommio's, or any `futures-lite` stream): only the
//! reads and writes await; sizes and decoding are `protocol::client`'s.

use std::{
    cell::RefCell,
    io,
    pin::Pin,
    rc::Rc,
    task::{Context, Poll},
};

use bytes::Bytes;
use futures_lite::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use kafka_protocol::{messages::ApiKey, protocol::Decodable};
use rustls::StreamOwned;

use super::{tls::Socket, ClientError};
use crate::protocol::client::{decode_response, response_len, Response, SIZE_PREFIX_BYTES};
use crate::tls_stream::TlsStream;

/// Writes a frame built by `protocol::client::request_frame` for `api` at
/// `version` (they name the request in errors).
pub async fn write_frame(
    stream: &mut (impl AsyncWrite + Unpin),
    api: ApiKey,
    version: i16,
    frame: &[u8],
) -> Result<(), ClientError> {
    stream.write_all(frame).await.map_err(|source| ClientError::Io { api, version, op: "sending", source })
}

/// Reads and decodes the answer to a request for `api` at `version`.
pub async fn read_response<R: Decodable>(
    stream: &mut (impl AsyncRead + Unpin),
    api: ApiKey,
    version: i16,
) -> Result<Response<R>, ClientError> {
    let io = |source| ClientError::Io { api, version, op: "reading the answer to", source };
    let mut prefix = [0u8; SIZE_PREFIX_BYTES];
    stream.read_exact(&mut prefix).await.map_err(io)?;
    let mut frame = vec![0u8; response_len(api, version, prefix)?];
    stream.read_exact(&mut frame).await.map_err(io)?;
    Ok(decode_response(api, version, Bytes::from(frame))?)
}

/// Hands a socket connected with `client::connect` to the executor of the
/// thread that calls this (call it on the load core).
pub fn to_glommio(stream: std::net::TcpStream) -> glommio::net::TcpStream {
    glommio::net::TcpStream::from(socket2::Socket::from(stream))
}

/// A load core's connection, plain or TLS. The two halves `split` returns
/// share one TLS session (one task writes, the other reads; each poll
/// borrows it briefly), as the plain halves share one socket.
pub enum AsyncStream {
    Plain(glommio::net::TcpStream),
    Tls(Rc<RefCell<TlsStream>>),
}

/// Hands a socket opened with `client::tls::open` to this thread's
/// executor, as a writer half and a reader half.
pub fn split(socket: Socket) -> io::Result<(AsyncStream, AsyncStream)> {
    match socket {
        Socket::Plain(s) => {
            let reader = s.try_clone()?;
            Ok((AsyncStream::Plain(to_glommio(s)), AsyncStream::Plain(to_glommio(reader))))
        }
        tls => {
            let one = into_async(tls)?;
            let AsyncStream::Tls(shared) = &one else { unreachable!("a TLS socket stays TLS") };
            let other = AsyncStream::Tls(shared.clone());
            Ok((one, other))
        }
    }
}

/// Hands a socket opened with `client::tls::open` to this thread's executor.
pub fn into_async(socket: Socket) -> io::Result<AsyncStream> {
    match socket {
        Socket::Plain(s) => Ok(AsyncStream::Plain(to_glommio(s))),
        Socket::Tls(s) => {
            let StreamOwned { conn, sock } = *s;
            // `TlsStream` writes with `writev` on the descriptor directly.
            sock.set_nonblocking(true)?;
            let fd = std::os::fd::AsRawFd::as_raw_fd(&sock);
            Ok(AsyncStream::Tls(Rc::new(RefCell::new(TlsStream::new(to_glommio(sock), conn, fd)))))
        }
    }
}

impl AsyncStream {
    /// Ends the connection both ways now.
    pub async fn shutdown(&self) {
        match self {
            AsyncStream::Plain(s) => {
                let _ = s.shutdown(std::net::Shutdown::Both).await;
            }
            AsyncStream::Tls(s) => s.borrow().shutdown_now(),
        }
    }
}

impl AsyncRead for AsyncStream {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut [u8]) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            AsyncStream::Plain(s) => Pin::new(s).poll_read(cx, buf),
            AsyncStream::Tls(s) => Pin::new(&mut *s.borrow_mut()).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for AsyncStream {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            AsyncStream::Plain(s) => Pin::new(s).poll_write(cx, buf),
            AsyncStream::Tls(s) => Pin::new(&mut *s.borrow_mut()).poll_write(cx, buf),
        }
    }
    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            AsyncStream::Plain(s) => Pin::new(s).poll_flush(cx),
            AsyncStream::Tls(s) => Pin::new(&mut *s.borrow_mut()).poll_flush(cx),
        }
    }
    fn poll_close(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            AsyncStream::Plain(s) => Pin::new(s).poll_close(cx),
            AsyncStream::Tls(s) => Pin::new(&mut *s.borrow_mut()).poll_close(cx),
        }
    }
}
