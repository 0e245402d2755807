//! The admin APIs tools and UIs call, through confluent-kafka's AdminClient
//! and kafka-python's KafkaAdminClient (tests/clients/admin_clients.py):
//! DescribeCluster, CreatePartitions, DescribeConfigs,
//! IncrementalAlterConfigs, ListOffsets and DescribeLogDirs. Then
//! OffsetForLeaderEpoch, which consumers send on their own, over the wire.

mod common;

use std::{path::Path, process::Command};

use common::{broker::Broker, wire::*};
use kafka_protocol::messages::{
    offset_for_leader_epoch_request::{OffsetForLeaderPartition, OffsetForLeaderTopic},
    ApiKey, BrokerId, ListOffsetsResponse, OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse,
};

const TOPIC: &str = "administered";

#[test]
fn admin_clients_describe_grow_and_reconfigure_a_topic() {
    let dir = common::tempdir().unwrap();
    let mut broker = Broker::start(dir.path(), 2);
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/clients/admin_clients.py");
    let out = Command::new("python3").arg(script).args([&broker.bootstrap(), TOPIC]).output().expect("run python3");
    assert!(
        out.status.success(),
        "admin clients failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );

    // DeleteRecords' new log start survives a restart.
    broker.stop();
    broker.restart();
    let mut w = Wire::connect(&broker.bootstrap());
    let earliest: ListOffsetsResponse = w.call(ApiKey::ListOffsets, 5, &list_offsets(TOPIC, [0], -2));
    assert_eq!(earliest.topics[0].partitions[0].offset, 5, "log start after a restart");

    // The script wrote 15 records to partition 0; epoch 0 ends there.
    let ask = |partition: i32, current: i32, epoch: i32| {
        let mut p = OffsetForLeaderPartition::default();
        p.partition = partition;
        p.current_leader_epoch = current;
        p.leader_epoch = epoch;
        p
    };
    let mut t = OffsetForLeaderTopic::default();
    t.topic = topic_name(TOPIC);
    t.partitions = vec![ask(0, 0, 0), ask(3, -1, 0), ask(0, 5, 0), ask(0, 0, -1), ask(9, -1, 0)];
    let mut req = OffsetForLeaderEpochRequest::default();
    req.replica_id = BrokerId(-1);
    req.topics = vec![t];
    for version in [2, 4] {
        let resp: OffsetForLeaderEpochResponse = w.call(ApiKey::OffsetForLeaderEpoch, version, &req);
        let got: Vec<(i16, i32, i64)> =
            resp.topics[0].partitions.iter().map(|p| (p.error_code, p.leader_epoch, p.end_offset)).collect();
        assert_eq!(
            got,
            vec![(0, 0, 15), (0, 0, 0), (75, -1, -1), (0, -1, -1), (3, -1, -1)],
            "v{version}: end of epoch 0; an empty new partition; an epoch from the future; no epoch below 0; no partition 9"
        );
    }
}

fn list_offsets(topic: &str, partitions: [i32; 1], which: i64) -> kafka_protocol::messages::ListOffsetsRequest {
    use kafka_protocol::messages::{
        list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic},
        ListOffsetsRequest,
    };
    let mut t = ListOffsetsTopic::default();
    t.name = topic_name(topic);
    for p in partitions {
        let mut lp = ListOffsetsPartition::default();
        lp.partition_index = p;
        lp.timestamp = which;
        t.partitions.push(lp);
    }
    let mut req = ListOffsetsRequest::default();
    req.replica_id = BrokerId(-1);
    req.topics = vec![t];
    req
}
