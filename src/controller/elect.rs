//! Leader elections asked for by an operator (ElectLeaders): the preferred
//! replica (each partition's first) takes the lead back once it is in
//! sync, or, unclean, a partition whose in-sync replicas are all down is
//! given to a live replica that may lack acknowledged records, as Kafka's
//! unclean election does. The leader checks each partition against the
//! applied log and writes the moves as one entry, which every member
//! applies only if the partition's epoch is still the one checked.
//!
//! Kafka's `auto.leader.rebalance.enable` too (`rebalance_leaders`): every
//! `leader_imbalance_check_interval_seconds` the quorum's leader gives
//! their preferred replicas back the partitions of each broker whose share
//! led elsewhere passes `leader_imbalance_per_broker_percentage`, as a
//! preferred election would (a broker back from a restart leads again
//! without an operator).

use std::{collections::BTreeMap, sync::Arc, time::Duration};

use serde::{Deserialize, Serialize};

use super::{BrokerAnswer, ClusterTopic, Command, Controller};
use crate::protocol::errors;

/// One partition's new leader, as checked at `epoch`.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct Election {
    pub topic: String,
    pub partition: i32,
    pub leader: i32,
    pub epoch: i32,
    /// The in-sync set becomes the new leader alone.
    pub unclean: bool,
}

/// What an operator's change (an election, a reassignment) did for one
/// partition.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct PartitionOutcome {
    pub topic: String,
    pub partition: i32,
    pub error: i16,
    pub message: Option<String>,
}

impl ClusterTopic {
    /// Moves partition `e.partition` to `e.leader` under the next epoch if
    /// its epoch is still `e.epoch`.
    pub fn elect(&mut self, e: &Election) {
        self.fill_out();
        let p = e.partition as usize;
        if p >= self.leaders.len() || self.epochs[p] != e.epoch || !self.replicas[p].contains(&e.leader) {
            return;
        }
        self.leaders[p] = e.leader;
        self.epochs[p] += 1;
        if e.unclean {
            self.isr[p] = vec![e.leader];
        }
    }

    /// Who partition `p` should be given to, or why nobody.
    fn candidate(&self, p: usize, unclean: bool, live: impl Fn(i32) -> bool) -> Result<i32, (i16, String)> {
        let (leader, replicas, isr) = (self.leaders[p], self.replicas_of(p), self.isr_of(p));
        let name = format!("{}-{p}", self.name);
        if unclean {
            if live(leader) {
                return Err((errors::ELECTION_NOT_NEEDED, format!("{name}: broker {leader} leads it")));
            }
            let any = isr.iter().chain(&replicas).find(|&&b| live(b));
            return any.copied().ok_or((
                errors::ELIGIBLE_LEADERS_NOT_AVAILABLE,
                format!("{name}: none of its replicas {replicas:?} is live"),
            ));
        }
        let preferred = replicas[0];
        if leader == preferred {
            Err((errors::ELECTION_NOT_NEEDED, format!("{name}: its preferred replica {preferred} leads it")))
        } else if !live(preferred) || !isr.contains(&preferred) {
            Err((
                errors::PREFERRED_LEADER_NOT_AVAILABLE,
                format!("{name}: its preferred replica {preferred} is not live and in sync (in sync: {isr:?})"),
            ))
        } else {
            Ok(preferred)
        }
    }
}

