//! A connection's response writer: answers go out in request order, and
//! those already done when the writer gets to them leave together.
//!
//! A client that pipelines (librdkafka, `bench`) often has several answers
//! finished at once: one journal write or fdatasync completes the appends
//! of many produce requests. Written one `writev` each, every answer costs
//! a syscall, a TCP segment and, on loopback, the receiver's wake-up; at
//! 50k msg/s of 1 KiB records that was a tenth of the shard's CPU. Here the
//! writer awaits the oldest answer, then takes every answer queued behind
//! it whose handler has finished, up to the first that has not, and hands
//! them to one write: at most the `REQUESTS_IN_FLIGHT_MAX` (16) a
//! connection may have outstanding.

use std::rc::Rc;

use futures_lite::future::poll_once;
use glommio::{channels::local_channel::LocalReceiver, sync::StaticPermit};

use crate::{
    limits,
    metrics::stages::{RequestTrace, Stage},
    server::connection::{Next, Pending, SharedStream},
    shard::Shard,
    storage::Chunk,
};

/// One write's worth of answers, in request order.
#[derive(Default)]
struct Gathered {
    chunks: Vec<Chunk>,
    answered: Vec<Answered>,
    /// Why the connection closes once the gathered answers are written.
    close: Option<String>,
}

/// A request whose answer is gathered: its permits are held until the
/// answer is written, and its trace then gets its last lap.
struct Answered {
    _permits: [StaticPermit; 2],
    api_key: i16,
    trace: Rc<RequestTrace>,
}

/// Writes the answers `rx` hands over until the reader ends or a request
/// closes the connection.
pub(super) async fn write_responses(
    shard: &Shard,
    rx: &LocalReceiver<Next>,
    fd: i32,
    mut writer: SharedStream,
    encrypted: bool,
    peer: &str,
) {
    let mut held: Option<Next> = None;
    loop {
        let first = match held.take() {
            Some(next) => next,
            None => match rx.recv().await {
                Some(next) => next,
                None => return,
            },
        };
        let mut gathered = Gathered::default();
        gather(first, true, &mut gathered).await;
        while gathered.close.is_none() && gathered.answered.len() < limits::REQUESTS_IN_FLIGHT_MAX {
            let Some(Some(next)) = poll_once(rx.recv()).await else { break };
            if let Some(unfinished) = gather(next, false, &mut gathered).await {
                held = Some(unfinished);
                break;
            }
        }
        if !gathered.chunks.is_empty() {
            let chunks = std::mem::take(&mut gathered.chunks);
            let written = if encrypted {
                crate::server::tls::stream::write_chunks(&mut writer, chunks).await
            } else {
                crate::server::send::write_all(fd, &mut writer, chunks).await
            };
            if let Err(e) = written {
                log::debug!("connection from {peer}: write failed: {e}");
                return;
            }
        }
        for answered in gathered.answered {
            answered.trace.lap(Stage::SocketWrite);
            shard.metrics.request_stages(answered.api_key, &answered.trace);
        }
        if let Some(reason) = gathered.close {
            log::warn!("closing connection from {peer}: {reason}");
            return;
        }
    }
}

/// Adds `next`'s answer to `gathered`, awaiting its handler if `wait`;
/// gives `next` back if its handler has not finished and `wait` is false.
async fn gather(next: Next, wait: bool, gathered: &mut Gathered) -> Option<Next> {
    let (mut pending, permits) = match next {
        Next::Response(pending, permits) => (pending, permits),
        Next::Close(reason) => {
            gathered.close = Some(reason);
            return None;
        }
    };
    let outcome = if wait {
        (&mut pending.task).await
    } else {
        match poll_once(&mut pending.task).await {
            Some(outcome) => outcome,
            None => return Some(Next::Response(pending, permits)),
        }
    };
    let Pending { api_key, trace, .. } = pending;
    trace.lap(Stage::ResponseWait);
    match outcome.unwrap_or_else(|| Err("request handler was cancelled".into())) {
        Ok(Some(chunks)) => {
            gathered.chunks.extend(chunks);
            gathered.answered.push(Answered { _permits: permits, api_key, trace });
        }
        Ok(None) => {}
        Err(reason) => gathered.close = Some(reason),
    }
    None
}
