//! ACLs and SCRAM credentials in the metadata quorum (issue 18): three
//! broker processes on 127.0.0.1. An ACL created through one broker is
//! enforced by the broker leading the partition it names and listed by
//! every broker; deleted through another, it is gone everywhere. A SCRAM
//! credential set through one broker is described by the others, and a
//! restarted broker still has both from its files or the log.

mod common;

use std::time::{Duration, Instant};

use bytes::Bytes;
use common::{
    broker::Broker,
    cluster::{agreed_leaders, broker, one_record, start_three, wait_for_three},
    wire::{create_topic, produce, Wire},
};
use kafka_protocol::messages::{
    alter_user_scram_credentials_request::ScramCredentialUpsertion, create_acls_request::AclCreation,
    describe_user_scram_credentials_request::UserName, AlterUserScramCredentialsRequest,
    AlterUserScramCredentialsResponse, ApiKey, CreateAclsRequest, CreateAclsResponse, DeleteAclsRequest,
    DeleteAclsResponse, DescribeAclsRequest, DescribeAclsResponse, DescribeUserScramCredentialsRequest,
    DescribeUserScramCredentialsResponse,
};
use kafka_protocol::protocol::StrBytes;

const TOPIC_AUTHORIZATION_FAILED: i16 = 29;
// Kafka's codes: resource TOPIC, pattern LITERAL, operation WRITE,
// permission DENY; ANY for filters.
const TOPIC: i8 = 2;
const LITERAL: i8 = 3;
const WRITE: i8 = 4;
const DENY: i8 = 2;
const ANY: i8 = 1;

/// Names of the topics an ACL on `broker` names, from DescribeAcls.
fn acl_topics(broker: &Broker) -> Vec<String> {
    let mut request = DescribeAclsRequest::default();
    request.resource_type_filter = ANY;
    request.pattern_type_filter = ANY;
    request.operation = ANY;
    request.permission_type = ANY;
    (request.resource_name_filter, request.principal_filter, request.host_filter) = (None, None, None);
    let r: DescribeAclsResponse = Wire::connect(&broker.bootstrap()).call(ApiKey::DescribeAcls, 2, &request);
    assert_eq!(r.error_code, 0);
    r.resources.iter().map(|res| res.resource_name.to_string()).collect()
}

