//! One connection's SASL authentication, as a state machine: SaslHandshake
//! picks the mechanism, then SaslAuthenticate tokens (or, after a v0
//! handshake, raw size-prefixed tokens) run it. Pure: the caller decodes
//! and encodes the Kafka messages (`server::authenticate`), hands in the
//! shard's credentials and a fresh nonce, and closes the connection when an
//! answer says so.
//!
//! Every refusal closes the connection after its answer, as Kafka does:
//! SASL out of order gets ILLEGAL_SASL_STATE, a mechanism not enabled
//! UNSUPPORTED_SASL_MECHANISM, bad credentials SASL_AUTHENTICATION_FAILED.

use super::{
    credentials::Credentials,
    scram::{ClientFirst, Mechanism, ScramCredential, ServerFirst},
};
use crate::protocol::errors::{self, ErrorCode};

/// A SASL mechanism the broker speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SaslMechanism {
    Plain,
    Scram(Mechanism),
}

impl SaslMechanism {
    pub const ALL: [SaslMechanism; 3] = [Self::Plain, Self::Scram(Mechanism::Sha256), Self::Scram(Mechanism::Sha512)];

    pub fn name(self) -> &'static str {
        match self {
            Self::Plain => "PLAIN",
            Self::Scram(m) => m.name(),
        }
    }

    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|m| m.name().eq_ignore_ascii_case(name))
    }
}

/// Longest PLAIN token accepted (authzid, user, password).
const PLAIN_TOKEN_BYTES_MAX: usize = 4096;

#[derive(Debug)]
enum State {
    /// Nothing yet: only SaslHandshake may come.
    Start,
    /// Handshake done; the mechanism's first token is due. `raw`: the
    /// handshake was v0, so tokens come without Kafka headers.
    Chosen {
        mechanism: SaslMechanism,
        raw: bool,
    },
    /// SCRAM: server-first sent, client-final due.
    ScramFinal {
        server: Box<ServerFirst>,
        raw: bool,
    },
    Authenticated,
    /// Refused: the connection is closing.
    Failed,
}

/// A SaslHandshake's answer.
#[derive(Debug, PartialEq, Eq)]
pub struct HandshakeAnswer {
    pub error: ErrorCode,
    /// The enabled mechanisms, always listed (the client may try another).
    pub mechanisms: Vec<&'static str>,
    /// Close the connection once the answer is written.
    pub close: bool,
}

/// A SaslAuthenticate's (or raw token's) answer.
#[derive(Debug, PartialEq, Eq)]
pub struct AuthAnswer {
    pub error: ErrorCode,
    pub message: Option<String>,
    pub token: Vec<u8>,
    pub close: bool,
    /// Set once the exchange succeeded: the user it proved.
    pub user: Option<String>,
}

impl AuthAnswer {
    fn refuse(error: ErrorCode, message: String) -> Self {
        Self { error, message: Some(message), token: Vec::new(), close: true, user: None }
    }

    fn more(token: Vec<u8>) -> Self {
        Self { error: errors::NONE, message: None, token, close: false, user: None }
    }
}

/// One connection's SASL state.
#[derive(Debug)]
pub struct SaslExchange {
    state: State,
    /// Set by the handshake, for metrics and logs.
    mechanism: Option<SaslMechanism>,
}

impl Default for SaslExchange {
    fn default() -> Self {
        Self::new()
    }
}

impl SaslExchange {
    pub fn new() -> Self {
        Self { state: State::Start, mechanism: None }
    }

    pub fn is_authenticated(&self) -> bool {
        matches!(self.state, State::Authenticated)
    }

    /// Whether the next frame is a raw SASL token (after a v0 handshake).
    pub fn expects_raw_token(&self) -> bool {
        matches!(self.state, State::Chosen { raw: true, .. } | State::ScramFinal { raw: true, .. })
    }

    /// The mechanism the handshake chose, if any.
    pub fn mechanism(&self) -> Option<SaslMechanism> {
        self.mechanism
    }

    pub fn handshake(&mut self, requested: &str, version: i16, enabled: &[SaslMechanism]) -> HandshakeAnswer {
        let mechanisms = enabled.iter().map(|m| m.name()).collect();
        if !matches!(self.state, State::Start) {
            self.state = State::Failed;
            return HandshakeAnswer { error: errors::ILLEGAL_SASL_STATE, mechanisms, close: true };
        }
        match enabled.iter().find(|m| m.name() == requested) {
            Some(&mechanism) => {
                self.mechanism = Some(mechanism);
                self.state = State::Chosen { mechanism, raw: version == 0 };
                HandshakeAnswer { error: errors::NONE, mechanisms, close: false }
            }
            None => {
                self.state = State::Failed;
                HandshakeAnswer { error: errors::UNSUPPORTED_SASL_MECHANISM, mechanisms, close: true }
            }
        }
    }

