//! Connections accepted by every shard produce to partitions owned by every
//! shard; every batch is read back, byte for byte, at its offset.

mod common;

use std::collections::BTreeMap;

use common::{broker::Broker, free_batch_bytes, wire::*, Rng};
use kafka_protocol::messages::{ApiKey, FetchResponse};

const TOPIC: &str = "spread";
const PARTITIONS: i32 = 6;
const CONNECTIONS: usize = 16;

#[test]
fn every_shard_serves_connections_for_every_partition() {
    let dir = common::tempdir().unwrap();
    let port = common::broker::free_port();
    let broker = Broker::start_on(dir.path(), port, 2, &[("SHARDLOG_LOG", "debug")]);
    let mut admin = Wire::connect(&broker.bootstrap());
    assert_eq!(create_topic(&mut admin, TOPIC, PARTITIONS), 0);
    let mut rng = Rng::new(77);
    // partition -> offset -> batch bytes as produced
    let mut sent: BTreeMap<i32, BTreeMap<i64, Vec<u8>>> = BTreeMap::new();
    let mut conns: Vec<Wire> = (0..CONNECTIONS).map(|_| Wire::connect(&broker.bootstrap())).collect();
    for round in 0..3 {
        for (c, w) in conns.iter_mut().enumerate() {
            for p in 0..PARTITIONS {
                let batch = free_batch_bytes(&mut rng, 1 + (c + round) % 4);
                let (error, base) = produce(w, TOPIC, p, batch.clone().into(), -1);
                assert_eq!(error, 0, "connection {c} partition {p}");
                sent.entry(p).or_default().insert(base, batch);
            }
        }
    }
    for shard in 0..2 {
        let (found, log) = broker.wait_for_log(&format!("shard {shard}: accepted connection"));
        assert!(found, "no connection landed on shard {shard}: {log}");
    }
    for p in 0..PARTITIONS {
        let resp: FetchResponse = admin.call(ApiKey::Fetch, 12, &fetch_request(TOPIC, &[(p, 0)], 0, 1));
        let records = resp.responses[0].partitions[0].records.clone().unwrap();
        let mut at = 0usize;
        let mut found = 0;
        for (base, _) in batches(&records) {
            let len = i32::from_be_bytes(records[at + 8..at + 12].try_into().unwrap()) as usize + 12;
            let mut want = sent[&p][&base].clone();
            want[..8].copy_from_slice(&base.to_be_bytes());
            assert!(records[at..at + len] == want[..], "partition {p} batch at {base} differs");
            at += len;
            found += 1;
        }
        assert_eq!(found, sent[&p].len(), "partition {p}: all batches read back");
    }
}
