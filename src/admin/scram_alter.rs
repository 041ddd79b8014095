//! AlterUserScramCredentials as Kafka's ZooKeeper-mode
//! ZkAdminManager.alterUserScramCredentials: each user's upsertions and
//! deletions are checked, then applied to the user's stored configs
//! (`/config/users/<user>`, with a change notification so every broker's
//! credential cache takes them). The client sends the salt and the salted
//! password; the broker derives and stores the stored and server keys.

use std::collections::{BTreeMap, BTreeSet};
use std::rc::Rc;

use crate::admin::config_changes::{self, read_entity, write_entity};
use crate::admin::TopicAdmin;
use crate::metadata::configs::{ConfigEntity, USERS};
use crate::protocol::errors::{self, ErrorCode};
use crate::quota::sanitize;
use crate::security::sasl::{ScramCredential, ScramMechanism};

/// Set a credential from the client's salted password.
pub struct ScramUpsertion {
    pub user: String,
    pub mechanism: i8,
    pub iterations: i32,
    pub salt: Vec<u8>,
    pub salted_password: Vec<u8>,
}

pub struct ScramDeletion {
    pub user: String,
    pub mechanism: i8,
}

/// One user's outcome.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScramAlterResult {
    pub user: String,
    pub error: ErrorCode,
    pub message: Option<String>,
}

fn refused(user: &str, error: ErrorCode, message: &str) -> ScramAlterResult {
    ScramAlterResult {
        user: user.to_string(),
        error,
        message: Some(message.to_string()),
    }
}

/// Kafka's checks of one user-mechanism pair, in its order.
fn check(user: &str, mechanism: i8, iterations: Option<i32>) -> Option<ScramAlterResult> {
    if user.is_empty() {
        return Some(refused(
            user,
            errors::UNACCEPTABLE_CREDENTIAL,
            "Username must not be empty",
        ));
    }
    let Some(mechanism) = ScramMechanism::from_wire_type(mechanism) else {
        return Some(refused(
            user,
            errors::UNSUPPORTED_SASL_MECHANISM,
            "Unknown SCRAM mechanism",
        ));
    };
    match iterations {
        Some(i) if i < mechanism.min_iterations() => Some(refused(
            user,
            errors::UNACCEPTABLE_CREDENTIAL,
            "Too few iterations",
        )),
        Some(i) if i > ScramMechanism::MAX_ITERATIONS => Some(refused(
            user,
            errors::UNACCEPTABLE_CREDENTIAL,
            "Too many iterations",
        )),
        _ => None,
    }
}

/// The users refused before the store is read: invalid entries, then
/// users naming one mechanism twice.
fn refuse_invalid(
    upsertions: &[ScramUpsertion],
    deletions: &[ScramDeletion],
) -> Vec<ScramAlterResult> {
    let mut results: Vec<ScramAlterResult> = Vec::new();
    let invalid = deletions
        .iter()
        .filter_map(|d| check(&d.user, d.mechanism, None))
        .chain(
            upsertions
                .iter()
                .filter_map(|u| check(&u.user, u.mechanism, Some(u.iterations))),
        );
    // One answer per user; the last invalid entry's message wins, as
    // Kafka builds a map from them.
    for result in invalid {
        results.retain(|r| r.user != result.user);
        results.push(result);
    }
    let pairs: Vec<(&str, i8)> = upsertions
        .iter()
        .map(|u| (u.user.as_str(), u.mechanism))
        .chain(deletions.iter().map(|d| (d.user.as_str(), d.mechanism)))
        .filter(|(user, _)| !results.iter().any(|r| r.user == *user))
        .collect();
    let duplicated: BTreeSet<&str> = pairs
        .iter()
        .enumerate()
        .filter(|(i, pair)| pairs[..*i].contains(pair))
        .map(|(_, (user, _))| *user)
        .collect();
    for user in duplicated {
        results.push(refused(
            user,
            errors::DUPLICATE_RESOURCE,
            "A user credential cannot be altered twice in the same request",
        ));
    }
    results
}

