//! The client half of Kafka's framing: a request frame (size prefix, request
//! header, body) and a response frame (header, body), each with the header
//! version that belongs to its API and version. Every client in this
//! repository — the command-line tools, `bench`, the tests and the benches —
//! frames its requests here; `crate::client` only moves the bytes.
//!
//! Pure: no socket, no clock. The size prefix is checked on its own
//! (`response_len`) so a reader knows how much to read before it has it.

use std::fmt;

use bytes::{Bytes, BytesMut};
use kafka_protocol::{
    messages::{ApiKey, RequestHeader, ResponseHeader},
    protocol::{Decodable, Encodable, StrBytes},
};

use crate::limits::CLIENT_RESPONSE_BYTES_MAX;

/// Bytes of the size prefix in front of every frame.
pub const SIZE_PREFIX_BYTES: usize = 4;

/// What went wrong framing a request or reading a response; each names the
/// API and version involved.
#[derive(Debug)]
#[non_exhaustive]
pub enum CodecError {
    /// The request (or its header) cannot be written in that version, e.g. a
    /// field the version has no room for.
    Encode { api: ApiKey, version: i16, reason: String },
    /// A response's size prefix is negative or past `CLIENT_RESPONSE_BYTES_MAX`:
    /// not a Kafka answer, or a stream out of step.
    FrameSize { api: ApiKey, version: i16, len: i32 },
    /// The response header or body does not decode as that version.
    Decode { api: ApiKey, version: i16, part: &'static str, reason: String },
}

impl fmt::Display for CodecError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CodecError::Encode { api, version, reason } => write!(f, "encoding {api:?} v{version}: {reason}"),
            CodecError::FrameSize { api, version, len } => write!(
                f,
                "a {api:?} v{version} answer claims {len} bytes (at most {CLIENT_RESPONSE_BYTES_MAX} are read)"
            ),
            CodecError::Decode { api, version, part, reason } => {
                write!(f, "decoding the {part} of a {api:?} v{version} answer: {reason}")
            }
        }
    }
}

impl std::error::Error for CodecError {}

/// The response header version for `api` at `version`: v1 (with tagged
/// fields) for flexible versions, v0 otherwise — except ApiVersions, whose
/// response header is always v0 so that a client can read the answer to a
/// version the broker does not know.
pub fn response_header_version(api: ApiKey, version: i16) -> i16 {
    if api == ApiKey::ApiVersions {
        return 0;
    }
    api.response_header_version(version)
}

/// One request frame: size prefix, request header (of the version `api` at
/// `version` needs), body. `client_id` is left out of the header when `None`.
pub fn request_frame<R: Encodable>(
    api: ApiKey,
    version: i16,
    correlation_id: i32,
    client_id: Option<&'static str>,
    request: &R,
) -> Result<BytesMut, CodecError> {
    let encode = |reason: &dyn fmt::Display| CodecError::Encode { api, version, reason: reason.to_string() };
    let mut header = RequestHeader::default();
    header.request_api_key = api as i16;
    header.request_api_version = version;
    header.correlation_id = correlation_id;
    header.client_id = client_id.map(StrBytes::from_static_str);
    let mut frame = BytesMut::with_capacity(256);
    frame.extend_from_slice(&[0; SIZE_PREFIX_BYTES]);
    header.encode(&mut frame, api.request_header_version(version)).map_err(|e| encode(&e))?;
    request.encode(&mut frame, version).map_err(|e| encode(&e))?;
    let len = i32::try_from(frame.len() - SIZE_PREFIX_BYTES).map_err(|_| encode(&"request over 2 GiB"))?;
    frame[..SIZE_PREFIX_BYTES].copy_from_slice(&len.to_be_bytes());
    Ok(frame)
}

/// The length a response's size prefix announces: how many bytes follow it.
pub fn response_len(api: ApiKey, version: i16, prefix: [u8; SIZE_PREFIX_BYTES]) -> Result<usize, CodecError> {
    let len = i32::from_be_bytes(prefix);
    match usize::try_from(len) {
        Ok(n) if n <= CLIENT_RESPONSE_BYTES_MAX => Ok(n),
        _ => Err(CodecError::FrameSize { api, version, len }),
    }
}

/// A decoded response: the correlation id its header carries, and its body.
pub struct Response<R> {
    pub correlation_id: i32,
    pub body: R,
    /// Bytes of the frame after the body: none from a broker that answered
    /// in the version asked. Left to the caller to judge (the tools do not).
    pub unread_bytes: usize,
}

/// Decodes one response frame (the bytes after the size prefix) as the
/// answer to `api` at `version`.
pub fn decode_response<R: Decodable>(api: ApiKey, version: i16, mut frame: Bytes) -> Result<Response<R>, CodecError> {
    let decode =
        |part, reason: &dyn fmt::Display| CodecError::Decode { api, version, part, reason: reason.to_string() };
    let header =
        ResponseHeader::decode(&mut frame, response_header_version(api, version)).map_err(|e| decode("header", &e))?;
    let body = R::decode(&mut frame, version).map_err(|e| decode("body", &e))?;
    Ok(Response { correlation_id: header.correlation_id, body, unread_bytes: frame.len() })
}

