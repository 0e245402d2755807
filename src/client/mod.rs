//! A small Kafka client for our own tools: the command-line tools, `bench`,
//! the tests and the benches. The framing is `protocol::client`'s; this
//! module only moves its frames over a socket — blocking here (one request
//! at a time, or pipelined and answered in order), non-blocking for the
//! load cores in `nonblocking`.
//!
//! It depends on `protocol` alone, so `cli` and `bench` can both use it
//! without knowing each other.

pub mod nonblocking;
pub mod sasl;
pub mod tls;

use std::{
    fmt, io,
    io::{Read, Write},
    net::TcpStream,
    time::Duration,
};

use bytes::Bytes;
use kafka_protocol::{
    messages::{
        list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic},
        ApiKey, BrokerId, ListOffsetsRequest, TopicName,
    },
    protocol::{Decodable, Encodable, StrBytes},
};

use crate::protocol::client::{decode_response, request_frame, response_len, CodecError, Response, SIZE_PREFIX_BYTES};

/// How long a blocking `Client` waits for an answer before it gives up.
const CALL_TIMEOUT: Duration = Duration::from_secs(30);

/// What went wrong talking to a broker; each names the API and version
/// involved (or the address, for a connection that never opened).
#[derive(Debug)]
#[non_exhaustive]
pub enum ClientError {
    Connect {
        addr: String,
        source: io::Error,
    },
    /// Sending a request or reading its answer failed (`op` says which).
    Io {
        api: ApiKey,
        version: i16,
        op: &'static str,
        source: io::Error,
    },
    Codec(CodecError),
    /// An answer carried another correlation id than the one due: the broker
    /// answered out of order, or the stream is out of step.
    OutOfOrder {
        api: ApiKey,
        version: i16,
        correlation_id: i32,
        due: i32,
    },
    /// The broker refused SASL authentication (error `code`, 0 when the
    /// broker failed to prove it knows the key).
    Auth {
        addr: String,
        code: i16,
        message: String,
    },
    /// Any of the above, on a `Client`'s connection to `peer`.
    Peer {
        peer: String,
        source: Box<ClientError>,
    },
}

impl fmt::Display for ClientError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ClientError::Connect { addr, source } => write!(f, "cannot connect to {addr}: {source}"),
            ClientError::Io { api, version, op, source } => write!(f, "{op} {api:?} v{version}: {source}"),
            ClientError::Codec(e) => e.fmt(f),
            ClientError::OutOfOrder { api, version, correlation_id, due } => {
                write!(f, "a {api:?} v{version} answer to request {correlation_id} where {due} was due")
            }
            ClientError::Peer { peer, source } => write!(f, "{peer}: {source}"),
            ClientError::Auth { addr, code, message } => {
                write!(f, "SASL authentication with {addr} failed (error {code}): {message}")
            }
        }
    }
}

impl std::error::Error for ClientError {}

impl From<CodecError> for ClientError {
    fn from(e: CodecError) -> Self {
        ClientError::Codec(e)
    }
}

/// The command-line tools and `bench` report errors as text.
impl From<ClientError> for String {
    fn from(e: ClientError) -> Self {
        e.to_string()
    }
}

/// A TCP connection to `addr` with Nagle off (requests are whole frames,
/// written at once), authenticated when the process has a SASL login
/// (`sasl::use_for_every_connection`).
pub fn connect(addr: &str) -> Result<TcpStream, ClientError> {
    let fail = |source| ClientError::Connect { addr: addr.to_string(), source };
    let mut stream = TcpStream::connect(addr).map_err(fail)?;
    stream.set_nodelay(true).map_err(fail)?;
    if sasl::login().is_some() {
        stream.set_read_timeout(Some(CALL_TIMEOUT)).map_err(fail)?;
        sasl::authenticate_if_set(&mut stream, addr)?;
        stream.set_read_timeout(None).map_err(fail)?;
    }
    Ok(stream)
}

/// Frames `request` and writes it.
pub fn write_request<R: Encodable>(
    stream: &mut impl Write,
    api: ApiKey,
    version: i16,
    correlation_id: i32,
    client_id: Option<&'static str>,
    request: &R,
) -> Result<(), ClientError> {
    let frame = request_frame(api, version, correlation_id, client_id, request)?;
    stream.write_all(&frame).map_err(|source| ClientError::Io { api, version, op: "sending", source })
}

/// Reads one frame (the bytes after its size prefix) into `frame`, reusing
/// its allocation; `api` and `version` name what is read in errors.
pub fn read_frame(stream: &mut impl Read, api: ApiKey, version: i16, frame: &mut Vec<u8>) -> Result<(), ClientError> {
    let io = |source| ClientError::Io { api, version, op: "reading the answer to", source };
    let mut prefix = [0u8; SIZE_PREFIX_BYTES];
    stream.read_exact(&mut prefix).map_err(io)?;
    frame.resize(response_len(api, version, prefix)?, 0);
    stream.read_exact(frame).map_err(io)
}

/// Reads and decodes the answer to a request for `api` at `version`.
pub fn read_response<R: Decodable>(
    stream: &mut impl Read,
    api: ApiKey,
    version: i16,
) -> Result<Response<R>, ClientError> {
    let mut frame = Vec::new();
    read_frame(stream, api, version, &mut frame)?;
    Ok(decode_response(api, version, Bytes::from(frame))?)
}

/// A blocking connection to one broker with correlation ids: `call` for one
/// request at a time, or `send`s then as many `receive`s, answered in order.
pub struct Client {
    stream: tls::Socket,
    peer: String,
    client_id: &'static str,
    /// Correlation id of the last request sent.
    sent: i32,
    /// Answers read so far.
    answered: i32,
}

