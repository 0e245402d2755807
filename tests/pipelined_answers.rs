//! A client that pipelines gets every answer, in request order, whole,
//! however many the broker writes together: produce requests (several
//! finished by one journal write), metadata requests between them, an
//! acks=0 produce that is never answered, and a bad frame after them,
//! which closes the connection only once the answers before it are out.

mod common;

use std::io::Write;

use bytes::Bytes;
use common::{broker::Broker, free_batch_bytes, wire::*, Rng};
use kafka_protocol::messages::*;

const PARTITIONS: i32 = 4;

/// What one pipelined request expects back.
enum Expect {
    /// Partition, and the offset its batch must start at.
    Produce(i32, i64),
    Metadata,
}

#[test]
fn pipelined_answers_come_back_whole_and_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let broker = Broker::start(dir.path(), 1);
    let mut w = Wire::connect(&broker.bootstrap());
    assert_eq!(create_topic(&mut w, "pipe", PARTITIONS), 0);
    let mut rng = Rng::new(41);

    // 300 requests in flight on one connection, written before any answer
    // is read: mostly acks=1 produces over the partitions, with a metadata
    // request every 7th and one acks=0 produce in the middle.
    let mut expected = Vec::new();
    let mut records_sent = vec![0i64; PARTITIONS as usize];
    for i in 0..300 {
        if i % 7 == 3 {
            let mut req = MetadataRequest::default();
            req.topics = Some(vec![{
                let mut t = metadata_request::MetadataRequestTopic::default();
                t.name = Some(topic_name("pipe"));
                t
            }]);
            w.send(ApiKey::Metadata, 9, &req);
            expected.push(Expect::Metadata);
            continue;
        }
        let partition = (i % PARTITIONS as usize) as i32;
        let records = 1 + i % 3;
        let batch = Bytes::from(free_batch_bytes(&mut rng, records));
        let base = records_sent[partition as usize];
        records_sent[partition as usize] += records as i64;
        if i == 150 {
            w.send_unanswered(ApiKey::Produce, 9, &produce_request("pipe", partition, batch, 0));
        } else {
            w.send(ApiKey::Produce, 9, &produce_request("pipe", partition, batch, 1));
            expected.push(Expect::Produce(partition, base));
        }
    }

    // `receive` asserts each answer's correlation id is the next one.
    for e in expected {
        match e {
            Expect::Produce(partition, base) => {
                let resp: ProduceResponse = w.receive(ApiKey::Produce, 9);
                let p = &resp.responses[0].partition_responses[0];
                assert_eq!((p.index, p.error_code, p.base_offset), (partition, 0, base), "{resp:?}");
            }
            Expect::Metadata => {
                let resp: MetadataResponse = w.receive(ApiKey::Metadata, 9);
                assert_eq!(resp.topics.len(), 1);
                assert_eq!(resp.topics[0].partitions.len(), PARTITIONS as usize, "{resp:?}");
            }
        }
    }

    // Every record written is in the log, acks=0 batch included.
    for partition in 0..PARTITIONS {
        let resp: FetchResponse = w.call(ApiKey::Fetch, 12, &fetch_request("pipe", &[(partition, 0)], 0, 1));
        let data = &resp.responses[0].partitions[0];
        assert_eq!(data.error_code, 0);
        let counted: i64 = batches(data.records.as_deref().unwrap_or(&[])).iter().map(|b| b.1 as i64).sum();
        assert_eq!(counted, records_sent[partition as usize], "partition {partition}");
        assert_eq!(data.high_watermark, records_sent[partition as usize], "partition {partition}");
    }

    // Answers already due go out before a bad frame closes the connection.
    let mut pipelined = Vec::new();
    let mut sent = 0;
    for i in 0..40 {
        let batch = Bytes::from(free_batch_bytes(&mut rng, 1));
        let req = produce_request("pipe", i % PARTITIONS, batch, 1);
        let frame = shardlog::protocol::client::request_frame(ApiKey::Produce, 9, 1000 + i, Some("t"), &req).unwrap();
        pipelined.extend_from_slice(&frame);
        sent += 1;
    }
    // An API key no Kafka version has.
    pipelined.extend_from_slice(&[0, 0, 0, 10, 0x7f, 0x00, 0, 0, 0, 0, 0, 9, 0, 0]);
    let mut raw = Wire::connect(&broker.bootstrap());
    raw.stream.write_all(&pipelined).unwrap();
    for i in 0..sent {
        let resp = shardlog::client::read_response::<ProduceResponse>(&mut raw.stream, ApiKey::Produce, 9)
            .unwrap_or_else(|e| panic!("answer {i} of {sent} before the bad frame: {e}"));
        assert_eq!(resp.correlation_id, 1000 + i);
        assert_eq!(resp.body.responses[0].partition_responses[0].error_code, 0);
    }
    assert!(raw.is_closed(), "the bad frame closes the connection");
}
