//! What a shard does with a request for partitions it owns, and what the
//! controller shard does with topic changes.

use std::{
    rc::Rc,
    sync::Arc,
    time::{Duration, Instant},
};

use crate::protocol::errors::{self, ErrorCode};
use crate::{
    metrics::stages::AppendStages,
    protocol::record_batch::BatchError,
    shard::{
        messages::{
            DeleteRecords, ListOffset, MarkerWritten, OffsetFound, OffsetListed, OpenFailure, Produce, Produced,
            ProducerIdError, ReadItem, ReadOutcome, WriteTxnMarkers,
        },
        notify::Waiter,
        router,
        topics::{self, TopicHandle, TopicMeta, TopicTable},
        Partition, Shard,
    },
    storage::{
        producers::SequenceError, AppendTimings, Clock, Durability, Faults, PartitionLog, PartitionName, StorageError,
    },
};

/// The end of the current block of producer ids, in the data directory.
const PRODUCER_IDS_FILE: &str = "producer-ids";
/// Producer ids reserved per write of `PRODUCER_IDS_FILE`.
const PRODUCER_ID_BLOCK: i64 = 1000;

/// In a metadata quorum, a broker's producer ids are its node id shifted
/// this far, or'ed with its own count: 2^40 ids per broker, node ids below
/// 2^23 (checked at start) so every id stays a positive int64.
pub const PRODUCER_ID_NODE_SHIFT: u32 = 40;

/// The Kafka error code for a storage error.
pub fn error_code(e: &StorageError) -> ErrorCode {
    match e {
        StorageError::InvalidBatch { reason: BatchError::BadLength { .. }, .. } => errors::MESSAGE_TOO_LARGE,
        StorageError::InvalidBatch { reason: BatchError::BadRecordCount { .. }, .. } => errors::INVALID_RECORD,
        StorageError::InvalidBatch {
            reason: BatchError::ControlBatch | BatchError::TransactionalWithoutSequence,
            ..
        } => errors::INVALID_RECORD,
        StorageError::InvalidBatch { .. } => errors::CORRUPT_MESSAGE,
        StorageError::OffsetOutOfRange { .. } => errors::OFFSET_OUT_OF_RANGE,
        StorageError::Sequence { reason, .. } => match reason {
            SequenceError::OutOfOrder { .. } => errors::OUT_OF_ORDER_SEQUENCE_NUMBER,
            SequenceError::StaleEpoch { .. } => errors::INVALID_PRODUCER_EPOCH,
            SequenceError::UnknownProducer { .. } => errors::UNKNOWN_PRODUCER_ID,
        },
        // The client refreshes its metadata and retries, reaching the
        // partition's new log.
        StorageError::Closed { .. } => errors::NOT_LEADER_OR_FOLLOWER,
        _ => errors::KAFKA_STORAGE_ERROR,
    }
}

/// A Produce answer, with where the append's time went: the hop there
/// (`sent` → `started`), the log's waits and I/O, and the rest of the
/// owner's work as the append stage.
fn produced(
    error: ErrorCode,
    base_offset: i64,
    log_start: i64,
    message: Option<String>,
    sent: Instant,
    started: Instant,
    timings: &AppendTimings,
) -> Produced {
    let finished = Instant::now();
    let waits = timings.permit + timings.roll + timings.write + timings.sync;
    let stages = AppendStages {
        hop: started.saturating_duration_since(sent),
        permit: timings.permit,
        roll: timings.roll,
        write: timings.write,
        fsync: timings.sync,
        append: finished.saturating_duration_since(started).saturating_sub(waits),
    };
    Produced { error, base_offset, log_start, message, stages, finished }
}

