//! SASL on a connection: the gate every frame passes before it is handled.
//! SaslHandshake and SaslAuthenticate (and raw tokens after a v0
//! handshake) are answered here, in read order, by the connection's
//! [`SaslExchange`]; on a SASL listener, any other request but ApiVersions
//! before authentication closes the connection, as Kafka does.
//!
//! Failures are answered, counted in `/metrics`
//! (`shardlog_sasl_authentications`) and logged at most once a second per
//! shard with how many there were, so a flood of bad logins neither fills
//! the log nor costs more than its HMACs.

use std::{cell::Cell, rc::Rc, time::Instant};

use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::{
    messages::{
        ApiKey, RequestHeader, SaslAuthenticateRequest, SaslAuthenticateResponse, SaslHandshakeRequest,
        SaslHandshakeResponse,
    },
    protocol::{Decodable, StrBytes},
};

use crate::{
    protocol::{claimed_counts, errors},
    security::{sasl::SaslExchange, Principal, Session},
    server::{connection::frame_response, handlers},
    shard::Shard,
};

/// How long a refused connection stays open after its answer (Kafka's
/// `connection.failed.authentication.delay.ms` default).
pub const CLOSE_DELAY: std::time::Duration = std::time::Duration::from_millis(100);

/// Largest frame read from a connection that must authenticate and has
/// not yet (Kafka's `sasl.server.max.receive.size`): an unauthenticated
/// peer cannot make the broker buffer `max_request_bytes`.
pub const UNAUTHENTICATED_FRAME_BYTES_MAX: usize = 512 * 1024;

/// What to do with a frame.
pub enum Gate {
    /// Not SASL's business: handle it as usual.
    Pass,
    /// Answered here (`None`: nothing to write); `close`: then close.
    Answer { response: Option<Bytes>, close: bool },
}

/// Looks at one frame (after its size prefix) before it is handled.
pub async fn gate(shard: &Rc<Shard>, session: &Session, sasl: &mut SaslExchange, frame: &Bytes) -> Gate {
    if sasl.expects_raw_token() {
        return raw_token(shard, session, sasl, frame).await;
    }
    let key = i16::from_be_bytes([frame[0], frame[1]]);
    let version = i16::from_be_bytes([frame[2], frame[3]]);
    let sasl_key = key == ApiKey::SaslHandshake as i16 || key == ApiKey::SaslAuthenticate as i16;
    if sasl_key {
        let Ok(api) = ApiKey::try_from(key) else { return Gate::Pass };
        if !handlers::supported(api, version) {
            return Gate::Pass; // refused by the usual path, naming the version
        }
        return match answer(shard, session, sasl, api, version, frame.clone()).await {
            Ok(gate) => gate,
            Err(reason) => {
                failure_log(shard, &session.peer, &reason);
                Gate::Answer { response: None, close: true }
            }
        };
    }
    if session.protocol.needs_sasl() && !sasl.is_authenticated() && key != ApiKey::ApiVersions as i16 {
        let name = ApiKey::try_from(key).map_or_else(|_| format!("API key {key}"), |k| format!("{k:?}"));
        failure_log(shard, &session.peer, &format!("{name} before SASL authentication on {}", session.listener));
        return Gate::Answer { response: None, close: true };
    }
    Gate::Pass
}

/// SaslHandshake or SaslAuthenticate, decoded and answered.
async fn answer(
    shard: &Rc<Shard>,
    session: &Session,
    sasl: &mut SaslExchange,
    key: ApiKey,
    version: i16,
    mut frame: Bytes,
) -> Result<Gate, String> {
    let header = RequestHeader::decode(&mut frame, key.request_header_version(version))
        .map_err(|e| format!("bad {key:?} header: {e}"))?;
    claimed_counts::check(key, version, &frame).map_err(|e| format!("cannot decode {key:?} v{version}: {e}"))?;
    let response_header = key.response_header_version(version);
    let on_sasl_listener = session.protocol.needs_sasl();
    let encode = |r: Result<Bytes, String>| r.map_err(|e| format!("{key:?} v{version} response: {e}"));
    if key == ApiKey::SaslHandshake {
        let req =
            SaslHandshakeRequest::decode(&mut frame, version).map_err(|e| format!("cannot decode {key:?}: {e}"))?;
        let mut out = if on_sasl_listener {
            sasl.handshake(req.mechanism.as_str(), version, &shard.settings.sasl_mechanisms)
        } else {
            crate::security::sasl::HandshakeAnswer {
                error: errors::ILLEGAL_SASL_STATE,
                mechanisms: vec![],
                close: false,
            }
        };
        if out.error != errors::NONE {
            let reason = format!("SaslHandshake for {:?}: error {}", req.mechanism.as_str(), out.error);
            failure_log(shard, &session.peer, &reason);
        }
        let mut response = SaslHandshakeResponse::default();
        response.error_code = out.error;
        response.mechanisms = std::mem::take(&mut out.mechanisms).into_iter().map(StrBytes::from_static_str).collect();
        let bytes = encode(frame_response(header.correlation_id, version, &response, response_header))?;
        return Ok(Gate::Answer { response: Some(bytes), close: out.close });
    }
    let req =
        SaslAuthenticateRequest::decode(&mut frame, version).map_err(|e| format!("cannot decode {key:?}: {e}"))?;
    let mut response = SaslAuthenticateResponse::default();
    let close = if on_sasl_listener {
        let out = run(shard, session, sasl, &req.auth_bytes).await;
        response.error_code = out.error;
        response.error_message = out.message.map(StrBytes::from_string);
        response.auth_bytes = Bytes::from(out.token);
        out.close
    } else {
        response.error_code = errors::ILLEGAL_SASL_STATE;
        response.error_message = Some(StrBytes::from_static_str("this listener does not use SASL"));
        false
    };
    // No re-authentication (KIP-368): the session has no lifetime.
    response.session_lifetime_ms = 0;
    let bytes = encode(frame_response(header.correlation_id, version, &response, response_header))?;
    Ok(Gate::Answer { response: Some(bytes), close })
}

