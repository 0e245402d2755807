//! `shardlog bench null-broker`: a Kafka broker that does nothing but
//! answer, so that latency measured against it is the floor of the load
//! generator plus loopback TCP. `perf/standard-workloads.sh` runs every
//! latency workload against it in the same run and divides by it.
//!
//! It speaks just enough Kafka for `shardlog bench` and librdkafka
//! producers and `assign()` consumers: ApiVersions, Metadata, CreateTopics,
//! Produce, ListOffsets and Fetch, plus the transactional producer's
//! FindCoordinator, InitProducerId, AddPartitionsToTxn and EndTxn
//! (`txn.rs`), and advertises nothing else (a group lookup finds no
//! coordinator). Produce is answered at once; the batches stay in memory
//! only (`tail.rs`, a bounded tail per partition with their base offsets
//! patched), and Fetch serves them back, with long poll, below the last
//! stable offset for read_committed readers.
//!
//! Cheap on purpose: one pinned glommio executor per core in `--cpuset`,
//! each a node of its own on its own port (core i listens on PORT+i and
//! leads partition p when p % cores == i), so cores share nothing on the
//! data path: no locks, no cross-core hops. Topic creation is the one thing
//! broadcast between cores (`state.rs`). Connections are served one request
//! at a time, as Kafka does, with the answers to pipelined requests written
//! together; Produce is parsed and answered by hand (`wire.rs`) and its
//! batches are kept as slices of the request's buffer (one copy out of the
//! connection's read buffer, see `connection.rs`); Fetch writes those same
//! slices back with one vectored send.
//!
//! It is a client-side tool: it depends on `protocol` and the protocol
//! crate, never on `server`, `shard` or `storage`.

mod connection;
mod handlers;
mod state;
mod tail;
mod txn;
mod wire;

use std::{
    net::{SocketAddr, ToSocketAddrs},
    rc::Rc,
    sync::mpsc,
};

use clap::Args;
use glommio::{channels::channel_mesh::MeshBuilder, net::TcpListener, LocalExecutorBuilder, Placement};

use self::state::{Core, PeerMessage};
use crate::limits::{NULL_BROKER_TAIL_BYTES_DEFAULT, NULL_BROKER_TAIL_BYTES_MAX, NULL_BROKER_TAIL_BYTES_MIN};

/// Room in each core-to-core channel (topic creations and markers).
const MESH_CHANNEL_CAPACITY: usize = 64;

#[derive(Args, Debug, Clone)]
pub struct NullBrokerArgs {
    /// Address to listen on. With several cores, core i listens on PORT+i
    /// and is node i in Metadata.
    #[arg(long, default_value = "127.0.0.1:9092")]
    pub listen: String,
    /// Cores to run on, one pinned executor each, e.g. 0 or 2-3 (default:
    /// the first core this process may run on).
    #[arg(long)]
    pub cpuset: Option<String>,
    /// Bytes of recent batches kept per partition (in memory); a consumer
    /// further behind gets OFFSET_OUT_OF_RANGE.
    #[arg(long, default_value_t = NULL_BROKER_TAIL_BYTES_DEFAULT)]
    pub tail_bytes: usize,
}

