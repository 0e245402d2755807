//! The client half of TLS for our own tools (`bench --tls`, the tests):
//! rustls' `ClientConnection` with the `ring` provider, over a blocking
//! socket here, or over a load core's non-blocking one in `bench`.

use std::{
    net::TcpStream,
    path::Path,
    sync::{Arc, OnceLock},
};

use rustls::{pki_types::ServerName, ClientConfig, ClientConnection, StreamOwned};
use rustls_pki_types::{pem::PemObject, CertificateDer, PrivateKeyDer};

use super::ClientError;

/// A client configuration trusting the CAs in `ca_file` (PEM), showing
/// the certificate chain and key in `identity` if given.
pub fn client_config(ca_file: &Path, identity: Option<(&Path, &Path)>) -> Result<Arc<ClientConfig>, String> {
    let mut roots = rustls::RootCertStore::empty();
    let cas = CertificateDer::pem_file_iter(ca_file)
        .map_err(|e| format!("cannot read {}: {e}", ca_file.display()))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("{}: bad PEM certificate: {e}", ca_file.display()))?;
    for ca in cas {
        roots.add(ca).map_err(|e| format!("{}: a CA certificate rustls refuses: {e}", ca_file.display()))?;
    }
    let builder = ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_root_certificates(roots);
    let config = match identity {
        None => builder.with_no_client_auth(),
        Some((cert, key)) => {
            let chain = CertificateDer::pem_file_iter(cert)
                .map_err(|e| format!("cannot read {}: {e}", cert.display()))?
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| format!("{}: bad PEM certificate: {e}", cert.display()))?;
            let key = PrivateKeyDer::from_pem_file(key).map_err(|e| format!("{}: {e}", key.display()))?;
            builder.with_client_auth_cert(chain, key).map_err(|e| format!("{}: {e}", cert.display()))?
        }
    };
    Ok(Arc::new(config))
}

/// The name the server's certificate is checked against: the host part of
/// `addr` (an IP address is matched against the certificate's IP SANs).
pub fn server_name(addr: &str) -> Result<ServerName<'static>, String> {
    let host = addr.rsplit_once(':').map_or(addr, |(h, _)| h).trim_matches(|c| c == '[' || c == ']');
    ServerName::try_from(host.to_string()).map_err(|e| format!("{addr}: not a TLS server name: {e}"))
}

/// A blocking TLS connection to `addr`, handshake done.
pub fn connect(addr: &str, config: Arc<ClientConfig>) -> Result<StreamOwned<ClientConnection, TcpStream>, ClientError> {
    let fail = |source| ClientError::Connect { addr: addr.to_string(), source };
    let name = server_name(addr).map_err(|e| fail(std::io::Error::new(std::io::ErrorKind::InvalidInput, e)))?;
    let mut tcp = super::connect(addr)?;
    let mut tls = ClientConnection::new(config, name).map_err(|e| fail(std::io::Error::other(e)))?;
    while tls.is_handshaking() {
        tls.complete_io(&mut tcp).map_err(fail)?;
    }
    Ok(StreamOwned::new(tls, tcp))
}

/// The TLS configuration every connection of this process opens with
/// (`bench --tls` sets it once, before any connection): the tools' code
/// paths stay as they are, only `open` looks here.
static CONFIG: OnceLock<Arc<ClientConfig>> = OnceLock::new();

/// Makes every later `open` (and so `Client::connect` and the bench's
/// load connections) speak TLS with `config`. Set once per process.
pub fn use_for_all_connections(config: Arc<ClientConfig>) -> Result<(), String> {
    CONFIG.set(config).map_err(|_| "the TLS client configuration is already set".to_string())
}

/// A connected socket, plain or with its TLS handshake done.
pub enum Socket {
    Plain(TcpStream),
    Tls(Box<StreamOwned<ClientConnection, TcpStream>>),
}

impl Socket {
    pub fn tcp(&self) -> &TcpStream {
        match self {
            Socket::Plain(s) => s,
            Socket::Tls(s) => &s.sock,
        }
    }
}

/// Connects to `addr`, with TLS when `use_for_all_connections` was called.
pub fn open(addr: &str) -> Result<Socket, ClientError> {
    match CONFIG.get() {
        None => Ok(Socket::Plain(super::connect(addr)?)),
        Some(config) => Ok(Socket::Tls(Box::new(connect(addr, config.clone())?))),
    }
}

impl std::io::Read for Socket {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        match self {
            Socket::Plain(s) => s.read(buf),
            Socket::Tls(s) => s.read(buf),
        }
    }
}

impl std::io::Write for Socket {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        match self {
            Socket::Plain(s) => s.write(buf),
            Socket::Tls(s) => s.write(buf),
        }
    }
    fn flush(&mut self) -> std::io::Result<()> {
        match self {
            Socket::Plain(s) => s.flush(),
            Socket::Tls(s) => s.flush(),
        }
    }
}
