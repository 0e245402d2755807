//! Requests with two entries in every array, for the walker's tests. Each
//! sets a field only at the versions that carry it, since the crate
//! refuses to encode some fields elsewhere. Names are unique markers, so a
//! test can find the count that follows one in the encoded bytes.

use std::collections::BTreeMap;

use bytes::Bytes;
use kafka_protocol::{
    messages::{
        alter_user_scram_credentials_request::*, create_partitions_request::*, create_topics_request::*,
        delete_records_request::*, delete_topics_request::*, describe_configs_request::*, describe_log_dirs_request::*,
        describe_user_scram_credentials_request::*, elect_leaders_request::TopicPartitions as ElectTopicPartitions,
        fetch_request::*, join_group_request::*, leave_group_request::*, list_offsets_request::*, metadata_request::*,
        offset_commit_request::*, offset_delete_request::*, offset_fetch_request::*,
        offset_for_leader_epoch_request::*, produce_request::*, sync_group_request::*, write_txn_markers_request::*, *,
    },
    protocol::StrBytes,
};

/// Topic ids, where a version carries them instead of names.
pub const TOPIC_ID: [u8; 16] = *b"0123456789abcdef";

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_string())
}

fn topic(v: &str) -> TopicName {
    TopicName(s(v))
}

fn id() -> uuid::Uuid {
    uuid::Uuid::from_bytes(TOPIC_ID)
}

/// One unknown tagged field, so the walker skips by size in flexible versions.
fn unknown(v: i16, flexible_from: i16) -> BTreeMap<i32, Bytes> {
    let mut m = BTreeMap::new();
    if v >= flexible_from {
        m.insert(99, Bytes::from_static(b"tag"));
    }
    m
}

fn two<T>(f: impl Fn(&str) -> T, a: &str, b: &str) -> Vec<T> {
    vec![f(a), f(b)]
}

pub fn metadata(v: i16) -> MetadataRequest {
    let t = |n: &str| {
        let t = MetadataRequestTopic::default().with_name(Some(topic(n))).with_unknown_tagged_fields(unknown(v, 9));
        if v >= 10 {
            t.with_topic_id(id())
        } else {
            t
        }
    };
    MetadataRequest::default().with_topics(Some(two(t, "meta-a", "meta-b"))).with_unknown_tagged_fields(unknown(v, 9))
}

pub fn fetch(v: i16) -> FetchRequest {
    let p = |i: i32| {
        let p = FetchPartition::default().with_partition(i).with_fetch_offset(7).with_partition_max_bytes(1 << 20);
        let p = if v >= 12 { p.with_last_fetched_epoch(3).with_unknown_tagged_fields(unknown(v, 12)) } else { p };
        if v >= 17 {
            p.with_replica_directory_id(id())
        } else {
            p
        }
    };
    let t = |n: &str| {
        let t = FetchTopic::default().with_partitions(vec![p(0), p(1)]);
        if v >= 13 {
            t.with_topic_id(id())
        } else {
            t.with_topic(topic(n))
        }
    };
    let mut r = FetchRequest::default().with_max_wait_ms(500).with_topics(two(t, "fetch-a", "fetch-b"));
    if v >= 7 {
        let f = |n: &str| {
            let f = ForgottenTopic::default().with_partitions(vec![4, 5]);
            if v >= 13 {
                f.with_topic_id(id())
            } else {
                f.with_topic(topic(n))
            }
        };
        r = r.with_session_id(1).with_forgotten_topics_data(two(f, "gone-a", "gone-b"));
    }
    if v >= 11 {
        r = r.with_rack_id(s("rack"));
    }
    if v >= 12 {
        r = r.with_cluster_id(Some(s("cluster"))).with_unknown_tagged_fields(unknown(v, 12));
    }
    if v >= 15 {
        r = r.with_replica_state(ReplicaState::default().with_replica_id(BrokerId(-1)).with_replica_epoch(-1));
    }
    r
}

pub fn produce(v: i16) -> ProduceRequest {
    let p = |i: i32| {
        PartitionProduceData::default()
            .with_index(i)
            .with_records(Some(Bytes::from_static(b"not really a batch")))
            .with_unknown_tagged_fields(unknown(v, 9))
    };
    let t = |n: &str| TopicProduceData::default().with_name(topic(n)).with_partition_data(vec![p(0), p(1)]);
    ProduceRequest::default().with_transactional_id(Some(TransactionalId(s("txn")))).with_acks(-1).with_topic_data(two(
        t,
        "produce-a",
        "produce-b",
    ))
}