impl Controller {
    /// On the leader: checks the partitions named (`None`: all, answering
    /// only for those that needed an election, as Kafka does) and writes
    /// the moves in one entry.
    pub(super) async fn elect_leaders(&self, unclean: bool, wanted: Option<Vec<(String, Vec<i32>)>>) -> BrokerAnswer {
        let (topics, fenced) = {
            let view = self.published.borrow();
            let fenced: Vec<i32> = view.brokers.iter().filter(|(_, b)| b.fenced).map(|(id, _)| *id).collect();
            (view.topics.clone(), fenced)
        };
        let live = |b: i32| b >= 0 && !fenced.contains(&b);
        let all = wanted.is_none();
        let wanted = wanted.unwrap_or_else(|| {
            topics.values().map(|t| (t.name.clone(), (0..t.leaders.len() as i32).collect())).collect()
        });
        let (mut results, mut moves) = (Vec::new(), Vec::new());
        for (name, partitions) in wanted {
            for partition in partitions {
                let mut r = PartitionOutcome { topic: name.clone(), partition, error: errors::NONE, message: None };
                let topic = topics.get(&name).filter(|t| partition >= 0 && (partition as usize) < t.leaders.len());
                let Some(t) = topic else {
                    r.error = errors::UNKNOWN_TOPIC_OR_PARTITION;
                    r.message = Some(format!("{name}-{partition} does not exist"));
                    results.push(r);
                    continue;
                };
                match t.candidate(partition as usize, unclean, live) {
                    Ok(leader) => {
                        let epoch = t.epochs.get(partition as usize).copied().unwrap_or(0);
                        moves.push(Election { topic: name.clone(), partition, leader, epoch, unclean });
                    }
                    Err(_) if all => continue,
                    Err((code, message)) => (r.error, r.message) = (code, Some(message)),
                }
                results.push(r);
            }
        }
        if moves.is_empty() {
            return BrokerAnswer::Elected { index: 0, results };
        }
        match self.write(Command::ElectLeaders(moves)).await {
            Ok(index) => BrokerAnswer::Elected { index, results },
            Err(answer) => answer,
        }
    }
}

/// When and how far leaders are rebalanced (`rebalance_leaders`).
#[derive(Debug, Clone, Copy)]
pub struct Rebalance {
    pub every: Duration,
    /// Kafka's `leader.imbalance.per.broker.percentage`.
    pub percentage: u32,
}

/// The partitions to give back to their preferred replicas: for each
/// broker whose share of the partitions it is preferred for, led by
/// another broker, is above `percentage`, those partitions (by topic).
pub fn imbalanced(topics: &BTreeMap<String, ClusterTopic>, percentage: u32) -> Vec<(String, Vec<i32>)> {
    // Preferred broker → (partitions it is preferred for, those led elsewhere).
    let mut by_broker: BTreeMap<i32, (usize, Vec<(String, i32)>)> = BTreeMap::new();
    for t in topics.values() {
        for p in 0..t.leaders.len() {
            let Some(&preferred) = t.replicas_of(p).first() else { continue };
            let entry = by_broker.entry(preferred).or_default();
            entry.0 += 1;
            if t.leaders[p] != preferred {
                entry.1.push((t.name.clone(), p as i32));
            }
        }
    }
    let mut wanted: BTreeMap<String, Vec<i32>> = BTreeMap::new();
    for (preferred_for, elsewhere) in by_broker.into_values() {
        if elsewhere.len() * 100 > preferred_for * percentage as usize {
            for (topic, p) in elsewhere {
                wanted.entry(topic).or_default().push(p);
            }
        }
    }
    wanted.into_iter().collect()
}

