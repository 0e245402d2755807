//! SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802, RFC 7677): credentials and
//! both halves of the exchange. Pure: no I/O, no clock; nonces come from
//! the caller.
//!
//! A credential is what the broker keeps of a password: salt, iterations,
//! `StoredKey = H(HMAC(SaltedPassword, "Client Key"))` and
//! `ServerKey = HMAC(SaltedPassword, "Server Key")`. PBKDF2 (`Hi`) runs
//! only when a credential is made; checking a client's proof is two HMACs
//! and a hash, so failed logins cost little.

use base64::{engine::general_purpose::STANDARD as B64, Engine};
use hmac::{Hmac, Mac};
use sha2::{Digest, Sha256, Sha512};

/// Kafka's bounds on SCRAM iterations (`ScramMechanism.minIterations`,
/// `ScramFormatter`'s 16384 cap for AlterUserScramCredentials).
pub const ITERATIONS_MIN: u32 = 4096;
pub const ITERATIONS_MAX: u32 = 16384;
/// Longest client message accepted in an exchange: names and nonces are
/// short; this only stops a client from making the broker hold megabytes.
pub const MESSAGE_BYTES_MAX: usize = 4096;

/// A SCRAM mechanism, numbered as Kafka's `ScramMechanism` on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Mechanism {
    Sha256,
    Sha512,
}

impl Mechanism {
    pub const ALL: [Mechanism; 2] = [Mechanism::Sha256, Mechanism::Sha512];

    pub fn name(self) -> &'static str {
        match self {
            Self::Sha256 => "SCRAM-SHA-256",
            Self::Sha512 => "SCRAM-SHA-512",
        }
    }

    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|m| m.name().eq_ignore_ascii_case(name))
    }

    /// Kafka's wire number (0 is UNKNOWN).
    pub fn code(self) -> i8 {
        match self {
            Self::Sha256 => 1,
            Self::Sha512 => 2,
        }
    }

    pub fn from_code(code: i8) -> Option<Self> {
        Self::ALL.into_iter().find(|m| m.code() == code)
    }

    /// Bytes of the hash (and so of keys, proofs and signatures).
    pub fn hash_bytes(self) -> usize {
        match self {
            Self::Sha256 => 32,
            Self::Sha512 => 64,
        }
    }

    fn hash(self, data: &[u8]) -> Vec<u8> {
        match self {
            Self::Sha256 => Sha256::digest(data).to_vec(),
            Self::Sha512 => Sha512::digest(data).to_vec(),
        }
    }

    fn hmac(self, key: &[u8], data: &[u8]) -> Vec<u8> {
        // HMAC takes keys of any length: `new_from_slice` cannot fail.
        match self {
            Self::Sha256 => {
                let mut m = Hmac::<Sha256>::new_from_slice(key).expect("HMAC accepts any key length");
                m.update(data);
                m.finalize().into_bytes().to_vec()
            }
            Self::Sha512 => {
                let mut m = Hmac::<Sha512>::new_from_slice(key).expect("HMAC accepts any key length");
                m.update(data);
                m.finalize().into_bytes().to_vec()
            }
        }
    }

    /// `Hi(password, salt, i)`: PBKDF2 with this mechanism's HMAC.
    pub fn salted_password(self, password: &[u8], salt: &[u8], iterations: u32) -> Vec<u8> {
        let mut out = vec![0u8; self.hash_bytes()];
        match self {
            Self::Sha256 => pbkdf2::pbkdf2_hmac::<Sha256>(password, salt, iterations, &mut out),
            Self::Sha512 => pbkdf2::pbkdf2_hmac::<Sha512>(password, salt, iterations, &mut out),
        }
        out
    }
}

/// What the broker stores of one user's password for one mechanism.
#[derive(Clone, PartialEq, Eq)]
pub struct ScramCredential {
    pub salt: Vec<u8>,
    pub iterations: u32,
    pub stored_key: Vec<u8>,
    pub server_key: Vec<u8>,
}

impl std::fmt::Debug for ScramCredential {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ScramCredential {{ iterations: {}, .. }}", self.iterations)
    }
}

impl ScramCredential {
    /// From a password: runs PBKDF2 (`iterations` rounds).
    pub fn from_password(mechanism: Mechanism, password: &[u8], salt: &[u8], iterations: u32) -> Self {
        let salted = mechanism.salted_password(password, salt, iterations);
        Self::from_salted_password(mechanism, &salted, salt, iterations)
    }

    /// From `SaltedPassword`, as AlterUserScramCredentials carries it.
    pub fn from_salted_password(mechanism: Mechanism, salted: &[u8], salt: &[u8], iterations: u32) -> Self {
        let client_key = mechanism.hmac(salted, b"Client Key");
        Self {
            salt: salt.to_vec(),
            iterations,
            stored_key: mechanism.hash(&client_key),
            server_key: mechanism.hmac(salted, b"Server Key"),
        }
    }