pub fn offset_commit(v: i16) -> OffsetCommitRequest {
    let p = |i: i32| {
        OffsetCommitRequestPartition::default().with_partition_index(i).with_committed_metadata(Some(s("meta")))
    };
    let t = |n: &str| OffsetCommitRequestTopic::default().with_name(topic(n)).with_partitions(vec![p(0), p(1)]);
    let r = OffsetCommitRequest::default()
        .with_group_id(GroupId(s("group")))
        .with_member_id(s("member"))
        .with_topics(two(t, "commit-a", "commit-b"));
    if v >= 7 {
        r.with_group_instance_id(Some(s("instance")))
    } else {
        r
    }
}

pub fn offset_fetch(v: i16) -> OffsetFetchRequest {
    if v <= 7 {
        let t = |n: &str| OffsetFetchRequestTopic::default().with_name(topic(n)).with_partition_indexes(vec![0, 1]);
        let r = OffsetFetchRequest::default().with_group_id(GroupId(s("group"))).with_topics(Some(two(
            t,
            "offsets-a",
            "offsets-b",
        )));
        return if v >= 7 { r.with_require_stable(true) } else { r };
    }
    let t = |n: &str| OffsetFetchRequestTopics::default().with_name(topic(n)).with_partition_indexes(vec![0, 1]);
    let g = |n: &str| {
        let g = OffsetFetchRequestGroup::default().with_group_id(GroupId(s(n))).with_topics(Some(two(
            t,
            "offsets-a",
            "offsets-b",
        )));
        if v >= 9 {
            g.with_member_id(Some(s("member"))).with_member_epoch(3)
        } else {
            g
        }
    };
    OffsetFetchRequest::default().with_groups(two(g, "group-a", "group-b")).with_require_stable(true)
}

pub fn join_group(v: i16) -> JoinGroupRequest {
    let p =
        |n: &str| JoinGroupRequestProtocol::default().with_name(s(n)).with_metadata(Bytes::from_static(b"\0\x01sub"));
    let r = JoinGroupRequest::default()
        .with_group_id(GroupId(s("group")))
        .with_protocol_type(s("consumer"))
        .with_protocols(two(p, "range", "roundrobin"));
    let r = if v >= 5 { r.with_group_instance_id(Some(s("instance"))) } else { r };
    if v >= 8 {
        r.with_reason(Some(s("why")))
    } else {
        r
    }
}

pub fn sync_group(v: i16) -> SyncGroupRequest {
    let a = |m: &str| {
        SyncGroupRequestAssignment::default().with_member_id(s(m)).with_assignment(Bytes::from_static(b"assigned"))
    };
    let r = SyncGroupRequest::default().with_group_id(GroupId(s("group"))).with_assignments(two(a, "m-a", "m-b"));
    let r = if v >= 3 { r.with_group_instance_id(Some(s("instance"))) } else { r };
    if v >= 5 {
        r.with_protocol_type(Some(s("consumer"))).with_protocol_name(Some(s("range")))
    } else {
        r
    }
}

pub fn leave_group(v: i16) -> LeaveGroupRequest {
    let r = LeaveGroupRequest::default().with_group_id(GroupId(s("group")));
    if v <= 2 {
        return r.with_member_id(s("member"));
    }
    let m = |n: &str| {
        let m = MemberIdentity::default().with_member_id(s(n)).with_group_instance_id(Some(s("instance")));
        if v >= 5 {
            m.with_reason(Some(s("why")))
        } else {
            m
        }
    };
    r.with_members(two(m, "m-a", "m-b"))
}

pub fn list_offsets(v: i16) -> ListOffsetsRequest {
    let p = |i: i32| ListOffsetsPartition::default().with_partition_index(i).with_timestamp(-1);
    let t = |n: &str| ListOffsetsTopic::default().with_name(topic(n)).with_partitions(vec![p(0), p(1)]);
    let r = ListOffsetsRequest::default().with_topics(two(t, "list-a", "list-b"));
    if v >= 2 {
        r.with_isolation_level(1)
    } else {
        r
    }
}

