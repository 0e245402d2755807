//! A topic's replicas in the quorum's log: who holds each partition, who
//! is in sync, and the leader epoch, and how fencing a broker and its
//! return change them (applied by every member alike, `store`); and the
//! leader's check of a broker a follower could not reach.

use std::time::Duration;

use super::{ClusterTopic, Controller};

impl Controller {
    /// The address of live broker `id`'s first listener when a connection
    /// to it is refused there (nothing listens: its process is gone). A
    /// broker paused or cut off does not refuse; its session decides.
    pub(super) async fn refuses_connections(&self, id: i32) -> Option<String> {
        let addr = {
            let view = self.published.borrow();
            let entry = view.brokers.get(&id).filter(|b| !b.fenced)?;
            let l = entry.info.listeners.first()?;
            format!("{}:{}", l.host, l.port)
        };
        let probe = tokio::time::timeout(Duration::from_millis(500), tokio::net::TcpStream::connect(&addr)).await;
        match probe {
            Ok(Err(e)) if e.kind() == std::io::ErrorKind::ConnectionRefused => Some(addr),
            _ => None,
        }
    }
}

impl ClusterTopic {
    /// Partition `p`'s replicas (the leader alone in old entries).
    pub fn replicas_of(&self, p: usize) -> Vec<i32> {
        match self.replicas.get(p) {
            Some(r) if !r.is_empty() => r.clone(),
            _ => self.leaders.get(p).map(|&l| vec![l]).unwrap_or_default(),
        }
    }

    /// Partition `p`'s in-sync replicas (its replicas in old entries).
    pub fn isr_of(&self, p: usize) -> Vec<i32> {
        match self.isr.get(p) {
            Some(r) if !r.is_empty() => r.clone(),
            _ => self.replicas_of(p),
        }
    }

    /// Fills the per-partition lists out to the partition count, so they
    /// can be changed by index.
    pub fn fill_out(&mut self) {
        let n = self.leaders.len();
        let replicas: Vec<Vec<i32>> = (0..n).map(|p| self.replicas_of(p)).collect();
        let isr: Vec<Vec<i32>> = (0..n).map(|p| self.isr_of(p)).collect();
        self.replicas = replicas;
        self.isr = isr;
        self.epochs.resize(n, 0);
    }

    /// The broker `fenced` stopped answering: it leaves every in-sync set
    /// it is in but the last member's place (Kafka never empties an ISR:
    /// its last member is the only replica known to hold everything), and
    /// a partition it led moves to another in-sync replica that is not
    /// fenced, under a new epoch. With none, the partition stays with it,
    /// offline until it returns.
    pub fn fence(&mut self, fenced: i32, is_fenced: impl Fn(i32) -> bool) {
        self.fill_out();
        for p in 0..self.leaders.len() {
            let isr = &mut self.isr[p];
            if isr.len() > 1 && isr.contains(&fenced) {
                isr.retain(|&b| b != fenced);
            }
            if self.leaders[p] == fenced {
                if let Some(&next) = isr.iter().find(|&&b| b != fenced && !is_fenced(b)) {
                    self.leaders[p] = next;
                    self.epochs[p] += 1;
                }
            }
        }
    }

    /// A partition with no live leader whose in-sync replica `back`
    /// returned is led by it again (the leader stayed with a fenced broker
    /// only when no other in-sync replica was live).
    pub fn unfence(&mut self, back: i32, is_fenced: impl Fn(i32) -> bool) {
        self.fill_out();
        for p in 0..self.leaders.len() {
            let leader = self.leaders[p];
            if leader != back && is_fenced(leader) && self.isr[p].contains(&back) {
                self.leaders[p] = back;
                self.epochs[p] += 1;
            }
        }
    }
}
