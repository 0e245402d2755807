//! The transaction state machine: one [`TxnMeta`] per transactional id,
//! changed only by logging its whole new state to `__transaction_state`
//! first (Kafka's order: the log is the truth, memory follows it).
//!
//! ```text
//!  Empty / CompleteCommit / CompleteAbort ──AddPartitions──► Ongoing
//!  Ongoing ──EndTxn(commit)──► PrepareCommit ──markers──► CompleteCommit
//!  Ongoing ──EndTxn(abort), timeout, fence──► PrepareAbort ──markers──► CompleteAbort
//!  InitProducerId: Empty/Complete* → Empty with epoch + 1;
//!                  Ongoing → epoch + 1 and abort (the caller retries)
//! ```

use std::{
    cell::RefCell,
    collections::{BTreeMap, BTreeSet, HashMap, HashSet},
    rc::Rc,
};

use super::{
    partition_for, records::TxnValue, seam::TxnHost, AddTxnPartitions, DescribeTxns, EndTxn, InitTxnProducer, ListTxns,
    ListedTxn, TxnDescription, TxnProducer, TxnState,
};
use crate::protocol::{errors::*, record_batch::TxnMarker};

/// The last epoch a producer id may carry; past it the transactional id
/// gets a fresh producer id (Kafka keeps `Short.MaxValue` free as well).
const EPOCH_MAX: i16 = i16::MAX - 1;

/// A transactional id's state, as last logged.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TxnMeta {
    pub producer_id: i64,
    /// The producer id before the last change of id, -1 if none.
    pub previous_producer_id: i64,
    pub producer_epoch: i16,
    /// The epoch before the last bump, so a retried InitProducerId (KIP-360)
    /// is recognised; -1 if none.
    pub last_epoch: i16,
    pub timeout_ms: i32,
    pub state: TxnState,
    pub partitions: BTreeSet<(String, i32)>,
    pub start_ms: i64,
    pub last_update_ms: i64,
}

impl TxnMeta {
    fn value(&self) -> TxnValue {
        let mut by_topic: BTreeMap<&str, Vec<i32>> = BTreeMap::new();
        for (topic, p) in &self.partitions {
            by_topic.entry(topic).or_default().push(*p);
        }
        TxnValue {
            producer_id: self.producer_id,
            previous_producer_id: self.previous_producer_id,
            producer_epoch: self.producer_epoch,
            timeout_ms: self.timeout_ms,
            state: self.state,
            partitions: by_topic.into_iter().map(|(t, ps)| (t.to_string(), ps)).collect(),
            last_update_ms: self.last_update_ms,
            start_ms: self.start_ms,
        }
    }

    fn from_value(v: TxnValue) -> Self {
        let partitions = v.partitions.into_iter().flat_map(|(t, ps)| ps.into_iter().map(move |p| (t.clone(), p)));
        Self {
            producer_id: v.producer_id,
            previous_producer_id: v.previous_producer_id,
            producer_epoch: v.producer_epoch,
            last_epoch: -1,
            timeout_ms: v.timeout_ms,
            state: v.state,
            partitions: partitions.collect(),
            start_ms: v.start_ms,
            last_update_ms: v.last_update_ms,
        }
    }

    /// Whether `(producer_id, epoch)` may act on this transaction: an
    /// unknown id is a mapping error, an old epoch a fenced zombie.
    fn check_producer(&self, producer_id: i64, epoch: i16) -> Result<(), ErrorCode> {
        if producer_id != self.producer_id {
            Err(INVALID_PRODUCER_ID_MAPPING)
        } else if epoch != self.producer_epoch {
            Err(PRODUCER_FENCED)
        } else {
            Ok(())
        }
    }
}

/// One state change per transactional id at a time: held while a change
/// is being logged, released on drop (also when the request is dropped).
struct Busy<'a> {
    set: &'a RefCell<HashSet<String>>,
    id: String,
}

impl Drop for Busy<'_> {
    fn drop(&mut self) {
        self.set.borrow_mut().remove(&self.id);
    }
}

pub struct TxnCoordinator {
    host: Box<dyn TxnHost>,
    txns: RefCell<HashMap<String, TxnMeta>>,
    busy: RefCell<HashSet<String>>,
}

