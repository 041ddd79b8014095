//! KafkaPrincipal as Kafka's DefaultKafkaPrincipalBuilder makes it: the
//! type is always `User`; the name is ANONYMOUS on PLAINTEXT (and on TLS
//! without a client certificate), the mapped certificate subject on SSL,
//! and the SASL authorization id on SASL listeners.

use std::fmt;

/// KafkaPrincipal.USER_TYPE.
pub const USER_TYPE: &str = "User";
/// KafkaPrincipal.ANONYMOUS's name.
pub const ANONYMOUS_NAME: &str = "ANONYMOUS";

#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct KafkaPrincipal {
    pub principal_type: String,
    pub name: String,
}

impl KafkaPrincipal {
    pub fn user(name: impl Into<String>) -> KafkaPrincipal {
        KafkaPrincipal {
            principal_type: USER_TYPE.to_string(),
            name: name.into(),
        }
    }

    pub fn anonymous() -> KafkaPrincipal {
        KafkaPrincipal::user(ANONYMOUS_NAME)
    }

    pub fn is_anonymous(&self) -> bool {
        self.principal_type == USER_TYPE && self.name == ANONYMOUS_NAME
    }
}

/// `User:alice`, as Kafka prints and stores principals.
impl fmt::Display for KafkaPrincipal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.principal_type, self.name)
    }
}