pub fn create_topics(_v: i16) -> CreateTopicsRequest {
    let a = |i: i32| CreatableReplicaAssignment::default().with_partition_index(i).with_broker_ids(vec![BrokerId(1)]);
    let c = |n: &str| CreatableTopicConfig::default().with_name(s(n)).with_value(Some(s("1")));
    let t = |n: &str| {
        CreatableTopic::default()
            .with_name(topic(n))
            .with_num_partitions(-1)
            .with_assignments(vec![a(0), a(1)])
            .with_configs(two(c, "retention.ms", "segment.ms"))
    };
    CreateTopicsRequest::default().with_topics(two(t, "create-a", "create-b"))
}

pub fn delete_topics(v: i16) -> DeleteTopicsRequest {
    if v >= 6 {
        let t = |n: &str| DeleteTopicState::default().with_name(Some(topic(n)));
        return DeleteTopicsRequest::default().with_topics(two(t, "delete-a", "delete-b"));
    }
    DeleteTopicsRequest::default().with_topic_names(two(topic, "delete-a", "delete-b"))
}

pub fn create_partitions(_v: i16) -> CreatePartitionsRequest {
    let a = |b: i32| CreatePartitionsAssignment::default().with_broker_ids(vec![BrokerId(b), BrokerId(b + 1)]);
    let t = |n: &str| {
        CreatePartitionsTopic::default().with_name(topic(n)).with_count(4).with_assignments(Some(vec![a(1), a(2)]))
    };
    CreatePartitionsRequest::default().with_topics(two(t, "grow-a", "grow-b"))
}

pub fn describe_configs(_v: i16) -> DescribeConfigsRequest {
    let r = |n: &str| {
        DescribeConfigsResource::default()
            .with_resource_type(2)
            .with_resource_name(s(n))
            .with_configuration_keys(Some(vec![s("retention.ms"), s("segment.ms")]))
    };
    DescribeConfigsRequest::default().with_resources(two(r, "configs-a", "configs-b"))
}

pub fn alter_configs(_v: i16) -> AlterConfigsRequest {
    use kafka_protocol::messages::alter_configs_request::{AlterConfigsResource, AlterableConfig};
    let c = |n: &str| AlterableConfig::default().with_name(s(n)).with_value(Some(s("1")));
    let r = |n: &str| {
        AlterConfigsResource::default().with_resource_type(2).with_resource_name(s(n)).with_configs(two(
            c,
            "retention.ms",
            "segment.ms",
        ))
    };
    AlterConfigsRequest::default().with_resources(two(r, "alter-a", "alter-b"))
}

pub fn incremental_alter_configs(_v: i16) -> IncrementalAlterConfigsRequest {
    use kafka_protocol::messages::incremental_alter_configs_request::{AlterConfigsResource, AlterableConfig};
    let c = |n: &str| AlterableConfig::default().with_name(s(n)).with_value(Some(s("1")));
    let r = |n: &str| {
        AlterConfigsResource::default().with_resource_type(2).with_resource_name(s(n)).with_configs(two(
            c,
            "retention.ms",
            "segment.ms",
        ))
    };
    IncrementalAlterConfigsRequest::default().with_resources(two(r, "alter-a", "alter-b"))
}

pub fn delete_records(_v: i16) -> DeleteRecordsRequest {
    let p = |i: i32| DeleteRecordsPartition::default().with_partition_index(i).with_offset(9);
    let t = |n: &str| DeleteRecordsTopic::default().with_name(topic(n)).with_partitions(vec![p(0), p(1)]);
    DeleteRecordsRequest::default().with_topics(two(t, "trim-a", "trim-b"))
}

pub fn offset_for_leader_epoch(_v: i16) -> OffsetForLeaderEpochRequest {
    let p = |i: i32| OffsetForLeaderPartition::default().with_partition(i).with_leader_epoch(2);
    let t = |n: &str| OffsetForLeaderTopic::default().with_topic(topic(n)).with_partitions(vec![p(0), p(1)]);
    OffsetForLeaderEpochRequest::default().with_topics(two(t, "epoch-a", "epoch-b"))
}

pub fn elect_leaders(v: i16) -> ElectLeadersRequest {
    let t = |n: &str| ElectTopicPartitions::default().with_topic(topic(n)).with_partitions(vec![0, 1]);
    // v0 knows only the preferred election (type 0).
    let kind = if v >= 1 { 1 } else { 0 };
    ElectLeadersRequest::default().with_election_type(kind).with_topic_partitions(Some(two(t, "elect-a", "elect-b")))
}