/// Waits until every broker lists ACLs on exactly `topics`.
fn wait_for_acls(brokers: &[(i32, Broker)], topics: &[&str], what: &str) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let seen: Vec<Vec<String>> = brokers.iter().map(|(_, b)| acl_topics(b)).collect();
        if seen.iter().all(|s| s == topics) {
            return;
        }
        assert!(Instant::now() < deadline, "{what}: brokers list ACLs on {seen:?}, expected {topics:?}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The SCRAM mechanisms (with iterations) `broker` describes for `user`.
fn scram_of(broker: &Broker, user: &str) -> Vec<(i8, i32)> {
    let mut name = UserName::default();
    name.name = StrBytes::from_string(user.to_string());
    let mut request = DescribeUserScramCredentialsRequest::default();
    request.users = Some(vec![name]);
    let r: DescribeUserScramCredentialsResponse =
        Wire::connect(&broker.bootstrap()).call(ApiKey::DescribeUserScramCredentials, 0, &request);
    let Some(result) = r.results.first() else { return Vec::new() };
    result.credential_infos.iter().map(|c| (c.mechanism, c.iterations)).collect()
}

#[test]
fn acls_and_credentials_set_on_one_broker_hold_on_every_broker() {
    let dir = tempfile::tempdir().unwrap();
    let mut brokers = start_three(dir.path());
    wait_for_three(&brokers);
    assert_eq!(create_topic(&mut Wire::connect(&broker(&brokers, 1).bootstrap()), "guarded", 3), 0);
    let leaders = agreed_leaders(&brokers, "guarded").expect("guarded exists everywhere");

    // Deny every anonymous write to "guarded", through broker 1.
    let mut deny = AclCreation::default();
    deny.resource_type = TOPIC;
    deny.resource_name = StrBytes::from_static_str("guarded");
    deny.resource_pattern_type = LITERAL;
    deny.principal = StrBytes::from_static_str("User:ANONYMOUS");
    deny.host = StrBytes::from_static_str("*");
    deny.operation = WRITE;
    deny.permission_type = DENY;
    let mut create = CreateAclsRequest::default();
    create.creations.push(deny);
    let created: CreateAclsResponse =
        Wire::connect(&broker(&brokers, 1).bootstrap()).call(ApiKey::CreateAcls, 2, &create);
    assert_eq!(created.results[0].error_code, 0);
    wait_for_acls(&brokers, &["guarded"], "after the create through broker 1");
    // Each partition's leader, whichever broker it is, refuses the write.
    for (p, &leader) in leaders.iter().enumerate() {
        let mut w = Wire::connect(&broker(&brokers, leader).bootstrap());
        let (error, _) = produce(&mut w, "guarded", p as i32, one_record("denied"), -1);
        assert_eq!(error, TOPIC_AUTHORIZATION_FAILED, "guarded-{p} on broker {leader}");
    }

    // A credential for carol, through broker 2.
    let salt = b"carol-salt-0123".to_vec();
    let mut up = ScramCredentialUpsertion::default();
    up.name = StrBytes::from_static_str("carol");
    up.mechanism = 1; // SCRAM-SHA-256
    up.iterations = 4096;
    up.salt = Bytes::from(salt);
    up.salted_password = Bytes::from(vec![7u8; 32]);
    let request = AlterUserScramCredentialsRequest::default().with_upsertions(vec![up]);
    let altered: AlterUserScramCredentialsResponse =
        Wire::connect(&broker(&brokers, 2).bootstrap()).call(ApiKey::AlterUserScramCredentials, 0, &request);
    assert_eq!(altered.results[0].error_code, 0, "{:?}", altered.results[0].error_message);
    let deadline = Instant::now() + Duration::from_secs(20);
    while brokers.iter().any(|(_, b)| scram_of(b, "carol") != [(1, 4096)]) {
        assert!(Instant::now() < deadline, "carol's credential did not reach every broker");
        std::thread::sleep(Duration::from_millis(100));
    }

    // A broker killed and restarted keeps both.
    let b3 = &mut brokers.iter_mut().find(|(id, _)| *id == 3).unwrap().1;
    b3.kill();
    b3.restart();
    wait_for_three(&brokers);
    wait_for_acls(&brokers, &["guarded"], "after broker 3 restarted");
    assert_eq!(scram_of(broker(&brokers, 3), "carol"), [(1, 4096)]);

    // Deleted through broker 3: gone everywhere, and writes are taken.
    let mut filter = kafka_protocol::messages::delete_acls_request::DeleteAclsFilter::default();
    filter.resource_type_filter = TOPIC;
    filter.resource_name_filter = Some(StrBytes::from_static_str("guarded"));
    filter.pattern_type_filter = LITERAL;
    filter.operation = ANY;
    filter.permission_type = ANY;
    (filter.principal_filter, filter.host_filter) = (None, None);
    let mut delete = DeleteAclsRequest::default();
    delete.filters.push(filter);
    let deleted: DeleteAclsResponse =
        Wire::connect(&broker(&brokers, 3).bootstrap()).call(ApiKey::DeleteAcls, 2, &delete);
    assert_eq!(deleted.filter_results[0].error_code, 0);
    assert_eq!(deleted.filter_results[0].matching_acls.len(), 1, "the one ACL created through broker 1");
    wait_for_acls(&brokers, &[], "after the delete through broker 3");
    for (p, &leader) in leaders.iter().enumerate() {
        let mut w = Wire::connect(&broker(&brokers, leader).bootstrap());
        assert_eq!(produce(&mut w, "guarded", p as i32, one_record("allowed"), -1).0, 0, "guarded-{p}");
    }
    for (_, b) in brokers.iter_mut() {
        b.stop();
    }
}
