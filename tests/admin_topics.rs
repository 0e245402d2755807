//! Topic administration over the protocol: CreateTopics validation and
//! configs, validate_only, DeleteTopics removing files, acks=0 producing
//! without a response, and topic metadata surviving a restart.

mod common;

use common::{broker::Broker, free_batch_bytes, wire::*, Rng};
use kafka_protocol::{
    messages::{
        create_topics_request::{CreatableTopic, CreatableTopicConfig},
        ApiKey, CreateTopicsRequest, CreateTopicsResponse, DeleteTopicsRequest, DeleteTopicsResponse, FetchResponse,
        MetadataRequest, MetadataResponse, ProduceRequest,
    },
    protocol::StrBytes,
};

fn topic(name: &str, partitions: i32, replication: i16, configs: &[(&str, &str)]) -> CreatableTopic {
    let mut t = CreatableTopic::default();
    t.name = topic_name(name);
    t.num_partitions = partitions;
    t.replication_factor = replication;
    for (k, v) in configs {
        let mut c = CreatableTopicConfig::default();
        c.name = StrBytes::from_string(k.to_string());
        c.value = Some(StrBytes::from_string(v.to_string()));
        t.configs.push(c);
    }
    t
}

fn create(w: &mut Wire, topics: Vec<CreatableTopic>, validate_only: bool) -> Vec<(String, i16)> {
    let mut req = CreateTopicsRequest::default();
    req.topics = topics;
    req.validate_only = validate_only;
    let resp: CreateTopicsResponse = w.call(ApiKey::CreateTopics, 7, &req);
    resp.topics.iter().map(|t| (t.name.0.to_string(), t.error_code)).collect()
}

/// The user topics Metadata lists; `__consumer_offsets` is always there too,
/// marked internal.
fn topic_names(w: &mut Wire) -> Vec<String> {
    let mut req = MetadataRequest::default();
    req.topics = None;
    let meta: MetadataResponse = w.call(ApiKey::Metadata, 12, &req);
    let offsets = meta.topics.iter().find(|t| t.name.as_ref().is_some_and(|n| n.0.as_str() == "__consumer_offsets"));
    assert!(offsets.is_some_and(|t| t.is_internal && t.partitions.len() == 50), "__consumer_offsets, internal");
    let mut names: Vec<String> = meta
        .topics
        .iter()
        .filter(|t| !t.is_internal)
        .filter_map(|t| t.name.as_ref().map(|n| n.0.to_string()))
        .collect();
    names.sort();
    names
}

#[test]
fn create_validate_delete_and_restart() {
    let dir = common::tempdir().unwrap();
    let mut broker = Broker::start(dir.path(), 2);
    let mut w = Wire::connect(&broker.bootstrap());
    let results = create(
        &mut w,
        vec![
            topic("good", 3, 1, &[("retention.ms", "3600000"), ("cleanup.policy", "delete")]),
            topic("bad/name", 1, 1, &[]),
            topic("zero", 0, 1, &[]),
            topic("replicated", 1, 3, &[]),
            topic("badconfig", 1, 1, &[("segment.bytes", "-1")]),
            topic("unknownconfig", 1, 1, &[("no.such.config", "1")]),
        ],
        false,
    );
    assert_eq!(
        results,
        vec![
            ("good".into(), 0),
            ("bad/name".into(), 17),
            ("zero".into(), 37),
            ("replicated".into(), 38),
            ("badconfig".into(), 40),
            ("unknownconfig".into(), 40),
        ]
    );
    assert_eq!(create(&mut w, vec![topic("good", 3, 1, &[])], false), vec![("good".into(), 36)]);
    assert_eq!(create(&mut w, vec![topic("dry", 2, 1, &[])], true), vec![("dry".into(), 0)]);
    assert_eq!(topic_names(&mut w), vec!["good"], "validate_only created nothing");
    for p in 0..3 {
        assert!(dir.path().join(format!("good-{p}")).is_dir(), "partition directory good-{p}");
    }

    // acks=0: no response; the next request's response proves ordering and the data landed.
    let mut rng = Rng::new(4);
    let mut req = ProduceRequest::default();
    req.acks = 0;
    req.timeout_ms = 1000;
    let mut pd = kafka_protocol::messages::produce_request::PartitionProduceData::default();
    pd.index = 1;
    pd.records = Some(free_batch_bytes(&mut rng, 5).into());
    let mut td = kafka_protocol::messages::produce_request::TopicProduceData::default();
    td.name = topic_name("good");
    td.partition_data.push(pd);
    req.topic_data.push(td);
    w.send_unanswered(ApiKey::Produce, 9, &req);
    let resp: FetchResponse = w.call(ApiKey::Fetch, 12, &fetch_request("good", &[(1, 0)], 1000, 1));
    assert_eq!(batches(resp.responses[0].partitions[0].records.as_ref().unwrap()), vec![(0, 5)]);

    broker.stop();
    broker.restart();
    let mut w = Wire::connect(&broker.bootstrap());
    assert_eq!(topic_names(&mut w), vec!["good"], "topics survive a restart");

    let mut del = DeleteTopicsRequest::default();
    del.topic_names = vec![topic_name("good"), topic_name("missing"), topic_name("__consumer_offsets")];
    let resp: DeleteTopicsResponse = w.call(ApiKey::DeleteTopics, 5, &del);
    let codes: Vec<i16> = resp.responses.iter().map(|r| r.error_code).collect();
    assert_eq!(codes, vec![0, 3, 17], "internal topics cannot be deleted");
    assert!(topic_names(&mut w).is_empty());
    for p in 0..3 {
        assert!(!dir.path().join(format!("good-{p}")).exists(), "files of good-{p} removed");
    }
    let (error, _) = produce(&mut w, "good", 0, free_batch_bytes(&mut rng, 1).into(), 1);
    assert_eq!(error, 0, "auto-creation brings the topic back on produce");
    assert_eq!(topic_names(&mut w), vec!["good"]);
}
