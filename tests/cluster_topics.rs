//! Topics in the metadata quorum (issue 18, second part): three broker
//! processes on 127.0.0.1 in one quorum. A topic created through one broker
//! is placed by the quorum's leader, its partitions spread over all three;
//! every broker tells clients the same leaders, a request sent to the wrong
//! broker gets NOT_LEADER_OR_FOLLOWER, and librdkafka, given one broker to
//! start from, produces to and consumes from all three in a group whose
//! coordinator is wherever the quorum put the group's offsets partition.
//! A broker's restart keeps the topic; a deletion removes it everywhere.

mod common;

use std::{
    collections::BTreeSet,
    time::{Duration, Instant},
};

use common::{
    broker::Broker,
    cluster::{
        agreed_leaders, broker, consume_in_group, metadata, one_record, read_committed, start_cluster, start_three,
        wait_for_brokers, wait_for_three,
    },
    wire::{create_topic, fetch_request, produce, Wire},
};
use kafka_protocol::messages::{
    ApiKey, DeleteTopicsRequest, DeleteTopicsResponse, DescribeConfigsRequest, DescribeConfigsResponse, FetchResponse,
    FindCoordinatorRequest, FindCoordinatorResponse, IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse,
    TopicName,
};
use kafka_protocol::protocol::StrBytes;
use rdkafka::{
    consumer::{BaseConsumer, Consumer},
    ClientConfig, Offset, TopicPartitionList,
};

const NOT_LEADER_OR_FOLLOWER: i16 = 6;
const UNKNOWN_TOPIC_OR_PARTITION: i16 = 3;

/// IncrementalAlterConfigs (v1) of one topic config.
fn set_topic_config(broker: &Broker, topic: &str, name: &str, value: &str) {
    use kafka_protocol::messages::incremental_alter_configs_request::{AlterConfigsResource, AlterableConfig};
    let mut config = AlterableConfig::default();
    config.name = StrBytes::from_string(name.to_string());
    config.config_operation = 0;
    config.value = Some(StrBytes::from_string(value.to_string()));
    let mut resource = AlterConfigsResource::default();
    resource.resource_type = 2;
    resource.resource_name = StrBytes::from_string(topic.to_string());
    resource.configs.push(config);
    let mut request = IncrementalAlterConfigsRequest::default();
    request.resources.push(resource);
    let response: IncrementalAlterConfigsResponse =
        Wire::connect(&broker.bootstrap()).call(ApiKey::IncrementalAlterConfigs, 1, &request);
    let r = &response.responses[0];
    assert_eq!(r.error_code, 0, "{:?}", r.error_message);
}

/// A topic config's value as `broker` describes it (DescribeConfigs v4).
fn topic_config(broker: &Broker, topic: &str, name: &str) -> Option<String> {
    use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
    let mut resource = DescribeConfigsResource::default();
    resource.resource_type = 2;
    resource.resource_name = StrBytes::from_string(topic.to_string());
    resource.configuration_keys = Some(vec![StrBytes::from_string(name.to_string())]);
    let mut request = DescribeConfigsRequest::default();
    request.resources.push(resource);
    let response: DescribeConfigsResponse =
        Wire::connect(&broker.bootstrap()).call(ApiKey::DescribeConfigs, 4, &request);
    let r = &response.results[0];
    r.configs.iter().find(|c| c.name.as_str() == name).and_then(|c| c.value.as_ref().map(|v| v.to_string()))
}

