//! The walker against the crate itself: requests the crate encodes, at
//! every version the broker advertises, must walk to exactly their last
//! byte; a patched count must be refused naming its field; and on mutated
//! inputs the walker accepts, the crate must read exactly as far as the
//! walker did (so the table cannot drift from the decoder unnoticed).

use bytes::{Bytes, BytesMut};
use kafka_protocol::{
    messages::*,
    protocol::{Decodable, Encodable},
};

use super::{check, walk, walk_header, ClaimError, Fault};
use crate::server::handlers::SUPPORTED;

/// Every advertised (API, version) the crate decodes (Produce v0–v2 are
/// answered without decoding).
fn served() -> impl Iterator<Item = (ApiKey, i16)> {
    SUPPORTED.iter().flat_map(|&(key, min, max)| {
        let min = if key == ApiKey::Produce { min.max(3) } else { min };
        (min..=max).map(move |v| (key, v))
    })
}

fn encode<R: Encodable>(r: &R, version: i16) -> Bytes {
    let mut out = BytesMut::new();
    r.encode(&mut out, version).unwrap_or_else(|e| panic!("encoding at v{version}: {e}"));
    out.freeze()
}

/// Decodes with the crate, as the broker does: how many bytes it read.
fn crate_reads(key: ApiKey, version: i16, body: &[u8]) -> Option<Result<usize, String>> {
    let mut buf = Bytes::copy_from_slice(body);
    macro_rules! read {
        ($ty:ty) => {
            <$ty>::decode(&mut buf, version).map(|_| ()).map_err(|e| e.to_string())
        };
    }
    let result = match key {
        ApiKey::Metadata => read!(MetadataRequest),
        ApiKey::CreateTopics => read!(CreateTopicsRequest),
        ApiKey::DeleteTopics => read!(DeleteTopicsRequest),
        ApiKey::CreatePartitions => read!(CreatePartitionsRequest),
        ApiKey::DescribeConfigs => read!(DescribeConfigsRequest),
        ApiKey::AlterConfigs => read!(AlterConfigsRequest),
        ApiKey::DescribeCluster => read!(DescribeClusterRequest),
        ApiKey::DeleteRecords => read!(DeleteRecordsRequest),
        ApiKey::OffsetForLeaderEpoch => read!(OffsetForLeaderEpochRequest),
        ApiKey::DescribeLogDirs => read!(DescribeLogDirsRequest),
        ApiKey::ElectLeaders => read!(ElectLeadersRequest),
        ApiKey::AlterPartitionReassignments => read!(AlterPartitionReassignmentsRequest),
        ApiKey::ListPartitionReassignments => read!(ListPartitionReassignmentsRequest),
        ApiKey::IncrementalAlterConfigs => read!(IncrementalAlterConfigsRequest),
        ApiKey::Produce => read!(ProduceRequest),
        ApiKey::Fetch => read!(FetchRequest),
        ApiKey::ListOffsets => read!(ListOffsetsRequest),
        ApiKey::InitProducerId => read!(InitProducerIdRequest),
        ApiKey::WriteTxnMarkers => read!(WriteTxnMarkersRequest),
        ApiKey::FindCoordinator => read!(FindCoordinatorRequest),
        ApiKey::JoinGroup => read!(JoinGroupRequest),
        ApiKey::SyncGroup => read!(SyncGroupRequest),
        ApiKey::Heartbeat => read!(HeartbeatRequest),
        ApiKey::LeaveGroup => read!(LeaveGroupRequest),
        ApiKey::OffsetCommit => read!(OffsetCommitRequest),
        ApiKey::OffsetFetch => read!(OffsetFetchRequest),
        ApiKey::DescribeGroups => read!(DescribeGroupsRequest),
        ApiKey::ListGroups => read!(ListGroupsRequest),
        ApiKey::DeleteGroups => read!(DeleteGroupsRequest),
        ApiKey::OffsetDelete => read!(OffsetDeleteRequest),
        ApiKey::ApiVersions => read!(ApiVersionsRequest),
        ApiKey::AddPartitionsToTxn => read!(AddPartitionsToTxnRequest),
        ApiKey::AddOffsetsToTxn => read!(AddOffsetsToTxnRequest),
        ApiKey::EndTxn => read!(EndTxnRequest),
        ApiKey::TxnOffsetCommit => read!(TxnOffsetCommitRequest),
        ApiKey::DescribeTransactions => read!(DescribeTransactionsRequest),
        ApiKey::ListTransactions => read!(ListTransactionsRequest),
        ApiKey::CreateAcls => read!(CreateAclsRequest),
        ApiKey::DescribeAcls => read!(DescribeAclsRequest),
        ApiKey::DeleteAcls => read!(DeleteAclsRequest),
        ApiKey::SaslHandshake => read!(SaslHandshakeRequest),
        ApiKey::SaslAuthenticate => read!(SaslAuthenticateRequest),
        ApiKey::DescribeUserScramCredentials => read!(DescribeUserScramCredentialsRequest),
        ApiKey::AlterUserScramCredentials => read!(AlterUserScramCredentialsRequest),
        _ => return None,
    };
    Some(result.map(|()| body.len() - buf.len()))
}

