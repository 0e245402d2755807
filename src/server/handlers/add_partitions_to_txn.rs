//! AddPartitionsToTxn, versions 0–3 (v4+, the broker-to-broker batch of
//! KIP-890, is not offered): the partitions join the producer's open
//! transaction at its coordinator; answered per partition.

use std::rc::Rc;

use kafka_protocol::messages::{
    add_partitions_to_txn_response::{AddPartitionsToTxnPartitionResult, AddPartitionsToTxnTopicResult},
    AddPartitionsToTxnRequest, AddPartitionsToTxnResponse, TopicName,
};

use crate::server::handlers::{str_bytes, txn_route};
use crate::shard::Shard;
use crate::txn::AddTxnPartitions;

pub async fn handle(shard: &Rc<Shard>, req: AddPartitionsToTxnRequest, version: i16) -> AddPartitionsToTxnResponse {
    let id = req.v3_and_below_transactional_id.0.to_string();
    let partitions: Vec<(String, i32)> = req
        .v3_and_below_topics
        .iter()
        .flat_map(|t| t.partitions.iter().map(move |p| (t.name.0.to_string(), *p)))
        .collect();
    let call = AddTxnPartitions {
        transactional_id: id.clone(),
        producer_id: req.v3_and_below_producer_id.0,
        producer_epoch: req.v3_and_below_producer_epoch,
        partitions: partitions.clone(),
    };
    let answers = match txn_route::call(shard, &id, call).await {
        Some(answers) => answers,
        None => {
            let code = txn_route::no_coordinator(shard, &id);
            partitions.into_iter().map(|(t, p)| (t, p, code)).collect()
        }
    };
    let mut resp = AddPartitionsToTxnResponse::default();
    for (topic, partition, error) in answers {
        let at = match resp.results_by_topic_v3_and_below.iter().position(|r| r.name.0.as_str() == topic) {
            Some(at) => at,
            None => {
                let mut r = AddPartitionsToTxnTopicResult::default();
                r.name = TopicName(str_bytes(&topic));
                resp.results_by_topic_v3_and_below.push(r);
                resp.results_by_topic_v3_and_below.len() - 1
            }
        };
        let mut p = AddPartitionsToTxnPartitionResult::default();
        p.partition_index = partition;
        p.partition_error_code = txn_route::fenced_as(error, version, 2);
        resp.results_by_topic_v3_and_below[at].results_by_partition.push(p);
    }
    resp
}
