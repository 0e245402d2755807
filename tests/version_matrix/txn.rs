//! The transaction APIs in the version matrix: each version against the
//! transaction coordinator, with the fencing error its version knows
//! (KIP-588: PRODUCER_FENCED from InitProducerId 4, AddPartitionsToTxn 2,
//! AddOffsetsToTxn 2, EndTxn 2; INVALID_PRODUCER_EPOCH before).

use kafka_protocol::messages::*;

use super::{s, Wire, NONE, TOPIC, UNKNOWN_TOPIC_OR_PARTITION};

const INVALID_PRODUCER_EPOCH: i16 = 47;
const INVALID_TXN_STATE: i16 = 48;
const PRODUCER_FENCED: i16 = 90;
const TRANSACTIONAL_ID_NOT_FOUND: i16 = 105;

fn fenced(v: i16, from: i16) -> i16 {
    if v >= from {
        PRODUCER_FENCED
    } else {
        INVALID_PRODUCER_EPOCH
    }
}

/// InitProducerId v4 for `id`: (producer id, epoch).
pub fn init(w: &mut Wire, id: &str) -> (i64, i16) {
    let mut req = InitProducerIdRequest::default();
    req.transactional_id = Some(s(id).into());
    req.transaction_timeout_ms = 60_000;
    req.producer_id = (-1).into();
    req.producer_epoch = -1;
    let resp: InitProducerIdResponse = w.call(ApiKey::InitProducerId, 4, &req);
    assert_eq!(resp.error_code, NONE, "InitProducerId for {id}");
    (resp.producer_id.0, resp.producer_epoch)
}

fn add_partitions_request(
    id: &str,
    (pid, epoch): (i64, i16),
    topic: &str,
    partition: i32,
) -> AddPartitionsToTxnRequest {
    let mut t = add_partitions_to_txn_request::AddPartitionsToTxnTopic::default();
    t.name = super::topic_name(topic);
    t.partitions = vec![partition];
    let mut req = AddPartitionsToTxnRequest::default();
    req.v3_and_below_transactional_id = s(id).into();
    req.v3_and_below_producer_id = pid.into();
    req.v3_and_below_producer_epoch = epoch;
    req.v3_and_below_topics = vec![t];
    req
}

fn add_partition(w: &mut Wire, v: i16, id: &str, producer: (i64, i16), topic: &str, partition: i32) -> i16 {
    let resp: AddPartitionsToTxnResponse =
        w.call(ApiKey::AddPartitionsToTxn, v, &add_partitions_request(id, producer, topic, partition));
    assert_eq!(resp.results_by_topic_v3_and_below.len(), 1);
    resp.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code
}

fn end(w: &mut Wire, v: i16, id: &str, (pid, epoch): (i64, i16), commit: bool) -> i16 {
    let mut req = EndTxnRequest::default();
    req.transactional_id = s(id).into();
    req.producer_id = pid.into();
    req.producer_epoch = epoch;
    req.committed = commit;
    let resp: EndTxnResponse = w.call(ApiKey::EndTxn, v, &req);
    resp.error_code
}

fn add_offsets(w: &mut Wire, v: i16, id: &str, (pid, epoch): (i64, i16), group: &str) -> i16 {
    let mut req = AddOffsetsToTxnRequest::default();
    req.transactional_id = s(id).into();
    req.producer_id = pid.into();
    req.producer_epoch = epoch;
    req.group_id = s(group).into();
    let resp: AddOffsetsToTxnResponse = w.call(ApiKey::AddOffsetsToTxn, v, &req);
    resp.error_code
}

pub fn init_producer_id(w: &mut Wire, v: i16) {
    let id = format!("matrix-init-v{v}");
    let mut req = InitProducerIdRequest::default();
    req.transactional_id = Some(s(&id).into());
    req.transaction_timeout_ms = 60_000;
    if v >= 3 {
        req.producer_id = (-1).into();
        req.producer_epoch = -1;
    }
    let first: InitProducerIdResponse = w.call(ApiKey::InitProducerId, v, &req);
    assert_eq!((first.error_code, first.producer_epoch), (NONE, 0));
    assert!(first.producer_id.0 >= 0);
    let second: InitProducerIdResponse = w.call(ApiKey::InitProducerId, v, &req);
    assert_eq!((second.error_code, second.producer_id, second.producer_epoch), (NONE, first.producer_id, 1));
    if v >= 3 {
        // KIP-360: a producer two epochs behind is fenced (one behind is
        // taken as a retry of the last bump, as Kafka does).
        let _third: InitProducerIdResponse = w.call(ApiKey::InitProducerId, v, &req);
        req.producer_id = first.producer_id;
        req.producer_epoch = first.producer_epoch;
        let zombie: InitProducerIdResponse = w.call(ApiKey::InitProducerId, v, &req);
        assert_eq!(zombie.error_code, fenced(v, 4));
    }
}

pub fn add_partitions_to_txn(w: &mut Wire, v: i16) {
    let id = format!("matrix-apt-v{v}");
    let old = init(w, &id);
    let producer = init(w, &id);
    assert_eq!(add_partition(w, v, &id, producer, TOPIC, 0), NONE);
    assert_eq!(add_partition(w, v, &id, producer, TOPIC, 1), NONE);
    assert_eq!(add_partition(w, v, &id, old, TOPIC, 1), fenced(v, 2));
    assert_eq!(add_partition(w, v, &id, producer, "matrix-no-such-topic", 0), UNKNOWN_TOPIC_OR_PARTITION);
    assert_eq!(end(w, 0, &id, producer, false), NONE);
}

