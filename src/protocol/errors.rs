//! Kafka error codes, as sent on the wire: the one table the broker answers
//! with. Names are Kafka's (`org.apache.kafka.common.protocol.Errors`); the
//! test below checks each value against the protocol crate's own table.

/// A Kafka error code, as sent on the wire.
pub type ErrorCode = i16;

pub const NONE: ErrorCode = 0;
pub const OFFSET_OUT_OF_RANGE: ErrorCode = 1;
pub const CORRUPT_MESSAGE: ErrorCode = 2;
pub const UNKNOWN_TOPIC_OR_PARTITION: ErrorCode = 3;
pub const LEADER_NOT_AVAILABLE: ErrorCode = 5;
pub const NOT_LEADER_OR_FOLLOWER: ErrorCode = 6;
pub const REQUEST_TIMED_OUT: ErrorCode = 7;
pub const MESSAGE_TOO_LARGE: ErrorCode = 10;
pub const OFFSET_METADATA_TOO_LARGE: ErrorCode = 12;
pub const COORDINATOR_LOAD_IN_PROGRESS: ErrorCode = 14;
pub const COORDINATOR_NOT_AVAILABLE: ErrorCode = 15;
pub const NOT_COORDINATOR: ErrorCode = 16;
pub const INVALID_TOPIC_EXCEPTION: ErrorCode = 17;
pub const NOT_ENOUGH_REPLICAS: ErrorCode = 19;
pub const NOT_ENOUGH_REPLICAS_AFTER_APPEND: ErrorCode = 20;
pub const INVALID_REQUIRED_ACKS: ErrorCode = 21;
pub const ILLEGAL_GENERATION: ErrorCode = 22;
pub const INCONSISTENT_GROUP_PROTOCOL: ErrorCode = 23;
pub const INVALID_GROUP_ID: ErrorCode = 24;
pub const UNKNOWN_MEMBER_ID: ErrorCode = 25;
pub const INVALID_SESSION_TIMEOUT: ErrorCode = 26;
pub const REBALANCE_IN_PROGRESS: ErrorCode = 27;
pub const UNSUPPORTED_VERSION: ErrorCode = 35;
pub const TOPIC_ALREADY_EXISTS: ErrorCode = 36;
pub const INVALID_PARTITIONS: ErrorCode = 37;
pub const INVALID_REPLICATION_FACTOR: ErrorCode = 38;
pub const INVALID_REPLICA_ASSIGNMENT: ErrorCode = 39;
pub const INVALID_CONFIG: ErrorCode = 40;
pub const INVALID_REQUEST: ErrorCode = 42;
pub const OUT_OF_ORDER_SEQUENCE_NUMBER: ErrorCode = 45;
pub const INVALID_PRODUCER_EPOCH: ErrorCode = 47;
pub const POLICY_VIOLATION: ErrorCode = 44;
pub const KAFKA_STORAGE_ERROR: ErrorCode = 56;
pub const UNKNOWN_PRODUCER_ID: ErrorCode = 59;
pub const NON_EMPTY_GROUP: ErrorCode = 68;
pub const GROUP_ID_NOT_FOUND: ErrorCode = 69;
pub const MEMBER_ID_REQUIRED: ErrorCode = 79;
pub const FETCH_SESSION_ID_NOT_FOUND: ErrorCode = 70;
pub const INVALID_FETCH_SESSION_EPOCH: ErrorCode = 71;
pub const FENCED_LEADER_EPOCH: ErrorCode = 74;
pub const UNKNOWN_LEADER_EPOCH: ErrorCode = 75;
pub const FENCED_INSTANCE_ID: ErrorCode = 82;
pub const GROUP_SUBSCRIBED_TO_TOPIC: ErrorCode = 86;
pub const INVALID_RECORD: ErrorCode = 87;
pub const UNKNOWN_TOPIC_ID: ErrorCode = 100;
pub const INVALID_TXN_STATE: ErrorCode = 48;
pub const INVALID_PRODUCER_ID_MAPPING: ErrorCode = 49;
pub const INVALID_TRANSACTION_TIMEOUT: ErrorCode = 50;
pub const CONCURRENT_TRANSACTIONS: ErrorCode = 51;
pub const OPERATION_NOT_ATTEMPTED: ErrorCode = 55;
pub const PRODUCER_FENCED: ErrorCode = 90;
pub const TRANSACTIONAL_ID_NOT_FOUND: ErrorCode = 105;
pub const TOPIC_AUTHORIZATION_FAILED: ErrorCode = 29;
pub const GROUP_AUTHORIZATION_FAILED: ErrorCode = 30;
pub const CLUSTER_AUTHORIZATION_FAILED: ErrorCode = 31;
pub const TRANSACTIONAL_ID_AUTHORIZATION_FAILED: ErrorCode = 53;
pub const UNSUPPORTED_SASL_MECHANISM: ErrorCode = 33;
pub const ILLEGAL_SASL_STATE: ErrorCode = 34;
pub const SASL_AUTHENTICATION_FAILED: ErrorCode = 58;
pub const RESOURCE_NOT_FOUND: ErrorCode = 91;
pub const DUPLICATE_RESOURCE: ErrorCode = 92;
pub const UNACCEPTABLE_CREDENTIAL: ErrorCode = 93;
pub const PREFERRED_LEADER_NOT_AVAILABLE: ErrorCode = 80;
pub const ELIGIBLE_LEADERS_NOT_AVAILABLE: ErrorCode = 83;
pub const ELECTION_NOT_NEEDED: ErrorCode = 84;
pub const NO_REASSIGNMENT_IN_PROGRESS: ErrorCode = 85;