/// The default (empty) request of `key`, encoded at `version`.
fn default_body(key: ApiKey, version: i16) -> Bytes {
    macro_rules! enc {
        ($ty:ty) => {
            encode(&<$ty>::default(), version)
        };
    }
    match key {
        ApiKey::Metadata => enc!(MetadataRequest),
        ApiKey::CreateTopics => enc!(CreateTopicsRequest),
        ApiKey::DeleteTopics => enc!(DeleteTopicsRequest),
        ApiKey::CreatePartitions => enc!(CreatePartitionsRequest),
        ApiKey::DescribeConfigs => enc!(DescribeConfigsRequest),
        ApiKey::AlterConfigs => enc!(AlterConfigsRequest),
        ApiKey::DescribeCluster => enc!(DescribeClusterRequest),
        ApiKey::DeleteRecords => enc!(DeleteRecordsRequest),
        ApiKey::OffsetForLeaderEpoch => enc!(OffsetForLeaderEpochRequest),
        ApiKey::DescribeLogDirs => enc!(DescribeLogDirsRequest),
        ApiKey::ElectLeaders => enc!(ElectLeadersRequest),
        ApiKey::AlterPartitionReassignments => enc!(AlterPartitionReassignmentsRequest),
        ApiKey::ListPartitionReassignments => enc!(ListPartitionReassignmentsRequest),
        ApiKey::IncrementalAlterConfigs => enc!(IncrementalAlterConfigsRequest),
        ApiKey::Produce => enc!(ProduceRequest),
        ApiKey::Fetch => enc!(FetchRequest),
        ApiKey::ListOffsets => enc!(ListOffsetsRequest),
        ApiKey::InitProducerId => enc!(InitProducerIdRequest),
        ApiKey::WriteTxnMarkers => enc!(WriteTxnMarkersRequest),
        ApiKey::FindCoordinator => enc!(FindCoordinatorRequest),
        ApiKey::JoinGroup => enc!(JoinGroupRequest),
        ApiKey::SyncGroup => enc!(SyncGroupRequest),
        ApiKey::Heartbeat => enc!(HeartbeatRequest),
        ApiKey::LeaveGroup => enc!(LeaveGroupRequest),
        ApiKey::OffsetCommit => enc!(OffsetCommitRequest),
        ApiKey::OffsetFetch => enc!(OffsetFetchRequest),
        ApiKey::DescribeGroups => enc!(DescribeGroupsRequest),
        ApiKey::ListGroups => enc!(ListGroupsRequest),
        ApiKey::DeleteGroups => enc!(DeleteGroupsRequest),
        ApiKey::OffsetDelete => enc!(OffsetDeleteRequest),
        ApiKey::ApiVersions => enc!(ApiVersionsRequest),
        ApiKey::AddPartitionsToTxn => enc!(AddPartitionsToTxnRequest),
        ApiKey::AddOffsetsToTxn => enc!(AddOffsetsToTxnRequest),
        ApiKey::EndTxn => enc!(EndTxnRequest),
        ApiKey::TxnOffsetCommit => enc!(TxnOffsetCommitRequest),
        ApiKey::DescribeTransactions => enc!(DescribeTransactionsRequest),
        ApiKey::ListTransactions => enc!(ListTransactionsRequest),
        ApiKey::CreateAcls => enc!(CreateAclsRequest),
        ApiKey::DescribeAcls => enc!(DescribeAclsRequest),
        ApiKey::DeleteAcls => enc!(DeleteAclsRequest),
        ApiKey::SaslHandshake => enc!(SaslHandshakeRequest),
        ApiKey::SaslAuthenticate => enc!(SaslAuthenticateRequest),
        ApiKey::DescribeUserScramCredentials => enc!(DescribeUserScramCredentialsRequest),
        ApiKey::AlterUserScramCredentials => enc!(AlterUserScramCredentialsRequest),
        other => panic!("{other:?} is not served"),
    }
}