    /// Runs one token of the chosen mechanism. `nonce` makes the server's
    /// SCRAM nonce (printable, no commas), called only when one is needed.
    pub fn authenticate(
        &mut self,
        token: &[u8],
        credentials: &Credentials,
        nonce: impl FnOnce() -> String,
    ) -> AuthAnswer {
        let failed = |m: SaslMechanism| {
            AuthAnswer::refuse(
                errors::SASL_AUTHENTICATION_FAILED,
                format!("Authentication failed: invalid credentials with SASL mechanism {}", m.name()),
            )
        };
        let answer = match std::mem::replace(&mut self.state, State::Failed) {
            State::Start => AuthAnswer::refuse(
                errors::ILLEGAL_SASL_STATE,
                "SaslAuthenticate before SaslHandshake: the mechanism is not chosen".into(),
            ),
            State::Authenticated => AuthAnswer::refuse(
                errors::ILLEGAL_SASL_STATE,
                "SaslAuthenticate after authentication (re-authentication is not supported)".into(),
            ),
            State::Failed => AuthAnswer::refuse(errors::ILLEGAL_SASL_STATE, "SASL exchange already failed".into()),
            State::Chosen { mechanism: SaslMechanism::Plain, .. } => {
                plain_answer(parse_plain(token, credentials).map(|c| (c.verify(), c.user)))
            }
            State::Chosen { mechanism: SaslMechanism::Scram(m), raw } => match ClientFirst::parse(token) {
                Err(e) => AuthAnswer::refuse(errors::SASL_AUTHENTICATION_FAILED, e.0),
                Ok(first) => match credentials.get(&first.user, m) {
                    // An unknown user is answered as a wrong password, so
                    // the answer does not tell which users exist.
                    None => failed(SaslMechanism::Scram(m)),
                    Some(c) => {
                        let server = ServerFirst::new(m, first, c.clone(), &nonce());
                        let answer = AuthAnswer::more(server.message().to_vec());
                        self.state = State::ScramFinal { server: Box::new(server), raw };
                        return answer;
                    }
                },
            },
            State::ScramFinal { server, .. } => match server.finish(token) {
                Ok(last) => AuthAnswer { user: Some(server.user().to_string()), ..AuthAnswer::more(last) },
                Err(e) => AuthAnswer::refuse(errors::SASL_AUTHENTICATION_FAILED, e.0),
            },
        };
        if answer.user.is_some() {
            self.state = State::Authenticated;
        }
        answer
    }
}

impl SaslExchange {
    /// When PLAIN's token is due: the token parsed and paired with the
    /// user's credential, so the caller can run the check's PBKDF2 off the
    /// shard ([`PlainClaim::verify`]) and hand the verdict to
    /// [`Self::plain_verdict`]. `None` when the next token is not PLAIN's.
    pub fn plain_claim(&self, token: &[u8], credentials: &Credentials) -> Option<Result<PlainClaim, String>> {
        matches!(self.state, State::Chosen { mechanism: SaslMechanism::Plain, .. })
            .then(|| parse_plain(token, credentials))
    }

    /// Ends a PLAIN exchange with the caller's verdict on its claim:
    /// `Ok((password matched, user))`, or `Err(why the token is malformed)`.
    pub fn plain_verdict(&mut self, verdict: Result<(bool, String), String>) -> AuthAnswer {
        let answer = plain_answer(verdict);
        self.state = if answer.user.is_some() { State::Authenticated } else { State::Failed };
        answer
    }
}

fn plain_answer(verdict: Result<(bool, String), String>) -> AuthAnswer {
    match verdict {
        Ok((true, user)) => AuthAnswer { user: Some(user), ..AuthAnswer::more(Vec::new()) },
        Ok((false, _)) => AuthAnswer::refuse(
            errors::SASL_AUTHENTICATION_FAILED,
            "Authentication failed: invalid credentials with SASL mechanism PLAIN".into(),
        ),
        Err(malformed) => AuthAnswer::refuse(errors::SASL_AUTHENTICATION_FAILED, malformed),
    }
}

/// What a PLAIN token claims, with the user's stored credential (`None`:
/// no such user, which verifies as a wrong password).
pub struct PlainClaim {
    pub user: String,
    password: Vec<u8>,
    stored: Option<(Mechanism, ScramCredential)>,
}

impl PlainClaim {
    /// Whether the password is the user's: one PBKDF2 run (the stored
    /// credential's iterations), so callers run it off the shard.
    pub fn verify(&self) -> bool {
        self.stored.as_ref().is_some_and(|(m, c)| c.matches_password(*m, &self.password))
    }
}