#[cfg(test)]
mod tests {
    use bytes::{Buf, BufMut};
    use kafka_protocol::messages::{
        ApiVersionsRequest, ApiVersionsResponse, MetadataRequest, MetadataResponse, ProduceRequest,
    };

    use super::*;

    /// A response frame as a broker writes it, built with the protocol
    /// crate's own header encoder (not ours).
    fn answer<R: Encodable>(header_version: i16, correlation_id: i32, body: &R, version: i16) -> Bytes {
        let mut header = ResponseHeader::default();
        header.correlation_id = correlation_id;
        let mut out = BytesMut::new();
        header.encode(&mut out, header_version).unwrap();
        body.encode(&mut out, version).unwrap();
        out.freeze()
    }

    #[test]
    fn request_frames_carry_their_size_and_the_header_of_their_version() {
        for (api, version, header_version) in
            [(ApiKey::Produce, 3, 1), (ApiKey::Produce, 9, 2), (ApiKey::ApiVersions, 3, 2), (ApiKey::Metadata, 1, 1)]
        {
            let frame = match api {
                ApiKey::Produce => request_frame(api, version, 42, Some("c"), &ProduceRequest::default()),
                ApiKey::Metadata => request_frame(api, version, 42, Some("c"), &MetadataRequest::default()),
                _ => request_frame(api, version, 42, Some("c"), &ApiVersionsRequest::default()),
            }
            .unwrap();
            let mut rest = frame.freeze();
            assert_eq!(rest.get_i32() as usize, rest.len(), "{api:?} v{version}: size prefix");
            assert_eq!(api.request_header_version(version), header_version, "{api:?} v{version}");
            let header = RequestHeader::decode(&mut rest, header_version).unwrap();
            assert_eq!((header.request_api_key, header.request_api_version), (api as i16, version));
            assert_eq!(header.correlation_id, 42);
            assert_eq!(header.client_id.as_deref(), Some("c"));
        }
    }

    #[test]
    fn a_request_without_client_id_has_a_null_one() {
        let frame = request_frame(ApiKey::ApiVersions, 0, 1, None, &ApiVersionsRequest::default()).unwrap();
        assert_eq!(&frame[..], &[0, 0, 0, 10, 0, 18, 0, 0, 0, 0, 0, 1, 255, 255]);
    }

    #[test]
    fn api_versions_answers_have_a_v0_header_even_when_flexible() {
        let mut body = ApiVersionsResponse::default();
        body.error_code = 35;
        let frame = answer(0, 7, &body, 3);
        let got: Response<ApiVersionsResponse> = decode_response(ApiKey::ApiVersions, 3, frame).unwrap();
        assert_eq!((got.correlation_id, got.body.error_code, got.unread_bytes), (7, 35, 0));
    }

    #[test]
    fn flexible_answers_have_a_v1_header() {
        let mut body = MetadataResponse::default();
        body.throttle_time_ms = 9;
        let got: Response<MetadataResponse> = decode_response(ApiKey::Metadata, 12, answer(1, 5, &body, 12)).unwrap();
        assert_eq!((got.correlation_id, got.body.throttle_time_ms), (5, 9));
        let got: Response<MetadataResponse> = decode_response(ApiKey::Metadata, 8, answer(0, 6, &body, 8)).unwrap();
        assert_eq!((got.correlation_id, got.body.throttle_time_ms), (6, 9));
        let mut longer = BytesMut::from(&answer(0, 6, &body, 8)[..]);
        longer.put_u8(0);
        let got: Response<MetadataResponse> = decode_response(ApiKey::Metadata, 8, longer.freeze()).unwrap();
        assert_eq!(got.unread_bytes, 1, "trailing bytes are counted, not dropped silently");
    }

    #[test]
    fn sizes_past_the_limit_or_negative_are_refused_naming_the_api() {
        assert_eq!(response_len(ApiKey::Fetch, 12, 100i32.to_be_bytes()).unwrap(), 100);
        let max = CLIENT_RESPONSE_BYTES_MAX as i32;
        assert_eq!(response_len(ApiKey::Fetch, 12, max.to_be_bytes()).unwrap(), CLIENT_RESPONSE_BYTES_MAX);
        for len in [-1, max + 1, i32::MAX] {
            let e = response_len(ApiKey::Fetch, 12, len.to_be_bytes()).unwrap_err();
            assert!(matches!(e, CodecError::FrameSize { len: l, .. } if l == len), "{e}");
            assert!(e.to_string().contains("Fetch v12"), "{e}");
        }
    }

    #[test]
    fn a_truncated_answer_is_an_error_naming_api_version_and_part() {
        let mut short = BytesMut::new();
        short.put_i32(3); // correlation id, then nothing
        let e = decode_response::<MetadataResponse>(ApiKey::Metadata, 1, short.freeze()).err().unwrap();
        assert!(matches!(e, CodecError::Decode { part: "body", version: 1, .. }), "{e}");
        assert!(e.to_string().contains("Metadata v1"), "{e}");
        let e = decode_response::<MetadataResponse>(ApiKey::Metadata, 1, Bytes::from_static(&[0, 1])).err().unwrap();
        assert!(matches!(e, CodecError::Decode { part: "header", .. }), "{e}");
    }
}
