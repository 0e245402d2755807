//! Replacing sealed segments on disk, crash-safely: the protocol compaction
//! uses to swap cleaned segments in, and recovery uses to finish a swap a
//! crash interrupted.
//!
//! Replacing segments survives a crash at any point: the merged file is
//! written and synced as `.tmp` (removed by recovery), renamed to
//! `<first>-<end>.swap` (complete from here on), the old segments are
//! deleted, and the swap file is renamed to `<first>.log`. Recovery finishes
//! any `.swap` it finds (`finish_swaps`) before reading segments.

use std::path::{Path, PathBuf};

use crate::storage::{
    error::{PartitionName, StorageError},
    file, segment,
};

/// The swap itself (blocking; see the module documentation for why each
/// step is where it is). `merged`: the synced `.tmp` file and its index
/// files' contents, or `None` when the group is simply removed.
pub fn swap_in(
    dir: &Path,
    name: &PartitionName,
    base: i64,
    end: i64,
    bases: &[i64],
    merged: Option<(PathBuf, Vec<u8>, Vec<u8>)>,
) -> Result<(), StorageError> {
    let io = |path: &Path, op, e| StorageError::from_io(name, path, op, e);
    let swap = swap_path(dir, base, end);
    if let Some((tmp, _, _)) = &merged {
        std::fs::rename(tmp, &swap).map_err(|e| io(&swap, "rename", e))?;
        file::sync_dir(dir).map_err(|e| io(dir, "sync directory", e))?;
    }
    for &b in bases {
        remove_segment(dir, b).map_err(|e| io(dir, "remove cleaned segment", e))?;
    }
    file::sync_dir(dir).map_err(|e| io(dir, "sync directory", e))?;
    if let Some((_, offsets, times)) = merged {
        let log = segment::segment_path(dir, base, segment::LOG_SUFFIX);
        for (suffix, bytes) in [(segment::INDEX_SUFFIX, offsets), (segment::TIME_INDEX_SUFFIX, times)] {
            let path = log.with_extension(suffix);
            file::write_atomically(&path, &bytes).map_err(|e| io(&path, "write index", e))?;
        }
        std::fs::rename(&swap, &log).map_err(|e| io(&log, "rename", e))?;
        file::sync_dir(dir).map_err(|e| io(dir, "sync directory", e))?;
    }
    Ok(())
}

fn swap_path(dir: &Path, base: i64, end: i64) -> PathBuf {
    dir.join(format!("{base:020}-{end:020}.swap"))
}

fn remove_segment(dir: &Path, base: i64) -> std::io::Result<()> {
    for suffix in [segment::INDEX_SUFFIX, segment::TIME_INDEX_SUFFIX, segment::LOG_SUFFIX] {
        match std::fs::remove_file(segment::segment_path(dir, base, suffix)) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e),
            _ => {}
        }
    }
    Ok(())
}

/// Finishes replacements a crash interrupted: for each `<base>-<end>.swap`
/// (a complete merged segment), removes the segments it replaces (bases in
/// `[base, end)`, with their indices) and renames it to `<base>.log`, whose
/// index recovery then rebuilds. Called before segments are listed.
pub fn finish_swaps(dir: &Path) -> std::io::Result<usize> {
    let mut done = 0;
    let mut swaps = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let name = entry?.file_name().to_string_lossy().into_owned();
        let Some(stem) = name.strip_suffix(".swap") else { continue };
        let Some((b, e)) = stem.split_once('-') else { continue };
        if let (Ok(b), Ok(e)) = (b.parse::<i64>(), e.parse::<i64>()) {
            swaps.push((b, e));
        }
    }
    for (base, end) in swaps {
        for entry in std::fs::read_dir(dir)? {
            let name = entry?.file_name().to_string_lossy().into_owned();
            if let Some(b) = segment::parse_segment_name(&name).filter(|b| (base..end).contains(b)) {
                remove_segment(dir, b)?;
            }
        }
        remove_segment(dir, base)?;
        std::fs::rename(swap_path(dir, base, end), segment::segment_path(dir, base, segment::LOG_SUFFIX))?;
        file::sync_dir(dir)?;
        done += 1;
    }
    Ok(done)
}
