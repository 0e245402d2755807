//! The decision: may this session do this operation on this resource?
//! Kafka's `AclAuthorizer`: super users may do anything; otherwise the
//! ACLs decide (`AclSet::allows`), and a resource no ACL names is open
//! only while `allow_everyone_if_no_acl_found` holds.

use super::{
    acl::{AclSet, Operation, ResourceType},
    Principal, SecurityProtocol,
};

/// What the broker was configured with, fixed at start.
#[derive(Debug, Clone, Default)]
pub struct AuthorizerSettings {
    /// Principals (`User:admin`) that skip every check.
    pub super_users: Vec<Principal>,
    pub allow_everyone_if_no_acl_found: bool,
}

impl AuthorizerSettings {
    /// Reads the `super_users` list of the config; errors name the entry.
    pub fn new(super_users: &[String], allow_everyone_if_no_acl_found: bool) -> Result<Self, String> {
        let super_users = super_users
            .iter()
            .map(|s| Principal::parse(s).map_err(|e| format!("super_users: {e}")))
            .collect::<Result<_, _>>()?;
        Ok(Self { super_users, allow_everyone_if_no_acl_found })
    }
}

/// Whether connections on a listener prove who they are: SASL, or TLS with
/// client certificates required. The TLS work passes its `client_auth`.
pub fn listener_authenticates(protocol: SecurityProtocol, tls_client_auth_required: bool) -> bool {
    protocol.needs_sasl() || (protocol.uses_tls() && tls_client_auth_required)
}

/// `allow_everyone_if_no_acl_found` as the broker runs it: the configured
/// value (true when unset), forced false whenever a listener authenticates
/// — an open resource would make authenticating pointless (issue 17).
pub fn allow_everyone_if_no_acl_found(configured: Option<bool>, any_listener_authenticates: bool) -> bool {
    !any_listener_authenticates && configured.unwrap_or(true)
}

/// The one decision. `host` is asked for only when ACLs must be read (it
/// allocates), so a broker without ACLs pays a comparison per check.
pub fn authorize(
    settings: &AuthorizerSettings,
    acls: &AclSet,
    principal: &Principal,
    host: impl FnOnce() -> String,
    operation: Operation,
    resource_type: ResourceType,
    name: &str,
) -> bool {
    if acls.is_empty() && settings.allow_everyone_if_no_acl_found {
        return true;
    }
    if settings.super_users.contains(principal) {
        return true;
    }
    let who = principal.to_string();
    acls.allows(&who, &host(), operation, resource_type, name, settings.allow_everyone_if_no_acl_found)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::security::acl::{Acl, PatternType, Permission};

    #[test]
    fn super_users_skip_the_acls_and_the_default_follows_the_listeners() {
        let settings = AuthorizerSettings::new(&["User:admin".into()], false).unwrap();
        let none = AclSet::default();
        let admin = Principal::user("admin");
        let anon = Principal::anonymous();
        let host = || "127.0.0.1".to_string();
        assert!(authorize(&settings, &none, &admin, host, Operation::Alter, ResourceType::Cluster, "kafka-cluster"));
        assert!(!authorize(&settings, &none, &anon, host, Operation::Read, ResourceType::Topic, "t"));
        let open = AuthorizerSettings::default();
        let open = AuthorizerSettings { allow_everyone_if_no_acl_found: true, ..open };
        assert!(authorize(&open, &none, &anon, host, Operation::Read, ResourceType::Topic, "t"));
        let set = AclSet::new(vec![Acl {
            resource_type: ResourceType::Topic,
            resource_name: "t".into(),
            pattern_type: PatternType::Literal,
            principal: "User:bob".into(),
            host: "*".into(),
            operation: Operation::Read,
            permission: Permission::Allow,
        }]);
        assert!(!authorize(&open, &set, &anon, host, Operation::Read, ResourceType::Topic, "t"));
        assert!(authorize(&open, &set, &anon, host, Operation::Read, ResourceType::Topic, "u"));
        assert!(AuthorizerSettings::new(&["admin".into()], true).unwrap_err().contains("super_users"));
        assert!(allow_everyone_if_no_acl_found(None, false));
        assert!(!allow_everyone_if_no_acl_found(Some(false), false));
        assert!(!allow_everyone_if_no_acl_found(Some(true), true));
        assert!(listener_authenticates(SecurityProtocol::SaslPlaintext, false));
        assert!(listener_authenticates(SecurityProtocol::Ssl, true));
        assert!(!listener_authenticates(SecurityProtocol::Ssl, false));
        assert!(!listener_authenticates(SecurityProtocol::Plaintext, false));
    }
}
