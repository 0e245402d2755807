//! CreateAcls, DescribeAcls, DeleteAcls v1–3 (v0, without pattern types,
//! cannot be decoded by the protocol crate; librdkafka sends v1).
//! Changing ACLs needs ALTER on the cluster, listing them DESCRIBE; the
//! change goes through the controller and reaches every shard before the
//! answer (`shard::acl_admin`).

use std::{collections::BTreeMap, rc::Rc};

use kafka_protocol::messages::{
    create_acls_response::AclCreationResult,
    delete_acls_response::{DeleteAclsFilterResult, DeleteAclsMatchingAcl},
    describe_acls_response::{AclDescription, DescribeAclsResource},
    CreateAclsRequest, CreateAclsResponse, DeleteAclsRequest, DeleteAclsResponse, DescribeAclsRequest,
    DescribeAclsResponse,
};

use super::str_bytes;
use crate::{
    protocol::errors::{self, ErrorCode},
    security::{
        acl::{Acl, AclFilter, Operation, PatternType, Permission, ResourceType},
        Session,
    },
    server::authz,
    shard::{acl_admin::ChangeAcls, Shard},
};

fn created(code: ErrorCode, message: Option<String>) -> AclCreationResult {
    AclCreationResult::default().with_error_code(code).with_error_message(message.map(|m| str_bytes(&m)))
}

fn acl_of(c: &kafka_protocol::messages::create_acls_request::AclCreation) -> Result<Acl, String> {
    let acl = Acl {
        resource_type: ResourceType::from_code(c.resource_type)
            .ok_or_else(|| format!("unknown resource type {}", c.resource_type))?,
        resource_name: c.resource_name.to_string(),
        pattern_type: PatternType::from_code(c.resource_pattern_type)
            .ok_or_else(|| format!("unknown pattern type {}", c.resource_pattern_type))?,
        principal: c.principal.to_string(),
        host: c.host.to_string(),
        operation: Operation::from_code(c.operation).ok_or_else(|| format!("unknown operation {}", c.operation))?,
        permission: Permission::from_code(c.permission_type)
            .ok_or_else(|| format!("unknown permission {}", c.permission_type))?,
    };
    match acl.invalid() {
        Some(why) => Err(why),
        None => Ok(acl),
    }
}

pub async fn create(shard: &Rc<Shard>, session: &Session, req: CreateAclsRequest) -> CreateAclsResponse {
    let all = |code, message: Option<String>| {
        let results = req.creations.iter().map(|_| created(code, message.clone())).collect();
        CreateAclsResponse::default().with_results(results)
    };
    if !authz::on_cluster(shard, session, Operation::Alter) {
        return all(errors::CLUSTER_AUTHORIZATION_FAILED, None);
    }
    let parsed: Vec<Result<Acl, String>> = req.creations.iter().map(acl_of).collect();
    let valid: Vec<Acl> = parsed.iter().filter_map(|p| p.as_ref().ok().cloned()).collect();
    if !valid.is_empty() {
        if let Err(e) = shard.change_acls(ChangeAcls::Create(valid)).await {
            log::error!("CreateAcls: {e}");
            return all(errors::KAFKA_STORAGE_ERROR, Some(e));
        }
    }
    let results = parsed
        .into_iter()
        .map(|p| match p {
            Ok(_) => created(errors::NONE, None),
            Err(why) => created(errors::INVALID_REQUEST, Some(why)),
        })
        .collect();
    CreateAclsResponse::default().with_results(results)
}

