//! DescribeTransactions, version 0: each transactional id's state,
//! producer, timeout, start time and partitions, from the shard that
//! coordinates it (ids fan out by coordinator and gather in request order).

use std::{collections::BTreeMap, rc::Rc};

use kafka_protocol::messages::{
    describe_transactions_response::{TopicData, TransactionState},
    DescribeTransactionsRequest, DescribeTransactionsResponse, TopicName, TransactionalId,
};

use crate::protocol::errors;
use crate::server::handlers::{str_bytes, txn_route};
use crate::shard::Shard;
use crate::txn::{DescribeTxns, TxnDescription};

pub async fn handle(shard: &Rc<Shard>, req: DescribeTransactionsRequest) -> DescribeTransactionsResponse {
    let ids: Vec<String> = req.transactional_ids.iter().map(|id| id.0.to_string()).collect();
    let mut by_owner: BTreeMap<usize, Vec<String>> = BTreeMap::new();
    let mut found: BTreeMap<String, TxnDescription> = BTreeMap::new();
    for id in &ids {
        match txn_route::coordinator_of(shard, id) {
            Some(owner) => by_owner.entry(owner).or_default().push(id.clone()),
            None => {
                found.insert(id.clone(), missing(id, errors::COORDINATOR_NOT_AVAILABLE));
            }
        }
    }
    for (owner, transactional_ids) in by_owner {
        let asked = transactional_ids.clone();
        match shard.ask(owner, DescribeTxns { transactional_ids }).await {
            Ok(described) => found.extend(described.into_iter().map(|d| (d.transactional_id.clone(), d))),
            Err(_) => found.extend(asked.iter().map(|id| (id.clone(), missing(id, errors::COORDINATOR_NOT_AVAILABLE)))),
        }
    }
    let mut resp = DescribeTransactionsResponse::default();
    for id in ids {
        let d = found.get(&id).cloned().unwrap_or_else(|| missing(&id, errors::TRANSACTIONAL_ID_NOT_FOUND));
        let mut s = TransactionState::default();
        s.error_code = d.error;
        s.transactional_id = TransactionalId(str_bytes(&d.transactional_id));
        s.transaction_state = str_bytes(d.state);
        s.transaction_timeout_ms = d.timeout_ms;
        s.transaction_start_time_ms = d.start_ms;
        s.producer_id = d.producer_id.into();
        s.producer_epoch = d.producer_epoch;
        for (topic, partitions) in d.partitions {
            let mut t = TopicData::default();
            t.topic = TopicName(str_bytes(&topic));
            t.partitions = partitions;
            s.topics.push(t);
        }
        resp.transaction_states.push(s);
    }
    resp
}

fn missing(id: &str, error: errors::ErrorCode) -> TxnDescription {
    TxnDescription {
        error,
        transactional_id: id.to_string(),
        state: "",
        timeout_ms: 0,
        start_ms: -1,
        producer_id: -1,
        producer_epoch: -1,
        partitions: Vec::new(),
    }
}