/// A raw token after a v0 handshake: the answer is the bare token,
/// size-prefixed; a failure closes the connection without an answer, as
/// Kafka does for v0 clients.
async fn raw_token(shard: &Rc<Shard>, session: &Session, sasl: &mut SaslExchange, frame: &Bytes) -> Gate {
    let out = run(shard, session, sasl, frame).await;
    if out.error != errors::NONE {
        return Gate::Answer { response: None, close: true };
    }
    let mut bytes = BytesMut::with_capacity(4 + out.token.len());
    bytes.put_i32(out.token.len() as i32);
    bytes.put_slice(&out.token);
    // Even PLAIN's empty challenge is sent (a zero size), as Kafka does.
    Gate::Answer { response: Some(bytes.freeze()), close: false }
}

/// One token through the exchange, with its metrics, log and principal.
/// PLAIN's check (a PBKDF2 run) goes to the executor's blocking pool, so a
/// flood of PLAIN guesses does not hold up the shard's other connections.
async fn run(
    shard: &Rc<Shard>,
    session: &Session,
    sasl: &mut SaslExchange,
    token: &[u8],
) -> crate::security::sasl::AuthAnswer {
    let credentials = shard.credentials();
    let out = match sasl.plain_claim(token, &credentials) {
        Some(Ok(claim)) => {
            let verdict = glommio::executor().spawn_blocking(move || (claim.verify(), claim.user)).await;
            sasl.plain_verdict(Ok(verdict))
        }
        Some(Err(malformed)) => sasl.plain_verdict(Err(malformed)),
        None => sasl.authenticate(token, &credentials, server_nonce),
    };
    let mechanism = sasl.mechanism().map_or("none", |m| m.name());
    if let Some(user) = &out.user {
        *session.principal.borrow_mut() = Principal::user(user.clone());
        count(shard, mechanism, "success");
        log::debug!("connection from {}: authenticated as User:{user} with {mechanism}", session.peer);
    } else if out.error != errors::NONE {
        count(shard, mechanism, "failure");
        let why = out.message.as_deref().unwrap_or("refused");
        failure_log(shard, &session.peer, &format!("SASL {mechanism} authentication failed: {why}"));
    }
    out
}

fn count(shard: &Shard, mechanism: &'static str, result: &'static str) {
    *shard.metrics.sasl_authentications.borrow_mut().entry((mechanism, result)).or_default() += 1;
}

/// A fresh server nonce: 24 random bytes, base64 (printable, no commas).
/// Should the OS fail us, a nonce from the clock and a counter still
/// differs per exchange, which is what the nonce is for.
fn server_nonce() -> String {
    use base64::Engine;
    match crate::security::credentials::random_bytes(24) {
        Ok(bytes) => base64::engine::general_purpose::STANDARD.encode(bytes),
        Err(e) => {
            log::error!("{e}; using a clock-based SCRAM nonce");
            format!("{:?}", std::time::SystemTime::now()).replace([',', ' '], "")
        }
    }
}

thread_local! {
    /// This shard's last failure log line and the failures since.
    static FAILURES: (Cell<Option<Instant>>, Cell<u64>) = const { (Cell::new(None), Cell::new(0)) };
}

/// Logs an authentication failure at most once a second per shard, with
/// how many happened since the last line.
pub(super) fn failure_log(shard: &Shard, peer: &str, reason: &str) {
    FAILURES.with(|(last, count)| {
        count.set(count.get() + 1);
        if last.get().is_none_or(|t| t.elapsed().as_secs() >= 1) {
            log::warn!(
                "shard {}: closing connection from {peer}: {reason} ({} authentication failure(s) since the last report)",
                shard.id,
                count.get()
            );
            last.set(Some(Instant::now()));
            count.set(0);
        }
    });
}
