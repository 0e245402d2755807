//! Per-core state: the partitions this core owns, its copy of the topic
//! table, and the channel mesh to the other cores.
//!
//! **Architecture invariant:** a shard's partitions are touched only by code
//! running on that shard. Other shards reach them with a typed call
//! ([`Shard::ask`], see `calls.rs`); the local path is a plain call.

pub mod acl_admin;
pub mod calls;
mod concurrent;
pub mod credentials_admin;
pub mod elections;
pub mod messages;
pub mod nearest_replica;
pub mod notify;
pub mod reassignments;
pub mod router;
pub mod topic_configs;
pub mod topic_errors;
pub mod topics;

mod cluster_security;
pub mod cluster_topics;
mod coordinator_leadership;
mod followers;
pub mod group_glue;
pub mod journal_glue;
mod liveness;
pub mod maintenance;
mod owner;
mod replica_requests;
mod replication;
pub use owner::PRODUCER_ID_NODE_SHIFT;
mod topic_admin;
pub mod txn_glue;
mod txn_remote;

use std::{
    cell::{Cell, RefCell},
    collections::HashMap,
    path::PathBuf,
    rc::Rc,
    sync::Arc,
};

use glommio::channels::channel_mesh::{Receivers, Senders};

use crate::{
    protocol::errors::{self, ErrorCode},
    storage::PartitionLog,
};

pub use calls::{CrossShard, Envelope, Unavailable};
use notify::AppendNotify;
use topics::TopicTable;

pub type ShardId = usize;

/// A partition this shard owns: its log and its long-poll waiters.
pub struct Partition {
    pub log: PartitionLog,
    pub appended: AppendNotify,
    /// In a quorum: its copies on other brokers (`replication`).
    pub replica: RefCell<replication::ReplicaState>,
}

/// Settings every shard shares, fixed at start.
#[derive(Debug, Clone)]
pub struct BrokerSettings {
    pub node_id: i32,
    pub advertised_host: String,
    pub advertised_port: i32,
    /// Each listener's advertised address (`server::listeners`); the two
    /// fields above are the first listener's.
    pub listeners: Vec<crate::server::listeners::Advertised>,
    pub cluster_id: String,
    pub data_dir: PathBuf,
    pub auto_create_topics: bool,
    pub default_partitions: i32,
    pub max_request_bytes: usize,
    pub groups: crate::groups::GroupSettings,
    pub txn: crate::txn::TxnSettings,
    /// Connections one shard accepts at once.
    pub max_connections_per_shard: usize,
    pub max_inflight_bytes_per_connection: usize,
    pub max_inflight_bytes_per_shard: usize,
    /// Partition reads one shard runs at once (from `io-properties.toml`
    /// when given): cold reads beyond it queue instead of flooding the disk.
    pub disk_reads_per_shard: usize,
    /// Zero-ahead window of every active segment (`storage::zero_ahead`).
    pub zero_ahead_bytes: u64,
    /// `ServeConfig::write_behind_ms` (`storage::log::behind`).
    pub write_behind_ms: u64,
    /// `ServeConfig::journal_file_bytes`; 0: no journal.
    pub journal_file_bytes: u64,
    /// `ServeConfig::journal_page_cache`.
    pub journal_page_cache: bool,
    /// `ServeConfig::io_workers_cpuset`, parsed; empty: the shard's core.
    pub io_workers_cpus: Vec<usize>,
    /// Partitions the broker can serve within its memory budget
    /// (`server::memory`); topic creation refuses more.
    pub max_partitions: u64,
    /// Segment files each shard keeps open at once (`server::descriptors`).
    pub open_files_per_shard: u64,
    /// How often idle segment files close (`ServeConfig::segment_files_idle_close_ms`).
    pub idle_files_every: std::time::Duration,
    /// Each shard's part of `--memory` (`server::memory`).
    pub memory: crate::server::memory::MemoryBudget,
    /// `super_users` and `allow_everyone_if_no_acl_found` (`security::authorizer`).
    pub authorizer: crate::security::authorizer::AuthorizerSettings,
    /// The SASL mechanisms SASL listeners offer (`[sasl] mechanisms`).
    pub sasl_mechanisms: Vec<crate::security::sasl::SaslMechanism>,
    /// The SCRAM credentials on disk at start; each shard then keeps its
    /// own copy (`Shard::credentials`).
    pub credentials_at_start: Arc<crate::security::credentials::Credentials>,
    /// The metadata quorum's view of the cluster (`controller`); None when
    /// the broker runs alone.
    pub cluster: Option<crate::controller::ClusterLink>,
    /// `replica_lag_time_max_ms` (`shard::followers`).
    pub replica_lag_max: std::time::Duration,
    /// `broker_rack`.
    pub rack: Option<String>,
    /// `replica_selector = "rack-aware"`: a leader sends a consumer to an
    /// in-sync replica in the consumer's rack (KIP-392).
    pub rack_aware_reads: bool,
    /// In a quorum: `__consumer_offsets` and `__transaction_state` as the
    /// quorum creates them, replicated (`cluster_topics::ask_for_internal_topics`).
    pub internal_topics: Vec<crate::controller::TopicSpec>,
}

