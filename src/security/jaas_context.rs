//! Kafka's `JaasContext.loadServerContext`: the JAAS entries a listener
//! uses for one SASL mechanism, on both of a broker's sides (its server
//! reads PLAIN's `user_<name>` options, its inter-broker client the
//! `username` and `password` options).

use crate::config::BrokerConfig;
use crate::security::sasl::{parse_jaas_config, parse_jaas_file, JaasEntry};

const JAAS_FILE_PROPERTY: &str = "-Djava.security.auth.login.config=";

/// `listener.name.<l>.<mechanism>.sasl.jaas.config`, else the JAAS file's
/// `<l>.KafkaServer` section, else its `KafkaServer` section.
pub fn server_jaas_entries(
    config: &BrokerConfig,
    listener: &str,
    mechanism: &str,
) -> Result<Vec<JaasEntry>, String> {
    let key = jaas_config_key(listener, mechanism);
    match config.originals().get(&key) {
        Some(text) => {
            let entries = parse_jaas_config(text)
                .map_err(|e| format!("Invalid value for configuration {key}: {e}"))?;
            if entries.len() != 1 {
                return Err(format!(
                    "Invalid value for configuration {key}: Must supply exactly 1 non-null JAAS mechanism configuration (size was {})",
                    entries.len()
                ));
            }
            Ok(entries)
        }
        None => jaas_file_section(listener),
    }
}

/// The per-listener, per-mechanism JAAS key Kafka reads first.
pub fn jaas_config_key(listener: &str, mechanism: &str) -> String {
    format!(
        "listener.name.{}.{}.sasl.jaas.config",
        listener.to_ascii_lowercase(),
        mechanism.to_ascii_lowercase()
    )
}

/// The JAAS file named by `-Djava.security.auth.login.config=` in
/// KAFKA_OPTS (how Kafka's start scripts pass it): the listener's
/// `<l>.KafkaServer` section, else `KafkaServer`.
fn jaas_file_section(listener: &str) -> Result<Vec<JaasEntry>, String> {
    let listener_section = format!("{}.KafkaServer", listener.to_ascii_lowercase());
    let missing = || {
        format!(
            "Could not find a 'KafkaServer' or '{listener_section}' entry in the JAAS configuration. System property 'java.security.auth.login.config' is not set"
        )
    };
    let opts = std::env::var("KAFKA_OPTS").unwrap_or_default();
    let Some(path) = opts
        .split_whitespace()
        .find_map(|o| o.strip_prefix(JAAS_FILE_PROPERTY))
    else {
        return Err(missing());
    };
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("JAAS configuration file {path}: {e}"))?;
    let mut sections =
        parse_jaas_file(&text).map_err(|e| format!("JAAS configuration file {path}: {e}"))?;
    sections
        .remove(&listener_section)
        .or_else(|| sections.remove("KafkaServer"))
        .ok_or_else(missing)
}
