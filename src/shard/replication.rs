//! Partitions copied to other brokers, by Kafka's replication protocol.
//!
//! Each partition of a quorum topic has replicas (`TopicMeta::replicas`),
//! one of them its leader. A follower's shard, the one that would own the
//! partition, fetches from the leader with the Fetch API as a replica
//! (`replica_id` = its node id) and appends what it gets at the leader's
//! offsets (`PartitionLog::append_copied`): one fetch task per leader
//! broker on each shard, for all the partitions it follows from there.
//!
//! The leader learns from each such fetch how far that follower's log
//! reaches, and moves the high watermark to the lowest end among the
//! in-sync replicas. Consumers read below the high watermark only, and an
//! acks=all produce is answered once the high watermark passes its
//! records: they are then on every in-sync replica. With fewer in-sync
//! replicas than the topic's `min.insync.replicas`, acks=all is refused
//! with NOT_ENOUGH_REPLICAS. The in-sync set shrinks when the quorum fences
//! a broker (`ClusterTopic::fence`) and grows when the leader sees a
//! follower reach the high watermark and asks the quorum (`JoinIsr`).
//!
//! All of this state is the owning shard's own (`Partition::replica`, a
//! cell): nothing on the data path takes a lock.

use std::{
    cell::RefCell,
    collections::{BTreeMap, BTreeSet},
    rc::Rc,
    time::{Duration, Instant},
};

use kafka_protocol::messages::{ApiKey, FetchResponse, OffsetForLeaderEpochResponse};

use super::{
    replica_requests::{epoch_request, exchange, fetch_request, Asked, EPOCH_REQUEST_VERSION},
    topics::{TopicHandle, TopicMeta, TopicTable},
    Partition, Shard,
};
use crate::{
    protocol::{
        errors::{self, ErrorCode},
        record_batch::BatchHeader,
    },
    storage::replica_files::{self, Epochs},
};

/// Pause after a failed fetch before the next try.
pub(super) const RETRY_PAUSE: Duration = Duration::from_millis(200);
/// Followed partitions one fetch answer writes and syncs at once.
const COPIES_AT_ONCE: usize = 64;
/// Longest an acks=all produce waits for its in-sync replicas.
const REPLICATION_WAIT_MAX: Duration = Duration::from_secs(30);

/// What this broker knows of a partition's copies. Alone, or for a
/// partition with one replica, the high watermark is the log end.
#[derive(Debug, Default)]
pub struct ReplicaState {
    /// Other brokers hold copies.
    pub replicated: bool,
    /// This broker leads the partition.
    pub leading: bool,
    pub epoch: i32,
    /// The in-sync replicas other than this broker.
    pub isr_others: Vec<i32>,
    /// Every replica other than this broker.
    pub others: Vec<i32>,
    pub min_insync: usize,
    /// Leader: where each follower's log ends, as its last fetch said.
    pub follower_ends: BTreeMap<i32, i64>,
    /// Leader: followers this leader asked the quorum to put in sync
    /// (asked once per epoch).
    pub joining: BTreeSet<i32>,
    /// Leader: when each follower last reached the log end (`shard::followers`),
    /// and the laggards it asked the quorum to drop (once per epoch).
    pub caught_up_at: BTreeMap<i32, Instant>,
    pub dropping: BTreeSet<i32>,
    /// Leader: the log end at each follower's last fetch, and when.
    pub last_fetch: BTreeMap<i32, (i64, Instant)>,
    /// Leader, with rack-aware reads: the high watermark each follower
    /// was last answered (`nearest_replica`).
    pub high_watermark_told: BTreeMap<i32, i64>,
    /// Replicated: the high watermark (never moves back).
    pub high_watermark: i64,
    /// The leader epochs the log holds records of (`replica_files`).
    pub epochs: Epochs,
    /// `epochs` gained an entry its file does not have yet.
    pub epochs_unsaved: bool,
    /// Follower: the leader epoch under which this log was last checked
    /// against the leader's (and cut where it ran past it).
    pub checked_epoch: Option<i32>,
}

