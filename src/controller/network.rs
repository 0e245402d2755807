//! The controller's RPCs between quorum members: TCP, one frame per
//! message (a 4-byte big-endian length, then JSON). A peer keeps one
//! connection and opens a new one after any error; every call is bounded
//! by openraft's time limit for it.
//!
//! Besides Raft's own three RPCs, a broker sends the leader its
//! registration, heartbeats and changes (`Rpc::Broker`), and a broker
//! outside the quorum watches a voter for the log's state (`Rpc::Watch`).

use std::{
    collections::BTreeMap,
    io,
    sync::{Arc, Mutex},
    time::Duration,
};

use openraft::{
    error::{InstallSnapshotError, NetworkError, RPCError, RaftError, RemoteError, Unreachable},
    network::{RPCOption, RaftNetwork, RaftNetworkFactory},
    raft::{
        AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotRequest, InstallSnapshotResponse, VoteRequest,
        VoteResponse,
    },
    BasicNode,
};
use serde::{de::DeserializeOwned, Deserialize, Serialize};
use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::{TcpListener, TcpStream},
};

use super::{directory, BrokerRequest, Controller, Published, TypeConfig};

type NodeId = u64;

/// Largest frame accepted: a snapshot chunk or a batch of entries is far
/// smaller; anything bigger is a stray client, answered by a close.
const MAX_FRAME: usize = 64 << 20;

#[derive(Serialize, Deserialize)]
pub(super) enum Rpc {
    Append(AppendEntriesRequest<TypeConfig>),
    Vote(VoteRequest<NodeId>),
    Snapshot(InstallSnapshotRequest<TypeConfig>),
    Broker(BrokerRequest),
    /// A broker outside the quorum asks for the log's state past an index.
    Watch(u64),
}

async fn write_frame(stream: &mut TcpStream, value: &impl Serialize) -> io::Result<()> {
    let body = serde_json::to_vec(value)?;
    let mut frame = Vec::with_capacity(4 + body.len());
    frame.extend_from_slice(&(body.len() as u32).to_be_bytes());
    frame.extend_from_slice(&body);
    stream.write_all(&frame).await
}

async fn read_frame<T: DeserializeOwned>(stream: &mut TcpStream) -> io::Result<T> {
    let len = stream.read_u32().await? as usize;
    if len > MAX_FRAME {
        return Err(io::Error::new(io::ErrorKind::InvalidData, format!("controller frame of {len} bytes")));
    }
    let mut body = vec![0; len];
    stream.read_exact(&mut body).await?;
    serde_json::from_slice(&body).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))
}

/// One quorum member as seen from here.
pub(super) struct Peer {
    target: NodeId,
    addr: String,
    conn: Option<TcpStream>,
    /// The applied log's view, for the directory ids voters registered.
    published: Option<Published>,
    /// Per voter, the unregistered directory whose votes were last
    /// refused: told once, not at every election. Shared by every client
    /// the factory makes (openraft makes one per election), so it cannot
    /// live in one `Peer`; openraft wants the clients `Send`, hence a
    /// `Mutex`, not a `RefCell`. Off the data path: only the controller's
    /// own thread takes it, once per vote a voter answers (a few times per
    /// election), never a shard, and nothing waits on it while holding it.
    refused: Arc<Mutex<BTreeMap<NodeId, String>>>,
}

impl Peer {
    pub(super) fn new(target: NodeId, addr: String) -> Self {
        Self { target, addr, conn: None, published: None, refused: Arc::default() }
    }

    /// Sends `rpc` and reads its answer within `ttl`; a failed call drops the
    /// connection, so the next one starts clean.
    pub(super) async fn call<T: DeserializeOwned>(&mut self, rpc: &Rpc, ttl: Duration) -> io::Result<T> {
        let result = tokio::time::timeout(ttl, async {
            if self.conn.is_none() {
                let stream = TcpStream::connect(&self.addr).await?;
                stream.set_nodelay(true)?;
                self.conn = Some(stream);
            }
            let stream = self.conn.as_mut().expect("connected above");
            write_frame(stream, rpc).await?;
            read_frame(stream).await
        })
        .await
        .unwrap_or_else(|_| {
            Err(io::Error::new(io::ErrorKind::TimedOut, format!("no answer from controller {} in {ttl:?}", self.addr)))
        });
        if result.is_err() {
            self.conn = None;
        }
        result
    }

