//! The metadata quorum (issue 18): a Raft group of the brokers named by
//! `--controller-quorum`, on openraft. Its log holds the brokers, whether
//! each is fenced, the topics with each partition's replicas, ISR, leader
//! and epoch, the ACLs and the SCRAM credentials; brokers learn from it.
//!
//! It is the control plane and runs beside the shards, never on them: one
//! thread of its own with a single-threaded tokio runtime (openraft's), and
//! its own TCP port (`network`). What the shards read of it is a
//! [`ClusterView`] published on a watch channel after every change, read
//! by Metadata, DescribeCluster and FindCoordinator and followed by the
//! controller shard (`shard::cluster_topics`), never on the produce or
//! fetch path; they ask it for changes through a [`ClusterLink`].
//!
//! Liveness follows Kafka's KRaft: every broker sends the leader a
//! heartbeat each `broker_heartbeat_interval_ms`; the leader fences a
//! broker it has not heard from for `broker_session_timeout_ms` (a log
//! entry), and a heartbeat from a fenced broker registers it again. A new
//! leader gives every broker a full session before fencing any.
//!
//! Without `--controller-quorum` none of this starts and the broker is
//! alone, as before.

mod changes;
mod directory;
pub mod elect;
mod member;
mod network;
mod observer;
mod reassign;
mod replicas;
mod requests;
mod store;
mod view;

pub use elect::{Election, PartitionOutcome};
pub use reassign::{moves_under_way, Moving, Reassignment};
pub use replicas::IsrChange;
pub(crate) use requests::{BrokerAnswer, BrokerRequest};
pub use view::{advertised_brokers, broker_address, shard_port, AdvertisedBroker};

use std::{
    collections::{BTreeMap, HashMap},
    io::Cursor,
    path::PathBuf,
    sync::{
        atomic::{AtomicBool, Ordering},
        Arc, Mutex,
    },
    time::{Duration, Instant},
};

use openraft::{
    error::{ClientWriteError, InitializeError, RaftError},
    BasicNode, Raft,
};
use serde::{Deserialize, Serialize};

use crate::{
    security::{acl::AclSet, credentials::Credentials},
    shard::{acl_admin::ChangeAcls, credentials_admin::CredentialChange, topics::TopicId},
};

openraft::declare_raft_types!(
    /// The controller's Raft types: log entries carry a [`Command`].
    pub TypeConfig:
        D = Command,
        R = (),
        NodeId = u64,
        Node = BasicNode,
);

/// A change to the cluster, one Raft log entry.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub enum Command {
    /// A broker's addresses, on its first heartbeat or when they change;
    /// also unfences it.
    RegisterBroker(BrokerInfo),
    /// The leader stopped hearing from this broker.
    FenceBroker(i32),
    /// New topics, each partition with the broker that leads it; a name
    /// already taken keeps its first topic.
    CreateTopics(Vec<ClusterTopic>),
    DeleteTopics(Vec<String>),
    AlterTopics(Vec<TopicAlteration>),
    /// An ACL change, applied as the broker alone applies it.
    ChangeAcls(ChangeAcls),
    /// SCRAM credential changes the leader found acceptable.
    AlterCredentials(Vec<CredentialChange>),
    /// A partition's leader saw `broker` catch up to its high watermark:
    /// it joins the in-sync replicas, if the leader's `epoch` is still the
    /// partition's (a deposed leader's word counts for nothing). Written
    /// by earlier versions; `JoinIsrs` now.
    JoinIsr(IsrChange),
    /// `JoinIsr` for every follower one leader's shard saw catch up at
    /// once (a restarted follower catches up on all its partitions in one
    /// fetch: one entry, not one per partition).
    JoinIsrs(Vec<IsrChange>),
    /// Leaders an operator asked for (`elect`).
    ElectLeaders(Vec<Election>),
    /// A partition's leader saw `broker` stay behind its log end past
    /// `replica_lag_time_max_ms`: it leaves the in-sync replicas (the
    /// epoch checked as for `JoinIsr`).
    LeaveIsr(IsrChange),
    /// Partition moves an operator asked for (AlterPartitionReassignments),
    /// checked by the leader (`reassign`).
    Reassign(Vec<Reassignment>),
}

