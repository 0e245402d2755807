//! Records produced with librdkafka (the rdkafka crate), for tests whose
//! consumer is another client: what a consumer reads was written by a
//! different implementation of the protocol.

use std::{
    sync::{Arc, Mutex},
    time::Duration,
};

use rdkafka::{
    producer::{BaseProducer, BaseRecord, DeliveryResult, Producer, ProducerContext},
    ClientConfig, ClientContext, Message,
};

/// (index in the request, partition, offset, error)
type Report = (usize, i32, i64, Option<String>);

struct Deliveries(Arc<Mutex<Vec<Report>>>);
impl ClientContext for Deliveries {}
impl ProducerContext for Deliveries {
    type DeliveryOpaque = Box<usize>;
    fn delivery(&self, result: &DeliveryResult<'_>, i: Box<usize>) {
        let entry = match result {
            Ok(m) => (*i, m.partition(), m.offset(), None),
            Err((e, m)) => (*i, m.partition(), -1, Some(e.to_string())),
        };
        self.0.lock().unwrap().push(entry);
    }
}

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
    let log = Arc::new(Mutex::new(Vec::new()));
    let mut config = ClientConfig::new();
    config.set("bootstrap.servers", bootstrap).set("acks", "all").set("linger.ms", "5");
    for (k, v) in settings {
        config.set(*k, *v);
    }
    let producer: BaseProducer<Deliveries> =
        config.create_with_context(Deliveries(log.clone())).expect("librdkafka producer");
    for (i, (partition, value)) in records.iter().enumerate() {
        let mut rec = BaseRecord::with_opaque_to(topic, Box::new(i)).partition(*partition).key(value).payload(value);
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
    }
    producer.flush(Duration::from_secs(60)).expect("flush the producer");
    let mut log = log.lock().unwrap().clone();
    log.sort();
    assert_eq!(log.len(), records.len(), "every record got a delivery report");
    log.into_iter()
        .map(|(i, partition, offset, error)| {
            assert!(error.is_none(), "record {i} to {topic}-{partition} failed: {error:?}");
            (partition, offset, records[i].1.clone())
        })
        .collect()
}