/// PLAIN (RFC 4616): `authzid NUL user NUL password`, to be checked against
/// the user's SCRAM credential of either mechanism (one suffices: each was
/// made from the same password). `Err`: malformed.
fn parse_plain(token: &[u8], credentials: &Credentials) -> Result<PlainClaim, String> {
    if token.len() > PLAIN_TOKEN_BYTES_MAX {
        return Err(format!("PLAIN token of {} bytes is too long", token.len()));
    }
    let mut parts = token.split(|&b| b == 0);
    let (Some(authzid), Some(user), Some(password), None) = (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err("PLAIN token is not authzid NUL user NUL password".into());
    };
    let user = std::str::from_utf8(user).map_err(|_| "PLAIN user name is not UTF-8".to_string())?;
    if user.is_empty() || password.is_empty() {
        return Err("PLAIN token has an empty user name or password".into());
    }
    if !authzid.is_empty() && authzid != user.as_bytes() {
        return Err("PLAIN authorization id differs from the user name".into());
    }
    let stored = credentials.of_user(user).and_then(|s| s.iter().next()).map(|(m, c)| (*m, c.clone()));
    Ok(PlainClaim { user: user.to_string(), password: password.to_vec(), stored })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::security::scram::ScramClient;

    fn store() -> Credentials {
        let mut c = Credentials::default();
        let cred = ScramCredential::from_password(Mechanism::Sha512, b"alice-secret", b"salt", 4096);
        c.upsert("alice", Mechanism::Sha512, cred).unwrap();
        c
    }

    #[test]
    fn scram_succeeds_then_any_further_sasl_is_illegal() {
        let creds = store();
        let mut x = SaslExchange::new();
        assert_eq!(x.handshake("SCRAM-SHA-512", 1, &SaslMechanism::ALL).error, errors::NONE);
        let mut client = ScramClient::new(Mechanism::Sha512, "alice", "alice-secret", "cnonce");
        let a = x.authenticate(&client.first(), &creds, || "snonce".into());
        assert_eq!((a.error, a.close), (errors::NONE, false));
        let b = x.authenticate(&client.respond(&a.token).unwrap(), &creds, || unreachable!());
        assert_eq!(b.user.as_deref(), Some("alice"));
        client.verify(&b.token).unwrap();
        assert!(x.is_authenticated());
        assert_eq!(x.handshake("PLAIN", 1, &SaslMechanism::ALL).error, errors::ILLEGAL_SASL_STATE);
    }

    #[test]
    fn plain_checks_the_scram_credential() {
        let creds = store();
        let mut x = SaslExchange::new();
        x.handshake("PLAIN", 1, &SaslMechanism::ALL);
        assert_eq!(x.authenticate(b"\0alice\0alice-secret", &creds, String::new).user.as_deref(), Some("alice"));
        let mut y = SaslExchange::new();
        y.handshake("PLAIN", 0, &SaslMechanism::ALL);
        assert!(y.expects_raw_token());
        let wrong = y.authenticate(b"\0alice\0nope", &creds, String::new);
        assert_eq!((wrong.error, wrong.close), (errors::SASL_AUTHENTICATION_FAILED, true));
        let mut z = SaslExchange::new();
        z.handshake("PLAIN", 1, &SaslMechanism::ALL);
        assert!(z.authenticate(b"garbage", &creds, String::new).message.unwrap().contains("NUL"));
    }

    #[test]
    fn plain_checked_off_the_exchange_reaches_the_same_verdicts() {
        let creds = store();
        let mut x = SaslExchange::new();
        assert!(x.plain_claim(b"\0alice\0alice-secret", &creds).is_none(), "no handshake yet");
        x.handshake("PLAIN", 1, &SaslMechanism::ALL);
        let claim = x.plain_claim(b"\0alice\0alice-secret", &creds).unwrap().unwrap();
        assert_eq!(x.plain_verdict(Ok((claim.verify(), claim.user))).user.as_deref(), Some("alice"));
        assert!(x.is_authenticated());
        let mut y = SaslExchange::new();
        y.handshake("PLAIN", 1, &SaslMechanism::ALL);
        let nobody = y.plain_claim(b"\0bob\0alice-secret", &creds).unwrap().unwrap();
        assert!(!nobody.verify(), "an unknown user verifies as a wrong password");
        let refused = y.plain_verdict(Ok((nobody.verify(), nobody.user)));
        assert_eq!((refused.error, refused.close), (errors::SASL_AUTHENTICATION_FAILED, true));
        assert!(y.plain_claim(b"\0alice\0x", &creds).is_none(), "the exchange is over");
    }

    #[test]
    fn out_of_order_and_unknown_mechanisms_are_refused() {
        let creds = store();
        let mut x = SaslExchange::new();
        let a = x.authenticate(b"n,,n=alice,r=x", &creds, String::new);
        assert_eq!((a.error, a.close), (errors::ILLEGAL_SASL_STATE, true));
        let mut y = SaslExchange::new();
        let h = y.handshake("GSSAPI", 1, &[SaslMechanism::Plain]);
        assert_eq!((h.error, h.close, h.mechanisms), (errors::UNSUPPORTED_SASL_MECHANISM, true, vec!["PLAIN"]));
        let mut z = SaslExchange::new();
        z.handshake("SCRAM-SHA-512", 1, &SaslMechanism::ALL);
        assert_eq!(z.handshake("SCRAM-SHA-512", 1, &SaslMechanism::ALL).error, errors::ILLEGAL_SASL_STATE);
        let mut w = SaslExchange::new();
        w.handshake("SCRAM-SHA-256", 1, &SaslMechanism::ALL);
        let unknown = w.authenticate(b"n,,n=alice,r=x", &creds, String::new);
        assert_eq!(unknown.error, errors::SASL_AUTHENTICATION_FAILED, "alice has no SHA-256 credential");
    }
}
