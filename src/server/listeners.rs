//! Kafka's listener model: each listener has a name, an address to bind and
//! a security protocol, and tells the clients that came in on it its own
//! advertised address.
//!
//! Configured with `[[listeners]]` in the TOML file or `--listener
//! NAME=PROTO://HOST:PORT` (repeatable). `listen` / `--listen` is the
//! shorthand for one PLAINTEXT listener named `PLAINTEXT`, advertised as
//! `advertise`; with no listener configured it is the only one (default
//! 127.0.0.1:9092). Every shard binds every listener (SO_REUSEPORT).

use std::net::SocketAddr;

use serde::Deserialize;

use crate::{
    security::SecurityProtocol,
    server::{config::ServeConfig, tls::ClientAuth},
    shard::BrokerSettings,
};

/// The shorthand listener's name, as Kafka names its default one.
pub const PLAINTEXT_NAME: &str = "PLAINTEXT";
/// Where the shorthand listener binds when nothing is configured.
pub const LISTEN_DEFAULT: &str = "127.0.0.1:9092";
/// Listeners one broker may have: each is bound by every shard, and each
/// costs an accept loop per shard.
const LISTENERS_MAX: usize = 16;

/// One `[[listeners]]` entry as written.
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct ListenerConfig {
    pub name: String,
    /// HOST:PORT to bind.
    pub address: String,
    /// PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL.
    pub protocol: String,
    /// HOST:PORT that Metadata tells this listener's clients; the bind
    /// address when absent.
    #[serde(default)]
    pub advertised_address: Option<String>,
}

impl ListenerConfig {
    /// Reads `--listener NAME=PROTO://HOST:PORT`.
    pub fn parse_flag(text: &str) -> Result<Self, String> {
        let bad = || format!("--listener {text:?}: expected NAME=PROTO://HOST:PORT, e.g. SSL=SSL://0.0.0.0:9093");
        let (name, rest) = text.split_once('=').ok_or_else(bad)?;
        let (protocol, address) = rest.split_once("://").ok_or_else(bad)?;
        if name.is_empty() || protocol.is_empty() || address.is_empty() {
            return Err(bad());
        }
        Ok(Self { name: name.into(), address: address.into(), protocol: protocol.into(), advertised_address: None })
    }
}

/// A listener ready to bind: checked, resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listener {
    pub name: String,
    pub protocol: SecurityProtocol,
    pub bind: SocketAddr,
    pub advertised: Advertised,
}

/// The address a listener's clients are told to use.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Advertised {
    pub listener: String,
    pub host: String,
    pub port: i32,
}

impl std::fmt::Display for Listener {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}={}://{}", self.name, self.protocol.name(), self.bind)
    }
}

/// The listeners `config` asks for, checked: names and addresses unique,
/// TLS listeners only with `[tls]`.
pub fn resolve(config: &ServeConfig) -> Result<Vec<Listener>, String> {
    let mut out = Vec::new();
    for l in &config.listeners {
        let what = format!("listener {:?}", l.name);
        if l.name.is_empty() || !l.name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-') {
            return Err(format!("{what}: a name is letters, digits, '_' or '-'"));
        }
        let protocol: SecurityProtocol = l.protocol.parse().map_err(|e| format!("{what}: {e}"))?;
        let bind: SocketAddr = l.address.parse().map_err(|e| format!("{what}: address {:?}: {e}", l.address))?;
        let advertised = advertised(&l.name, l.advertised_address.as_deref().unwrap_or(&l.address))
            .map_err(|e| format!("{what}: {e}"))?;
        out.push(Listener { name: l.name.clone(), protocol, bind, advertised });
    }
    let shorthand = config.listen.is_some() || config.listeners.is_empty();
    if shorthand && !out.iter().any(|l| l.name == PLAINTEXT_NAME) {
        let listen = config.listen.as_deref().unwrap_or(LISTEN_DEFAULT);
        let bind: SocketAddr = listen.parse().map_err(|e| format!("--listen {listen:?}: {e}"))?;
        let advertised = advertised(PLAINTEXT_NAME, config.advertise.as_deref().unwrap_or(listen))
            .map_err(|e| format!("--advertise {e}"))?;
        out.insert(
            0,
            Listener { name: PLAINTEXT_NAME.into(), protocol: SecurityProtocol::Plaintext, bind, advertised },
        );
    }
    check(&out, config)?;
    Ok(out)
}

fn check(listeners: &[Listener], config: &ServeConfig) -> Result<(), String> {
    if listeners.len() > LISTENERS_MAX {
        return Err(format!("{} listeners configured; at most {LISTENERS_MAX}", listeners.len()));
    }
    for (i, l) in listeners.iter().enumerate() {
        for other in &listeners[..i] {
            if other.name == l.name {
                return Err(format!("two listeners are named {:?}", l.name));
            }
            if other.bind == l.bind {
                return Err(format!("listeners {:?} and {:?} both bind {}", other.name, l.name, l.bind));
            }
        }
        if l.protocol.uses_tls() && config.tls.is_none() {
            return Err(format!("listener {l} speaks TLS but the config has no [tls] section"));
        }
    }
    Ok(())
}