/// A change to an existing topic.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub enum TopicAlteration {
    /// Grow to `count` partitions. Asked without leaders; the quorum's
    /// leader places the new partitions and logs them in `leaders`.
    Partitions {
        name: String,
        count: i32,
        leaders: Vec<i32>,
        /// The new partitions' replicas, their leader first.
        #[serde(default)]
        replicas: Vec<Vec<i32>>,
    },
    /// The topic's whole config set, checked by the broker asked.
    Configs { name: String, configs: BTreeMap<String, String> },
}

impl TopicAlteration {
    pub fn topic(&self) -> &str {
        match self {
            Self::Partitions { name, .. } | Self::Configs { name, .. } => name,
        }
    }
}

/// A topic as the quorum holds it.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct ClusterTopic {
    pub name: String,
    pub id: TopicId,
    /// The broker leading each partition, by partition number.
    pub leaders: Vec<i32>,
    pub configs: BTreeMap<String, String>,
    /// Each partition's replicas as placed, the first leader first. Empty
    /// in entries written before replication: the leader alone.
    #[serde(default)]
    pub replicas: Vec<Vec<i32>>,
    /// Each partition's in-sync replicas: those that hold every record up
    /// to the high watermark. Shrunk when a member is fenced, grown when
    /// the leader sees a follower caught up (`Command::JoinIsr`).
    #[serde(default)]
    pub isr: Vec<Vec<i32>>,
    /// Each partition's leader epoch, one more at every change of leader.
    #[serde(default)]
    pub epochs: Vec<i32>,
    /// The partitions being moved to other brokers, by partition number
    /// (`reassign`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub moving: BTreeMap<i32, Moving>,
}

/// A topic a broker asks the leader to create, checked by that broker.
#[derive(Serialize, Deserialize, Clone, Debug)]
pub struct TopicSpec {
    pub name: String,
    pub partitions: i32,
    pub configs: BTreeMap<String, String>,
    /// Replicas per partition (1 in entries from before replication).
    #[serde(default = "one")]
    pub replication_factor: i16,
}

fn one() -> i16 {
    1
}

/// The leader's answer for one topic of a CreateTopics or DeleteTopics.
#[derive(Serialize, Deserialize, Clone, Debug)]
pub struct TopicResult {
    pub name: String,
    pub error: i16,
    pub message: Option<String>,
    pub id: [u8; 16],
}

/// One of a broker's listeners, as clients should reach it.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct ListenerAddr {
    pub name: String,
    pub host: String,
    pub port: i32,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct BrokerInfo {
    pub node_id: i32,
    pub listeners: Vec<ListenerAddr>,
    /// Different at every start of the broker's process: a broker that
    /// restarted within its session registers again, and leaves the
    /// in-sync replicas as a fenced one does (its log may have lost what
    /// it had not written when it stopped).
    #[serde(default)]
    pub incarnation: u64,
    /// The port each of its shards accepts follower fetches on, by shard,
    /// at its first listener's host (`server::replica_ports`). Empty from
    /// brokers of earlier versions: followers use the first listener.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub shard_ports: Vec<u16>,
    /// Its `broker_rack`, if it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rack: Option<String>,
    /// A voter's controller directory id (`directory`): a new one after
    /// it lost its directory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub directory_id: Option<String>,
}

/// A number this process start is known by (`BrokerInfo::incarnation`).
pub fn new_incarnation() -> u64 {
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64);
    nanos ^ (u64::from(std::process::id()) << 32)
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct BrokerEntry {
    pub info: BrokerInfo,
    pub fenced: bool,
}

/// The state machine: what the applied log says.
#[derive(Serialize, Deserialize, Clone, Debug, Default)]
pub struct ClusterState {
    pub brokers: BTreeMap<i32, BrokerEntry>,
    #[serde(default)]
    pub topics: BTreeMap<String, ClusterTopic>,
    /// The cluster's ACLs, once any was changed through the quorum (until
    /// then each broker keeps the ACLs it had alone).
    #[serde(default)]
    pub acls: Option<AclSet>,
    /// The cluster's SCRAM credentials, likewise.
    #[serde(default)]
    pub credentials: Option<Credentials>,
}

/// What the shards see: the applied brokers and topics, the index of the
/// last log entry applied, and the current Raft leader.
#[derive(Clone, Debug, Default)]
pub struct ClusterView {
    pub leader: Option<i32>,
    pub brokers: BTreeMap<i32, BrokerEntry>,
    pub topics: BTreeMap<String, ClusterTopic>,
    pub acls: Option<AclSet>,
    pub credentials: Option<Credentials>,
    pub applied: u64,
}