/// A shard's partitions by topic name, then index. Looked up by `&str`, so
/// finding a partition on the request path allocates nothing (a
/// `(String, i32)` key built a `String` per lookup).
#[derive(Default)]
pub(crate) struct PartitionMap(HashMap<String, HashMap<i32, Rc<Partition>>>);

impl PartitionMap {
    pub(crate) fn get(&self, topic: &str, partition: i32) -> Option<&Rc<Partition>> {
        self.0.get(topic)?.get(&partition)
    }

    pub(crate) fn insert(&mut self, topic: &str, partition: i32, p: Rc<Partition>) {
        self.0.entry(topic.to_string()).or_default().insert(partition, p);
    }

    pub(crate) fn remove(&mut self, topic: &str, partition: i32) -> Option<Rc<Partition>> {
        let of_topic = self.0.get_mut(topic)?;
        let removed = of_topic.remove(&partition);
        if of_topic.is_empty() {
            self.0.remove(topic);
        }
        removed
    }

    /// Every (topic, partition) held.
    pub(crate) fn keys(&self) -> Vec<(String, i32)> {
        self.0.iter().flat_map(|(t, ps)| ps.keys().map(move |p| (t.clone(), *p))).collect()
    }

    /// Every (topic, partition, log) held, in no particular order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (&str, i32, &Rc<Partition>)> {
        self.0.iter().flat_map(|(t, ps)| ps.iter().map(move |(p, part)| (t.as_str(), *p, part)))
    }

    pub(crate) fn values(&self) -> impl Iterator<Item = &Rc<Partition>> {
        self.0.values().flat_map(HashMap::values)
    }

    pub(crate) fn len(&self) -> usize {
        self.0.values().map(HashMap::len).sum()
    }

    pub(crate) fn drain(&mut self) -> Vec<Rc<Partition>> {
        std::mem::take(&mut self.0).into_values().flat_map(HashMap::into_values).collect()
    }
}

pub struct Shard {
    pub id: ShardId,
    pub count: usize,
    pub settings: Arc<BrokerSettings>,
    senders: Senders<Envelope>,
    topics: RefCell<Arc<TopicTable>>,
    partitions: RefCell<PartitionMap>,
    /// Requests being handled, so shutdown can let them finish.
    pub inflight: Cell<usize>,
    /// Open client connections on this shard.
    pub connections: Cell<usize>,
    /// Bytes of requests read and not yet answered, over all connections.
    pub inflight_bytes: Rc<glommio::sync::Semaphore>,
    /// The consumer groups this shard coordinates, and their offsets.
    pub groups: Rc<crate::groups::Coordinator>,
    /// The transactional ids this shard coordinates.
    pub txn: Rc<crate::txn::TxnCoordinator>,
    /// This shard's counters (plain cells: only this thread touches them).
    pub metrics: crate::metrics::ShardMetrics,
    /// Partition reads in progress (see `BrokerSettings::disk_reads_per_shard`).
    pub reads: glommio::sync::Semaphore,
    /// Controller only: the next producer id and the end of its block.
    producer_ids: Cell<(i64, i64)>,
    /// Serialises topic changes on the controller (a shard-local semaphore,
    /// not a lock between cores).
    controller_permit: glommio::sync::Semaphore,
    /// This shard's copy of the ACLs (`acl_admin.rs`), swapped whole.
    acls: RefCell<Arc<crate::security::acl::AclSet>>,
    /// Serialises ACL changes on the controller.
    acl_permit: glommio::sync::Semaphore,
    /// This shard's copy of the live brokers' racks (`nearest_replica`).
    racks: RefCell<nearest_replica::Racks>,
    /// This shard's copy of the SCRAM credentials (`credentials_admin`).
    credentials: RefCell<Arc<crate::security::credentials::Credentials>>,
    /// Controller shard, in a metadata quorum: the last log index whose
    /// topics, ACLs and credentials every shard has (`cluster_topics`).
    cluster_synced: Cell<u64>,
    /// The shard journal durable appends go through (`journal_glue`).
    pub(crate) journal: std::cell::OnceCell<Rc<crate::storage::journal::Journal>>,
    /// The journals left by the last run, while this shard opens its
    /// partitions at start-up.
    pub(crate) replay: RefCell<Option<Arc<crate::storage::journal::Replay>>>,
    /// In a quorum: the leaders this shard runs a follower fetch task for.
    fetchers: RefCell<std::collections::BTreeSet<i32>>,
    /// Serialises applying a topic table with cutting a follower's log
    /// (both close and open partitions).
    reopen_permit: glommio::sync::Semaphore,
    /// The `__consumer_offsets` and `__transaction_state` partitions this
    /// shard's coordinators serve (`coordinator_leadership`).
    group_partitions: coordinator_leadership::Served,
    txn_partitions: coordinator_leadership::Served,
    /// Followers caught up, to be asked into their partitions' ISR in one
    /// entry (`followers::queue_isr_join`).
    isr_joins: RefCell<Vec<crate::controller::IsrChange>>,
}

