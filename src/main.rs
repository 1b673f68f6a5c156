//! `ringmq`: the broker binary. See README.md.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};
use nix::sys::signal::{SigSet, Signal};
use ringmq::broker::startup;
use ringmq::config::{self, Config, ConfigInputs, LoadedConfig, Process};

/// A RocketMQ-compatible message broker. Settings come from a broker.conf (`-c`, Java's keys),
/// then `RINGMQ_*` environment variables, then flags (docs/CONFIG.md).
#[derive(Parser)]
#[command(name = "ringmq", version, args_conflicts_with_subcommands = true)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    /// Without a subcommand, `ringmq` runs the broker with these options.
    #[command(flatten)]
    broker: BrokerArgs,
}

#[derive(Subcommand)]
enum Command {
    /// Run the broker (the default), with an embedded name server unless one is given.
    Broker(BrokerArgs),
    /// Run a standalone name server.
    Namesrv(NamesrvArgs),
    /// Print the effective configuration and where each value came from.
    Config(ConfigArgs),
    /// Administer a cluster with mqadmin's verbs: `ringmq admin -n ADDR VERB`.
    Admin(ringmq::admin::AdminArgs),
}

/// The options of Java's `mqbroker`.
#[derive(Args, Clone, Default)]
struct BrokerArgs {
    /// broker.conf to read (Java properties with RocketMQ's keys), like `mqbroker -c`.
    #[arg(short = 'c', long = "configFile", value_name = "FILE")]
    config_file: Option<PathBuf>,
    /// Name server addresses `ip:port;ip:port`, like `mqbroker -n`; overrides namesrvAddr and
    /// RINGMQ_NAMESRV_ADDR.
    #[arg(short = 'n', long = "namesrvAddr", value_name = "ADDR")]
    namesrv_addr: Option<String>,
}

impl BrokerArgs {
    fn inputs(&self) -> ConfigInputs {
        ConfigInputs {
            file: self.config_file.clone(),
            process: Process::Broker,
            namesrv_addr: self.namesrv_addr.clone(),
        }
    }
}

/// The options of Java's `mqnamesrv`.
#[derive(Args)]
struct NamesrvArgs {
    /// Properties file to read (Java keys, e.g. listenPort), like `mqnamesrv -c`.
    #[arg(short = 'c', long = "configFile", value_name = "FILE")]
    config_file: Option<PathBuf>,
}

#[derive(Args)]
struct ConfigArgs {
    #[command(flatten)]
    broker: BrokerArgs,
    /// Print the settings table of docs/CONFIG.md instead.
    #[arg(long)]
    markdown: bool,
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

/// The configuration of `inputs` over the process environment; `None` after printing why it
/// cannot be used (the caller exits with status 2).
fn load_config(inputs: &ConfigInputs) -> Option<LoadedConfig> {
    match Config::load(inputs, std::env::vars()) {
        Ok(loaded) => Some(loaded),
        Err(e) => {
            eprintln!("ringmq: configuration error: {e}");
            None
        }
    }
}

fn log_warnings(loaded: &LoadedConfig) {
    for warning in &loaded.warnings {
        tracing::warn!("configuration: {warning}");
    }
}

/// jemalloc, not glibc's malloc: see docs/ARCHITECTURE.md, "The allocator".
#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// jemalloc's options, read at its start. Purging unused pages runs on jemalloc's own
/// background thread: without it the allocating thread purges inline now and then, a stall
/// that showed in the e2e tail. (No `tcache_max`: this jemalloc clips it to 32 KiB, its
/// default, so a larger one changes nothing; `tests/allocator_options.rs` checks what
/// jemalloc runs with.)
#[export_name = "_rjem_malloc_conf"]
static MALLOC_CONF: &[u8; 23] = b"background_thread:true\0";

fn main() -> ExitCode {
    let cli = Cli::parse();
    let command = cli.command.unwrap_or(Command::Broker(cli.broker));
    let inputs = match &command {
        Command::Admin(args) => return ringmq::admin::run(args),
        Command::Config(args) if args.markdown => {
            print!("{}", config::markdown_table());
            return ExitCode::SUCCESS;
        }
        Command::Config(args) => args.broker.inputs(),
        Command::Broker(args) => args.inputs(),
        Command::Namesrv(args) => ConfigInputs {
            file: args.config_file.clone(),
            process: Process::Namesrv,
            namesrv_addr: None,
        },
    };
    let Some(loaded) = load_config(&inputs) else {
        return ExitCode::from(2);
    };
    match command {
        Command::Config(_) => {
            print!("{}", loaded.describe());
            ExitCode::SUCCESS
        }
        Command::Broker(_) => {
            init_logging(&loaded.config);
            log_warnings(&loaded);
            tracing::info!("effective configuration:\n{}", loaded.describe());
            run_broker(loaded.config)
        }
        Command::Namesrv(_) => {
            init_logging(&loaded.config);
            log_warnings(&loaded);
            run_namesrv(loaded.config)
        }
        Command::Admin(_) => unreachable!("admin returned above"),
    }
}