    /// Whether `password` is the one this credential was made from (PLAIN):
    /// one PBKDF2 run.
    pub fn matches_password(&self, mechanism: Mechanism, password: &[u8]) -> bool {
        let derived = Self::from_password(mechanism, password, &self.salt, self.iterations);
        equal_in_constant_time(&derived.stored_key, &self.stored_key)
    }
}

/// Why an exchange failed; the text goes back to the client in
/// SaslAuthenticate's error message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScramError(pub String);

impl std::fmt::Display for ScramError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

fn fail<T>(text: impl Into<String>) -> Result<T, ScramError> {
    Err(ScramError(text.into()))
}

/// The client's first message, parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientFirst {
    pub user: String,
    pub nonce: String,
    /// `n,,` (or `y,,`): echoed, base64, in the client's final message.
    gs2_header: String,
    bare: String,
}

impl ClientFirst {
    /// Reads `gs2-header client-first-message-bare`. Channel binding is
    /// refused (`p=`); an authorization id must name the user itself.
    pub fn parse(message: &[u8]) -> Result<Self, ScramError> {
        if message.len() > MESSAGE_BYTES_MAX {
            return fail(format!("SCRAM client-first message of {} bytes is too long", message.len()));
        }
        let Ok(text) = std::str::from_utf8(message) else { return fail("SCRAM client-first message is not UTF-8") };
        let mut parts = text.splitn(3, ',');
        let (Some(cbind), Some(authzid), Some(bare)) = (parts.next(), parts.next(), parts.next()) else {
            return fail("SCRAM client-first message has no GS2 header");
        };
        if cbind != "n" && cbind != "y" {
            return fail(format!("SCRAM channel binding {cbind:?} is not supported"));
        }
        let mut user = None;
        let mut nonce = None;
        for attr in bare.split(',') {
            match attr.split_once('=') {
                Some(("n", v)) if user.is_none() => user = Some(decode_saslname(v)?),
                Some(("r", v)) if nonce.is_none() => nonce = Some(v.to_string()),
                Some(("m", _)) => return fail("SCRAM mandatory extensions are not supported"),
                _ => {} // extensions (Kafka's tokenauth): ignored
            }
        }
        let (Some(user), Some(nonce)) = (user, nonce) else {
            return fail("SCRAM client-first message lacks the user name or nonce");
        };
        if user.is_empty() || nonce.is_empty() || !nonce.bytes().all(|b| b.is_ascii_graphic() && b != b',') {
            return fail("SCRAM client-first message has an empty user name or a bad nonce");
        }
        if let Some(id) = authzid.strip_prefix("a=") {
            if decode_saslname(id)? != user {
                return fail(format!("SCRAM authorization id {id:?} differs from user {user:?}"));
            }
        } else if !authzid.is_empty() {
            return fail("SCRAM GS2 header has a malformed authorization id");
        }
        Ok(Self { user, nonce, gs2_header: text[..text.len() - bare.len()].to_string(), bare: bare.to_string() })
    }
}

/// `=2C` is `,` and `=3D` is `=`; any other `=` is malformed.
fn decode_saslname(v: &str) -> Result<String, ScramError> {
    let mut out = String::with_capacity(v.len());
    let mut rest = v;
    while let Some(at) = rest.find('=') {
        out.push_str(&rest[..at]);
        match rest.get(at..at + 3) {
            Some("=2C") => out.push(','),
            Some("=3D") => out.push('='),
            _ => return fail(format!("SCRAM user name {v:?} has a bad escape")),
        }
        rest = &rest[at + 3..];
    }
    out.push_str(rest);
    Ok(out)
}

fn encode_saslname(v: &str) -> String {
    v.replace('=', "=3D").replace(',', "=2C")
}

/// The server between its first message and the client's final one.
#[derive(Debug, Clone)]
pub struct ServerFirst {
    mechanism: Mechanism,
    first: ClientFirst,
    credential: ScramCredential,
    message: String,
}

impl ServerFirst {
    /// Answers the client's first message for a user whose credential was
    /// found; `server_nonce` is printable ASCII without commas.
    pub fn new(mechanism: Mechanism, first: ClientFirst, credential: ScramCredential, server_nonce: &str) -> Self {
        let message =
            format!("r={}{server_nonce},s={},i={}", first.nonce, B64.encode(&credential.salt), credential.iterations);
        Self { mechanism, first, credential, message }
    }

    pub fn user(&self) -> &str {
        &self.first.user
    }

    /// `server-first-message`, to send.
    pub fn message(&self) -> &[u8] {
        self.message.as_bytes()
    }

