//! A connection's transport: the plain glommio `TcpStream`, or rustls'
//! `ServerConnection` driven over it on the shard's event loop
//! (`crate::tls_stream`; the socket is non-blocking,
//! `send::set_nonblocking`). The reader and writer tasks of a connection
//! share the transport as they share the plain stream.

use std::{
    io,
    pin::Pin,
    task::{Context, Poll},
    time::Duration,
};

use futures_lite::{AsyncRead, AsyncWrite, AsyncWriteExt};
use glommio::net::TcpStream;

use crate::storage::Chunk;

/// Bytes of a segment file range read into memory at once to be
/// encrypted: bounds the memory a large cold fetch takes per connection.
const FILE_PIECE_BYTES: usize = 1 << 20;
/// A client that has not finished its handshake by then is closed: a
/// slow-loris handshake holds a connection slot, no more.
pub const HANDSHAKE_DEADLINE: Duration = Duration::from_secs(10);

pub use crate::tls_stream::TlsStream;

/// Completes the handshake, or fails at `HANDSHAKE_DEADLINE`.
pub async fn handshake(stream: &mut TlsStream) -> io::Result<()> {
    let handshake = futures_lite::future::poll_fn(|cx| stream.poll_handshake(cx));
    futures_lite::future::or(handshake, async {
        glommio::timer::sleep(HANDSHAKE_DEADLINE).await;
        Err(io::Error::new(
            io::ErrorKind::TimedOut,
            format!("TLS handshake not finished within {} s", HANDSHAKE_DEADLINE.as_secs()),
        ))
    })
    .await
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
