//! The shard's side of its journal (`storage::journal`): starting it before
//! the partitions open, handing each partition its link and its batches
//! from the last run, and the checkpoints that let full files go.

use std::{rc::Rc, sync::Arc, time::Duration};

use bytes::Bytes;

use crate::{
    shard::{topics::TopicMeta, Shard},
    storage::journal::{Journal, JournalKey, JournalLink, Replay},
};

/// How often the shard looks for full journal files to retire.
const CHECKPOINT_POLL: Duration = Duration::from_millis(20);

/// Partitions a checkpoint syncs at once. Their `fdatasync`s overlap in the
/// kernel's io workers; one after another, 32 partitions' syncs under load
/// took up to 1.6 s (2.5 journal files at 50k msg/s), and rotations waited
/// for a file. Not all at once, so the journal's own syncs are not queued
/// behind every partition's. (Against one at a time, perf/README.md: each
/// won one workload; eight kept fewer rotations waiting.)
const CHECKPOINT_SYNCS_AT_ONCE: usize = 8;

/// Starts this shard's journal (unless the broker runs without one) and
/// keeps `replay` for the partitions about to open.
pub async fn start(shard: &Rc<Shard>, replay: Arc<Replay>) -> Result<(), String> {
    *shard.replay.borrow_mut() = Some(replay.clone());
    let bytes = shard.settings.journal_file_bytes;
    if bytes == 0 {
        return Ok(());
    }
    let journal = match Journal::create(&shard.settings.data_dir, replay.generation, shard.id, bytes).await {
        Ok(journal) => journal,
        Err(e) => {
            // A full disk, say: the broker still starts, as it runs with
            // `journal_file_bytes = 0`.
            log::warn!(
                "shard {}: cannot start its journal in {}: {e}; running without it (every append writes \
                 its segment before it is answered, and acks=all syncs each partition's segment)",
                shard.id,
                shard.settings.data_dir.join(crate::storage::journal::DIR).display()
            );
            return Ok(());
        }
    };
    journal.page_cache.set(shard.settings.journal_page_cache);
    let _ = shard.journal.set(journal);
    spawn_checkpoints(shard);
    Ok(())
}

/// Start-up is over: the last run's batches are in their partitions (or,
/// if `opened_all` is false, the files stay for the next start).
pub fn started(shard: &Shard, opened_all: bool) {
    if let Some(replay) = shard.replay.borrow_mut().take() {
        if !opened_all {
            replay.keep_files();
        }
    }
}

/// What a partition of `meta` opening here gets: its link to the journal,
/// and the batches the last run's journals hold for it.
pub fn for_partition(shard: &Shard, meta: &TopicMeta, partition: i32) -> (Option<JournalLink>, Vec<Bytes>) {
    let key = JournalKey { topic_id: meta.id.0, partition };
    let replay = shard.replay.borrow().as_ref().map_or_else(Vec::new, |r| r.batches(&key).to_vec());
    let link = shard.journal.get().map(|j| JournalLink { journal: j.clone(), key });
    (link, replay)
}

/// When journal files are full: syncs every partition's segments, then
/// retires the files whose entries were all queued before the syncs began.
/// Runs in the background queue.
fn spawn_checkpoints(shard: &Rc<Shard>) {
    let shard = shard.clone();
    crate::storage::background::spawn(async move {
        let Some(journal) = shard.journal.get().cloned() else { return };
        loop {
            glommio::timer::sleep(CHECKPOINT_POLL).await;
            if !journal.checkpoint_due() {
                continue;
            }
            let through = journal.pushed();
            let began = std::time::Instant::now();
            let whole = sync_every_partition(&shard).await;
            log::debug!("shard {}: journal checkpoint through entry {through} took {:?}", shard.id, began.elapsed());
            if whole {
                journal.retire_through(through).await;
            }
        }
    });
}

/// Syncs every partition's segments, `CHECKPOINT_SYNCS_AT_ONCE` at a time;
/// false if any failed (named in the log).
async fn sync_every_partition(shard: &Rc<Shard>) -> bool {
    let left = Rc::new(std::cell::RefCell::new(shard.all_partitions()));
    let workers: Vec<_> = (0..CHECKPOINT_SYNCS_AT_ONCE)
        .map(|_| {
            let (left, id) = (left.clone(), shard.id);
            crate::storage::background::spawn(async move {
                let mut whole = true;
                loop {
                    let Some(p) = left.borrow_mut().pop() else { return whole };
                    if let Err(e) = p.log.sync_segments().await {
                        log::warn!("shard {id}: journal checkpoint of {}: {e}; its journal files stay", p.log.name());
                        whole = false;
                    }
                }
            })
        })
        .collect();
    let mut whole = true;
    for w in workers {
        whole &= w.await.unwrap_or(false);
    }
    whole
}
