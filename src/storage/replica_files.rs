//! The files a replicated partition keeps beside its segments, and the cut
//! a follower makes when its log ran past its leader's.
//!
//! `leader-epochs` lists each leader epoch the log holds records of with
//! the offset its records start at, one `epoch offset` line each (Kafka's
//! leader-epoch checkpoint). A follower asks its leader where its own last
//! epoch ends there (OffsetForLeaderEpoch) and cuts its log to that offset
//! when it holds more: records a deposed leader wrote that the new leader
//! never had. Every acknowledged record is below the cut, since the new
//! leader was in sync.

use std::{fs::File, io, os::unix::fs::FileExt, path::Path};

use crate::{
    protocol::record_batch::{BatchHeader, HEADER_BYTES},
    storage::{file, producers, recovery, segment, txn_index},
};

pub const EPOCHS_FILE: &str = "leader-epochs";

/// (epoch, first offset) pairs, in order of both.
pub type Epochs = Vec<(i32, i64)>;

/// The epochs file of `dir`; empty when there is none or it cannot be read
/// (a log written before replication, all of it epoch 0).
pub fn load_epochs(dir: &Path) -> Epochs {
    let Ok(text) = std::fs::read_to_string(dir.join(EPOCHS_FILE)) else { return Vec::new() };
    let mut out: Epochs = Vec::new();
    for line in text.lines() {
        let mut parts = line.split_whitespace();
        let (Some(Ok(epoch)), Some(Ok(offset))) =
            (parts.next().map(str::parse::<i32>), parts.next().map(str::parse::<i64>))
        else {
            log::warn!("{}: unreadable line {line:?}; the rest is ignored", dir.join(EPOCHS_FILE).display());
            break;
        };
        if out.last().is_some_and(|&(e, o)| epoch <= e || offset < o) {
            break;
        }
        out.push((epoch, offset));
    }
    out
}

pub fn save_epochs(dir: &Path, epochs: &[(i32, i64)]) -> io::Result<()> {
    let text: String = epochs.iter().map(|(e, o)| format!("{e} {o}\n")).collect();
    file::write_atomically(&dir.join(EPOCHS_FILE), text.as_bytes())
}

/// Where epoch `asked` ends in a log with these epochs and this end, as
/// Kafka's leader answers: the largest epoch at or below `asked`, and the
/// offset the next epoch starts at (the log end for the last). A log whose
/// file is empty holds epoch 0 from `log_start`. (-1, -1) when every epoch
/// here is newer than `asked`.
pub fn epoch_end(epochs: &[(i32, i64)], asked: i32, log_start: i64, log_end: i64) -> (i32, i64) {
    let implicit = [(0, log_start)];
    let epochs = if epochs.is_empty() { &implicit[..] } else { epochs };
    match epochs.iter().rposition(|&(e, _)| e <= asked) {
        None => (-1, -1),
        Some(i) => (epochs[i].0, epochs.get(i + 1).map_or(log_end, |&(_, o)| o.min(log_end))),
    }
}

/// Where a follower whose log has `epochs` and ends at `log_end` cuts it,
/// given its leader's answer (`leader_epoch`, `end_offset`) to "where does
/// my last epoch end?"; None when nothing needs cutting. Kafka's rule: when
/// the leader answers with an epoch this log does not hold, the log is cut
/// where its own largest epoch below that one ends, and asked again (the
/// leader's end offset alone would keep records of an epoch the leader
/// never had, the same size as the leader's and different bytes); when it
/// holds that epoch, at the smaller of the two ends.
pub fn divergence_cut(
    epochs: &[(i32, i64)],
    log_start: i64,
    log_end: i64,
    leader_epoch: i32,
    end_offset: i64,
) -> Option<i64> {
    if leader_epoch < 0 || end_offset < 0 {
        return None;
    }
    let (own_epoch, own_end) = epoch_end(epochs, leader_epoch, log_start, log_end);
    let cut = if own_epoch < 0 {
        // Every epoch here is newer than the leader's: none of it is its.
        end_offset.max(log_start)
    } else if own_epoch != leader_epoch {
        own_end
    } else {
        own_end.min(end_offset)
    };
    (cut < log_end).then_some(cut)
}