pub fn alter_partition_reassignments(v: i16) -> AlterPartitionReassignmentsRequest {
    use kafka_protocol::messages::alter_partition_reassignments_request::{ReassignablePartition, ReassignableTopic};
    let p = |i: i32, r: Option<Vec<i32>>| {
        ReassignablePartition::default()
            .with_partition_index(i)
            .with_replicas(r.map(|r| r.into_iter().map(BrokerId).collect()))
    };
    let t = |n: &str| {
        ReassignableTopic::default()
            .with_name(topic(n))
            .with_partitions(vec![p(0, Some(vec![1, 2])), p(1, None)])
            .with_unknown_tagged_fields(unknown(v, 0))
    };
    AlterPartitionReassignmentsRequest::default()
        .with_allow_replication_factor_change(v < 1)
        .with_topics(two(t, "move-a", "move-b"))
}

pub fn list_partition_reassignments(_v: i16) -> ListPartitionReassignmentsRequest {
    use kafka_protocol::messages::list_partition_reassignments_request::ListPartitionReassignmentsTopics;
    let t =
        |n: &str| ListPartitionReassignmentsTopics::default().with_name(topic(n)).with_partition_indexes(vec![0, 1]);
    ListPartitionReassignmentsRequest::default().with_topics(Some(two(t, "moving-a", "moving-b")))
}

pub fn describe_log_dirs(_v: i16) -> DescribeLogDirsRequest {
    let t = |n: &str| DescribableLogDirTopic::default().with_topic(topic(n)).with_partitions(vec![0, 1]);
    DescribeLogDirsRequest::default().with_topics(Some(two(t, "dirs-a", "dirs-b")))
}

pub fn write_txn_markers(_v: i16) -> WriteTxnMarkersRequest {
    let t = |n: &str| WritableTxnMarkerTopic::default().with_name(topic(n)).with_partition_indexes(vec![0, 1]);
    let m = |pid: i64| {
        WritableTxnMarker::default()
            .with_producer_id(ProducerId(pid))
            .with_producer_epoch(1)
            .with_topics(two(t, "marker-a", "marker-b"))
    };
    WriteTxnMarkersRequest::default().with_markers(vec![m(1), m(2)])
}

pub fn describe_groups(_v: i16) -> DescribeGroupsRequest {
    DescribeGroupsRequest::default().with_groups(two(|n| GroupId(s(n)), "group-a", "group-b"))
}

pub fn list_groups(v: i16) -> ListGroupsRequest {
    let r = ListGroupsRequest::default();
    let r = if v >= 4 { r.with_states_filter(vec![s("Stable"), s("Empty")]) } else { r };
    if v >= 5 {
        r.with_types_filter(vec![s("classic"), s("consumer")])
    } else {
        r
    }
}

pub fn delete_groups(_v: i16) -> DeleteGroupsRequest {
    DeleteGroupsRequest::default().with_groups_names(two(|n| GroupId(s(n)), "group-a", "group-b"))
}

pub fn offset_delete(_v: i16) -> OffsetDeleteRequest {
    let p = |i: i32| OffsetDeleteRequestPartition::default().with_partition_index(i);
    let t = |n: &str| OffsetDeleteRequestTopic::default().with_name(topic(n)).with_partitions(vec![p(0), p(1)]);
    OffsetDeleteRequest::default().with_group_id(GroupId(s("group"))).with_topics(two(t, "forget-a", "forget-b"))
}

pub fn add_partitions_to_txn(v: i16) -> AddPartitionsToTxnRequest {
    let t = |n: &str| {
        add_partitions_to_txn_request::AddPartitionsToTxnTopic::default()
            .with_name(topic(n))
            .with_partitions(vec![0, 1])
            .with_unknown_tagged_fields(unknown(v, 3))
    };
    AddPartitionsToTxnRequest::default()
        .with_v3_and_below_transactional_id(TransactionalId(s("txn")))
        .with_v3_and_below_producer_id(ProducerId(7))
        .with_v3_and_below_topics(two(t, "txn-a", "txn-b"))
}

pub fn txn_offset_commit(v: i16) -> TxnOffsetCommitRequest {
    let p = |i: i32| {
        txn_offset_commit_request::TxnOffsetCommitRequestPartition::default()
            .with_partition_index(i)
            .with_committed_metadata(Some(s("meta")))
            .with_unknown_tagged_fields(unknown(v, 3))
    };
    let t = |n: &str| {
        txn_offset_commit_request::TxnOffsetCommitRequestTopic::default()
            .with_name(topic(n))
            .with_partitions(vec![p(0), p(1)])
    };
    let r = TxnOffsetCommitRequest::default()
        .with_transactional_id(TransactionalId(s("txn")))
        .with_group_id(GroupId(s("group")))
        .with_topics(two(t, "txn-commit-a", "txn-commit-b"));
    if v >= 3 {
        r.with_member_id(s("member")).with_group_instance_id(Some(s("instance")))
    } else {
        r
    }
}

