//! CreateAcls, DescribeAcls and DeleteAcls in the version matrix. Each
//! check names its own topic (`acl-matrix-<api>-<v>`) and principal, which
//! no other check uses, so the ACLs it leaves behind decide nothing else
//! (the matrix broker keeps `allow_everyone_if_no_acl_found`).

use kafka_protocol::messages::{
    create_acls_request::AclCreation, delete_acls_request::DeleteAclsFilter,
    describe_acls_response::DescribeAclsResource, *,
};

use super::{s, Wire, NONE};

const INVALID_REQUEST: i16 = 42;
const TOPIC: i8 = 2;
const PREFIXED: i8 = 4;
const LITERAL: i8 = 3;
const ANY: i8 = 1;
const READ: i8 = 3;
const ALLOW: i8 = 3;
const PRINCIPAL: &str = "User:matrix";

fn creation(name: &str) -> AclCreation {
    AclCreation::default()
        .with_resource_type(TOPIC)
        .with_resource_name(s(name))
        .with_resource_pattern_type(PREFIXED)
        .with_principal(s(PRINCIPAL))
        .with_host(s("*"))
        .with_operation(READ)
        .with_permission_type(ALLOW)
}

fn create(w: &mut Wire, v: i16, creations: Vec<AclCreation>) -> CreateAclsResponse {
    w.call(ApiKey::CreateAcls, v, &CreateAclsRequest::default().with_creations(creations))
}

/// Every ACL on the topic resource `name` (any pattern), at version `v`.
fn describe(w: &mut Wire, v: i16, name: &str) -> DescribeAclsResponse {
    let req = DescribeAclsRequest::default()
        .with_resource_type_filter(TOPIC)
        .with_resource_name_filter(Some(s(name)))
        .with_pattern_type_filter(ANY)
        .with_principal_filter(None)
        .with_host_filter(None)
        .with_operation(ANY)
        .with_permission_type(ANY);
    w.call(ApiKey::DescribeAcls, v, &req)
}

fn the_one(resources: &[DescribeAclsResource], name: &str) {
    assert_eq!(resources.len(), 1, "{resources:?}");
    let r = &resources[0];
    assert_eq!((r.resource_type, r.resource_name.as_str(), r.pattern_type), (TOPIC, name, PREFIXED));
    assert_eq!(r.acls.len(), 1, "{r:?}");
    let a = &r.acls[0];
    assert_eq!((a.principal.as_str(), a.host.as_str(), a.operation, a.permission_type), (PRINCIPAL, "*", READ, ALLOW));
}

pub fn create_acls(w: &mut Wire, v: i16) {
    let name = format!("acl-matrix-create-{v}");
    let bad = creation(&name).with_resource_pattern_type(ANY);
    let resp = create(w, v, vec![creation(&name), bad]);
    let codes: Vec<i16> = resp.results.iter().map(|r| r.error_code).collect();
    assert_eq!(codes, [NONE, INVALID_REQUEST], "{resp:?}");
    the_one(&describe(w, 1, &name).resources, &name);
}

pub fn describe_acls(w: &mut Wire, v: i16) {
    let name = format!("acl-matrix-describe-{v}");
    assert_eq!(create(w, 1, vec![creation(&name)]).results[0].error_code, NONE);
    let resp = describe(w, v, &name);
    assert_eq!(resp.error_code, NONE, "{resp:?}");
    the_one(&resp.resources, &name);
    let unknown_op = DescribeAclsRequest::default().with_resource_type_filter(TOPIC).with_pattern_type_filter(ANY);
    let resp: DescribeAclsResponse = w.call(ApiKey::DescribeAcls, v, &unknown_op.with_permission_type(ANY));
    assert_eq!(resp.error_code, INVALID_REQUEST, "operation UNKNOWN (0) is not a filter: {resp:?}");
}

pub fn delete_acls(w: &mut Wire, v: i16) {
    let name = format!("acl-matrix-delete-{v}");
    assert_eq!(create(w, 1, vec![creation(&name)]).results[0].error_code, NONE);
    let filter = DeleteAclsFilter::default()
        .with_resource_type_filter(TOPIC)
        .with_resource_name_filter(Some(s(&name)))
        .with_pattern_type_filter(LITERAL)
        .with_principal_filter(None)
        .with_host_filter(None)
        .with_operation(ANY)
        .with_permission_type(ANY);
    let prefixed = filter.clone().with_pattern_type_filter(PREFIXED);
    let req = DeleteAclsRequest::default().with_filters(vec![filter, prefixed]);
    let resp: DeleteAclsResponse = w.call(ApiKey::DeleteAcls, v, &req);
    let [literal, prefixed] = &resp.filter_results[..] else { panic!("two filter results: {resp:?}") };
    assert_eq!((literal.error_code, literal.matching_acls.len()), (NONE, 0), "a literal filter: {literal:?}");
    assert_eq!((prefixed.error_code, prefixed.matching_acls.len()), (NONE, 1), "{prefixed:?}");
    let m = &prefixed.matching_acls[0];
    assert_eq!((m.resource_name.as_str(), m.principal.as_str(), m.operation), (name.as_str(), PRINCIPAL, READ));
    assert!(describe(w, 1, &name).resources.is_empty(), "deleted ACLs are gone");
}
