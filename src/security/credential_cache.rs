//! Kafka's CredentialCache: every user's SCRAM credentials as this broker
//! last read them from the user's stored configs (`/config/users/<user>`
//! in ZooKeeper, the embedded store on one broker), kept current by the
//! same config change notifications that carry user quotas. Logins read
//! it; only config changes write it, so a read lock is uncontended.

use std::collections::{BTreeMap, HashMap};
use std::sync::RwLock;

use crate::security::sasl::{ScramCredential, ScramMechanism};

#[derive(Default)]
pub struct CredentialCache {
    by_user: RwLock<HashMap<String, UserCredentials>>,
}

/// One user's credentials, per mechanism.
#[derive(Default, Clone)]
struct UserCredentials {
    sha256: Option<ScramCredential>,
    sha512: Option<ScramCredential>,
}

impl CredentialCache {
    /// Replaces `user`'s credentials with the SCRAM keys of its stored
    /// configs (`SCRAM-SHA-256`, `SCRAM-SHA-512`); a value that does not
    /// parse is left out, as Kafka's ScramCredentialUtils skips it.
    pub fn update_user(&self, user: &str, configs: &BTreeMap<String, String>) {
        let parse = |m: ScramMechanism| {
            configs
                .get(m.name())
                .and_then(|v| ScramCredential::parse(v))
        };
        let credentials = UserCredentials {
            sha256: parse(ScramMechanism::Sha256),
            sha512: parse(ScramMechanism::Sha512),
        };
        let mut by_user = self.by_user.write().expect("credential cache poisoned");
        if credentials.sha256.is_none() && credentials.sha512.is_none() {
            by_user.remove(user);
        } else {
            by_user.insert(user.to_string(), credentials);
        }
    }

    pub fn get(&self, user: &str, mechanism: ScramMechanism) -> Option<ScramCredential> {
        let by_user = self.by_user.read().expect("credential cache poisoned");
        let credentials = by_user.get(user)?;
        match mechanism {
            ScramMechanism::Sha256 => credentials.sha256.clone(),
            ScramMechanism::Sha512 => credentials.sha512.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credentials_follow_the_stored_configs() {
        let cache = CredentialCache::default();
        let credential =
            ScramCredential::from_password(ScramMechanism::Sha256, "secret", b"salty", 4096);
        let mut configs = BTreeMap::new();
        configs.insert("SCRAM-SHA-256".to_string(), credential.to_config_string());
        configs.insert("producer_byte_rate".to_string(), "1024".to_string());
        configs.insert("SCRAM-SHA-512".to_string(), "garbage".to_string());
        cache.update_user("alice", &configs);
        assert_eq!(cache.get("alice", ScramMechanism::Sha256), Some(credential));
        assert_eq!(cache.get("alice", ScramMechanism::Sha512), None);
        assert_eq!(cache.get("bob", ScramMechanism::Sha256), None);
        cache.update_user("alice", &BTreeMap::new());
        assert_eq!(cache.get("alice", ScramMechanism::Sha256), None);
    }
}
