//! The wire layout of every request body the broker decodes, transcribed
//! from the `impl Decodable` code kafka-protocol 0.18 generates
//! (`src/messages/*_request.rs`): field order, the versions each field is
//! on the wire for, and the known tagged fields. Only what decides where
//! the next byte is matters here, so every fixed-size field is just its
//! width and every nullable/non-nullable pair is one kind.
//!
//! Compactness is not stored per field: the generated code switches every
//! string, bytes and array field to its compact form exactly at the
//! message's first flexible version (checked when this table was written),
//! so `Message::flexible_from` decides it once. The one exception is the
//! request header's client id, which stays an Int16 string (`STR16`).
//!
//! `tests.rs` holds this table to the crate: real requests encoded by the
//! crate at every advertised version walk to exactly their last byte.

use kafka_protocol::messages::ApiKey;

/// "Present from some version on", for the version ranges below.
pub(super) const MAX: i16 = i16::MAX;
/// `flexible_from` of a message that has no flexible version.
const NEVER: i16 = i16::MAX;

/// How a field occupies the wire.
#[derive(Clone, Copy, Debug)]
pub(super) enum Kind {
    /// Ints, uuid, boolean, float: this many bytes.
    Fixed(usize),
    /// String: Int16 length, or varint length + 1 in flexible versions.
    Str,
    /// String with an Int16 length in every version (the header's client id).
    Str16,
    /// Bytes and records: Int32 length, or varint length + 1 in flexible versions.
    Bytes,
    /// Int32 count, or varint count + 1 in flexible versions, then the elements.
    Array(Elem),
    /// One nested struct, no count (only Fetch's tagged `replica_state`).
    Struct(&'static Struct),
}

/// What an array holds.
#[derive(Clone, Copy, Debug)]
pub(super) enum Elem {
    Fixed(usize),
    Str,
    Struct(&'static Struct),
}

#[derive(Debug)]
pub(super) struct Field {
    pub name: &'static str,
    pub min: i16,
    pub max: i16,
    pub kind: Kind,
}

/// A tagged field the crate decodes itself. It reads such a field with its
/// own decoder and ignores the size the client sent, so the walker must do
/// the same to stay on the bytes the crate reads.
#[derive(Debug)]
pub(super) struct Tagged {
    pub tag: u32,
    pub name: &'static str,
    pub min: i16,
    pub max: i16,
    pub kind: Kind,
}

#[derive(Debug)]
pub(super) struct Struct {
    pub fields: &'static [Field],
    pub tagged: &'static [Tagged],
}

/// A request body's top struct and the version from which it (and every
/// struct nested in it) is flexible: compact forms and tagged sections.
#[derive(Clone, Copy, Debug)]
pub(super) struct Message {
    pub flexible_from: i16,
    pub body: &'static Struct,
}

/// The body layout of a request the broker decodes; `None` for the rest.
pub(super) fn message(key: ApiKey) -> Option<Message> {
    let (flexible_from, body) = match key {
        ApiKey::Metadata => (9, &METADATA_REQUEST),
        ApiKey::CreateTopics => (5, &CREATE_TOPICS_REQUEST),
        ApiKey::DeleteTopics => (4, &DELETE_TOPICS_REQUEST),
        ApiKey::CreatePartitions => (2, &CREATE_PARTITIONS_REQUEST),
        ApiKey::DescribeConfigs => (4, &DESCRIBE_CONFIGS_REQUEST),
        ApiKey::AlterConfigs => (2, &ALTER_CONFIGS_REQUEST),
        ApiKey::DescribeCluster => (0, &DESCRIBE_CLUSTER_REQUEST),
        ApiKey::DeleteRecords => (2, &DELETE_RECORDS_REQUEST),
        ApiKey::OffsetForLeaderEpoch => (4, &OFFSET_FOR_LEADER_EPOCH_REQUEST),
        ApiKey::DescribeLogDirs => (2, &DESCRIBE_LOG_DIRS_REQUEST),
        ApiKey::ElectLeaders => (2, &ELECT_LEADERS_REQUEST),
        ApiKey::AlterPartitionReassignments => (0, &ALTER_PARTITION_REASSIGNMENTS_REQUEST),
        ApiKey::ListPartitionReassignments => (0, &LIST_PARTITION_REASSIGNMENTS_REQUEST),
        ApiKey::IncrementalAlterConfigs => (1, &INCREMENTAL_ALTER_CONFIGS_REQUEST),
        ApiKey::Produce => (9, &PRODUCE_REQUEST),
        ApiKey::Fetch => (12, &FETCH_REQUEST),
        ApiKey::ListOffsets => (6, &LIST_OFFSETS_REQUEST),
        ApiKey::InitProducerId => (2, &INIT_PRODUCER_ID_REQUEST),
        ApiKey::WriteTxnMarkers => (1, &WRITE_TXN_MARKERS_REQUEST),
        ApiKey::FindCoordinator => (3, &FIND_COORDINATOR_REQUEST),
        ApiKey::JoinGroup => (6, &JOIN_GROUP_REQUEST),
        ApiKey::SyncGroup => (4, &SYNC_GROUP_REQUEST),
        ApiKey::Heartbeat => (4, &HEARTBEAT_REQUEST),
        ApiKey::LeaveGroup => (4, &LEAVE_GROUP_REQUEST),
        ApiKey::OffsetCommit => (8, &OFFSET_COMMIT_REQUEST),
        ApiKey::OffsetFetch => (6, &OFFSET_FETCH_REQUEST),
        ApiKey::DescribeGroups => (5, &DESCRIBE_GROUPS_REQUEST),
        ApiKey::ListGroups => (3, &LIST_GROUPS_REQUEST),
        ApiKey::DeleteGroups => (2, &DELETE_GROUPS_REQUEST),
        ApiKey::OffsetDelete => (NEVER, &OFFSET_DELETE_REQUEST),
        ApiKey::ApiVersions => (3, &API_VERSIONS_REQUEST),
        ApiKey::AddPartitionsToTxn => (3, &ADD_PARTITIONS_TO_TXN_REQUEST),
        ApiKey::AddOffsetsToTxn => (3, &ADD_OFFSETS_TO_TXN_REQUEST),
        ApiKey::EndTxn => (3, &END_TXN_REQUEST),
        ApiKey::TxnOffsetCommit => (3, &TXN_OFFSET_COMMIT_REQUEST),
        ApiKey::DescribeTransactions => (0, &DESCRIBE_TRANSACTIONS_REQUEST),
        ApiKey::ListTransactions => (0, &LIST_TRANSACTIONS_REQUEST),
        ApiKey::CreateAcls => (2, &CREATE_ACLS_REQUEST),
        ApiKey::DescribeAcls => (2, &ACL_FILTER),
        ApiKey::DeleteAcls => (2, &DELETE_ACLS_REQUEST),
        ApiKey::SaslHandshake => (NEVER, &SASL_HANDSHAKE_REQUEST),
        ApiKey::SaslAuthenticate => (2, &SASL_AUTHENTICATE_REQUEST),
        ApiKey::DescribeUserScramCredentials => (0, &DESCRIBE_USER_SCRAM_CREDENTIALS_REQUEST),
        ApiKey::AlterUserScramCredentials => (0, &ALTER_USER_SCRAM_CREDENTIALS_REQUEST),
        _ => return None,
    };
    Some(Message { flexible_from, body })
}

/// The request header, v1 and v2 (flexible) as the crate numbers them.
pub(super) const HEADER: Message = Message { flexible_from: 2, body: &REQUEST_HEADER };

const I8: Kind = Kind::Fixed(1);
const I16: Kind = Kind::Fixed(2);
const I32: Kind = Kind::Fixed(4);
const I64: Kind = Kind::Fixed(8);
const UUID: Kind = Kind::Fixed(16);
const BOOL: Kind = Kind::Fixed(1);
const STR: Kind = Kind::Str;
const STR16: Kind = Kind::Str16;
const BYTES: Kind = Kind::Bytes;

const fn f(name: &'static str, min: i16, max: i16, kind: Kind) -> Field {
    Field { name, min, max, kind }
}

const fn t(tag: u32, name: &'static str, min: i16, max: i16, kind: Kind) -> Tagged {
    Tagged { tag, name, min, max, kind }
}

const fn arr(s: &'static Struct) -> Kind {
    Kind::Array(Elem::Struct(s))
}

/// A struct without known tagged fields (all but two).
const fn s(fields: &'static [Field]) -> Struct {
    Struct { fields, tagged: &[] }
}

// MetadataRequest
const METADATA_REQUEST: Struct = s(&[
    f("topics", 0, MAX, arr(&METADATA_REQUEST_TOPIC)),
    f("allow_auto_topic_creation", 4, MAX, BOOL),
    f("include_cluster_authorized_operations", 8, 10, BOOL),
    f("include_topic_authorized_operations", 8, MAX, BOOL),
]);
const METADATA_REQUEST_TOPIC: Struct = s(&[f("topic_id", 10, MAX, UUID), f("name", 0, MAX, STR)]);

// CreateTopicsRequest
const CREATE_TOPICS_REQUEST: Struct =
    s(&[f("topics", 0, MAX, arr(&CREATABLE_TOPIC)), f("timeout_ms", 0, MAX, I32), f("validate_only", 0, MAX, BOOL)]);
const CREATABLE_REPLICA_ASSIGNMENT: Struct =
    s(&[f("partition_index", 0, MAX, I32), f("broker_ids", 0, MAX, Kind::Array(Elem::Fixed(4)))]);
const CREATABLE_TOPIC: Struct = s(&[
    f("name", 0, MAX, STR),
    f("num_partitions", 0, MAX, I32),
    f("replication_factor", 0, MAX, I16),
    f("assignments", 0, MAX, arr(&CREATABLE_REPLICA_ASSIGNMENT)),
    f("configs", 0, MAX, arr(&CREATABLE_TOPIC_CONFIG)),
]);
const CREATABLE_TOPIC_CONFIG: Struct = s(&[f("name", 0, MAX, STR), f("value", 0, MAX, STR)]);

// DeleteTopicsRequest
const DELETE_TOPICS_REQUEST: Struct = s(&[
    f("topics", 6, MAX, arr(&DELETE_TOPIC_STATE)),
    f("topic_names", 0, 5, Kind::Array(Elem::Str)),
    f("timeout_ms", 0, MAX, I32),
]);
const DELETE_TOPIC_STATE: Struct = s(&[f("name", 6, MAX, STR), f("topic_id", 6, MAX, UUID)]);

// CreatePartitionsRequest
const CREATE_PARTITIONS_REQUEST: Struct = s(&[
    f("topics", 0, MAX, arr(&CREATE_PARTITIONS_TOPIC)),
    f("timeout_ms", 0, MAX, I32),
    f("validate_only", 0, MAX, BOOL),
]);
const CREATE_PARTITIONS_ASSIGNMENT: Struct = s(&[f("broker_ids", 0, MAX, Kind::Array(Elem::Fixed(4)))]);
const CREATE_PARTITIONS_TOPIC: Struct =
    s(&[f("name", 0, MAX, STR), f("count", 0, MAX, I32), f("assignments", 0, MAX, arr(&CREATE_PARTITIONS_ASSIGNMENT))]);

// DescribeConfigsRequest
const DESCRIBE_CONFIGS_REQUEST: Struct = s(&[
    f("resources", 0, MAX, arr(&DESCRIBE_CONFIGS_RESOURCE)),
    f("include_synonyms", 0, MAX, BOOL),
    f("include_documentation", 3, MAX, BOOL),
]);
const DESCRIBE_CONFIGS_RESOURCE: Struct = s(&[
    f("resource_type", 0, MAX, I8),
    f("resource_name", 0, MAX, STR),
    f("configuration_keys", 0, MAX, Kind::Array(Elem::Str)),
]);

// AlterConfigsRequest
const ALTER_CONFIGS_REQUEST: Struct =
    s(&[f("resources", 0, MAX, arr(&ALTER_CONFIGS_RESOURCE)), f("validate_only", 0, MAX, BOOL)]);
const ALTER_CONFIGS_RESOURCE: Struct =
    s(&[f("resource_type", 0, MAX, I8), f("resource_name", 0, MAX, STR), f("configs", 0, MAX, arr(&ALTERABLE_CONFIG))]);
const ALTERABLE_CONFIG: Struct = s(&[f("name", 0, MAX, STR), f("value", 0, MAX, STR)]);

// DescribeClusterRequest
const DESCRIBE_CLUSTER_REQUEST: Struct = s(&[
    f("include_cluster_authorized_operations", 0, MAX, BOOL),
    f("endpoint_type", 1, MAX, I8),
    f("include_fenced_brokers", 2, MAX, BOOL),
]);

// DeleteRecordsRequest
const DELETE_RECORDS_REQUEST: Struct =
    s(&[f("topics", 0, MAX, arr(&DELETE_RECORDS_TOPIC)), f("timeout_ms", 0, MAX, I32)]);
const DELETE_RECORDS_PARTITION: Struct = s(&[f("partition_index", 0, MAX, I32), f("offset", 0, MAX, I64)]);
const DELETE_RECORDS_TOPIC: Struct =
    s(&[f("name", 0, MAX, STR), f("partitions", 0, MAX, arr(&DELETE_RECORDS_PARTITION))]);

// OffsetForLeaderEpochRequest
const OFFSET_FOR_LEADER_EPOCH_REQUEST: Struct =
    s(&[f("replica_id", 3, MAX, I32), f("topics", 0, MAX, arr(&OFFSET_FOR_LEADER_TOPIC))]);
const OFFSET_FOR_LEADER_PARTITION: Struct =
    s(&[f("partition", 0, MAX, I32), f("current_leader_epoch", 0, MAX, I32), f("leader_epoch", 0, MAX, I32)]);
const OFFSET_FOR_LEADER_TOPIC: Struct =
    s(&[f("topic", 0, MAX, STR), f("partitions", 0, MAX, arr(&OFFSET_FOR_LEADER_PARTITION))]);

// DescribeLogDirsRequest
const DESCRIBE_LOG_DIRS_REQUEST: Struct = s(&[f("topics", 0, MAX, arr(&DESCRIBABLE_LOG_DIR_TOPIC))]);
const DESCRIBABLE_LOG_DIR_TOPIC: Struct =
    s(&[f("topic", 0, MAX, STR), f("partitions", 0, MAX, Kind::Array(Elem::Fixed(4)))]);

// ElectLeadersRequest (its topics have DescribeLogDirs' topics' shape)
const ELECT_LEADERS_REQUEST: Struct = s(&[
    f("election_type", 1, MAX, I8),
    f("topic_partitions", 0, MAX, arr(&DESCRIBABLE_LOG_DIR_TOPIC)),
    f("timeout_ms", 0, MAX, I32),
]);

// AlterPartitionReassignmentsRequest
const ALTER_PARTITION_REASSIGNMENTS_REQUEST: Struct = s(&[
    f("timeout_ms", 0, MAX, I32),
    f("allow_replication_factor_change", 1, MAX, BOOL),
    f("topics", 0, MAX, arr(&REASSIGNABLE_TOPIC)),
]);
const REASSIGNABLE_TOPIC: Struct = s(&[f("name", 0, MAX, STR), f("partitions", 0, MAX, arr(&REASSIGNABLE_PARTITION))]);
const REASSIGNABLE_PARTITION: Struct =
    s(&[f("partition_index", 0, MAX, I32), f("replicas", 0, MAX, Kind::Array(Elem::Fixed(4)))]);

// ListPartitionReassignmentsRequest (its topics have DescribeLogDirs' topics' shape)
const LIST_PARTITION_REASSIGNMENTS_REQUEST: Struct =
    s(&[f("timeout_ms", 0, MAX, I32), f("topics", 0, MAX, arr(&DESCRIBABLE_LOG_DIR_TOPIC))]);

// IncrementalAlterConfigsRequest
const INCREMENTAL_ALTER_CONFIGS_REQUEST: Struct = s(&[
    f("resources", 0, MAX, arr(&INCREMENTAL_ALTER_CONFIGS_ALTER_CONFIGS_RESOURCE)),
    f("validate_only", 0, MAX, BOOL),
]);
const INCREMENTAL_ALTER_CONFIGS_ALTER_CONFIGS_RESOURCE: Struct = s(&[
    f("resource_type", 0, MAX, I8),
    f("resource_name", 0, MAX, STR),
    f("configs", 0, MAX, arr(&INCREMENTAL_ALTER_CONFIGS_ALTERABLE_CONFIG)),
]);
const INCREMENTAL_ALTER_CONFIGS_ALTERABLE_CONFIG: Struct =
    s(&[f("name", 0, MAX, STR), f("config_operation", 0, MAX, I8), f("value", 0, MAX, STR)]);

// ProduceRequest
const PRODUCE_REQUEST: Struct = s(&[
    f("transactional_id", 0, MAX, STR),
    f("acks", 0, MAX, I16),
    f("timeout_ms", 0, MAX, I32),
    f("topic_data", 0, MAX, arr(&TOPIC_PRODUCE_DATA)),
]);
const PARTITION_PRODUCE_DATA: Struct = s(&[f("index", 0, MAX, I32), f("records", 0, MAX, BYTES)]);
const TOPIC_PRODUCE_DATA: Struct = s(&[
    f("name", 0, 12, STR),
    f("topic_id", 13, MAX, UUID),
    f("partition_data", 0, MAX, arr(&PARTITION_PRODUCE_DATA)),
]);

// FetchRequest
const FETCH_REQUEST: Struct = Struct {
    fields: &[
        f("replica_id", 0, 14, I32),
        f("max_wait_ms", 0, MAX, I32),
        f("min_bytes", 0, MAX, I32),
        f("max_bytes", 0, MAX, I32),
        f("isolation_level", 0, MAX, I8),
        f("session_id", 7, MAX, I32),
        f("session_epoch", 7, MAX, I32),
        f("topics", 0, MAX, arr(&FETCH_TOPIC)),
        f("forgotten_topics_data", 7, MAX, arr(&FORGOTTEN_TOPIC)),
        f("rack_id", 11, MAX, STR),
    ],
    tagged: &[t(0, "cluster_id", 0, MAX, STR), t(1, "replica_state", 15, MAX, Kind::Struct(&REPLICA_STATE))],
};
const FETCH_PARTITION: Struct = Struct {
    fields: &[
        f("partition", 0, MAX, I32),
        f("current_leader_epoch", 9, MAX, I32),
        f("fetch_offset", 0, MAX, I64),
        f("last_fetched_epoch", 12, MAX, I32),
        f("log_start_offset", 5, MAX, I64),
        f("partition_max_bytes", 0, MAX, I32),
    ],
    tagged: &[t(0, "replica_directory_id", 17, MAX, UUID), t(1, "high_watermark", 18, MAX, I64)],
};
const FETCH_TOPIC: Struct =
    s(&[f("topic", 0, 12, STR), f("topic_id", 13, MAX, UUID), f("partitions", 0, MAX, arr(&FETCH_PARTITION))]);
const FORGOTTEN_TOPIC: Struct =
    s(&[f("topic", 7, 12, STR), f("topic_id", 13, MAX, UUID), f("partitions", 7, MAX, Kind::Array(Elem::Fixed(4)))]);
const REPLICA_STATE: Struct = s(&[f("replica_id", 15, MAX, I32), f("replica_epoch", 15, MAX, I64)]);

// ListOffsetsRequest
const LIST_OFFSETS_REQUEST: Struct = s(&[
    f("replica_id", 0, MAX, I32),
    f("isolation_level", 2, MAX, I8),
    f("topics", 0, MAX, arr(&LIST_OFFSETS_TOPIC)),
    f("timeout_ms", 10, MAX, I32),
]);
const LIST_OFFSETS_PARTITION: Struct =
    s(&[f("partition_index", 0, MAX, I32), f("current_leader_epoch", 4, MAX, I32), f("timestamp", 0, MAX, I64)]);
const LIST_OFFSETS_TOPIC: Struct = s(&[f("name", 0, MAX, STR), f("partitions", 0, MAX, arr(&LIST_OFFSETS_PARTITION))]);

// InitProducerIdRequest
const INIT_PRODUCER_ID_REQUEST: Struct = s(&[
    f("transactional_id", 0, MAX, STR),
    f("transaction_timeout_ms", 0, MAX, I32),
    f("producer_id", 3, MAX, I64),
    f("producer_epoch", 3, MAX, I16),
]);

// WriteTxnMarkersRequest
const WRITE_TXN_MARKERS_REQUEST: Struct = s(&[f("markers", 0, MAX, arr(&WRITABLE_TXN_MARKER))]);
const WRITABLE_TXN_MARKER: Struct = s(&[
    f("producer_id", 0, MAX, I64),
    f("producer_epoch", 0, MAX, I16),
    f("transaction_result", 0, MAX, BOOL),
    f("topics", 0, MAX, arr(&WRITABLE_TXN_MARKER_TOPIC)),
    f("coordinator_epoch", 0, MAX, I32),
]);
const WRITABLE_TXN_MARKER_TOPIC: Struct =
    s(&[f("name", 0, MAX, STR), f("partition_indexes", 0, MAX, Kind::Array(Elem::Fixed(4)))]);

// FindCoordinatorRequest
const FIND_COORDINATOR_REQUEST: Struct =
    s(&[f("key", 0, 3, STR), f("key_type", 1, MAX, I8), f("coordinator_keys", 4, MAX, Kind::Array(Elem::Str))]);

// JoinGroupRequest
const JOIN_GROUP_REQUEST: Struct = s(&[
    f("group_id", 0, MAX, STR),
    f("session_timeout_ms", 0, MAX, I32),
    f("rebalance_timeout_ms", 1, MAX, I32),
    f("member_id", 0, MAX, STR),
    f("group_instance_id", 5, MAX, STR),
    f("protocol_type", 0, MAX, STR),
    f("protocols", 0, MAX, arr(&JOIN_GROUP_REQUEST_PROTOCOL)),
    f("reason", 8, MAX, STR),
]);
const JOIN_GROUP_REQUEST_PROTOCOL: Struct = s(&[f("name", 0, MAX, STR), f("metadata", 0, MAX, BYTES)]);

// SyncGroupRequest
const SYNC_GROUP_REQUEST: Struct = s(&[
    f("group_id", 0, MAX, STR),
    f("generation_id", 0, MAX, I32),
    f("member_id", 0, MAX, STR),
    f("group_instance_id", 3, MAX, STR),
    f("protocol_type", 5, MAX, STR),
    f("protocol_name", 5, MAX, STR),
    f("assignments", 0, MAX, arr(&SYNC_GROUP_REQUEST_ASSIGNMENT)),
]);
const SYNC_GROUP_REQUEST_ASSIGNMENT: Struct = s(&[f("member_id", 0, MAX, STR), f("assignment", 0, MAX, BYTES)]);

// HeartbeatRequest
const HEARTBEAT_REQUEST: Struct = s(&[
    f("group_id", 0, MAX, STR),
    f("generation_id", 0, MAX, I32),
    f("member_id", 0, MAX, STR),
    f("group_instance_id", 3, MAX, STR),
]);

// LeaveGroupRequest
const LEAVE_GROUP_REQUEST: Struct =
    s(&[f("group_id", 0, MAX, STR), f("member_id", 0, 2, STR), f("members", 3, MAX, arr(&MEMBER_IDENTITY))]);
const MEMBER_IDENTITY: Struct =
    s(&[f("member_id", 3, MAX, STR), f("group_instance_id", 3, MAX, STR), f("reason", 5, MAX, STR)]);

// OffsetCommitRequest
const OFFSET_COMMIT_REQUEST: Struct = s(&[
    f("group_id", 0, MAX, STR),
    f("generation_id_or_member_epoch", 0, MAX, I32),
    f("member_id", 0, MAX, STR),
    f("group_instance_id", 7, MAX, STR),
    f("retention_time_ms", 0, 4, I64),
    f("topics", 0, MAX, arr(&OFFSET_COMMIT_REQUEST_TOPIC)),
]);
const OFFSET_COMMIT_REQUEST_PARTITION: Struct = s(&[
    f("partition_index", 0, MAX, I32),
    f("committed_offset", 0, MAX, I64),
    f("committed_leader_epoch", 6, MAX, I32),
    f("committed_metadata", 0, MAX, STR),
]);
const OFFSET_COMMIT_REQUEST_TOPIC: Struct =
    s(&[f("name", 0, MAX, STR), f("partitions", 0, MAX, arr(&OFFSET_COMMIT_REQUEST_PARTITION))]);

// OffsetFetchRequest
const OFFSET_FETCH_REQUEST: Struct = s(&[
    f("group_id", 0, 7, STR),
    f("topics", 0, 7, arr(&OFFSET_FETCH_REQUEST_TOPIC)),
    f("groups", 8, MAX, arr(&OFFSET_FETCH_REQUEST_GROUP)),
    f("require_stable", 7, MAX, BOOL),
]);
const OFFSET_FETCH_REQUEST_GROUP: Struct = s(&[
    f("group_id", 8, MAX, STR),
    f("member_id", 9, MAX, STR),
    f("member_epoch", 9, MAX, I32),
    f("topics", 8, MAX, arr(&OFFSET_FETCH_REQUEST_TOPICS)),
]);
const OFFSET_FETCH_REQUEST_TOPIC: Struct =
    s(&[f("name", 0, 7, STR), f("partition_indexes", 0, 7, Kind::Array(Elem::Fixed(4)))]);
const OFFSET_FETCH_REQUEST_TOPICS: Struct =
    s(&[f("name", 8, MAX, STR), f("partition_indexes", 8, MAX, Kind::Array(Elem::Fixed(4)))]);

// DescribeGroupsRequest
const DESCRIBE_GROUPS_REQUEST: Struct =
    s(&[f("groups", 0, MAX, Kind::Array(Elem::Str)), f("include_authorized_operations", 3, MAX, BOOL)]);

// ListGroupsRequest
const LIST_GROUPS_REQUEST: Struct =
    s(&[f("states_filter", 4, MAX, Kind::Array(Elem::Str)), f("types_filter", 5, MAX, Kind::Array(Elem::Str))]);

// DeleteGroupsRequest
const DELETE_GROUPS_REQUEST: Struct = s(&[f("groups_names", 0, MAX, Kind::Array(Elem::Str))]);

// OffsetDeleteRequest
const OFFSET_DELETE_REQUEST: Struct =
    s(&[f("group_id", 0, MAX, STR), f("topics", 0, MAX, arr(&OFFSET_DELETE_REQUEST_TOPIC))]);
const OFFSET_DELETE_REQUEST_PARTITION: Struct = s(&[f("partition_index", 0, MAX, I32)]);
const OFFSET_DELETE_REQUEST_TOPIC: Struct =
    s(&[f("name", 0, MAX, STR), f("partitions", 0, MAX, arr(&OFFSET_DELETE_REQUEST_PARTITION))]);

// ApiVersionsRequest
const API_VERSIONS_REQUEST: Struct =
    s(&[f("client_software_name", 3, MAX, STR), f("client_software_version", 3, MAX, STR)]);

// AddPartitionsToTxnRequest (v0–3: the `v3_and_below_*` fields; v4+'s
// batch is not served)
const ADD_PARTITIONS_TO_TXN_REQUEST: Struct = s(&[
    f("v3_and_below_transactional_id", 0, 3, STR),
    f("v3_and_below_producer_id", 0, 3, I64),
    f("v3_and_below_producer_epoch", 0, 3, I16),
    f("v3_and_below_topics", 0, 3, arr(&ADD_PARTITIONS_TO_TXN_TOPIC)),
]);
const ADD_PARTITIONS_TO_TXN_TOPIC: Struct =
    s(&[f("name", 0, MAX, STR), f("partitions", 0, MAX, Kind::Array(Elem::Fixed(4)))]);

// AddOffsetsToTxnRequest
const ADD_OFFSETS_TO_TXN_REQUEST: Struct = s(&[
    f("transactional_id", 0, MAX, STR),
    f("producer_id", 0, MAX, I64),
    f("producer_epoch", 0, MAX, I16),
    f("group_id", 0, MAX, STR),
]);

// EndTxnRequest
const END_TXN_REQUEST: Struct = s(&[
    f("transactional_id", 0, MAX, STR),
    f("producer_id", 0, MAX, I64),
    f("producer_epoch", 0, MAX, I16),
    f("committed", 0, MAX, BOOL),
]);

// TxnOffsetCommitRequest
const TXN_OFFSET_COMMIT_REQUEST: Struct = s(&[
    f("transactional_id", 0, MAX, STR),
    f("group_id", 0, MAX, STR),
    f("producer_id", 0, MAX, I64),
    f("producer_epoch", 0, MAX, I16),
    f("generation_id", 3, MAX, I32),
    f("member_id", 3, MAX, STR),
    f("group_instance_id", 3, MAX, STR),
    f("topics", 0, MAX, arr(&TXN_OFFSET_COMMIT_REQUEST_TOPIC)),
]);
const TXN_OFFSET_COMMIT_REQUEST_PARTITION: Struct = s(&[
    f("partition_index", 0, MAX, I32),
    f("committed_offset", 0, MAX, I64),
    f("committed_leader_epoch", 2, MAX, I32),
    f("committed_metadata", 0, MAX, STR),
]);
const TXN_OFFSET_COMMIT_REQUEST_TOPIC: Struct =
    s(&[f("name", 0, MAX, STR), f("partitions", 0, MAX, arr(&TXN_OFFSET_COMMIT_REQUEST_PARTITION))]);

// DescribeTransactionsRequest
const DESCRIBE_TRANSACTIONS_REQUEST: Struct = s(&[f("transactional_ids", 0, MAX, Kind::Array(Elem::Str))]);

// ListTransactionsRequest
const LIST_TRANSACTIONS_REQUEST: Struct = s(&[
    f("state_filters", 0, MAX, Kind::Array(Elem::Str)),
    f("producer_id_filters", 0, MAX, Kind::Array(Elem::Fixed(8))),
    f("duration_filter", 1, MAX, I64),
    f("transactional_id_pattern", 2, MAX, STR),
]);

// CreateAclsRequest (v1-3): one ACL per creation.
const ACL_CREATION: Struct = s(&[
    f("resource_type", 0, MAX, I8),
    f("resource_name", 0, MAX, STR),
    f("resource_pattern_type", 0, MAX, I8),
    f("principal", 0, MAX, STR),
    f("host", 0, MAX, STR),
    f("operation", 0, MAX, I8),
    f("permission_type", 0, MAX, I8),
]);
const CREATE_ACLS_REQUEST: Struct = s(&[f("creations", 0, MAX, arr(&ACL_CREATION))]);

// DescribeAclsRequest (v1-3) is one filter; DeleteAclsRequest's
// DeleteAclsFilter has the same fields (the names end in `_filter`).
const ACL_FILTER: Struct = s(&[
    f("resource_type_filter", 0, MAX, I8),
    f("resource_name_filter", 0, MAX, STR),
    f("pattern_type_filter", 0, MAX, I8),
    f("principal_filter", 0, MAX, STR),
    f("host_filter", 0, MAX, STR),
    f("operation", 0, MAX, I8),
    f("permission_type", 0, MAX, I8),
]);
const DELETE_ACLS_REQUEST: Struct = s(&[f("filters", 0, MAX, arr(&ACL_FILTER))]);

// RequestHeader
const REQUEST_HEADER: Struct = s(&[
    f("request_api_key", 0, MAX, I16),
    f("request_api_version", 0, MAX, I16),
    f("correlation_id", 0, MAX, I32),
    f("client_id", 0, MAX, STR16),
]);

// SaslHandshakeRequest
const SASL_HANDSHAKE_REQUEST: Struct = s(&[f("mechanism", 0, MAX, STR)]);

// SaslAuthenticateRequest
const SASL_AUTHENTICATE_REQUEST: Struct = s(&[f("auth_bytes", 0, MAX, BYTES)]);

// DescribeUserScramCredentialsRequest
const DESCRIBE_USER_SCRAM_CREDENTIALS_REQUEST: Struct = s(&[f("users", 0, MAX, arr(&SCRAM_USER_NAME))]);
const SCRAM_USER_NAME: Struct = s(&[f("name", 0, MAX, STR)]);

// AlterUserScramCredentialsRequest
const ALTER_USER_SCRAM_CREDENTIALS_REQUEST: Struct = s(&[
    f("deletions", 0, MAX, arr(&SCRAM_CREDENTIAL_DELETION)),
    f("upsertions", 0, MAX, arr(&SCRAM_CREDENTIAL_UPSERTION)),
]);
const SCRAM_CREDENTIAL_DELETION: Struct = s(&[f("name", 0, MAX, STR), f("mechanism", 0, MAX, I8)]);
const SCRAM_CREDENTIAL_UPSERTION: Struct = s(&[
    f("name", 0, MAX, STR),
    f("mechanism", 0, MAX, I8),
    f("iterations", 0, MAX, I32),
    f("salt", 0, MAX, BYTES),
    f("salted_password", 0, MAX, BYTES),
]);
