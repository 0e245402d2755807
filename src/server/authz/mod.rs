//! Authorization of requests. [`authorize`] is the one place that decides
//! (over `security::authorizer`, with this shard's copy of the ACLs); the
//! functions in `topics.rs`, `groups.rs`, `txn.rs` and `credentials.rs` wrap each API's
//! handler: they check what the request names, hand the handler only what
//! may go ahead, and answer the rest with Kafka's authorization error in
//! the place the response's shape gives it.

pub mod credentials;
pub mod groups;
pub mod topics;
pub mod txn;

use crate::{
    protocol::errors::{self, ErrorCode},
    security::{
        acl::{Operation, ResourceType, CLUSTER_NAME},
        authorizer, Session,
    },
    shard::Shard,
};

/// May `session` do `operation` on the resource? A refusal is counted in
/// `/metrics` (`shardlog_authorization_denied`) under the error it causes.
pub fn authorize(shard: &Shard, session: &Session, operation: Operation, kind: ResourceType, name: &str) -> bool {
    let acls = shard.acls();
    let principal = session.principal.borrow();
    let allowed =
        authorizer::authorize(&shard.settings.authorizer, &acls, &principal, || session.host(), operation, kind, name);
    if !allowed {
        crate::metrics::ShardMetrics::error(&shard.metrics.authorization_denied, denied_code(kind));
        log::debug!("{principal} from {} may not {} {} {name:?}", session.peer, operation.name(), kind.name());
    }
    allowed
}

/// Whether nothing can refuse this session: no ACLs while
/// `allow_everyone_if_no_acl_found`, or a super user. The Produce and Fetch
/// wrappers then hand the request through untouched (the default set-up
/// pays nothing per topic on its data path).
pub fn unrestricted(shard: &Shard, session: &Session) -> bool {
    let settings = &shard.settings.authorizer;
    (settings.allow_everyone_if_no_acl_found && shard.acls().is_empty())
        || settings.super_users.contains(&*session.principal.borrow())
}

/// `authorize` on the cluster resource.
pub fn on_cluster(shard: &Shard, session: &Session, operation: Operation) -> bool {
    authorize(shard, session, operation, ResourceType::Cluster, CLUSTER_NAME)
}

/// Kafka's error for a refusal on a resource of this type.
pub fn denied_code(kind: ResourceType) -> ErrorCode {
    match kind {
        ResourceType::Topic => errors::TOPIC_AUTHORIZATION_FAILED,
        ResourceType::Group => errors::GROUP_AUTHORIZATION_FAILED,
        ResourceType::TransactionalId => errors::TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
        ResourceType::Cluster | ResourceType::Any => errors::CLUSTER_AUTHORIZATION_FAILED,
    }
}

/// Kafka's `authorizeByResourceType`: may the session do `operation` on
/// some resource of this type (an idempotent producer's WRITE on any topic)?
pub fn on_any(shard: &Shard, session: &Session, operation: Operation, kind: ResourceType) -> bool {
    let acls = shard.acls();
    let principal = session.principal.borrow();
    let settings = &shard.settings.authorizer;
    if (acls.is_empty() && settings.allow_everyone_if_no_acl_found) || settings.super_users.contains(&principal) {
        return true;
    }
    acls.allows_some(&principal.to_string(), &session.host(), operation, kind)
}