impl Shard {
    /// Controller only: the next producer id. In a metadata quorum each
    /// broker hands out ids of its own range, its node id in the bits above
    /// `PRODUCER_ID_NODE_SHIFT`: two brokers' producers never share an id on
    /// a partition they both write to. (Kafka has its controller hand out
    /// blocks; a broker's own range needs no round trip.)
    pub(super) async fn allocate_producer_id(&self) -> Result<i64, ProducerIdError> {
        let local = self.allocate_local_producer_id().await?;
        Ok(match &self.settings.cluster {
            Some(_) => (i64::from(self.settings.node_id) << PRODUCER_ID_NODE_SHIFT) | local,
            None => local,
        })
    }

    /// The next id of this broker's range. Ids are handed out from blocks
    /// whose end is persisted (write new, fsync, rename) before the first id
    /// of a block is used, so no id is ever given twice, even after a crash.
    async fn allocate_local_producer_id(&self) -> Result<i64, ProducerIdError> {
        let _permit = self.controller_permit.acquire_permit(1).await.expect("controller permit: never closed");
        let (next, end) = self.producer_ids.get();
        if next < end {
            self.producer_ids.set((next + 1, end));
            return Ok(next);
        }
        let path = self.settings.data_dir.join(PRODUCER_IDS_FILE);
        let start = match std::fs::read_to_string(&path) {
            Ok(text) => {
                text.trim().parse::<i64>().map_err(|reason| ProducerIdError::Parse { file: path.clone(), reason })?
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => 0,
            Err(source) => return Err(ProducerIdError::Read { file: path, source }),
        }
        .max(next);
        let block_end = start + PRODUCER_ID_BLOCK;
        let to_write = path.clone();
        glommio::executor()
            .spawn_blocking(move || {
                crate::storage::file::write_atomically(&to_write, format!("{block_end}\n").as_bytes())
            })
            .await
            .map_err(|e| ProducerIdError::Persist { file: path.clone(), reason: e.to_string() })?;
        self.producer_ids.set((start + 1, block_end));
        Ok(start)
    }

    pub(super) async fn produce_local(&self, call: Produce) -> Produced {
        let Produce { topic, partition, batch, durable, sent } = call;
        let started = Instant::now();
        let Some(p) = self.partition(&topic, partition) else {
            let error = self.no_partition_error(&topic, partition);
            return produced(error, -1, -1, None, sent, started, &Default::default());
        };
        let mut timings = AppendTimings::default();
        if durable {
            if let Err((error, message)) = Self::enough_replicas(&p) {
                return produced(error, -1, -1, Some(message), sent, started, &timings);
            }
        }
        let durability = if durable { Durability::WrittenSyncNext } else { Durability::Written };
        let appended = p.log.append_timed(batch, durability, &mut timings).await;
        // Written records are readable: wake long-polling readers now, not
        // after the sync (a write that failed after others were queued may
        // still have landed data for earlier batches: wake them either way).
        p.appended.notify_all();
        // acks=all: this broker's sync and the in-sync replicas' copies
        // (`replication`) run at once; the answer waits for both.
        let mut replicated = Ok(());
        let appended = match appended {
            Ok(info) if durable => {
                let waited = Instant::now();
                let end = info.last_offset + 1;
                let (synced, copied) =
                    futures_lite::future::zip(p.log.sync_through(end), Self::wait_replicated(&p, end)).await;
                timings.sync += waited.elapsed();
                replicated = copied;
                synced.map(|()| info)
            }
            other => other,
        };
        if let (Ok(_), Err((error, message))) = (&appended, replicated) {
            log::warn!("shard {}: {message}", self.id);
            return produced(error, -1, -1, Some(message), sent, started, &timings);
        }
        match appended {
            Ok(info) => produced(errors::NONE, info.base_offset, p.log.log_start(), None, sent, started, &timings),
            Err(e) => {
                log::warn!("shard {}: produce to {topic}-{partition} failed: {e}", self.id);
                produced(error_code(&e), -1, -1, Some(e.to_string()), sent, started, &timings)
            }
        }
    }

    /// A copy of this shard's counters, partitions and committed offsets.
    pub(super) fn metrics_snapshot(&self) -> crate::metrics::snapshot::ShardSnapshot {
        use crate::metrics::snapshot::{PartitionSnapshot, ShardSnapshot};
        let mut partitions: Vec<PartitionSnapshot> = self
            .partitions
            .borrow()
            .iter()
            .map(|(topic, partition, p)| {
                let st = p.log.stats();
                PartitionSnapshot {
                    topic: topic.to_string(),
                    partition,
                    records_in: st.records_appended.get(),
                    bytes_in: st.bytes_appended.get(),
                    records_out: st.records_read.get(),
                    bytes_out: st.bytes_read.get(),
                    log_start: p.log.log_start(),
                    log_end: p.log.log_end(),
                    segments: p.log.segment_count() as u64,
                    segment_bytes: p.log.size_bytes(),
                    fsyncs: st.syncs.get(),
                    extending_writes: st.extending_writes.get(),
                    segment_writes: st.segment_writes.get(),
                    fsync_seconds: st.sync_seconds.snapshot(),
                    appends_per_fsync: st.appends_per_sync.snapshot(),
                }
            })
            .collect();
        partitions.sort_by(|a, b| (&a.topic, a.partition).cmp(&(&b.topic, b.partition)));
        let m = &self.metrics;
        ShardSnapshot {
            shard: self.id,
            connections: self.connections.get() as u64,
            requests_in_flight: self.inflight.get() as u64,
            requests: m.requests(),
            stages: m.stages(),
            produce_errors: m.produce_errors.borrow().iter().map(|(k, v)| (*k, *v)).collect(),
            fetch_errors: m.fetch_errors.borrow().iter().map(|(k, v)| (*k, *v)).collect(),
            authorization_denied: m.authorization_denied.borrow().iter().map(|(k, v)| (*k, *v)).collect(),
            long_poll_waiters: m.long_poll_waiters.get(),
            follower_reads: m.follower_reads.get(),
            read_replica_referrals: m.read_replica_referrals.get(),
            high_watermark_answers: m.high_watermark_answers.get(),
            cross_shard_sent: m.cross_shard_sent.get(),
            cross_shard_received: m.cross_shard_received.get(),
            cross_shard_outstanding: m.cross_shard_outstanding.get(),
            sasl_authentications: m.sasl_authentications.borrow().iter().map(|((a, b), n)| (*a, *b, *n)).collect(),
            tls_handshake_failures: m.tls_handshake_failures.borrow().iter().map(|(l, n)| (l.clone(), *n)).collect(),
            wakeup_lag: m.wakeup_lag.snapshot(),
            partitions,
            committed: self.groups.committed(),
            memory: self.memory_snapshot(),
            fetch_sessions: crate::server::fetch_sessions::usage(),
            journal: self.journal.get().map_or_else(Default::default, |j| crate::metrics::snapshot::JournalSnapshot {
                writes: j.stats.writes.get(),
                syncs: j.stats.syncs.get(),
                bytes: j.stats.bytes.get(),
                entries: j.stats.entries.get(),
                rotations: j.stats.rotations.get(),
                rotation_waits: j.stats.rotation_waits.get(),
            }),
        }
    }

    fn memory_snapshot(&self) -> crate::metrics::snapshot::MemorySnapshot {
        let budget = &self.settings.memory;
        let requests_budget = self.settings.max_inflight_bytes_per_shard as u64;
        crate::metrics::snapshot::MemorySnapshot {
            budget_bytes: budget.per_shard,
            requests_budget_bytes: requests_budget,
            requests_bytes: requests_budget.saturating_sub(self.inflight_bytes.available()),
            partitions_bytes: self.partitions.borrow().len() as u64 * crate::server::memory::PARTITION_STATE_BYTES,
            cache: crate::storage::batch_cache::shard_cache().usage(),
        }
    }

    /// Reads each item in order, each up to what is left of `max_bytes`;
    /// once that is taken the rest are answered without data, unread (a
    /// fetch of thousands of partitions would otherwise read megabytes from
    /// each only to drop them). The first item with data may exceed it.
    /// `read_committed`: only batches below each partition's last stable
    /// offset, with the aborted transactions overlapping them.
    /// `replica`: the node id of a follower fetching (it reads to the log
    /// end and tells the leader where its own log ends), or -1 for a
    /// consumer (it reads below the high watermark, here whether this
    /// broker leads the partition or follows it). `client_rack`: a
    /// consumer's rack, which may send it to another replica
    /// (`nearest_replica`).
    pub(super) async fn read_local(
        self: &Rc<Self>,
        items: Vec<ReadItem>,
        max_bytes: usize,
        read_committed: bool,
        replica: i32,
        client_rack: Option<Arc<str>>,
    ) -> Vec<ReadOutcome> {
        let mut out = Vec::with_capacity(items.len());
        let mut taken = 0usize;
        for mut item in items {
            let Some(p) = self.partition(&item.topic, item.partition) else {
                out.push(ReadOutcome::empty(self.no_partition_error(&item.topic, item.partition), -1, -1));
                continue;
            };
            if let Some(error) = self.leader_epoch_error(&p, item.leader_epoch) {
                out.push(ReadOutcome::empty(error, -1, -1));
                continue;
            }
            if replica >= 0 {
                self.follower_fetched(&item.topic, item.partition, &p, replica, item.offset);
            }
            let (high_watermark, log_start) = (p.high_watermark(), p.log.log_start());
            let high_watermark_news = replica >= 0 && self.high_watermark_news(&p, replica, high_watermark);
            let last_stable_offset = p.log.last_stable_offset().min(high_watermark);
            if replica < 0 {
                if let Some(node) = self.read_replica_for(&p, item.offset, client_rack.as_deref()) {
                    crate::metrics::add(&self.metrics.read_replica_referrals, 1);
                    let empty = ReadOutcome::empty(errors::NONE, high_watermark, log_start);
                    out.push(ReadOutcome { last_stable_offset, preferred_replica: Some(node), ..empty });
                    continue;
                }
                let r = p.replica.borrow();
                if !r.leading && r.replicated {
                    crate::metrics::add(&self.metrics.follower_reads, 1);
                }
            }
            let readable_end = if replica >= 0 { p.log.log_end() } else { high_watermark };
            item.max_bytes = item.max_bytes.min(max_bytes.saturating_sub(taken));
            if item.max_bytes == 0 && taken > 0 {
                // Unread, but an offset the log does not hold is still said.
                let error = if item.offset < log_start || item.offset > p.log.log_end() {
                    errors::OFFSET_OUT_OF_RANGE
                } else {
                    errors::NONE
                };
                let empty = ReadOutcome::empty(error, high_watermark, log_start);
                out.push(ReadOutcome { last_stable_offset, high_watermark_news, ..empty });
                continue;
            }
            let upper = if read_committed { last_stable_offset } else { readable_end };
            let _permit = self.reads.acquire_permit(1).await.expect("read permits: never closed");
            let outcome = match p.log.read_below(item.offset, item.max_bytes, upper).await {
                Ok(slice) => {
                    taken += slice.chunks.iter().map(|c| c.len()).sum::<usize>();
                    // Kafka answers the aborted list only to read_committed
                    // readers, who drop those producers' records with it.
                    let aborted = if read_committed && !slice.chunks.is_empty() {
                        let found = p.log.aborted_transactions(item.offset, last_stable_offset);
                        found.into_iter().map(|a| (a.producer_id, a.first_offset)).collect()
                    } else {
                        Vec::new()
                    };
                    let high_watermark = p.high_watermark();
                    ReadOutcome {
                        error: errors::NONE,
                        high_watermark,
                        log_start: slice.log_start,
                        last_stable_offset: p.log.last_stable_offset().min(high_watermark),
                        aborted,
                        chunks: slice.chunks,
                        preferred_replica: None,
                        high_watermark_news,
                    }
                }
                Err(e) => {
                    if !matches!(e, StorageError::OffsetOutOfRange { .. }) {
                        log::warn!("shard {}: read of {} at {}: {e}", self.id, p.log.name(), item.offset);
                    }
                    ReadOutcome { last_stable_offset, ..ReadOutcome::empty(error_code(&e), high_watermark, log_start) }
                }
            };
            out.push(outcome);
        }
        out
    }

    /// Returns when any listed partition has data at or past its offset
    /// (below its last stable offset for `read_committed`), or after
    /// `wait_ms`. Woken by appends and markers; no polling.
    pub(super) async fn wait_for_data(
        &self,
        items: Vec<(TopicHandle, i32, i64)>,
        wait_ms: u64,
        read_committed: bool,
        replica: bool,
    ) {
        let (tx, rx) = futures_channel::oneshot::channel::<()>();
        let waiter: Waiter = Rc::new(std::cell::RefCell::new(Some(tx)));
        for (topic, partition, offset) in items {
            let readable_end = |p: &Partition| {
                if replica {
                    p.log.log_end()
                } else if read_committed {
                    p.log.last_stable_offset().min(p.high_watermark())
                } else {
                    p.high_watermark()
                }
            };
            match self.partition(&topic, partition) {
                Some(p) if readable_end(&p) <= offset && offset >= p.log.log_start() => {
                    p.appended.register(waiter.clone())
                }
                // Data already there, or an error the fetch should report now.
                _ => return,
            }
        }
        crate::metrics::add(&self.metrics.long_poll_waiters, 1);
        futures_lite::future::or(
            async {
                let _ = rx.await;
            },
            glommio::timer::sleep(Duration::from_millis(wait_ms)),
        )
        .await;
        crate::metrics::sub(&self.metrics.long_poll_waiters, 1);
    }

    /// ListOffsets for one partition this shard owns. In a quorum the
    /// client's leader epoch is checked first, as a fetch's is; the answer
    /// carries the partition's epoch, which a client validates its new
    /// position against (KIP-320).
    pub(super) async fn list_offset_local(&self, call: ListOffset) -> OffsetListed {
        let ListOffset { topic, partition, timestamp, read_committed, leader_epoch } = call;
        let failed = |error| OffsetListed { found: OffsetFound { error, offset: -1, timestamp: -1 }, leader_epoch: -1 };
        let Some(p) = self.partition(&topic, partition) else {
            return failed(self.no_partition_error(&topic, partition));
        };
        if let Some(error) = self.leader_epoch_error(&p, leader_epoch) {
            return failed(error);
        }
        let found = offset_for(&p, timestamp, read_committed).await;
        let leader_epoch = if found.error == errors::NONE { p.epoch() } else { -1 };
        OffsetListed { found, leader_epoch }
    }

    pub(super) async fn delete_records_local(&self, call: DeleteRecords) -> OffsetFound {
        let DeleteRecords { topic, partition, offset } = call;
        let Some(p) = self.partition(&topic, partition) else {
            return OffsetFound { error: self.no_partition_error(&topic, partition), offset: -1, timestamp: -1 };
        };
        match p.log.delete_records(offset).await {
            Ok(low_watermark) => OffsetFound { error: errors::NONE, offset: low_watermark, timestamp: -1 },
            Err(e) => {
                log::warn!("shard {}: DeleteRecords {topic}-{partition} to {offset}: {e}", self.id);
                OffsetFound { error: error_code(&e), offset: -1, timestamp: -1 }
            }
        }
    }

    /// Writes a transaction marker to each listed partition this shard owns,
    /// all at once (each waits for its own sync), and answers per partition.
    pub(super) async fn write_txn_markers(self: &Rc<Self>, call: WriteTxnMarkers) -> Vec<MarkerWritten> {
        let WriteTxnMarkers { marker, partitions } = call;
        let now = crate::shard::group_glue::system_now_ms();
        let tasks: Vec<_> = partitions
            .into_iter()
            .map(|(topic, partition)| {
                let shard = self.clone();
                glommio::spawn_local(async move {
                    let error = match shard.partition(&topic, partition) {
                        None => errors::UNKNOWN_TOPIC_OR_PARTITION,
                        Some(p) => match shard.write_one_marker(&p, &topic, partition, marker, now).await {
                            Ok(()) => errors::NONE,
                            Err(e) => {
                                log::warn!("shard {}: transaction marker for {topic}-{partition}: {e}", shard.id);
                                error_code(&e)
                            }
                        },
                    };
                    MarkerWritten { topic, partition, error }
                })
            })
            .collect();
        let mut written = Vec::with_capacity(tasks.len());
        for task in tasks {
            written.push(task.await);
        }
        written
    }

    /// One partition's marker: a commit's records are readable
    /// read_committed at once (readers woken before the marker's write:
    /// the coordinator's prepare record, durable before any marker is sent,
    /// already holds the outcome); then the marker is written, readers
    /// woken again (an abort moves the last stable offset at the write),
    /// and synced before the coordinator hears of it. A marker lost to a
    /// crash before its sync is written again from that prepare record;
    /// until then the transaction is open again after the restart, so
    /// readers wait but never see less than they saw.
    async fn write_one_marker(
        &self,
        p: &Partition,
        topic: &TopicHandle,
        partition: i32,
        marker: crate::protocol::record_batch::TxnMarker,
        now: i64,
    ) -> Result<(), StorageError> {
        if p.log.commit_decided(&marker) {
            p.appended.notify_all();
        }
        let written = p.log.append_marker(marker, now, Durability::WrittenSyncNext).await;
        p.appended.notify_all();
        let info = written?;
        p.log.sync_through(info.last_offset + 1).await?;
        // The group coordinator holds the producer's transactional offsets
        // until this marker is durable.
        if &**topic == crate::groups::OFFSETS_TOPIC {
            self.groups.on_txn_marker(partition, marker.producer_id, marker.producer_epoch, marker.commit);
        }
        Ok(())
    }

    /// Takes a new topic table: opens partitions newly assigned here, closes
    /// (and for deleted topics or partitions removes) the ones no longer
    /// here. Returns the partitions that could not be opened, with why.
    pub async fn apply_topics(self: &Rc<Self>, table: Arc<TopicTable>) -> Vec<OpenFailure> {
        // Not while a follower's log is being cut and opened again.
        let _permit = self.reopen_permit.acquire_permit(1).await.expect("reopen permit: never closed");
        let before = std::mem::replace(&mut *self.topics.borrow_mut(), table.clone());
        // Before any await: a partition this broker now leads takes no
        // append under its old epoch.
        self.refresh_open_replicas();
        let coordinators_gained = self.take_coordinator_leadership();
        let open: Vec<(String, i32)> = self.partitions.borrow().keys();
        for (topic, partition) in open {
            // Reopened with new configs, or when a reassignment takes it
            // between one replica and more: a replicated log syncs its own
            // segments, a lone one is journaled (`open_partition`).
            let reconfigured = matches!(
                (before.topics.get(topic.as_str()), table.topics.get(topic.as_str())),
                (Some(old), Some(new)) if old.configs != new.configs
                    || (old.replicas_of(partition).len() > 1) != (new.replicas_of(partition).len() > 1)
            );
            if reconfigured || router::host(&table, &topic, partition, self.count) != Some(self.id) {
                let removed = self.partitions.borrow_mut().remove(&topic, partition);
                // Its files stay while this broker keeps a copy (reopened
                // with new configs); a deleted partition, or a replica a
                // reassignment moved away, deletes them (Kafka's StopReplica).
                let still_there = table
                    .topics
                    .get(topic.as_str())
                    .is_some_and(|m| partition < m.partitions() && table.hosted_here(m, partition));
                if let Some(p) = removed {
                    self.retire_partition(p, still_there).await;
                }
            }
        }
        // Opening waits mostly on the disk (directory, checkpoint, tail
        // block, and after a crash syncs): many at once overlap those waits.
        let to_open = table.topics.iter().flat_map(|(name, meta)| {
            (0..meta.partitions())
                .filter(|&p| router::host(&table, name, p, self.count) == Some(self.id))
                .filter(|&p| self.partition(name, p).is_none())
                .map(move |p| (name, p, meta))
        });
        let to_open: Vec<_> = to_open.collect();
        let failed = std::cell::RefCell::new(Vec::new());
        super::concurrent::for_each_bounded(
            to_open.into_iter().map(|(name, p, meta)| {
                let failed = &failed;
                async move {
                    if let Err(cause) = self.open_partition(name, p, meta).await {
                        failed.borrow_mut().push(OpenFailure { topic: name.to_string(), partition: p, cause });
                    }
                }
            }),
            crate::limits::PARTITION_OPENS_AT_ONCE,
        )
        .await;
        self.fit_cache();
        self.follow_leaders();
        glommio::spawn_local(self.clone().load_coordinators(coordinators_gained)).detach();
        failed.into_inner()
    }

    pub(super) async fn open_partition(
        &self,
        topic: &str,
        partition: i32,
        meta: &TopicMeta,
    ) -> Result<(), StorageError> {
        let name = format!("{topic}-{partition}");
        let dir = self.settings.data_dir.join(&name);
        let mut config = match topics::log_config(&meta.configs) {
            Ok(c) => c,
            Err(e) => {
                log::error!("shard {}: partition {name}: bad config ({e}); using defaults", self.id);
                crate::storage::LogConfig::default()
            }
        };
        config.zero_ahead_bytes = self.settings.zero_ahead_bytes;
        // The coordinators' own topics write each record at once: they are
        // small and few, and tools beside a running broker (`offsets dump`)
        // read them straight from the segments.
        config.write_behind_ms = if meta.internal { 0 } else { self.settings.write_behind_ms };
        config.leader_epoch = config.leader_epoch.max(meta.epoch_of(partition));
        // A replicated partition's log may be cut back to its leader's
        // (`replica_files::truncate_dir`), which the shard journal's copies
        // of its batches know nothing of: it syncs its own segments.
        let replicated = meta.replicas_of(partition).len() > 1;
        let (link, replay) =
            if replicated { (None, Vec::new()) } else { super::journal_glue::for_partition(self, meta, partition) };
        let opened = PartitionLog::open_journaled(
            &dir,
            PartitionName(name.clone()),
            config,
            Clock::System,
            Faults::default(),
            link,
            &replay,
        );
        match opened.await {
            Ok((log, report)) => {
                if !report.cuts.is_empty() {
                    log::warn!("shard {}: partition {name}: recovery cut {} piece(s)", self.id, report.cuts.len());
                }
                let p = Rc::new(Partition { log, appended: Default::default(), replica: Default::default() });
                if replicated {
                    // Its replicas known before any request can find it:
                    // acks=all must not count on the log end alone.
                    self.load_epochs(&p).await;
                    let table = self.topics();
                    if let Some(me) = table.node_id {
                        super::replication::refresh_replica(&table, me, meta, partition, &p);
                    }
                }
                self.partitions.borrow_mut().insert(topic, partition, p);
                Ok(())
            }
            Err(e) => {
                log::error!("shard {}: cannot open partition {name}: {e}", self.id);
                Err(e)
            }
        }
    }

    /// Closes a partition; `still_there` false (its topic deleted, or the
    /// partition undone) also removes its files.
    async fn retire_partition(&self, p: Rc<Partition>, still_there: bool) {
        if let Err(e) = p.log.close().await {
            log::warn!("shard {}: closing {}: {e}", self.id, p.log.name());
        }
        p.appended.notify_all();
        if !still_there {
            let dir = self.settings.data_dir.join(&p.log.name().0);
            let result = glommio::executor().spawn_blocking(move || std::fs::remove_dir_all(&dir)).await;
            if let Err(e) = result {
                log::warn!("shard {}: removing files of {}: {e}", self.id, p.log.name());
            }
        }
    }
}

/// ListOffsets' MAX_TIMESTAMP (KIP-734, v7+): the record with the largest
/// timestamp instead of an offset for a given time.
const MAX_TIMESTAMP: i64 = -3;

/// The first record carrying the log's largest timestamp, as (offset,
/// timestamp); `None` for an empty log. "Some record at or after t" only
/// holds below the largest timestamp, so a binary search over t with the
/// time-index lookup finds it in at most 64 lookups without a new storage
/// call; MAX_TIMESTAMP is an admin query, rare enough for that.
async fn max_timestamp_record(log: &PartitionLog) -> Result<Option<(i64, i64)>, StorageError> {
    let Some((_, first)) = log.offset_for_timestamp(i64::MIN).await? else { return Ok(None) };
    if let Some(found) = log.offset_for_timestamp(i64::MAX).await? {
        return Ok(Some(found));
    }
    // Invariant: a record at or after `low`, none at or after `high`.
    let (mut low, mut high) = (first, i64::MAX);
    while high - low > 1 {
        let mid = low + (high - low) / 2;
        if log.offset_for_timestamp(mid).await?.is_some() {
            low = mid;
        } else {
            high = mid;
        }
    }
    log.offset_for_timestamp(low).await
}

/// ListOffsets' lookup in `p`: -2 earliest, -1 latest, -4 earliest local,
/// -5 latest tiered, -3 the largest timestamp, else the first record at or
/// after a time.
async fn offset_for(p: &Partition, timestamp: i64, read_committed: bool) -> OffsetFound {
    match timestamp {
        -2 => OffsetFound { error: errors::NONE, offset: p.log.log_start(), timestamp: -1 },
        // A read_committed consumer starts "latest" at the stable end.
        -1 if read_committed => {
            let offset = p.log.last_stable_offset().min(p.high_watermark());
            OffsetFound { error: errors::NONE, offset, timestamp: -1 }
        }
        // Consumers read below the high watermark (the log end, but for
        // records not yet on every in-sync replica).
        -1 => OffsetFound { error: errors::NONE, offset: p.high_watermark(), timestamp: -1 },
        // EARLIEST_LOCAL (-4, v8+, KIP-405): every segment is local, so
        // the local log starts where the log does.
        -4 => OffsetFound { error: errors::NONE, offset: p.log.log_start(), timestamp: -1 },
        // LATEST_TIERED (-5, v9+, KIP-1005): nothing is tiered; Kafka
        // answers -1 when remote storage is off.
        -5 => OffsetFound { error: errors::NONE, offset: -1, timestamp: -1 },
        MAX_TIMESTAMP => match max_timestamp_record(&p.log).await {
            Ok(Some((offset, timestamp))) => OffsetFound { error: errors::NONE, offset, timestamp },
            Ok(None) => OffsetFound { error: errors::NONE, offset: -1, timestamp: -1 },
            Err(e) => OffsetFound { error: error_code(&e), offset: -1, timestamp: -1 },
        },
        ts => match p.log.offset_for_timestamp(ts).await {
            Ok(Some((offset, timestamp))) => OffsetFound { error: errors::NONE, offset, timestamp },
            Ok(None) => OffsetFound { error: errors::NONE, offset: -1, timestamp: -1 },
            Err(e) => OffsetFound { error: error_code(&e), offset: -1, timestamp: -1 },
        },
    }
}
