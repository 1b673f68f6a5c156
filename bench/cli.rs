//! The command line as clap declares it: one subcommand per kind, each flattening the flag groups
//! it uses, so `ringmq-bench <kind> --help` lists exactly the flags that kind reads.
//!
//! Flags follow RocketMQ's benchmark (`example/.../benchmark/Producer.java`, `Consumer.java`)
//! where they overlap, including its habit of giving booleans a value (`-k true`, `-y true`).
//! Every count and duration has a default and a cap (the named constants in `args`); the value
//! parsers below enforce the caps, so a bad value is reported by clap naming the flag, the value
//! and why. [`crate::args`] turns the parsed groups into the resolved `Args` the kinds run from.

use std::path::PathBuf;

use clap::{ArgAction, Parser, Subcommand, ValueEnum};
use ringmq::remoting::SerializeType;

use crate::bounds::{
    FilterType, StartFrom, BACKLOG_DEFAULT_BYTES, BACKLOG_MAX_BYTES, BODY_SIZE_DEFAULT_BYTES,
    BODY_SIZE_MAX_BYTES, CONNECTIONS_MAX, COUNT_MAX, DURATION_DEFAULT_S, DURATION_MAX_S,
    ECHO_QUEUES_DEFAULT, INFLIGHT_DEFAULT, INFLIGHT_MAX, PID_MAX, PROPERTY_SIZE_MAX_BYTES,
    PULL_BATCH_DEFAULT, PULL_BATCH_MAX, QUEUES_PER_TOPIC_DEFAULT, QUEUES_PER_TOPIC_MAX, RATE_MAX,
    SEND_TIMEOUT_DEFAULT_MS, SEND_TIMEOUT_MAX_MS, TAG_COUNT_MAX, THREADS_MAX, TOPICS_MAX,
};

/// `--rate` default of `e2e` (the canonical W3 workload), in msg/s. Text, because it replaces
/// the shared `--rate` default on the e2e subcommand only (`Arg::default_value` takes a str).
pub const E2E_RATE_DEFAULT: &str = "10000";

/// `ringmq-bench`: a RocketMQ-protocol benchmark client (loopback addresses only).
#[derive(Debug, Parser)]
#[command(
    name = "ringmq-bench",
    about = "A RocketMQ-protocol benchmark client and echo server (loopback addresses only)",
    after_help = "See `ringmq-bench <KIND> --help` for the flags of each kind, and \
                  docs/BENCHMARKS.md for what each kind measures.",
    subcommand_value_name = "KIND",
    subcommand_help_heading = "Kinds",
    // As the hand-written parser did: a flag given twice takes its last value.
    args_override_self = true
)]
pub struct Cli {
    /// `None`: no kind given; the usage is printed (and the run succeeds), as before clap.
    #[command(subcommand)]
    pub kind: Option<KindCmd>,
}

/// One subcommand per kind.
#[derive(Debug, Subcommand)]
pub enum KindCmd {
    /// Send messages round robin over every write queue of the topic(s), sync or async
    Producer(ProducerCmd),
    /// Long-polling pull consumer over every read queue of the topic(s)
    Consumer(ConsumerCmd),
    /// Producers at a fixed rate plus consumers; latency = consume time - intended send time
    #[command(mut_arg("rate", |a| a.default_value(E2E_RATE_DEFAULT)))]
    E2e(E2eCmd),
    /// Pre-fill a backlog, then consume it from offset 0 as fast as possible
    // The fill sends the whole backlog at full speed: `-q` and `-r` are not used (still
    // accepted, as before, but not advertised).
    #[command(mut_arg("count", |a| a.hide(true)), mut_arg("rate", |a| a.hide(true)))]
    Catchup(CatchupCmd),
    /// A remoting server that acknowledges sends without storing: the ceiling of this client
    EchoServer(EchoCmd),
    /// Print a Markdown (or TSV) table of JSON reports
    Summary(SummaryCmd),
}

#[derive(Debug, clap::Args)]
pub struct ProducerCmd {
    #[command(flatten)]
    pub client: ClientFlags,
    #[command(flatten)]
    pub send: SendFlags,
}