/// A request of `key` with two entries in every array it has at `version`
/// (and an unknown tagged field where flexible), encoded; `None` where the
/// API has no array worth populating beyond its default.
fn populated_body(key: ApiKey, v: i16) -> Option<Bytes> {
    Some(match key {
        ApiKey::Metadata => encode(&super::tests_populated::metadata(v), v),
        ApiKey::Fetch => encode(&super::tests_populated::fetch(v), v),
        ApiKey::Produce => encode(&super::tests_populated::produce(v), v),
        ApiKey::OffsetCommit => encode(&super::tests_populated::offset_commit(v), v),
        ApiKey::OffsetFetch => encode(&super::tests_populated::offset_fetch(v), v),
        ApiKey::JoinGroup => encode(&super::tests_populated::join_group(v), v),
        ApiKey::SyncGroup => encode(&super::tests_populated::sync_group(v), v),
        ApiKey::LeaveGroup => encode(&super::tests_populated::leave_group(v), v),
        ApiKey::ListOffsets => encode(&super::tests_populated::list_offsets(v), v),
        ApiKey::CreateTopics => encode(&super::tests_populated::create_topics(v), v),
        ApiKey::DeleteTopics => encode(&super::tests_populated::delete_topics(v), v),
        ApiKey::CreatePartitions => encode(&super::tests_populated::create_partitions(v), v),
        ApiKey::DescribeConfigs => encode(&super::tests_populated::describe_configs(v), v),
        ApiKey::AlterConfigs => encode(&super::tests_populated::alter_configs(v), v),
        ApiKey::IncrementalAlterConfigs => encode(&super::tests_populated::incremental_alter_configs(v), v),
        ApiKey::DeleteRecords => encode(&super::tests_populated::delete_records(v), v),
        ApiKey::OffsetForLeaderEpoch => encode(&super::tests_populated::offset_for_leader_epoch(v), v),
        ApiKey::DescribeLogDirs => encode(&super::tests_populated::describe_log_dirs(v), v),
        ApiKey::ElectLeaders => encode(&super::tests_populated::elect_leaders(v), v),
        ApiKey::AlterPartitionReassignments => encode(&super::tests_populated::alter_partition_reassignments(v), v),
        ApiKey::ListPartitionReassignments => encode(&super::tests_populated::list_partition_reassignments(v), v),
        ApiKey::WriteTxnMarkers => encode(&super::tests_populated::write_txn_markers(v), v),
        ApiKey::DescribeGroups => encode(&super::tests_populated::describe_groups(v), v),
        ApiKey::ListGroups => encode(&super::tests_populated::list_groups(v), v),
        ApiKey::DeleteGroups => encode(&super::tests_populated::delete_groups(v), v),
        ApiKey::OffsetDelete => encode(&super::tests_populated::offset_delete(v), v),
        ApiKey::AddPartitionsToTxn => encode(&super::tests_populated::add_partitions_to_txn(v), v),
        ApiKey::TxnOffsetCommit => encode(&super::tests_populated::txn_offset_commit(v), v),
        ApiKey::DescribeTransactions => encode(&super::tests_populated::describe_transactions(v), v),
        ApiKey::ListTransactions => encode(&super::tests_populated::list_transactions(v), v),
        ApiKey::CreateAcls => encode(&super::tests_populated::create_acls(v), v),
        ApiKey::DescribeAcls => encode(&super::tests_populated::describe_acls(v), v),
        ApiKey::DeleteAcls => encode(&super::tests_populated::delete_acls(v), v),
        ApiKey::SaslAuthenticate => encode(&super::tests_populated::sasl_authenticate(v), v),
        ApiKey::DescribeUserScramCredentials => encode(&super::tests_populated::describe_user_scram_credentials(v), v),
        ApiKey::AlterUserScramCredentials => encode(&super::tests_populated::alter_user_scram_credentials(v), v),
        _ => return None,
    })
}

