//! A small blocking Kafka client for the command-line tools: one TCP
//! connection, one request at a time, the protocol crate's message types.

use std::{
    io::{Read, Write},
    net::TcpStream,
    time::Duration,
};

use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::{
    messages::{ApiKey, RequestHeader, ResponseHeader},
    protocol::{Decodable, Encodable, StrBytes},
};

pub struct Client {
    stream: TcpStream,
    peer: String,
    correlation: i32,
}

impl Client {
    pub fn connect(bootstrap: &str) -> Result<Self, String> {
        let stream = TcpStream::connect(bootstrap).map_err(|e| format!("cannot connect to {bootstrap}: {e}"))?;
        stream.set_read_timeout(Some(Duration::from_secs(30))).map_err(|e| e.to_string())?;
        let _ = stream.set_nodelay(true);
        Ok(Self { stream, peer: bootstrap.to_string(), correlation: 0 })
    }

    /// Sends `request` as `key` version `version` and decodes the answer.
    pub fn call<Req: Encodable, Resp: Decodable>(
        &mut self,
        key: ApiKey,
        version: i16,
        request: &Req,
    ) -> Result<Resp, String> {
        self.correlation += 1;
        let mut header = RequestHeader::default();
        header.request_api_key = key as i16;
        header.request_api_version = version;
        header.correlation_id = self.correlation;
        header.client_id = Some(StrBytes::from_static_str("shardlog-cli"));
        let mut body = BytesMut::new();
        let fail = |e: &dyn std::fmt::Display| format!("{key:?} to {}: {e}", self.peer);
        header.encode(&mut body, key.request_header_version(version)).map_err(|e| fail(&e))?;
        request.encode(&mut body, version).map_err(|e| fail(&e))?;
        let mut frame = BytesMut::with_capacity(body.len() + 4);
        frame.put_i32(body.len() as i32);
        frame.put_slice(&body);
        self.stream.write_all(&frame).map_err(|e| fail(&e))?;
        let mut len = [0u8; 4];
        self.stream.read_exact(&mut len).map_err(|e| fail(&e))?;
        let mut buf = vec![0u8; i32::from_be_bytes(len).max(0) as usize];
        self.stream.read_exact(&mut buf).map_err(|e| fail(&e))?;
        let mut bytes = Bytes::from(buf);
        let header_version = if key == ApiKey::ApiVersions { 0 } else { key.response_header_version(version) };
        let header = ResponseHeader::decode(&mut bytes, header_version).map_err(|e| fail(&e))?;
        if header.correlation_id != self.correlation {
            return Err(fail(&format!(
                "answer to request {} where {} was due",
                header.correlation_id, self.correlation
            )));
        }
        Resp::decode(&mut bytes, version).map_err(|e| fail(&e))
    }
}

/// A ListOffsets request for `partitions` of `topic`: `which` is -2
/// (earliest), -1 (latest) or a timestamp.
pub fn list_offsets_request(
    topic: &str,
    partitions: impl IntoIterator<Item = i32>,
    which: i64,
) -> kafka_protocol::messages::ListOffsetsRequest {
    use kafka_protocol::messages::{
        list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic},
        BrokerId, ListOffsetsRequest, TopicName,
    };
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
