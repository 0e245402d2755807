//! The leader's side of the changes brokers ask for (`ClusterLink::ask`):
//! topics, ACLs and SCRAM credentials, each checked against the applied
//! log and written as one entry.

use super::{BrokerAnswer, ClusterTopic, Command, Controller, TopicAlteration, TopicResult, TopicSpec};
use crate::{
    protocol::errors,
    shard::{acl_admin::ChangeAcls, credentials_admin::CredentialChange},
};

impl Controller {
    /// On the leader: places each new topic's partitions on the live
    /// brokers and writes them to the log in one entry.
    pub(super) async fn create_topics(&self, specs: Vec<TopicSpec>) -> BrokerAnswer {
        let (live, existing): (Vec<i32>, Vec<String>) = {
            let view = self.published.borrow();
            let live = view.brokers.iter().filter(|(_, b)| !b.fenced).map(|(id, _)| *id).collect();
            (live, view.topics.keys().cloned().collect())
        };
        let mut results = Vec::with_capacity(specs.len());
        let mut new: Vec<ClusterTopic> = Vec::new();
        for spec in specs {
            let mut r = TopicResult { name: spec.name.clone(), error: errors::NONE, message: None, id: [0; 16] };
            if existing.contains(&spec.name) || new.iter().any(|t| t.name == spec.name) {
                r.error = errors::TOPIC_ALREADY_EXISTS;
                r.message = Some(format!("topic {} already exists", spec.name));
            } else if live.is_empty() || spec.replication_factor as usize > live.len() {
                r.error = errors::INVALID_REPLICATION_FACTOR;
                r.message = Some(format!(
                    "topic {}: replication factor {} but {} live broker(s)",
                    spec.name,
                    spec.replication_factor,
                    live.len()
                ));
            } else {
                let replicas = place(&spec.name, spec.partitions, &live, spec.replication_factor);
                let topic = ClusterTopic {
                    leaders: replicas.iter().map(|r| r[0]).collect(),
                    isr: replicas.clone(),
                    epochs: vec![0; replicas.len()],
                    moving: Default::default(),
                    replicas,
                    name: spec.name,
                    id: crate::shard::topics::new_topic_id(),
                    configs: spec.configs,
                };
                r.id = topic.id.0;
                new.push(topic);
            }
            results.push(r);
        }
        if new.is_empty() {
            return BrokerAnswer::Topics { index: 0, results };
        }
        let index = match self.write(Command::CreateTopics(new)).await {
            Ok(index) => index,
            Err(answer) => return answer,
        };
        // Two brokers' requests for one name can both pass the check above;
        // the log keeps the first, and the second is told so.
        let view = self.published.borrow();
        for r in results.iter_mut().filter(|r| r.error == errors::NONE) {
            if view.topics.get(&r.name).is_none_or(|t| t.id.0 != r.id) {
                r.error = errors::TOPIC_ALREADY_EXISTS;
                r.message = Some(format!("topic {} already exists", r.name));
            }
        }
        BrokerAnswer::Topics { index, results }
    }

    /// On the leader: removes topics from the log; every broker then drops
    /// the partitions it had of them.
    pub(super) async fn delete_topics(&self, names: Vec<String>) -> BrokerAnswer {
        let view = self.published.borrow().topics.clone();
        let mut results = Vec::with_capacity(names.len());
        let mut gone = Vec::new();
        for name in names {
            let mut r = TopicResult { name: name.clone(), error: errors::NONE, message: None, id: [0; 16] };
            match view.get(&name) {
                Some(t) => {
                    r.id = t.id.0;
                    gone.push(name);
                }
                None => {
                    r.error = errors::UNKNOWN_TOPIC_OR_PARTITION;
                    r.message = Some(format!("topic {name} does not exist"));
                }
            }
            results.push(r);
        }
        if gone.is_empty() {
            return BrokerAnswer::Topics { index: 0, results };
        }
        match self.write(Command::DeleteTopics(gone)).await {
            Ok(index) => BrokerAnswer::Topics { index, results },
            Err(answer) => answer,
        }
    }

