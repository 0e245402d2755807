//! Reading the shard journals at start-up (`storage::journal`'s format):
//! the batches each partition may need to append, and the files to remove
//! once every shard is up.

use std::{
    collections::HashMap,
    io,
    path::{Path, PathBuf},
    sync::atomic::{AtomicBool, Ordering},
};

use bytes::Bytes;

use super::{align_up, parse_name, JournalKey, DIR, HEADER, MAGIC};
use crate::{protocol::record_batch::crc32c, storage::file};

/// Every journal file found at start-up, read: the batches each partition
/// may need to append, and the files to remove once every shard is up.
#[derive(Debug, Default)]
pub struct Replay {
    /// The generation this run's journals use.
    pub generation: u32,
    batches: HashMap<JournalKey, Vec<Bytes>>,
    files: Vec<PathBuf>,
    /// Set when a partition that had batches here could not be opened: the
    /// files then stay for the next start.
    keep: AtomicBool,
}

impl Replay {
    /// `key`'s batches, oldest first.
    pub fn batches(&self, key: &JournalKey) -> &[Bytes] {
        self.batches.get(key).map_or(&[], Vec::as_slice)
    }

    pub fn entries(&self) -> usize {
        self.batches.values().map(Vec::len).sum()
    }

    pub fn keep_files(&self) {
        self.keep.store(true, Ordering::Relaxed);
    }

    /// Removes the files read, unless a partition asked to keep them.
    pub fn finish(&self, data_dir: &Path) -> io::Result<usize> {
        if self.keep.load(Ordering::Relaxed) || self.files.is_empty() {
            return Ok(0);
        }
        for f in &self.files {
            std::fs::remove_file(f)?;
        }
        file::sync_dir(&data_dir.join(DIR))?;
        Ok(self.files.len())
    }
}

/// Reads every journal file in `data_dir` (see the module's format).
pub fn read_all(data_dir: &Path) -> io::Result<Replay> {
    let dir = data_dir.join(DIR);
    let mut found = Vec::new();
    match std::fs::read_dir(&dir) {
        Ok(entries) => {
            for e in entries {
                let e = e?;
                if let Some(id) = parse_name(&e.file_name().to_string_lossy()) {
                    found.push((id, e.path()));
                }
            }
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => return Err(e),
    }
    found.sort();
    let mut replay = Replay { generation: found.last().map_or(0, |((g, _, _), _)| g + 1), ..Replay::default() };
    for ((generation, _, number), path) in found {
        let bytes = Bytes::from(
            std::fs::read(&path).map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", path.display())))?,
        );
        for (key, batch) in decode_file(&bytes, generation, number) {
            replay.batches.entry(key).or_default().push(batch);
        }
        replay.files.push(path);
    }
    Ok(replay)
}

/// The entries of one file, up to the first that is not whole and its own.
pub(super) fn decode_file(bytes: &Bytes, generation: u32, number: u32) -> Vec<(JournalKey, Bytes)> {
    let mut out = Vec::new();
    let mut pos = 0usize;
    let word = |at: usize| u32::from_le_bytes(bytes[at..at + 4].try_into().expect("4 bytes"));
    while pos + HEADER <= bytes.len() {
        if word(pos) != MAGIC {
            // Padding ends a write; a block that does not start an entry
            // ends the file.
            let next = align_up(pos as u64) as usize;
            if next == pos {
                break;
            }
            pos = next;
            continue;
        }
        let len = HEADER + word(pos + 4) as usize;
        if pos + len > bytes.len()
            || word(pos + 12) != generation
            || word(pos + 16) != number
            || crc32c(&bytes[pos + 12..pos + len]) != word(pos + 8)
        {
            break;
        }
        let key = JournalKey {
            topic_id: bytes[pos + 20..pos + 36].try_into().expect("16 bytes"),
            partition: i32::from_le_bytes(bytes[pos + 36..pos + 40].try_into().expect("4 bytes")),
        };
        out.push((key, bytes.slice(pos + HEADER..pos + len)));
        pos += len;
    }
    out
}