#[test]
fn topics_are_placed_by_the_quorum_and_clients_follow_their_leaders() {
    let dir = tempfile::tempdir().unwrap();
    let mut brokers = start_three(dir.path());
    wait_for_three(&brokers);

    // Created through broker 1, placed over all three by the leader.
    let mut wire = Wire::connect(&broker(&brokers, 1).bootstrap());
    assert_eq!(create_topic(&mut wire, "spread", 6), 0);
    let placed = agreed_leaders(&brokers, "spread").expect("spread exists everywhere");
    assert_eq!(placed.len(), 6);
    for id in 1..=3 {
        assert_eq!(placed.iter().filter(|&&l| l == id).count(), 2, "two partitions each: {placed:?}");
    }
    assert_eq!(create_topic(&mut Wire::connect(&broker(&brokers, 2).bootstrap()), "spread", 3), 36, "exists");

    // Only the leader has a partition's directory; another broker refuses
    // to take or serve its records.
    for (p, &leader) in placed.iter().enumerate() {
        for (id, _) in &brokers {
            let has = dir.path().join(format!("b{id}/spread-{p}")).is_dir();
            assert_eq!(has, *id == leader, "spread-{p} led by {leader}: on broker {id}? {has}");
        }
        let other = if leader == 1 { 2 } else { 1 };
        let mut w = Wire::connect(&broker(&brokers, other).bootstrap());
        assert_eq!(produce(&mut w, "spread", p as i32, one_record("misdirected"), -1).0, NOT_LEADER_OR_FOLLOWER);
        let fetched: FetchResponse = w.call(ApiKey::Fetch, 12, &fetch_request("spread", &[(p as i32, 0)], 0, 0));
        assert_eq!(fetched.responses[0].partitions[0].error_code, NOT_LEADER_OR_FOLLOWER);
    }

    // librdkafka from broker 2 alone reaches every leader.
    let records: Vec<(i32, String)> = (0..60).map(|i| (i % 6, format!("r{i}"))).collect();
    let delivered = common::produce::produce(&broker(&brokers, 2).bootstrap(), "spread", &records);
    assert_eq!(delivered.len(), 60);

    // A group through broker 3 finds its coordinator wherever the quorum
    // put it, reads every record in order per partition, and commits.
    let got = consume_in_group(&broker(&brokers, 3).bootstrap(), "readers", "spread", 60);
    for p in 0..6 {
        let sent: Vec<String> = records.iter().filter(|(q, _)| *q == p).map(|(_, v)| v.clone()).collect();
        assert_eq!(got.get(&p), Some(&sent), "partition {p}");
    }
    let mut find = FindCoordinatorRequest::default();
    find.key = StrBytes::from_static_str("readers");
    let coordinators: BTreeSet<i32> = brokers
        .iter()
        .map(|(_, b)| {
            let r: FindCoordinatorResponse = Wire::connect(&b.bootstrap()).call(ApiKey::FindCoordinator, 3, &find);
            assert_eq!(r.error_code, 0);
            r.node_id.0
        })
        .collect();
    assert_eq!(coordinators.len(), 1, "every broker names one coordinator for the group: {coordinators:?}");

    // The group's commits hold: asked through broker 1, the coordinator
    // has each partition's end.
    let asker: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", broker(&brokers, 1).bootstrap())
        .set("group.id", "readers")
        .create()
        .expect("consumer");
    let mut tpl = TopicPartitionList::new();
    for p in 0..6 {
        tpl.add_partition("spread", p);
    }
    let committed = asker.committed_offsets(tpl, Duration::from_secs(20)).expect("committed offsets");
    for e in committed.elements() {
        assert_eq!(e.offset(), Offset::Offset(10), "committed offset of spread-{}", e.partition());
    }
    drop(asker);

    // A broker killed and restarted still has the topic and serves its
    // partitions.
    let restarted = placed[0];
    let b = &mut brokers.iter_mut().find(|(id, _)| *id == restarted).unwrap().1;
    b.kill();
    b.restart();
    wait_for_three(&brokers);
    assert_eq!(agreed_leaders(&brokers, "spread"), Ok(placed.clone()));
    let reread = common::consume::from_start(&broker(&brokers, restarted).bootstrap(), "check", "spread", 6, &[]);
    let mut count = 0;
    let deadline = Instant::now() + Duration::from_secs(30);
    while count < 60 && Instant::now() < deadline {
        if let Some(Ok(_)) = reread.poll(Duration::from_millis(200)) {
            count += 1;
        }
    }
    assert_eq!(count, 60, "records read back after broker {restarted} restarted");

    // Grown through broker 2: the new partitions are placed over the
    // brokers too, and every broker agrees.
    let grown = common::wire::create_partitions(&mut Wire::connect(&broker(&brokers, 2).bootstrap()), "spread", 9);
    assert_eq!(grown.0, 0, "{}", grown.1);
    let placed9 = agreed_leaders(&brokers, "spread").expect("spread exists everywhere");
    assert_eq!((placed9.len(), &placed9[..6]), (9, &placed[..]), "old partitions keep their leaders");
    assert_eq!(placed9[6..].iter().collect::<BTreeSet<_>>().len(), 3, "new ones spread: {placed9:?}");
    let placed = placed9;

    // A config set through broker 3 is what broker 1 describes.
    set_topic_config(broker(&brokers, 3), "spread", "retention.ms", "3600000");
    let deadline = Instant::now() + Duration::from_secs(10);
    while topic_config(broker(&brokers, 1), "spread", "retention.ms").as_deref() != Some("3600000") {
        assert!(Instant::now() < deadline, "broker 1 never saw the config set through broker 3");
        std::thread::sleep(Duration::from_millis(100));
    }

    // Auto-created through one broker: the others know it too.
    let auto = metadata(broker(&brokers, 3), Some(&["made-by-metadata"]), true);
    assert!(matches!(auto.topics[0].error_code, 0 | 5), "auto-created: {}", auto.topics[0].error_code);
    assert!(agreed_leaders(&brokers, "made-by-metadata").is_ok());

    // Deleted through broker 3, gone from every broker and disk.
    let mut delete = DeleteTopicsRequest::default();
    delete.topic_names = vec![TopicName(StrBytes::from_static_str("spread"))];
    delete.timeout_ms = 10_000;
    let deleted: DeleteTopicsResponse =
        Wire::connect(&broker(&brokers, 3).bootstrap()).call(ApiKey::DeleteTopics, 4, &delete);
    assert_eq!(deleted.responses[0].error_code, 0);
    assert_eq!(agreed_leaders(&brokers, "spread"), Err(UNKNOWN_TOPIC_OR_PARTITION));
    let deadline = Instant::now() + Duration::from_secs(10);
    while (0..9).any(|p| dir.path().join(format!("b{}/spread-{p}", placed[p])).exists()) {
        assert!(Instant::now() < deadline, "partition directories of the deleted topic remain");
        std::thread::sleep(Duration::from_millis(100));
    }
    for (_, b) in brokers.iter_mut() {
        b.stop();
    }
}

