//! Records produced with librdkafka (the rdkafka crate), for tests whose
//! consumer is another client (what a consumer reads was written by a
//! different implementation of the protocol) or that check where the broker
//! put each record.

use std::{
    sync::{Arc, Mutex},
    time::Duration,
};

use rdkafka::{
    message::Message,
    producer::{BaseProducer, BaseRecord, DeliveryResult, Producer, ProducerContext},
    ClientConfig, ClientContext,
};

/// Produces each (partition, value) with acks=all, keyed by its value;
/// returns (partition, offset, value) as acknowledged, in request order.
pub fn produce(bootstrap: &str, topic: &str, records: &[(i32, String)]) -> Vec<(i32, i64, String)> {
    produce_with(bootstrap, topic, records, &[])
}

/// `produce` with extra librdkafka settings.
pub fn produce_with(
    bootstrap: &str,
    topic: &str,
    records: &[(i32, String)],
    settings: &[(&str, &str)],
) -> Vec<(i32, i64, String)> {
    let all: Vec<(&str, &str)> =
        [("acks", "all"), ("linger.ms", "5")].into_iter().chain(settings.iter().copied()).collect();
    let outgoing = records.iter().enumerate().map(|(i, (partition, value))| Outgoing {
        id: i,
        key: Some(value.clone().into_bytes()),
        value: value.clone().into_bytes(),
        partition: Some(*partition),
        timestamp: None,
    });
    let mut delivered = produce_all(bootstrap, topic, &all, outgoing);
    delivered.sort_by_key(|d| d.id);
    delivered.into_iter().map(|d| (d.partition, d.offset, records[d.id].1.clone())).collect()
}

/// One record to send: the caller's id for it, and what goes on the wire.
pub struct Outgoing {
    pub id: usize,
    pub key: Option<Vec<u8>>,
    pub value: Vec<u8>,
    /// `None`: librdkafka's partitioner picks.
    pub partition: Option<i32>,
    pub timestamp: Option<i64>,
}

/// Where the broker said a record landed.
#[derive(Debug, Clone, Copy)]
pub struct Delivered {
    pub id: usize,
    pub partition: i32,
    pub offset: i64,
}

type Reports = Arc<Mutex<Vec<(usize, i32, i64, Option<String>)>>>;

struct Deliveries(Reports);
impl ClientContext for Deliveries {}
impl ProducerContext for Deliveries {
    type DeliveryOpaque = Box<usize>;
    fn delivery(&self, result: &DeliveryResult<'_>, id: Box<usize>) {
        let entry = match result {
            Ok(m) => (*id, m.partition(), m.offset(), None),
            Err((e, m)) => (*id, m.partition(), -1, Some(e.to_string())),
        };
        self.0.lock().unwrap().push(entry);
    }
}

/// Sends every record to `topic` with a producer made from `settings`
/// (on top of `bootstrap.servers`), waits until each has its delivery
/// report and returns them. Panics, naming the record, if one failed or did
/// not get exactly one report.
pub fn produce_all(
    bootstrap: &str,
    topic: &str,
    settings: &[(&str, &str)],
    records: impl IntoIterator<Item = Outgoing>,
) -> Vec<Delivered> {
    let reports: Reports = Arc::default();
    let mut config = ClientConfig::new();
    config.set("bootstrap.servers", bootstrap);
    for (name, value) in settings {
        config.set(*name, *value);
    }
    let producer: BaseProducer<Deliveries> =
        config.create_with_context(Deliveries(reports.clone())).expect("create the producer");
    let mut sent = 0;
    for r in records {
        let mut rec =
            BaseRecord::<Vec<u8>, Vec<u8>, Box<usize>>::with_opaque_to(topic, Box::new(r.id)).payload(&r.value);
        if let Some(key) = &r.key {
            rec = rec.key(key);
        }
        if let Some(p) = r.partition {
            rec = rec.partition(p);
        }
        if let Some(ts) = r.timestamp {
            rec = rec.timestamp(ts);
        }
        loop {
            match producer.send(rec) {
                Ok(()) => break,
                Err((_, back)) => {
                    producer.poll(Duration::from_millis(10));
                    rec = back;
                }
            }
        }
        producer.poll(Duration::ZERO);
        sent += 1;
    }
    producer.flush(Duration::from_secs(60)).expect("flush");
    let reports = reports.lock().unwrap();
    assert_eq!(reports.len(), sent, "every record got one delivery report");
    reports
        .iter()
        .map(|(id, partition, offset, error)| {
            assert!(error.is_none(), "record {id} failed: {error:?}");
            Delivered { id: *id, partition: *partition, offset: *offset }
        })
        .collect()
}
