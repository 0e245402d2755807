//! Fetch, versions 4–17, with long poll: the request is held until
//! `min_bytes` are available or `max_wait_ms` passes, woken by appends on the
//! owner shards (no polling loop). Every requested partition is echoed, even
//! empty ones. Stored batches are returned as they are, never parsed, and
//! reach the socket without a copy (see `server::fetch_encode`).
//!
//! From v13 topics are named by id, both ways; an id no topic has is
//! answered UNKNOWN_TOPIC_ID for each of its partitions. Nothing in v14–v17
//! changes what a broker without tiered storage or replicas answers: v15's
//! replica state and v17's directory id are a follower's, v16's node
//! endpoints are for leader moves.
//!
//! isolation_level 1 (read_committed) returns only batches below each
//! partition's last stable offset, with the aborted transactions among
//! them (`aborted_transactions`), and waits for the LSO, not the log end, to
//! move; both levels are told `last_stable_offset`.

use std::{
    collections::BTreeMap,
    rc::Rc,
    sync::Arc,
    time::{Duration, Instant},
};

use kafka_protocol::messages::FetchRequest;

use crate::protocol::errors;
use crate::{
    limits,
    server::{
        fetch_encode::{PartitionOut, TopicOut},
        fetch_sessions::{self, SessionKey},
    },
    shard::{
        messages::{Read, ReadItem, ReadOutcome, WaitForData},
        router,
        topics::TopicHandle,
        Shard, ShardId,
    },
};

/// Longest a fetch may be held, whatever the client asks: bounds how long
/// a request pins its connection and memory.
const MAX_WAIT_MS_MAX: u64 = 30_000;

/// A requested topic as the response must name it.
#[derive(Clone, Copy, PartialEq)]
struct Named {
    id: uuid::Uuid,
    /// The request named the topic by an id no topic has.
    unknown_id: bool,
}

/// What a fetch answers: a top-level error (session errors), the session
/// id (0: none), and the partitions.
pub struct FetchAnswer {
    pub error: i16,
    pub session_id: i32,
    pub topics: Vec<TopicOut>,
}

/// The partitions one fetch reads, and how its answer relates to a session.
struct Plan {
    items: Vec<ReadItem>,
    named: Vec<Named>,
    /// The session the answer belongs to (0: none).
    session_id: i32,
    /// Per item, in an incremental fetch, the high watermark and log start
    /// last answered: only partitions with something new are answered.
    only_changed: Vec<Option<(i64, i64)>>,
    /// An incremental fetch reads its session starting this many partitions
    /// in (the epoch, modulo the size), so that the read budget
    /// (`max_bytes`) cannot keep starving the same partitions.
    rotated: usize,
}

