//! ACLs and SCRAM credentials in a metadata quorum (`controller`): once any
//! was changed through the quorum, the log's set is the cluster's, and
//! every broker's controller shard keeps its own copy (file and shards) in
//! step with it. Until then each broker keeps what it had alone. Changes
//! made on any broker go to the quorum's leader, as topic changes do
//! (`cluster_topics`); checks still read each shard's own copy, no lock.

use std::rc::Rc;

use crate::{
    controller::{BrokerAnswer, BrokerRequest, ClusterLink},
    protocol::errors,
    security::{acl::AclSet, credentials::Credentials},
    shard::{
        acl_admin::{AclsChanged, ChangeAcls},
        credentials_admin::{CredentialChange, UserOutcome},
        Shard,
    },
};

impl Shard {
    /// Controller shard: takes the log's ACLs and credentials at `applied`
    /// when they differ from this broker's (never from a view older than
    /// the topic table's, as after a restart the log replays).
    pub(super) async fn apply_cluster_security(
        self: &Rc<Self>,
        applied: u64,
        acls: Option<AclSet>,
        credentials: Option<Credentials>,
    ) {
        if applied < self.topics().cluster_index {
            return;
        }
        if let Some(acls) = acls {
            let _permit = self.acl_permit.acquire_permit(1).await.expect("ACL permit: never closed");
            if acls != *self.acls() {
                if let Err(e) = self.publish_acls(acls).await {
                    log::error!("shard {}: cannot apply the quorum's ACLs (log index {applied}): {e}", self.id);
                }
            }
        }
        if let Some(credentials) = credentials {
            let _permit = self.controller_permit.acquire_permit(1).await.expect("controller permit: never closed");
            if credentials != *self.credentials() {
                if let Err(e) = self.publish_credentials(credentials).await {
                    log::error!("shard {}: cannot apply the quorum's credentials (log index {applied}): {e}", self.id);
                }
            }
        }
    }

    /// Controller shard, in a quorum: CreateAcls/DeleteAcls through the
    /// leader; answered once this broker's shards have the new set.
    pub(super) async fn change_cluster_acls(self: &Rc<Self>, link: &ClusterLink, change: ChangeAcls) -> AclsChanged {
        match self.ask_quorum(link, BrokerRequest::ChangeAcls(change)).await? {
            BrokerAnswer::Acls { deleted, .. } => Ok(deleted),
            other => Err(format!("the controller quorum answered an ACL change with {other:?}")),
        }
    }

    /// Controller shard, in a quorum: AlterUserScramCredentials through the
    /// leader, which checks each change against the log's credentials.
    pub(super) async fn alter_cluster_credentials(
        self: &Rc<Self>,
        link: &ClusterLink,
        changes: Vec<CredentialChange>,
    ) -> Vec<UserOutcome> {
        let users: Vec<String> = changes.iter().map(|c| c.user().to_string()).collect();
        let failed = |e: String| {
            let mut seen = Vec::new();
            users
                .iter()
                .filter(|u| {
                    let first = !seen.contains(u);
                    seen.push(u);
                    first
                })
                .map(|u| (u.clone(), errors::REQUEST_TIMED_OUT, Some(e.clone())))
                .collect()
        };
        match self.ask_quorum(link, BrokerRequest::AlterCredentials(changes)).await {
            Ok(BrokerAnswer::Users { outcomes, .. }) => outcomes,
            Ok(other) => failed(format!("the controller quorum answered a credential change with {other:?}")),
            Err(e) => failed(e),
        }
    }
}