pub fn describe(shard: &Rc<Shard>, session: &Session, req: DescribeAclsRequest) -> DescribeAclsResponse {
    let refused = |code, message: String| {
        DescribeAclsResponse::default().with_error_code(code).with_error_message(Some(str_bytes(&message)))
    };
    if !authz::on_cluster(shard, session, Operation::Describe) {
        return refused(errors::CLUSTER_AUTHORIZATION_FAILED, "DESCRIBE on the cluster is needed".into());
    }
    let filter = match AclFilter::from_codes(
        req.resource_type_filter,
        req.resource_name_filter.map(|s| s.to_string()),
        req.pattern_type_filter,
        req.principal_filter.map(|s| s.to_string()),
        req.host_filter.map(|s| s.to_string()),
        req.operation,
        req.permission_type,
    ) {
        Ok(f) => f,
        Err(why) => return refused(errors::INVALID_REQUEST, why),
    };
    let acls = shard.acls();
    let mut by_resource: BTreeMap<(i8, String, i8), Vec<AclDescription>> = BTreeMap::new();
    for acl in acls.acls.iter().filter(|a| filter.matches(a)) {
        let key = (acl.resource_type.code(), acl.resource_name.clone(), acl.pattern_type.code());
        by_resource.entry(key).or_default().push(
            AclDescription::default()
                .with_principal(str_bytes(&acl.principal))
                .with_host(str_bytes(&acl.host))
                .with_operation(acl.operation.code())
                .with_permission_type(acl.permission.code()),
        );
    }
    let resources = by_resource
        .into_iter()
        .map(|((rt, name, pt), acls)| {
            DescribeAclsResource::default()
                .with_resource_type(rt)
                .with_resource_name(str_bytes(&name))
                .with_pattern_type(pt)
                .with_acls(acls)
        })
        .collect();
    DescribeAclsResponse::default().with_error_message(None).with_resources(resources)
}

fn matching(acl: &Acl) -> DeleteAclsMatchingAcl {
    DeleteAclsMatchingAcl::default()
        .with_error_message(None)
        .with_resource_type(acl.resource_type.code())
        .with_resource_name(str_bytes(&acl.resource_name))
        .with_pattern_type(acl.pattern_type.code())
        .with_principal(str_bytes(&acl.principal))
        .with_host(str_bytes(&acl.host))
        .with_operation(acl.operation.code())
        .with_permission_type(acl.permission.code())
}

pub async fn delete(shard: &Rc<Shard>, session: &Session, req: DeleteAclsRequest) -> DeleteAclsResponse {
    let failed = |code, message: Option<String>| {
        DeleteAclsFilterResult::default().with_error_code(code).with_error_message(message.map(|m| str_bytes(&m)))
    };
    if !authz::on_cluster(shard, session, Operation::Alter) {
        let results = req.filters.iter().map(|_| failed(errors::CLUSTER_AUTHORIZATION_FAILED, None)).collect();
        return DeleteAclsResponse::default().with_filter_results(results);
    }
    let parsed: Vec<Result<AclFilter, String>> = req
        .filters
        .into_iter()
        .map(|f| {
            AclFilter::from_codes(
                f.resource_type_filter,
                f.resource_name_filter.map(|s| s.to_string()),
                f.pattern_type_filter,
                f.principal_filter.map(|s| s.to_string()),
                f.host_filter.map(|s| s.to_string()),
                f.operation,
                f.permission_type,
            )
        })
        .collect();
    let valid: Vec<AclFilter> = parsed.iter().filter_map(|p| p.as_ref().ok().cloned()).collect();
    let mut deleted = match shard.change_acls(ChangeAcls::Delete(valid)).await {
        Ok(deleted) => deleted.into_iter(),
        Err(e) => {
            log::error!("DeleteAcls: {e}");
            let results = parsed.iter().map(|_| failed(errors::KAFKA_STORAGE_ERROR, Some(e.clone()))).collect();
            return DeleteAclsResponse::default().with_filter_results(results);
        }
    };
    let results = parsed
        .into_iter()
        .map(|p| match p {
            Ok(_) => DeleteAclsFilterResult::default()
                .with_error_message(None)
                .with_matching_acls(deleted.next().unwrap_or_default().iter().map(matching).collect()),
            Err(why) => failed(errors::INVALID_REQUEST, Some(why)),
        })
        .collect();
    DeleteAclsResponse::default().with_filter_results(results)
}