pub async fn handle(shard: &Rc<Shard>, request: FetchRequest, version: i16) -> FetchAnswer {
    let wait = Duration::from_millis((request.max_wait_ms.max(0) as u64).min(MAX_WAIT_MS_MAX));
    let deadline = Instant::now() + wait;
    let min_bytes = request.min_bytes.max(0) as usize;
    let read_committed = request.isolation_level == 1;
    // A follower's fetch names its broker (v15+ in the replica state).
    let replica = if version >= 15 { request.replica_state.replica_id.0 } else { request.replica_id.0 };
    let replica = if shard.settings.cluster.is_some() { replica.max(-1) } else { -1 };
    // A consumer's v11+ fetch may be served by any replica, and with the
    // rack-aware selector its rack may send it to one (KIP-392,
    // `shard::nearest_replica`).
    let rack_aware = version >= 11 && replica < 0 && shard.settings.rack_aware_reads;
    let reader = Reader {
        replica,
        any_replica: version >= 11 && replica < 0,
        client_rack: (rack_aware && !request.rack_id.is_empty()).then(|| Arc::from(request.rack_id.as_str())),
    };
    let max_bytes = if request.max_bytes <= 0 { usize::MAX } else { request.max_bytes as usize };
    let max_bytes = max_bytes.min(limits::FETCH_RESPONSE_BYTES_MAX);
    let (items, named) = requested(shard, &request, version, max_bytes);
    let plan = match plan_session(shard, &request, version, items, named) {
        Ok(plan) => plan,
        Err(error) => return FetchAnswer { error, session_id: 0, topics: Vec::new() },
    };
    let Plan { items, named, session_id, only_changed, rotated } = plan;
    loop {
        let mut outcomes = read_round(shard, &items, max_bytes, read_committed, &reader).await;
        for (o, n) in outcomes.iter_mut().zip(&named) {
            if n.unknown_id {
                o.error = errors::UNKNOWN_TOPIC_ID;
            }
        }
        let total: usize = outcomes.iter().map(ReadOutcome::bytes).sum();
        let changed = |(o, last): (&ReadOutcome, &Option<(i64, i64)>)| {
            o.error != errors::NONE
                || o.preferred_replica.is_some()
                || last.is_none_or(|last| last != (o.high_watermark, o.log_start))
        };
        // An error, or a consumer sent elsewhere, is answered at once.
        // So is a follower whose consumers wait for a high watermark.
        let any_error =
            outcomes.iter().any(|o| o.error != errors::NONE || o.preferred_replica.is_some() || o.high_watermark_news);
        let now = Instant::now();
        if total >= min_bytes.max(1) || any_error || now >= deadline {
            for o in &outcomes {
                crate::metrics::ShardMetrics::error(&shard.metrics.fetch_errors, o.error);
            }
            if session_id != 0 {
                let answered = items
                    .iter()
                    .zip(&outcomes)
                    .map(|(i, o)| ((i.topic.clone(), i.partition), o.high_watermark, o.log_start));
                fetch_sessions::remember(session_id, answered);
            }
            let keep: Vec<bool> =
                outcomes.iter().zip(&only_changed).map(|(o, last)| o.bytes() > 0 || changed((o, last))).collect();
            let topics = respond(&items, &named, outcomes, &keep, rotated);
            return FetchAnswer { error: errors::NONE, session_id, topics };
        }
        wait_for_any(shard, &items, deadline - now, read_committed, &reader).await;
    }
}

/// Who reads: a follower (its node id) or a consumer (-1), and where a
/// consumer may be served.
struct Reader {
    replica: i32,
    /// Any replica may serve this consumer (Fetch v11+).
    any_replica: bool,
    client_rack: Option<Arc<str>>,
}

/// The partitions the request names, with their topics as the answer must
/// name them. A topic the table holds is named by the table's handle, so
/// each partition's item takes a reference count, not a copy of the name;
/// one it does not hold gets a handle of its own (it is read from nobody).
fn requested(shard: &Rc<Shard>, request: &FetchRequest, version: i16, max_bytes: usize) -> (Vec<ReadItem>, Vec<Named>) {
    let by_id = version >= 13;
    let table = shard.topics();
    let mut named: Vec<Named> = Vec::new();
    let items: Vec<ReadItem> = request
        .topics
        .iter()
        .flat_map(|t| {
            let (topic, n) = if by_id {
                match table.name_by_id(&t.topic_id) {
                    Some(name) => (name.clone(), Named { id: t.topic_id, unknown_id: false }),
                    None => (TopicHandle::from(""), Named { id: t.topic_id, unknown_id: true }),
                }
            } else {
                let name = t.topic.0.as_str();
                match table.topics.get_key_value(name) {
                    Some((handle, m)) => {
                        (handle.clone(), Named { id: uuid::Uuid::from_bytes(m.id_bytes()), unknown_id: false })
                    }
                    None => (TopicHandle::from(name), Named { id: uuid::Uuid::nil(), unknown_id: false }),
                }
            };
            named.extend(std::iter::repeat_n(n, t.partitions.len()));
            t.partitions.iter().map(move |p| ReadItem {
                topic: topic.clone(),
                partition: p.partition,
                offset: p.fetch_offset,
                // No partition may return more than the whole response may
                // hold (beyond its first batch, which the log always returns
                // whole so a consumer can make progress).
                max_bytes: (p.partition_max_bytes.max(0) as usize).min(max_bytes),
                leader_epoch: if version >= 9 { p.current_leader_epoch } else { -1 },
            })
        })
        .collect();
    (items, named)
}

