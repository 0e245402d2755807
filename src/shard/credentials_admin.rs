//! SCRAM credential changes (AlterUserScramCredentials): made on the
//! controller shard, one change at a time (its controller permit), saved
//! atomically, then handed to every shard, which swaps its own copy. The
//! request path reads only the shard's own `Arc<Credentials>`: no lock.

use std::{rc::Rc, sync::Arc};

use crate::{
    protocol::errors::{self, ErrorCode},
    security::{
        credentials::{Credentials, Refusal},
        scram::{Mechanism, ScramCredential},
    },
    shard::Shard,
};

/// One change, as the request names it (and as the controller quorum's
/// log carries it).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum CredentialChange {
    Delete { user: String, mechanism: i8 },
    Upsert { user: String, mechanism: i8, iterations: i32, salt: Vec<u8>, salted_password: Vec<u8> },
}

impl CredentialChange {
    pub fn user(&self) -> &str {
        match self {
            Self::Delete { user, .. } | Self::Upsert { user, .. } => user,
        }
    }
}

/// To the controller: apply changes, in order; one answer per user.
#[derive(Debug)]
pub struct AlterCredentials {
    pub changes: Vec<CredentialChange>,
}

/// To every shard: the credentials to use from now on.
#[derive(Debug)]
pub struct ApplyCredentials {
    pub credentials: Arc<Credentials>,
}

/// A user's outcome: error code and message.
pub type UserOutcome = (String, ErrorCode, Option<String>);

impl Shard {
    /// The credentials as this shard last heard them.
    pub fn credentials(&self) -> Arc<Credentials> {
        self.credentials.borrow().clone()
    }

    pub(super) fn apply_credentials(&self, credentials: Arc<Credentials>) -> std::future::Ready<()> {
        *self.credentials.borrow_mut() = credentials;
        std::future::ready(())
    }

    /// Runs on the controller: checks every change, applies the accepted
    /// ones to a copy, saves it, then publishes it to every shard. A user
    /// named twice in one request gets DUPLICATE_RESOURCE for all of its
    /// changes, as Kafka answers.
    pub(super) async fn alter_credentials(self: &Rc<Self>, changes: Vec<CredentialChange>) -> Vec<UserOutcome> {
        if let Some(link) = &self.settings.cluster {
            return self.alter_cluster_credentials(link, changes).await;
        }
        let _permit = self.controller_permit.acquire_permit(1).await.expect("controller permit: never closed");
        let (next, outcomes, _) = changed(&self.credentials(), &changes);
        if next != *self.credentials() {
            if let Err(e) = self.publish_credentials(next).await {
                let message = Some(e);
                return outcomes
                    .into_iter()
                    .map(|(u, _, _)| (u, errors::KAFKA_STORAGE_ERROR, message.clone()))
                    .collect();
            }
        }
        outcomes
    }

    /// Saves `next`, then has every shard swap it in.
    pub(super) async fn publish_credentials(self: &Rc<Self>, next: Credentials) -> Result<(), String> {
        let (dir, to_save) = (self.settings.data_dir.clone(), next.clone());
        if let Err(e) = glommio::executor().spawn_blocking(move || to_save.save(&dir)).await {
            log::error!("shard {}: cannot persist SCRAM credentials: {e}", self.id);
            return Err(format!("cannot persist SCRAM credentials: {e}"));
        }
        let credentials = Arc::new(next);
        self.ask_every(|| ApplyCredentials { credentials: credentials.clone() }).await;
        Ok(())
    }
}

/// `changes` applied to `current`: the new credentials, each user's
/// outcome in request order, and the changes that took (a user named
/// twice in one request is refused, as Kafka does).
pub fn changed(
    current: &Credentials,
    changes: &[CredentialChange],
) -> (Credentials, Vec<UserOutcome>, Vec<CredentialChange>) {
    let mut next = current.clone();
    let mut outcomes: Vec<UserOutcome> = Vec::new();
    let mut took = Vec::new();
    let mut counts = std::collections::HashMap::<&str, usize>::new();
    for c in changes {
        *counts.entry(c.user()).or_default() += 1;
    }
    for change in changes {
        let user = change.user().to_string();
        if outcomes.iter().any(|(u, _, _)| *u == user) {
            continue;
        }
        let outcome = if counts[change.user()] > 1 {
            (errors::DUPLICATE_RESOURCE, Some(format!("user {user:?} is named more than once in the request")))
        } else {
            match apply(&mut next, change) {
                Ok(()) => {
                    took.push(change.clone());
                    (errors::NONE, None)
                }
                Err(e) => e,
            }
        };
        outcomes.push((user, outcome.0, outcome.1));
    }
    (next, outcomes, took)
}

/// One change applied to `next`, or Kafka's refusal of it.
pub fn apply(next: &mut Credentials, change: &CredentialChange) -> Result<(), (ErrorCode, Option<String>)> {
    let refused = |r: Refusal, user: &str, m: i8| match r {
        Refusal::NotFound => (
            errors::RESOURCE_NOT_FOUND,
            Some(format!("attempt to delete a user credential that does not exist: user {user:?}, mechanism {m}")),
        ),
        Refusal::UnknownMechanism => {
            (errors::UNSUPPORTED_SASL_MECHANISM, Some(format!("unknown SCRAM mechanism {m} for user {user:?}")))
        }
        Refusal::Unacceptable => (
            errors::UNACCEPTABLE_CREDENTIAL,
            Some(format!("credential for user {user:?}: iterations must be 4096..=16384, salt and name not empty")),
        ),
    };
    match change {
        CredentialChange::Delete { user, mechanism } => {
            let m = Mechanism::from_code(*mechanism).ok_or(refused(Refusal::UnknownMechanism, user, *mechanism))?;
            next.delete(user, m).map_err(|r| refused(r, user, *mechanism))
        }
        CredentialChange::Upsert { user, mechanism, iterations, salt, salted_password } => {
            let m = Mechanism::from_code(*mechanism).ok_or(refused(Refusal::UnknownMechanism, user, *mechanism))?;
            if *iterations < 0 || salted_password.len() != m.hash_bytes() {
                return Err(refused(Refusal::Unacceptable, user, *mechanism));
            }
            let credential = ScramCredential::from_salted_password(m, salted_password, salt, *iterations as u32);
            next.upsert(user, m, credential).map_err(|r| refused(r, user, *mechanism))
        }
    }
}
