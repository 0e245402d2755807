//! Illegal topic names are refused with INVALID_TOPIC_EXCEPTION, as Kafka
//! does, in CreateTopics, in Metadata (no auto-creation) and in Produce:
//! more than 249 characters, a character outside `[a-zA-Z0-9._-]`, `.` and
//! `..`. Clients are librdkafka's admin client, metadata request and
//! producer; a producer must fail at once instead of retrying an unknown
//! topic until its messages time out.

mod common;

use std::{
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use common::broker::Broker;
use rdkafka::{
    admin::{AdminClient, AdminOptions, NewTopic, TopicReplication},
    client::DefaultClientContext,
    consumer::{BaseConsumer, Consumer},
    error::{KafkaError, RDKafkaErrorCode},
    producer::{BaseProducer, BaseRecord, DeliveryResult, Producer, ProducerContext},
    types::RDKafkaRespErr,
    ClientConfig, ClientContext,
};

fn illegal_names() -> Vec<String> {
    vec!["t".repeat(250), "bad topic".into(), "bad/topic".into(), "bäd".into(), ".".into(), "..".into()]
}

/// Longer than any answer to an illegal name needs; shorter than the
/// producer's message timeout, which is what the old behaviour ran into.
const ANSWER_WITHIN: Duration = Duration::from_secs(20);

#[test]
fn create_topics_refuses_illegal_names() {
    let dir = common::tempdir().unwrap();
    let broker = Broker::start(&dir.path().join("data"), 1);
    let admin: AdminClient<DefaultClientContext> =
        ClientConfig::new().set("bootstrap.servers", broker.bootstrap()).create().unwrap();
    let names = illegal_names();
    let topics: Vec<NewTopic> = names.iter().map(|n| NewTopic::new(n, 1, TopicReplication::Fixed(1))).collect();
    let mut all: Vec<NewTopic> = topics;
    all.push(NewTopic::new("fine.name_ok-1", 1, TopicReplication::Fixed(1)));
    let results = futures_lite::future::block_on(admin.create_topics(&all, &AdminOptions::new())).unwrap();
    for (name, result) in names.iter().zip(&results) {
        assert_eq!(result, &Err((name.clone(), RDKafkaErrorCode::InvalidTopic)), "{name:?}");
    }
    assert_eq!(results.last().unwrap(), &Ok("fine.name_ok-1".to_string()));
}

#[test]
fn metadata_refuses_to_auto_create_illegal_names() {
    let dir = common::tempdir().unwrap();
    let broker = Broker::start(&dir.path().join("data"), 1);
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", broker.bootstrap())
        .set("allow.auto.create.topics", "true")
        .create()
        .unwrap();
    for name in illegal_names() {
        let md = consumer.fetch_metadata(Some(&name), Duration::from_secs(10)).unwrap();
        let topic = md.topics().iter().find(|t| t.name() == name).unwrap_or_else(|| panic!("{name:?} not answered"));
        assert_eq!(topic.error(), Some(RDKafkaRespErr::RD_KAFKA_RESP_ERR_TOPIC_EXCEPTION), "{name:?}");
    }
    let all = consumer.fetch_metadata(None, Duration::from_secs(10)).unwrap();
    let names: Vec<&str> = all.topics().iter().map(|t| t.name()).collect();
    assert!(illegal_names().iter().all(|n| !names.contains(&n.as_str())), "created: {names:?}");
}

/// Delivery report errors, as librdkafka gives them.
struct Reports(Arc<Mutex<Vec<Option<KafkaError>>>>);
impl ClientContext for Reports {}
impl ProducerContext for Reports {
    type DeliveryOpaque = ();
    fn delivery(&self, result: &DeliveryResult<'_>, _: ()) {
        self.0.lock().unwrap().push(result.as_ref().err().map(|(e, _)| e.clone()));
    }
}

#[test]
fn produce_to_an_illegal_name_fails_at_once() {
    let dir = common::tempdir().unwrap();
    let broker = Broker::start(&dir.path().join("data"), 1);
    let reports = Arc::new(Mutex::new(Vec::new()));
    let producer: BaseProducer<Reports> = ClientConfig::new()
        .set("bootstrap.servers", broker.bootstrap())
        .set("message.timeout.ms", "60000")
        .create_with_context(Reports(reports.clone()))
        .unwrap();
    for name in illegal_names() {
        let started = Instant::now();
        producer.send(BaseRecord::<str, str>::to(&name).key("k").payload("v")).map_err(|(e, _)| e).unwrap();
        let _ = producer.flush(ANSWER_WITHIN);
        let report = reports.lock().unwrap().pop();
        assert_eq!(
            report,
            Some(Some(KafkaError::MessageProduction(RDKafkaErrorCode::InvalidTopic))),
            "{name:?}: after {:?}",
            started.elapsed()
        );
    }
    // A wire-level Produce to each name gets the error itself.
    let mut w = common::wire::Wire::connect(&broker.bootstrap());
    let mut rng = common::Rng::new(13);
    for name in illegal_names() {
        let batch = bytes::Bytes::from(common::free_batch_bytes(&mut rng, 2));
        let (error, _) = common::wire::produce(&mut w, &name, 0, batch, -1);
        assert_eq!(error, 17, "{name:?}: INVALID_TOPIC_EXCEPTION");
    }
}
