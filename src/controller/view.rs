//! What Metadata, DescribeCluster and FindCoordinator read of the quorum's
//! published view.

use crate::shard::BrokerSettings;

/// A broker as Metadata and DescribeCluster list it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AdvertisedBroker {
    pub node_id: i32,
    pub host: String,
    pub port: i32,
    pub rack: Option<String>,
}

/// The brokers a client on `listener` is told of, and the controller id
/// it is given. Alone: this broker, its own controller. In a quorum: every
/// registered broker not fenced, at its address for the same listener name
/// (this broker always, so a client never loses the broker it talks to),
/// and the Raft leader when it is one of them (else this broker: admin
/// requests sent to the controller id must reach a live broker).
///
/// `borrow()` takes the watch channel's read lock for the copy below: off
/// the data path, as only Metadata and DescribeCluster call this (clients
/// ask at start, on errors and every few minutes), never produce or fetch;
/// the controller thread writes it only when the log or the leader changes.
pub fn advertised_brokers(settings: &BrokerSettings, listener: &str) -> (Vec<AdvertisedBroker>, i32) {
    let (host, port) = crate::server::listeners::advertised_for(settings, listener);
    let me = AdvertisedBroker { node_id: settings.node_id, host: host.to_string(), port, rack: settings.rack.clone() };
    let Some(cluster) = &settings.cluster else {
        return (vec![me], settings.node_id);
    };
    let view = cluster.view.borrow();
    let mut brokers: Vec<AdvertisedBroker> = view
        .brokers
        .values()
        .filter(|b| !b.fenced && b.info.node_id != settings.node_id)
        .filter_map(|b| {
            let l = b.info.listeners.iter().find(|l| l.name == listener).or(b.info.listeners.first())?;
            let (node_id, host, port, rack) = (b.info.node_id, l.host.clone(), l.port, b.info.rack.clone());
            Some(AdvertisedBroker { node_id, host, port, rack })
        })
        .collect();
    brokers.push(me);
    brokers.sort_by_key(|b| b.node_id);
    let controller = view.leader.filter(|l| brokers.iter().any(|b| b.node_id == *l)).unwrap_or(settings.node_id);
    (brokers, controller)
}

/// The port broker `node_id`'s shard for this broker's shard `shard`
/// accepts follower fetches on, if it told the quorum of any
/// (`server::replica_ports`). Read when a follower connects, off the data
/// path.
pub fn shard_port(settings: &BrokerSettings, node_id: i32, shard: usize) -> Option<i32> {
    let view = settings.cluster.as_ref()?.view.borrow();
    let ports = &view.live(node_id)?.shard_ports;
    (!ports.is_empty()).then(|| i32::from(ports[shard % ports.len()]))
}

/// Where a client on `listener` reaches the broker `node_id`, while the
/// quorum has it unfenced. Like `advertised_brokers`, off the data path
/// (FindCoordinator only).
pub fn broker_address(settings: &BrokerSettings, listener: &str, node_id: i32) -> Option<(String, i32)> {
    let view = settings.cluster.as_ref()?.view.borrow();
    let info = view.live(node_id)?;
    let l = info.listeners.iter().find(|l| l.name == listener).or(info.listeners.first())?;
    Some((l.host.clone(), l.port))
}
