//! Transactions in the null broker, enough for a librdkafka transactional
//! producer and a read_committed reader, so the floor of a transactional
//! run (`bench produce --transactional`) is measured as the floor of any
//! other: FindCoordinator for transactional ids (node 0 coordinates all
//! of them), InitProducerId, AddPartitionsToTxn and EndTxn. EndTxn writes
//! each partition's marker and answers once they are all in the tails;
//! nothing is logged or synced. Offsets inside transactions
//! (AddOffsetsToTxn, TxnOffsetCommit) are not offered: the null broker has
//! no groups.

use std::rc::Rc;

use kafka_protocol::{
    messages::{
        add_partitions_to_txn_response::{AddPartitionsToTxnPartitionResult, AddPartitionsToTxnTopicResult},
        find_coordinator_response::Coordinator,
        AddPartitionsToTxnRequest, AddPartitionsToTxnResponse, EndTxnRequest, EndTxnResponse, FindCoordinatorRequest,
        FindCoordinatorResponse, InitProducerIdRequest, InitProducerIdResponse,
    },
    protocol::StrBytes,
};

use super::{
    state::{Core, Marker, Txn},
    tail::codes,
};

/// The coordinator of every transactional id.
const COORDINATOR_NODE: i32 = 0;

/// Transactional ids are coordinated by node 0; a group (key type 0) has
/// no coordinator here, answered COORDINATOR_NOT_AVAILABLE, so a consumer
/// with a `group.id` but `assign()` goes on fetching.
pub fn find_coordinator(core: &Core, request: FindCoordinatorRequest, version: i16) -> FindCoordinatorResponse {
    let keys: Vec<StrBytes> = if version >= 4 { request.coordinator_keys } else { vec![request.key] };
    let mut response = FindCoordinatorResponse::default();
    for key in keys {
        let mut c = Coordinator::default();
        c.key = key;
        if request.key_type == 1 {
            let (host, port) = &core.nodes[COORDINATOR_NODE as usize];
            c.node_id = COORDINATOR_NODE.into();
            c.host = StrBytes::from_string(host.clone());
            c.port = i32::from(*port);
        } else {
            c.error_code = codes::COORDINATOR_NOT_AVAILABLE;
            c.error_message = Some(StrBytes::from_static_str("the null broker has no group coordinator"));
            c.node_id = (-1).into();
            c.port = -1;
        }
        response.coordinators.push(c);
    }
    if version < 4 {
        let c = response.coordinators.pop().unwrap_or_default();
        (response.error_code, response.error_message) = (c.error_code, c.error_message);
        (response.node_id, response.host, response.port) = (c.node_id, c.host, c.port);
    }
    response
}

/// A new producer id, or for a transactional id its producer with the
/// epoch bumped (fencing the one before, whose open transaction is
/// aborted first, as Kafka does).
pub async fn init_producer_id(core: &Rc<Core>, request: InitProducerIdRequest) -> InitProducerIdResponse {
    let mut response = InitProducerIdResponse::default();
    let id = request.transactional_id.map(|id| id.0.to_string()).filter(|id| !id.is_empty());
    let Some(id) = id else {
        response.producer_id = core.new_producer_id().into();
        return response;
    };
    if core.node != COORDINATOR_NODE {
        response.error_code = codes::NOT_COORDINATOR;
        response.producer_id = (-1).into();
        response.producer_epoch = -1;
        return response;
    }
    let known = core.txns.borrow_mut().remove(&id);
    let (producer_id, producer_epoch) = match known {
        None => (core.new_producer_id(), 0),
        Some(old) => {
            abort_partitions(core, &old).await;
            (old.producer_id, old.producer_epoch.saturating_add(1))
        }
    };
    let txn = Txn { producer_id, producer_epoch, partitions: Default::default() };
    core.txns.borrow_mut().insert(id, txn);
    (response.producer_id, response.producer_epoch) = (producer_id.into(), producer_epoch);
    response
}

async fn abort_partitions(core: &Rc<Core>, txn: &Txn) {
    for (topic, partition) in &txn.partitions {
        let marker = Marker {
            topic: topic.clone(),
            partition: *partition,
            producer_id: txn.producer_id,
            producer_epoch: txn.producer_epoch,
            commit: false,
        };
        core.write_marker(marker).await;
    }
}

/// The error for a request naming `id` with this producer and epoch.
fn check(core: &Core, id: &str, producer_id: i64, producer_epoch: i16) -> i16 {
    if core.node != COORDINATOR_NODE {
        return codes::NOT_COORDINATOR;
    }
    match core.txns.borrow().get(id) {
        None => codes::INVALID_PRODUCER_ID_MAPPING,
        Some(t) if t.producer_id != producer_id => codes::INVALID_PRODUCER_ID_MAPPING,
        Some(t) if t.producer_epoch != producer_epoch => codes::INVALID_PRODUCER_EPOCH,
        Some(_) => codes::NONE,
    }
}

/// AddPartitionsToTxn v0–3: the partitions join the open transaction.
pub fn add_partitions(core: &Core, request: AddPartitionsToTxnRequest) -> AddPartitionsToTxnResponse {
    let id = request.v3_and_below_transactional_id.0.to_string();
    let pid = request.v3_and_below_producer_id.0;
    let error = check(core, &id, pid, request.v3_and_below_producer_epoch);
    let mut response = AddPartitionsToTxnResponse::default();
    for t in request.v3_and_below_topics {
        let known = core.topics.borrow().get(t.name.as_str()).map(|s| s.partitions);
        let mut out = AddPartitionsToTxnTopicResult::default();
        for p in t.partitions {
            let mut r = AddPartitionsToTxnPartitionResult::default();
            r.partition_index = p;
            r.partition_error_code = if error != codes::NONE {
                error
            } else if !known.is_some_and(|n| (0..n).contains(&p)) {
                codes::UNKNOWN_TOPIC_OR_PARTITION
            } else {
                let mut txns = core.txns.borrow_mut();
                let txn = txns.get_mut(&id).expect("checked above");
                txn.partitions.insert((t.name.0.to_string(), p));
                codes::NONE
            };
            out.results_by_partition.push(r);
        }
        out.name = t.name;
        response.results_by_topic_v3_and_below.push(out);
    }
    response
}

/// EndTxn v0–3: each partition's marker written, then answered.
pub async fn end_txn(core: &Rc<Core>, request: EndTxnRequest) -> EndTxnResponse {
    let id = request.transactional_id.0.to_string();
    let mut response = EndTxnResponse::default();
    response.error_code = check(core, &id, request.producer_id.0, request.producer_epoch);
    if response.error_code != codes::NONE {
        return response;
    }
    let txn = {
        let mut txns = core.txns.borrow_mut();
        let t = txns.get_mut(&id).expect("checked above");
        Txn { partitions: std::mem::take(&mut t.partitions), ..*t }
    };
    for (topic, partition) in txn.partitions {
        let marker = Marker {
            topic,
            partition,
            producer_id: txn.producer_id,
            producer_epoch: txn.producer_epoch,
            commit: request.committed,
        };
        let error = core.write_marker(marker).await;
        if error != codes::NONE {
            response.error_code = error;
        }
    }
    response
}