impl Shard {
    pub fn new(settings: Arc<BrokerSettings>, senders: Senders<Envelope>, table: Arc<TopicTable>) -> Rc<Self> {
        let shard_budget = settings.max_inflight_bytes_per_shard as u64;
        let read_permits = settings.disk_reads_per_shard.max(1) as u64;
        let group_settings = settings.clone();
        let txn_settings = settings.clone();
        let credentials = RefCell::new(settings.credentials_at_start.clone());
        Rc::new_cyclic(|me| Self {
            id: senders.peer_id(),
            count: senders.nr_consumers(),
            settings,
            senders,
            topics: RefCell::new(table),
            partitions: RefCell::new(PartitionMap::default()),
            inflight: Cell::new(0),
            connections: Cell::new(0),
            inflight_bytes: Rc::new(glommio::sync::Semaphore::new(shard_budget)),
            groups: Rc::new(crate::groups::Coordinator::new(
                Box::new(group_glue::ShardGroupHost { shard: me.clone(), settings: group_settings }),
                group_glue::member_id_seed(),
            )),
            txn: Rc::new(crate::txn::TxnCoordinator::new(Box::new(txn_glue::ShardTxnHost {
                shard: me.clone(),
                settings: txn_settings,
            }))),
            metrics: Default::default(),
            reads: glommio::sync::Semaphore::new(read_permits),
            producer_ids: Cell::new((0, 0)),
            controller_permit: glommio::sync::Semaphore::new(1),
            acls: RefCell::new(Arc::default()),
            acl_permit: glommio::sync::Semaphore::new(1),
            racks: RefCell::new(Arc::default()),
            credentials,
            cluster_synced: Cell::new(0),
            journal: Default::default(),
            replay: RefCell::new(None),
            fetchers: RefCell::new(Default::default()),
            reopen_permit: glommio::sync::Semaphore::new(1),
            group_partitions: Default::default(),
            txn_partitions: Default::default(),
            isr_joins: Default::default(),
        })
    }

    /// The topic table as this shard last heard it.
    pub fn topics(&self) -> Arc<TopicTable> {
        self.topics.borrow().clone()
    }

    pub(crate) fn partition(&self, topic: &str, partition: i32) -> Option<Rc<Partition>> {
        self.partitions.borrow().get(topic, partition).cloned()
    }

    /// In a quorum, a reader's `current_leader_epoch` against this copy's
    /// (Kafka's check): older is FENCED_LEADER_EPOCH (the reader's metadata
    /// is stale), newer UNKNOWN_LEADER_EPOCH (this broker's is); either way
    /// the client refreshes its metadata and retries. -1 is not checked.
    pub(crate) fn leader_epoch_error(&self, p: &Partition, asked: i32) -> Option<ErrorCode> {
        self.settings.cluster.as_ref()?;
        epoch_mismatch(asked, p.epoch())
    }

    /// Why a request for `topic`/`partition` found no open partition on
    /// this shard. In a quorum, a partition the table has is being opened
    /// here (its leadership or its copy just came) or was just given
    /// away: NOT_LEADER_OR_FOLLOWER, as Kafka answers for a partition its
    /// metadata knows and its replica manager does not hold yet; clients
    /// refresh their metadata and retry. Else UNKNOWN_TOPIC_OR_PARTITION.
    pub(crate) fn no_partition_error(&self, topic: &str, partition: i32) -> ErrorCode {
        let table = self.topics();
        let known = table.node_id.is_some()
            && table.topics.get(topic).is_some_and(|m| partition >= 0 && partition < m.partitions());
        if known {
            errors::NOT_LEADER_OR_FOLLOWER
        } else {
            errors::UNKNOWN_TOPIC_OR_PARTITION
        }
    }