impl ClusterView {
    /// The unfenced broker `node_id`, if it is one.
    pub fn live(&self, node_id: i32) -> Option<&BrokerInfo> {
        self.brokers.get(&node_id).filter(|b| !b.fenced).map(|b| &b.info)
    }
}

/// A shard's question to the quorum, with where the answer goes.
type Ask = (BrokerRequest, tokio::sync::oneshot::Sender<BrokerAnswer>);

/// What the shards hold of the quorum: its published view, a way to ask
/// the leader, and this process's `BrokerInfo::incarnation` (tokio's
/// channels need no tokio runtime on the shard's side).
#[derive(Clone, Debug)]
pub struct ClusterLink {
    pub view: ClusterWatch,
    asks: tokio::sync::mpsc::UnboundedSender<Ask>,
    pub incarnation: u64,
}

impl ClusterLink {
    /// Sends `request` to the leader through this broker's quorum member.
    pub(crate) async fn ask(&self, request: BrokerRequest) -> BrokerAnswer {
        let (tx, rx) = tokio::sync::oneshot::channel();
        if self.asks.send((request, tx)).is_err() {
            return BrokerAnswer::Failed("the controller has stopped".into());
        }
        rx.await.unwrap_or_else(|_| BrokerAnswer::Failed("the controller has stopped".into()))
    }
}

/// The shards' side of the published view.
pub type ClusterWatch = tokio::sync::watch::Receiver<ClusterView>;
type Published = Arc<tokio::sync::watch::Sender<ClusterView>>;

/// `--controller-quorum 1@host:port,2@host:port,...`: the voters and their
/// controller addresses.
pub fn parse_quorum(text: &str) -> Result<BTreeMap<u64, BasicNode>, String> {
    let mut voters = BTreeMap::new();
    for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (id, addr) =
            part.split_once('@').ok_or_else(|| format!("controller quorum member {part:?}: expected ID@HOST:PORT"))?;
        let id: u64 = id.parse().map_err(|_| format!("controller quorum member {part:?}: {id:?} is not a node id"))?;
        if id > i32::MAX as u64 {
            return Err(format!("controller quorum member {part:?}: node ids are Kafka's int32"));
        }
        if !addr.rsplit_once(':').is_some_and(|(h, p)| !h.is_empty() && p.parse::<u16>().is_ok()) {
            return Err(format!("controller quorum member {part:?}: {addr:?} is not HOST:PORT"));
        }
        if voters.insert(id, BasicNode::new(addr)).is_some() {
            return Err(format!("controller quorum names node {id} twice"));
        }
    }
    if voters.is_empty() {
        return Err("the controller quorum is empty".into());
    }
    Ok(voters)
}

/// What `serve` starts the controller with.
pub struct ControllerSettings {
    pub node_id: i32,
    pub voters: BTreeMap<u64, BasicNode>,
    /// `<data-dir>/controller`.
    pub dir: PathBuf,
    /// This broker's addresses, sent with every heartbeat.
    pub broker: BrokerInfo,
    pub heartbeat_every: Duration,
    pub session_timeout: Duration,
    /// The broker's stop flag (SIGINT/SIGTERM): the broker then leaves.
    pub stop: Arc<AtomicBool>,
    /// Kafka's automatic preferred-leader rebalance; None: off.
    pub rebalance: Option<elect::Rebalance>,
}

/// What `serve` keeps of its quorum member.
pub struct ControllerHandle {
    pub link: ClusterLink,
    left: std::sync::mpsc::Receiver<()>,
}

impl ControllerHandle {
    /// Waits, at most `limit`, until the leader fenced this stopping broker.
    pub fn wait_left(&self, limit: Duration) -> bool {
        self.left.recv_timeout(limit).is_ok()
    }
}

/// One quorum member, shared by its tasks.
pub(crate) struct Controller {
    node_id: u64,
    /// Told with each vote (`directory`).
    directory_id: Option<String>,
    raft: Raft<TypeConfig>,
    voters: BTreeMap<u64, BasicNode>,
    published: Published,
    /// On the leader: when each broker was last heard from. A lock, off the
    /// data path: only the controller thread's tasks (heartbeat RPCs and
    /// the fencing check) touch it, a few times a second, never a shard;
    /// tokio::spawn wants `Send` futures, so the `Arc<Controller>` they share
    /// must be `Sync` even on a single-threaded runtime.
    last_seen: Mutex<HashMap<i32, Instant>>,
    session_timeout: Duration,
    /// Set at shutdown: heartbeats stop, so the fence stays.
    leaving: AtomicBool,
}

