//! IncrementalAlterConfigs on BROKER_LOGGER, as Kafka's
//! RuntimeLoggerManager: kshard has one logger, `root` (the `log` crate's
//! global level, which DescribeConfigs shows), set with log4j's level
//! names. Changes live in memory only, as in Kafka.

use crate::admin::configs::AlterConfigsResource;
use crate::admin::{AdminError, AdminResult};
use crate::config::alter_ops::AlterConfigOpType;
use crate::protocol::errors;

pub const ROOT_LOGGER: &str = "root";

const VALID_LEVELS: &str = "ALL, DEBUG, ERROR, FATAL, INFO, OFF, TRACE, WARN";

/// A log4j level name as the `log` crate's filter (ALL is TRACE, FATAL is
/// ERROR: the crate has nothing finer or coarser).
fn level_filter(name: &str) -> Option<log::LevelFilter> {
    Some(match name {
        "ALL" | "TRACE" => log::LevelFilter::Trace,
        "DEBUG" => log::LevelFilter::Debug,
        "INFO" => log::LevelFilter::Info,
        "WARN" => log::LevelFilter::Warn,
        "ERROR" | "FATAL" => log::LevelFilter::Error,
        "OFF" => log::LevelFilter::Off,
        _ => return None,
    })
}

pub fn alter_logger(my_id: i32, r: &AlterConfigsResource, validate_only: bool) -> AdminResult<()> {
    let Ok(id) = r.name.parse::<i32>() else {
        return Err(AdminError::new(
            errors::INVALID_REQUEST,
            format!("Node id must be an integer, but it is: {}", r.name),
        ));
    };
    if id != my_id {
        // Kafka's message prints its own id twice.
        return Err(AdminError::new(
            errors::INVALID_REQUEST,
            format!("Unexpected node id. Expected {my_id}, but received {my_id}"),
        ));
    }
    let mut level = None;
    for op in &r.ops {
        match AlterConfigOpType::from_id(op.op) {
            Some(AlterConfigOpType::Set) | Some(AlterConfigOpType::Delete)
                if op.name != ROOT_LOGGER =>
            {
                return Err(AdminError::new(
                    errors::INVALID_CONFIG,
                    format!("Logger {} does not exist!", op.name),
                ));
            }
            Some(AlterConfigOpType::Set) => {
                let value = op.value.as_deref().unwrap_or_default();
                let Some(filter) = level_filter(value) else {
                    return Err(AdminError::new(
                        errors::INVALID_CONFIG,
                        format!(
                            "Cannot set the log level of {} to {value} as it is not a supported log level. Valid log levels are {VALID_LEVELS}",
                            op.name
                        ),
                    ));
                };
                level = Some(filter);
            }
            Some(AlterConfigOpType::Delete) => {
                return Err(AdminError::new(
                    errors::INVALID_REQUEST,
                    format!("Removing the log level of the {ROOT_LOGGER} logger is not allowed"),
                ));
            }
            Some(other) => {
                let name = if other == AlterConfigOpType::Append {
                    "APPEND"
                } else {
                    "SUBTRACT"
                };
                return Err(AdminError::new(
                    errors::INVALID_REQUEST,
                    format!("{name} operation is not allowed for the BROKER_LOGGER resource"),
                ));
            }
            None => {
                return Err(AdminError::new(
                    errors::INVALID_REQUEST,
                    format!("Unknown operation type {}", op.op),
                ));
            }
        }
    }
    if let (Some(filter), false) = (level, validate_only) {
        log::set_max_level(filter);
        log::info!("root log level set to {filter}");
    }
    Ok(())
}