/// A user's stored configs with its deletions and upsertions applied, or
/// why not (a deletion of a credential that is not there).
fn altered_configs(
    user: &str,
    mut configs: BTreeMap<String, String>,
    upsertions: &[ScramUpsertion],
    deletions: &[ScramDeletion],
) -> Result<BTreeMap<String, String>, ScramAlterResult> {
    let mechanism = |t: i8| ScramMechanism::from_wire_type(t).expect("checked by refuse_invalid");
    for d in deletions.iter().filter(|d| d.user == user) {
        if configs.remove(mechanism(d.mechanism).name()).is_none() {
            return Err(refused(
                user,
                errors::RESOURCE_NOT_FOUND,
                "Attempt to delete a user credential that does not exist",
            ));
        }
    }
    for u in upsertions.iter().filter(|u| u.user == user) {
        let m = mechanism(u.mechanism);
        let credential =
            ScramCredential::from_salted_password(m, &u.salt, &u.salted_password, u.iterations);
        configs.insert(m.name().to_string(), credential.to_config_string());
    }
    Ok(configs)
}

/// Runs on the controller shard (of the active controller in a cluster).
pub async fn alter(
    ctx: &Rc<TopicAdmin>,
    upsertions: &[ScramUpsertion],
    deletions: &[ScramDeletion],
) -> Vec<ScramAlterResult> {
    let mut results = refuse_invalid(upsertions, deletions);
    let users: BTreeSet<&str> = upsertions
        .iter()
        .map(|u| u.user.as_str())
        .chain(deletions.iter().map(|d| d.user.as_str()))
        .filter(|user| !results.iter().any(|r| r.user == *user))
        .collect();
    for user in users {
        let path = format!("{USERS}/{}", sanitize(user));
        let outcome = match read_entity(ctx, &path).await {
            Err(e) => Err(refused(user, e.code, &e.message)),
            Ok(stored) => altered_configs(user, stored, upsertions, deletions),
        };
        let props = match outcome {
            Ok(props) => props,
            Err(result) => {
                results.push(result);
                continue;
            }
        };
        if let Err(e) = write_entity(ctx, &path, &props).await {
            results.push(refused(user, e.code, &e.message));
            continue;
        }
        config_changes::apply(ctx, ConfigEntity::Other(path), props).await;
        results.push(ScramAlterResult {
            user: user.to_string(),
            error: errors::NONE,
            message: None,
        });
    }
    results
}

#[cfg(test)]
mod tests {
    use super::*;

    fn up(user: &str, mechanism: i8, iterations: i32) -> ScramUpsertion {
        ScramUpsertion {
            user: user.into(),
            mechanism,
            iterations,
            salt: b"salt".to_vec(),
            salted_password: vec![7; 32],
        }
    }

    #[test]
    fn invalid_entries_are_refused_per_user_with_kafkas_codes() {
        let del = |user: &str, mechanism| ScramDeletion {
            user: user.into(),
            mechanism,
        };
        let results = refuse_invalid(
            &[
                up("", 1, 4096),
                up("few", 1, 4095),
                up("many", 2, 16385),
                up("twice", 1, 8192),
                up("ok", 1, 8192),
            ],
            &[del("unknown", 3), del("twice", 1), del("ok", 2)],
        );
        let summary: Vec<(&str, i16, &str)> = results
            .iter()
            .map(|r| {
                (
                    r.user.as_str(),
                    r.error.code(),
                    r.message.as_deref().unwrap(),
                )
            })
            .collect();
        assert_eq!(
            summary,
            vec![
                ("unknown", 33, "Unknown SCRAM mechanism"),
                ("", 93, "Username must not be empty"),
                ("few", 93, "Too few iterations"),
                ("many", 93, "Too many iterations"),
                (
                    "twice",
                    92,
                    "A user credential cannot be altered twice in the same request"
                ),
            ]
        );
    }

    #[test]
    fn configs_keep_quotas_and_replace_credentials() {
        let stored: BTreeMap<String, String> = [
            ("producer_byte_rate".to_string(), "10".to_string()),
            ("SCRAM-SHA-512".to_string(), "old".to_string()),
        ]
        .into();
        let deletion = ScramDeletion {
            user: "u".into(),
            mechanism: 2,
        };
        let configs =
            altered_configs("u", stored.clone(), &[up("u", 1, 4096)], &[deletion]).unwrap();
        assert_eq!(configs.len(), 2);
        assert_eq!(configs["producer_byte_rate"], "10");
        let credential = ScramCredential::parse(&configs["SCRAM-SHA-256"]).unwrap();
        assert_eq!(credential.iterations, 4096);
        assert_eq!(credential.salt, b"salt");

        let missing = ScramDeletion {
            user: "u".into(),
            mechanism: 1,
        };
        let err = altered_configs("u", stored, &[], &[missing]).unwrap_err();
        assert_eq!(err.error, errors::RESOURCE_NOT_FOUND);
    }
}
