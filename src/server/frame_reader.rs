//! A connection's reads: request frames taken from one small buffer per
//! connection, filled by one `recv` at a time.
//!
//! Read straight from the socket, each request cost three `recv` calls
//! (its length, its body, and the one that found the socket empty) and a
//! zeroed allocation for its body. Through the buffer, one `recv` takes
//! the length, the body and any requests pipelined behind it, and a body
//! is copied once into an allocation of its exact size. A body larger
//! than the buffer is read into its own allocation directly.

use bytes::{Bytes, BytesMut};
use futures_lite::{AsyncRead, AsyncReadExt};
use std::io;

/// Bytes buffered per connection: a typical produce request of a latency
/// workload and its length in one `recv`. Kept for the connection's life
/// (10,000 connections: 80 MB, a fraction of their kernel socket buffers).
pub(super) const READ_BUFFER_BYTES: usize = 8 << 10;

pub(super) struct FrameReader {
    buf: Box<[u8]>,
    /// The bytes received and not yet taken: `buf[start..end]`.
    start: usize,
    end: usize,
}

impl FrameReader {
    pub(super) fn new() -> Self {
        Self { buf: vec![0u8; READ_BUFFER_BYTES].into_boxed_slice(), start: 0, end: 0 }
    }

    /// Fills `out` whole, from the buffer first. An error if the peer closes
    /// before.
    pub(super) async fn read_exact<R: AsyncRead + Unpin>(&mut self, stream: &mut R, out: &mut [u8]) -> io::Result<()> {
        let mut filled = self.take(out);
        while filled < out.len() {
            if out.len() - filled >= self.buf.len() {
                return stream.read_exact(&mut out[filled..]).await;
            }
            self.fill(stream).await?;
            filled += self.take(&mut out[filled..]);
        }
        Ok(())
    }

    /// The next `size` bytes, in an allocation of their own.
    pub(super) async fn frame<R: AsyncRead + Unpin>(&mut self, stream: &mut R, size: usize) -> io::Result<Bytes> {
        let mut frame = BytesMut::with_capacity(size);
        loop {
            let n = (self.end - self.start).min(size - frame.len());
            frame.extend_from_slice(&self.buf[self.start..self.start + n]);
            self.start += n;
            let rest = size - frame.len();
            if rest == 0 {
                return Ok(frame.freeze());
            }
            if rest >= self.buf.len() {
                let at = frame.len();
                frame.resize(size, 0);
                stream.read_exact(&mut frame[at..]).await?;
                return Ok(frame.freeze());
            }
            self.fill(stream).await?;
        }
    }

    /// Copies what the buffer holds into `out`, up to its length.
    fn take(&mut self, out: &mut [u8]) -> usize {
        let n = (self.end - self.start).min(out.len());
        out[..n].copy_from_slice(&self.buf[self.start..self.start + n]);
        self.start += n;
        n
    }

    /// One `recv` into the empty buffer.
    async fn fill<R: AsyncRead + Unpin>(&mut self, stream: &mut R) -> io::Result<()> {
        debug_assert_eq!(self.start, self.end, "fill only an empty buffer");
        let got = stream.read(&mut self.buf).await?;
        if got == 0 {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        (self.start, self.end) = (0, got);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures_lite::io::Cursor;
    use std::{
        pin::Pin,
        task::{Context, Poll},
    };

    /// A stream that hands out at most `step` bytes per read, as a socket
    /// delivers segments.
    struct Trickle {
        data: Cursor<Vec<u8>>,
        step: usize,
        reads: usize,
    }

    impl AsyncRead for Trickle {
        fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut [u8]) -> Poll<io::Result<usize>> {
            self.reads += 1;
            let step = self.step.min(buf.len());
            Pin::new(&mut self.data).poll_read(cx, &mut buf[..step])
        }
    }

    /// Frames of the given sizes, each with its length first and bytes
    /// that name its index and position.
    fn frames(sizes: &[usize]) -> Vec<u8> {
        let mut out = Vec::new();
        for (i, &size) in sizes.iter().enumerate() {
            out.extend_from_slice(&(size as i32).to_be_bytes());
            out.extend((0..size).map(|p| (i * 31 + p * 7) as u8));
        }
        out
    }

    fn read_all(sizes: &[usize], step: usize) -> (Vec<Bytes>, usize) {
        let mut stream = Trickle { data: Cursor::new(frames(sizes)), step, reads: 0 };
        let mut reader = FrameReader::new();
        let mut got = Vec::new();
        futures_lite::future::block_on(async {
            loop {
                let mut len = [0u8; 4];
                if reader.read_exact(&mut stream, &mut len).await.is_err() {
                    break;
                }
                let size = i32::from_be_bytes(len) as usize;
                got.push(reader.frame(&mut stream, size).await.expect("a whole frame"));
            }
        });
        (got, stream.reads)
    }

    #[test]
    fn frames_of_every_size_come_back_whole_and_in_order_however_the_bytes_arrive() {
        let sizes = [0, 1, 4, 100, READ_BUFFER_BYTES - 4, READ_BUFFER_BYTES, READ_BUFFER_BYTES + 1, 70_000, 3, 5000];
        let want = frames(&sizes);
        for step in [1, 3, 4, 1000, READ_BUFFER_BYTES, 1 << 20] {
            let (got, _) = read_all(&sizes, step);
            assert_eq!(got.len(), sizes.len(), "step {step}: every frame read");
            let mut at = 0;
            for (i, frame) in got.iter().enumerate() {
                at += 4;
                assert_eq!(&frame[..], &want[at..at + sizes[i]], "step {step}: frame {i}");
                at += sizes[i];
            }
        }
    }

    #[test]
    fn pipelined_small_frames_take_one_read_per_buffer() {
        // 20 frames of 300 B (6,080 B with their lengths) arrive together.
        let (got, reads) = read_all(&[300; 20], 1 << 20);
        assert_eq!(got.len(), 20);
        assert!(reads <= 3, "{reads} reads for 20 pipelined frames: one fills the buffer, one finds the end");
    }

    #[test]
    fn a_peer_that_closes_mid_frame_is_an_error() {
        let mut bytes = frames(&[100]);
        bytes.truncate(50);
        let mut stream = Trickle { data: Cursor::new(bytes), step: 1 << 20, reads: 0 };
        let mut reader = FrameReader::new();
        futures_lite::future::block_on(async {
            let mut len = [0u8; 4];
            reader.read_exact(&mut stream, &mut len).await.unwrap();
            let err = reader.frame(&mut stream, 100).await.unwrap_err();
            assert_eq!(err.kind(), io::ErrorKind::UnexpectedEof);
        });
    }
}