impl Controller {
    /// On the quorum's leader, every `rebalance.every`: preferred elections
    /// for the partitions `imbalanced` names (those whose preferred replica
    /// is not live and in sync stay where they are).
    pub(super) async fn rebalance_leaders(self: Arc<Self>, rebalance: Rebalance) {
        loop {
            tokio::time::sleep(rebalance.every).await;
            if self.leader() != Some(self.node_id) {
                continue;
            }
            let wanted = imbalanced(&self.published.borrow().topics, rebalance.percentage);
            if wanted.is_empty() {
                continue;
            }
            match self.elect_leaders(false, Some(wanted)).await {
                BrokerAnswer::Elected { results, .. } => {
                    let moved: Vec<String> = results
                        .iter()
                        .filter(|r| r.error == errors::NONE)
                        .map(|r| format!("{}-{}", r.topic, r.partition))
                        .collect();
                    if !moved.is_empty() {
                        log::info!("controller: leaders rebalanced to their preferred replicas: {}", moved.join(", "));
                    }
                }
                other => log::warn!("controller: rebalancing leaders: {other:?}"),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn topic(leader: i32, isr: Vec<i32>, epoch: i32) -> ClusterTopic {
        ClusterTopic {
            name: "t".into(),
            id: crate::shard::topics::new_topic_id(),
            leaders: vec![leader],
            configs: Default::default(),
            replicas: vec![vec![1, 2, 3]],
            isr: vec![isr],
            epochs: vec![epoch],
            moving: Default::default(),
        }
    }

    #[test]
    fn the_preferred_replica_leads_again_only_when_in_sync_and_live() {
        let all_live = |_| true;
        let out_of_sync = topic(2, vec![2, 3], 4);
        assert_eq!(out_of_sync.candidate(0, false, all_live).unwrap_err().0, errors::PREFERRED_LEADER_NOT_AVAILABLE);
        let mut t = topic(2, vec![2, 3, 1], 4);
        assert_eq!(t.candidate(0, false, |b| b != 1).unwrap_err().0, errors::PREFERRED_LEADER_NOT_AVAILABLE);
        assert_eq!(t.candidate(0, false, all_live), Ok(1));
        // Checked at an epoch that has since moved on: nothing changes.
        let stale = Election { topic: "t".into(), partition: 0, leader: 1, epoch: 3, unclean: false };
        t.elect(&stale);
        assert_eq!((t.leaders[0], t.epochs[0]), (2, 4));
        t.elect(&Election { epoch: 4, ..stale });
        assert_eq!((t.leaders[0], t.epochs[0], t.isr[0].clone()), (1, 5, vec![2, 3, 1]));
        assert_eq!(t.candidate(0, false, all_live).unwrap_err().0, errors::ELECTION_NOT_NEEDED);
    }

    #[test]
    fn a_broker_past_the_imbalance_share_gets_its_partitions_back() {
        let mut topics = BTreeMap::new();
        let mut t = topic(2, vec![1, 2, 3], 4);
        t.name = "a".into();
        topics.insert("a".to_string(), t);
        // Broker 1 is preferred for "a"-0 and leads nothing: 100% > 10%.
        assert_eq!(imbalanced(&topics, 10), vec![("a".to_string(), vec![0])]);
        // Nine more partitions broker 1 leads: 1 of 10 elsewhere is not above 10%.
        let mut b = topic(1, vec![1, 2, 3], 1);
        b.name = "b".into();
        b.leaders = vec![1; 9];
        b.replicas = vec![vec![1, 2, 3]; 9];
        b.isr = vec![vec![1, 2, 3]; 9];
        b.epochs = vec![1; 9];
        topics.insert("b".to_string(), b);
        assert_eq!(imbalanced(&topics, 10), Vec::new());
        assert_eq!(imbalanced(&topics, 9), vec![("a".to_string(), vec![0])]);
    }

    #[test]
    fn an_unclean_election_takes_a_live_replica_only_when_the_leader_is_down() {
        let mut t = topic(2, vec![2], 7);
        assert_eq!(t.candidate(0, true, |_| true).unwrap_err().0, errors::ELECTION_NOT_NEEDED);
        assert_eq!(t.candidate(0, true, |b| b == 3), Ok(3));
        assert_eq!(t.candidate(0, true, |_| false).unwrap_err().0, errors::ELIGIBLE_LEADERS_NOT_AVAILABLE);
        t.elect(&Election { topic: "t".into(), partition: 0, leader: 3, epoch: 7, unclean: true });
        assert_eq!((t.leaders[0], t.epochs[0], t.isr[0].clone()), (3, 8, vec![3]));
    }
}
