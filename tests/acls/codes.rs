//! Refusals over the wire, one per kind of resource, each with Kafka's
//! error code where its response's shape puts it.

use kafka_protocol::messages::*;

use crate::common::{
    broker::{metric_sum, metrics_text, Broker},
    random_batch,
    wire::{create_topic, fetch_request, produce, topic_name, Wire},
    Rng,
};

const TOPIC_DENIED: i16 = 29;
const GROUP_DENIED: i16 = 30;
const CLUSTER_DENIED: i16 = 31;
const TXN_DENIED: i16 = 53;

fn s(v: &str) -> kafka_protocol::protocol::StrBytes {
    kafka_protocol::protocol::StrBytes::from_string(v.to_string())
}

fn grant(w: &mut Wire, resource_type: i8, name: &str, operation: i8) -> i16 {
    let c = create_acls_request::AclCreation::default()
        .with_resource_type(resource_type)
        .with_resource_name(s(name))
        .with_resource_pattern_type(3)
        .with_principal(s("User:ANONYMOUS"))
        .with_host(s("*"))
        .with_operation(operation)
        .with_permission_type(3);
    let resp: CreateAclsResponse = w.call(ApiKey::CreateAcls, 3, &CreateAclsRequest::default().with_creations(vec![c]));
    resp.results[0].error_code
}

fn metadata(w: &mut Wire, names: Option<&[&str]>) -> Vec<(String, i16)> {
    let topics = names.map(|ns| {
        ns.iter().map(|n| metadata_request::MetadataRequestTopic::default().with_name(Some(topic_name(n)))).collect()
    });
    let req = MetadataRequest::default().with_topics(topics).with_allow_auto_topic_creation(true);
    let resp: MetadataResponse = w.call(ApiKey::Metadata, 12, &req);
    let mut out: Vec<(String, i16)> = resp
        .topics
        .iter()
        .map(|t| (t.name.as_ref().map(|n| n.to_string()).unwrap_or_default(), t.error_code))
        .collect();
    out.sort();
    out
}

fn init_producer_id(w: &mut Wire, transactional_id: Option<&str>) -> i16 {
    let req = InitProducerIdRequest::default()
        .with_transactional_id(transactional_id.map(|t| s(t).into()))
        .with_transaction_timeout_ms(60_000)
        .with_producer_id((-1).into())
        .with_producer_epoch(-1);
    let resp: InitProducerIdResponse = w.call(ApiKey::InitProducerId, 4, &req);
    resp.error_code
}

fn find_coordinator(w: &mut Wire, group: &str) -> i16 {
    let req = FindCoordinatorRequest::default().with_key(s(group));
    let resp: FindCoordinatorResponse = w.call(ApiKey::FindCoordinator, 3, &req);
    resp.error_code
}

/// With READ on topic `visible` and group `g-ok` only (and no super user),
/// everything else is refused with the code of what was refused.
#[test]
fn refusals_carry_kafkas_error_codes() {
    let dir = crate::common::tempdir().unwrap();
    let data = dir.path().join("data");
    let mut broker = Broker::start_with_config(&data, 1, &super::config(true), &[]);
    let mut w = Wire::connect(&broker.bootstrap());
    for topic in ["visible", "secret"] {
        assert_eq!(create_topic(&mut w, topic, 1), 0, "{topic}");
    }
    let batch = random_batch(&mut Rng::new(17), 3, 100).freeze();
    assert_eq!(produce(&mut w, "secret", 0, batch.clone(), -1).0, 0);
    assert_eq!(grant(&mut w, 2, "visible", 3), 0, "READ on topic visible");
    assert_eq!(grant(&mut w, 3, "g-ok", 3), 0, "READ on group g-ok");
    std::fs::write(broker.config.as_ref().unwrap(), super::config(false)).unwrap();
    broker.stop();
    broker.restart();
    let mut w = Wire::connect(&broker.bootstrap());

    assert_eq!(metadata(&mut w, None), [("visible".to_string(), 0)]);
    let named = metadata(&mut w, Some(&["secret", "visible", "not-yet"]));
    let expected = [("not-yet", TOPIC_DENIED), ("secret", TOPIC_DENIED), ("visible", 0)];
    assert_eq!(named, expected.map(|(n, c)| (n.to_string(), c)), "auto-creation needs CREATE");
    // Partitions live in `<data>/<topic>-<n>`.
    let entries: Vec<String> =
        std::fs::read_dir(&data).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    assert!(entries.iter().any(|n| n == "visible-0"), "{entries:?}");
    assert!(!entries.iter().any(|n| n.starts_with("not-yet")), "refused auto-creation made {entries:?}");

    assert_eq!(produce(&mut w, "visible", 0, batch, -1).0, TOPIC_DENIED, "READ is not WRITE");
    let fetched: FetchResponse = w.call(ApiKey::Fetch, 12, &fetch_request("secret", &[(0, 0)], 0, 1));
    let p = &fetched.responses[0].partitions[0];
    assert_eq!((p.error_code, p.records.as_ref().map_or(0, |r| r.len())), (TOPIC_DENIED, 0), "{p:?}");
    let fetched: FetchResponse = w.call(ApiKey::Fetch, 12, &fetch_request("visible", &[(0, 0)], 0, 1));
    assert_eq!(fetched.responses[0].partitions[0].error_code, 0);

    assert_eq!(find_coordinator(&mut w, "g-ok"), 0);
    assert_eq!(find_coordinator(&mut w, "g-no"), GROUP_DENIED);
    let join = JoinGroupRequest::default().with_group_id(s("g-no").into()).with_session_timeout_ms(10_000);
    let join: JoinGroupResponse = w.call(ApiKey::JoinGroup, 5, &join.with_protocol_type(s("consumer")));
    assert_eq!(join.error_code, GROUP_DENIED);

    assert_eq!(init_producer_id(&mut w, None), CLUSTER_DENIED, "idempotence needs WRITE somewhere");
    assert_eq!(init_producer_id(&mut w, Some("tx")), TXN_DENIED);
    assert_eq!(grant(&mut w, 2, "x", 4), CLUSTER_DENIED, "CreateAcls needs ALTER on the cluster");
    let described: DescribeAclsResponse = w.call(
        ApiKey::DescribeAcls,
        3,
        &DescribeAclsRequest::default()
            .with_resource_type_filter(1)
            .with_pattern_type_filter(1)
            .with_principal_filter(None)
            .with_host_filter(None)
            .with_operation(1)
            .with_permission_type(1),
    );
    assert_eq!(described.error_code, CLUSTER_DENIED);
    let deleted: DeleteTopicsResponse =
        w.call(ApiKey::DeleteTopics, 5, &DeleteTopicsRequest::default().with_topic_names(vec![topic_name("secret")]));
    assert_eq!(deleted.responses[0].error_code, TOPIC_DENIED);
    let cluster: DescribeClusterResponse = w.call(ApiKey::DescribeCluster, 0, &DescribeClusterRequest::default());
    assert_eq!(cluster.error_code, CLUSTER_DENIED);

    let text = metrics_text(&broker);
    for code in [TOPIC_DENIED, GROUP_DENIED, CLUSTER_DENIED, TXN_DENIED] {
        let counted = metric_sum(&text, "shardlog_authorization_denied", &format!("code=\"{code}\""));
        assert!(counted >= 1.0, "denials with code {code} counted: {counted}");
    }
}