#[derive(Debug, clap::Args)]
pub struct ConsumerCmd {
    #[command(flatten)]
    pub client: ClientFlags,
    #[command(flatten)]
    pub consume: ConsumeFlags,
    /// Messages to consume, 0 = until the duration ends
    #[arg(short = 'q', long, value_name = "N", default_value_t = 0,
          value_parser = bounded::<u64>(0, COUNT_MAX), help_heading = "Consume")]
    pub count: u64,
    /// Where a group without a committed offset starts
    #[arg(long, value_enum, default_value_t = StartFrom::Last, help_heading = "Consume")]
    pub from: StartFrom,
}

#[derive(Debug, clap::Args)]
pub struct E2eCmd {
    #[command(flatten)]
    pub client: ClientFlags,
    #[command(flatten)]
    pub send: SendFlags,
    #[command(flatten)]
    pub consume: ConsumeFlags,
}

#[derive(Debug, clap::Args)]
pub struct CatchupCmd {
    #[command(flatten)]
    pub client: ClientFlags,
    #[command(flatten)]
    pub send: SendFlags,
    #[command(flatten)]
    pub consume: ConsumeFlags,
    #[command(flatten)]
    pub catchup: CatchupFlags,
}

/// Flags of every client kind (producer, consumer, e2e, catchup).
#[derive(Debug, Clone, clap::Args)]
pub struct ClientFlags {
    /// Name server address; of a `;`-separated list the first entry is used
    #[arg(
        short = 'n',
        long,
        value_name = "ADDR",
        default_value = "127.0.0.1:9876"
    )]
    pub namesrv: String,
    /// Topic
    #[arg(short = 't', long, value_name = "TOPIC", default_value = "BenchmarkTest",
          value_parser = name_parser)]
    pub topic: String,
    /// Number of topics; more than one: the topics are <TOPIC>_<i>
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = bounded::<u32>(1, TOPICS_MAX.into()))]
    pub topics: u32,
    /// Connections per broker (producers and consumers each)
    #[arg(short = 'c', long, value_name = "N", default_value_t = 1,
          value_parser = bounded::<usize>(1, CONNECTIONS_MAX as u64))]
    pub connections: usize,
    /// Seconds to run (the measured phase), at most 600
    #[arg(short = 'd', long, value_name = "SECONDS", default_value_t = DURATION_DEFAULT_S,
          value_parser = bounded::<u64>(1, DURATION_MAX_S))]
    pub duration: u64,
    /// Header encoding (rocketmq: binary, as RocketMQ's benchmark)
    #[arg(long, value_enum, ignore_case = true, default_value_t = Serialize::Rocketmq)]
    pub serialize: Serialize,
    /// Print a progress line every second
    #[arg(long, value_name = "BOOL", default_value_t = true, action = ArgAction::Set,
          value_parser = parse_bool)]
    pub progress: bool,
    /// Write the JSON report here
    #[arg(long, value_name = "PATH")]
    pub report: Option<PathBuf>,
    /// Write the SVG chart here [default: the report path with .svg]
    #[arg(long, value_name = "PATH")]
    pub svg: Option<PathBuf>,
    /// Free text stored in the report
    #[arg(long, value_name = "TEXT")]
    pub label: Option<String>,
}