fn assert_walks_whole(key: ApiKey, v: i16, body: &[u8], what: &str) {
    let walked = walk(key, v, body).unwrap_or_else(|e| panic!("{what} {key:?} v{v} refused: {e}"));
    assert_eq!(walked, body.len(), "{what} {key:?} v{v}: walked {walked} of {} bytes", body.len());
    assert_eq!(crate_reads(key, v, body), Some(Ok(body.len())), "{what} {key:?} v{v}: the crate reads it all");
}

#[test]
fn every_served_default_request_walks_to_its_end() {
    for (key, v) in served() {
        assert_walks_whole(key, v, &default_body(key, v), "default");
    }
}

#[test]
fn every_populated_request_walks_to_its_end() {
    let mut populated = 0;
    for (key, v) in served() {
        if let Some(body) = populated_body(key, v) {
            assert_walks_whole(key, v, &body, "populated");
            populated += 1;
        }
    }
    assert!(populated > 130, "{populated} populated (API, version) pairs");
}

/// The fewest bytes a struct takes on the wire at version `v`.
fn min_wire_bytes(st: &super::Struct, v: i16, flexible: bool) -> usize {
    use super::Kind;
    let length = |classic: usize| if flexible { 1 } else { classic };
    let own: usize = st
        .fields
        .iter()
        .filter(|f| (f.min..=f.max).contains(&v))
        .map(|f| match f.kind {
            Kind::Fixed(n) => n,
            Kind::Str => length(2),
            Kind::Str16 => 2,
            Kind::Bytes | Kind::Array(_) => length(4),
            Kind::Struct(inner) => min_wire_bytes(inner, v, flexible),
        })
        .sum();
    own + usize::from(flexible)
}

/// Every struct an array of `st` holds at version `v`, however deep.
fn array_structs(st: &'static super::Struct, v: i16, out: &mut Vec<(&'static str, &'static super::Struct)>) {
    for f in st.fields.iter().filter(|f| (f.min..=f.max).contains(&v)) {
        if let super::Kind::Array(super::Elem::Struct(inner)) = f.kind {
            out.push((f.name, inner));
            array_structs(inner, v, out);
        }
    }
}

#[test]
fn array_elements_never_take_zero_bytes() {
    // The bound counts one byte per element; a struct with no field on the
    // wire at some version would break it, so none may exist.
    for (key, v) in served() {
        let message = super::layouts::message(key).expect("a served API has a layout");
        let flexible = v >= message.flexible_from;
        let mut structs = Vec::new();
        array_structs(message.body, v, &mut structs);
        for (name, st) in structs {
            assert!(min_wire_bytes(st, v, flexible) >= 1, "{key:?} v{v} {name}");
        }
    }
}

/// The offset just after the first occurrence of `marker` in `body`.
fn after(body: &[u8], marker: &[u8]) -> usize {
    body.windows(marker.len()).position(|w| w == marker).expect("marker in body") + marker.len()
}

/// `body` with the count at `at` (Int32, or one-byte varint where
/// flexible) replaced by one claiming `claimed` entries.
fn patch_count(body: &[u8], at: usize, flexible: bool, claimed: u32) -> Vec<u8> {
    let mut out = body[..at].to_vec();
    if flexible {
        let mut n = claimed + 1;
        while n >= 0x80 {
            out.push((n as u8) | 0x80);
            n >>= 7;
        }
        out.push(n as u8);
        out.extend_from_slice(&body[at + 1..]);
    } else {
        out.extend_from_slice(&(claimed as i32).to_be_bytes());
        out.extend_from_slice(&body[at + 4..]);
    }
    out
}

fn assert_too_many(key: ApiKey, v: i16, body: &[u8], field: &str) -> ClaimError {
    let e = check(key, v, body).expect_err("a huge count is refused");
    assert_eq!(e.field, field, "{key:?} v{v}: {e}");
    assert!(matches!(e.fault, Fault::TooMany { claimed: 67_108_864, .. }), "{key:?} v{v}: {e}");
    e
}

#[test]
fn a_huge_top_level_count_is_refused_naming_it() {
    for v in 0..=12 {
        let body = encode(&super::tests_populated::metadata(v), v);
        let e = assert_too_many(ApiKey::Metadata, v, &patch_count(&body, 0, v >= 9, 1 << 26), "topics");
        if v == 1 {
            let left = body.len() - 4;
            assert_eq!(e.to_string(), format!("Metadata v1: topics claims 67108864 entries but {left} bytes are left"));
        }
    }
}

