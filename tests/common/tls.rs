//! Test certificates made with the `openssl` CLI, and a broker with an SSL
//! listener beside its PLAINTEXT one.

use std::{
    path::{Path, PathBuf},
    process::Command,
    sync::Arc,
};

use super::broker::{free_port, Broker};

/// A CA, a server certificate for 127.0.0.1 signed by it, a client
/// certificate, an expired server certificate, and a second CA with a
/// server certificate of its own that the first CA's clients do not trust.
pub struct Pki {
    pub dir: PathBuf,
}

/// The client certificate's subject, as openssl is told it (most
/// significant first); Kafka writes it the other way round.
pub const CLIENT_SUBJECT: &str = "/C=US/O=Example Corp/OU=streaming/CN=alice";

fn openssl(dir: &Path, args: &[&str]) {
    let out = Command::new("openssl").current_dir(dir).args(args).output().expect("run openssl");
    assert!(out.status.success(), "openssl {args:?}: {}", String::from_utf8_lossy(&out.stderr));
}

impl Pki {
    pub fn make(dir: &Path) -> Self {
        std::fs::create_dir_all(dir).unwrap();
        std::fs::write(
            dir.join("server.ext"),
            "basicConstraints=CA:FALSE\nsubjectAltName=IP:127.0.0.1,DNS:localhost\n",
        )
        .unwrap();
        std::fs::write(dir.join("client.ext"), "basicConstraints=CA:FALSE\nextendedKeyUsage=clientAuth\n").unwrap();
        for ca in ["ca", "other-ca"] {
            let (key, pem, subj) = (format!("{ca}.key"), format!("{ca}.pem"), format!("/CN=shardlog test {ca}"));
            openssl(
                dir,
                &[
                    "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", &key, "-out", &pem, "-days", "2",
                    "-subj", &subj,
                ],
            );
        }
        let sign = |name: &str, ca: &str, subj: &str, ext: &str, days: &str| {
            let (key, csr, pem) = (format!("{name}.key"), format!("{name}.csr"), format!("{name}.pem"));
            openssl(dir, &["req", "-newkey", "rsa:2048", "-nodes", "-keyout", &key, "-out", &csr, "-subj", subj]);
            let (ca_pem, ca_key) = (format!("{ca}.pem"), format!("{ca}.key"));
            openssl(
                dir,
                &[
                    "x509",
                    "-req",
                    "-in",
                    &csr,
                    "-CA",
                    &ca_pem,
                    "-CAkey",
                    &ca_key,
                    "-CAcreateserial",
                    "-out",
                    &pem,
                    "-days",
                    days,
                    "-extfile",
                    ext,
                ],
            );
        };
        sign("server", "ca", "/CN=localhost", "server.ext", "2");
        sign("client", "ca", CLIENT_SUBJECT, "client.ext", "2");
        // -days -1: valid until yesterday.
        sign("expired", "ca", "/CN=localhost", "server.ext", "-1");
        sign("other-server", "other-ca", "/CN=localhost", "server.ext", "2");
        Self { dir: dir.to_path_buf() }
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    pub fn text(&self, name: &str) -> String {
        self.path(name).to_str().unwrap().to_string()
    }

    /// A rustls client configuration trusting `ca` (e.g. "ca.pem").
    pub fn client(&self, ca: &str, with_cert: bool) -> Arc<rustls::ClientConfig> {
        let (cert, key) = (self.path("client.pem"), self.path("client.key"));
        let identity = with_cert.then_some((cert.as_path(), key.as_path()));
        shardlog::client::tls::client_config(&self.path(ca), identity).unwrap()
    }
}

/// A broker whose SSL listener (named SECURE) serves `cert`/`key` from the
/// PKI directory, with `client_auth`.
pub struct SslBroker {
    pub broker: Broker,
    pub ssl_port: u16,
}

impl SslBroker {
    pub fn start(pki: &Pki, data: &Path, cert: &str, client_auth: &str) -> Self {
        let ssl_port = free_port();
        let toml = format!(
            "[[listeners]]\nname = \"SECURE\"\naddress = \"127.0.0.1:{ssl_port}\"\nprotocol = \"SSL\"\n\n\
             [tls]\ncert_file = {:?}\nkey_file = {:?}\nca_file = {:?}\nclient_auth = {client_auth:?}\n",
            pki.text(&format!("{cert}.pem")),
            pki.text(&format!("{cert}.key")),
            pki.text("ca.pem"),
        );
        let broker = Broker::start_with_config(data, 1, &toml, &[("SHARDLOG_LOG", "debug")]);
        Self { broker, ssl_port }
    }

    pub fn ssl_bootstrap(&self) -> String {
        format!("127.0.0.1:{}", self.ssl_port)
    }
}