/// A transaction whose coordinator is one broker and whose partitions are
/// led by all three: the coordinator writes its markers on the others
/// (WriteTxnMarkers between brokers), so a read_committed consumer sees
/// the committed transaction and not the aborted one, on every partition.
#[test]
fn a_transaction_commits_and_aborts_across_brokers() {
    use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
    let dir = tempfile::tempdir().unwrap();
    let mut brokers = start_three(dir.path());
    wait_for_three(&brokers);
    assert_eq!(create_topic(&mut Wire::connect(&broker(&brokers, 1).bootstrap()), "ledger", 3), 0);
    let placed = agreed_leaders(&brokers, "ledger").expect("ledger exists everywhere");
    assert_eq!(placed.iter().collect::<BTreeSet<_>>().len(), 3, "one partition per broker: {placed:?}");

    let timeout = Duration::from_secs(30);
    let producer: BaseProducer = ClientConfig::new()
        .set("bootstrap.servers", broker(&brokers, 2).bootstrap())
        .set("transactional.id", "ledger-writer")
        .set("linger.ms", "1")
        .create()
        .expect("producer");
    producer.init_transactions(timeout).expect("init_transactions");
    for (round, commit) in [(0, true), (1, false), (2, true)] {
        producer.begin_transaction().expect("begin_transaction");
        for p in 0..3 {
            let value = format!("t{round}-p{p}");
            producer.send(BaseRecord::<(), _>::to("ledger").partition(p).payload(&value)).expect("send");
        }
        producer.flush(timeout).expect("flush");
        if commit {
            producer.commit_transaction(timeout).expect("commit_transaction");
        } else {
            producer.abort_transaction(timeout).expect("abort_transaction");
        }
    }

    let got = read_committed(&broker(&brokers, 3).bootstrap(), "ledger", 3, 6);
    for p in 0..3 {
        assert_eq!(got.get(&p), Some(&vec![format!("t0-p{p}"), format!("t2-p{p}")]), "ledger-{p} read committed");
    }
    for (_, b) in brokers.iter_mut() {
        b.stop();
    }
}