    /// Checks the client's final message; on success, the server's final
    /// message (`v=` signature) to send.
    pub fn finish(&self, client_final: &[u8]) -> Result<Vec<u8>, ScramError> {
        if client_final.len() > MESSAGE_BYTES_MAX {
            return fail("SCRAM client-final message is too long");
        }
        let Ok(text) = std::str::from_utf8(client_final) else {
            return fail("SCRAM client-final message is not UTF-8");
        };
        let Some((without_proof, proof)) = text.rsplit_once(",p=") else {
            return fail("SCRAM client-final message has no proof");
        };
        let mut binding = None;
        let mut nonce = None;
        for attr in without_proof.split(',') {
            match attr.split_once('=') {
                Some(("c", v)) if binding.is_none() => binding = Some(v),
                Some(("r", v)) if nonce.is_none() => nonce = Some(v),
                _ => {}
            }
        }
        if binding != Some(B64.encode(&self.first.gs2_header).as_str()) {
            return fail("SCRAM channel binding does not match the client's first message");
        }
        let full_nonce = self.message[2..].split(',').next().unwrap_or_default();
        if nonce != Some(full_nonce) {
            return fail("SCRAM nonce does not match");
        }
        let proof = B64.decode(proof).map_err(|_| ScramError("SCRAM proof is not base64".into()))?;
        let m = self.mechanism;
        if proof.len() != m.hash_bytes() {
            return fail("SCRAM proof has the wrong length");
        }
        let auth_message = format!("{},{},{without_proof}", self.first.bare, self.message);
        let signature = m.hmac(&self.credential.stored_key, auth_message.as_bytes());
        let client_key: Vec<u8> = proof.iter().zip(&signature).map(|(p, s)| p ^ s).collect();
        if !equal_in_constant_time(&m.hash(&client_key), &self.credential.stored_key) {
            return fail(format!(
                "Authentication failed during authentication due to invalid credentials with SASL mechanism {}",
                m.name()
            ));
        }
        let server_signature = m.hmac(&self.credential.server_key, auth_message.as_bytes());
        Ok(format!("v={}", B64.encode(server_signature)).into_bytes())
    }
}

/// The client half, for `bench` and the tests.
pub struct ScramClient {
    mechanism: Mechanism,
    password: Vec<u8>,
    bare: String,
    nonce: String,
    server_signature: Vec<u8>,
}

impl ScramClient {
    pub fn new(mechanism: Mechanism, user: &str, password: &str, nonce: &str) -> Self {
        let bare = format!("n={},r={nonce}", encode_saslname(user));
        Self {
            mechanism,
            password: password.as_bytes().to_vec(),
            bare,
            nonce: nonce.into(),
            server_signature: Vec::new(),
        }
    }

    pub fn first(&self) -> Vec<u8> {
        format!("n,,{}", self.bare).into_bytes()
    }

    /// The final message answering the server's first.
    pub fn respond(&mut self, server_first: &[u8]) -> Result<Vec<u8>, ScramError> {
        let text = std::str::from_utf8(server_first).map_err(|_| ScramError("server-first is not UTF-8".into()))?;
        let (mut nonce, mut salt, mut iterations) = (None, None, None);
        for attr in text.split(',') {
            match attr.split_once('=') {
                Some(("r", v)) => nonce = Some(v),
                Some(("s", v)) => salt = B64.decode(v).ok(),
                Some(("i", v)) => iterations = v.parse::<u32>().ok(),
                _ => {}
            }
        }
        let (Some(nonce), Some(salt), Some(iterations)) = (nonce, salt, iterations) else {
            return fail(format!("malformed SCRAM server-first message {text:?}"));
        };
        if !nonce.starts_with(&self.nonce) {
            return fail("SCRAM server nonce does not extend the client's");
        }
        let m = self.mechanism;
        let salted = m.salted_password(&self.password, &salt, iterations);
        let client_key = m.hmac(&salted, b"Client Key");
        let without_proof = format!("c=biws,r={nonce}");
        let auth_message = format!("{},{text},{without_proof}", self.bare);
        let signature = m.hmac(&m.hash(&client_key), auth_message.as_bytes());
        let proof: Vec<u8> = client_key.iter().zip(&signature).map(|(k, s)| k ^ s).collect();
        self.server_signature = m.hmac(&m.hmac(&salted, b"Server Key"), auth_message.as_bytes());
        Ok(format!("{without_proof},p={}", B64.encode(proof)).into_bytes())
    }

    /// Checks the server's final message (`v=`): the server knew the key.
    pub fn verify(&self, server_final: &[u8]) -> Result<(), ScramError> {
        let text = String::from_utf8_lossy(server_final);
        match text.strip_prefix("v=").and_then(|v| B64.decode(v).ok()) {
            Some(sig) if sig == self.server_signature => Ok(()),
            _ => fail(format!("SCRAM server-final message {text:?} does not prove the server knows the password")),
        }
    }
}

