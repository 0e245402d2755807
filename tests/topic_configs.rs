//! Topic configs as Kafka has them, through librdkafka's admin client:
//! standard configs accepted at creation (compression.type=lz4 among them),
//! unknown ones refused, every documented config described with its source,
//! AlterConfigs applied to live partitions (a smaller max.message.bytes
//! refuses a record the topic took before), IncrementalAlterConfigs set and
//! append, broker configs described read-only and not alterable, and the
//! changes persisted across a restart.

mod common;

use std::{
    sync::{Arc, Mutex},
    time::Duration,
};

use common::{broker::Broker, wire::*};
use kafka_protocol::{
    messages::{
        incremental_alter_configs_request::{AlterConfigsResource, AlterableConfig},
        AlterConfigsRequest, AlterConfigsResponse, ApiKey, IncrementalAlterConfigsRequest,
        IncrementalAlterConfigsResponse,
    },
    protocol::StrBytes,
};
use rdkafka::{
    admin::{
        AdminClient, AdminOptions, AlterConfig, ConfigResource, ConfigSource, NewTopic, ResourceSpecifier,
        TopicReplication,
    },
    client::DefaultClientContext,
    error::KafkaError,
    producer::{BaseProducer, BaseRecord, DeliveryResult, Producer, ProducerContext},
    types::RDKafkaErrorCode,
    ClientConfig, ClientContext,
};

const TOPIC: &str = "configured";

fn block_on<F: std::future::Future>(f: F) -> F::Output {
    futures_lite::future::block_on(f)
}

fn opts() -> AdminOptions {
    AdminOptions::new().operation_timeout(Some(Duration::from_secs(10)))
}

fn describe(admin: &AdminClient<DefaultClientContext>, spec: ResourceSpecifier) -> ConfigResource {
    let mut results = block_on(admin.describe_configs(&[spec], &opts())).expect("describe configs");
    results.remove(0).expect("described")
}

fn value(r: &ConfigResource, name: &str) -> Option<String> {
    r.get(name).and_then(|e| e.value.clone())
}

/// Keeps the delivery report of the one record a producer sends.
struct Report(Arc<Mutex<Option<Result<(), KafkaError>>>>);
impl ClientContext for Report {}
impl ProducerContext for Report {
    type DeliveryOpaque = ();
    fn delivery(&self, result: &DeliveryResult<'_>, _: ()) {
        *self.0.lock().unwrap() = Some(result.as_ref().map(|_| ()).map_err(|(e, _)| e.clone()));
    }
}

/// Produces one record of `bytes` value bytes; the broker's answer.
fn produce(bootstrap: &str, bytes: usize) -> Result<(), KafkaError> {
    let report = Arc::new(Mutex::new(None));
    let producer: BaseProducer<Report> = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("message.timeout.ms", "10000")
        .create_with_context(Report(report.clone()))
        .expect("producer");
    let value = "v".repeat(bytes);
    producer
        .send(BaseRecord::<str, str, ()>::with_opaque_to(TOPIC, ()).partition(0).key("k").payload(&value))
        .expect("enqueue");
    producer.flush(Duration::from_secs(15)).expect("delivery report within the message timeout");
    let outcome = report.lock().unwrap().take();
    outcome.expect("a delivery report")
}

