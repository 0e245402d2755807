//! What a broker asks its quorum's leader (`ClusterLink::ask`, and the
//! controller port for members that do not lead), and the answers.

use serde::{Deserialize, Serialize};

use super::{BrokerInfo, IsrChange, PartitionOutcome, Reassignment, TopicAlteration, TopicResult, TopicSpec};
use crate::{
    security::acl::Acl,
    shard::{
        acl_admin::ChangeAcls,
        credentials_admin::{CredentialChange, UserOutcome},
    },
};

/// A broker's request to the controller leader.
#[derive(Serialize, Deserialize, Debug, Clone)]
pub(crate) enum BrokerRequest {
    Heartbeat(BrokerInfo),
    /// A clean shutdown (Kafka's controlled shutdown): fence this broker
    /// now rather than after its session times out.
    Leaving(i32),
    CreateTopics(Vec<TopicSpec>),
    DeleteTopics(Vec<String>),
    AlterTopics(Vec<TopicAlteration>),
    ChangeAcls(ChangeAcls),
    AlterCredentials(Vec<CredentialChange>),
    /// Partitions' leader (at each `epoch`) saw each `broker` catch up.
    JoinIsr(Vec<IsrChange>),
    /// A partition's leader (at `epoch`) saw `broker` lag (`shard::followers`).
    LeaveIsr(IsrChange),
    /// A follower's connection to this broker was refused: the leader
    /// checks, and fences it at once if it refuses the leader too (its
    /// process is gone), instead of after its session.
    Unreachable(i32),
    /// ElectLeaders for the partitions named (None: all).
    ElectLeaders {
        unclean: bool,
        partitions: Option<Vec<(String, Vec<i32>)>>,
    },
    /// AlterPartitionReassignments: each partition's new replicas (None:
    /// cancel its move); `allow_factor_change` false refuses a target of
    /// another size (v1's flag).
    Reassign {
        partitions: Vec<Reassignment>,
        allow_factor_change: bool,
    },
}

#[derive(Serialize, Deserialize, Debug)]
pub(crate) enum BrokerAnswer {
    Ok,
    /// This member does not lead (or knows no leader): try again once the
    /// heartbeat loop sees the leader in openraft's metrics.
    NotLeader,
    Failed(String),
    /// A topic change: one result per topic, and the log index that holds
    /// it (0 when nothing was written).
    Topics {
        index: u64,
        results: Vec<TopicResult>,
    },
    /// An ACL change: per delete filter, the ACLs it removed.
    Acls {
        index: u64,
        deleted: Vec<Vec<Acl>>,
    },
    /// SCRAM credential changes: each user's outcome.
    Users {
        index: u64,
        outcomes: Vec<UserOutcome>,
    },
    Elected {
        index: u64,
        results: Vec<PartitionOutcome>,
    },
    Reassigned {
        index: u64,
        results: Vec<PartitionOutcome>,
    },
}

impl BrokerAnswer {
    /// The log index a change was written at (0: nothing was written).
    pub fn index(&self) -> u64 {
        match self {
            Self::Topics { index, .. }
            | Self::Acls { index, .. }
            | Self::Users { index, .. }
            | Self::Elected { index, .. }
            | Self::Reassigned { index, .. } => *index,
            _ => 0,
        }
    }
}
