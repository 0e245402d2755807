//! The transaction APIs behind their checks: WRITE on the transactional
//! id (InitProducerId with an id, AddPartitionsToTxn with WRITE on each
//! topic, AddOffsetsToTxn with READ on the group, EndTxn, TxnOffsetCommit
//! with READ on the group and topics); an idempotent InitProducerId needs
//! IDEMPOTENT_WRITE on the cluster or WRITE on some topic, as Kafka's;
//! Describe/ListTransactions need DESCRIBE on the id; WriteTxnMarkers,
//! between brokers, CLUSTER_ACTION on the cluster.

use std::rc::Rc;

use kafka_protocol::messages::{
    add_partitions_to_txn_response::*, describe_transactions_response::TransactionState, txn_offset_commit_response::*,
    write_txn_markers_response::*, *,
};

use super::{authorize, on_any, on_cluster};
use crate::{
    protocol::errors,
    security::{
        acl::{Operation, ResourceType},
        Session,
    },
    server::handlers,
    shard::Shard,
};

const TXN_DENIED: i16 = errors::TRANSACTIONAL_ID_AUTHORIZATION_FAILED;

fn txn_id(shard: &Shard, session: &Session, op: Operation, id: &str) -> bool {
    authorize(shard, session, op, ResourceType::TransactionalId, id)
}

pub async fn init_producer_id(
    shard: &Rc<Shard>,
    session: &Session,
    req: InitProducerIdRequest,
    version: i16,
) -> InitProducerIdResponse {
    let denied = match req.transactional_id.as_ref() {
        Some(id) => (!txn_id(shard, session, Operation::Write, id.as_str())).then_some(TXN_DENIED),
        None => (!on_cluster(shard, session, Operation::IdempotentWrite)
            && !on_any(shard, session, Operation::Write, ResourceType::Topic))
        .then_some(errors::CLUSTER_AUTHORIZATION_FAILED),
    };
    if let Some(code) = denied {
        return InitProducerIdResponse::default()
            .with_error_code(code)
            .with_producer_id((-1).into())
            .with_producer_epoch(-1);
    }
    handlers::init_producer_id::handle(shard, req, version).await
}

fn partitions_result(
    t: &add_partitions_to_txn_request::AddPartitionsToTxnTopic,
    code: i16,
) -> AddPartitionsToTxnTopicResult {
    let results = t
        .partitions
        .iter()
        .map(|p| AddPartitionsToTxnPartitionResult::default().with_partition_index(*p).with_partition_error_code(code))
        .collect();
    AddPartitionsToTxnTopicResult::default().with_name(t.name.clone()).with_results_by_partition(results)
}

/// v0–3 only (what the broker serves): one transaction per request. As in
/// Kafka, when any topic is refused nothing is added, and the others are
/// answered OPERATION_NOT_ATTEMPTED.
pub async fn add_partitions(
    shard: &Rc<Shard>,
    session: &Session,
    req: AddPartitionsToTxnRequest,
    version: i16,
) -> AddPartitionsToTxnResponse {
    let topics = &req.v3_and_below_topics;
    let id_denied = !txn_id(shard, session, Operation::Write, req.v3_and_below_transactional_id.as_str());
    let topic_denied: Vec<bool> = topics
        .iter()
        .map(|t| id_denied || !authorize(shard, session, Operation::Write, ResourceType::Topic, &t.name))
        .collect();
    if !id_denied && !topic_denied.iter().any(|d| *d) {
        return handlers::add_partitions_to_txn::handle(shard, req, version).await;
    }
    let results = topics
        .iter()
        .zip(topic_denied)
        .map(|(t, denied)| {
            let code = match (id_denied, denied) {
                (true, _) => TXN_DENIED,
                (false, true) => errors::TOPIC_AUTHORIZATION_FAILED,
                (false, false) => errors::OPERATION_NOT_ATTEMPTED,
            };
            partitions_result(t, code)
        })
        .collect();
    AddPartitionsToTxnResponse::default().with_results_by_topic_v3_and_below(results)
}

pub async fn add_offsets(
    shard: &Rc<Shard>,
    session: &Session,
    req: AddOffsetsToTxnRequest,
    version: i16,
) -> AddOffsetsToTxnResponse {
    if !txn_id(shard, session, Operation::Write, req.transactional_id.as_str()) {
        return AddOffsetsToTxnResponse::default().with_error_code(TXN_DENIED);
    }
    if !authorize(shard, session, Operation::Read, ResourceType::Group, req.group_id.as_str()) {
        return AddOffsetsToTxnResponse::default().with_error_code(errors::GROUP_AUTHORIZATION_FAILED);
    }
    handlers::add_offsets_to_txn::handle(shard, req, version).await
}