impl Partition {
    /// The offset below which records are on every in-sync replica: what
    /// consumers may read and acks=all waits for.
    pub fn high_watermark(&self) -> i64 {
        let r = self.replica.borrow();
        if r.replicated {
            r.high_watermark.min(self.log.log_end())
        } else {
            self.log.log_end()
        }
    }

    /// The leader epoch of this copy's partition, in a quorum.
    pub fn epoch(&self) -> i32 {
        self.replica.borrow().epoch
    }

    /// Leader: the high watermark from the in-sync followers' ends; wakes
    /// readers and acks=all producers when it moved.
    pub(super) fn advance_high_watermark(&self) {
        let moved = {
            let mut r = self.replica.borrow_mut();
            if !r.replicated || !r.leading {
                return;
            }
            let lowest = r.isr_others.iter().map(|f| r.follower_ends.get(f).copied().unwrap_or(0)).min();
            let hw = lowest.unwrap_or(i64::MAX).min(self.log.log_end());
            let moved = hw > r.high_watermark;
            if moved {
                r.high_watermark = hw;
            }
            moved
        };
        if moved {
            self.appended.notify_all();
        }
    }
}

impl Shard {
    /// After a table is applied: brings each open partition's replica state
    /// to the table, and starts a fetch task for each leader this shard
    /// follows a partition of that has none.
    pub(super) fn follow_leaders(self: &Rc<Self>) {
        let table = self.topics();
        if table.node_id.is_none() {
            return;
        }
        self.refresh_open_replicas();
        let mut leaders = BTreeSet::new();
        for (topic, partition, p) in self.partitions.borrow().iter() {
            let Some(meta) = table.topics.get(topic) else { continue };
            if let Some(leader) = table.followed(meta, partition) {
                leaders.insert(leader);
            }
            if std::mem::take(&mut p.replica.borrow_mut().epochs_unsaved) {
                let (p, shard) = (p.clone(), self.id);
                glommio::spawn_local(async move {
                    let epochs = p.replica.borrow().epochs.clone();
                    if let Err(e) = save_epochs(&p, &epochs).await {
                        log::warn!("shard {shard}: {}: cannot save its leader epochs: {e}", p.log.name());
                    }
                })
                .detach();
            }
        }
        for leader in leaders {
            if self.fetchers.borrow_mut().insert(leader) {
                glommio::spawn_local(self.clone().fetch_from(leader)).detach();
            }
        }
    }

    /// Brings every open partition's replica state to the current table
    /// (no await: called as a table is swapped in).
    pub(super) fn refresh_open_replicas(&self) {
        let table = self.topics();
        let Some(me) = table.node_id else { return };
        for (topic, partition, p) in self.partitions.borrow().iter() {
            if let Some(meta) = table.topics.get(topic) {
                refresh_replica(&table, me, meta, partition, p);
            }
        }
    }

    /// The partitions this shard copies from `leader`, with the offsets
    /// its logs end at.
    fn followed_from(&self, leader: i32) -> Vec<(TopicHandle, i32, Rc<Partition>)> {
        let table = self.topics();
        let keys = self.partitions.borrow().keys();
        keys.into_iter()
            .filter_map(|(topic, partition)| {
                let (handle, meta) = table.topics.get_key_value(topic.as_str())?;
                (table.followed(meta, partition) == Some(leader))
                    .then(|| self.partition(&topic, partition).map(|p| (handle.clone(), partition, p)))
                    .flatten()
            })
            .collect()
    }

