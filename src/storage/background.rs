//! Where storage's background work runs: the shard's low-share task queue
//! when the server set one (see `server::run_shard`), so it yields to
//! request handling, or the current queue otherwise (tests, tools).
//!
//! Background work here is what a roll leaves for later (trimming the
//! sealed segment, its index files, the checkpoint); the server also runs
//! retention, compaction and offset expiry there.

use std::{cell::Cell, future::Future};

use glommio::{task::JoinHandle, TaskQueueHandle};

thread_local! {
    /// This shard's background queue (one executor per thread).
    static QUEUE: Cell<Option<TaskQueueHandle>> = const { Cell::new(None) };
}

/// Makes `queue` this thread's background queue.
pub fn use_queue(queue: TaskQueueHandle) {
    QUEUE.with(|q| q.set(Some(queue)));
}

/// Starts `work` in the background queue.
pub fn spawn<T: 'static>(work: impl Future<Output = T> + 'static) -> JoinHandle<T> {
    match QUEUE.with(Cell::get) {
        Some(queue) => match glommio::spawn_local_into(work, queue) {
            Ok(task) => task.detach(),
            Err(e) => panic!("background task queue {queue:?} is gone: {e}"),
        },
        None => glommio::spawn_local(work).detach(),
    }
}
