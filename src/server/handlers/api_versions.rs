//! ApiVersions, versions 0–4 (v4 changes nothing on the wire). An unsupported version gets a v0 response with
//! UNSUPPORTED_VERSION and the full key list, so the client can retry with a
//! version we speak. The response header is always v0.

use kafka_protocol::messages::{api_versions_response::ApiVersion, ApiVersionsResponse};

use crate::protocol::errors;
use crate::server::handlers::SUPPORTED;

pub fn respond(error: i16) -> ApiVersionsResponse {
    let mut response = ApiVersionsResponse::default();
    response.error_code = error;
    response.api_keys = SUPPORTED
        .iter()
        .map(|&(key, min, max)| {
            let mut v = ApiVersion::default();
            v.api_key = key as i16;
            v.min_version = min;
            v.max_version = max;
            v
        })
        .collect();
    response
}

pub fn unsupported() -> ApiVersionsResponse {
    respond(errors::UNSUPPORTED_VERSION)
}
