//! Stored batches on their way to a client, without a copy: either buffers
//! already in memory (the tail cache, or a direct read of the active
//! segment) or a byte range of a sealed segment file, which the server sends
//! with `sendfile(2)` straight from the page cache.
//!
//! Why sealed segments only: the active segment is still written with
//! O_DIRECT, and mixing page-cache reads with direct writes on the same
//! pages is where Linux's coherence is weakest. A sealed segment is never
//! written again, so its page-cache view is exact.

use std::{fs::File, io, os::unix::fs::FileExt, path::PathBuf, sync::Arc};

use bytes::Bytes;

/// Whole record batches, as stored.
#[derive(Debug, Clone)]
pub enum Chunk {
    Memory(Bytes),
    File(FileRange),
}

/// `len` bytes at `pos` of a sealed segment, opened without O_DIRECT. The
/// open descriptor keeps the bytes readable even if retention removes the
/// file's name meanwhile.
#[derive(Debug, Clone)]
pub struct FileRange {
    pub file: Arc<File>,
    pub path: Arc<PathBuf>,
    pub pos: u64,
    pub len: usize,
}

impl Chunk {
    pub fn len(&self) -> usize {
        match self {
            Chunk::Memory(b) => b.len(),
            Chunk::File(r) => r.len,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The bytes in memory, reading a file range on glommio's blocking pool
    /// (the broker's own readers of stored records: group replay, producer
    /// state rebuild).
    pub async fn load(&self) -> io::Result<Bytes> {
        match self {
            Chunk::Memory(b) => Ok(b.clone()),
            Chunk::File(r) => {
                let r = r.clone();
                glommio::executor().spawn_blocking(move || r.read(0, r.len).map(Bytes::from)).await
            }
        }
    }

    /// The bytes in memory: a clone of the buffer, or a blocking read of the
    /// range. For tests and tools; the fetch path never calls it.
    pub fn to_bytes(&self) -> io::Result<Bytes> {
        match self {
            Chunk::Memory(b) => Ok(b.clone()),
            Chunk::File(r) => r.read(0, r.len).map(Bytes::from),
        }
    }
}

impl FileRange {
    /// Reads `len` bytes starting `skip` bytes into the range (blocking).
    pub fn read(&self, skip: usize, len: usize) -> io::Result<Vec<u8>> {
        let mut out = vec![0u8; len];
        self.file.read_exact_at(&mut out, self.pos + skip as u64).map_err(|e| {
            io::Error::new(e.kind(), format!("{}: read {len} bytes at {}: {e}", self.path.display(), self.pos))
        })?;
        Ok(out)
    }
}

impl From<Bytes> for Chunk {
    fn from(b: Bytes) -> Self {
        Chunk::Memory(b)
    }
}