/// A fourth broker whose node id is not a voter's joins the cluster as a
/// broker only: it is listed, leads its share of a topic created through
/// it, serves librdkafka, keeps working when the quorum's leader dies, and
/// leaves Metadata at once when it stops cleanly.
#[test]
fn a_broker_outside_the_quorum_joins_the_cluster() {
    let dir = tempfile::tempdir().unwrap();
    let mut brokers = start_cluster(dir.path(), 3, 4);
    wait_for_brokers(&brokers, &[1, 2, 3, 4]);
    let fourth = broker(&brokers, 4).bootstrap();
    assert_eq!(create_topic(&mut Wire::connect(&fourth), "wide", 8), 0);
    let placed = agreed_leaders(&brokers, "wide").expect("wide exists everywhere");
    for id in 1..=4 {
        assert_eq!(placed.iter().filter(|&&l| l == id).count(), 2, "two partitions each: {placed:?}");
    }
    let controller = metadata(broker(&brokers, 4), Some(&[]), false).controller_id.0;
    assert!((1..=3).contains(&controller), "a voter is the controller, not {controller}");

    let records: Vec<(i32, String)> = (0..40).map(|i| (i % 8, format!("w{i}"))).collect();
    assert_eq!(common::produce::produce(&fourth, "wide", &records).len(), 40);
    let got = consume_in_group(&fourth, "wide-readers", "wide", 40);
    assert_eq!(got.values().map(Vec::len).sum::<usize>(), 40, "{got:?}");

    // The quorum's leader dies; the fourth broker finds the next one.
    let at = brokers.iter().position(|(id, _)| *id == controller).unwrap();
    brokers[at].1.kill();
    let deadline = Instant::now() + Duration::from_secs(30);
    let (code, message) = loop {
        let answer = common::wire::create_topic_answer(&mut Wire::connect(&fourth), "after", 4);
        if answer.0 == 0 || Instant::now() > deadline {
            break answer;
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    assert_eq!(code, 0, "created through broker 4 after the leader's SIGKILL: {message}");
    let others: Vec<(i32, &Broker)> =
        brokers.iter().filter(|(id, _)| *id != controller).map(|(id, b)| (*id, b)).collect();
    let deadline = Instant::now() + Duration::from_secs(30);
    while others.iter().any(|(_, b)| common::cluster::leaders(b, "after").is_err()) {
        assert!(Instant::now() < deadline, "the live brokers never all knew the topic made after the kill");
        std::thread::sleep(Duration::from_millis(100));
    }

    // A clean stop of the fourth: the quorum fences it at once.
    let b4 = brokers.iter().position(|(id, _)| *id == 4).unwrap();
    brokers[b4].1.stop();
    let live: Vec<i32> = (1..=3).filter(|id| *id != controller).collect();
    let deadline = Instant::now() + Duration::from_secs(2);
    loop {
        let listed: Vec<i32> =
            metadata(broker(&brokers, live[0]), Some(&[]), false).brokers.iter().map(|b| b.node_id.0).collect();
        if !listed.contains(&4) {
            break;
        }
        assert!(Instant::now() < deadline, "broker 4 still listed after its clean stop: {listed:?}");
        std::thread::sleep(Duration::from_millis(50));
    }
    for (id, b) in brokers.iter_mut() {
        if *id != controller && *id != 4 {
            b.stop();
        }
    }
}
