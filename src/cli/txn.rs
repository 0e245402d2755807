//! `shardlog txn list|describe --bootstrap HOST:PORT`: transactional ids of
//! a running broker over the Kafka protocol (ListTransactions v0,
//! DescribeTransactions v0), like kafka-transactions.sh.

use kafka_protocol::{
    messages::{
        ApiKey, DescribeTransactionsRequest, DescribeTransactionsResponse, ListTransactionsRequest,
        ListTransactionsResponse, TransactionalId,
    },
    protocol::StrBytes,
};

use crate::{cli::CLIENT_ID, client::Client};

fn list_ids(c: &mut Client) -> Result<Vec<(String, i64, String)>, String> {
    let resp: ListTransactionsResponse = c.call(ApiKey::ListTransactions, 0, &ListTransactionsRequest::default())?;
    if resp.error_code != 0 {
        return Err(format!("ListTransactions failed with error {}", resp.error_code));
    }
    let mut out: Vec<_> = resp
        .transaction_states
        .iter()
        .map(|t| (t.transactional_id.0.to_string(), t.producer_id.0, t.transaction_state.to_string()))
        .collect();
    out.sort();
    Ok(out)
}

pub fn list(bootstrap: &str) -> Result<(), String> {
    let mut c = Client::connect(bootstrap, CLIENT_ID)?;
    println!("{:<40} {:>12} STATE", "TRANSACTIONAL-ID", "PRODUCER-ID");
    for (id, producer_id, state) in list_ids(&mut c)? {
        println!("{id:<40} {producer_id:>12} {state}");
    }
    Ok(())
}

pub fn describe(bootstrap: &str, transactional_id: Option<&str>) -> Result<(), String> {
    let mut c = Client::connect(bootstrap, CLIENT_ID)?;
    let ids: Vec<String> = match transactional_id {
        Some(id) => vec![id.to_string()],
        None => list_ids(&mut c)?.into_iter().map(|(id, _, _)| id).collect(),
    };
    let mut req = DescribeTransactionsRequest::default();
    req.transactional_ids = ids.iter().map(|id| TransactionalId(StrBytes::from_string(id.clone()))).collect();
    let resp: DescribeTransactionsResponse = c.call(ApiKey::DescribeTransactions, 0, &req)?;
    println!(
        "{:<32} {:<16} {:>12} {:>6} {:>10} {:>14} PARTITIONS",
        "TRANSACTIONAL-ID", "STATE", "PRODUCER-ID", "EPOCH", "TIMEOUT-MS", "START-MS"
    );
    for t in &resp.transaction_states {
        if t.error_code != 0 {
            println!("{:<32} error {}", t.transactional_id.0.as_str(), t.error_code);
            continue;
        }
        let partitions: Vec<String> =
            t.topics.iter().flat_map(|tp| tp.partitions.iter().map(move |p| format!("{}-{p}", tp.topic.0))).collect();
        println!(
            "{:<32} {:<16} {:>12} {:>6} {:>10} {:>14} {}",
            t.transactional_id.0.as_str(),
            t.transaction_state.as_str(),
            t.producer_id.0,
            t.producer_epoch,
            t.transaction_timeout_ms,
            t.transaction_start_time_ms,
            partitions.join(",")
        );
    }
    Ok(())
}