    /// One follower fetch loop: while this shard follows a partition led by
    /// `leader`, fetch them all from it and append what comes back.
    async fn fetch_from(self: Rc<Self>, leader: i32) {
        let me = self.settings.node_id;
        let mut connection: Option<glommio::net::TcpStream> = None;
        let mut correlation = 0i32;
        loop {
            let followed = self.followed_from(leader);
            if followed.is_empty() {
                break;
            }
            if connection.is_none() {
                match self.connect_to(leader).await {
                    Ok(stream) => connection = Some(stream),
                    Err(refused) => {
                        // Told at every retry, so a quorum that has just
                        // elected a leader (the dead broker led it too)
                        // hears within one pause (once a second measured
                        // 2.2-2.7 s from such a SIGKILL to acks=all again,
                        // `perf/partition-failover.sh`).
                        if refused {
                            self.report_unreachable(leader, Duration::ZERO);
                        }
                        glommio::timer::sleep(RETRY_PAUSE).await;
                        continue;
                    }
                }
            }
            let stream = connection.as_mut().expect("connected above");
            let unchecked: Vec<_> = followed
                .iter()
                .filter(|(_, _, p)| {
                    let r = p.replica.borrow();
                    r.checked_epoch != Some(r.epoch)
                })
                .cloned()
                .collect();
            if !unchecked.is_empty() {
                correlation = correlation.wrapping_add(1);
                match self.check_divergence(stream, correlation, leader, &unchecked).await {
                    Ok(true) => {}
                    Ok(false) => glommio::timer::sleep(RETRY_PAUSE).await,
                    Err(e) => {
                        log::warn!("shard {}: asking broker {leader} where our epochs end: {e}", self.id);
                        connection = None;
                        glommio::timer::sleep(RETRY_PAUSE).await;
                    }
                }
                continue;
            }
            correlation = correlation.wrapping_add(1);
            let request = fetch_request(me, &followed);
            let asked: Vec<Asked> = followed.iter().map(|(_, _, p)| Asked::now(p)).collect();
            match exchange(stream, correlation, &request).await {
                Ok(response) => {
                    if !self.take_answer(leader, &followed, &asked, response).await {
                        glommio::timer::sleep(RETRY_PAUSE).await;
                    }
                }
                Err(e) => {
                    log::warn!("shard {}: fetching from broker {leader} as its follower: {e}", self.id);
                    connection = None;
                    glommio::timer::sleep(RETRY_PAUSE).await;
                }
            }
        }
        self.fetchers.borrow_mut().remove(&leader);
    }

    /// A connection to `leader`'s first listener; Err(true) when it was
    /// refused (nothing listens there), Err(false) for any other failure.
    async fn connect_to(&self, leader: i32) -> Result<glommio::net::TcpStream, bool> {
        let listener = self.settings.listeners.first().map(|l| l.listener.clone()).unwrap_or_default();
        let (host, port) = crate::controller::broker_address(&self.settings, &listener, leader).ok_or(false)?;
        // The leader's shard of this shard's number: it owns what this one
        // follows when both brokers run as many shards (`replica_ports`).
        let port = crate::controller::shard_port(&self.settings, leader, self.id).unwrap_or(port);
        let addr = format!("{host}:{port}");
        match glommio::net::TcpStream::connect(addr.as_str()).await {
            Ok(s) => {
                let _ = s.set_nodelay(true);
                Ok(s)
            }
            Err(e) => {
                log::debug!("shard {}: cannot reach broker {leader} at {addr}: {e}", self.id);
                let refused = matches!(&e, glommio::GlommioError::IoError(io) if io.kind() == std::io::ErrorKind::ConnectionRefused);
                Err(refused)
            }
        }
    }