/// Flags of the kinds that send (producer, e2e, catchup's fill).
#[derive(Debug, Clone, clap::Args)]
#[command(next_help_heading = "Send")]
pub struct SendFlags {
    /// Queues per auto-created topic (defaultTopicQueueNums sent with each message)
    #[arg(long, value_name = "N", default_value_t = QUEUES_PER_TOPIC_DEFAULT,
          value_parser = bounded::<i32>(1, QUEUES_PER_TOPIC_MAX as u64))]
    pub queues: i32,
    /// Producer threads [default: 64; 1 with -y true]
    #[arg(short = 'w', long, value_name = "N", value_parser = bounded::<usize>(1, THREADS_MAX as u64))]
    pub threads: Option<usize>,
    /// Body size in bytes
    #[arg(short = 's', long, value_name = "BYTES", default_value_t = BODY_SIZE_DEFAULT_BYTES,
          value_parser = bounded::<usize>(1, BODY_SIZE_MAX_BYTES as u64))]
    pub size: usize,
    /// Set KEYS on each message
    #[arg(short = 'k', long, value_name = "BOOL", default_value_t = false, action = ArgAction::Set,
          value_parser = parse_bool)]
    pub keys: bool,
    /// Number of distinct tags tag0..tagN-1, 0 = no tag
    #[arg(short = 'l', long, value_name = "N", default_value_t = 0,
          value_parser = bounded::<u32>(0, TAG_COUNT_MAX.into()))]
    pub tags: u32,
    /// Bytes of user properties per message
    #[arg(short = 'p', long, value_name = "BYTES", default_value_t = 0,
          value_parser = bounded::<usize>(0, PROPERTY_SIZE_MAX_BYTES as u64))]
    pub property_size: usize,
    /// Messages to send, 0 = until the duration ends
    #[arg(short = 'q', long, value_name = "N", default_value_t = 0,
          value_parser = bounded::<u64>(0, COUNT_MAX))]
    pub count: u64,
    /// Target msg/s over all producer threads, 0 = unlimited
    #[arg(short = 'r', long, value_name = "MSG_PER_S", default_value_t = 0,
          value_parser = bounded::<u64>(0, RATE_MAX))]
    pub rate: u64,
    /// Async send
    #[arg(short = 'y', long = "async", value_name = "BOOL", default_value_t = false,
          action = ArgAction::Set, value_parser = parse_bool)]
    pub async_send: bool,
    /// Async sends in flight per connection
    #[arg(long, value_name = "N", default_value_t = INFLIGHT_DEFAULT,
          value_parser = bounded::<usize>(1, INFLIGHT_MAX as u64))]
    pub inflight: usize,
    /// Send timeout in milliseconds
    #[arg(long, value_name = "MS", default_value_t = SEND_TIMEOUT_DEFAULT_MS,
          value_parser = bounded::<u64>(1, SEND_TIMEOUT_MAX_MS))]
    pub timeout_ms: u64,
}

/// Flags of the kinds that consume (consumer, e2e, catchup).
#[derive(Debug, Clone, clap::Args)]
#[command(next_help_heading = "Consume")]
pub struct ConsumeFlags {
    /// Consumer group
    #[arg(short = 'g', long, value_name = "GROUP", default_value = "benchmark_consumer",
          value_parser = name_parser)]
    pub group: String,
    /// Filter kind of the subscription expression
    #[arg(short = 'f', long, value_enum, ignore_case = true, default_value_t = FilterType::Tag)]
    pub filter_type: FilterType,
    /// Subscription expression
    #[arg(short = 'e', long, value_name = "EXPR", default_value = "*")]
    pub expression: String,
    /// Commit consumer offsets
    #[arg(long, value_name = "BOOL", default_value_t = true, action = ArgAction::Set,
          value_parser = parse_bool)]
    pub commit: bool,
    /// maxMsgNums per pull
    #[arg(long, value_name = "N", default_value_t = PULL_BATCH_DEFAULT,
          value_parser = bounded::<i32>(1, PULL_BATCH_MAX as u64))]
    pub pull_batch: i32,
}

/// Flags of `catchup` alone.
#[derive(Debug, Clone, clap::Args)]
#[command(next_help_heading = "Catchup")]
pub struct CatchupFlags {
    /// Bytes of bodies to pre-fill
    #[arg(long, value_name = "BYTES", default_value_t = BACKLOG_DEFAULT_BYTES,
          value_parser = bounded::<u64>(1, BACKLOG_MAX_BYTES))]
    pub backlog_bytes: u64,
    /// Consume the existing backlog, do not pre-fill
    #[arg(long)]
    pub skip_fill: bool,
    /// Longest pre-fill in seconds, at most 600
    #[arg(long, value_name = "SECONDS", default_value_t = DURATION_MAX_S,
          value_parser = bounded::<u64>(1, DURATION_MAX_S))]
    pub fill_duration: u64,
    /// Broker process id: report its user/sys CPU per GiB served while consuming
    #[arg(long, value_name = "PID", value_parser = bounded::<u32>(1, PID_MAX))]
    pub broker_pid: Option<u32>,
    /// After the consume, consume the whole backlog once more with another fresh group
    /// (meter catchup_warm): its pages are in the page cache then, because the first pass
    /// read them
    #[arg(long, value_name = "BOOL", default_value_t = false, action = ArgAction::Set,
          value_parser = parse_bool)]
    pub warm_pass: bool,
}

