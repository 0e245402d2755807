//! A minimal blocking Kafka client over std TCP, using the protocol crate's
//! message types, for tests that need exact control of requests.

use std::{
    io::{Read, Write},
    net::TcpStream,
    time::Duration,
};

use bytes::{Buf, BufMut, Bytes, BytesMut};
use kafka_protocol::{
    messages::*,
    protocol::{Decodable, Encodable, StrBytes},
};

pub struct Wire {
    pub stream: TcpStream,
    /// Correlation id of the last request sent.
    correlation: i32,
    /// Responses read so far: requests are answered in order.
    answered: i32,
}

impl Wire {
    pub fn connect(addr: &str) -> Self {
        let stream = TcpStream::connect(addr).expect("connect to broker");
        stream.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        stream.set_nodelay(true).unwrap();
        Self::from_stream(stream)
    }

    pub fn from_stream(stream: TcpStream) -> Self {
        Self { stream, correlation: 0, answered: 0 }
    }

    /// Sends one request and returns the decoded response.
    pub fn call<Req: Encodable, Resp: Decodable>(&mut self, key: ApiKey, version: i16, request: &Req) -> Resp {
        self.send(key, version, request);
        self.receive(key, version)
    }

    pub fn send<Req: Encodable>(&mut self, key: ApiKey, version: i16, request: &Req) {
        self.correlation += 1;
        let mut header = RequestHeader::default();
        header.request_api_key = key as i16;
        header.request_api_version = version;
        header.correlation_id = self.correlation;
        header.client_id = Some(StrBytes::from_static_str("shardlog-test"));
        let mut body = BytesMut::new();
        header.encode(&mut body, key.request_header_version(version)).unwrap();
        request.encode(&mut body, version).unwrap();
        let mut frame = BytesMut::with_capacity(body.len() + 4);
        frame.put_i32(body.len() as i32);
        frame.put_slice(&body);
        self.stream.write_all(&frame).unwrap();
    }

    /// Sends a request the broker does not answer (Produce with acks=0).
    pub fn send_unanswered<Req: Encodable>(&mut self, key: ApiKey, version: i16, request: &Req) {
        self.send(key, version, request);
        self.answered += 1;
    }

    pub fn receive<Resp: Decodable>(&mut self, key: ApiKey, version: i16) -> Resp {
        let mut len = [0u8; 4];
        self.stream.read_exact(&mut len).expect("response length");
        let mut buf = vec![0u8; i32::from_be_bytes(len) as usize];
        self.stream.read_exact(&mut buf).expect("response body");
        let mut bytes = Bytes::from(buf);
        let header_version = if key == ApiKey::ApiVersions { 0 } else { key.response_header_version(version) };
        let header = ResponseHeader::decode(&mut bytes, header_version).unwrap();
        self.answered += 1;
        assert_eq!(header.correlation_id, self.answered, "responses come back in order");
        Resp::decode(&mut bytes, version).unwrap()
    }

    /// Like `is_closed`, with a short wait: for a connection that may be
    /// answered instead.
    pub fn is_closed_quietly(&mut self) -> bool {
        self.stream.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
        let mut b = [0u8; 1];
        matches!(self.stream.read(&mut b), Ok(0) | Err(_))
    }

    /// Whether the broker closed the connection (read returns EOF or reset).
    pub fn is_closed(&mut self) -> bool {
        self.stream.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let mut b = [0u8; 1];
        matches!(self.stream.read(&mut b), Ok(0) | Err(_))
    }
}

pub fn topic_name(s: &str) -> TopicName {
    TopicName(StrBytes::from_string(s.to_string()))
}

pub fn create_topic(w: &mut Wire, name: &str, partitions: i32) -> i16 {
    let mut t = create_topics_request::CreatableTopic::default();
    t.name = topic_name(name);
    t.num_partitions = partitions;
    t.replication_factor = 1;
    let mut req = CreateTopicsRequest::default();
    req.topics.push(t);
    req.timeout_ms = 10_000;
    let resp: CreateTopicsResponse = w.call(ApiKey::CreateTopics, 7, &req);
    resp.topics[0].error_code
}

/// Produces one batch; returns (error, base offset).
pub fn produce(w: &mut Wire, topic: &str, partition: i32, batch: Bytes, acks: i16) -> (i16, i64) {
    let mut pd = produce_request::PartitionProduceData::default();
    pd.index = partition;
    pd.records = Some(batch);
    let mut td = produce_request::TopicProduceData::default();
    td.name = topic_name(topic);
    td.partition_data.push(pd);
    let mut req = ProduceRequest::default();
    req.acks = acks;
    req.timeout_ms = 10_000;
    req.topic_data.push(td);
    let resp: ProduceResponse = w.call(ApiKey::Produce, 9, &req);
    let p = &resp.responses[0].partition_responses[0];
    (p.error_code, p.base_offset)
}

pub fn fetch_request(topic: &str, partitions: &[(i32, i64)], max_wait_ms: i32, min_bytes: i32) -> FetchRequest {
    let mut t = fetch_request::FetchTopic::default();
    t.topic = topic_name(topic);
    for &(p, offset) in partitions {
        let mut fp = fetch_request::FetchPartition::default();
        fp.partition = p;
        fp.fetch_offset = offset;
        fp.partition_max_bytes = 1 << 20;
        t.partitions.push(fp);
    }
    let mut req = FetchRequest::default();
    req.replica_id = (-1).into();
    req.max_wait_ms = max_wait_ms;
    req.min_bytes = min_bytes;
    req.max_bytes = 50 << 20;
    req.session_epoch = -1;
    req.topics.push(t);
    req
}

/// Record batches in a fetched records field: (base offset, record count).
pub fn batches(mut records: &[u8]) -> Vec<(i64, i32)> {
    let mut out = Vec::new();
    while records.len() >= 61 {
        let base = (&records[..8]).get_i64();
        let len = (&records[8..12]).get_i32() as usize + 12;
        let count = (&records[57..61]).get_i32();
        out.push((base, count));
        records = &records[len.min(records.len())..];
    }
    out
}