    /// Appends a leader's answer to the followed partitions; false when
    /// every partition came back with an error (the leader moved, or does
    /// not know yet that it leads), so the loop pauses before asking again.
    ///
    /// An answer is taken only for a partition still as it was asked
    /// (`Asked`): a table applied meanwhile may have moved it to a new
    /// leader epoch, checked against the new leader already, and the old
    /// leader's records would then stay in this log, diverged (the
    /// checker saw a batch of epoch 3 on one replica where the others held
    /// epoch 4's).
    async fn take_answer(
        &self,
        leader: i32,
        followed: &[(TopicHandle, i32, Rc<Partition>)],
        asked: &[Asked],
        response: FetchResponse,
    ) -> bool {
        let mut any_ok = false;
        let mut copies = Vec::new();
        let mut starts = Vec::new();
        for t in &response.responses {
            for answer in &t.partitions {
                let Some(at) =
                    followed.iter().position(|(n, i, _)| &**n == t.topic.0.as_str() && *i == answer.partition_index)
                else {
                    continue;
                };
                let ((topic, partition, p), asked) = (&followed[at], asked[at]);
                if !asked.still(p) {
                    log::debug!(
                        "shard {}: {} moved on since broker {leader} was asked; answer dropped",
                        self.id,
                        p.log.name()
                    );
                    continue;
                }
                if answer.error_code == errors::OFFSET_OUT_OF_RANGE && p.log.log_end() < answer.log_start_offset {
                    // The leader no longer has where this log ends
                    // (retention or DeleteRecords moved its start on).
                    any_ok = true;
                    starts.push((topic.clone(), *partition, p.clone(), answer.log_start_offset));
                    continue;
                }
                if answer.error_code != errors::NONE {
                    log::debug!(
                        "shard {}: {}-{partition} from broker {leader}: error {}",
                        self.id,
                        t.topic.0.as_str(),
                        answer.error_code
                    );
                    continue;
                }
                any_ok = true;
                let records = answer.records.clone().filter(|r| !r.is_empty());
                let marks = (answer.high_watermark, answer.log_start_offset);
                copies.push((topic.clone(), *partition, p.clone(), records, marks, asked));
            }
        }
        for (topic, partition, p, offset) in starts {
            self.rewrite(&topic, partition, &p, Rewrite::StartAt(offset), leader).await;
        }
        // The partitions' writes and syncs overlap: one round costs about
        // one sync, not one per partition.
        super::concurrent::for_each_bounded(
            copies.into_iter().map(
                |(topic, partition, mut p, records, (high_watermark, leader_start), mut asked)| async move {
                    if let Some(records) = records {
                        // An empty log started at its leader's start, and the
                        // leader's batch holding that offset starts before it:
                        // the log starts with the whole batch, as Kafka's does.
                        let first = BatchHeader::parse(&records, usize::MAX).map(|h| h.base_offset).ok();
                        let end = p.log.log_end();
                        if let Some(base) = first.filter(|&b| b < end && p.log.log_start() == end) {
                            match self.rewrite(&topic, partition, &p, Rewrite::StartAt(base), leader).await {
                                Some(reopened) => {
                                    // Emptied: nothing in it to disagree
                                    // with the leader it was asked under.
                                    let epoch = reopened.replica.borrow().epoch;
                                    if epoch == asked.epoch() {
                                        reopened.replica.borrow_mut().checked_epoch = Some(epoch);
                                    }
                                    asked = Asked::now(&reopened);
                                    p = reopened
                                }
                                None => return,
                            }
                        }
                        if let Err(e) = self.copy(&p, &records, asked).await {
                            log::warn!("shard {}: copying {} from broker {leader}: {e}", self.id, p.log.name());
                            return;
                        }
                        p.appended.notify_all();
                    }
                    let moved = {
                        let mut r = p.replica.borrow_mut();
                        let before = r.high_watermark;
                        r.high_watermark = r.high_watermark.max(high_watermark.min(p.log.log_end()));
                        r.high_watermark > before
                    };
                    if moved {
                        // Consumers reading this copy (KIP-392) wait for it.
                        p.appended.notify_all();
                    }
                    // The log start follows the leader's (retention,
                    // DeleteRecords), up to this copy's high watermark as in
                    // Kafka: a new leader then starts where the old one did.
                    if leader_start > p.log.log_start() && leader_start <= p.high_watermark() {
                        if let Err(e) = p.log.delete_records(leader_start).await {
                            log::warn!(
                                "shard {}: {} starting at its leader's {leader_start}: {e}",
                                self.id,
                                p.log.name()
                            );
                        }
                    }
                },
            ),
            COPIES_AT_ONCE,
        )
        .await;
        any_ok
    }