pub async fn end(shard: &Rc<Shard>, session: &Session, req: EndTxnRequest, version: i16) -> EndTxnResponse {
    if !txn_id(shard, session, Operation::Write, req.transactional_id.as_str()) {
        return EndTxnResponse::default().with_error_code(TXN_DENIED);
    }
    handlers::end_txn::handle(shard, req, version).await
}

pub async fn offset_commit(
    shard: &Rc<Shard>,
    session: &Session,
    mut req: TxnOffsetCommitRequest,
    version: i16,
) -> TxnOffsetCommitResponse {
    let code = if !txn_id(shard, session, Operation::Write, req.transactional_id.as_str()) {
        TXN_DENIED
    } else if !authorize(shard, session, Operation::Read, ResourceType::Group, req.group_id.as_str()) {
        errors::GROUP_AUTHORIZATION_FAILED
    } else {
        // Topics it may not READ are refused; the others are committed.
        let (allowed, denied): (Vec<_>, Vec<_>) = std::mem::take(&mut req.topics)
            .into_iter()
            .partition(|t| authorize(shard, session, Operation::Read, ResourceType::Topic, &t.name));
        req.topics = allowed;
        let mut response = handlers::txn_offset_commit::handle(shard, req, version).await;
        response.topics.extend(refused_offsets(&denied, errors::TOPIC_AUTHORIZATION_FAILED));
        return response;
    };
    TxnOffsetCommitResponse::default().with_topics(refused_offsets(&req.topics, code))
}

fn refused_offsets(
    topics: &[txn_offset_commit_request::TxnOffsetCommitRequestTopic],
    code: i16,
) -> Vec<TxnOffsetCommitResponseTopic> {
    topics
        .iter()
        .map(|t| {
            let partitions = t
                .partitions
                .iter()
                .map(|p| {
                    TxnOffsetCommitResponsePartition::default()
                        .with_partition_index(p.partition_index)
                        .with_error_code(code)
                })
                .collect();
            TxnOffsetCommitResponseTopic::default().with_name(t.name.clone()).with_partitions(partitions)
        })
        .collect()
}

pub async fn describe(
    shard: &Rc<Shard>,
    session: &Session,
    mut req: DescribeTransactionsRequest,
) -> DescribeTransactionsResponse {
    let (allowed, denied): (Vec<_>, Vec<_>) = std::mem::take(&mut req.transactional_ids)
        .into_iter()
        .partition(|id| txn_id(shard, session, Operation::Describe, id.as_str()));
    req.transactional_ids = allowed;
    let mut response = handlers::describe_transactions::handle(shard, req).await;
    for id in denied {
        response.transaction_states.push(
            TransactionState::default()
                .with_transactional_id(id)
                .with_error_code(TXN_DENIED)
                .with_producer_id((-1).into())
                .with_producer_epoch(-1)
                .with_transaction_timeout_ms(-1)
                .with_transaction_start_time_ms(-1),
        );
    }
    response
}

pub async fn list(shard: &Rc<Shard>, session: &Session, req: ListTransactionsRequest) -> ListTransactionsResponse {
    let mut response = handlers::list_transactions::handle(shard, req).await;
    response.transaction_states.retain(|t| txn_id(shard, session, Operation::Describe, t.transactional_id.as_str()));
    response
}

pub async fn write_markers(
    shard: &Rc<Shard>,
    session: &Session,
    req: WriteTxnMarkersRequest,
) -> WriteTxnMarkersResponse {
    if on_cluster(shard, session, Operation::ClusterAction) {
        return handlers::write_txn_markers::handle(shard, req).await;
    }
    let markers = req
        .markers
        .iter()
        .map(|m| {
            let topics = m
                .topics
                .iter()
                .map(|t| {
                    let partitions = t
                        .partition_indexes
                        .iter()
                        .map(|p| {
                            WritableTxnMarkerPartitionResult::default()
                                .with_partition_index(*p)
                                .with_error_code(errors::CLUSTER_AUTHORIZATION_FAILED)
                        })
                        .collect();
                    WritableTxnMarkerTopicResult::default().with_name(t.name.clone()).with_partitions(partitions)
                })
                .collect();
            WritableTxnMarkerResult::default().with_producer_id(m.producer_id).with_topics(topics)
        })
        .collect();
    WriteTxnMarkersResponse::default().with_markers(markers)
}
