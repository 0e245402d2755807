//! Long poll: a fetch waiting on an empty partition returns promptly when a
//! produce lands on it (even on another shard), and an idle one returns after
//! max_wait_ms with nothing, without the broker burning CPU meanwhile.

mod common;

use std::time::{Duration, Instant};

use bytes::Bytes;
use common::{broker::Broker, random_batch, wire::*, Rng};
use kafka_protocol::messages::{ApiKey, FetchResponse};

#[test]
fn idle_fetch_waits_max_wait_and_costs_no_cpu() {
    let dir = common::tempdir().unwrap();
    let broker = Broker::start(dir.path(), 2);
    let mut w = Wire::connect(&broker.bootstrap());
    assert_eq!(create_topic(&mut w, "idle", 2), 0);
    let cpu_before = broker.cpu_time();
    let start = Instant::now();
    let resp: FetchResponse = w.call(ApiKey::Fetch, 12, &fetch_request("idle", &[(0, 0), (1, 0)], 2000, 1));
    let waited = start.elapsed();
    let cpu = broker.cpu_time() - cpu_before;
    println!("idle fetch waited {waited:?}, broker used {cpu:?} CPU");
    assert!(waited >= Duration::from_millis(1900) && waited < Duration::from_millis(3000), "waited {waited:?}");
    let parts = &resp.responses[0].partitions;
    assert_eq!(parts.len(), 2, "every requested partition is echoed");
    assert!(parts.iter().all(|p| p.error_code == 0 && p.records.as_ref().is_none_or(Bytes::is_empty)));
    assert!(cpu < Duration::from_millis(300), "broker used {cpu:?} of CPU during a 2 s idle wait");
}

#[test]
fn waiting_fetch_returns_within_50ms_of_a_produce() {
    let dir = common::tempdir().unwrap();
    let broker = Broker::start(dir.path(), 2);
    let mut w = Wire::connect(&broker.bootstrap());
    assert_eq!(create_topic(&mut w, "wake", 2), 0);
    let mut offsets = [(0, 0i64), (1, 0i64)];
    for partition in 0..2 {
        let bootstrap = broker.bootstrap();
        let from = offsets;
        let waiter = std::thread::spawn(move || {
            let mut f = Wire::connect(&bootstrap);
            let resp: FetchResponse = f.call(ApiKey::Fetch, 12, &fetch_request("wake", &from, 2000, 1));
            (Instant::now(), resp)
        });
        std::thread::sleep(Duration::from_millis(300));
        let batch = random_batch(&mut Rng::new(partition as u64), 3, 100).freeze();
        let sent = Instant::now();
        let (error, base) = produce(&mut w, "wake", partition, batch, 1);
        assert_eq!((error, base), (0, 0));
        let (returned, resp) = waiter.join().unwrap();
        let delay = returned.saturating_duration_since(sent);
        println!("partition {partition}: fetch returned {delay:?} after the produce was sent");
        assert!(delay <= Duration::from_millis(50), "fetch returned {delay:?} after the produce");
        let p = resp.responses[0].partitions.iter().find(|p| p.partition_index == partition).unwrap();
        assert_eq!(batches(p.records.as_ref().unwrap()), vec![(0, 3)], "the produced batch came back");
        offsets[partition as usize].1 = 3;
    }
}