fn advertised(listener: &str, text: &str) -> Result<Advertised, String> {
    let (host, port) = text.rsplit_once(':').ok_or_else(|| format!("{text:?}: expected HOST:PORT"))?;
    let port = port.parse::<u16>().map_err(|e| format!("{text:?}: {e}"))?;
    let host = host.trim_matches(|c| c == '[' || c == ']').to_string();
    Ok(Advertised { listener: listener.into(), host, port: i32::from(port) })
}

/// Warnings for listeners anyone on the network can use without
/// authenticating: bound beyond loopback, and neither SASL nor a required
/// client certificate. The broker still starts (an operator may have a
/// firewall); the warning says what is open.
pub fn open_to_network(listeners: &[Listener], client_auth: Option<ClientAuth>) -> Vec<String> {
    listeners
        .iter()
        .filter(|l| !l.bind.ip().is_loopback())
        .filter(|l| match l.protocol {
            SecurityProtocol::Plaintext => true,
            SecurityProtocol::Ssl => client_auth != Some(ClientAuth::Required),
            SecurityProtocol::SaslPlaintext | SecurityProtocol::SaslSsl => false,
        })
        .map(|l| {
            format!(
                "WARNING: listener {l} accepts connections from the network with no authentication: \
                 anyone who reaches {} can produce, consume and delete topics. Use SASL_SSL, SSL with \
                 client_auth = \"required\", or a loopback address.",
                l.bind
            )
        })
        .collect()
}

/// What Metadata, FindCoordinator and DescribeCluster tell a client that
/// came in on `listener`: that listener's advertised address.
pub fn advertised_for<'a>(settings: &'a BrokerSettings, listener: &str) -> (&'a str, i32) {
    settings
        .listeners
        .iter()
        .find(|a| a.listener == listener)
        .map_or((settings.advertised_host.as_str(), settings.advertised_port), |a| (a.host.as_str(), a.port))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shorthand_is_the_default_and_listeners_add_to_it_only_when_listen_is_set() {
        let d = resolve(&ServeConfig::default()).unwrap();
        assert_eq!(d.len(), 1);
        assert_eq!(d[0].to_string(), "PLAINTEXT=PLAINTEXT://127.0.0.1:9092");
        let ssl = ListenerConfig::parse_flag("SECURE=SSL://127.0.0.1:9093").unwrap();
        let mut c = ServeConfig { listeners: vec![ssl], ..ServeConfig::default() };
        assert!(resolve(&c).unwrap_err().contains("no [tls] section"));
        c.tls = Some(crate::server::tls::TlsConfig::default());
        let only = resolve(&c).unwrap();
        assert_eq!(only.len(), 1);
        assert_eq!(only[0].protocol, SecurityProtocol::Ssl);
        c.listen = Some("127.0.0.1:9000".into());
        c.advertise = Some("broker.example:19000".into());
        let both = resolve(&c).unwrap();
        assert_eq!(
            both[0].advertised,
            Advertised { listener: "PLAINTEXT".into(), host: "broker.example".into(), port: 19000 }
        );
        assert_eq!(both[1].advertised.port, 9093);
    }

    #[test]
    fn bad_listeners_are_refused_with_their_names() {
        assert!(ListenerConfig::parse_flag("SSL://127.0.0.1:1").is_err());
        let l = |name: &str, address: &str, protocol: &str| ListenerConfig {
            name: name.into(),
            address: address.into(),
            protocol: protocol.into(),
            advertised_address: None,
        };
        let c = |ls| ServeConfig { listeners: ls, ..ServeConfig::default() };
        assert!(resolve(&c(vec![l("A", "127.0.0.1:1", "TLS")])).unwrap_err().contains("\"A\""));
        assert!(resolve(&c(vec![l("A", "nowhere", "PLAINTEXT")])).unwrap_err().contains("address"));
        let dup = resolve(&c(vec![l("A", "127.0.0.1:1", "PLAINTEXT"), l("B", "127.0.0.1:1", "PLAINTEXT")]));
        assert!(dup.unwrap_err().contains("both bind"));
    }

    #[test]
    fn only_unauthenticated_listeners_beyond_loopback_are_warned_about() {
        let listener = |bind: &str, protocol| Listener {
            name: "L".into(),
            protocol,
            bind: bind.parse().unwrap(),
            advertised: Advertised { listener: "L".into(), host: "h".into(), port: 1 },
        };
        let ls = [
            listener("0.0.0.0:1", SecurityProtocol::Plaintext),
            listener("127.0.0.1:2", SecurityProtocol::Plaintext),
            listener("10.0.0.1:3", SecurityProtocol::Ssl),
            listener("10.0.0.1:4", SecurityProtocol::SaslSsl),
        ];
        assert_eq!(open_to_network(&ls, Some(ClientAuth::Requested)).len(), 2);
        assert_eq!(open_to_network(&ls, Some(ClientAuth::Required)).len(), 1);
    }
}
