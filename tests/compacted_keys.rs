//! A compacted topic keeps the newest record per key, so it cannot take a
//! record without one: Kafka rejects the batch with INVALID_RECORD and, from
//! Produce v8 (KIP-467), names each keyless record in `record_errors`.
//! Checked with librdkafka's producer and with Produce v3–v9 on the wire.

mod common;

use std::{
    sync::{Arc, Mutex},
    time::Duration,
};

use bytes::{Bytes, BytesMut};
use common::{broker::Broker, wire::Wire};
use kafka_protocol::{
    messages::*,
    records::{
        Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType, NO_PARTITION_LEADER_EPOCH,
        NO_PRODUCER_EPOCH, NO_PRODUCER_ID, NO_SEQUENCE,
    },
};
use rdkafka::{
    admin::{AdminClient, AdminOptions, NewTopic, TopicReplication},
    client::DefaultClientContext,
    error::{KafkaError, RDKafkaErrorCode},
    producer::{BaseProducer, BaseRecord, DeliveryResult, Producer, ProducerContext},
    ClientConfig, ClientContext,
};

const TOPIC: &str = "compacted-keys";
const INVALID_RECORD: i16 = 87;

struct Reports(Arc<Mutex<Vec<Result<i64, KafkaError>>>>);
impl ClientContext for Reports {}
impl ProducerContext for Reports {
    type DeliveryOpaque = ();
    fn delivery(&self, result: &DeliveryResult<'_>, _: ()) {
        use rdkafka::Message;
        self.0.lock().unwrap().push(result.as_ref().map(|m| m.offset()).map_err(|(e, _)| e.clone()));
    }
}

fn create_compacted(broker: &Broker) {
    let admin: AdminClient<DefaultClientContext> =
        ClientConfig::new().set("bootstrap.servers", broker.bootstrap()).create().unwrap();
    let topic = NewTopic::new(TOPIC, 1, TopicReplication::Fixed(1)).set("cleanup.policy", "compact");
    let created = futures_lite::future::block_on(admin.create_topics(&[topic], &AdminOptions::new())).unwrap();
    assert_eq!(created[0], Ok(TOPIC.to_string()));
}

#[test]
fn librdkafka_keyless_records_are_refused_on_a_compacted_topic() {
    let dir = common::tempdir().unwrap();
    let broker = Broker::start(&dir.path().join("data"), 1);
    create_compacted(&broker);
    let reports = Arc::new(Mutex::new(Vec::new()));
    let producer: BaseProducer<Reports> = ClientConfig::new()
        .set("bootstrap.servers", broker.bootstrap())
        .set("message.timeout.ms", "30000")
        .set("linger.ms", "0")
        .create_with_context(Reports(reports.clone()))
        .unwrap();
    producer.send(BaseRecord::<str, str>::to(TOPIC).key("k1").payload("keyed")).map_err(|(e, _)| e).unwrap();
    producer.flush(Duration::from_secs(20)).unwrap();
    producer.send(BaseRecord::<str, str>::to(TOPIC).payload("no key")).map_err(|(e, _)| e).unwrap();
    producer.flush(Duration::from_secs(20)).unwrap();
    let reports = reports.lock().unwrap().clone();
    assert_eq!(reports, vec![Ok(0), Err(KafkaError::MessageProduction(RDKafkaErrorCode::InvalidRecord))]);
}

/// Three records, the second without a key.
fn batch_with_a_keyless_record() -> Bytes {
    let records: Vec<Record> = (0..3)
        .map(|i| Record {
            transactional: false,
            control: false,
            delete_horizon: false,
            partition_leader_epoch: NO_PARTITION_LEADER_EPOCH,
            producer_id: NO_PRODUCER_ID,
            producer_epoch: NO_PRODUCER_EPOCH,
            timestamp_type: TimestampType::Creation,
            offset: i,
            sequence: NO_SEQUENCE,
            timestamp: 1_700_000_000_000,
            key: (i != 1).then(|| Bytes::from(format!("k{i}"))),
            value: Some(Bytes::from(format!("v{i}"))),
            headers: Default::default(),
        })
        .collect();
    let mut buf = BytesMut::new();
    RecordBatchEncoder::encode(&mut buf, &records, &RecordEncodeOptions { version: 2, compression: Compression::None })
        .unwrap();
    buf.freeze()
}

#[test]
fn produce_names_each_keyless_record_from_v8() {
    let dir = common::tempdir().unwrap();
    let broker = Broker::start(&dir.path().join("data"), 1);
    create_compacted(&broker);
    let mut w = Wire::connect(&broker.bootstrap());
    for v in 3..=9 {
        let mut pd = produce_request::PartitionProduceData::default();
        pd.records = Some(batch_with_a_keyless_record());
        let mut td = produce_request::TopicProduceData::default();
        td.name = common::wire::topic_name(TOPIC);
        td.partition_data.push(pd);
        let mut req = ProduceRequest::default();
        req.acks = -1;
        req.timeout_ms = 10_000;
        req.topic_data.push(td);
        let resp: ProduceResponse = w.call(ApiKey::Produce, v, &req);
        let p = &resp.responses[0].partition_responses[0];
        assert_eq!(p.error_code, INVALID_RECORD, "v{v}");
        if v >= 8 {
            let indices: Vec<i32> = p.record_errors.iter().map(|e| e.batch_index).collect();
            assert_eq!(indices, vec![1], "v{v}: the keyless record is named: {:?}", p.record_errors);
            assert!(p.error_message.as_ref().is_some_and(|m| m.contains(TOPIC)), "v{v}: {:?}", p.error_message);
        }
    }
    // Nothing of the refused batches was stored.
    let fetched: FetchResponse = w.call(ApiKey::Fetch, 12, &common::wire::fetch_request(TOPIC, &[(0, 0)], 0, 0));
    assert_eq!(fetched.responses[0].partitions[0].high_watermark, 0);
}
