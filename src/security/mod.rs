//! Authentication and authorization as Kafka's
//! `org.apache.kafka.common.security` and AclAuthorizer: who a connection
//! is (`KafkaPrincipal`), TLS (`ssl`), the SASL mechanisms (`sasl`) and
//! their users' credentials (`credential_cache`), and ACLs (`authorizer`).
//! The connection state machine that drives authentication is the
//! server's (`server::authenticator`, Kafka's SaslServerAuthenticator).

pub mod authorizer;
pub mod credential_cache;
pub mod inter_broker;
pub mod jaas_context;
pub mod sasl;
pub mod ssl;

pub use crate::protocol::principal::KafkaPrincipal;
