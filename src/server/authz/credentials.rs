//! The SCRAM credential APIs: describing users needs DESCRIBE on the
//! cluster and changing them ALTER, as Kafka's. A refusal answers every
//! user asked about with CLUSTER_AUTHORIZATION_FAILED.

use std::rc::Rc;

use kafka_protocol::messages::{
    alter_user_scram_credentials_response::AlterUserScramCredentialsResult, AlterUserScramCredentialsRequest,
    AlterUserScramCredentialsResponse, DescribeUserScramCredentialsRequest, DescribeUserScramCredentialsResponse,
};

use super::on_cluster;
use crate::{
    protocol::errors,
    security::{acl::Operation, Session},
    server::handlers::{scram_credentials, str_bytes},
    shard::Shard,
};

pub fn describe(
    shard: &Rc<Shard>,
    session: &Session,
    req: DescribeUserScramCredentialsRequest,
) -> DescribeUserScramCredentialsResponse {
    if on_cluster(shard, session, Operation::Describe) {
        return scram_credentials::describe(shard, req);
    }
    let mut response = DescribeUserScramCredentialsResponse::default();
    response.error_code = errors::CLUSTER_AUTHORIZATION_FAILED;
    response.error_message = Some(str_bytes("DESCRIBE on the cluster is needed to describe SCRAM credentials"));
    response
}

pub async fn alter(
    shard: &Rc<Shard>,
    session: &Session,
    req: AlterUserScramCredentialsRequest,
) -> AlterUserScramCredentialsResponse {
    if on_cluster(shard, session, Operation::Alter) {
        return scram_credentials::alter(shard, req).await;
    }
    let mut users: Vec<String> = req.deletions.iter().map(|d| d.name.to_string()).collect();
    users.extend(req.upsertions.iter().map(|u| u.name.to_string()));
    users.sort();
    users.dedup();
    let mut response = AlterUserScramCredentialsResponse::default();
    response.results = users
        .into_iter()
        .map(|user| {
            let mut r = AlterUserScramCredentialsResult::default();
            r.user = str_bytes(&user);
            r.error_code = errors::CLUSTER_AUTHORIZATION_FAILED;
            r.error_message = Some(str_bytes("ALTER on the cluster is needed to change SCRAM credentials"));
            r
        })
        .collect();
    response
}
