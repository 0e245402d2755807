//! Follower fetches between owning shards (issue 18). The client listeners
//! are bound by every shard on one port (SO_REUSEPORT), so the kernel
//! picks the shard a connection lands on. In a quorum each shard also
//! accepts connections on a port of its own, told to the other brokers
//! with this broker's registration (`BrokerInfo::shard_ports`); a
//! follower's shard N fetches from its leader's shard N's port. Brokers
//! with as many shards place a topic's partitions on the same shards
//! (`router::assign`), so the fetch lands on the shard that owns every
//! partition it names and never hops between shards. With other shard
//! counts it is still served, routed to the owners like any fetch.
//!
//! The ports serve the Kafka protocol with the first listener's security
//! protocol and TLS, the listener followers used before.

use crate::server::{config::ServeConfig, listeners::Listener};

/// One bound port per shard (`replica_fetch_port` plus the shard's index,
/// or free ports when it is 0), at the first listener's bind address; none
/// alone.
pub fn bind(config: &ServeConfig, listeners: &[Listener], shards: usize) -> Result<Vec<std::net::TcpListener>, String> {
    if config.controller_quorum.is_none() {
        return Ok(Vec::new());
    }
    let ip = listeners.first().ok_or("no listener to fetch beside")?.bind.ip();
    (0..shards)
        .map(|shard| {
            let port = match config.replica_fetch_port {
                0 => 0,
                base => u16::try_from(usize::from(base) + shard)
                    .map_err(|_| format!("replica_fetch_port {base} + shard {shard} is not a port"))?,
            };
            std::net::TcpListener::bind((ip, port))
                .map_err(|e| format!("cannot accept follower fetches for shard {shard} on {ip}:{port}: {e}"))
        })
        .collect()
}

/// The ports `bind` took, by shard.
pub fn ports(bound: &[std::net::TcpListener]) -> Result<Vec<u16>, String> {
    bound.iter().map(|l| l.local_addr().map(|a| a.port()).map_err(|e| format!("follower fetch port: {e}"))).collect()
}
