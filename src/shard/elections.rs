//! ElectLeaders on the controller shard: in a quorum the quorum's leader
//! decides (`controller::elect`) and this broker answers once its own
//! table holds the new leaders; alone, every partition has one replica,
//! which leads it already.

use std::rc::Rc;

use crate::{
    controller::{BrokerAnswer, BrokerRequest, PartitionOutcome},
    protocol::errors,
    shard::{router, Shard},
};

/// To the controller: elect leaders for the partitions named (None: all).
#[derive(Debug)]
pub struct ElectLeaders {
    pub unclean: bool,
    pub partitions: Option<Vec<(String, Vec<i32>)>>,
}

impl Shard {
    /// The election's result per partition, or why the quorum gave none.
    pub(super) async fn elect_leaders(self: &Rc<Self>, call: ElectLeaders) -> Result<Vec<PartitionOutcome>, String> {
        debug_assert_eq!(self.id, router::CONTROLLER);
        let table = self.topics();
        let mut answered = Vec::new();
        let mut asked = Vec::new();
        for (topic, partitions) in call.partitions.iter().flatten() {
            let meta = table.topics.get(topic.as_str());
            // An internal topic this broker kept to itself (from before it
            // joined a quorum) has one replica, here.
            let local = meta.is_some_and(|m| m.internal && m.replicas.is_empty()) || self.settings.cluster.is_none();
            if !local {
                asked.push((topic.clone(), partitions.clone()));
                continue;
            }
            for &partition in partitions {
                let exists = meta.is_some_and(|m| partition >= 0 && partition < m.partitions());
                let (error, message) = if exists {
                    (errors::ELECTION_NOT_NEEDED, format!("{topic}-{partition} has one replica, which leads it"))
                } else {
                    (errors::UNKNOWN_TOPIC_OR_PARTITION, format!("{topic}-{partition} does not exist"))
                };
                answered.push(PartitionOutcome { topic: topic.clone(), partition, error, message: Some(message) });
            }
        }
        let Some(link) = &self.settings.cluster else { return Ok(answered) };
        if call.partitions.is_some() && asked.is_empty() {
            return Ok(answered);
        }
        let request = BrokerRequest::ElectLeaders { unclean: call.unclean, partitions: call.partitions.map(|_| asked) };
        match self.ask_quorum(link, request).await? {
            BrokerAnswer::Elected { results, .. } => {
                answered.extend(results);
                Ok(answered)
            }
            other => Err(format!("the controller quorum answered ElectLeaders with {other:?}")),
        }
    }
}
