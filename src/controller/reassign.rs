//! Partition reassignment (AlterPartitionReassignments), as Kafka's KIP-455
//! does it: a partition being moved is replicated to the union of its
//! original and its target replicas; the brokers it is adding copy it as
//! followers, and once every target replica is in sync the partition
//! becomes its target: the replicas it drops leave (and delete their
//! copy), and a leader it drops hands the lead to a target replica under
//! the next epoch. Cancelling puts the original replicas back the same
//! way. Every member applies these alike (`store`); a move finishes in
//! the entry that brings its last target replica in sync.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::{BrokerAnswer, ClusterTopic, Command, Controller, PartitionOutcome};
use crate::protocol::errors;

/// An operator's target for one partition: its new replicas, the
/// preferred leader first, or None to cancel its move.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct Reassignment {
    pub topic: String,
    pub partition: i32,
    pub replicas: Option<Vec<i32>>,
}

/// A partition's move under way: the replicas it had before (in their
/// order, which a cancel restores), those it is adding (copying, not yet
/// all in sync) and those it will drop.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
pub struct Moving {
    pub original: Vec<i32>,
    pub adding: Vec<i32>,
    pub removing: Vec<i32>,
}

impl ClusterTopic {
    /// Partition `p`'s replicas before its move began (its replicas when
    /// none is under way).
    fn original(&self, p: usize) -> Vec<i32> {
        self.moving.get(&(p as i32)).map_or_else(|| self.replicas_of(p), |m| m.original.clone())
    }

    /// Partition `p`'s target while it moves: its replicas less those it
    /// drops.
    fn target(&self, p: usize) -> Vec<i32> {
        let removing = self.moving.get(&(p as i32)).map(|m| m.removing.as_slice()).unwrap_or_default();
        self.replicas_of(p).into_iter().filter(|b| !removing.contains(b)).collect()
    }

    /// Starts moving partition `p` to `target` (its original replicas
    /// when None: a cancel), replacing any move under way as Kafka does:
    /// the replicas before the first move stay the ones to return to.
    pub fn reassign(&mut self, p: usize, target: Option<Vec<i32>>, is_fenced: impl Fn(i32) -> bool) {
        self.fill_out();
        if p >= self.leaders.len() {
            return;
        }
        let original = self.original(p);
        let target = target.unwrap_or_else(|| original.clone());
        let adding: Vec<i32> = target.iter().copied().filter(|b| !original.contains(b)).collect();
        let removing: Vec<i32> = original.iter().copied().filter(|b| !target.contains(b)).collect();
        let replicas: Vec<i32> = target.iter().chain(&removing).copied().collect();
        self.isr[p].retain(|b| replicas.contains(b));
        if self.isr[p].is_empty() {
            // Only a replaced move's adding replicas were in sync; the
            // leader is kept in the set, as an ISR is never emptied.
            self.isr[p].push(self.leaders[p]);
        }
        self.replicas[p] = replicas;
        if adding.is_empty() && removing.is_empty() {
            self.moving.remove(&(p as i32));
        } else {
            self.moving.insert(p as i32, Moving { original, adding, removing });
        }
        self.finish_move(p, is_fenced);
    }

    /// Finishes partition `p`'s move if every target replica is in sync:
    /// the partition becomes its target, and a leader it drops gives the
    /// lead to the first live target replica under the next epoch.
    pub fn finish_move(&mut self, p: usize, is_fenced: impl Fn(i32) -> bool) {
        if !self.moving.contains_key(&(p as i32)) {
            return;
        }
        self.fill_out();
        let target = self.target(p);
        if target.is_empty() || !target.iter().all(|b| self.isr[p].contains(b)) {
            return;
        }
        if !target.contains(&self.leaders[p]) {
            let Some(&next) = target.iter().find(|&&b| !is_fenced(b)) else { return };
            self.leaders[p] = next;
            self.epochs[p] += 1;
        }
        self.isr[p].retain(|b| target.contains(b));
        self.replicas[p] = target;
        self.moving.remove(&(p as i32));
    }

    /// Every move of this topic that its in-sync sets now allow to finish.
    pub fn finish_moves(&mut self, is_fenced: impl Fn(i32) -> bool) {
        let moving: Vec<i32> = self.moving.keys().copied().collect();
        for p in moving {
            self.finish_move(p as usize, &is_fenced);
        }
    }