fn answer(error: ErrorCode) -> TxnProducer {
    TxnProducer { error, producer_id: -1, producer_epoch: -1 }
}

impl TxnCoordinator {
    pub fn new(host: Box<dyn TxnHost>) -> Self {
        Self { host, txns: RefCell::default(), busy: RefCell::default() }
    }

    fn claim(&self, id: &str) -> Option<Busy<'_>> {
        if !self.busy.borrow_mut().insert(id.to_string()) {
            return None;
        }
        Some(Busy { set: &self.busy, id: id.to_string() })
    }

    /// A copy of `id`'s state.
    pub fn get(&self, id: &str) -> Option<TxnMeta> {
        self.txns.borrow().get(id).cloned()
    }

    /// Logs `meta` as `id`'s new state, then takes it; on failure the old
    /// state stays and the caller answers a retriable error.
    async fn log(&self, id: &str, meta: TxnMeta) -> Result<(), ErrorCode> {
        self.log_as(id, meta, true).await
    }

    /// `log`, answered once `durable` or, if not, once written.
    async fn log_as(&self, id: &str, meta: TxnMeta, durable: bool) -> Result<(), ErrorCode> {
        let partition = partition_for(id, self.host.settings().partitions);
        let (key, value) = (super::records::encode_key(id), Some(meta.value().encode()));
        let written = if durable {
            self.host.append(partition, key, value).await
        } else {
            self.host.append_written(partition, key, value).await
        };
        match written {
            Ok(()) => {
                self.txns.borrow_mut().insert(id.to_string(), meta);
                Ok(())
            }
            Err(e) => {
                log::warn!("transactional id {id:?}: cannot log its state to {}-{partition}: {e}", super::TXN_TOPIC);
                Err(COORDINATOR_NOT_AVAILABLE)
            }
        }
    }

    /// InitProducerId with a transactional id: a new producer id, or the
    /// next epoch of the current one (which fences every older producer
    /// of the id). An open transaction is aborted first; the caller is
    /// told CONCURRENT_TRANSACTIONS and retries.
    pub async fn init_producer(self: &Rc<Self>, call: InitTxnProducer) -> TxnProducer {
        let InitTxnProducer { transactional_id: id, timeout_ms, producer_id: given_id, producer_epoch: given_epoch } =
            call;
        if timeout_ms <= 0 || timeout_ms > self.host.settings().max_timeout_ms {
            return answer(INVALID_TRANSACTION_TIMEOUT);
        }
        let Some(busy) = self.claim(&id) else { return answer(CONCURRENT_TRANSACTIONS) };
        let now = self.host.now_ms();
        let next = match self.get(&id) {
            None => match self.host.allocate_producer_id().await {
                Ok(producer_id) => Ok(TxnMeta {
                    producer_id,
                    previous_producer_id: -1,
                    producer_epoch: 0,
                    last_epoch: -1,
                    timeout_ms,
                    state: TxnState::Empty,
                    partitions: BTreeSet::new(),
                    start_ms: -1,
                    last_update_ms: now,
                }),
                Err(e) => {
                    log::warn!("transactional id {id:?}: cannot allocate a producer id: {e}");
                    return answer(COORDINATOR_NOT_AVAILABLE);
                }
            },
            Some(m) => {
                let holds_current = given_id == m.producer_id && given_epoch == m.producer_epoch;
                let retried = given_id == m.producer_id && given_epoch == m.last_epoch && m.last_epoch >= 0;
                if given_id >= 0 && !holds_current && !retried {
                    return answer(PRODUCER_FENCED);
                }
                match m.state {
                    TxnState::PrepareCommit | TxnState::PrepareAbort | TxnState::PrepareEpochFence => {
                        return answer(CONCURRENT_TRANSACTIONS);
                    }
                    TxnState::Ongoing => {
                        drop(busy);
                        self.fence_and_abort(&id, &m).await;
                        return answer(CONCURRENT_TRANSACTIONS);
                    }
                    _ if retried && m.state == TxnState::Empty => {
                        // The bump this producer asked for was made; its
                        // answer was lost.
                        return TxnProducer {
                            error: NONE,
                            producer_id: m.producer_id,
                            producer_epoch: m.producer_epoch,
                        };
                    }
                    _ => self.bumped(&id, m, timeout_ms, now).await,
                }
            }
        };
        let next = match next {
            Ok(next) => next,
            Err(e) => return answer(e),
        };
        let (producer_id, producer_epoch) = (next.producer_id, next.producer_epoch);
        match self.log(&id, next).await {
            Ok(()) => TxnProducer { error: NONE, producer_id, producer_epoch },
            Err(e) => answer(e),
        }
    }

    /// `m` with the next epoch (or a fresh producer id when the epochs
    /// run out), Empty, ready for a new transaction.
    async fn bumped(&self, id: &str, m: TxnMeta, timeout_ms: i32, now: i64) -> Result<TxnMeta, ErrorCode> {
        let mut next = TxnMeta {
            state: TxnState::Empty,
            partitions: BTreeSet::new(),
            timeout_ms,
            start_ms: -1,
            last_update_ms: now,
            last_epoch: m.producer_epoch,
            ..m
        };
        if m.producer_epoch >= EPOCH_MAX {
            let fresh = self.host.allocate_producer_id().await.map_err(|e| {
                log::warn!("transactional id {id:?}: cannot allocate a producer id: {e}");
                COORDINATOR_NOT_AVAILABLE
            })?;
            next.previous_producer_id = m.producer_id;
            next.producer_id = fresh;
            next.producer_epoch = 0;
            next.last_epoch = -1;
        } else {
            next.producer_epoch += 1;
        }
        Ok(next)
    }

    /// Fences the producer of `m`'s open transaction by bumping the epoch
    /// and aborts the transaction with the new epoch, so the old producer's
    /// next request fails and its records are never visible. Used by a new
    /// InitProducerId and by the timeout.
    async fn fence_and_abort(self: &Rc<Self>, id: &str, m: &TxnMeta) {
        let Some(busy) = self.claim(id) else { return };
        // Another change may have landed since `m` was read.
        if self.get(id).as_ref() != Some(m) {
            return;
        }
        let next = TxnMeta {
            state: TxnState::PrepareAbort,
            producer_epoch: if m.producer_epoch < EPOCH_MAX { m.producer_epoch + 1 } else { m.producer_epoch },
            last_epoch: m.producer_epoch,
            last_update_ms: self.host.now_ms(),
            ..m.clone()
        };
        if self.log(id, next).await.is_ok() {
            drop(busy);
            self.complete(id).await;
        }
    }

    /// Writes the markers of `id`'s prepared transaction, then logs it
    /// complete. Markers that fail leave it prepared; the periodic check
    /// ([`Self::check_expired`]) tries again.
    pub async fn complete(&self, id: &str) {
        let Some(_busy) = self.claim(id) else { return };
        let Some(m) = self.get(id).filter(|m| m.state.is_prepared()) else { return };
        let commit = m.state == TxnState::PrepareCommit;
        let marker =
            TxnMarker { producer_id: m.producer_id, producer_epoch: m.producer_epoch, commit, coordinator_epoch: 0 };
        let partitions: Vec<(String, i32)> = m.partitions.iter().cloned().collect();
        let written = self.host.write_markers(marker, partitions).await;
        // A partition deleted since it joined the transaction has nothing
        // left to mark.
        let failed: Vec<_> =
            written.iter().filter(|(_, _, e)| *e != NONE && *e != UNKNOWN_TOPIC_OR_PARTITION).collect();
        if let Some((topic, partition, error)) = failed.first() {
            log::warn!(
                "transactional id {id:?}: marker for {topic}-{partition} failed (error {error}); \
                 {} partitions left, will retry",
                failed.len()
            );
            return;
        }
        let done = TxnMeta {
            state: if commit { TxnState::CompleteCommit } else { TxnState::CompleteAbort },
            partitions: BTreeSet::new(),
            last_update_ms: self.host.now_ms(),
            ..m
        };
        // Written, not waited on to be durable: its loss in a crash leaves
        // the prepare record last, and the restart writes the markers again
        // (a marker where the transaction already ended is an empty
        // transaction there). Whatever is logged for the id next is synced,
        // and with it this.
        let _ = self.log_as(id, done, false).await;
    }

    /// AddPartitionsToTxn: the partitions join the open transaction (which
    /// opens if none is); answered per partition.
    pub async fn add_partitions(&self, call: AddTxnPartitions) -> Vec<(String, i32, ErrorCode)> {
        let AddTxnPartitions { transactional_id: id, producer_id, producer_epoch, partitions } = call;
        let all = |error| partitions.iter().map(|(t, p)| (t.clone(), *p, error)).collect();
        let Some(_busy) = self.claim(&id) else { return all(CONCURRENT_TRANSACTIONS) };
        let Some(m) = self.get(&id) else { return all(INVALID_PRODUCER_ID_MAPPING) };
        if let Err(e) = m.check_producer(producer_id, producer_epoch) {
            return all(e);
        }
        if m.state.is_prepared() || m.state == TxnState::PrepareEpochFence {
            return all(CONCURRENT_TRANSACTIONS);
        }
        if partitions.iter().any(|(t, p)| !self.host.partition_exists(t, *p)) {
            return partitions
                .iter()
                .map(|(t, p)| {
                    let e = if self.host.partition_exists(t, *p) {
                        OPERATION_NOT_ATTEMPTED
                    } else {
                        UNKNOWN_TOPIC_OR_PARTITION
                    };
                    (t.clone(), *p, e)
                })
                .collect();
        }
        if m.state == TxnState::Ongoing && partitions.iter().all(|tp| m.partitions.contains(tp)) {
            return all(NONE);
        }
        let now = self.host.now_ms();
        let mut next = m.clone();
        if m.state != TxnState::Ongoing {
            next.start_ms = now;
            next.partitions.clear();
        }
        next.state = TxnState::Ongoing;
        next.last_update_ms = now;
        next.partitions.extend(partitions.iter().cloned());
        match self.log(&id, next).await {
            Ok(()) => all(NONE),
            Err(e) => all(e),
        }
    }

    /// EndTxn: logs the outcome, writes the markers, logs the end.
    pub async fn end(&self, call: EndTxn) -> ErrorCode {
        let EndTxn { transactional_id: id, producer_id, producer_epoch, commit } = call;
        let Some(busy) = self.claim(&id) else { return CONCURRENT_TRANSACTIONS };
        let Some(m) = self.get(&id) else { return INVALID_PRODUCER_ID_MAPPING };
        if let Err(e) = m.check_producer(producer_id, producer_epoch) {
            return e;
        }
        match (m.state, commit) {
            (TxnState::Ongoing, _) => {}
            // A retry of an end that went through.
            (TxnState::CompleteCommit, true) | (TxnState::CompleteAbort, false) => return NONE,
            (TxnState::PrepareCommit, true) | (TxnState::PrepareAbort, false) | (TxnState::PrepareEpochFence, _) => {
                return CONCURRENT_TRANSACTIONS
            }
            _ => return INVALID_TXN_STATE,
        }
        let prepared = TxnMeta {
            state: if commit { TxnState::PrepareCommit } else { TxnState::PrepareAbort },
            last_update_ms: self.host.now_ms(),
            ..m
        };
        if let Err(e) = self.log(&id, prepared).await {
            return e;
        }
        drop(busy);
        // The outcome is durable: the answer is NONE even if markers fail
        // now (they are retried); waiting for them makes the outcome
        // visible by the time the producer hears of it.
        self.complete(&id).await;
        NONE
    }

    /// Aborts every open transaction past its timeout (fencing its
    /// producer) and retries the markers of prepared ones. Returns how
    /// many transactions it aborted.
    pub async fn check_expired(self: &Rc<Self>) -> usize {
        let now = self.host.now_ms();
        let (expired, prepared): (Vec<_>, Vec<_>) = {
            let txns = self.txns.borrow();
            let busy = self.busy.borrow();
            let idle = txns.iter().filter(|(id, _)| !busy.contains(*id));
            let expired = idle
                .clone()
                .filter(|(_, m)| m.state == TxnState::Ongoing && m.start_ms + i64::from(m.timeout_ms) <= now)
                .map(|(id, m)| (id.clone(), m.clone()))
                .collect();
            let prepared = idle.filter(|(_, m)| m.state.is_prepared()).map(|(id, _)| id.clone()).collect();
            (expired, prepared)
        };
        for (id, m) in &expired {
            log::info!(
                "transactional id {id:?}: transaction of producer {} epoch {} timed out after {} ms, aborting",
                m.producer_id,
                m.producer_epoch,
                m.timeout_ms
            );
            self.fence_and_abort(id, m).await;
        }
        for id in prepared {
            self.complete(&id).await;
        }
        expired.len()
    }

    /// Takes one record of `__transaction_state` read back at start.
    pub fn replay(&self, key: &[u8], value: Option<&[u8]>) -> Result<(), crate::groups::records::DecodeError> {
        let id = super::records::decode_key(key)?;
        match value {
            None => {
                self.txns.borrow_mut().remove(&id);
            }
            Some(v) => {
                let meta = TxnMeta::from_value(TxnValue::decode(v)?);
                self.txns.borrow_mut().insert(id, meta);
            }
        }
        Ok(())
    }

    /// After replaying `__transaction_state` partition `partition`:
    /// finishes each of its transactions whose outcome was logged but
    /// whose markers may not all have been written (each in its own task).
    /// Returns how many.
    pub fn complete_prepared(self: &Rc<Self>, partition: i32) -> usize {
        let count = self.host.settings().partitions;
        let ids: Vec<String> = self
            .txns
            .borrow()
            .iter()
            .filter(|(id, m)| m.state.is_prepared() && partition_for(id, count) == partition)
            .map(|(id, _)| id.clone())
            .collect();
        for id in &ids {
            let me = self.clone();
            let id = id.clone();
            self.host.spawn(Box::pin(async move { me.complete(&id).await }));
        }
        ids.len()
    }

    /// Forgets the transactional ids of `__transaction_state` partition
    /// `partition`, whose leadership moved to another broker; a completion
    /// under way finishes its markers, and the new coordinator, replaying
    /// the prepare record, writes them again if it must.
    pub fn unload(&self, partition: i32) {
        let count = self.host.settings().partitions;
        self.txns.borrow_mut().retain(|id, _| partition_for(id, count) != partition);
    }

    pub fn describe(&self, call: DescribeTxns) -> Vec<TxnDescription> {
        let txns = self.txns.borrow();
        let describe = |id: String| match txns.get(&id) {
            None => TxnDescription {
                error: TRANSACTIONAL_ID_NOT_FOUND,
                transactional_id: id,
                state: "",
                timeout_ms: 0,
                start_ms: -1,
                producer_id: -1,
                producer_epoch: -1,
                partitions: Vec::new(),
            },
            Some(m) => TxnDescription {
                error: NONE,
                transactional_id: id,
                state: m.state.name(),
                timeout_ms: m.timeout_ms,
                start_ms: if m.state == TxnState::Ongoing || m.state.is_prepared() { m.start_ms } else { -1 },
                producer_id: m.producer_id,
                producer_epoch: m.producer_epoch,
                partitions: m.value().partitions,
            },
        };
        call.transactional_ids.into_iter().map(describe).collect()
    }

    pub fn list(&self, call: ListTxns) -> Vec<ListedTxn> {
        let txns = self.txns.borrow();
        let mut out: Vec<ListedTxn> = txns
            .iter()
            .filter(|(_, m)| call.states.is_empty() || call.states.iter().any(|s| s == m.state.name()))
            .filter(|(_, m)| call.producer_ids.is_empty() || call.producer_ids.contains(&m.producer_id))
            .map(|(id, m)| ListedTxn {
                transactional_id: id.clone(),
                producer_id: m.producer_id,
                state: m.state.name(),
            })
            .collect();
        out.sort_by(|a, b| a.transactional_id.cmp(&b.transactional_id));
        out
    }

    /// How many transactional ids this shard coordinates.
    pub fn len(&self) -> usize {
        self.txns.borrow().len()
    }

    pub fn is_empty(&self) -> bool {
        self.txns.borrow().is_empty()
    }
}
