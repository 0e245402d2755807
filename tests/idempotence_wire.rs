//! The idempotent producer's rules at the protocol level, with hand-built
//! batches: InitProducerId hands out distinct ids (also across a restart)
//! and bumps epochs; a retried batch is answered with its original offset
//! and not written again (also after a SIGKILL); a gap is
//! OUT_OF_ORDER_SEQUENCE_NUMBER, an old epoch INVALID_PRODUCER_EPOCH, a new
//! epoch starts at sequence 0; a transactional id gets its own producer id
//! from the transaction coordinator, and the next epoch on a second init.

mod common;

use common::{broker::Broker, wire::*};
use kafka_protocol::{
    messages::{ApiKey, FetchResponse, InitProducerIdRequest, InitProducerIdResponse, TransactionalId},
    protocol::StrBytes,
};

const TOPIC: &str = "idem-wire";

/// A batch of `n` records with idempotence fields (`common::txn::batch`).
fn batch(producer_id: i64, epoch: i16, base_sequence: i32, n: usize) -> bytes::Bytes {
    let values: Vec<String> =
        (0..n).map(|i| format!("p{producer_id}-e{epoch}-s{}", base_sequence as usize + i)).collect();
    let values: Vec<&str> = values.iter().map(String::as_str).collect();
    common::txn::batch(producer_id, epoch, base_sequence, &values, false)
}

fn init(w: &mut Wire, current: Option<(i64, i16)>) -> (i16, i64, i16) {
    let mut req = InitProducerIdRequest::default();
    req.transactional_id = None;
    req.transaction_timeout_ms = 60_000;
    let (id, epoch) = current.unwrap_or((-1, -1));
    req.producer_id = id.into();
    req.producer_epoch = epoch;
    let resp: InitProducerIdResponse = w.call(ApiKey::InitProducerId, 4, &req);
    (resp.error_code, resp.producer_id.0, resp.producer_epoch)
}

fn record_count(w: &mut Wire) -> i32 {
    let resp: FetchResponse = w.call(ApiKey::Fetch, 12, &fetch_request(TOPIC, &[(0, 0)], 0, 1));
    batches(resp.responses[0].partitions[0].records.as_ref().unwrap()).iter().map(|(_, n)| n).sum()
}

#[test]
fn sequence_rules_over_the_wire() {
    let dir = common::tempdir().unwrap();
    let mut broker = Broker::start(&dir.path().join("data"), 2);
    let mut w = Wire::connect(&broker.bootstrap());
    assert_eq!(create_topic(&mut w, TOPIC, 1), 0);

    let (e1, a, epoch_a) = init(&mut w, None);
    let (e2, b, _) = init(&mut w, None);
    assert_eq!((e1, e2, epoch_a), (0, 0, 0));
    assert_ne!(a, b, "distinct producer ids");

    assert_eq!(produce(&mut w, TOPIC, 0, batch(a, 0, 0, 3), -1), (0, 0));
    assert_eq!(produce(&mut w, TOPIC, 0, batch(a, 0, 3, 2), -1), (0, 3));
    assert_eq!(produce(&mut w, TOPIC, 0, batch(a, 0, 3, 2), -1), (0, 3), "a retry gets its original offset");
    assert_eq!(produce(&mut w, TOPIC, 0, batch(a, 0, 0, 3), -1), (0, 0), "an older retry too");
    assert_eq!(record_count(&mut w), 5, "retries were not written");
    assert_eq!(produce(&mut w, TOPIC, 0, batch(a, 0, 9, 1), -1).0, 45, "a gap");
    assert_eq!(produce(&mut w, TOPIC, 0, batch(b, 0, 4, 1), -1).0, 59, "unknown producer, not at 0");

    // Epochs: a bump starts again at 0, and the old epoch is fenced.
    let (e, same, bumped) = init(&mut w, Some((a, 0)));
    assert_eq!((e, same, bumped), (0, a, 1));
    assert_eq!(produce(&mut w, TOPIC, 0, batch(a, 1, 5, 1), -1).0, 45, "a new epoch starts at 0");
    assert_eq!(produce(&mut w, TOPIC, 0, batch(a, 1, 0, 2), -1), (0, 5));
    assert_eq!(produce(&mut w, TOPIC, 0, batch(a, 0, 5, 1), -1).0, 47, "the old epoch is fenced");

    // After a SIGKILL the state is rebuilt: retries are still duplicates.
    drop(w);
    broker.kill();
    broker.restart();
    let mut w = Wire::connect(&broker.bootstrap());
    assert_eq!(produce(&mut w, TOPIC, 0, batch(a, 1, 0, 2), -1), (0, 5), "a retry after a crash");
    assert_eq!(produce(&mut w, TOPIC, 0, batch(a, 1, 2, 1), -1), (0, 7), "and the sequence continues");
    assert_eq!(record_count(&mut w), 8);
    let (e, c, _) = init(&mut w, None);
    assert_eq!(e, 0);
    assert!(c != a && c != b, "ids are not reused after a restart: {a} {b} {c}");

    // A transactional id gets its producer id from the transaction
    // coordinator: a fresh one, never one an idempotent producer holds.
    let mut req = InitProducerIdRequest::default();
    req.transactional_id = Some(TransactionalId(StrBytes::from_static_str("tx-1")));
    req.transaction_timeout_ms = 60_000;
    req.producer_id = (-1).into();
    req.producer_epoch = -1;
    let resp: InitProducerIdResponse = w.call(ApiKey::InitProducerId, 4, &req);
    assert_eq!((resp.error_code, resp.producer_epoch), (0, 0));
    assert!(![a, b, c].contains(&resp.producer_id.0), "a producer id of its own: {}", resp.producer_id.0);
    let again: InitProducerIdResponse = w.call(ApiKey::InitProducerId, 4, &req);
    assert_eq!((again.error_code, again.producer_id, again.producer_epoch), (0, resp.producer_id, 1));
}