/// Cuts the closed log in `dir` so that it ends before `offset`: segments
/// from there on are removed, the one holding `offset` is cut at the first
/// batch that reaches it, and the files that describe what was cut
/// (indexes, producer snapshots, aborted-transaction indexes, the recovery
/// checkpoint, epochs) go with it. The next open checks what is left and
/// rebuilds them. Returns the bytes removed.
pub fn truncate_dir(dir: &Path, offset: i64) -> io::Result<u64> {
    let bases = recovery::list_segments(dir)?;
    let mut removed = 0u64;
    let remove = |path: &Path| match std::fs::remove_file(path) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    };
    let mut cut_base = offset;
    // Where the log ends after the cut: a batch that straddles `offset`
    // goes whole, so the epochs starting in it go too.
    let mut cut_offset = offset;
    for (i, &base) in bases.iter().enumerate() {
        let next_base = bases.get(i + 1).copied();
        let log = segment::segment_path(dir, base, segment::LOG_SUFFIX);
        if base >= offset && i > 0 {
            removed += std::fs::metadata(&log).map_or(0, |m| m.len());
            for suffix in
                [segment::LOG_SUFFIX, segment::INDEX_SUFFIX, segment::TIME_INDEX_SUFFIX, txn_index::TXN_INDEX_SUFFIX]
            {
                remove(&segment::segment_path(dir, base, suffix))?;
            }
            continue;
        }
        if next_base.is_some_and(|n| n <= offset) {
            continue;
        }
        // The segment holding `offset` (or the first, when all is cut).
        cut_base = base;
        let file = File::options().read(true).write(true).open(&log)?;
        let len = file.metadata()?.len();
        let (position, first_cut) = first_batch_reaching(&file, len, offset)?;
        cut_offset = cut_offset.min(first_cut.unwrap_or(offset));
        if position < len {
            removed += len - position;
            file.set_len(position)?;
            file.sync_all()?;
        }
        for suffix in [segment::INDEX_SUFFIX, segment::TIME_INDEX_SUFFIX, txn_index::TXN_INDEX_SUFFIX] {
            remove(&segment::segment_path(dir, base, suffix))?;
        }
    }
    for (at, path) in producers::snapshots(dir)? {
        if at > cut_base {
            remove(&path)?;
        }
    }
    remove(&dir.join(recovery::CHECKPOINT_FILE))?;
    let mut epochs = load_epochs(dir);
    epochs.retain(|&(_, o)| o < cut_offset);
    save_epochs(dir, &epochs)?;
    file::sync_dir(dir)?;
    Ok(removed)
}

/// Empties the closed log in `dir` and has it start at `offset`: every
/// segment and the files describing them go, and an empty segment based
/// at `offset` is left, which the next open takes as the log's start and
/// end. For a follower whose log ends before its leader's starts (Kafka's
/// truncate-fully-and-start-at). Returns the bytes removed.
pub fn start_at(dir: &Path, offset: i64) -> io::Result<u64> {
    let mut removed = 0u64;
    let remove = |path: &Path| match std::fs::remove_file(path) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    };
    for base in recovery::list_segments(dir)? {
        let log = segment::segment_path(dir, base, segment::LOG_SUFFIX);
        removed += std::fs::metadata(&log).map_or(0, |m| m.len());
        for suffix in
            [segment::LOG_SUFFIX, segment::INDEX_SUFFIX, segment::TIME_INDEX_SUFFIX, txn_index::TXN_INDEX_SUFFIX]
        {
            remove(&segment::segment_path(dir, base, suffix))?;
        }
    }
    for (_, path) in producers::snapshots(dir)? {
        remove(&path)?;
    }
    remove(&dir.join(recovery::CHECKPOINT_FILE))?;
    save_epochs(dir, &[])?;
    File::create(segment::segment_path(dir, offset, segment::LOG_SUFFIX))?.sync_all()?;
    file::sync_dir(dir)?;
    Ok(removed)
}

/// Byte position of the first batch whose last offset is at least
/// `offset`, with its base offset, or of the end of the whole batches
/// (zeros or a torn tail after them are cut too).
fn first_batch_reaching(file: &File, len: u64, offset: i64) -> io::Result<(u64, Option<i64>)> {
    let mut pos = 0u64;
    let mut header = [0u8; HEADER_BYTES];
    while pos + HEADER_BYTES as u64 <= len {
        file.read_exact_at(&mut header, pos)?;
        let Ok(h) = BatchHeader::parse(&header, crate::limits::BATCH_BYTES_MAX) else { break };
        if h.last_offset() >= offset {
            return Ok((pos, Some(h.base_offset)));
        }
        if pos + h.total_bytes() as u64 > len {
            break;
        }
        pos += h.total_bytes() as u64;
    }
    Ok((pos, None))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_epoch_ends_where_the_next_begins() {
        let epochs = vec![(0, 0), (2, 40), (5, 90)];
        assert_eq!(epoch_end(&epochs, 0, 0, 120), (0, 40));
        assert_eq!(epoch_end(&epochs, 1, 0, 120), (0, 40), "an epoch with no records ends with the one before");
        assert_eq!(epoch_end(&epochs, 2, 0, 120), (2, 90));
        assert_eq!(epoch_end(&epochs, 7, 0, 120), (5, 120), "the last epoch ends at the log end");
        assert_eq!(epoch_end(&[(3, 10)], 2, 0, 50), (-1, -1), "every epoch newer than asked");
        assert_eq!(epoch_end(&[], 4, 7, 50), (0, 50), "no file: all of it epoch 0");
    }

    #[test]
    fn a_follower_cuts_where_it_and_its_leader_last_agree() {
        // The leader holds this log's last epoch: the smaller end wins.
        assert_eq!(divergence_cut(&[(0, 0), (3, 100)], 0, 200, 3, 140), Some(140));
        assert_eq!(divergence_cut(&[(0, 0), (3, 100)], 0, 200, 3, 250), None, "the leader has all of it");
        // The leader answers with an epoch this log skipped: cut where this
        // log's epoch below it ends, and ask again.
        let epochs = [(0, 0), (3, 100), (5, 150)];
        assert_eq!(divergence_cut(&epochs, 0, 200, 4, 160), Some(150), "epoch 5 from 150 is not the leader's");
        assert_eq!(divergence_cut(&epochs[..2], 0, 150, 3, 140), Some(140), "the second round");
        // Nothing here at or below the leader's epoch.
        assert_eq!(divergence_cut(&[(6, 50)], 50, 90, 4, 70), Some(70));
        assert_eq!(divergence_cut(&[(0, 0)], 0, 90, -1, -1), None, "no answer: nothing to go by");
    }
}
