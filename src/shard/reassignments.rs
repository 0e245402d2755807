//! AlterPartitionReassignments on the controller shard: in a quorum the
//! quorum's leader checks and logs the moves (`controller::reassign`) and
//! this broker answers once its own table holds them; alone, or for a
//! topic this broker keeps to itself, a partition has its one replica
//! here and nowhere to go.

use std::rc::Rc;

use crate::{
    controller::{BrokerAnswer, BrokerRequest, PartitionOutcome, Reassignment},
    protocol::errors,
    shard::{router, Shard},
};

/// To the controller: move each partition to its replicas (None: cancel).
#[derive(Debug)]
pub struct Reassign {
    pub partitions: Vec<Reassignment>,
    /// False (v1's flag) refuses a target of another replication factor.
    pub allow_factor_change: bool,
}

impl Shard {
    /// Each partition's outcome, or why the quorum gave none.
    pub(super) async fn reassign_partitions(self: &Rc<Self>, call: Reassign) -> Result<Vec<PartitionOutcome>, String> {
        debug_assert_eq!(self.id, router::CONTROLLER);
        let table = self.topics();
        let me = self.settings.node_id;
        let (mut answered, mut asked) = (Vec::new(), Vec::new());
        for r in call.partitions {
            let meta = table.topics.get(r.topic.as_str());
            let local = meta.is_some_and(|m| m.internal && m.replicas.is_empty()) || self.settings.cluster.is_none();
            if !local {
                asked.push(r);
                continue;
            }
            let name = format!("{}-{}", r.topic, r.partition);
            let exists = meta.is_some_and(|m| r.partition >= 0 && r.partition < m.partitions());
            let (error, message) = match &r.replicas {
                _ if !exists => (errors::UNKNOWN_TOPIC_OR_PARTITION, format!("{name} does not exist")),
                None => (errors::NO_REASSIGNMENT_IN_PROGRESS, format!("{name} is not being reassigned")),
                Some(target) if *target == [me] => (errors::NONE, String::new()),
                Some(target) => (
                    errors::INVALID_REPLICA_ASSIGNMENT,
                    format!("{name} is kept by broker {me} alone and cannot move to {target:?}"),
                ),
            };
            let message = (error != errors::NONE).then_some(message);
            answered.push(PartitionOutcome { topic: r.topic, partition: r.partition, error, message });
        }
        let Some(link) = &self.settings.cluster else { return Ok(answered) };
        if asked.is_empty() {
            return Ok(answered);
        }
        let request = BrokerRequest::Reassign { partitions: asked, allow_factor_change: call.allow_factor_change };
        match self.ask_quorum(link, request).await? {
            BrokerAnswer::Reassigned { results, .. } => {
                answered.extend(results);
                Ok(answered)
            }
            other => Err(format!("the controller quorum answered AlterPartitionReassignments with {other:?}")),
        }
    }
}