impl Controller {
    fn leader(&self) -> Option<u64> {
        self.raft.metrics().borrow().current_leader
    }

    /// The leader as clients should hear of it: this member, while leading,
    /// only while a quorum has acknowledged it within the lease. A leader cut
    /// off from the others (openraft 0.9 keeps the role until it hears a
    /// newer term) must not go on naming itself.
    fn live_leader(&self) -> Option<u64> {
        let m = self.raft.metrics().borrow().clone();
        match m.current_leader {
            Some(l) if l == self.node_id && m.millis_since_quorum_ack.is_none_or(|ms| ms > LEADER_LEASE_MS) => None,
            other => other,
        }
    }

    /// Appends `command` to the quorum's log, waiting at most `WRITE_LIMIT`
    /// (a leader without a quorum would wait until it had one again).
    /// Returns the entry's log index once it is applied here.
    async fn write(&self, command: Command) -> Result<u64, BrokerAnswer> {
        match tokio::time::timeout(WRITE_LIMIT, self.raft.client_write(command)).await {
            Ok(Ok(written)) => Ok(written.log_id.index),
            Ok(Err(RaftError::APIError(ClientWriteError::ForwardToLeader(_)))) => Err(BrokerAnswer::NotLeader),
            Ok(Err(e)) => Err(BrokerAnswer::Failed(e.to_string())),
            Err(_) => Err(BrokerAnswer::Failed(format!("no quorum acknowledged the write within {WRITE_LIMIT:?}"))),
        }
    }

    /// A heartbeat, answered by the leader: it notes the time and writes a
    /// registration when the broker is new, fenced or has moved.
    async fn broker_request(&self, request: BrokerRequest) -> BrokerAnswer {
        if self.leader() != Some(self.node_id) {
            return BrokerAnswer::NotLeader;
        }
        let command = match request {
            BrokerRequest::Heartbeat(info) => {
                self.last_seen.lock().unwrap_or_else(|p| p.into_inner()).insert(info.node_id, Instant::now());
                let brokers = &self.published.borrow().brokers;
                if brokers.get(&info.node_id).is_some_and(|b| !b.fenced && b.info == info) {
                    return BrokerAnswer::Ok;
                }
                Command::RegisterBroker(info)
            }
            BrokerRequest::Leaving(id) => {
                log::info!("controller: broker {id} is shutting down; fencing it");
                Command::FenceBroker(id)
            }
            BrokerRequest::Unreachable(id) => match self.refuses_connections(id).await {
                Some(addr) => {
                    log::warn!("controller: broker {id} refuses connections at {addr}; fencing it now");
                    Command::FenceBroker(id)
                }
                None => return BrokerAnswer::Ok,
            },
            BrokerRequest::JoinIsr(changes) => Command::JoinIsrs(changes),
            BrokerRequest::LeaveIsr(change) => Command::LeaveIsr(change),
            BrokerRequest::CreateTopics(specs) => return self.create_topics(specs).await,
            BrokerRequest::DeleteTopics(names) => return self.delete_topics(names).await,
            BrokerRequest::AlterTopics(changes) => return self.alter_topics(changes).await,
            BrokerRequest::ChangeAcls(change) => return self.change_acls(change).await,
            BrokerRequest::AlterCredentials(changes) => return self.alter_credentials(changes).await,
            BrokerRequest::ElectLeaders { unclean, partitions } => {
                return self.elect_leaders(unclean, partitions).await
            }
            BrokerRequest::Reassign { partitions, allow_factor_change } => {
                return self.reassign_partitions(partitions, allow_factor_change).await
            }
        };
        self.write(command).await.map_or_else(|answer| answer, |_| BrokerAnswer::Ok)
    }

    /// Sends `request` to whichever member leads (this one included).
    async fn to_voter_leader(
        &self,
        peers: &mut HashMap<u64, network::Peer>,
        request: BrokerRequest,
        limit: Duration,
    ) -> BrokerAnswer {
        match self.leader() {
            None => BrokerAnswer::NotLeader,
            Some(l) if l == self.node_id => self.broker_request(request).await,
            Some(l) => {
                let addr = self.voters.get(&l).map(|n| n.addr.clone()).unwrap_or_default();
                let peer = peers.entry(l).or_insert_with(|| network::Peer::new(l, addr));
                let rpc = network::Rpc::Broker(request);
                peer.call(&rpc, limit).await.unwrap_or_else(|e| BrokerAnswer::Failed(e.to_string()))
            }
        }
    }

