//! DescribeUserScramCredentials v0 and AlterUserScramCredentials v0.
//! Describe reads this shard's copy of the credentials; Alter goes to the
//! controller shard, which saves the change and gives it to every shard
//! (`shard::credentials_admin`). Neither ever returns a salt or key.

use std::rc::Rc;

use kafka_protocol::messages::{
    alter_user_scram_credentials_response::AlterUserScramCredentialsResult,
    describe_user_scram_credentials_response::{CredentialInfo, DescribeUserScramCredentialsResult},
    AlterUserScramCredentialsRequest, AlterUserScramCredentialsResponse, DescribeUserScramCredentialsRequest,
    DescribeUserScramCredentialsResponse,
};

use crate::{
    protocol::errors,
    server::handlers::str_bytes,
    shard::{
        credentials_admin::{AlterCredentials, CredentialChange},
        router::CONTROLLER,
        Shard,
    },
};

pub fn describe(shard: &Rc<Shard>, req: DescribeUserScramCredentialsRequest) -> DescribeUserScramCredentialsResponse {
    let credentials = shard.credentials();
    let asked: Vec<String> = req.users.unwrap_or_default().into_iter().map(|u| u.name.to_string()).collect();
    let names: Vec<String> =
        if asked.is_empty() { credentials.users().map(|(u, _)| u.clone()).collect() } else { asked.clone() };
    let mut response = DescribeUserScramCredentialsResponse::default();
    let mut seen = std::collections::HashSet::new();
    for name in names {
        if !seen.insert(name.clone()) {
            continue;
        }
        let mut result = DescribeUserScramCredentialsResult::default();
        result.user = str_bytes(&name);
        if asked.iter().filter(|a| **a == name).count() > 1 {
            result.error_code = errors::DUPLICATE_RESOURCE;
            result.error_message = Some(str_bytes(&format!("cannot describe user {name:?} more than once")));
        } else if let Some(of_user) = credentials.of_user(&name) {
            result.credential_infos = of_user
                .iter()
                .map(|(m, c)| {
                    let mut info = CredentialInfo::default();
                    info.mechanism = m.code();
                    info.iterations = c.iterations as i32;
                    info
                })
                .collect();
        } else {
            result.error_code = errors::RESOURCE_NOT_FOUND;
            result.error_message =
                Some(str_bytes(&format!("attempt to describe a user credential that does not exist: {name}")));
        }
        response.results.push(result);
    }
    response
}

pub async fn alter(shard: &Rc<Shard>, req: AlterUserScramCredentialsRequest) -> AlterUserScramCredentialsResponse {
    let mut changes: Vec<CredentialChange> = req
        .deletions
        .into_iter()
        .map(|d| CredentialChange::Delete { user: d.name.to_string(), mechanism: d.mechanism })
        .collect();
    changes.extend(req.upsertions.into_iter().map(|u| CredentialChange::Upsert {
        user: u.name.to_string(),
        mechanism: u.mechanism,
        iterations: u.iterations,
        salt: u.salt.to_vec(),
        salted_password: u.salted_password.to_vec(),
    }));
    let users: Vec<String> = changes.iter().map(|c| c.user().to_string()).collect();
    let outcomes = shard.ask(CONTROLLER, AlterCredentials { changes }).await.unwrap_or_else(|_| {
        let message = Some("broker shutting down".to_string());
        let mut users = users;
        users.dedup();
        users.into_iter().map(|u| (u, errors::KAFKA_STORAGE_ERROR, message.clone())).collect()
    });
    let mut response = AlterUserScramCredentialsResponse::default();
    response.results = outcomes
        .into_iter()
        .map(|(user, code, message)| {
            let mut r = AlterUserScramCredentialsResult::default();
            r.user = str_bytes(&user);
            r.error_code = code;
            r.error_message = message.map(|m| str_bytes(&m));
            r
        })
        .collect();
    response
}