    /// Appends a leader's records to a followed partition. They are
    /// written (DMA, to the device) before the next fetch tells the leader
    /// they are here, and synced in the background: acks=all means synced
    /// on the leader and written on every in-sync replica (Kafka syncs
    /// neither; waiting for every follower's sync cost a sync per
    /// partition per round, 20× the p50 of acks=all). The epochs the
    /// records start are saved first, so a crash never leaves records of an
    /// epoch the file does not name.
    /// `asked`: how the partition was when the leader was asked; records
    /// are appended only while it still is (checked in the same turn as
    /// the append is queued).
    async fn copy(&self, p: &Rc<Partition>, records: &[u8], asked: Asked) -> Result<(), String> {
        let moved = || format!("moved to leader epoch {} since it was asked", p.replica.borrow().epoch);
        let learned = {
            let r = p.replica.borrow();
            epochs_after(&r.epochs, records, p.log.log_end())
        };
        if let Some(epochs) = learned {
            save_epochs(p, &epochs).await.map_err(|e| format!("cannot save its leader epochs: {e}"))?;
            if !asked.still(p) {
                return Err(moved());
            }
            p.replica.borrow_mut().epochs = epochs;
        }
        if !asked.still(p) {
            return Err(moved());
        }
        let end = p.log.append_copied(records).await.map_err(|e| e.to_string())?;
        let (p, shard) = (p.clone(), self.id);
        glommio::spawn_local(async move {
            if let Err(e) = p.log.sync_through(end).await {
                log::warn!("shard {shard}: syncing {} as a follower: {e}", p.log.name());
            }
        })
        .detach();
        Ok(())
    }

    /// Follower, on a new leader epoch: asks the leader where this log's
    /// last epoch ends in its log, and cuts this log there when it runs
    /// past it. True when every partition asked about got its answer.
    async fn check_divergence(
        &self,
        stream: &mut glommio::net::TcpStream,
        correlation: i32,
        leader: i32,
        unchecked: &[(TopicHandle, i32, Rc<Partition>)],
    ) -> Result<bool, crate::client::ClientError> {
        let mut asked = Vec::new();
        for item in unchecked {
            let p = &item.2;
            if p.log.log_end() == p.log.log_start() {
                // Nothing here to disagree with the leader.
                let mut r = p.replica.borrow_mut();
                r.checked_epoch = Some(r.epoch);
            } else {
                asked.push(item.clone());
            }
        }
        if asked.is_empty() {
            return Ok(true);
        }
        let request = epoch_request(self.settings.node_id, &asked);
        let version = EPOCH_REQUEST_VERSION;
        let api = ApiKey::OffsetForLeaderEpoch;
        let frame =
            crate::protocol::client::request_frame(api, version, correlation, Some("shardlog-replica"), &request)
                .map_err(crate::client::ClientError::from)?;
        crate::client::nonblocking::write_frame(stream, api, version, &frame).await?;
        let response =
            crate::client::nonblocking::read_response::<OffsetForLeaderEpochResponse>(stream, api, version).await?.body;
        let mut all = true;
        for (topic, partition, p) in &asked {
            let answer = response
                .topics
                .iter()
                .filter(|t| t.topic.0.as_str() == &**topic)
                .flat_map(|t| t.partitions.iter())
                .find(|a| a.partition == *partition);
            let Some(answer) = answer.filter(|a| a.error_code == errors::NONE) else {
                all = false;
                continue;
            };
            let cut = {
                let r = p.replica.borrow();
                let (start, end) = (p.log.log_start(), p.log.log_end());
                replica_files::divergence_cut(&r.epochs, start, end, answer.leader_epoch, answer.end_offset)
            };
            if let Some(offset) = cut {
                self.rewrite(topic, *partition, p, Rewrite::Cut(offset), leader).await;
            } else {
                let mut r = p.replica.borrow_mut();
                r.checked_epoch = Some(r.epoch);
            }
        }
        Ok(all)
    }

