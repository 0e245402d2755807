//! SASL for our own client's connections (`bench --sasl`): PLAIN or SCRAM
//! over SaslHandshake v1 and SaslAuthenticate v2, run on each socket right
//! after it connects. The login is set once per process
//! ([`use_for_every_connection`]) so every connection `client` opens —
//! metadata, topic creation, each load core's produce and fetch sockets —
//! authenticates without each caller passing it along.

use std::{net::TcpStream, sync::OnceLock};

use bytes::Bytes;
use kafka_protocol::{
    messages::{
        ApiKey, SaslAuthenticateRequest, SaslAuthenticateResponse, SaslHandshakeRequest, SaslHandshakeResponse,
    },
    protocol::StrBytes,
};

use super::{read_response, write_request, ClientError};
use crate::security::{sasl::SaslMechanism, scram::ScramClient};

/// Who our connections authenticate as.
#[derive(Debug, Clone)]
pub struct SaslLogin {
    pub mechanism: SaslMechanism,
    pub user: String,
    pub password: String,
}

static LOGIN: OnceLock<SaslLogin> = OnceLock::new();

/// Makes every connection this process opens authenticate as `login`.
/// Set once; a second call is refused.
pub fn use_for_every_connection(login: SaslLogin) -> Result<(), String> {
    LOGIN.set(login).map_err(|_| "the SASL login is already set for this process".to_string())
}

/// The process's login, when set (for librdkafka's config in `bench`).
pub fn login() -> Option<&'static SaslLogin> {
    LOGIN.get()
}

/// Authenticates a fresh connection to `addr` when a login is set.
pub(super) fn authenticate_if_set(stream: &mut TcpStream, addr: &str) -> Result<(), ClientError> {
    match LOGIN.get() {
        Some(login) => authenticate(stream, addr, login),
        None => Ok(()),
    }
}

/// Runs the whole exchange; `ClientError::Auth` names the broker's refusal.
pub fn authenticate(stream: &mut TcpStream, addr: &str, login: &SaslLogin) -> Result<(), ClientError> {
    let refused = |code: i16, message: Option<StrBytes>| ClientError::Auth {
        addr: addr.to_string(),
        code,
        message: message.map(|m| m.to_string()).unwrap_or_default(),
    };
    let mut handshake = SaslHandshakeRequest::default();
    handshake.mechanism = StrBytes::from_static_str(login.mechanism.name());
    write_request(stream, ApiKey::SaslHandshake, 1, 1, Some(CLIENT_ID), &handshake)?;
    let answer: SaslHandshakeResponse = read_response(stream, ApiKey::SaslHandshake, 1)?.body;
    if answer.error_code != 0 {
        return Err(refused(answer.error_code, Some(StrBytes::from_static_str("SaslHandshake refused the mechanism"))));
    }
    let mut step = |correlation: i32, token: Vec<u8>| -> Result<Bytes, ClientError> {
        let mut req = SaslAuthenticateRequest::default();
        req.auth_bytes = Bytes::from(token);
        write_request(stream, ApiKey::SaslAuthenticate, 2, correlation, Some(CLIENT_ID), &req)?;
        let answer: SaslAuthenticateResponse = read_response(stream, ApiKey::SaslAuthenticate, 2)?.body;
        if answer.error_code != 0 {
            return Err(refused(answer.error_code, answer.error_message));
        }
        Ok(answer.auth_bytes)
    };
    match login.mechanism {
        SaslMechanism::Plain => {
            step(2, format!("\0{}\0{}", login.user, login.password).into_bytes())?;
        }
        SaslMechanism::Scram(m) => {
            let nonce = crate::security::credentials::random_bytes(18)
                .map(|b| b.iter().map(|x| format!("{x:02x}")).collect::<String>())
                .unwrap_or_else(|_| format!("{:?}", std::time::Instant::now()).replace([',', ' '], ""));
            let mut client = ScramClient::new(m, &login.user, &login.password, &nonce);
            let server_first = step(2, client.first())?;
            let last = client.respond(&server_first).map_err(|e| refused(0, Some(StrBytes::from_string(e.0))))?;
            let server_final = step(3, last)?;
            client.verify(&server_final).map_err(|e| refused(0, Some(StrBytes::from_string(e.0))))?;
        }
    }
    Ok(())
}

const CLIENT_ID: &str = "shardlog-client";
