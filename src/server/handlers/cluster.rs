//! The cluster-level APIs admin tools call: DescribeCluster (versions 0–2),
//! OffsetForLeaderEpoch (2–4) and DescribeLogDirs (1–4).
//!
//! A partition's leader epoch is 0 alone; in a quorum the log names it
//! (one more at each change of leader), and the owner answers where an
//! epoch ends from the partition's epochs (`storage::replica_files`).

use std::rc::Rc;

use kafka_protocol::messages::{
    describe_cluster_response::DescribeClusterBroker,
    describe_log_dirs_response::{DescribeLogDirsPartition, DescribeLogDirsResult, DescribeLogDirsTopic},
    offset_for_leader_epoch_response::{EpochEndOffset, OffsetForLeaderTopicResult},
    BrokerId, DescribeClusterRequest, DescribeClusterResponse, DescribeLogDirsRequest, DescribeLogDirsResponse,
    OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse, TopicName,
};

use crate::protocol::errors;
use crate::{
    server::handlers::str_bytes,
    shard::{
        messages::{EpochEnd, Metrics},
        router, Shard,
    },
};

/// Kafka's "authorized operations not requested" sentinel.
const OPERATIONS_NOT_REQUESTED: i32 = i32::MIN;

pub fn describe_cluster(
    shard: &Rc<Shard>,
    _request: DescribeClusterRequest,
    session: &crate::security::Session,
) -> DescribeClusterResponse {
    let s = &shard.settings;
    let (brokers, controller) = crate::controller::advertised_brokers(s, &session.listener);
    let mut response = DescribeClusterResponse::default();
    for b in brokers {
        let mut broker = DescribeClusterBroker::default();
        broker.broker_id = BrokerId(b.node_id);
        broker.host = str_bytes(&b.host);
        broker.port = b.port;
        broker.rack = b.rack.as_deref().map(str_bytes);
        response.brokers.push(broker);
    }
    response.cluster_id = str_bytes(&s.cluster_id);
    response.controller_id = BrokerId(controller);
    response.cluster_authorized_operations = OPERATIONS_NOT_REQUESTED;
    response
}

pub async fn offset_for_leader_epoch(
    shard: &Rc<Shard>,
    request: OffsetForLeaderEpochRequest,
) -> OffsetForLeaderEpochResponse {
    let table = shard.topics();
    let mut response = OffsetForLeaderEpochResponse::default();
    for topic in request.topics {
        let name = topic.topic.0.to_string();
        let found = table.topics.get_key_value(name.as_str());
        let mut result = OffsetForLeaderTopicResult::default();
        result.topic = topic.topic.clone();
        for p in topic.partitions {
            let mut e = EpochEndOffset::default();
            e.partition = p.partition;
            let owner = router::owner(&table, &name, p.partition, shard.count);
            let no_owner = router::no_owner_error(&table, &name, p.partition);
            let epoch = found.map_or(0, |(_, meta)| meta.epoch_of(p.partition));
            (e.error_code, e.leader_epoch, e.end_offset) = match found.zip(owner) {
                None => (no_owner, -1, -1),
                Some(_) if p.current_leader_epoch > epoch => (errors::UNKNOWN_LEADER_EPOCH, -1, -1),
                Some(_) if (0..epoch).contains(&p.current_leader_epoch) => (errors::FENCED_LEADER_EPOCH, -1, -1),
                Some(((handle, _), owner)) => {
                    let call = EpochEnd { topic: handle.clone(), partition: p.partition, epoch: p.leader_epoch };
                    shard.ask(owner, call).await.unwrap_or((errors::KAFKA_STORAGE_ERROR, -1, -1))
                }
            };
            result.partitions.push(e);
        }
        response.topics.push(result);
    }
    response
}

pub async fn describe_log_dirs(
    shard: &Rc<Shard>,
    request: DescribeLogDirsRequest,
    version: i16,
) -> DescribeLogDirsResponse {
    // Partition sizes come from every shard's metrics snapshot: an admin
    // call, rare enough that a full snapshot per shard costs nothing that
    // matters, and it keeps one way of asking a shard about its partitions.
    let mut sizes = std::collections::BTreeMap::new();
    for target in 0..shard.count {
        if let Ok(snapshot) = shard.ask(target, Metrics).await {
            for p in &snapshot.partitions {
                sizes.insert((p.topic.clone(), p.partition), p.segment_bytes);
            }
        }
    }
    let wanted = |topic: &str, partition: i32| match &request.topics {
        None => true,
        Some(topics) => topics.iter().any(|t| t.topic.0.as_str() == topic && t.partitions.contains(&partition)),
    };
    let mut dir = DescribeLogDirsResult::default();
    dir.log_dir = str_bytes(&shard.settings.data_dir.display().to_string());
    for ((topic, partition), bytes) in sizes {
        if !wanted(&topic, partition) {
            continue;
        }
        let mut p = DescribeLogDirsPartition::default();
        p.partition_index = partition;
        p.partition_size = bytes as i64;
        match dir.topics.iter_mut().find(|t| t.name.0.as_str() == topic) {
            Some(t) => t.partitions.push(p),
            None => {
                let mut t = DescribeLogDirsTopic::default();
                t.name = TopicName(str_bytes(&topic));
                t.partitions.push(p);
                dir.topics.push(t);
            }
        }
    }
    // The file system's size and free space exist from v4.
    if version >= 4 {
        if let Ok((total, usable)) = disk_space(&shard.settings.data_dir) {
            dir.total_bytes = total as i64;
            dir.usable_bytes = usable as i64;
        }
    }
    let mut response = DescribeLogDirsResponse::default();
    response.results = vec![dir];
    response
}

/// The file system's size and the bytes an unprivileged writer may still
/// use, from statvfs(3).
#[allow(unsafe_code)]
fn disk_space(path: &std::path::Path) -> std::io::Result<(u64, u64)> {
    use std::os::unix::ffi::OsStrExt;
    let c_path = std::ffi::CString::new(path.as_os_str().as_bytes()).map_err(std::io::Error::other)?;
    let mut st = std::mem::MaybeUninit::<libc::statvfs>::zeroed();
    // SAFETY: `c_path` is a valid NUL-terminated string and `st` points to
    // writable memory of the size statvfs fills.
    let rc = unsafe { libc::statvfs(c_path.as_ptr(), st.as_mut_ptr()) };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: statvfs returned 0, so it filled the struct.
    let st = unsafe { st.assume_init() };
    // The statvfs fields are u64 here but narrower on other targets.
    #[allow(clippy::unnecessary_cast)]
    let (block, blocks, available) = (st.f_frsize as u64, st.f_blocks as u64, st.f_bavail as u64);
    Ok((blocks * block, available * block))
}