    /// Rewrites a followed partition's files as `how` says: closes it,
    /// changes its files and opens it again; the partition as reopened.
    async fn rewrite(
        &self,
        topic: &TopicHandle,
        partition: i32,
        p: &Rc<Partition>,
        how: Rewrite,
        leader: i32,
    ) -> Option<Rc<Partition>> {
        let _permit = self.reopen_permit.acquire_permit(1).await.expect("reopen permit: never closed");
        let name = p.log.name().clone();
        let p = self.partitions.borrow_mut().remove(topic, partition).filter(|open| Rc::ptr_eq(open, p))?;
        let end = p.log.log_end();
        if let Err(e) = p.log.close().await {
            log::warn!("shard {}: closing {name} to rewrite it: {e}", self.id);
        }
        p.appended.notify_all();
        let dir = p.log.dir().to_path_buf();
        let done = glommio::executor()
            .spawn_blocking(move || match how {
                Rewrite::Cut(offset) => replica_files::truncate_dir(&dir, offset),
                Rewrite::StartAt(offset) => replica_files::start_at(&dir, offset),
            })
            .await;
        match (done, how) {
            (Ok(bytes), Rewrite::Cut(offset)) => log::warn!(
                "shard {}: {name}: cut at offset {offset} (it ended at {end}): {bytes} bytes broker {leader}, its leader, does not have",
                self.id
            ),
            (Ok(bytes), Rewrite::StartAt(offset)) => log::warn!(
                "shard {}: {name}: emptied ({bytes} bytes) to start at offset {offset}: it ended at {end}, before what broker {leader}, its leader, still has",
                self.id
            ),
            (Err(e), how) => log::error!("shard {}: {name}: cannot rewrite it ({how:?}): {e}", self.id),
        }
        let table = self.topics();
        let (Some(meta), Some(me)) = (table.topics.get(&**topic), table.node_id) else { return None };
        if super::router::host(&table, topic, partition, self.count) != Some(self.id) {
            return None;
        }
        if let Err(e) = self.open_partition(topic, partition, meta).await {
            log::error!("shard {}: {name}: cannot open it again after the rewrite: {e}", self.id);
            return None;
        }
        let p = self.partition(topic, partition)?;
        refresh_replica(&table, me, meta, partition, &p);
        Some(p)
    }

    /// On opening a replicated partition: the epochs its file names (a
    /// leader's new epoch is added by `refresh_replica`).
    pub(super) async fn load_epochs(&self, p: &Partition) {
        let dir = p.log.dir().to_path_buf();
        let epochs = glommio::executor().spawn_blocking(move || replica_files::load_epochs(&dir)).await;
        p.replica.borrow_mut().epochs = epochs;
    }

    /// The owner's answer to OffsetForLeaderEpoch: where epoch `asked` ends
    /// in this partition's log, as (epoch, end offset).
    pub(super) fn epoch_end_local(&self, topic: &str, partition: i32, asked: i32) -> (ErrorCode, i32, i64) {
        let Some(p) = self.partition(topic, partition) else {
            return (self.no_partition_error(topic, partition), -1, -1);
        };
        let r = p.replica.borrow();
        let (epoch, end) = replica_files::epoch_end(&r.epochs, asked, p.log.log_start(), p.log.log_end());
        (errors::NONE, epoch, end)
    }

    /// Leader, acks=all: refuses the produce when the partition has fewer
    /// in-sync replicas than `min.insync.replicas`.
    pub(super) fn enough_replicas(p: &Partition) -> Result<(), (ErrorCode, String)> {
        let r = p.replica.borrow();
        let in_sync = r.isr_others.len() + 1;
        if r.replicated && in_sync < r.min_insync {
            return Err((
                errors::NOT_ENOUGH_REPLICAS,
                format!("{}: {in_sync} in-sync replica(s), min.insync.replicas is {}", p.log.name(), r.min_insync),
            ));
        }
        Ok(())
    }

    /// Leader, acks=all: waits until the in-sync replicas hold everything
    /// below `end`. If the set shrank below `min.insync.replicas` since the
    /// append, the answer is NOT_ENOUGH_REPLICAS_AFTER_APPEND, as in Kafka.
    pub(super) async fn wait_replicated(p: &Partition, end: i64) -> Result<(), (ErrorCode, String)> {
        let deadline = Instant::now() + REPLICATION_WAIT_MAX;
        loop {
            if p.high_watermark() >= end {
                return Self::enough_replicas(p).map_err(|(_, m)| (errors::NOT_ENOUGH_REPLICAS_AFTER_APPEND, m));
            }
            if !p.replica.borrow().leading {
                return Err((
                    errors::NOT_LEADER_OR_FOLLOWER,
                    format!("{}: leadership moved before the records were replicated", p.log.name()),
                ));
            }
            let now = Instant::now();
            if now >= deadline {
                return Err((
                    errors::REQUEST_TIMED_OUT,
                    format!("{}: the in-sync replicas did not reach offset {end} in time", p.log.name()),
                ));
            }
            let (tx, rx) = futures_channel::oneshot::channel::<()>();
            p.appended.register(Rc::new(RefCell::new(Some(tx))));
            futures_lite::future::or(
                async {
                    let _ = rx.await;
                },
                glommio::timer::sleep((deadline - now).min(Duration::from_millis(100))),
            )
            .await;
        }
    }
}

