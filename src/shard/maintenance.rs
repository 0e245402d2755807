//! Log maintenance on each shard: retention for delete-policy logs and
//! compaction for compacted ones, in the shard's low-share background
//! task queue, which also runs the work a segment roll leaves and offset
//! expiry; and the probe that measures how late the shard wakes its tasks.

use std::{rc::Rc, time::Duration};

use crate::shard::Shard;

/// Creates this shard's background task queue (`BACKGROUND_SHARES` against
/// the default queue's 1000: when both have work, requests get about 95%
/// of the core) and makes it the one `storage::background` spawns into.
/// Called on the shard's executor before any partition opens.
pub fn use_background_queue() {
    let background = glommio::executor().create_task_queue(
        glommio::Shares::Static(crate::limits::BACKGROUND_SHARES),
        glommio::Latency::NotImportant,
        "background",
    );
    crate::storage::background::use_queue(background);
}

/// Every `WAKEUP_PROBE_EVERY_MS`, a task in the shard's request queue
/// sleeps and records how much later than asked it ran. A socket read or
/// an append's completion woken on this shard waits as long before its
/// task runs: the loop turn in progress and the tasks queued ahead of it.
/// The request stages start after that wait, so this is the part of a
/// client's latency before the broker reads a request that the broker
/// can see.
pub fn spawn_wakeup_probe(shard: &Rc<Shard>) {
    let shard = shard.clone();
    let every = Duration::from_millis(crate::limits::WAKEUP_PROBE_EVERY_MS);
    glommio::spawn_local(async move {
        loop {
            let asked = std::time::Instant::now() + every;
            glommio::timer::sleep(every).await;
            let late = std::time::Instant::now().saturating_duration_since(asked);
            shard.metrics.wakeup_lag.observe(late.as_secs_f64());
        }
    })
    .detach();
}

/// Every `every`, closes the segment files nobody used since the previous
/// pass (`storage::open_files`): an idle partition soon holds no descriptor.
pub fn spawn_idle_file_closer(shard: &Rc<Shard>, every: Duration) {
    let id = shard.id;
    crate::storage::background::spawn(async move {
        loop {
            glommio::timer::sleep(every).await;
            let closed = crate::storage::open_files::close_idle();
            if closed > 0 {
                log::debug!("shard {id}: closed {closed} idle segment file(s)");
            }
        }
    });
}

/// Every `every`, applies retention to delete-policy logs and compacts
/// compacted ones (only when new segments were sealed since the last pass),
/// in the shard's background queue: it yields to request handling.
pub fn spawn_log_maintenance(shard: &Rc<Shard>, every: Duration) {
    let shard = shard.clone();
    crate::storage::background::spawn(async move {
        loop {
            glommio::timer::sleep(every).await;
            for p in shard.all_partitions() {
                if p.log.config().compacted {
                    let now = crate::storage::Clock::System.now_ms();
                    if let Err(e) = p.log.compact(now).await {
                        log::warn!("shard {}: compaction of {}: {e}", shard.id, p.log.name());
                    }
                }
                match p.log.enforce_retention().await {
                    Ok(o) if o.segments_deleted > 0 => log::info!(
                        "shard {}: retention removed {} segment(s), {} bytes, of {}; log start now {}",
                        shard.id,
                        o.segments_deleted,
                        o.bytes_deleted,
                        p.log.name(),
                        o.log_start
                    ),
                    Ok(_) => {}
                    Err(e) => log::warn!("shard {}: retention of {}: {e}", shard.id, p.log.name()),
                }
            }
        }
    });
}
