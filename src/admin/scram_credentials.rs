//! DescribeUserScramCredentials as Kafka's ZooKeeper-mode ZkAdminManager:
//! the SCRAM credentials stored in a user's configs
//! (`SCRAM-SHA-256=salt=...,stored_key=...,server_key=...,iterations=N`),
//! described by mechanism and iteration count, never by secret.

use std::collections::{BTreeMap, HashMap};

use crate::metadata::configs::{StoredEntityConfig, USERS};
use crate::protocol::errors::{self, ErrorCode};
use crate::quota::desanitize;

/// ScramMechanism: name and wire type.
const MECHANISMS: [(&str, i8); 2] = [("SCRAM-SHA-256", 1), ("SCRAM-SHA-512", 2)];

/// One user's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScramDescription {
    pub user: String,
    pub error: Option<(ErrorCode, String)>,
    /// (mechanism type, iterations).
    pub credentials: Vec<(i8, i32)>,
}

/// The iteration count of a stored credential (ScramCredentialUtils
/// .credentialFromString); None if it is not one.
fn iterations_of(stored: &str) -> Option<i32> {
    let fields: HashMap<&str, &str> = stored
        .split(',')
        .filter_map(|f| f.split_once('='))
        .collect();
    ["salt", "stored_key", "server_key"]
        .iter()
        .all(|k| fields.contains_key(k))
        .then(|| fields.get("iterations")?.parse().ok())
        .flatten()
}

fn describe_user(
    user: &str,
    configs: &BTreeMap<String, String>,
    explicit: bool,
) -> Option<ScramDescription> {
    let stored: Vec<(i8, &String)> = MECHANISMS
        .iter()
        .filter_map(|(name, kind)| Some((*kind, configs.get(*name)?)))
        .collect();
    if stored.is_empty() {
        return explicit.then(|| ScramDescription {
            user: user.to_string(),
            error: Some((
                errors::RESOURCE_NOT_FOUND,
                format!("Attempt to describe a user credential that does not exist: {user}"),
            )),
            credentials: Vec::new(),
        });
    }
    let credentials: Option<Vec<(i8, i32)>> = stored
        .iter()
        .map(|(kind, v)| Some((*kind, iterations_of(v)?)))
        .collect();
    Some(match credentials {
        Some(credentials) => ScramDescription {
            user: user.to_string(),
            error: None,
            credentials,
        },
        None => ScramDescription {
            user: user.to_string(),
            error: Some((errors::UNKNOWN_SERVER_ERROR, String::new())),
            credentials: Vec::new(),
        },
    })
}

/// `users` None or empty: every user with a credential. `stored` are the
/// stored quota entities (path, configs); only `users/<u>` ones count.
pub fn describe(users: Option<&[String]>, stored: &[StoredEntityConfig]) -> Vec<ScramDescription> {
    let by_user: BTreeMap<String, &BTreeMap<String, String>> = stored
        .iter()
        .filter_map(|e| {
            let user = e.entity_path.strip_prefix(USERS)?.strip_prefix('/')?;
            (!user.contains('/')).then(|| Some((desanitize(user)?, &e.configs)))?
        })
        .collect();
    let empty = BTreeMap::new();
    let Some(users) = users.filter(|u| !u.is_empty()) else {
        return by_user
            .iter()
            .filter_map(|(user, configs)| describe_user(user, configs, false))
            .collect();
    };
    let mut counts: HashMap<&str, usize> = HashMap::new();
    for u in users {
        *counts.entry(u.as_str()).or_default() += 1;
    }
    let mut out = Vec::new();
    let mut reported: Vec<&str> = Vec::new();
    // Kafka lists the empty names, then the duplicates, then the others.
    for u in users.iter().filter(|u| u.is_empty()).take(1) {
        reported.push(u);
        out.push(refused(
            u,
            errors::RESOURCE_NOT_FOUND,
            "Cannot describe SCRAM credentials for empty username".into(),
        ));
    }
    for u in users
        .iter()
        .filter(|u| !u.is_empty() && counts[u.as_str()] > 1)
    {
        if !reported.contains(&u.as_str()) {
            reported.push(u);
            out.push(refused(
                u,
                errors::DUPLICATE_RESOURCE,
                format!("Cannot describe SCRAM credentials for the same user twice in a single request: {u}"),
            ));
        }
    }
    for u in users.iter().filter(|u| !reported.contains(&u.as_str())) {
        let configs = by_user.get(u.as_str()).copied().unwrap_or(&empty);
        out.extend(describe_user(u, configs, true));
    }
    out
}

fn refused(user: &str, code: ErrorCode, message: String) -> ScramDescription {
    ScramDescription {
        user: user.to_string(),
        error: Some((code, message)),
        credentials: Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stored() -> Vec<StoredEntityConfig> {
        let alice: BTreeMap<String, String> = [
            (
                "SCRAM-SHA-256".into(),
                "salt=YQ==,stored_key=Yg==,server_key=Yw==,iterations=8192".into(),
            ),
            ("producer_byte_rate".into(), "1024".into()),
        ]
        .into();
        let quota_only: BTreeMap<String, String> =
            [("producer_byte_rate".into(), "1".into())].into();
        let e = |path: &str, configs: BTreeMap<String, String>| StoredEntityConfig {
            entity_path: path.to_string(),
            configs,
        };
        vec![
            e("users/alice", alice),
            e("users/bob", quota_only.clone()),
            e("users/alice/clients/app", quota_only),
        ]
    }

    #[test]
    fn all_users_lists_those_with_credentials() {
        let all = describe(None, &stored());
        assert_eq!(
            all,
            vec![ScramDescription {
                user: "alice".into(),
                error: None,
                credentials: vec![(1, 8192)]
            }]
        );
    }

    #[test]
    fn named_users_and_their_errors() {
        let users: Vec<String> = ["bob", "", "alice", "carol", "alice"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        let got = describe(Some(&users), &stored());
        let summary: Vec<(&str, Option<i16>)> = got
            .iter()
            .map(|d| (d.user.as_str(), d.error.as_ref().map(|e| e.0.code())))
            .collect();
        assert_eq!(
            summary,
            vec![
                ("", Some(91)),
                ("alice", Some(92)),
                ("bob", Some(91)),
                ("carol", Some(91))
            ]
        );
        assert_eq!(
            got[2].error.as_ref().unwrap().1,
            "Attempt to describe a user credential that does not exist: bob"
        );
        assert_eq!(iterations_of("iterations=1"), None);
    }
}
