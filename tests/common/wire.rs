//! A minimal blocking Kafka client over std TCP, using the protocol crate's
//! message types, for tests that need exact control of requests. The
//! framing is shardlog's `client`; this keeps the socket public so tests can
//! also write raw bytes to it.

use std::{io::Read, net::TcpStream, time::Duration};

use bytes::{Buf, Bytes};
use kafka_protocol::{
    messages::*,
    protocol::{Decodable, Encodable, StrBytes},
};
use shardlog::client::{read_response, write_request};

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

    /// `connect` then `call`, with a broken or refused connection returned
    /// as an error: for waits on a broker that may be restarting.
    pub fn try_once<Req: Encodable, Resp: Decodable>(
        addr: &str,
        key: ApiKey,
        version: i16,
        request: &Req,
    ) -> std::io::Result<Resp> {
        let stream = TcpStream::connect(addr)?;
        stream.set_read_timeout(Some(Duration::from_secs(30)))?;
        stream.set_nodelay(true)?;
        let mut wire = Self::from_stream(stream);
        let failed = |e: shardlog::client::ClientError| std::io::Error::other(e.to_string());
        write_request(&mut wire.stream, key, version, 1, Some("shardlog-test"), request).map_err(failed)?;
        Ok(read_response(&mut wire.stream, key, version).map_err(failed)?.body)
    }

    pub fn send<Req: Encodable>(&mut self, key: ApiKey, version: i16, request: &Req) {
        self.correlation += 1;
        write_request(&mut self.stream, key, version, self.correlation, Some("shardlog-test"), request)
            .unwrap_or_else(|e| panic!("{e}"));
    }

    /// Sends a request the broker does not answer (Produce with acks=0).
    pub fn send_unanswered<Req: Encodable>(&mut self, key: ApiKey, version: i16, request: &Req) {
        self.send(key, version, request);
        self.answered += 1;
    }

    pub fn receive<Resp: Decodable>(&mut self, key: ApiKey, version: i16) -> Resp {
        let response = read_response(&mut self.stream, key, version).unwrap_or_else(|e| panic!("{e}"));
        self.answered += 1;
        assert_eq!(response.correlation_id, self.answered, "responses come back in order");
        response.body
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
    create_topic_answer(w, name, partitions).0
}

/// Creates one topic; returns its (error code, error message).
pub fn create_topic_answer(w: &mut Wire, name: &str, partitions: i32) -> (i16, String) {
    let mut t = create_topics_request::CreatableTopic::default();
    t.name = topic_name(name);
    t.num_partitions = partitions;
    t.replication_factor = 1;
    let mut req = CreateTopicsRequest::default();
    req.topics.push(t);
    req.timeout_ms = 10_000;
    let resp: CreateTopicsResponse = w.call(ApiKey::CreateTopics, 7, &req);
    let message = resp.topics[0].error_message.as_ref().map(|m| m.to_string()).unwrap_or_default();
    (resp.topics[0].error_code, message)
}

/// Grows one topic to `count` partitions; returns (error code, error message).
pub fn create_partitions(w: &mut Wire, name: &str, count: i32) -> (i16, String) {
    let mut t = create_partitions_request::CreatePartitionsTopic::default();
    t.name = topic_name(name);
    t.count = count;
    let mut req = CreatePartitionsRequest::default();
    req.topics.push(t);
    req.timeout_ms = 10_000;
    let resp: CreatePartitionsResponse = w.call(ApiKey::CreatePartitions, 3, &req);
    let r = &resp.results[0];
    (r.error_code, r.error_message.as_ref().map(|m| m.to_string()).unwrap_or_default())
}

/// Produces one batch; returns (error, base offset).
pub fn produce(w: &mut Wire, topic: &str, partition: i32, batch: Bytes, acks: i16) -> (i16, i64) {
    produce_as(w, None, topic, partition, batch, acks)
}

/// [`produce`] with a transactional id on the request (Produce v9).
pub fn produce_as(
    w: &mut Wire,
    transactional_id: Option<&str>,
    topic: &str,
    partition: i32,
    batch: Bytes,
    acks: i16,
) -> (i16, i64) {
    let mut req = produce_request(topic, partition, batch, acks);
    req.transactional_id = transactional_id.map(|t| TransactionalId(StrBytes::from_string(t.into())));
    let resp: ProduceResponse = w.call(ApiKey::Produce, 9, &req);
    let p = &resp.responses[0].partition_responses[0];
    (p.error_code, p.base_offset)
}

/// A Produce request of one batch to one partition, with a 10 s timeout.
pub fn produce_request(topic: &str, partition: i32, batch: Bytes, acks: i16) -> ProduceRequest {
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
    req
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