/// What `rewrite` does to a follower's files.
#[derive(Debug, Clone, Copy)]
enum Rewrite {
    /// Ends the log before this offset (divergence: `truncate_dir`).
    Cut(i64),
    /// Empties the log to start at this offset (`start_at`): it ended
    /// before its leader's start, or the leader's first batch from there
    /// starts before it.
    StartAt(i64),
}

/// `epochs` with the epochs that batches in `records` past `log_end`
/// start, if there are any new ones.
fn epochs_after(epochs: &Epochs, records: &[u8], log_end: i64) -> Option<Epochs> {
    let mut out = epochs.clone();
    let mut at = 0;
    while at < records.len() {
        let Ok(h) = BatchHeader::parse(&records[at..], usize::MAX) else { break };
        if h.last_offset() >= log_end && out.last().is_none_or(|&(e, _)| h.leader_epoch > e) {
            out.push((h.leader_epoch, h.base_offset.max(log_end)));
        }
        at += h.total_bytes();
    }
    (out.len() != epochs.len()).then_some(out)
}

async fn save_epochs(p: &Partition, epochs: &Epochs) -> std::io::Result<()> {
    let (dir, epochs) = (p.log.dir().to_path_buf(), epochs.clone());
    glommio::executor().spawn_blocking(move || replica_files::save_epochs(&dir, &epochs)).await
}

/// Brings a partition's replica state to the table: its replicas, in-sync
/// set, epoch and whether this broker leads it.
pub(super) fn refresh_replica(table: &TopicTable, me: i32, meta: &TopicMeta, partition: i32, p: &Partition) {
    let replicas = meta.replicas_of(partition);
    let isr = meta.isr_of(partition);
    let leading = table.led_elsewhere(meta, partition).is_none();
    let min_insync = meta.configs.get("min.insync.replicas").and_then(|v| v.parse().ok()).unwrap_or(1);
    {
        let mut r = p.replica.borrow_mut();
        let epoch = meta.epoch_of(partition);
        if epoch != r.epoch || leading != r.leading {
            r.joining.clear();
            r.follower_ends.clear();
            r.caught_up_at.clear();
            r.dropping.clear();
            r.last_fetch.clear();
            r.high_watermark_told.clear();
            r.checked_epoch = None;
        }
        r.replicated = replicas.len() > 1;
        r.leading = leading;
        r.epoch = epoch;
        r.others = replicas.iter().copied().filter(|&b| b != me).collect();
        r.isr_others = isr.iter().copied().filter(|&b| b != me).collect();
        r.joining.retain(|b| !isr.contains(b));
        r.dropping.retain(|b| isr.contains(b));
        // Every in-sync follower gets a whole lag window from when this
        // broker first sees it in the set.
        let now = Instant::now();
        r.caught_up_at.retain(|b, _| isr.contains(b));
        for &b in isr.iter().filter(|&&b| b != me) {
            r.caught_up_at.entry(b).or_insert(now);
        }
        r.min_insync = min_insync;
        if leading && r.replicated {
            // Leading under a new epoch: appends carry it from now on, and
            // it starts at the log end (followers ask where theirs end).
            p.log.set_leader_epoch(epoch);
            if epoch > 0 && r.epochs.last().is_none_or(|&(e, _)| e < epoch) {
                if r.epochs.is_empty() && p.log.log_end() > p.log.log_start() {
                    r.epochs.push((0, p.log.log_start()));
                }
                r.epochs.push((epoch, p.log.log_end()));
                r.epochs_unsaved = true;
            }
        }
    }
    p.advance_high_watermark();
}