#[test]
fn topic_configs_are_accepted_described_altered_and_kept() {
    let dir = common::tempdir().unwrap();
    let mut broker = Broker::start(dir.path(), 2);
    let bootstrap = broker.bootstrap();
    let admin: AdminClient<DefaultClientContext> =
        ClientConfig::new().set("bootstrap.servers", &bootstrap).create().expect("admin client");

    let created = block_on(
        admin.create_topics(
            &[
                NewTopic::new(TOPIC, 3, TopicReplication::Fixed(1))
                    .set("compression.type", "lz4")
                    .set("min.insync.replicas", "1")
                    .set("message.timestamp.type", "LogAppendTime"),
                NewTopic::new("unknown-config", 1, TopicReplication::Fixed(1)).set("no.such.config", "1"),
                NewTopic::new("bad-value", 1, TopicReplication::Fixed(1)).set("compression.type", "brotli"),
            ],
            &opts(),
        ),
    )
    .expect("create topics");
    assert_eq!(created[0], Ok(TOPIC.to_string()));
    assert_eq!(created[1], Err(("unknown-config".to_string(), RDKafkaErrorCode::InvalidConfig)));
    assert_eq!(created[2], Err(("bad-value".to_string(), RDKafkaErrorCode::InvalidConfig)));

    // Every documented config is described, set ones as the topic's own.
    let r = describe(&admin, ResourceSpecifier::Topic(TOPIC));
    assert!(r.entries.len() >= 30, "{} configs described", r.entries.len());
    let lz4 = r.get("compression.type").expect("compression.type described");
    assert_eq!(lz4.value.as_deref(), Some("lz4"));
    assert_eq!(lz4.source, ConfigSource::DynamicTopic);
    assert!(!lz4.is_default);
    let retention = r.get("retention.ms").expect("retention.ms described");
    assert_eq!(retention.source, ConfigSource::Default);
    assert!(retention.is_default);
    assert_eq!(value(&r, "cleanup.policy").as_deref(), Some("delete"));

    // A 5 kB record fits the default max.message.bytes ...
    produce(&bootstrap, 5_000).expect("a 5 kB record under the default limit");
    // ... AlterConfigs replaces the topic's set and applies to its open partitions ...
    let altered =
        block_on(admin.alter_configs(
            &[AlterConfig::new(ResourceSpecifier::Topic(TOPIC)).set("max.message.bytes", "2000")],
            &opts(),
        ))
        .expect("alter configs");
    assert!(altered[0].is_ok(), "{altered:?}");
    let r = describe(&admin, ResourceSpecifier::Topic(TOPIC));
    assert_eq!(value(&r, "max.message.bytes").as_deref(), Some("2000"));
    assert_eq!(value(&r, "compression.type").as_deref(), Some("producer"), "AlterConfigs replaced the whole set");
    // ... so the same record is now too large.
    match produce(&bootstrap, 5_000) {
        Err(KafkaError::MessageProduction(RDKafkaErrorCode::MessageSizeTooLarge)) => {}
        other => panic!("a 5 kB record over max.message.bytes=2000: {other:?}"),
    }
    // A bad value is refused whole (the rdkafka crate does not surface
    // per-resource AlterConfigs errors; the topic shows nothing was applied).
    let _ = block_on(
        admin.alter_configs(&[AlterConfig::new(ResourceSpecifier::Topic(TOPIC)).set("segment.bytes", "lots")], &opts()),
    )
    .expect("alter configs");
    let r = describe(&admin, ResourceSpecifier::Topic(TOPIC));
    assert_eq!(value(&r, "max.message.bytes").as_deref(), Some("2000"), "the refused change replaced nothing");
    assert_ne!(value(&r, "segment.bytes").as_deref(), Some("lots"));

    // IncrementalAlterConfigs: set one config, append to a list.
    let mut w = Wire::connect(&bootstrap);
    let op = |name: &str, operation: i8, value: &str| {
        let mut c = AlterableConfig::default();
        c.name = StrBytes::from_string(name.into());
        c.config_operation = operation;
        c.value = Some(StrBytes::from_string(value.into()));
        c
    };
    let mut resource = AlterConfigsResource::default();
    resource.resource_type = 2;
    resource.resource_name = StrBytes::from_string(TOPIC.into());
    resource.configs = vec![op("retention.ms", 0, "3600000"), op("cleanup.policy", 2, "compact")];
    let mut req = IncrementalAlterConfigsRequest::default();
    req.resources = vec![resource];
    let resp: IncrementalAlterConfigsResponse = w.call(ApiKey::IncrementalAlterConfigs, 1, &req);
    assert_eq!(resp.responses[0].error_code, 0, "{:?}", resp.responses[0].error_message);
    let r = describe(&admin, ResourceSpecifier::Topic(TOPIC));
    assert_eq!(value(&r, "retention.ms").as_deref(), Some("3600000"));
    assert_eq!(value(&r, "cleanup.policy").as_deref(), Some("delete,compact"));
    assert_eq!(value(&r, "max.message.bytes").as_deref(), Some("2000"), "incremental keeps the rest");

    // Broker configs: described, read-only, not alterable.
    let b = describe(&admin, ResourceSpecifier::Broker(0));
    let partitions = b.get("num.partitions").expect("num.partitions described");
    assert!(partitions.is_read_only);
    let mut resource = kafka_protocol::messages::alter_configs_request::AlterConfigsResource::default();
    resource.resource_type = 4;
    resource.resource_name = StrBytes::from_static_str("0");
    let mut config = kafka_protocol::messages::alter_configs_request::AlterableConfig::default();
    config.name = StrBytes::from_static_str("num.partitions");
    config.value = Some(StrBytes::from_static_str("7"));
    resource.configs = vec![config];
    let mut req = AlterConfigsRequest::default();
    req.resources = vec![resource];
    let resp: AlterConfigsResponse = w.call(ApiKey::AlterConfigs, 2, &req);
    assert_eq!(resp.responses[0].error_code, 42, "INVALID_REQUEST for a static broker config");
    assert!(resp.responses[0].error_message.as_ref().is_some_and(|m| m.contains("static")));

    // Unknown topic.
    let missing = block_on(admin.describe_configs(&[ResourceSpecifier::Topic("no-such-topic")], &opts()))
        .expect("describe configs");
    assert!(missing[0].as_ref().map_or(true, |r| r.entries.is_empty()), "nothing described: {missing:?}");

    broker.stop();
    broker.restart();
    let admin: AdminClient<DefaultClientContext> =
        ClientConfig::new().set("bootstrap.servers", broker.bootstrap()).create().expect("admin client");
    let r = describe(&admin, ResourceSpecifier::Topic(TOPIC));
    assert_eq!(value(&r, "max.message.bytes").as_deref(), Some("2000"), "after a restart");
    assert_eq!(value(&r, "cleanup.policy").as_deref(), Some("delete,compact"), "after a restart");
    match produce(&broker.bootstrap(), 5_000) {
        Err(KafkaError::MessageProduction(RDKafkaErrorCode::MessageSizeTooLarge)) => {}
        other => panic!("max.message.bytes applies after a restart: {other:?}"),
    }
}