/// Compares without stopping at the first difference, so timing does not
/// tell how much of a key matched.
pub fn equal_in_constant_time(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    /// RFC 7677 section 3: user "user", password "pencil".
    const CLIENT_FIRST: &str = "n,,n=user,r=rOprNGfwEbeRWgbNEkqO";
    const SERVER_NONCE: &str = "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0";
    const SERVER_FIRST: &str = "r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096";
    const CLIENT_FINAL: &str =
        "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=";
    const SERVER_FINAL: &str = "v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=";

    fn rfc_credential() -> ScramCredential {
        let salt = B64.decode("W22ZaJ0SNY7soEsUEjb6gQ==").unwrap();
        ScramCredential::from_password(Mechanism::Sha256, b"pencil", &salt, 4096)
    }

    #[test]
    fn server_side_matches_rfc_7677() {
        let first = ClientFirst::parse(CLIENT_FIRST.as_bytes()).unwrap();
        assert_eq!(first.user, "user");
        let server = ServerFirst::new(Mechanism::Sha256, first, rfc_credential(), SERVER_NONCE);
        assert_eq!(std::str::from_utf8(server.message()).unwrap(), SERVER_FIRST);
        let last = server.finish(CLIENT_FINAL.as_bytes()).unwrap();
        assert_eq!(String::from_utf8(last).unwrap(), SERVER_FINAL);
    }

    #[test]
    fn client_side_matches_rfc_7677() {
        let mut client = ScramClient::new(Mechanism::Sha256, "user", "pencil", "rOprNGfwEbeRWgbNEkqO");
        assert_eq!(client.first(), CLIENT_FIRST.as_bytes());
        assert_eq!(client.respond(SERVER_FIRST.as_bytes()).unwrap(), CLIENT_FINAL.as_bytes());
        client.verify(SERVER_FINAL.as_bytes()).unwrap();
        assert!(client.verify(b"v=AAAA").is_err());
    }

    #[test]
    fn a_wrong_password_or_tampered_message_is_refused() {
        let salt = B64.decode("W22ZaJ0SNY7soEsUEjb6gQ==").unwrap();
        let wrong = ScramCredential::from_password(Mechanism::Sha256, b"pencil2", &salt, 4096);
        let server = ServerFirst::new(
            Mechanism::Sha256,
            ClientFirst::parse(CLIENT_FIRST.as_bytes()).unwrap(),
            wrong,
            SERVER_NONCE,
        );
        assert!(server.finish(CLIENT_FINAL.as_bytes()).unwrap_err().0.contains("invalid credentials"));
        let server = ServerFirst::new(
            Mechanism::Sha256,
            ClientFirst::parse(CLIENT_FIRST.as_bytes()).unwrap(),
            rfc_credential(),
            SERVER_NONCE,
        );
        let other_nonce = CLIENT_FINAL.replace("k0,p", "k1,p");
        assert!(server.finish(other_nonce.as_bytes()).unwrap_err().0.contains("nonce"));
        assert!(server.finish(b"c=biws").is_err());
        assert!(server.finish(&[0xff, 0xfe]).is_err());
    }

    #[test]
    fn sha512_round_trip_and_plain_check() {
        let cred = ScramCredential::from_password(Mechanism::Sha512, b"s3cret", b"salty", 4096);
        assert!(cred.matches_password(Mechanism::Sha512, b"s3cret"));
        assert!(!cred.matches_password(Mechanism::Sha512, b"s3cres"));
        let mut client = ScramClient::new(Mechanism::Sha512, "al,i=ce", "s3cret", "abc");
        let first = ClientFirst::parse(&client.first()).unwrap();
        assert_eq!(first.user, "al,i=ce");
        let server = ServerFirst::new(Mechanism::Sha512, first, cred, "xyz");
        let last = server.finish(&client.respond(server.message()).unwrap()).unwrap();
        client.verify(&last).unwrap();
    }

    #[test]
    fn malformed_client_first_messages_are_refused() {
        for bad in [
            "",
            "n,,",
            "p=tls-unique,,n=u,r=x",
            "n,,n=u",
            "n,,r=x",
            "n,a=other,n=u,r=x",
            "n,,n=a=b,r=x",
            "n,,m=x,n=u,r=x",
        ] {
            assert!(ClientFirst::parse(bad.as_bytes()).is_err(), "{bad:?}");
        }
        assert!(ClientFirst::parse(b"n,a=u,n=u,r=x").is_ok());
        assert!(ClientFirst::parse(b"n,,n=u,r=x,tokenauth=true").is_ok());
    }
}
