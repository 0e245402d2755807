//! Incremental fetch sessions (KIP-227, Fetch v7+).
//!
//! A consumer of thousands of partitions need not send them all in every
//! fetch, nor hear about all of them in every answer. It opens a session
//! with a full fetch (epoch 0); the broker remembers the partitions with
//! their offsets and answers with a session id. Each later fetch (epoch
//! 1, 2, …) names only partitions whose offset or size changed, plus those
//! to forget, and the answer carries only partitions with something new:
//! records, a moved high watermark or log start, or an error.
//!
//! Sessions live on the shard whose connection opened them (thread-local,
//! no lock); a fetch for a session on another connection's shard is told
//! FETCH_SESSION_ID_NOT_FOUND and the client starts a new one, as clients
//! do after any session error. The cache holds at most
//! `FETCH_SESSIONS_PER_SHARD`; past it the least recently used goes.

use std::{
    cell::RefCell,
    collections::{BTreeMap, HashMap},
};

use crate::shard::topics::TopicHandle;

/// A partition of a session: the topic's handle (a reference count, so
/// keeping and matching session keys copies no names) and its index.
pub type SessionKey = (TopicHandle, i32);

/// Sessions one shard keeps (Kafka's `max.incremental.fetch.session.cache.slots`
/// is 1,000 per broker).
pub const FETCH_SESSIONS_PER_SHARD: usize = 1_000;

/// Epoch that asks for a full fetch and a new session.
pub const INITIAL_EPOCH: i32 = 0;
/// Epoch of a sessionless fetch, or one that closes its session.
pub const FINAL_EPOCH: i32 = -1;

/// A partition in a session: what the client last asked for, and what the
/// broker last told it.
#[derive(Debug, Clone)]
pub struct SessionPartition {
    pub topic_id: uuid::Uuid,
    pub offset: i64,
    pub max_bytes: usize,
    /// The leader epoch the client last named for it (-1: none).
    pub leader_epoch: i32,
    /// Last answered high watermark and log start (-1: never answered).
    pub high_watermark: i64,
    pub log_start: i64,
}

/// One session's partitions, by (topic, partition), and its next epoch.
#[derive(Debug)]
pub struct Session {
    pub next_epoch: i32,
    pub partitions: BTreeMap<SessionKey, SessionPartition>,
    /// The cache's tick when last used (for least-recently-used eviction).
    used: u64,
}

#[derive(Default)]
struct Cache {
    sessions: HashMap<i32, Session>,
    tick: u64,
    opened: u64,
    incremental: u64,
}

thread_local! {
    static CACHE: RefCell<Cache> = RefCell::new(Cache::default());
}

/// Why an incremental fetch cannot be served.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SessionError {
    NotFound,
    WrongEpoch,
}

/// Opens a session holding `partitions`; returns its id.
pub fn open(partitions: BTreeMap<SessionKey, SessionPartition>) -> i32 {
    CACHE.with(|c| {
        let mut c = c.borrow_mut();
        if c.sessions.len() >= FETCH_SESSIONS_PER_SHARD {
            if let Some(oldest) = c.sessions.iter().min_by_key(|(_, s)| s.used).map(|(id, _)| *id) {
                c.sessions.remove(&oldest);
            }
        }
        // Random, as Kafka's: a client that reconnects (perhaps to another
        // shard, or a restarted broker) with its old id must not meet
        // another consumer's session. Never 0 (no session), never taken.
        let mut id = random_id();
        while c.sessions.contains_key(&id) {
            id = random_id();
        }
        c.opened += 1;
        c.tick += 1;
        let used = c.tick;
        c.sessions.insert(id, Session { next_epoch: 1, partitions, used });
        id
    })
}

/// A random positive session id.
fn random_id() -> i32 {
    let bytes = crate::shard::topics::new_topic_id().0;
    (i32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]) & i32::MAX).max(1)
}

/// Closes a session (an epoch of 0 or -1 with its id).
pub fn close(id: i32) {
    CACHE.with(|c| c.borrow_mut().sessions.remove(&id));
}

/// Runs `f` on session `id` if `epoch` is the one it expects next; the
/// epoch then moves on (skipping 0, which opens sessions).
pub fn with_session<T>(id: i32, epoch: i32, f: impl FnOnce(&mut Session) -> T) -> Result<T, SessionError> {
    CACHE.with(|c| {
        let mut c = c.borrow_mut();
        c.tick += 1;
        let tick = c.tick;
        let session = c.sessions.get_mut(&id).ok_or(SessionError::NotFound)?;
        if session.next_epoch != epoch {
            return Err(SessionError::WrongEpoch);
        }
        session.next_epoch = epoch.wrapping_add(1).max(1);
        session.used = tick;
        let out = f(session);
        c.incremental += 1;
        Ok(out)
    })
}

/// Puts the answered high watermark and log start back into a session, so
/// the next incremental fetch answers only what moved.
pub fn remember(id: i32, answered: impl IntoIterator<Item = (SessionKey, i64, i64)>) {
    CACHE.with(|c| {
        if let Some(session) = c.borrow_mut().sessions.get_mut(&id) {
            for (key, high_watermark, log_start) in answered {
                if let Some(p) = session.partitions.get_mut(&key) {
                    p.high_watermark = high_watermark;
                    p.log_start = log_start;
                }
            }
        }
    })
}

/// What a shard's session cache holds and has done, for `/metrics`.
#[derive(Debug, Clone, Copy, Default)]
pub struct SessionsUsage {
    pub held: u64,
    pub opened: u64,
    /// Fetches served incrementally, on a session.
    pub incremental: u64,
}

pub fn usage() -> SessionsUsage {
    CACHE.with(|c| {
        let c = c.borrow();
        SessionsUsage { held: c.sessions.len() as u64, opened: c.opened, incremental: c.incremental }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(offset: i64) -> BTreeMap<SessionKey, SessionPartition> {
        let p = SessionPartition {
            topic_id: uuid::Uuid::nil(),
            offset,
            max_bytes: 100,
            leader_epoch: -1,
            high_watermark: -1,
            log_start: -1,
        };
        BTreeMap::from([((TopicHandle::from("t"), 0), p)])
    }

    #[test]
    fn epochs_advance_and_a_wrong_one_or_closed_session_is_refused() {
        let id = open(one(5));
        assert!(id > 0);
        assert_eq!(with_session(id, 2, |_| ()), Err(SessionError::WrongEpoch));
        assert_eq!(with_session(id, 1, |s| s.partitions.len()), Ok(1));
        remember(id, [((TopicHandle::from("t"), 0), 9, 0)]);
        assert_eq!(with_session(id, 2, |s| s.partitions[&(TopicHandle::from("t"), 0)].high_watermark), Ok(9));
        assert_eq!(with_session(id, 2, |_| ()), Err(SessionError::WrongEpoch), "an epoch is used once");
        close(id);
        assert_eq!(with_session(id, 3, |_| ()), Err(SessionError::NotFound));
        let other = open(one(0));
        assert_ne!(other, id, "a fresh id");
    }

    #[test]
    fn the_least_recently_used_session_goes_when_the_cache_is_full() {
        let first = open(one(0));
        let ids: Vec<i32> = (1..FETCH_SESSIONS_PER_SHARD).map(|_| open(one(0))).collect();
        // Use the first, so the second is now the oldest.
        with_session(first, 1, |_| ()).unwrap();
        let _newest = open(one(0));
        assert!(with_session(first, 2, |_| ()).is_ok(), "recently used: kept");
        assert_eq!(with_session(ids[0], 1, |_| ()), Err(SessionError::NotFound), "least recently used: evicted");
    }
}