    /// Why `target` (None: a cancel) cannot be partition `p`'s, if it cannot.
    fn refuse_move(
        &self,
        p: usize,
        target: Option<&[i32]>,
        registered: impl Fn(i32) -> bool,
        allow_factor_change: bool,
    ) -> Option<(i16, String)> {
        let name = format!("{}-{p}", self.name);
        let Some(target) = target else {
            return (!self.moving.contains_key(&(p as i32)))
                .then(|| (errors::NO_REASSIGNMENT_IN_PROGRESS, format!("{name} is not being reassigned")));
        };
        let mut seen = target.to_vec();
        seen.sort_unstable();
        seen.dedup();
        if target.is_empty() || seen.len() != target.len() {
            return Some((
                errors::INVALID_REPLICA_ASSIGNMENT,
                format!("{name}: replicas {target:?} are empty or name a broker twice"),
            ));
        }
        if let Some(b) = target.iter().find(|&&b| !registered(b)) {
            return Some((
                errors::INVALID_REPLICA_ASSIGNMENT,
                format!("{name}: broker {b} of replicas {target:?} is not registered"),
            ));
        }
        let original = self.original(p);
        if !allow_factor_change && target.len() != original.len() {
            return Some((
                errors::INVALID_REPLICATION_FACTOR,
                format!(
                    "{name}: {} replicas to {} but the replication factor may not change",
                    original.len(),
                    target.len()
                ),
            ));
        }
        None
    }

    /// Partition `p`'s move under way, as ListPartitionReassignments gives
    /// it: all its replicas now, those being added, those being dropped.
    pub fn move_of(&self, p: i32) -> Option<(Vec<i32>, &Moving)> {
        self.moving.get(&p).map(|m| (self.replicas_of(p as usize), m))
    }
}

/// The moves under way, by topic and partition.
pub fn moves_under_way(
    topics: &BTreeMap<String, ClusterTopic>,
) -> impl Iterator<Item = (&str, i32, Vec<i32>, &Moving)> {
    topics.values().flat_map(|t| t.moving.iter().map(move |(&p, m)| (t.name.as_str(), p, t.replicas_of(p as usize), m)))
}