    /// On the leader: fences brokers whose session expired.
    async fn fence_expired(self: Arc<Self>) {
        let mut leading = false;
        loop {
            tokio::time::sleep((self.session_timeout / 8).min(FENCE_CHECK_EVERY)).await;
            let now_leading = self.leader() == Some(self.node_id);
            let brokers = self.published.borrow().brokers.clone();
            if now_leading && !leading {
                let now = Instant::now();
                let mut seen = self.last_seen.lock().unwrap_or_else(|p| p.into_inner());
                for id in brokers.keys() {
                    seen.insert(*id, now);
                }
            }
            leading = now_leading;
            if !leading {
                continue;
            }
            let expired: Vec<i32> = {
                let seen = self.last_seen.lock().unwrap_or_else(|p| p.into_inner());
                brokers
                    .iter()
                    .filter(|(id, b)| !b.fenced && seen.get(id).is_none_or(|t| t.elapsed() > self.session_timeout))
                    .map(|(id, _)| *id)
                    .collect()
            };
            for id in expired {
                log::warn!("controller: fencing broker {id}: no heartbeat for {:?}", self.session_timeout);
                if let Err(BrokerAnswer::Failed(e)) = self.write(Command::FenceBroker(id)).await {
                    log::warn!("controller: could not fence broker {id}: {e}");
                }
            }
        }
    }

    /// Keeps the published leader current: at every change of openraft's
    /// metrics, and every `FENCE_CHECK_EVERY` (a lost quorum changes none).
    async fn publish_leader(self: Arc<Self>) {
        let mut metrics = self.raft.metrics();
        loop {
            let leader = self.live_leader().map(|l| l as i32);
            if self.published.borrow().leader != leader {
                log::info!("controller: leader is now {leader:?} (node {})", self.node_id);
                self.published.send_modify(|v| v.leader = leader);
            }
            tokio::select! {
                // openraft's core gone (it panicked) freezes this broker's
                // view, and serving it could take writes for partitions it
                // no longer leads: it exits, to be restarted.
                changed = metrics.changed() => if changed.is_err() {
                    if !self.leaving.load(Ordering::Acquire) {
                        log::error!("controller: node {}: the Raft core stopped; the broker exits", self.node_id);
                        std::process::exit(70);
                    }
                    return;
                },
                () = tokio::time::sleep(FENCE_CHECK_EVERY) => {}
            }
        }
    }
}

impl member::Member for Controller {
    fn node_id(&self) -> i32 {
        self.node_id as i32
    }

    fn leaving(&self) -> &AtomicBool {
        &self.leaving
    }

    fn to_leader<'a>(
        &'a self,
        peers: &'a mut HashMap<u64, network::Peer>,
        request: BrokerRequest,
        limit: Duration,
    ) -> impl std::future::Future<Output = BrokerAnswer> + Send + 'a {
        self.to_voter_leader(peers, request, limit)
    }
}

/// The longest a silent broker stays unfenced past its session.
const FENCE_CHECK_EVERY: Duration = Duration::from_millis(250);
/// openraft's election_timeout_max, also the leader's lease (`open`).
const LEADER_LEASE_MS: u64 = 800;
/// How long a log write may wait for a quorum.
const WRITE_LIMIT: Duration = Duration::from_secs(5);
/// How long a stopping broker tries to be fenced before it goes anyway.
const LEAVE_LIMIT: Duration = Duration::from_secs(3);

