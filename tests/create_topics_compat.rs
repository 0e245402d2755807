//! CreateTopics with `compression.type`, through librdkafka's admin client.

mod common;

use std::time::Duration;

use common::broker::Broker;
use rdkafka::{
    admin::{AdminClient, AdminOptions, NewTopic, TopicReplication},
    client::DefaultClientContext,
    consumer::{BaseConsumer, Consumer},
    types::RDKafkaErrorCode,
    ClientConfig,
};

fn admin(broker: &Broker) -> AdminClient<DefaultClientContext> {
    ClientConfig::new().set("bootstrap.servers", broker.bootstrap()).create().unwrap()
}

fn partitions(broker: &Broker, topic: &str) -> usize {
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", broker.bootstrap())
        .set("allow.auto.create.topics", "false")
        .create()
        .unwrap();
    let md = consumer.fetch_metadata(Some(topic), Duration::from_secs(10)).unwrap();
    md.topics()[0].partitions().len()
}

/// Kafka's compression.type values are accepted (only `producer` is acted
/// on, see README), an unknown one is INVALID_CONFIG.
#[test]
fn compression_type_is_a_topic_config() {
    let dir = common::tempdir().unwrap();
    let broker = Broker::start(&dir.path().join("data"), 1);
    let topics: Vec<NewTopic> = ["producer", "lz4", "zstd", "brotli"]
        .iter()
        .map(|c| NewTopic::new(c, 2, TopicReplication::Fixed(1)).set("compression.type", c))
        .collect();
    let created = futures_lite::future::block_on(admin(&broker).create_topics(&topics, &AdminOptions::new())).unwrap();
    assert_eq!(
        created,
        vec![
            Ok("producer".to_string()),
            Ok("lz4".to_string()),
            Ok("zstd".to_string()),
            Err(("brotli".to_string(), RDKafkaErrorCode::InvalidConfig)),
        ]
    );
    assert_eq!(partitions(&broker, "producer"), 2);
}
