//! Who a connection is and how it came in: the seam shared by listeners and
//! TLS (`server::listeners`), SASL authentication and ACL authorization.
//!
//! Every connection carries a [`Session`]. A PLAINTEXT or SSL connection
//! without a client certificate is `User:ANONYMOUS` from the start; a SASL
//! listener's connections become their user once SaslAuthenticate succeeds.

pub mod acl;
pub mod acl_store;
pub mod authorizer;
pub mod credentials;
pub mod sasl;
pub mod sasl_config;
pub mod scram;

use std::{cell::RefCell, fmt, rc::Rc};

/// Kafka's security protocols, one per listener.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SecurityProtocol {
    Plaintext,
    Ssl,
    SaslPlaintext,
    SaslSsl,
}

impl SecurityProtocol {
    /// Whether connections on this listener must authenticate with SASL
    /// before any request other than ApiVersions and the SASL ones.
    pub fn needs_sasl(self) -> bool {
        matches!(self, Self::SaslPlaintext | Self::SaslSsl)
    }

    /// Whether connections on this listener speak TLS.
    pub fn uses_tls(self) -> bool {
        matches!(self, Self::Ssl | Self::SaslSsl)
    }

    pub fn name(self) -> &'static str {
        match self {
            Self::Plaintext => "PLAINTEXT",
            Self::Ssl => "SSL",
            Self::SaslPlaintext => "SASL_PLAINTEXT",
            Self::SaslSsl => "SASL_SSL",
        }
    }
}

impl std::str::FromStr for SecurityProtocol {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s.to_ascii_uppercase().as_str() {
            "PLAINTEXT" => Ok(Self::Plaintext),
            "SSL" => Ok(Self::Ssl),
            "SASL_PLAINTEXT" => Ok(Self::SaslPlaintext),
            "SASL_SSL" => Ok(Self::SaslSsl),
            other => Err(format!("unknown security protocol {other:?} (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL)")),
        }
    }
}

/// Kafka's principal: a type and a name, written `User:alice`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Principal {
    pub kind: String,
    pub name: String,
}

impl Principal {
    pub fn user(name: impl Into<String>) -> Self {
        Self { kind: "User".into(), name: name.into() }
    }

    /// Kafka's principal for a connection that did not authenticate.
    pub fn anonymous() -> Self {
        Self::user("ANONYMOUS")
    }

    /// Reads `User:alice`.
    pub fn parse(text: &str) -> Result<Self, String> {
        match text.split_once(':') {
            Some((kind, name)) if !kind.is_empty() && !name.is_empty() => {
                Ok(Self { kind: kind.into(), name: name.into() })
            }
            _ => Err(format!("principal {text:?}: expected TYPE:NAME, e.g. User:alice")),
        }
    }
}

impl fmt::Display for Principal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.kind, self.name)
    }
}

/// What the broker knows of one connection while it lives.
pub struct Session {
    /// The peer's address, `ip:port`.
    pub peer: String,
    /// The listener it came in on: its name (`PLAINTEXT` by default).
    pub listener: Rc<str>,
    pub protocol: SecurityProtocol,
    /// Who the connection acts as; `User:ANONYMOUS` until authenticated.
    pub principal: RefCell<Principal>,
    /// The broker whose follower fetches came on this connection (-1: none).
    pub replica: std::cell::Cell<i32>,
}

impl Session {
    pub fn new(peer: String, listener: Rc<str>, protocol: SecurityProtocol) -> Self {
        Self { peer, listener, protocol, principal: RefCell::new(Principal::anonymous()), replica: (-1).into() }
    }

    pub fn principal(&self) -> Principal {
        self.principal.borrow().clone()
    }

    /// The peer's IP, as ACLs match hosts.
    pub fn host(&self) -> String {
        self.peer.parse::<std::net::SocketAddr>().map_or_else(|_| self.peer.clone(), |a| a.ip().to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn principals_and_protocols_read_back() {
        let p = Principal::parse("User:alice").unwrap();
        assert_eq!(p, Principal::user("alice"));
        assert_eq!(p.to_string(), "User:alice");
        assert!(Principal::parse("alice").is_err());
        assert_eq!("sasl_ssl".parse::<SecurityProtocol>().unwrap(), SecurityProtocol::SaslSsl);
        assert!(SecurityProtocol::SaslSsl.needs_sasl() && SecurityProtocol::SaslSsl.uses_tls());
        assert!(!SecurityProtocol::Ssl.needs_sasl());
        let s = Session::new("10.0.0.7:5555".into(), "PLAINTEXT".into(), SecurityProtocol::Plaintext);
        assert_eq!(s.host(), "10.0.0.7");
        assert_eq!(s.principal(), Principal::anonymous());
    }
}