#[derive(Debug, Clone, clap::Args)]
pub struct EchoCmd {
    /// Listen address
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:0")]
    pub listen: String,
    /// Queues per topic in the routes it answers
    #[arg(long, value_name = "N", default_value_t = ECHO_QUEUES_DEFAULT,
          value_parser = bounded::<i32>(1, QUEUES_PER_TOPIC_MAX as u64))]
    pub echo_queues: i32,
    /// How connections are served: two threads each (per-connection), or a fixed pool of
    /// epoll worker threads (pool, sized by --echo-threads)
    #[arg(long, value_enum, ignore_case = true, default_value_t = EchoModel::PerConnection)]
    pub echo_model: EchoModel,
    /// Worker threads of --echo-model pool [default: one per core, at most 64]
    #[arg(long, value_name = "N",
          value_parser = bounded::<usize>(1, crate::echo_workers::ECHO_THREADS_MAX as u64))]
    pub echo_threads: Option<usize>,
    /// Seconds to serve, at most 600
    #[arg(short = 'd', long, value_name = "SECONDS", default_value_t = DURATION_MAX_S,
          value_parser = bounded::<u64>(1, DURATION_MAX_S))]
    pub duration: u64,
}

#[derive(Debug, Clone, clap::Args)]
pub struct SummaryCmd {
    /// Output format
    #[arg(long, value_enum, default_value_t = Format::Md)]
    pub format: Format,
    /// JSON reports written by --report
    #[arg(value_name = "REPORT.json")]
    pub inputs: Vec<PathBuf>,
}

/// `--echo-model`: how the echo server serves its connections.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum EchoModel {
    PerConnection,
    Pool,
}

/// `--serialize`: the remoting header encoding.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Serialize {
    Json,
    Rocketmq,
}

impl From<Serialize> for SerializeType {
    fn from(value: Serialize) -> Self {
        match value {
            Serialize::Json => SerializeType::Json,
            Serialize::Rocketmq => SerializeType::RocketMq,
        }
    }
}

/// `summary --format`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    Md,
    Tsv,
}

/// A value parser for an integer in `min..=max`; `_` separators are allowed (`1_000_000`).
fn bounded<T>(min: u64, max: u64) -> impl Fn(&str) -> Result<T, String> + Clone + Send + Sync
where
    T: TryFrom<u64>,
{
    move |value: &str| {
        let parsed: u64 = value
            .replace('_', "")
            .parse()
            .map_err(|_| "not a non-negative integer".to_owned())?;
        if parsed < min || parsed > max {
            return Err(format!("{parsed} is outside {min}..={max}"));
        }
        // In range, so it fits: every bound is a value of `T`.
        T::try_from(parsed).map_err(|_| format!("{parsed} is outside {min}..={max}"))
    }
}

/// A boolean given as a value, as RocketMQ's benchmark does: `true` or `false`, in any case.
fn parse_bool(value: &str) -> Result<bool, String> {
    if value.eq_ignore_ascii_case("true") {
        Ok(true)
    } else if value.eq_ignore_ascii_case("false") {
        Ok(false)
    } else {
        Err("not true or false".to_owned())
    }
}

/// Topic and group names: RocketMQ's legal characters, at most 120 bytes (v1 records hold 127).
fn name_parser(name: &str) -> Result<String, String> {
    let legal = |c: char| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '%' | '|');
    if name.is_empty() || name.len() > 120 || !name.chars().all(legal) {
        return Err("must be 1..=120 characters of [A-Za-z0-9_%|-]".to_owned());
    }
    Ok(name.to_owned())
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    use super::*;

    #[test]
    fn the_command_is_well_formed() {
        Cli::command().debug_assert();
    }

    #[test]
    fn value_parsers_say_why() {
        let threads = bounded::<usize>(1, 1024);
        assert_eq!(threads("1_000"), Ok(1000));
        assert_eq!(threads("0"), Err("0 is outside 1..=1024".to_owned()));
        assert_eq!(threads("-3"), Err("not a non-negative integer".to_owned()));
        assert_eq!(bounded::<u32>(0, 5)("5"), Ok(5));
        assert_eq!(parse_bool("TRUE"), Ok(true));
        assert_eq!(parse_bool("False"), Ok(false));
        assert!(parse_bool("yes").is_err());
        assert!(name_parser("ok_Name-1%|").is_ok());
        for bad in ["", "bad topic", &"x".repeat(121)] {
            assert!(name_parser(bad).is_err(), "{bad:?}");
        }
    }
}
