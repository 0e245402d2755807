//! TLS for SSL and SASL_SSL listeners, with rustls (the `ring` provider) on
//! each shard's own event loop: no TLS threads, the handshake and every
//! record are driven by the connection's tasks (`stream.rs`).
//!
//! `[tls]` names a PEM certificate chain and key, optionally a CA bundle
//! for client certificates, and whether clients must show one. The
//! principal of a client that did is its certificate's subject as Kafka's
//! default principal builder writes it (`dn.rs`). SIGHUP reloads the files:
//! the new `ServerConfig` replaces the old in [`TlsState`], new connections
//! handshake with it, open ones keep theirs.

mod dn;
pub mod stream;

use std::{
    path::{Path, PathBuf},
    sync::{Arc, RwLock},
};

use rustls::{pki_types::pem::PemObject, server::WebPkiClientVerifier, ServerConfig};
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use serde::Deserialize;

pub use dn::subject_dn;

/// Whether an SSL listener asks clients for a certificate (Kafka's
/// `ssl.client.auth`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ClientAuth {
    #[default]
    None,
    /// Asked for; a client without one is still served, as ANONYMOUS.
    Requested,
    /// A client without a certificate the CA signed fails the handshake.
    Required,
}

/// `[tls]` as written.
#[derive(Debug, Clone, Default, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct TlsConfig {
    /// PEM: the server's certificate, then its chain.
    pub cert_file: PathBuf,
    /// PEM: the certificate's private key (PKCS#8, PKCS#1 or SEC1).
    pub key_file: PathBuf,
    /// PEM: the CAs whose client certificates are accepted; needed when
    /// `client_auth` is not `none`.
    #[serde(default)]
    pub ca_file: Option<PathBuf>,
    #[serde(default)]
    pub client_auth: ClientAuth,
}

/// The rustls crypto provider every TLS object here is built with.
pub fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// Reads the CA certificates in a PEM file.
pub fn load_roots(path: &Path) -> Result<rustls::RootCertStore, String> {
    let mut roots = rustls::RootCertStore::empty();
    for cert in load_certs(path)? {
        roots.add(cert).map_err(|e| format!("{}: a CA certificate rustls refuses: {e}", path.display()))?;
    }
    Ok(roots)
}

fn load_certs(path: &Path) -> Result<Vec<CertificateDer<'static>>, String> {
    let certs: Vec<_> = CertificateDer::pem_file_iter(path)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?
        .collect::<Result<_, _>>()
        .map_err(|e| format!("{}: bad PEM certificate: {e}", path.display()))?;
    if certs.is_empty() {
        return Err(format!("{}: no PEM certificate in it", path.display()));
    }
    Ok(certs)
}

impl TlsConfig {
    /// Reads the files and builds the rustls server configuration.
    pub fn server_config(&self) -> Result<Arc<ServerConfig>, String> {
        let chain = load_certs(&self.cert_file).map_err(|e| format!("[tls] cert_file: {e}"))?;
        let key = PrivateKeyDer::from_pem_file(&self.key_file).map_err(|e| {
            format!("[tls] key_file: cannot read a PEM private key from {}: {e}", self.key_file.display())
        })?;
        let builder = ServerConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .map_err(|e| format!("[tls]: {e}"))?;
        let builder = match (self.client_auth, &self.ca_file) {
            (ClientAuth::None, _) => builder.with_no_client_auth(),
            (auth, Some(ca)) => {
                let roots = Arc::new(load_roots(ca).map_err(|e| format!("[tls] ca_file: {e}"))?);
                let verifier = WebPkiClientVerifier::builder_with_provider(roots, provider());
                let verifier = if auth == ClientAuth::Requested { verifier.allow_unauthenticated() } else { verifier };
                builder.with_client_cert_verifier(verifier.build().map_err(|e| format!("[tls] ca_file: {e}"))?)
            }
            (auth, None) => return Err(format!("[tls] client_auth = {auth:?} needs a ca_file")),
        };
        let config = builder.with_single_cert(chain, key).map_err(|e| {
            format!(
                "[tls]: {} and {} do not make a usable pair: {e}",
                self.cert_file.display(),
                self.key_file.display()
            )
        })?;
        Ok(Arc::new(config))
    }
}