pub fn add_offsets_to_txn(w: &mut Wire, v: i16) {
    let id = format!("matrix-aot-v{v}");
    let old = init(w, &id);
    let producer = init(w, &id);
    assert_eq!(add_offsets(w, v, &id, producer, "matrix-g"), NONE);
    assert_eq!(add_offsets(w, v, &id, old, "matrix-g"), fenced(v, 2));
    assert_eq!(end(w, 0, &id, producer, true), NONE);
}

pub fn end_txn(w: &mut Wire, v: i16) {
    let id = format!("matrix-end-v{v}");
    let old = init(w, &id);
    let producer = init(w, &id);
    assert_eq!(end(w, v, &id, producer, true), INVALID_TXN_STATE, "nothing is open");
    assert_eq!(add_partition(w, 0, &id, producer, TOPIC, 0), NONE);
    assert_eq!(end(w, v, &id, old, true), fenced(v, 2));
    assert_eq!(end(w, v, &id, producer, true), NONE);
    assert_eq!(end(w, v, &id, producer, true), NONE, "a retried commit");
    assert_eq!(end(w, v, &id, producer, false), INVALID_TXN_STATE);
}

fn fetch_committed(w: &mut Wire, group: &str) -> i64 {
    let mut t = offset_fetch_request::OffsetFetchRequestTopic::default();
    t.name = super::topic_name(TOPIC);
    t.partition_indexes = vec![1];
    let mut req = OffsetFetchRequest::default();
    req.group_id = s(group).into();
    req.topics = Some(vec![t]);
    let resp: OffsetFetchResponse = w.call(ApiKey::OffsetFetch, 5, &req);
    resp.topics[0].partitions[0].committed_offset
}

pub fn txn_offset_commit(w: &mut Wire, v: i16) {
    let id = format!("matrix-toc-v{v}");
    let group = format!("matrix-toc-g{v}");
    let producer = init(w, &id);
    assert_eq!(add_offsets(w, 0, &id, producer, &group), NONE);
    let mut p = txn_offset_commit_request::TxnOffsetCommitRequestPartition::default();
    p.partition_index = 1;
    p.committed_offset = 3;
    p.committed_metadata = Some(s("txn-meta"));
    let mut t = txn_offset_commit_request::TxnOffsetCommitRequestTopic::default();
    t.name = super::topic_name(TOPIC);
    t.partitions = vec![p];
    let mut req = TxnOffsetCommitRequest::default();
    req.transactional_id = s(&id).into();
    req.group_id = s(&group).into();
    req.producer_id = producer.0.into();
    req.producer_epoch = producer.1;
    req.topics = vec![t];
    let resp: TxnOffsetCommitResponse = w.call(ApiKey::TxnOffsetCommit, v, &req);
    assert_eq!(resp.topics[0].partitions[0].error_code, NONE);
    assert_eq!(fetch_committed(w, &group), -1, "pending until the transaction commits");
    assert_eq!(end(w, 0, &id, producer, true), NONE);
    assert_eq!(fetch_committed(w, &group), 3, "committed with the transaction");
    // Aborted: the offset stays where the commit left it.
    assert_eq!(add_offsets(w, 0, &id, producer, &group), NONE);
    req.topics[0].partitions[0].committed_offset = 9;
    let resp: TxnOffsetCommitResponse = w.call(ApiKey::TxnOffsetCommit, v, &req);
    assert_eq!(resp.topics[0].partitions[0].error_code, NONE);
    assert_eq!(end(w, 0, &id, producer, false), NONE);
    assert_eq!(fetch_committed(w, &group), 3, "an aborted transaction's offsets are dropped");
}

pub fn describe_transactions(w: &mut Wire, v: i16) {
    let id = format!("matrix-desc-v{v}");
    let producer = init(w, &id);
    assert_eq!(add_partition(w, 0, &id, producer, TOPIC, 1), NONE);
    let mut req = DescribeTransactionsRequest::default();
    req.transactional_ids = vec![s(&id).into(), s("matrix-nobody").into()];
    let resp: DescribeTransactionsResponse = w.call(ApiKey::DescribeTransactions, v, &req);
    let d = &resp.transaction_states[0];
    assert_eq!((d.error_code, d.transaction_state.as_str()), (NONE, "Ongoing"));
    assert_eq!((d.producer_id.0, d.producer_epoch, d.transaction_timeout_ms), (producer.0, producer.1, 60_000));
    assert!(d.transaction_start_time_ms > 0);
    assert_eq!(d.topics.len(), 1);
    assert_eq!((d.topics[0].topic.as_str(), d.topics[0].partitions.clone()), (TOPIC, vec![1]));
    assert_eq!(resp.transaction_states[1].error_code, TRANSACTIONAL_ID_NOT_FOUND);
    assert_eq!(end(w, 0, &id, producer, false), NONE);
}

pub fn list_transactions(w: &mut Wire, v: i16) {
    let id = format!("matrix-list-v{v}");
    let producer = init(w, &id);
    let mut req = ListTransactionsRequest::default();
    let all: ListTransactionsResponse = w.call(ApiKey::ListTransactions, v, &req);
    assert_eq!(all.error_code, NONE);
    let ours = all.transaction_states.iter().find(|t| t.transactional_id.as_str() == id).expect("listed");
    assert_eq!((ours.producer_id.0, ours.transaction_state.as_str()), (producer.0, "Empty"));
    req.state_filters = vec![s("Ongoing"), s("Bogus")];
    req.producer_id_filters = vec![producer.0.into()];
    let filtered: ListTransactionsResponse = w.call(ApiKey::ListTransactions, v, &req);
    assert!(filtered.transaction_states.is_empty(), "{id} is Empty, not Ongoing");
    assert_eq!(filtered.unknown_state_filters, vec![s("Bogus")]);
}
