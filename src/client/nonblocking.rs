//! The same framing as the blocking client, for the load cores'
//! non-blocking sockets (glommio's, or any `futures-lite` stream): only the
//! reads and writes await; sizes and decoding are `protocol::client`'s.

use bytes::Bytes;
use futures_lite::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use kafka_protocol::{messages::ApiKey, protocol::Decodable};

use super::ClientError;
use crate::protocol::client::{decode_response, response_len, Response, SIZE_PREFIX_BYTES};

/// Writes a frame built by `protocol::client::request_frame` for `api` at
/// `version` (they name the request in errors).
pub async fn write_frame(
    stream: &mut (impl AsyncWrite + Unpin),
    api: ApiKey,
    version: i16,
    frame: &[u8],
) -> Result<(), ClientError> {
    stream.write_all(frame).await.map_err(|source| ClientError::Io { api, version, op: "sending", source })
}

/// Reads and decodes the answer to a request for `api` at `version`.
pub async fn read_response<R: Decodable>(
    stream: &mut (impl AsyncRead + Unpin),
    api: ApiKey,
    version: i16,
) -> Result<Response<R>, ClientError> {
    let io = |source| ClientError::Io { api, version, op: "reading the answer to", source };
    let mut prefix = [0u8; SIZE_PREFIX_BYTES];
    stream.read_exact(&mut prefix).await.map_err(io)?;
    let mut frame = vec![0u8; response_len(api, version, prefix)?];
    stream.read_exact(&mut frame).await.map_err(io)?;
    Ok(decode_response(api, version, Bytes::from(frame))?)
}

/// Hands a socket connected with `client::connect` to the executor of the
/// thread that calls this (call it on the load core).
pub fn to_glommio(stream: std::net::TcpStream) -> glommio::net::TcpStream {
    glommio::net::TcpStream::from(socket2::Socket::from(stream))
}