#[test]
fn a_huge_nested_count_is_refused_naming_its_path() {
    for v in 4..=17 {
        // Fetch: the first topic's partitions, after its name (or id).
        let body = encode(&super::tests_populated::fetch(v), v);
        let at = if v >= 13 { after(&body, &super::tests_populated::TOPIC_ID) } else { after(&body, b"fetch-a") };
        assert_too_many(ApiKey::Fetch, v, &patch_count(&body, at, v >= 12, 1 << 26), "topics.partitions");
    }
    for v in 3..=11 {
        let body = encode(&super::tests_populated::produce(v), v);
        let at = after(&body, b"produce-a");
        assert_too_many(ApiKey::Produce, v, &patch_count(&body, at, v >= 9, 1 << 26), "topic_data.partition_data");
    }
    for v in 2..=9 {
        let body = encode(&super::tests_populated::offset_commit(v), v);
        let at = after(&body, b"commit-a");
        assert_too_many(ApiKey::OffsetCommit, v, &patch_count(&body, at, v >= 8, 1 << 26), "topics.partitions");
    }
    for v in 0..=9 {
        let body = encode(&super::tests_populated::join_group(v), v);
        let at = after(&body, b"consumer");
        assert_too_many(ApiKey::JoinGroup, v, &patch_count(&body, at, v >= 6, 1 << 26), "protocols");
    }
}

#[test]
fn a_length_past_the_end_is_refused() {
    let v = 9;
    let body = encode(&super::tests_populated::produce(v), v);
    // The first partition's records, after its index (0, Int32).
    let at = after(&body, b"produce-a") + 1 + 4;
    let e = check(ApiKey::Produce, v, &patch_count(&body, at, true, 1 << 30)).expect_err("refused");
    assert_eq!(e.field, "topic_data.partition_data.records");
    assert!(matches!(e.fault, Fault::Truncated { claimed: 1_073_741_824, .. }), "{e}");
}

#[test]
fn the_fuzz_regression_is_refused_before_decoding() {
    let frame = include_bytes!("../../../tests/fuzz/regressions/request_frame/metadata_two_billion_topics");
    let key = ApiKey::Metadata;
    let version = i16::from_be_bytes([frame[2], frame[3]]);
    let header = walk_header(key.request_header_version(version), frame).expect("the header is sound");
    let e = check(key, version, &frame[header..]).expect_err("refused");
    assert_eq!(e.field, "topics");
    assert!(matches!(e.fault, Fault::TooMany { .. }), "{e}");
}

/// A small deterministic generator, so failures replay.
struct XorShift(u64);

impl XorShift {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

#[test]
fn where_the_walker_accepts_the_crate_reads_exactly_as_far() {
    // Mutate populated requests byte by byte; whenever the walker accepts,
    // decoding is safe to try, and a successful decode must end where the
    // walk did. Refused inputs are not decoded: that is what could abort.
    let mut rng = XorShift(0x9E37_79B9_7F4A_7C15);
    let mut agreed = 0;
    for (key, v) in served() {
        let Some(body) = populated_body(key, v) else { continue };
        for at in 0..body.len() {
            let mut mutated = body.to_vec();
            mutated[at] = match rng.next() % 4 {
                0 => 0xFF,
                1 => 0x00,
                2 => 0x80,
                _ => rng.next() as u8,
            };
            if let Ok(walked) = walk(key, v, &mutated) {
                if let Some(Ok(read)) = crate_reads(key, v, &mutated) {
                    assert_eq!(read, walked, "{key:?} v{v}, byte {at} mutated");
                    agreed += 1;
                }
            }
        }
    }
    assert!(agreed > 1000, "{agreed} mutated inputs decoded");
}

#[test]
fn random_bytes_never_panic_the_walker() {
    let mut rng = XorShift(42);
    for (key, v) in served() {
        for len in 0..64 {
            let body: Vec<u8> = (0..len).map(|_| rng.next() as u8).collect();
            let _ = walk(key, v, &body);
        }
    }
}

#[test]
fn request_headers_walk_to_their_end() {
    let header = RequestHeader::default().with_correlation_id(7).with_client_id(Some("rdkafka".into()));
    for v in 1..=2 {
        let bytes = encode(&header, v);
        assert_eq!(walk_header(v, &bytes), Ok(bytes.len()), "header v{v}");
    }
}