    /// Gives the batch cache what the shard's memory budget leaves once its
    /// partitions are paid for; called once each topic table is applied.
    pub fn fit_cache(&self) {
        let partitions = self.partitions.borrow().len() as u64;
        crate::storage::batch_cache::shard_cache().set_limit(self.settings.memory.cache_limit(partitions) as usize);
    }

    /// Every partition this shard owns.
    pub fn all_partitions(&self) -> Vec<Rc<Partition>> {
        self.partitions.borrow().values().cloned().collect()
    }

    /// Makes the call `make` gives on every shard at once and waits for all
    /// the replies, by shard; a shard already gone (shutdown) has none.
    pub async fn ask_every<C: CrossShard>(self: &Rc<Self>, make: impl Fn() -> C) -> Vec<Option<C::Reply>> {
        let tasks: Vec<_> = (0..self.count)
            .map(|target| {
                let (shard, call) = (self.clone(), make());
                glommio::spawn_local(async move { shard.ask(target, call).await.ok() })
            })
            .collect();
        let mut replies = Vec::with_capacity(tasks.len());
        for t in tasks {
            replies.push(t.await);
        }
        replies
    }

    /// Makes `call` on shard `target` and waits for its reply; a plain call
    /// when `target` is this shard. `Err(Unavailable)` only when the target
    /// is gone, which happens during shutdown.
    pub async fn ask<C: CrossShard>(self: &Rc<Self>, target: ShardId, call: C) -> Result<C::Reply, Unavailable> {
        if target == self.id {
            return Ok(call.serve(self).await);
        }
        let (reply, answer) = futures_channel::oneshot::channel();
        if C::COUNTED {
            crate::metrics::add(&self.metrics.cross_shard_sent, 1);
            crate::metrics::add(&self.metrics.cross_shard_outstanding, 1);
        }
        // Either side of the mesh only goes away during shutdown.
        let sent = self.senders.send_to(target, Envelope { request: call.into_request(), reply }).await;
        let response = match sent {
            Ok(()) => answer.await.map_err(|_| Unavailable),
            Err(_) => Err(Unavailable),
        };
        if C::COUNTED {
            crate::metrics::sub(&self.metrics.cross_shard_outstanding, 1);
        }
        response.map(C::reply_of)
    }

    /// Serves calls from the other shards, each in its own task so a long
    /// poll never holds up the next call.
    pub fn serve_peers(self: &Rc<Self>, mut receivers: Receivers<Envelope>) {
        for (_, stream) in receivers.streams() {
            let shard = self.clone();
            glommio::spawn_local(async move {
                while let Some(envelope) = stream.recv().await {
                    if envelope.request.counted() {
                        crate::metrics::add(&shard.metrics.cross_shard_received, 1);
                    }
                    let shard = shard.clone();
                    glommio::spawn_local(async move {
                        let response = envelope.request.serve(&shard).await;
                        let _ = envelope.reply.send(response);
                    })
                    .detach();
                }
            })
            .detach();
        }
    }

    /// Closes every partition cleanly (seal, checkpoint). Logs failures and
    /// carries on with the rest.
    pub async fn close_all(&self) {
        let partitions: Vec<Rc<Partition>> = self.partitions.borrow_mut().drain();
        let mut closed_all = true;
        for p in partitions {
            if let Err(e) = p.log.close().await {
                log::error!("shard {}: closing partition {}: {e}", self.id, p.log.name());
                closed_all = false;
            }
        }
        // Every log is synced and checkpointed: the journal holds nothing the
        // next start needs. After a failed close it stays, to be replayed.
        if let (true, Some(journal)) = (closed_all, self.journal.get()) {
            if let Err(e) = journal.remove_files() {
                log::warn!("shard {}: removing its journal files: {e} (the next start reads them)", self.id);
            }
        }
    }
}

/// `asked` (a reader's leader epoch; -1: none) against a copy's `epoch`.
fn epoch_mismatch(asked: i32, epoch: i32) -> Option<ErrorCode> {
    match asked {
        ..0 => None,
        a if a < epoch => Some(errors::FENCED_LEADER_EPOCH),
        a if a > epoch => Some(errors::UNKNOWN_LEADER_EPOCH),
        _ => None,
    }
}

#[cfg(test)]
mod epoch_tests {
    use super::*;

    #[test]
    fn a_readers_leader_epoch_is_fenced_when_older_and_unknown_when_newer() {
        assert_eq!(epoch_mismatch(3, 4), Some(errors::FENCED_LEADER_EPOCH));
        assert_eq!(epoch_mismatch(5, 4), Some(errors::UNKNOWN_LEADER_EPOCH));
        assert_eq!(epoch_mismatch(4, 4), None);
        assert_eq!(epoch_mismatch(-1, 4), None, "not given");
    }
}
