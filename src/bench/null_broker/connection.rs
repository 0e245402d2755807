//! One client connection: read what the socket has, answer every whole
//! request in it in order, write the answers together, read again. One
//! request at a time, as Kafka serves a connection; a long-polling Fetch
//! holds the requests behind it, as in Kafka.

use std::{io::IoSlice, rc::Rc};

use bytes::{Buf, Bytes, BytesMut};
use futures_lite::{AsyncReadExt, AsyncWriteExt};
use glommio::net::TcpStream;

use super::{handlers, state::Core};
use crate::limits::NULL_BROKER_REQUEST_BYTES_MAX;

/// Smallest valid request: api key, api version, correlation id.
const FRAME_BYTES_MIN: usize = 8;
/// Bytes asked of the socket at least per read. Small, because the buffer
/// is zeroed before each read (no unsafe code here to skip that); a frame
/// known to be larger is read in one go.
const READ_BYTES_MIN: usize = 16 << 10;
/// Most buffers handed to one `sendmsg` (Linux's IOV_MAX).
const IOV_MAX: usize = 1024;

/// The socket and the answers not yet written.
pub struct Conn {
    stream: TcpStream,
    out: Vec<Bytes>,
}

impl Conn {
    pub fn push(&mut self, chunks: impl IntoIterator<Item = Bytes>) {
        self.out.extend(chunks);
    }

    /// Writes every pending answer: one vectored send while the socket
    /// takes it, glommio's readiness-aware write when it is full.
    pub async fn flush(&mut self) -> std::io::Result<()> {
        let mut parts = std::mem::take(&mut self.out);
        parts.retain(|p| !p.is_empty());
        let mut first = 0;
        while first < parts.len() {
            let slices: Vec<IoSlice<'_>> = parts[first..].iter().take(IOV_MAX).map(|p| IoSlice::new(p)).collect();
            match socket2::SockRef::from(&self.stream).send_vectored(&slices) {
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
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    self.stream.write_all(&parts[first]).await?;
                    first += 1;
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }
}

pub async fn serve(core: Rc<Core>, stream: TcpStream) {
    let peer = stream.peer_addr().map_or_else(|_| "unknown peer".to_string(), |a| a.to_string());
    let _ = stream.set_nodelay(true);
    // Vectored sends must not block the executor when the socket is full.
    if let Err(e) = socket2::SockRef::from(&stream).set_nonblocking(true) {
        log::warn!("null broker: closing connection from {peer}: cannot make its socket non-blocking: {e}");
        return;
    }
    let mut conn = Conn { stream, out: Vec::new() };
    let mut buf = BytesMut::with_capacity(READ_BYTES_MIN);
    loop {
        let need = loop {
            match whole_frame(&buf) {
                Ok(Some(size)) => {
                    let mut frame = buf.split_to(4 + size);
                    frame.advance(4);
                    if let Err(reason) = handlers::handle(&core, frame, &mut conn).await {
                        log::warn!("null broker: closing connection from {peer}: {reason}");
                        return;
                    }
                }
                Ok(None) => break missing(&buf),
                Err(reason) => {
                    log::warn!("null broker: closing connection from {peer}: {reason}");
                    return;
                }
            }
        };
        if let Err(e) = conn.flush().await {
            log::debug!("null broker: connection from {peer}: write failed: {e}");
            return;
        }
        let start = buf.len();
        buf.resize(start + need.max(READ_BYTES_MIN), 0);
        match conn.stream.read(&mut buf[start..]).await {
            Ok(0) | Err(_) => return, // closed by the client
            Ok(n) => buf.truncate(start + n),
        }
    }
}

/// The size of the first frame in `buf` if all of it is there.
fn whole_frame(buf: &[u8]) -> Result<Option<usize>, String> {
    if buf.len() < 4 {
        return Ok(None);
    }
    let size = i32::from_be_bytes([buf[0], buf[1], buf[2], buf[3]]);
    if size < FRAME_BYTES_MIN as i32 || size as usize > NULL_BROKER_REQUEST_BYTES_MAX {
        return Err(format!("request size {size} outside [{FRAME_BYTES_MIN}, {NULL_BROKER_REQUEST_BYTES_MAX}]"));
    }
    Ok((buf.len() >= 4 + size as usize).then_some(size as usize))
}

/// Bytes still missing for the first frame in `buf` (0 if unknown).
fn missing(buf: &[u8]) -> usize {
    if buf.len() < 4 {
        return 0;
    }
    let size = i32::from_be_bytes([buf[0], buf[1], buf[2], buf[3]]) as usize;
    (4 + size).saturating_sub(buf.len())
}
