//! Fetching from the nearest replica (KIP-392; issue 18: "consumers may
//! fetch from the nearest replica"): three brokers in racks rack-1, rack-2
//! and rack-3 with the rack-aware replica selector. Metadata tells each
//! broker's rack. A librdkafka consumer whose client.rack is a follower's
//! rack, bootstrapped at the leader, reads every record another client
//! produced, in order: the leader sends it to the follower, which serves
//! it from its copy, records produced afterwards included (the follower
//! learns the high watermark from its leader, which answers its followers
//! as soon as that moves).

mod common;

use std::time::{Duration, Instant};

use common::{
    cluster::{broker, create, leaders, metadata, partitions, start_cluster_each, wait_for_three, wait_until},
    scrape::{scrape, sum},
    wire::{fetch_request, Wire},
};
use kafka_protocol::messages::{ApiKey, FetchResponse};
use rdkafka::{consumer::BaseConsumer, message::Message};

fn settings(id: i32) -> String {
    format!(
        "broker_heartbeat_interval_ms = 200\nbroker_session_timeout_ms = 3000\nbroker_rack = \"rack-{id}\"\n\
         replica_selector = \"rack-aware\"\n"
    )
}

/// Polls `consumer` until `want` values came, or 30 s.
fn read(consumer: &BaseConsumer, want: usize) -> Vec<String> {
    let mut got = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(30);
    while got.len() < want && Instant::now() < deadline {
        if let Some(m) = consumer.poll(Duration::from_millis(200)) {
            let m = m.expect("a consumer error");
            got.push(String::from_utf8_lossy(m.payload().unwrap_or_default()).into_owned());
        }
    }
    got
}

#[test]
fn a_consumer_reads_from_the_in_sync_replica_in_its_rack() {
    let dir = common::tempdir().unwrap();
    let brokers = start_cluster_each(dir.path(), 3, 3, 1, settings);
    wait_for_three(&brokers);

    let told = metadata(broker(&brokers, 2), None, false);
    let mut racks: Vec<(i32, Option<String>)> =
        told.brokers.iter().map(|b| (b.node_id.0, b.rack.as_ref().map(|r| r.to_string()))).collect();
    racks.sort();
    let expected: Vec<(i32, Option<String>)> = (1..=3).map(|id| (id, Some(format!("rack-{id}")))).collect();
    assert_eq!(racks, expected, "Metadata's brokers and their racks");

    let mut w = Wire::connect(&broker(&brokers, 1).bootstrap());
    assert_eq!(create(&mut w, "near", 1, 3, &[]).0, 0);
    for (_, b) in &brokers {
        wait_until(b, "near", "three in sync", |p| p.0 > 0 && p.2 == vec![1, 2, 3]);
    }
    let leader = leaders(broker(&brokers, 1), "near").expect("a leader")[0];
    let follower = (1..=3).find(|&id| id != leader).unwrap();
    let at_leader = broker(&brokers, leader).bootstrap();

    let first: Vec<(i32, String)> = (0..200).map(|i| (0, format!("near-{i}"))).collect();
    assert_eq!(common::produce::produce(&at_leader, "near", &first).len(), 200);

    let rack = format!("rack-{follower}");
    let consumer = common::consume::from_start(&at_leader, "near-readers", "near", 1, &[("client.rack", &rack)]);
    let got = read(&consumer, 200);
    let want: Vec<String> = first.iter().map(|(_, v)| v.clone()).collect();
    assert_eq!(got, want, "the first 200 records, once each, in order");

    // Records produced while the consumer reads its follower: the follower
    // serves them once its leader's high watermark reaches it.
    let second: Vec<(i32, String)> = (200..250).map(|i| (0, format!("near-{i}"))).collect();
    assert_eq!(common::produce::produce(&at_leader, "near", &second).len(), 50);
    let got = read(&consumer, 50);
    let want: Vec<String> = second.iter().map(|(_, v)| v.clone()).collect();
    assert_eq!(got, want, "the next 50 records, once each, in order");

    let metric = |id: i32, name: &str| sum(&scrape(broker(&brokers, id)), name, &[]);
    let referrals = metric(leader, "shardlog_read_replica_referrals_total");
    assert!(referrals >= 1.0, "leader {leader} never sent the consumer in {rack} to broker {follower}");
    // The followers were answered as the high watermark moved, which the
    // consumer reading one waits for, not at the end of their long polls.
    let told = metric(leader, "shardlog_high_watermark_answers_total");
    assert!(told >= 1.0, "leader {leader} never answered a follower for its high watermark alone");
    let served = metric(follower, "shardlog_follower_reads_total");
    assert!(served >= 1.0, "follower {follower} in {rack} served the consumer no read");
    for other in (1..=3).filter(|&id| id != leader && id != follower) {
        assert_eq!(metric(other, "shardlog_follower_reads_total"), 0.0, "broker {other} is not in {rack}");
    }

    // A reader's current_leader_epoch is checked, at the leader and at a
    // follower serving consumers: newer than the broker's is
    // UNKNOWN_LEADER_EPOCH (75); -1 is not checked (older, FENCED_LEADER_EPOCH,
    // is the unit test's: this partition is at its first epoch).
    for id in [leader, follower] {
        let epoch = partitions(broker(&brokers, id), "near")[0].3;
        let mut w = Wire::connect(&broker(&brokers, id).bootstrap());
        let codes: Vec<i16> = [-1, epoch, epoch + 1]
            .into_iter()
            .map(|asked| {
                let mut request = fetch_request("near", &[(0, 0)], 0, 1);
                request.topics[0].partitions[0].current_leader_epoch = asked;
                let response: FetchResponse = w.call(ApiKey::Fetch, 12, &request);
                response.responses[0].partitions[0].error_code
            })
            .collect();
        assert_eq!(codes, vec![0, 0, 75], "broker {id} at leader epoch {epoch}");
    }
}