impl Client {
    /// Connects to `addr`; requests carry `client_id`. A read waits at most
    /// `CALL_TIMEOUT`.
    pub fn connect(addr: &str, client_id: &'static str) -> Result<Self, ClientError> {
        let stream = tls::open(addr)?;
        stream
            .tcp()
            .set_read_timeout(Some(CALL_TIMEOUT))
            .map_err(|source| ClientError::Connect { addr: addr.to_string(), source })?;
        Ok(Self { stream, peer: addr.to_string(), client_id, sent: 0, answered: 0 })
    }

    /// Sends `request` as `api` version `version` and decodes the answer.
    pub fn call<Req: Encodable, Resp: Decodable>(
        &mut self,
        api: ApiKey,
        version: i16,
        request: &Req,
    ) -> Result<Resp, ClientError> {
        self.send(api, version, request)?;
        self.receive(api, version)
    }

    /// Sends a request without waiting for its answer; returns its
    /// correlation id.
    pub fn send<Req: Encodable>(&mut self, api: ApiKey, version: i16, request: &Req) -> Result<i32, ClientError> {
        self.sent += 1;
        write_request(&mut self.stream, api, version, self.sent, Some(self.client_id), request)
            .map_err(|e| self.at_peer(e))?;
        Ok(self.sent)
    }

    /// Reads the answer due next, which must be to `api` at `version`.
    pub fn receive<Resp: Decodable>(&mut self, api: ApiKey, version: i16) -> Result<Resp, ClientError> {
        let answer = read_response(&mut self.stream, api, version).map_err(|e| self.at_peer(e))?;
        self.answered += 1;
        if answer.correlation_id != self.answered {
            let due = self.answered;
            return Err(self.at_peer(ClientError::OutOfOrder {
                api,
                version,
                correlation_id: answer.correlation_id,
                due,
            }));
        }
        Ok(answer.body)
    }

    fn at_peer(&self, e: ClientError) -> ClientError {
        ClientError::Peer { peer: self.peer.clone(), source: Box::new(e) }
    }
}

/// A ListOffsets request for `partitions` of `topic`: `which` is -2
/// (earliest), -1 (latest) or a timestamp.
pub fn list_offsets_request(topic: &str, partitions: impl IntoIterator<Item = i32>, which: i64) -> ListOffsetsRequest {
    let mut t = ListOffsetsTopic::default();
    t.name = TopicName(StrBytes::from_string(topic.to_string()));
    t.partitions = partitions
        .into_iter()
        .map(|p| {
            let mut lp = ListOffsetsPartition::default();
            lp.partition_index = p;
            lp.timestamp = which;
            lp
        })
        .collect();
    let mut req = ListOffsetsRequest::default();
    req.replica_id = BrokerId(-1);
    req.topics = vec![t];
    req
}

#[cfg(test)]
mod tests {
    use std::net::TcpListener;

    use bytes::BytesMut;
    use kafka_protocol::messages::{ApiVersionsRequest, ApiVersionsResponse, RequestHeader, ResponseHeader};

    use super::*;

    /// A peer that reads one request and answers it with `correlation_id`
    /// (the real one when `None`), framed by hand with the protocol crate.
    fn peer(correlation_id: Option<i32>) -> String {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        std::thread::spawn(move || {
            let (mut s, _) = listener.accept().unwrap();
            let mut len = [0u8; 4];
            s.read_exact(&mut len).unwrap();
            let mut request = vec![0u8; i32::from_be_bytes(len) as usize];
            s.read_exact(&mut request).unwrap();
            let header = RequestHeader::decode(&mut Bytes::from(request), 2).unwrap();
            assert_eq!(header.client_id.as_deref(), Some("unit"));
            let mut answer = BytesMut::new();
            let mut rh = ResponseHeader::default();
            rh.correlation_id = correlation_id.unwrap_or(header.correlation_id);
            rh.encode(&mut answer, 0).unwrap();
            let mut body = ApiVersionsResponse::default();
            body.throttle_time_ms = 77;
            body.encode(&mut answer, 3).unwrap();
            s.write_all(&(answer.len() as i32).to_be_bytes()).unwrap();
            s.write_all(&answer).unwrap();
        });
        addr
    }

    #[test]
    fn a_call_is_answered_with_its_correlation_id() {
        let addr = peer(None);
        let mut c = Client::connect(&addr, "unit").unwrap();
        let resp: ApiVersionsResponse = c.call(ApiKey::ApiVersions, 3, &ApiVersionsRequest::default()).unwrap();
        assert_eq!(resp.throttle_time_ms, 77);
    }

    #[test]
    fn an_answer_out_of_order_is_an_error_naming_api_version_and_peer() {
        let addr = peer(Some(9));
        let mut c = Client::connect(&addr, "unit").unwrap();
        let e = c.call::<_, ApiVersionsResponse>(ApiKey::ApiVersions, 3, &ApiVersionsRequest::default()).unwrap_err();
        let ClientError::Peer { source, .. } = &e else { panic!("{e}") };
        assert!(matches!(**source, ClientError::OutOfOrder { correlation_id: 9, due: 1, .. }), "{e}");
        let text = e.to_string();
        assert!(text.contains(&addr) && text.contains("ApiVersions v3"), "{text}");
    }

    #[test]
    fn a_closed_connection_is_an_io_error_naming_api_and_version() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let closer = std::thread::spawn(move || drop(listener.accept().unwrap()));
        let mut c = Client::connect(&addr, "unit").unwrap();
        closer.join().unwrap();
        let e = c.call::<_, ApiVersionsResponse>(ApiKey::ApiVersions, 3, &ApiVersionsRequest::default()).unwrap_err();
        let text = e.to_string();
        assert!(text.contains("ApiVersions v3") && text.contains(&addr), "{text}");
    }
}
