//! A transaction left open past its timeout is aborted by the broker: over
//! the wire, a producer opens a transaction with a 1 s timeout and goes
//! quiet; the coordinator's check (every 100 ms here) aborts it with a
//! bumped epoch, so DescribeTransactions shows CompleteAbort and the old
//! producer's EndTxn is answered as fenced. Its records never become
//! visible to read_committed (ListOffsets and a confluent-kafka consumer),
//! whose last stable offset moves past them, and a TxnOffsetCommit inside
//! it never becomes a committed offset.

mod common;

use std::time::{Duration, Instant};

use common::{
    broker::Broker,
    txn,
    wire::{create_topic, topic_name, Wire},
};
use kafka_protocol::messages::*;

const CONFIG: &str = "transaction_abort_timed_out_transaction_cleanup_interval_ms = 100\n";
const ID: &str = "timeout-txn";
const TOPIC: &str = "timeout-out";
const READ_UNCOMMITTED: i8 = 0;
const READ_COMMITTED: i8 = 1;
const GROUP: &str = "timeout-group";
const PRODUCER_FENCED: i16 = 90;

fn describe(w: &mut Wire) -> describe_transactions_response::TransactionState {
    let mut req = DescribeTransactionsRequest::default();
    req.transactional_ids = vec![TransactionalId(ID.into())];
    let resp: DescribeTransactionsResponse = w.call(ApiKey::DescribeTransactions, 0, &req);
    resp.transaction_states[0].clone()
}