/// Runs the null broker until the process is killed: it holds nothing
/// that needs a clean shutdown.
pub fn run(a: &NullBrokerArgs) -> Result<(), String> {
    let addr = resolve(&a.listen)?;
    if !(NULL_BROKER_TAIL_BYTES_MIN..=NULL_BROKER_TAIL_BYTES_MAX).contains(&a.tail_bytes) {
        return Err(format!(
            "--tail-bytes {} outside [{NULL_BROKER_TAIL_BYTES_MIN}, {NULL_BROKER_TAIL_BYTES_MAX}]",
            a.tail_bytes
        ));
    }
    let cpus = match &a.cpuset {
        Some(list) => parse_cpuset(list)?,
        None => vec![core_affinity::get_core_ids().and_then(|ids| ids.first().map(|c| c.id)).unwrap_or(0)],
    };
    if cpus.len() > 1 && addr.port() == 0 {
        return Err("--listen with port 0 needs a single core: with several, core i listens on PORT+i".into());
    }
    if usize::from(addr.port()) + cpus.len() > usize::from(u16::MAX) + 1 {
        return Err(format!("--listen {addr}: no room for {} ports after it", cpus.len()));
    }
    // Clients learn every node's address from Metadata.
    let host = if addr.ip().is_unspecified() { "127.0.0.1".to_string() } else { addr.ip().to_string() };
    let nodes: Vec<(String, u16)> =
        (0..cpus.len()).map(|i| (host.clone(), if addr.port() == 0 { 0 } else { addr.port() + i as u16 })).collect();
    let mesh = MeshBuilder::<PeerMessage, _>::full(cpus.len(), MESH_CHANNEL_CAPACITY);
    let (ready_tx, ready_rx) = mpsc::channel::<Result<u16, String>>();
    let mut handles = Vec::new();
    for (index, &cpu) in cpus.iter().enumerate() {
        let (nodes, mesh, ready, tail_bytes) = (nodes.clone(), mesh.clone(), ready_tx.clone(), a.tail_bytes);
        let bind_to = SocketAddr::new(addr.ip(), nodes[index].1);
        let handle = LocalExecutorBuilder::new(Placement::Fixed(cpu))
            .name(&format!("null-broker-{index}"))
            .spawn(move || async move { serve_core(index, bind_to, nodes, tail_bytes, mesh, ready).await })
            .map_err(|e| format!("cannot start an executor on core {cpu}: {e}"))?;
        handles.push(handle);
    }
    let mut first_port = 0;
    for i in 0..cpus.len() {
        let port = ready_rx.recv().map_err(|_| "an executor stopped before listening".to_string())??;
        if i == 0 || port < first_port {
            first_port = port;
        }
    }
    println!(
        "null broker listening on {host}:{first_port} ({} core(s) {cpus:?}, one node per core on consecutive ports)",
        cpus.len()
    );
    for h in handles {
        h.join().map_err(|e| format!("null broker executor failed: {e:?}"))??;
    }
    Ok(())
}

fn resolve(listen: &str) -> Result<SocketAddr, String> {
    listen
        .to_socket_addrs()
        .map_err(|e| format!("--listen {listen:?}: {e}"))?
        .next()
        .ok_or_else(|| format!("--listen {listen:?} resolves to no address"))
}

/// One core: listen, join the other cores, accept connections forever.
async fn serve_core(
    index: usize,
    bind_to: SocketAddr,
    mut nodes: Vec<(String, u16)>,
    tail_bytes: usize,
    mesh: MeshBuilder<PeerMessage, glommio::channels::channel_mesh::Full>,
    ready: mpsc::Sender<Result<u16, String>>,
) -> Result<(), String> {
    let listener = match TcpListener::bind(bind_to) {
        Ok(l) => l,
        Err(e) => {
            let reason = format!("cannot listen on {bind_to}: {e}");
            let _ = ready.send(Err(reason.clone()));
            return Err(reason);
        }
    };
    let port = listener.local_addr().map_err(|e| e.to_string())?.port();
    nodes[index].1 = port;
    let (senders, receivers) = mesh.join().await.map_err(|e| format!("cannot join the other cores: {e}"))?;
    let core = Rc::new(Core::new(index as i32, nodes, tail_bytes, senders));
    state::serve_peers(&core, receivers);
    let _ = ready.send(Ok(port));
    loop {
        match listener.accept().await {
            Ok(stream) => {
                glommio::spawn_local(connection::serve(core.clone(), stream)).detach();
            }
            Err(e) => log::warn!("null broker on {bind_to}: accept failed: {e}"),
        }
    }
}

/// Parses "0-3,6".
fn parse_cpuset(list: &str) -> Result<Vec<usize>, String> {
    let mut out = Vec::new();
    for part in list.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let bad = || format!("--cpuset {list:?}: cannot read {part:?}");
        let (a, b) = part.split_once('-').unwrap_or((part, part));
        let (a, b): (usize, usize) = (a.parse().map_err(|_| bad())?, b.parse().map_err(|_| bad())?);
        if a > b {
            return Err(bad());
        }
        out.extend(a..=b);
    }
    if out.is_empty() {
        return Err(format!("--cpuset {list:?} names no core"));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    #[test]
    fn cpusets() {
        assert_eq!(super::parse_cpuset("0-2,5").unwrap(), vec![0, 1, 2, 5]);
        assert_eq!(super::parse_cpuset("1").unwrap(), vec![1]);
        assert!(super::parse_cpuset("3-1").is_err());
        assert!(super::parse_cpuset("").is_err());
    }
}
