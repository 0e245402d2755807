//! CreateTopics and CreatePartitions answer success only for partitions
//! that opened. Here a partition cannot open (a plain file sits where its
//! directory goes): the request is answered KAFKA_STORAGE_ERROR naming the
//! partition, and the topic is left as it was before: a new topic is not
//! listed and its other partitions' files are gone; a grown topic keeps
//! its old partition count and still takes writes. Once the obstacle is
//! removed, the same requests succeed.

mod common;

use common::{
    broker::Broker,
    wire::{create_partitions, create_topic, create_topic_answer, produce, topic_name, Wire},
};
use kafka_protocol::messages::*;

const KAFKA_STORAGE_ERROR: i16 = 56;

/// Partition counts of `name` in a Metadata answer; None when not listed.
fn listed(w: &mut Wire, name: &str) -> Option<usize> {
    let mut req = MetadataRequest::default();
    let mut t = metadata_request::MetadataRequestTopic::default();
    t.name = Some(topic_name(name));
    req.topics = Some(vec![t]);
    let resp: MetadataResponse = w.call(ApiKey::Metadata, 9, &req);
    let topic = resp.topics.iter().find(|t| t.name.as_ref().is_some_and(|n| n.0.as_str() == name))?;
    (topic.error_code == 0).then_some(topic.partitions.len())
}

#[test]
fn a_partition_that_cannot_open_undoes_its_topic_change() {
    let dir = common::tempdir().unwrap();
    let data = dir.path().join("data");
    let broker = Broker::start_with_config(&data, 2, "auto_create_topics = false\n", &[]);
    let mut w = Wire::connect(&broker.bootstrap());

    // A new topic of 4 partitions whose partition 2 cannot open.
    std::fs::write(data.join("blocked-2"), b"not a directory").unwrap();
    let (code, message) = create_topic_answer(&mut w, "blocked", 4);
    assert_eq!(code, KAFKA_STORAGE_ERROR, "{message}");
    assert!(message.contains("partition blocked-2 could not be opened"), "{message}");
    assert_eq!(listed(&mut w, "blocked"), None, "no half-made topic");
    for p in [0, 1, 3] {
        assert!(!data.join(format!("blocked-{p}")).exists(), "blocked-{p}'s files were removed");
    }
    std::fs::remove_file(data.join("blocked-2")).unwrap();
    assert_eq!(create_topic(&mut w, "blocked", 4), 0, "the same request succeeds once it can");
    assert_eq!(listed(&mut w, "blocked"), Some(4));

    // A partition that fails inside its own directory (a directory where its
    // first segment file goes): the directory is removed with the undo.
    std::fs::create_dir_all(data.join("inside-1/00000000000000000000.log")).unwrap();
    let (code, message) = create_topic_answer(&mut w, "inside", 2);
    assert_eq!(code, KAFKA_STORAGE_ERROR, "{message}");
    assert!(message.contains("partition inside-1 could not be opened"), "{message}");
    assert!(!data.join("inside-0").exists() && !data.join("inside-1").exists(), "no directory left behind");
    assert_eq!(create_topic(&mut w, "inside", 2), 0);

    // Growing a topic from 2 to 5 partitions when partition 3 cannot open.
    assert_eq!(create_topic(&mut w, "grows", 2), 0);
    std::fs::write(data.join("grows-3"), b"not a directory").unwrap();
    let (code, message) = create_partitions(&mut w, "grows", 5);
    assert_eq!(code, KAFKA_STORAGE_ERROR, "{message}");
    assert!(message.contains("partition grows-3 could not be opened"), "{message}");
    assert_eq!(listed(&mut w, "grows"), Some(2), "the topic keeps its old partition count");
    assert!(!data.join("grows-2").exists() && !data.join("grows-4").exists(), "the added partitions' files are gone");
    let batch = common::free_batch_bytes(&mut common::Rng::new(5), 2);
    assert_eq!(produce(&mut w, "grows", 1, batch.into(), 1), (0, 0), "the old partitions still take writes");
    std::fs::remove_file(data.join("grows-3")).unwrap();
    assert_eq!(create_partitions(&mut w, "grows", 5).0, 0);
    assert_eq!(listed(&mut w, "grows"), Some(5));
}