impl Controller {
    /// On the leader: checks each partition's target against the applied
    /// log and writes the acceptable ones in one entry. Answered when
    /// written: the moves finish as their new replicas catch up.
    pub(super) async fn reassign_partitions(
        &self,
        asked: Vec<Reassignment>,
        allow_factor_change: bool,
    ) -> BrokerAnswer {
        let (topics, registered) = {
            let view = self.published.borrow();
            (view.topics.clone(), view.brokers.keys().copied().collect::<Vec<i32>>())
        };
        let (mut results, mut moves) = (Vec::new(), Vec::new());
        for r in asked {
            let mut outcome =
                PartitionOutcome { topic: r.topic.clone(), partition: r.partition, error: errors::NONE, message: None };
            let topic = topics.get(&r.topic).filter(|t| r.partition >= 0 && (r.partition as usize) < t.leaders.len());
            let refused = match topic {
                None => {
                    Some((errors::UNKNOWN_TOPIC_OR_PARTITION, format!("{}-{} does not exist", r.topic, r.partition)))
                }
                Some(t) => t.refuse_move(
                    r.partition as usize,
                    r.replicas.as_deref(),
                    |b| registered.contains(&b),
                    allow_factor_change,
                ),
            };
            match refused {
                Some((code, message)) => (outcome.error, outcome.message) = (code, Some(message)),
                None => moves.push(r),
            }
            results.push(outcome);
        }
        if moves.is_empty() {
            return BrokerAnswer::Reassigned { index: 0, results };
        }
        match self.write(Command::Reassign(moves)).await {
            Ok(index) => BrokerAnswer::Reassigned { index, results },
            Err(answer) => answer,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn topic(leader: i32, replicas: Vec<i32>, isr: Vec<i32>) -> ClusterTopic {
        ClusterTopic {
            name: "t".into(),
            id: crate::shard::topics::new_topic_id(),
            leaders: vec![leader],
            configs: Default::default(),
            replicas: vec![replicas],
            isr: vec![isr],
            epochs: vec![3],
            moving: Default::default(),
        }
    }

    const NONE_FENCED: fn(i32) -> bool = |_| false;

    #[test]
    fn a_move_copies_to_the_union_and_finishes_when_its_target_is_in_sync() {
        let mut t = topic(1, vec![1, 2, 3], vec![1, 2, 3]);
        t.reassign(0, Some(vec![4, 2, 3]), NONE_FENCED);
        assert_eq!(t.replicas[0], vec![4, 2, 3, 1], "the target first, then the replicas it drops");
        assert_eq!(t.moving[&0], Moving { original: vec![1, 2, 3], adding: vec![4], removing: vec![1] });
        assert_eq!((t.leaders[0], t.epochs[0]), (1, 3), "the leader stays until the move finishes");
        t.finish_moves(NONE_FENCED);
        assert!(t.moving.contains_key(&0), "broker 4 is not in sync yet");
        t.change_isr(&crate::controller::IsrChange { topic: "t".into(), partition: 0, broker: 4, epoch: 3 }, true);
        t.finish_moves(NONE_FENCED);
        assert_eq!(t.replicas[0], vec![4, 2, 3]);
        assert_eq!(t.isr[0], vec![2, 3, 4]);
        assert_eq!((t.leaders[0], t.epochs[0]), (4, 4), "a dropped leader hands the lead on under the next epoch");
        assert!(t.moving.is_empty());
        assert!(t.move_of(0).is_none());
    }

    #[test]
    fn the_next_leader_is_a_live_target_replica() {
        let mut t = topic(1, vec![1, 2, 3], vec![1, 2, 3]);
        t.reassign(0, Some(vec![2, 3]), |b| b == 2);
        assert_eq!((t.replicas[0].clone(), t.leaders[0], t.epochs[0]), (vec![2, 3], 3, 4));
    }

    #[test]
    fn a_cancel_returns_to_the_replicas_before_the_first_move() {
        let mut t = topic(1, vec![1, 2, 3], vec![1, 2, 3]);
        t.reassign(0, Some(vec![4, 5, 3]), NONE_FENCED);
        t.change_isr(&crate::controller::IsrChange { topic: "t".into(), partition: 0, broker: 4, epoch: 3 }, true);
        // A second move over the first: 4 is dropped again, and 1, 2, 3 in
        // that order stay the replicas to return to.
        t.reassign(0, Some(vec![6, 2, 3]), NONE_FENCED);
        assert_eq!(t.replicas[0], vec![6, 2, 3, 1]);
        assert_eq!(t.moving[&0], Moving { original: vec![1, 2, 3], adding: vec![6], removing: vec![1] });
        assert_eq!(t.isr[0], vec![1, 2, 3], "the dropped adding replica leaves the in-sync set");
        assert_eq!(t.refuse_move(0, None, |_| true, true), None);
        t.reassign(0, None, NONE_FENCED);
        assert_eq!((t.replicas[0].clone(), t.leaders[0], t.epochs[0]), (vec![1, 2, 3], 1, 3));
        assert!(t.moving.is_empty());
        assert_eq!(t.refuse_move(0, None, |_| true, true).unwrap().0, errors::NO_REASSIGNMENT_IN_PROGRESS);
    }

    #[test]
    fn targets_are_checked() {
        let t = topic(1, vec![1, 2, 3], vec![1, 2, 3]);
        let registered = |b| (1..=4).contains(&b);
        assert_eq!(t.refuse_move(0, Some(&[]), registered, true).unwrap().0, errors::INVALID_REPLICA_ASSIGNMENT);
        assert_eq!(t.refuse_move(0, Some(&[1, 1]), registered, true).unwrap().0, errors::INVALID_REPLICA_ASSIGNMENT);
        assert_eq!(t.refuse_move(0, Some(&[1, 9]), registered, true).unwrap().0, errors::INVALID_REPLICA_ASSIGNMENT);
        assert_eq!(t.refuse_move(0, Some(&[4, 2]), registered, false).unwrap().0, errors::INVALID_REPLICATION_FACTOR);
        assert_eq!(t.refuse_move(0, Some(&[4, 2]), registered, true), None);
        assert_eq!(t.refuse_move(0, Some(&[4, 2, 3]), registered, false), None);
    }
}
