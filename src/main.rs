//! `ringmq`: the broker binary. See README.md.

use std::process::ExitCode;

use nix::sys::signal::{SigSet, Signal};
use ringmq::broker::startup;
use ringmq::config::{self, Config};

fn usage() -> &'static str {
    "usage: ringmq [broker|namesrv|config [--markdown]]\n\
     Settings come from RINGMQ_* environment variables (docs/CONFIG.md)."
}

fn init_logging(config: &Config) {
    let filter = tracing_subscriber::EnvFilter::try_new(&config.log.level)
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .init();
}

/// Blocks SIGINT and SIGTERM in this thread before any other thread exists, so every thread
/// inherits the mask and the signals are taken only by [`wait_for_stop_signal`].
fn block_stop_signals() -> SigSet {
    let mut set = SigSet::empty();
    set.add(Signal::SIGINT);
    set.add(Signal::SIGTERM);
    if let Err(e) = set.thread_block() {
        eprintln!("ringmq: cannot block SIGINT/SIGTERM ({e}); stop will not be graceful");
    }
    set
}

fn wait_for_stop_signal(set: &SigSet) {
    match set.wait() {
        Ok(sig) => tracing::info!(signal = ?sig, "stopping"),
        Err(e) => tracing::error!(error = %e, "waiting for a stop signal failed; stopping"),
    }
}

fn run_broker(config: Config) -> ExitCode {
    let signals = block_stop_signals();
    tracing::info!("effective configuration:\n{}", config.describe());
    let handle = match startup::start_broker(config) {
        Ok(h) => h,
        Err(e) => {
            eprintln!("ringmq: cannot start the broker: {e}");
            return ExitCode::from(1);
        }
    };
    wait_for_stop_signal(&signals);
    match handle.stop() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("ringmq: unclean stop: {e}");
            ExitCode::from(1)
        }
    }
}

fn run_namesrv(config: Config) -> ExitCode {
    let signals = block_stop_signals();
    let handle = match ringmq::namesrv::start_namesrv(&config) {
        Ok(h) => h,
        Err(e) => {
            eprintln!("ringmq: cannot start the name server: {e}");
            return ExitCode::from(1);
        }
    };
    eprintln!(
        "ringmq name server listening on {}",
        handle.server.local_addrs()[0]
    );
    wait_for_stop_signal(&signals);
    handle.stop();
    ExitCode::SUCCESS
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let command = args.first().map(String::as_str).unwrap_or("broker");
    if command == "config" && args.get(1).map(String::as_str) == Some("--markdown") {
        print!("{}", config::markdown_table());
        return ExitCode::SUCCESS;
    }
    if matches!(command, "-h" | "--help" | "help") {
        println!("{}", usage());
        return ExitCode::SUCCESS;
    }
    let config = match Config::from_env() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("ringmq: configuration error: {e}");
            return ExitCode::from(2);
        }
    };
    match command {
        "config" => {
            print!("{}", config.describe());
            ExitCode::SUCCESS
        }
        "broker" => {
            init_logging(&config);
            run_broker(config)
        }
        "namesrv" => {
            init_logging(&config);
            run_namesrv(config)
        }
        other => {
            eprintln!("ringmq: unknown command `{other}`\n{}", usage());
            ExitCode::from(2)
        }
    }
}
