//! The SASL and SCRAM credential APIs in the version matrix, on the
//! matrix's PLAINTEXT listener: SaslHandshake and SaslAuthenticate answer
//! ILLEGAL_SASL_STATE there (as Kafka's KafkaApis does) and leave the
//! connection open; the credential APIs name what does not exist.
//! `tests/sasl.rs` covers them on a SASL listener.

use bytes::Bytes;
use kafka_protocol::messages::*;

use super::{s, Wire, NONE};

const ILLEGAL_SASL_STATE: i16 = 34;
const RESOURCE_NOT_FOUND: i16 = 91;

pub fn sasl_handshake(w: &mut Wire, v: i16) {
    let req = SaslHandshakeRequest::default().with_mechanism(s("SCRAM-SHA-512"));
    let resp: SaslHandshakeResponse = w.call(ApiKey::SaslHandshake, v, &req);
    assert_eq!(resp.error_code, ILLEGAL_SASL_STATE, "no SASL on a PLAINTEXT listener");
    let again: ApiVersionsResponse = w.call(ApiKey::ApiVersions, 3, &ApiVersionsRequest::default());
    assert_eq!(again.error_code, NONE, "the connection stays open");
}

pub fn sasl_authenticate(w: &mut Wire, v: i16) {
    let req = SaslAuthenticateRequest::default().with_auth_bytes(Bytes::from_static(b"\0u\0p"));
    let resp: SaslAuthenticateResponse = w.call(ApiKey::SaslAuthenticate, v, &req);
    assert_eq!(resp.error_code, ILLEGAL_SASL_STATE);
    assert!(resp.error_message.unwrap().contains("does not use SASL"));
}

pub fn describe_user_scram_credentials(w: &mut Wire, v: i16) {
    let all: DescribeUserScramCredentialsResponse =
        w.call(ApiKey::DescribeUserScramCredentials, v, &DescribeUserScramCredentialsRequest::default());
    assert_eq!((all.error_code, all.results.len()), (NONE, 0), "no users on this broker");
    let one = describe_user_scram_credentials_request::UserName::default().with_name(s("nobody"));
    let req = DescribeUserScramCredentialsRequest::default().with_users(Some(vec![one]));
    let resp: DescribeUserScramCredentialsResponse = w.call(ApiKey::DescribeUserScramCredentials, v, &req);
    assert_eq!(resp.results[0].user.as_str(), "nobody");
    assert_eq!(resp.results[0].error_code, RESOURCE_NOT_FOUND);
}

pub fn alter_user_scram_credentials(w: &mut Wire, v: i16) {
    let gone = alter_user_scram_credentials_request::ScramCredentialDeletion::default()
        .with_name(s("nobody"))
        .with_mechanism(2);
    let req = AlterUserScramCredentialsRequest::default().with_deletions(vec![gone]);
    let resp: AlterUserScramCredentialsResponse = w.call(ApiKey::AlterUserScramCredentials, v, &req);
    assert_eq!(resp.results[0].user.as_str(), "nobody");
    assert_eq!(resp.results[0].error_code, RESOURCE_NOT_FOUND);
}
