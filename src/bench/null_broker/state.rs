//! One core's state: the topics, the tails of the partitions it leads, and
//! the wake-up for long polls. Only this core's executor touches it.
//!
//! Every core knows every topic: a topic created on one core is sent to
//! the others over glommio's channel mesh, and CreateTopics is answered
//! once they all have it. Partition p of any topic is led by core
//! p % cores, which alone holds its records.
//!
//! Transactions: core 0 (node 0) is every transactional id's coordinator;
//! it keeps each id's producer and the partitions of its open transaction
//! in memory, and at EndTxn sends each partition's marker to the core
//! leading it over the same mesh. No decision is logged: nothing here
//! survives the process.

use std::{
    cell::{Cell, RefCell},
    collections::{BTreeSet, HashMap},
    rc::Rc,
};

use futures_channel::oneshot;
use glommio::channels::channel_mesh::{Receivers, Senders};

use super::tail::{codes, Notify, Tail};
use crate::limits::NULL_BROKER_MEMORY_BYTES_MAX;

/// Partitions of a topic that is created without saying how many (Kafka's
/// `num.partitions` default).
pub const DEFAULT_PARTITIONS: i32 = 1;

/// What one core tells another.
pub enum PeerMessage {
    /// A new topic; `done` is answered once it is in the receiver's table.
    Create { name: String, partitions: i32, done: oneshot::Sender<()> },
    /// A transaction's marker for a partition the receiver leads; `done`
    /// gets the partition's error code once it is in the tail.
    Marker { marker: Marker, done: oneshot::Sender<i16> },
}

/// A commit or abort marker bound for one partition.
#[derive(Debug, Clone)]
pub struct Marker {
    pub topic: String,
    pub partition: i32,
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub commit: bool,
}

/// A transactional id's producer and its open transaction's partitions
/// (held by the coordinator, core 0).
pub struct Txn {
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub partitions: BTreeSet<(String, i32)>,
}

pub struct Topic {
    pub partitions: i32,
    /// Stable across cores (from the name), for Metadata v10+.
    pub id: uuid::Uuid,
    /// Indexed by partition; `Some` for the partitions this core leads.
    pub tails: Vec<Option<Tail>>,
}

pub struct Core {
    pub node: i32,
    /// (host, port) of every core's listener, by node id.
    pub nodes: Vec<(String, u16)>,
    pub topics: RefCell<HashMap<String, Topic>>,
    partitions_total: Cell<usize>,
    /// Bytes each partition keeps (`--tail-bytes`).
    tail_bytes: usize,
    pub notify: Notify,
    peers: Senders<PeerMessage>,
    /// Transactional ids (core 0 only).
    pub txns: RefCell<HashMap<String, Txn>>,
    /// Producer ids handed out here: node + n × cores, unique across cores.
    producers_given: Cell<i64>,
}

impl Core {
    pub fn new(node: i32, nodes: Vec<(String, u16)>, tail_bytes: usize, peers: Senders<PeerMessage>) -> Self {
        Self {
            node,
            nodes,
            topics: RefCell::new(HashMap::new()),
            partitions_total: Cell::new(0),
            tail_bytes,
            notify: Notify::default(),
            peers,
            txns: RefCell::new(HashMap::new()),
            producers_given: Cell::new(0),
        }
    }

    /// A producer id no other core gives.
    pub fn new_producer_id(&self) -> i64 {
        let n = self.producers_given.get();
        self.producers_given.set(n + 1);
        i64::from(self.node) + n * self.nodes.len() as i64
    }

    /// Writes `marker` into the partition's tail, on whichever core leads
    /// it; answers the partition's error code.
    pub async fn write_marker(&self, marker: Marker) -> i16 {
        let leader = self.leader(marker.partition);
        if leader == self.node {
            return self.write_marker_here(&marker);
        }
        let (done, written) = oneshot::channel();
        let message = PeerMessage::Marker { marker, done };
        if self.peers.send_to(leader as usize, message).await.is_err() {
            return codes::COORDINATOR_NOT_AVAILABLE;
        }
        written.await.unwrap_or(codes::COORDINATOR_NOT_AVAILABLE)
    }

