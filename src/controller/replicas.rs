//! A topic's replicas in the quorum's log: who holds each partition, who
//! is in sync, and the leader epoch, and how fencing a broker and its
//! return change them (applied by every member alike, `store`); and the
//! leader's check of a broker a follower could not reach.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::{ClusterTopic, Controller};

/// A partition's leader, at `epoch`, about follower `broker`: caught up
/// (`JoinIsr`) or lagging (`LeaveIsr`). Counts only while the epoch is the
/// partition's: a deposed leader's word counts for nothing.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct IsrChange {
    pub topic: String,
    pub partition: i32,
    pub broker: i32,
    pub epoch: i32,
}

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

    /// `c.broker` joins (`join`) or leaves partition `c.partition`'s
    /// in-sync replicas, if `c.epoch` is still its epoch. Only a replica
    /// joins; the leader and the last member never leave.
    pub fn change_isr(&mut self, c: &IsrChange, join: bool) {
        self.fill_out();
        let p = c.partition as usize;
        if p >= self.leaders.len() || self.epochs[p] != c.epoch {
            return;
        }
        let isr = &mut self.isr[p];
        if join && self.replicas[p].contains(&c.broker) && !isr.contains(&c.broker) {
            isr.push(c.broker);
        } else if !join && self.leaders[p] != c.broker && isr.len() > 1 {
            isr.retain(|&b| b != c.broker);
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_in_sync_set_changes_only_under_the_epoch_it_was_asked_at() {
        let mut t = ClusterTopic {
            name: "t".into(),
            id: crate::shard::topics::new_topic_id(),
            leaders: vec![1],
            configs: Default::default(),
            replicas: vec![vec![1, 2, 3]],
            isr: vec![vec![1, 2]],
            epochs: vec![5],
            moving: Default::default(),
        };
        let change = |broker, epoch| IsrChange { topic: "t".into(), partition: 0, broker, epoch };
        t.change_isr(&change(3, 4), true);
        assert_eq!(t.isr[0], vec![1, 2], "a deposed leader's word counts for nothing");
        t.change_isr(&change(4, 5), true);
        assert_eq!(t.isr[0], vec![1, 2], "only a replica joins");
        t.change_isr(&change(3, 5), true);
        assert_eq!(t.isr[0], vec![1, 2, 3]);
        t.change_isr(&change(1, 5), false);
        assert_eq!(t.isr[0], vec![1, 2, 3], "the leader never leaves");
        t.change_isr(&change(2, 5), false);
        t.change_isr(&change(3, 5), false);
        assert_eq!(t.isr[0], vec![1]);
        t.isr[0] = vec![2];
        t.change_isr(&change(2, 5), false);
        assert_eq!(t.isr[0], vec![2], "the last member never leaves");
    }
}
