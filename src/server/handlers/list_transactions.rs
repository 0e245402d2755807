//! ListTransactions, version 0: every transactional id of every shard,
//! filtered by state names and producer ids (v1's duration filter and v2's
//! id pattern are not offered). Unknown state names come back in
//! `unknown_state_filters`, as Kafka answers them.

use std::rc::Rc;

use kafka_protocol::messages::{
    list_transactions_response::TransactionState, ListTransactionsRequest, ListTransactionsResponse, TransactionalId,
};

use crate::protocol::errors;
use crate::server::handlers::str_bytes;
use crate::shard::Shard;
use crate::txn::{ListTxns, TxnState};

pub async fn handle(shard: &Rc<Shard>, req: ListTransactionsRequest) -> ListTransactionsResponse {
    let mut resp = ListTransactionsResponse::default();
    let states: Vec<String> = req.state_filters.iter().map(|s| s.to_string()).collect();
    let (known, unknown): (Vec<String>, Vec<String>) =
        states.into_iter().partition(|s| TxnState::ALL.iter().any(|k| k.name() == s));
    resp.unknown_state_filters = unknown.iter().map(|s| str_bytes(s)).collect();
    if !unknown.is_empty() && known.is_empty() {
        return resp; // only unknown states asked for: nothing can match
    }
    let producer_ids: Vec<i64> = req.producer_id_filters.iter().map(|p| p.0).collect();
    for target in 0..shard.count {
        let call = ListTxns { states: known.clone(), producer_ids: producer_ids.clone() };
        match shard.ask(target, call).await {
            Ok(listed) => {
                for l in listed {
                    let mut s = TransactionState::default();
                    s.transactional_id = TransactionalId(str_bytes(&l.transactional_id));
                    s.producer_id = l.producer_id.into();
                    s.transaction_state = str_bytes(l.state);
                    resp.transaction_states.push(s);
                }
            }
            Err(_) => resp.error_code = errors::COORDINATOR_NOT_AVAILABLE,
        }
    }
    resp
}