    /// A marker for a partition this core leads: appended (as a control
    /// batch) and read_committed long polls woken.
    fn write_marker_here(&self, m: &Marker) -> i16 {
        let mut topics = self.topics.borrow_mut();
        let tail = topics.get_mut(&m.topic).and_then(|t| t.tails.get_mut(usize::try_from(m.partition).ok()?));
        let Some(Some(tail)) = tail else { return codes::UNKNOWN_TOPIC_OR_PARTITION };
        let marker = crate::protocol::record_batch::TxnMarker {
            producer_id: m.producer_id,
            producer_epoch: m.producer_epoch,
            commit: m.commit,
            coordinator_epoch: 0,
        };
        let now =
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64);
        let batch = crate::protocol::record_batch::encode_control_batch(&marker, now);
        tail.end_txn(m.producer_id, m.commit, bytes::BytesMut::from(&batch[..]));
        drop(topics);
        self.notify.notify();
        codes::NONE
    }

    /// The node leading `partition`.
    pub fn leader(&self, partition: i32) -> i32 {
        partition.rem_euclid(self.nodes.len() as i32)
    }

    /// Creates a topic on every core. Err: a Kafka error code and why.
    pub async fn create_topic(&self, name: &str, partitions: i32) -> Result<(), (i16, String)> {
        let partitions = if partitions == -1 { DEFAULT_PARTITIONS } else { partitions };
        if self.topics.borrow().contains_key(name) {
            return Err((codes::TOPIC_ALREADY_EXISTS, format!("topic {name} already exists")));
        }
        let most = NULL_BROKER_MEMORY_BYTES_MAX / self.tail_bytes;
        let room = most.saturating_sub(self.partitions_total.get());
        if partitions < 1 || partitions as usize > room {
            return Err((
                codes::INVALID_PARTITIONS,
                format!("topic {name}: {partitions} partitions; with --tail-bytes {} the null broker holds at most {most} in all ({room} left)", self.tail_bytes),
            ));
        }
        self.add_topic(name, partitions);
        for peer in (0..self.peers.nr_consumers()).filter(|&p| p as i32 != self.node) {
            let (done, acked) = oneshot::channel();
            let message = PeerMessage::Create { name: name.to_string(), partitions, done };
            if self.peers.send_to(peer, message).await.is_err() || acked.await.is_err() {
                return Err((codes::INVALID_REQUEST, format!("topic {name}: core {peer} did not take it")));
            }
        }
        Ok(())
    }

    /// Adds a topic to this core's table (a second creation of the same
    /// name, racing on another core, is ignored).
    fn add_topic(&self, name: &str, partitions: i32) {
        let mut topics = self.topics.borrow_mut();
        if topics.contains_key(name) {
            return;
        }
        let tails =
            (0..partitions).map(|p| (self.leader(p) == self.node).then(|| Tail::new(self.tail_bytes))).collect();
        topics.insert(name.to_string(), Topic { partitions, id: topic_id(name), tails });
        self.partitions_total.set(self.partitions_total.get() + partitions as usize);
    }
}

/// Applies what the other cores send, for as long as the process runs.
pub fn serve_peers(core: &Rc<Core>, mut receivers: Receivers<PeerMessage>) {
    for (_, stream) in receivers.streams() {
        let core = core.clone();
        glommio::spawn_local(async move {
            while let Some(message) = stream.recv().await {
                match message {
                    PeerMessage::Create { name, partitions, done } => {
                        core.add_topic(&name, partitions);
                        let _ = done.send(());
                    }
                    PeerMessage::Marker { marker, done } => {
                        let _ = done.send(core.write_marker_here(&marker));
                    }
                }
            }
        })
        .detach();
    }
}

/// A topic id derived from the name, so every core gives the same one.
fn topic_id(name: &str) -> uuid::Uuid {
    let fnv = |seed: u64| name.bytes().fold(seed, |h, b| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3));
    let (a, b) = (fnv(0xcbf2_9ce4_8422_2325), fnv(0x8422_2325_cbf2_9ce4));
    uuid::Uuid::from_u64_pair(a, b | 1)
}
