//! A librdkafka consumer reading whole partitions from their start, by
//! `assign()` (no group membership; librdkafka still wants a `group.id`).

use rdkafka::{
    consumer::{BaseConsumer, Consumer},
    ClientConfig, Offset, TopicPartitionList,
};

/// Partitions `0..partitions` of `topic`, each from its first offset, with
/// `settings` on top of `bootstrap.servers`, `group.id` and no auto-commit.
pub fn from_start(
    bootstrap: &str,
    group: &str,
    topic: &str,
    partitions: i32,
    settings: &[(&str, &str)],
) -> BaseConsumer {
    let mut config = ClientConfig::new();
    config.set("bootstrap.servers", bootstrap).set("group.id", group).set("enable.auto.commit", "false");
    for (name, value) in settings {
        config.set(*name, *value);
    }
    let c: BaseConsumer = config.create().expect("consumer");
    let mut tpl = TopicPartitionList::new();
    for p in 0..partitions {
        tpl.add_partition_offset(topic, p, Offset::Beginning).expect("partition offset");
    }
    c.assign(&tpl).expect("assign");
    c
}