    /// A Raft RPC: transport failures become openraft's network errors,
    /// the peer's refusal its remote error.
    async fn raft_call<T: DeserializeOwned, E: std::error::Error + DeserializeOwned>(
        &mut self,
        rpc: Rpc,
        option: RPCOption,
    ) -> Result<T, RPCError<NodeId, BasicNode, RaftError<NodeId, E>>> {
        let answer: Result<T, RaftError<NodeId, E>> = self.call(&rpc, option.hard_ttl()).await.map_err(|e| {
            if matches!(e.kind(), io::ErrorKind::ConnectionRefused | io::ErrorKind::NotFound) {
                RPCError::Unreachable(Unreachable::new(&e))
            } else {
                RPCError::Network(NetworkError::new(&e))
            }
        })?;
        answer.map_err(|e| RPCError::RemoteError(RemoteError::new(self.target, e)))
    }
}

pub(super) struct Network {
    pub(super) published: Published,
    pub(super) refused: Arc<Mutex<BTreeMap<NodeId, String>>>,
}

impl RaftNetworkFactory<TypeConfig> for Network {
    type Network = Peer;

    async fn new_client(&mut self, target: NodeId, node: &BasicNode) -> Peer {
        let (published, refused) = (Some(self.published.clone()), self.refused.clone());
        Peer { published, refused, ..Peer::new(target, node.addr.clone()) }
    }
}

impl RaftNetwork<TypeConfig> for Peer {
    async fn append_entries(
        &mut self,
        rpc: AppendEntriesRequest<TypeConfig>,
        option: RPCOption,
    ) -> Result<AppendEntriesResponse<NodeId>, RPCError<NodeId, BasicNode, RaftError<NodeId>>> {
        self.raft_call(Rpc::Append(rpc), option).await
    }

    async fn install_snapshot(
        &mut self,
        rpc: InstallSnapshotRequest<TypeConfig>,
        option: RPCOption,
    ) -> Result<InstallSnapshotResponse<NodeId>, RPCError<NodeId, BasicNode, RaftError<NodeId, InstallSnapshotError>>>
    {
        self.raft_call(Rpc::Snapshot(rpc), option).await
    }

    async fn vote(
        &mut self,
        rpc: VoteRequest<NodeId>,
        option: RPCOption,
    ) -> Result<VoteResponse<NodeId>, RPCError<NodeId, BasicNode, RaftError<NodeId>>> {
        let (mut answer, answered): (VoteResponse<NodeId>, Option<String>) =
            self.raft_call(Rpc::Vote(rpc), option).await?;
        let registered = self.published.as_ref().and_then(|p| {
            let view = p.borrow();
            view.brokers.get(&(self.target as i32)).and_then(|b| b.info.directory_id.clone())
        });
        if answer.vote_granted && !directory::vote_counts(registered.as_deref(), answered.as_deref()) {
            answer.vote_granted = false;
            let told = {
                let mut refused = self.refused.lock().unwrap_or_else(|p| p.into_inner());
                let answered = answered.clone().unwrap_or_default();
                refused.insert(self.target, answered.clone()).is_some_and(|before| before == answered)
            };
            if told {
                return Ok(answer);
            }
            log::warn!(
                "controller: voter {}'s vote not counted: it answered from directory {} where the log registers {} \
                 (it lost its directory; it votes again once it registered the new one)",
                self.target,
                answered.as_deref().unwrap_or("(none)"),
                registered.as_deref().unwrap_or("(none)")
            );
        }
        Ok(answer)
    }
}

/// Accepts quorum members' connections and answers their RPCs in order.
pub(super) async fn serve(listener: TcpListener, controller: Arc<Controller>) {
    loop {
        let Ok((mut stream, peer)) = listener.accept().await else {
            tokio::time::sleep(Duration::from_millis(50)).await;
            continue;
        };
        let _ = stream.set_nodelay(true);
        let controller = controller.clone();
        tokio::spawn(async move {
            loop {
                let rpc: Rpc = match read_frame(&mut stream).await {
                    Ok(rpc) => rpc,
                    Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return,
                    Err(e) => {
                        log::warn!("controller: closing the connection from {peer}: {e}");
                        return;
                    }
                };
                let written = match rpc {
                    Rpc::Append(r) => write_frame(&mut stream, &controller.raft.append_entries(r).await).await,
                    Rpc::Vote(r) => {
                        let answer = controller.raft.vote(r).await.map(|v| (v, controller.directory_id.clone()));
                        write_frame(&mut stream, &answer).await
                    }
                    Rpc::Snapshot(r) => write_frame(&mut stream, &controller.raft.install_snapshot(r).await).await,
                    Rpc::Broker(r) => write_frame(&mut stream, &controller.broker_request(r).await).await,
                    Rpc::Watch(since) => write_frame(&mut stream, &controller.watch(since).await).await,
                };
                if written.is_err() {
                    return;
                }
            }
        });
    }
}