/// Starts this broker's quorum member on a thread of its own; returns once
/// its port is bound and its log loaded, with the view the shards read.
pub fn start(mut settings: ControllerSettings) -> Result<ControllerHandle, String> {
    let (me, incarnation) = (settings.node_id as u64, settings.broker.incarnation);
    let Some(node) = settings.voters.get(&me) else {
        return observer::start(settings);
    };
    let bind = node.addr.clone();
    settings.broker.directory_id = Some(directory::load_or_create(&settings.dir)?);
    let (tx, rx) = tokio::sync::watch::channel(ClusterView::default());
    let published: Published = Arc::new(tx);
    let (ready_tx, ready_rx) = std::sync::mpsc::channel::<Result<(), String>>();
    let (left_tx, left) = std::sync::mpsc::channel();
    let (asks, asked) = tokio::sync::mpsc::unbounded_channel();
    std::thread::Builder::new()
        .name("controller".into())
        .spawn(move || {
            let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
                Ok(r) => r,
                Err(e) => {
                    let _ = ready_tx.send(Err(format!("cannot start the controller runtime: {e}")));
                    return;
                }
            };
            runtime.block_on(async move {
                let controller = match open(&settings, &bind, published).await {
                    Ok(c) => c,
                    Err(e) => {
                        let _ = ready_tx.send(Err(e));
                        return;
                    }
                };
                let (controller, listener) = controller;
                let _ = ready_tx.send(Ok(()));
                tokio::spawn(controller.clone().publish_leader());
                tokio::spawn(controller.clone().fence_expired());
                if let Some(rebalance) = settings.rebalance {
                    tokio::spawn(controller.clone().rebalance_leaders(rebalance));
                }
                tokio::spawn(member::heartbeats(controller.clone(), settings.broker.clone(), settings.heartbeat_every));
                tokio::spawn(member::leave_at_stop(controller.clone(), settings.stop.clone(), left_tx));
                tokio::spawn(member::answer_shards(controller.clone(), asked));
                network::serve(listener, controller).await;
            });
        })
        .map_err(|e| format!("cannot start the controller thread: {e}"))?;
    match ready_rx.recv() {
        Ok(Ok(())) => Ok(ControllerHandle { link: ClusterLink { view: rx, asks, incarnation }, left }),
        Ok(Err(e)) => Err(e),
        Err(_) => Err("the controller thread ended while starting".into()),
    }
}

async fn open(
    settings: &ControllerSettings,
    bind: &str,
    published: Published,
) -> Result<(Arc<Controller>, tokio::net::TcpListener), String> {
    let listener = tokio::net::TcpListener::bind(bind)
        .await
        .map_err(|e| format!("cannot listen for the controller quorum on {bind}: {e}"))?;
    let dir = &settings.dir;
    let log = store::LogStore::open(dir).map_err(|e| format!("controller log in {}: {e}", dir.display()))?;
    let sm = store::StateMachine::open(dir, published.clone())
        .map_err(|e| format!("controller state in {}: {e}", dir.display()))?;
    // A follower waits out the leader's lease (openraft 0.9:
    // election_timeout_max) and a random election timeout before it
    // stands: 1.2-1.6 s (0.5-1 s gave 2.0 s from a SIGKILL to acks=all
    // again, `perf/partition-failover.sh`). Eight heartbeats to miss.
    let config = openraft::Config {
        cluster_name: "shardlog".into(),
        heartbeat_interval: 100,
        election_timeout_min: 400,
        election_timeout_max: LEADER_LEASE_MS,
        ..Default::default()
    };
    let config = Arc::new(config.validate().map_err(|e| format!("controller settings: {e}"))?);
    let me = settings.node_id as u64;
    let raft =
        Raft::new(me, config, network::Network { published: published.clone(), refused: Arc::default() }, log, sm)
            .await
            .map_err(|e| format!("cannot start the controller: {e}"))?;
    // Every member proposes the same first membership; those that already
    // have a log (a restart) refuse, harmlessly.
    match raft.initialize(settings.voters.clone()).await {
        Ok(()) | Err(RaftError::APIError(InitializeError::NotAllowed(_))) => {}
        Err(e) => return Err(format!("cannot initialize the controller quorum: {e}")),
    }
    let controller = Arc::new(Controller {
        node_id: me,
        directory_id: settings.broker.directory_id.clone(),
        raft,
        voters: settings.voters.clone(),
        published,
        last_seen: Mutex::new(HashMap::new()),
        session_timeout: settings.session_timeout,
        leaving: AtomicBool::new(false),
    });
    Ok((controller, listener))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_quorum_is_parsed_and_bad_members_are_named() {
        let q = parse_quorum("1@127.0.0.1:9093, 2@host-b:9093,3@[::1]:9093").unwrap();
        assert_eq!(q.keys().copied().collect::<Vec<_>>(), vec![1, 2, 3]);
        assert_eq!(q[&2].addr, "host-b:9093");
        for (bad, says) in [
            ("1@a:1,1@b:2", "twice"),
            ("x@a:1", "not a node id"),
            ("1@a", "HOST:PORT"),
            ("1-a:1", "ID@HOST:PORT"),
            ("", "empty"),
        ] {
            let e = parse_quorum(bad).unwrap_err();
            assert!(e.contains(says), "{bad:?}: {e}");
        }
    }
}