    /// On the leader: grows topics (placing the new partitions on the live
    /// brokers) and replaces their configs, in one entry.
    pub(super) async fn alter_topics(&self, changes: Vec<TopicAlteration>) -> BrokerAnswer {
        let (live, topics) = {
            let view = self.published.borrow();
            let live: Vec<i32> = view.brokers.iter().filter(|(_, b)| !b.fenced).map(|(id, _)| *id).collect();
            (live, view.topics.clone())
        };
        let mut results = Vec::with_capacity(changes.len());
        let mut logged = Vec::new();
        for mut change in changes {
            let name = change.topic().to_string();
            let mut r = TopicResult { name: name.clone(), error: errors::NONE, message: None, id: [0; 16] };
            let Some(topic) = topics.get(&name) else {
                r.error = errors::UNKNOWN_TOPIC_OR_PARTITION;
                r.message = Some(format!("topic {name} does not exist"));
                results.push(r);
                continue;
            };
            r.id = topic.id.0;
            if let TopicAlteration::Partitions { count, leaders, replicas, .. } = &mut change {
                let have = topic.leaders.len() as i32;
                // New partitions get as many replicas as the first has.
                let factor = topic.replicas_of(0).len().max(1);
                if *count <= have || live.len() < factor {
                    r.error = errors::INVALID_PARTITIONS;
                    r.message = Some(format!(
                        "topic {name} has {have} partitions of {factor} replica(s) and {} live broker(s); cannot grow it to {count}",
                        live.len()
                    ));
                    results.push(r);
                    continue;
                }
                let placed = place(&name, *count, &live, factor as i16);
                *replicas = placed[have as usize..].to_vec();
                *leaders = replicas.iter().map(|r| r[0]).collect();
            }
            logged.push(change);
            results.push(r);
        }
        if logged.is_empty() {
            return BrokerAnswer::Topics { index: 0, results };
        }
        let grown: Vec<(String, usize)> = logged
            .iter()
            .filter_map(|c| match c {
                TopicAlteration::Partitions { name, count, .. } => Some((name.clone(), *count as usize)),
                TopicAlteration::Configs { .. } => None,
            })
            .collect();
        let index = match self.write(Command::AlterTopics(logged)).await {
            Ok(index) => index,
            Err(answer) => return answer,
        };
        // Two growths of one topic can both pass the check above; the log
        // applies the first, and the second is told the count it found.
        let view = self.published.borrow();
        for (name, count) in grown {
            let now = view.topics.get(&name).map_or(0, |t| t.leaders.len());
            if now != count {
                if let Some(r) = results.iter_mut().find(|r| r.name == name) {
                    r.error = errors::INVALID_PARTITIONS;
                    r.message = Some(format!("topic {name} was grown to {now} partitions at the same time"));
                }
            }
        }
        BrokerAnswer::Topics { index, results }
    }

    /// On the leader: an ACL change, logged whole; answered with what each
    /// delete filter removed from the set the log holds now.
    pub(super) async fn change_acls(&self, change: ChangeAcls) -> BrokerAnswer {
        let current = self.published.borrow().acls.clone().unwrap_or_default();
        let (_, deleted) = crate::shard::acl_admin::acls_changed(&current, &change);
        match self.write(Command::ChangeAcls(change)).await {
            Ok(index) => BrokerAnswer::Acls { index, deleted },
            Err(answer) => answer,
        }
    }

    /// On the leader: SCRAM credential changes checked against the log's
    /// credentials; the acceptable ones are logged.
    pub(super) async fn alter_credentials(&self, changes: Vec<CredentialChange>) -> BrokerAnswer {
        let current = self.published.borrow().credentials.clone().unwrap_or_default();
        let (_, outcomes, took) = crate::shard::credentials_admin::changed(&current, &changes);
        if took.is_empty() {
            return BrokerAnswer::Users { index: 0, outcomes };
        }
        match self.write(Command::AlterCredentials(took)).await {
            Ok(index) => BrokerAnswer::Users { index, outcomes },
            Err(answer) => answer,
        }
    }
}

/// Replicas for a new topic's partitions, the leader first: leaders
/// round-robin over the live brokers, starting at one picked from the name
/// so small topics spread out, each followed by the brokers after it.
/// `factor` is at most `live.len()` (checked by the callers).
fn place(topic: &str, partitions: i32, live: &[i32], factor: i16) -> Vec<Vec<i32>> {
    let start = topic.bytes().fold(0usize, |h, b| h.wrapping_mul(31).wrapping_add(b as usize));
    let factor = (factor.max(1) as usize).min(live.len());
    (0..partitions.max(0) as usize).map(|p| (0..factor).map(|k| live[(start + p + k) % live.len()]).collect()).collect()
}
