//! A transaction left open past its timeout is aborted by the broker: over
//! the wire, a producer opens a transaction with a 1 s timeout and goes
//! quiet; the coordinator's check (every 100 ms here) aborts it with a
//! bumped epoch, so DescribeTransactions shows CompleteAbort and the old
//! producer's EndTxn is answered as fenced. A TxnOffsetCommit inside it
//! never becomes a committed offset.

mod common;

use std::time::{Duration, Instant};

use common::{
    broker::Broker,
    wire::{create_topic, topic_name, Wire},
};
use kafka_protocol::messages::*;

const CONFIG: &str = "transaction_abort_timed_out_transaction_cleanup_interval_ms = 100\n";
const ID: &str = "timeout-txn";
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
    assert_eq!(create_topic(&mut w, "timeout-out", 2), 0);

    let mut init = InitProducerIdRequest::default();
    init.transactional_id = Some(TransactionalId(ID.into()));
    init.transaction_timeout_ms = 1000;
    init.producer_id = (-1).into();
    init.producer_epoch = -1;
    let producer: InitProducerIdResponse = w.call(ApiKey::InitProducerId, 4, &init);
    assert_eq!(producer.error_code, 0);

    let mut topic = add_partitions_to_txn_request::AddPartitionsToTxnTopic::default();
    topic.name = topic_name("timeout-out");
    topic.partitions = vec![0, 1];
    let mut add = AddPartitionsToTxnRequest::default();
    add.v3_and_below_transactional_id = TransactionalId(ID.into());
    add.v3_and_below_producer_id = producer.producer_id;
    add.v3_and_below_producer_epoch = producer.producer_epoch;
    add.v3_and_below_topics = vec![topic];
    let added: AddPartitionsToTxnResponse = w.call(ApiKey::AddPartitionsToTxn, 3, &add);
    assert!(added.results_by_topic_v3_and_below[0].results_by_partition.iter().all(|p| p.partition_error_code == 0));

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
    t.name = topic_name("timeout-out");
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
    ft.name = topic_name("timeout-out");
    ft.partition_indexes = vec![0];
    let mut fetch = OffsetFetchRequest::default();
    fetch.group_id = GroupId(GROUP.into());
    fetch.topics = Some(vec![ft]);
    let fetched: OffsetFetchResponse = w.call(ApiKey::OffsetFetch, 5, &fetch);
    assert_eq!(fetched.topics[0].partitions[0].committed_offset, -1, "the aborted offset was dropped");
}
