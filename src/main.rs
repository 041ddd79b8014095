//! `kshard [--config server.properties] [--override key=value ...]`

use std::process::ExitCode;

use kshard::config::{parse_args, BrokerConfig};

fn main() -> ExitCode {
    // While the process has one thread the kernel registers it, and grows
    // its descriptor table, without waiting for an RCU grace period.
    kshard_shards::shard::register_membarrier();
    kshard_shards::shard::reserve_descriptor_table();
    kshard::util::alloc_guard::tune_system_allocator();
    kshard::util::async_logger::init();
    let code = run();
    // The logger's queued lines are written before the process exits.
    log::logger().flush();
    code
}

fn run() -> ExitCode {
    let (config_path, overrides) = match parse_args(std::env::args().skip(1)) {
        Ok(x) => x,
        Err(msg) if msg == kshard::config::USAGE => {
            println!("{msg}");
            return ExitCode::SUCCESS;
        }
        Err(msg) => {
            eprintln!("{msg}");
            return ExitCode::from(2);
        }
    };
    let config = match BrokerConfig::load(config_path.as_deref(), &overrides) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("kshard: invalid configuration: {e}");
            return ExitCode::from(2);
        }
    };
    // Per-listener overrides of Kafka keys are read where they apply.
    for key in config
        .unknown_keys
        .iter()
        .filter(|k| !kshard::config::is_listener_override(k))
        .filter(|k| !kshard::config::support::AUTHORIZER_KEYS.contains(&k.as_str()))
    {
        log::warn!("unknown config key '{key}' ignored");
    }
    for (key, why) in config.accepted_keys() {
        log::info!("config key '{key}' accepted without effect: {why}");
    }
    for key in config.not_applicable_keys() {
        log::info!("config key '{key}' has no effect in kshard's thread-per-core design");
    }
    match kshard::server::run(config) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            log::error!("kshard failed: {e}");
            eprintln!("kshard: {e}");
            ExitCode::FAILURE
        }
    }
}