#[test]
fn an_open_transaction_past_its_timeout_is_aborted_and_its_producer_fenced() {
    let dir = common::tempdir().unwrap();
    let broker = Broker::start_with_config(&dir.path().join("data"), 2, CONFIG, &[]);
    let mut w = Wire::connect(&broker.bootstrap());
    assert_eq!(create_topic(&mut w, TOPIC, 2), 0);

    let mut init = InitProducerIdRequest::default();
    init.transactional_id = Some(TransactionalId(ID.into()));
    init.transaction_timeout_ms = 1000;
    init.producer_id = (-1).into();
    init.producer_epoch = -1;
    let producer: InitProducerIdResponse = w.call(ApiKey::InitProducerId, 4, &init);
    assert_eq!(producer.error_code, 0);

    let mut topic = add_partitions_to_txn_request::AddPartitionsToTxnTopic::default();
    topic.name = topic_name(TOPIC);
    topic.partitions = vec![0, 1];
    let mut add = AddPartitionsToTxnRequest::default();
    add.v3_and_below_transactional_id = TransactionalId(ID.into());
    add.v3_and_below_producer_id = producer.producer_id;
    add.v3_and_below_producer_epoch = producer.producer_epoch;
    add.v3_and_below_topics = vec![topic];
    let added: AddPartitionsToTxnResponse = w.call(ApiKey::AddPartitionsToTxn, 3, &add);
    assert!(added.results_by_topic_v3_and_below[0].results_by_partition.iter().all(|p| p.partition_error_code == 0));

    // Records of the transaction, written and then left open.
    let (pid, epoch) = (producer.producer_id.0, producer.producer_epoch);
    let batch0 = txn::batch(pid, epoch, 0, &["t0-a", "t0-b", "t0-c"], true);
    assert_eq!(txn::produce(&mut w, ID, TOPIC, 0, batch0), (0, 0));
    assert_eq!(txn::produce(&mut w, ID, TOPIC, 1, txn::batch(pid, epoch, 0, &["t1-a", "t1-b"], true)), (0, 0));
    assert_eq!(txn::latest(&mut w, TOPIC, 0, READ_COMMITTED), 0, "the open transaction holds the LSO");
    assert_eq!(txn::latest(&mut w, TOPIC, 0, READ_UNCOMMITTED), 3);

    let mut offsets = AddOffsetsToTxnRequest::default();
    offsets.transactional_id = TransactionalId(ID.into());
    offsets.producer_id = producer.producer_id;
    offsets.producer_epoch = producer.producer_epoch;
    offsets.group_id = GroupId(GROUP.into());
    let answer: AddOffsetsToTxnResponse = w.call(ApiKey::AddOffsetsToTxn, 3, &offsets);
    assert_eq!(answer.error_code, 0);
    let mut p = txn_offset_commit_request::TxnOffsetCommitRequestPartition::default();
    p.partition_index = 0;
    p.committed_offset = 5;
    let mut t = txn_offset_commit_request::TxnOffsetCommitRequestTopic::default();
    t.name = topic_name(TOPIC);
    t.partitions = vec![p];
    let mut commit = TxnOffsetCommitRequest::default();
    commit.transactional_id = TransactionalId(ID.into());
    commit.group_id = GroupId(GROUP.into());
    commit.producer_id = producer.producer_id;
    commit.producer_epoch = producer.producer_epoch;
    commit.topics = vec![t];
    let committed: TxnOffsetCommitResponse = w.call(ApiKey::TxnOffsetCommit, 3, &commit);
    assert_eq!(committed.topics[0].partitions[0].error_code, 0);
    let opened = describe(&mut w);
    assert_eq!(opened.transaction_state.as_str(), "Ongoing");
    let started = Instant::now();

    // The broker aborts it on its own, within the timeout plus a few checks.
    let aborted = loop {
        let d = describe(&mut w);
        if d.transaction_state.as_str() == "CompleteAbort" {
            break d;
        }
        assert!(started.elapsed() < Duration::from_secs(10), "still {} after 10 s", d.transaction_state.as_str());
        std::thread::sleep(Duration::from_millis(50));
    };
    let took = started.elapsed();
    assert!(took >= Duration::from_millis(900), "aborted after {took:?}, before its 1 s timeout");
    assert_eq!(aborted.producer_epoch, producer.producer_epoch + 1, "the abort fences the producer");
    assert!(aborted.topics.is_empty());

    let mut end = EndTxnRequest::default();
    end.transactional_id = TransactionalId(ID.into());
    end.producer_id = producer.producer_id;
    end.producer_epoch = producer.producer_epoch;
    end.committed = true;
    let ended: EndTxnResponse = w.call(ApiKey::EndTxn, 3, &end);
    assert_eq!(ended.error_code, PRODUCER_FENCED, "the timed-out producer cannot commit");

    let mut ft = offset_fetch_request::OffsetFetchRequestTopic::default();
    ft.name = topic_name(TOPIC);
    ft.partition_indexes = vec![0];
    let mut fetch = OffsetFetchRequest::default();
    fetch.group_id = GroupId(GROUP.into());
    fetch.topics = Some(vec![ft]);
    let fetched: OffsetFetchResponse = w.call(ApiKey::OffsetFetch, 5, &fetch);
    assert_eq!(fetched.topics[0].partitions[0].committed_offset, -1, "the aborted offset was dropped");

    // The abort's markers moved each LSO past the records (3 + marker, 2 +
    // marker), and a read_committed consumer never sees them.
    for (partition, end) in [(0, 4), (1, 3)] {
        assert_eq!(txn::latest(&mut w, TOPIC, partition, READ_COMMITTED), end, "LSO of {TOPIC}-{partition}");
        assert_eq!(txn::latest(&mut w, TOPIC, partition, READ_UNCOMMITTED), end);
    }
    let committed = txn::consume_python(&broker.bootstrap(), TOPIC, "read_committed", "0,1");
    assert!(committed.records.is_empty(), "the timed-out transaction's records are visible: {committed:?}");
    assert_eq!(committed.positions, [(0, 4), (1, 3)].into_iter().collect(), "the consumer moved past them");
    let everything = txn::consume_python(&broker.bootstrap(), TOPIC, "read_uncommitted", "0,1");
    let values: Vec<&str> = everything.records.iter().map(|(_, _, v)| v.as_str()).collect();
    assert_eq!(values.len(), 5, "read_uncommitted sees the aborted records: {values:?}");
}