pub fn describe_transactions(v: i16) -> DescribeTransactionsRequest {
    DescribeTransactionsRequest::default()
        .with_transactional_ids(vec![TransactionalId(s("a")), TransactionalId(s("b"))])
        .with_unknown_tagged_fields(unknown(v, 0))
}

pub fn list_transactions(v: i16) -> ListTransactionsRequest {
    ListTransactionsRequest::default()
        .with_state_filters(vec![s("Ongoing"), s("Empty")])
        .with_producer_id_filters(vec![ProducerId(1), ProducerId(2)])
        .with_unknown_tagged_fields(unknown(v, 0))
}

pub fn create_acls(v: i16) -> CreateAclsRequest {
    let c = |n: &str| {
        create_acls_request::AclCreation::default()
            .with_resource_type(2)
            .with_resource_name(s(n))
            .with_resource_pattern_type(3)
            .with_principal(s("User:acl-p"))
            .with_host(s("*"))
            .with_operation(3)
            .with_permission_type(3)
            .with_unknown_tagged_fields(unknown(v, 2))
    };
    CreateAclsRequest::default().with_creations(two(c, "acl-a", "acl-b")).with_unknown_tagged_fields(unknown(v, 2))
}

pub fn describe_acls(v: i16) -> DescribeAclsRequest {
    DescribeAclsRequest::default()
        .with_resource_type_filter(1)
        .with_resource_name_filter(Some(s("acl-d")))
        .with_pattern_type_filter(1)
        .with_principal_filter(Some(s("User:acl-p")))
        .with_host_filter(None)
        .with_operation(1)
        .with_permission_type(1)
        .with_unknown_tagged_fields(unknown(v, 2))
}

pub fn delete_acls(v: i16) -> DeleteAclsRequest {
    let f = |n: &str| {
        delete_acls_request::DeleteAclsFilter::default()
            .with_resource_type_filter(1)
            .with_resource_name_filter(Some(s(n)))
            .with_pattern_type_filter(1)
            .with_principal_filter(None)
            .with_host_filter(Some(s("*")))
            .with_operation(1)
            .with_permission_type(1)
            .with_unknown_tagged_fields(unknown(v, 2))
    };
    DeleteAclsRequest::default().with_filters(two(f, "acl-x", "acl-y")).with_unknown_tagged_fields(unknown(v, 2))
}

pub fn sasl_authenticate(v: i16) -> SaslAuthenticateRequest {
    SaslAuthenticateRequest::default()
        .with_auth_bytes(Bytes::from_static(b"n,,n=user,r=nonce"))
        .with_unknown_tagged_fields(unknown(v, 2))
}

pub fn describe_user_scram_credentials(v: i16) -> DescribeUserScramCredentialsRequest {
    let u = |n: &str| UserName::default().with_name(s(n)).with_unknown_tagged_fields(unknown(v, 0));
    DescribeUserScramCredentialsRequest::default()
        .with_users(Some(two(u, "scram-a", "scram-b")))
        .with_unknown_tagged_fields(unknown(v, 0))
}

pub fn alter_user_scram_credentials(v: i16) -> AlterUserScramCredentialsRequest {
    let d = |n: &str| {
        ScramCredentialDeletion::default().with_name(s(n)).with_mechanism(1).with_unknown_tagged_fields(unknown(v, 0))
    };
    let u = |n: &str| {
        ScramCredentialUpsertion::default()
            .with_name(s(n))
            .with_mechanism(2)
            .with_iterations(4096)
            .with_salt(Bytes::from_static(b"salt"))
            .with_salted_password(Bytes::from_static(&[7; 64]))
            .with_unknown_tagged_fields(unknown(v, 0))
    };
    AlterUserScramCredentialsRequest::default()
        .with_deletions(two(d, "scram-del-a", "scram-del-b"))
        .with_upsertions(two(u, "scram-up-a", "scram-up-b"))
        .with_unknown_tagged_fields(unknown(v, 0))
}
