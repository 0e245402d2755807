//! A broker outside the quorum (its node id is not a voter's): it runs no
//! Raft member and opens no controller port, but is a broker of the
//! cluster all the same. It registers and heartbeats like a voter, learns
//! the log's state by watching a voter (`Rpc::Watch`: the voter answers
//! when its applied log moves past what the broker has, or after
//! `WATCH_WAIT` with the leader alone), and sends its shards' changes to
//! the leader. This is how a cluster grows past its 1, 3 or 5 voters, as
//! Kafka's brokers do beside its controllers.

use std::{
    collections::{BTreeMap, HashMap},
    sync::{atomic::AtomicBool, Arc},
    time::Duration,
};

use openraft::BasicNode;
use serde::{Deserialize, Serialize};

use super::{
    member::{self, Member},
    network::{Peer, Rpc},
    BrokerAnswer, BrokerRequest, ClusterLink, ClusterState, ClusterView, Controller, ControllerHandle,
    ControllerSettings, Published,
};

/// How long a voter holds a watch open when nothing changes.
const WATCH_WAIT: Duration = Duration::from_secs(1);

/// A voter's answer to a watch: the leader it knows, the index it applied
/// and, when that is past what the watcher has, the state at it.
#[derive(Serialize, Deserialize, Debug)]
pub(super) struct Watched {
    leader: Option<i32>,
    applied: u64,
    state: Option<ClusterState>,
}

impl Controller {
    /// A voter's side of `Rpc::Watch`.
    pub(super) async fn watch(&self, since: u64) -> Watched {
        let mut view = self.published.subscribe();
        let _ = tokio::time::timeout(WATCH_WAIT, view.wait_for(|v| v.applied > since)).await;
        let v = view.borrow();
        let state = (v.applied > since).then(|| ClusterState {
            brokers: v.brokers.clone(),
            topics: v.topics.clone(),
            acls: v.acls.clone(),
            credentials: v.credentials.clone(),
        });
        Watched { leader: v.leader, applied: v.applied, state }
    }
}

pub(super) struct Observer {
    node_id: i32,
    voters: BTreeMap<u64, BasicNode>,
    published: Published,
    leaving: AtomicBool,
}

impl Observer {
    /// Keeps the published view up to the voters' log, from whichever
    /// voter answers (another after a failure, or when one knows no leader).
    async fn follow(self: Arc<Self>) {
        let ids: Vec<u64> = self.voters.keys().copied().collect();
        let mut peers: HashMap<u64, Peer> = HashMap::new();
        let mut at = 0usize;
        loop {
            let id = ids[at % ids.len()];
            let since = self.published.borrow().applied;
            let peer = self.peer(&mut peers, id);
            match peer.call::<Watched>(&Rpc::Watch(since), WATCH_WAIT * 3).await {
                Ok(w) => {
                    if w.leader.is_none() {
                        at += 1;
                    }
                    // The shards hear only of a change: a new leader or
                    // a newer state.
                    self.published.send_if_modified(|v| {
                        let mut changed = v.leader != w.leader;
                        v.leader = w.leader;
                        if let Some(state) = w.state.filter(|_| w.applied > v.applied) {
                            (v.brokers, v.topics, v.acls, v.credentials) =
                                (state.brokers, state.topics, state.acls, state.credentials);
                            v.applied = w.applied;
                            changed = true;
                        }
                        changed
                    });
                }
                Err(_) => {
                    at += 1;
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
            }
        }
    }

    fn peer<'a>(&self, peers: &'a mut HashMap<u64, Peer>, id: u64) -> &'a mut Peer {
        let addr = self.voters.get(&id).map(|n| n.addr.clone()).unwrap_or_default();
        peers.entry(id).or_insert_with(|| Peer::new(id, addr))
    }
}

impl Member for Observer {
    fn node_id(&self) -> i32 {
        self.node_id
    }

    fn leaving(&self) -> &AtomicBool {
        &self.leaving
    }

    /// The leader the watched voter named first, then every voter in turn
    /// until one is the leader.
    async fn to_leader(&self, peers: &mut HashMap<u64, Peer>, request: BrokerRequest, limit: Duration) -> BrokerAnswer {
        let hint = self.published.borrow().leader.map(|l| l as u64);
        let mut order: Vec<u64> = hint.into_iter().collect();
        order.extend(self.voters.keys().copied().filter(|id| Some(*id) != hint));
        let mut last = BrokerAnswer::NotLeader;
        for id in order {
            let rpc = Rpc::Broker(request.clone());
            match self.peer(peers, id).call::<BrokerAnswer>(&rpc, limit).await {
                Ok(BrokerAnswer::NotLeader) => {}
                Ok(answer) => return answer,
                Err(e) => last = BrokerAnswer::Failed(e.to_string()),
            }
        }
        last
    }
}

/// Starts this broker's link to the quorum it is not a voter of, on a
/// thread of its own.
pub(super) fn start(settings: ControllerSettings) -> Result<ControllerHandle, String> {
    let incarnation = settings.broker.incarnation;
    let (tx, view) = tokio::sync::watch::channel(ClusterView::default());
    let published: Published = Arc::new(tx);
    let (left_tx, left) = std::sync::mpsc::channel();
    let (asks, asked) = tokio::sync::mpsc::unbounded_channel();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start the controller runtime: {e}"))?;
    let observer = Arc::new(Observer {
        node_id: settings.node_id,
        voters: settings.voters.clone(),
        published,
        leaving: AtomicBool::new(false),
    });
    std::thread::Builder::new()
        .name("controller".into())
        .spawn(move || {
            runtime.block_on(async move {
                tokio::spawn(member::heartbeats(observer.clone(), settings.broker.clone(), settings.heartbeat_every));
                tokio::spawn(member::leave_at_stop(observer.clone(), settings.stop.clone(), left_tx));
                tokio::spawn(member::answer_shards(observer.clone(), asked));
                observer.follow().await;
            });
        })
        .map_err(|e| format!("cannot start the controller thread: {e}"))?;
    Ok(ControllerHandle { link: ClusterLink { view, asks, incarnation }, left })
}