#[cfg(test)]
mod tests {
    use kafka_protocol::error::ResponseError as E;

    use super::*;

    /// Every code here is the one Kafka gives that name (the protocol
    /// crate's table is generated from Kafka's, not from ours).
    #[test]
    fn codes_match_kafka() {
        let table = [
            (OFFSET_OUT_OF_RANGE, E::OffsetOutOfRange),
            (CORRUPT_MESSAGE, E::CorruptMessage),
            (UNKNOWN_TOPIC_OR_PARTITION, E::UnknownTopicOrPartition),
            (LEADER_NOT_AVAILABLE, E::LeaderNotAvailable),
            (NOT_LEADER_OR_FOLLOWER, E::NotLeaderOrFollower),
            (REQUEST_TIMED_OUT, E::RequestTimedOut),
            (MESSAGE_TOO_LARGE, E::MessageTooLarge),
            (OFFSET_METADATA_TOO_LARGE, E::OffsetMetadataTooLarge),
            (COORDINATOR_LOAD_IN_PROGRESS, E::CoordinatorLoadInProgress),
            (COORDINATOR_NOT_AVAILABLE, E::CoordinatorNotAvailable),
            (INVALID_TOPIC_EXCEPTION, E::InvalidTopicException),
            (NOT_ENOUGH_REPLICAS, E::NotEnoughReplicas),
            (NOT_ENOUGH_REPLICAS_AFTER_APPEND, E::NotEnoughReplicasAfterAppend),
            (INVALID_REQUIRED_ACKS, E::InvalidRequiredAcks),
            (ILLEGAL_GENERATION, E::IllegalGeneration),
            (INCONSISTENT_GROUP_PROTOCOL, E::InconsistentGroupProtocol),
            (INVALID_GROUP_ID, E::InvalidGroupId),
            (UNKNOWN_MEMBER_ID, E::UnknownMemberId),
            (INVALID_SESSION_TIMEOUT, E::InvalidSessionTimeout),
            (REBALANCE_IN_PROGRESS, E::RebalanceInProgress),
            (UNSUPPORTED_VERSION, E::UnsupportedVersion),
            (TOPIC_ALREADY_EXISTS, E::TopicAlreadyExists),
            (INVALID_PARTITIONS, E::InvalidPartitions),
            (INVALID_REPLICATION_FACTOR, E::InvalidReplicationFactor),
            (INVALID_REPLICA_ASSIGNMENT, E::InvalidReplicaAssignment),
            (INVALID_CONFIG, E::InvalidConfig),
            (INVALID_REQUEST, E::InvalidRequest),
            (OUT_OF_ORDER_SEQUENCE_NUMBER, E::OutOfOrderSequenceNumber),
            (INVALID_PRODUCER_EPOCH, E::InvalidProducerEpoch),
            (POLICY_VIOLATION, E::PolicyViolation),
            (KAFKA_STORAGE_ERROR, E::KafkaStorageError),
            (UNKNOWN_PRODUCER_ID, E::UnknownProducerId),
            (NON_EMPTY_GROUP, E::NonEmptyGroup),
            (GROUP_ID_NOT_FOUND, E::GroupIdNotFound),
            (MEMBER_ID_REQUIRED, E::MemberIdRequired),
            (FETCH_SESSION_ID_NOT_FOUND, E::FetchSessionIdNotFound),
            (INVALID_FETCH_SESSION_EPOCH, E::InvalidFetchSessionEpoch),
            (FENCED_LEADER_EPOCH, E::FencedLeaderEpoch),
            (UNKNOWN_LEADER_EPOCH, E::UnknownLeaderEpoch),
            (FENCED_INSTANCE_ID, E::FencedInstanceId),
            (GROUP_SUBSCRIBED_TO_TOPIC, E::GroupSubscribedToTopic),
            (INVALID_RECORD, E::InvalidRecord),
            (UNKNOWN_TOPIC_ID, E::UnknownTopicId),
            (INVALID_TXN_STATE, E::InvalidTxnState),
            (INVALID_PRODUCER_ID_MAPPING, E::InvalidProducerIdMapping),
            (INVALID_TRANSACTION_TIMEOUT, E::InvalidTransactionTimeout),
            (CONCURRENT_TRANSACTIONS, E::ConcurrentTransactions),
            (OPERATION_NOT_ATTEMPTED, E::OperationNotAttempted),
            (PRODUCER_FENCED, E::ProducerFenced),
            (TRANSACTIONAL_ID_NOT_FOUND, E::TransactionalIdNotFound),
            (TOPIC_AUTHORIZATION_FAILED, E::TopicAuthorizationFailed),
            (GROUP_AUTHORIZATION_FAILED, E::GroupAuthorizationFailed),
            (CLUSTER_AUTHORIZATION_FAILED, E::ClusterAuthorizationFailed),
            (TRANSACTIONAL_ID_AUTHORIZATION_FAILED, E::TransactionalIdAuthorizationFailed),
            (UNSUPPORTED_SASL_MECHANISM, E::UnsupportedSaslMechanism),
            (ILLEGAL_SASL_STATE, E::IllegalSaslState),
            (SASL_AUTHENTICATION_FAILED, E::SaslAuthenticationFailed),
            (RESOURCE_NOT_FOUND, E::ResourceNotFound),
            (DUPLICATE_RESOURCE, E::DuplicateResource),
            (UNACCEPTABLE_CREDENTIAL, E::UnacceptableCredential),
            (PREFERRED_LEADER_NOT_AVAILABLE, E::PreferredLeaderNotAvailable),
            (ELIGIBLE_LEADERS_NOT_AVAILABLE, E::EligibleLeadersNotAvailable),
            (ELECTION_NOT_NEEDED, E::ElectionNotNeeded),
            (NO_REASSIGNMENT_IN_PROGRESS, E::NoReassignmentInProgress),
        ];
        for (ours, kafka) in table {
            assert_eq!(ours, kafka.code(), "{kafka:?}");
        }
        assert_eq!(E::try_from_code(NONE), None, "0 is no error");
    }
}