/// The server configuration every shard's TLS listeners handshake with,
/// replaced as a whole on SIGHUP. Shards take a clone of the `Arc` per
/// connection (a read lock nobody holds for long).
pub struct TlsState {
    config: TlsConfig,
    /// Off the data path: read once per accepted TLS connection, before its
    /// handshake, to clone the `Arc`; never per request, produce or fetch
    /// (a connection keeps its own rustls session). Written only by the
    /// SIGHUP thread, which is not a shard and so cannot reach the shards
    /// over the mesh; a reload that finds a reader waits for one `Arc`
    /// clone, and a shard accepting meanwhile waits for one pointer swap.
    /// The shards share it across cores by design: a reload must reach
    /// every shard at once, and a per-shard copy would need the mesh the
    /// SIGHUP thread is not on.
    current: RwLock<Arc<ServerConfig>>,
}

impl TlsState {
    pub fn load(config: &TlsConfig) -> Result<Arc<Self>, String> {
        let current = RwLock::new(config.server_config()?);
        Ok(Arc::new(Self { config: config.clone(), current }))
    }

    pub fn current(&self) -> Arc<ServerConfig> {
        self.current.read().unwrap_or_else(std::sync::PoisonError::into_inner).clone()
    }

    /// Reads the files again; on any error the old configuration stays.
    pub fn reload(&self) -> Result<(), String> {
        let fresh = self.config.server_config()?;
        *self.current.write().unwrap_or_else(std::sync::PoisonError::into_inner) = fresh;
        Ok(())
    }
}

/// Reloads `state` on every SIGHUP, logging the outcome, from a thread of
/// its own that sleeps in `sigwait` (reading a few PEM files must not stall
/// a shard). Returns the handle that stops it.
pub fn reload_on_sighup(state: Arc<TlsState>) -> Result<signal_hook::iterator::Handle, String> {
    let mut signals = signal_hook::iterator::Signals::new([signal_hook::consts::SIGHUP])
        .map_err(|e| format!("cannot handle SIGHUP: {e}"))?;
    let handle = signals.handle();
    std::thread::Builder::new()
        .name("tls-reload".into())
        .spawn(move || {
            for _ in signals.forever() {
                match state.reload() {
                    Ok(()) => log::info!(
                        "SIGHUP: reloaded the TLS certificate {}: new connections use it",
                        state.config.cert_file.display()
                    ),
                    Err(e) => log::error!("SIGHUP: TLS reload failed, keeping the previous certificate: {e}"),
                }
            }
        })
        .map_err(|e| format!("cannot start the TLS reload thread: {e}"))?;
    Ok(handle)
}

/// How often a shard logs failed TLS handshakes: thousands of bad clients
/// must not flood the log (or slow the shard writing it).
const HANDSHAKE_FAILURE_LOG_EVERY: std::time::Duration = std::time::Duration::from_secs(1);

thread_local! {
    /// This shard's failed handshakes since its last line, and when that was.
    static HANDSHAKE_FAILURES: std::cell::Cell<(u64, Option<std::time::Instant>)> =
        const { std::cell::Cell::new((0, None)) };
}

/// Logs a failed TLS handshake, at most one line a second per shard,
/// saying how many failed since the last line.
pub fn report_failed_handshake(peer: &str, listener: &str, error: &std::io::Error) {
    let (failed, last) = HANDSHAKE_FAILURES.get();
    let failed = failed + 1;
    if last.is_none_or(|t| t.elapsed() >= HANDSHAKE_FAILURE_LOG_EVERY) {
        log::warn!(
            "TLS handshake failed on listener {listener} from {peer}: {error} \
             ({failed} failed handshake(s) on this shard since the last report)"
        );
        HANDSHAKE_FAILURES.set((0, Some(std::time::Instant::now())));
    } else {
        HANDSHAKE_FAILURES.set((failed, last));
    }
}