fn session_fetch(id: i32, epoch: i32, partitions: &[(i32, i64)]) -> FetchRequest {
    let mut req = fetch_request("carried", partitions, 0, 0);
    if partitions.is_empty() {
        req.topics.clear();
    }
    req.session_id = id;
    req.session_epoch = epoch;
    req
}

/// (error, bytes of records) of the one partition answered.
fn only_partition(resp: &FetchResponse) -> (i16, usize) {
    let parts: Vec<_> = resp.responses.iter().flat_map(|t| &t.partitions).collect();
    assert_eq!(parts.len(), 1, "{resp:?}");
    (parts[0].error_code, parts[0].records.as_ref().map_or(0, |r| r.len()))
}

/// With the default settings (no super users, a resource no ACL names is
/// open), a DENY made on the fly refuses a partition a fetch session
/// already carries, and once a resource has an ACL, operations it does
/// not allow are refused too; deleting it opens the resource again.
#[test]
fn a_deny_reaches_a_fetch_session_and_closes_the_topic_to_what_it_does_not_allow() {
    let dir = crate::common::tempdir().unwrap();
    let broker = Broker::start(&dir.path().join("data"), 1);
    let mut w = Wire::connect(&broker.bootstrap());
    assert_eq!(create_topic(&mut w, "carried", 1), 0);
    let batch = random_batch(&mut Rng::new(5), 2, 100).freeze();
    assert_eq!(produce(&mut w, "carried", 0, batch.clone(), -1).0, 0);
    let resp: FetchResponse = w.call(ApiKey::Fetch, 12, &session_fetch(0, 0, &[(0, 0)]));
    let id = resp.session_id;
    assert!(id > 0 && only_partition(&resp).1 > 0, "{resp:?}");

    let deny = create_acls_request::AclCreation::default()
        .with_resource_type(2)
        .with_resource_name(s("carried"))
        .with_resource_pattern_type(3)
        .with_principal(s("User:ANONYMOUS"))
        .with_host(s("*"))
        .with_operation(3)
        .with_permission_type(2);
    let made: CreateAclsResponse =
        w.call(ApiKey::CreateAcls, 2, &CreateAclsRequest::default().with_creations(vec![deny.clone()]));
    assert_eq!(made.results[0].error_code, 0, "the cluster has no ACL: open to all");

    let resp: FetchResponse = w.call(ApiKey::Fetch, 12, &session_fetch(id, 1, &[]));
    assert_eq!(only_partition(&resp), (TOPIC_DENIED, 0), "the session's partition is refused");
    assert_eq!(produce(&mut w, "carried", 0, batch, -1).0, TOPIC_DENIED, "an ACL names the topic now");

    let filter = delete_acls_request::DeleteAclsFilter::default()
        .with_resource_type_filter(2)
        .with_resource_name_filter(Some(s("carried")))
        .with_pattern_type_filter(3)
        .with_principal_filter(None)
        .with_host_filter(None)
        .with_operation(1)
        .with_permission_type(1);
    let gone: DeleteAclsResponse =
        w.call(ApiKey::DeleteAcls, 2, &DeleteAclsRequest::default().with_filters(vec![filter]));
    assert_eq!(gone.filter_results[0].matching_acls.len(), 1, "{gone:?}");
    let resp: FetchResponse = w.call(ApiKey::Fetch, 12, &session_fetch(id, 2, &[]));
    let (error, bytes) = only_partition(&resp);
    assert!(error == 0 && bytes > 0, "open again: {resp:?}");
}