/// Applies the request's session fields (v7+): no session, a new one (a
/// full fetch), or an incremental fetch on one, which reads every
/// partition the session holds after the request's changes.
fn plan_session(
    shard: &Rc<Shard>,
    request: &FetchRequest,
    version: i16,
    items: Vec<ReadItem>,
    named: Vec<Named>,
) -> Result<Plan, i16> {
    let (id, epoch) = (request.session_id, request.session_epoch);
    let full = |items: Vec<ReadItem>, named: Vec<Named>, session_id| {
        let only_changed = vec![None; items.len()];
        Plan { items, named, session_id, only_changed, rotated: 0 }
    };
    if version < 7 || epoch == fetch_sessions::FINAL_EPOCH {
        if id != 0 {
            fetch_sessions::close(id);
        }
        return Ok(full(items, named, 0));
    }
    if epoch == fetch_sessions::INITIAL_EPOCH {
        if id != 0 {
            fetch_sessions::close(id);
        }
        let partitions = items.iter().zip(&named).map(|(i, n)| session_entry(i, n)).collect();
        let session_id = fetch_sessions::open(partitions);
        return Ok(full(items, named, session_id));
    }
    let forgotten = forgotten(shard, request, version);
    let held = fetch_sessions::with_session(id, epoch, |session| {
        for key in forgotten {
            session.partitions.remove(&key);
        }
        for (item, n) in items.iter().zip(&named) {
            let key = (item.topic.clone(), item.partition);
            match session.partitions.get_mut(&key) {
                Some(p) => {
                    p.offset = item.offset;
                    p.max_bytes = item.max_bytes;
                    p.leader_epoch = item.leader_epoch;
                    p.topic_id = n.id;
                }
                None => {
                    session.partitions.insert(key, session_entry(item, n).1);
                }
            }
        }
        let mut held: Vec<_> = session.partitions.iter().map(|(k, p)| (k.clone(), p.clone())).collect();
        let by = epoch as usize % held.len().max(1);
        held.rotate_left(by);
        held
    });
    let held = held.map_err(|e| match e {
        fetch_sessions::SessionError::NotFound => errors::FETCH_SESSION_ID_NOT_FOUND,
        fetch_sessions::SessionError::WrongEpoch => errors::INVALID_FETCH_SESSION_EPOCH,
    })?;
    let rotated = epoch as usize % held.len().max(1);
    let mut plan = Plan { items: Vec::new(), named: Vec::new(), session_id: id, only_changed: Vec::new(), rotated };
    for ((topic, partition), p) in held {
        plan.named.push(Named { id: p.topic_id, unknown_id: topic.is_empty() });
        plan.only_changed.push(Some((p.high_watermark, p.log_start)));
        let (offset, max_bytes, leader_epoch) = (p.offset, p.max_bytes, p.leader_epoch);
        plan.items.push(ReadItem { topic, partition, offset, max_bytes, leader_epoch });
    }
    Ok(plan)
}

fn session_entry(item: &ReadItem, n: &Named) -> (SessionKey, fetch_sessions::SessionPartition) {
    let p = fetch_sessions::SessionPartition {
        topic_id: n.id,
        offset: item.offset,
        max_bytes: item.max_bytes,
        leader_epoch: item.leader_epoch,
        high_watermark: -1,
        log_start: -1,
    };
    ((item.topic.clone(), item.partition), p)
}

/// The (topic, partition) pairs the request asks its session to forget.
/// Keys compare by name, so a topic the table no longer holds is still
/// forgotten by a handle of its own.
fn forgotten(shard: &Rc<Shard>, request: &FetchRequest, version: i16) -> Vec<SessionKey> {
    let table = shard.topics();
    let mut out = Vec::new();
    for t in &request.forgotten_topics_data {
        let name = if version >= 13 {
            table.name_by_id(&t.topic_id).cloned().unwrap_or_else(|| TopicHandle::from(""))
        } else {
            let name = t.topic.0.as_str();
            table.handle(name).unwrap_or_else(|| TopicHandle::from(name))
        };
        out.extend(t.partitions.iter().map(|&p| (name.clone(), p)));
    }
    out
}

/// Reads every item from its owner (owners in parallel) and trims the
/// result to the request's `max_bytes`: a partition that would overflow it
/// is answered empty, except the first with data (each read is already
/// capped at `max_bytes`, so only its first batch can exceed it).
async fn read_round(
    shard: &Rc<Shard>,
    items: &[ReadItem],
    max_bytes: usize,
    read_committed: bool,
    reader: &Reader,
) -> Vec<ReadOutcome> {
    let table = shard.topics();
    let mut by_owner: BTreeMap<ShardId, Vec<usize>> = BTreeMap::new();
    let mut outcomes = vec![ReadOutcome::default(); items.len()];
    for (i, item) in items.iter().enumerate() {
        match router::reader(&table, &item.topic, item.partition, shard.count, reader.any_replica) {
            Some(owner) => by_owner.entry(owner).or_default().push(i),
            None => {
                let error = router::no_owner_error(&table, &item.topic, item.partition);
                outcomes[i] = ReadOutcome::empty(error, -1, -1)
            }
        }
    }
    let mut tasks = Vec::new();
    for (owner, indices) in by_owner {
        let subset: Vec<ReadItem> = indices.iter().map(|&i| items[i].clone()).collect();
        let (shard, replica, client_rack) = (shard.clone(), reader.replica, reader.client_rack.clone());
        tasks.push((
            indices,
            glommio::spawn_local(async move {
                shard.ask(owner, Read { items: subset, max_bytes, read_committed, replica, client_rack }).await
            }),
        ));
    }
    for (indices, task) in tasks {
        match task.await {
            Ok(results) => {
                for (i, r) in indices.into_iter().zip(results) {
                    outcomes[i] = r;
                }
            }
            Err(_) => {
                for i in indices {
                    outcomes[i] = ReadOutcome::empty(errors::KAFKA_STORAGE_ERROR, -1, -1);
                }
            }
        }
    }
    let mut taken = 0usize;
    for o in &mut outcomes {
        let len = o.bytes();
        if taken > 0 && taken + len > max_bytes {
            o.chunks.clear();
        } else {
            taken += len;
        }
    }
    outcomes
}

/// Waits until an append reaches any requested partition, or `wait`.
async fn wait_for_any(shard: &Rc<Shard>, items: &[ReadItem], wait: Duration, read_committed: bool, reader: &Reader) {
    let table = shard.topics();
    let replica = reader.replica >= 0;
    let mut by_owner: BTreeMap<ShardId, Vec<(TopicHandle, i32, i64)>> = BTreeMap::new();
    for item in items {
        if let Some(owner) = router::reader(&table, &item.topic, item.partition, shard.count, reader.any_replica) {
            by_owner.entry(owner).or_default().push((item.topic.clone(), item.partition, item.offset));
        }
    }
    let (tx, mut rx) = futures_channel::mpsc::unbounded::<()>();
    let wait_ms = wait.as_millis() as u64 + 1;
    for (owner, subset) in by_owner {
        let (shard, tx) = (shard.clone(), tx.clone());
        glommio::spawn_local(async move {
            // Shutdown (the owner gone) ends the wait as data would.
            let _ = shard.ask(owner, WaitForData { items: subset, wait_ms, read_committed, replica }).await;
            let _ = tx.unbounded_send(());
        })
        .detach();
    }
    drop(tx);
    futures_lite::future::or(
        async {
            futures_lite::StreamExt::next(&mut rx).await;
        },
        glommio::timer::sleep(wait),
    )
    .await;
}

/// The answer's topics and partitions, in request (or session) order; an
/// incremental fetch leaves out the partitions `keep` says have nothing new.
/// `rotated`: the items were read starting `rotated` places into the
/// session (see `Plan::rotated`); the answer is in session order again, so
/// each topic's partitions stay together.
fn respond(
    items: &[ReadItem],
    named: &[Named],
    outcomes: Vec<ReadOutcome>,
    keep: &[bool],
    rotated: usize,
) -> Vec<TopicOut> {
    let n = items.len();
    let mut outcomes: Vec<Option<ReadOutcome>> = outcomes.into_iter().map(Some).collect();
    let mut topics: Vec<TopicOut> = Vec::new();
    for i in (0..n).map(|j| (j + n - rotated % n.max(1)) % n).filter(|&i| keep[i]) {
        let (item, n, o) = (&items[i], &named[i], outcomes[i].take().expect("each item is answered once"));
        let p = PartitionOut {
            partition: item.partition,
            error: o.error,
            high_watermark: o.high_watermark,
            last_stable_offset: o.last_stable_offset,
            log_start: o.log_start,
            preferred_read_replica: o.preferred_replica.unwrap_or(-1),
            aborted: o.aborted,
            records: o.chunks,
        };
        match topics.last_mut().filter(|t| t.name == item.topic && t.id == n.id) {
            Some(t) => t.partitions.push(p),
            None => topics.push(TopicOut { name: item.topic.clone(), id: n.id, partitions: vec![p] }),
        }
    }
    topics
}
