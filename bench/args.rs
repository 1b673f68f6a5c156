//! Command line: `ringmq-bench KIND [FLAGS]`.
//!
//! Flags follow RocketMQ's benchmark (`example/.../benchmark/Producer.java`, `Consumer.java`)
//! where they overlap, including its habit of giving booleans a value (`-k true`, `-y true`).
//! Every count and duration has a default and a cap (named constants below).

use std::path::PathBuf;

use ringmq::remoting::SerializeType;

use crate::error::BenchError;

/// Longest run; every kind stops by then.
pub const DURATION_MAX_S: u64 = 600;
/// Default run length (RocketMQ's benchmark runs forever; ours is bounded).
pub const DURATION_DEFAULT_S: u64 = 10;
/// Most connections per broker.
pub const CONNECTIONS_MAX: usize = 1024;
/// Most producer threads.
pub const THREADS_MAX: usize = 1024;
/// RocketMQ benchmark producer default (`-w`).
pub const THREADS_DEFAULT: usize = 64;
/// Largest body: the broker's `maxMessageSize` (4 MiB).
pub const BODY_SIZE_MAX_BYTES: usize = 4 * 1024 * 1024;
/// RocketMQ benchmark default (`-s`).
pub const BODY_SIZE_DEFAULT_BYTES: usize = 128;
/// User properties must fit in the record's 16-bit properties length with room for system keys.
pub const PROPERTY_SIZE_MAX_BYTES: usize = 16 * 1024;
/// Most distinct tags (`-l`).
pub const TAG_COUNT_MAX: u32 = 1_000_000;
/// Most topics (`--topics`).
pub const TOPICS_MAX: u32 = 4096;
/// Queues a topic may ask for when auto-created (RocketMQ's queue ids are small ints).
pub const QUEUES_PER_TOPIC_MAX: i32 = 1024;
/// Java client `defaultTopicQueueNums`.
pub const QUEUES_PER_TOPIC_DEFAULT: i32 = 4;
/// Most messages one run sends (`-q`): 10^10 is hours at any rate this machine can reach.
pub const COUNT_MAX: u64 = 10_000_000_000;
/// Highest target rate in msg/s.
pub const RATE_MAX: u64 = 10_000_000;
/// Default e2e rate (the canonical W3 workload).
pub const E2E_RATE_DEFAULT: u64 = 10_000;
/// Most async sends in flight per connection (Java 5.x `backPressureForAsyncSendNum` is 1024).
pub const INFLIGHT_MAX: usize = 65_536;
pub const INFLIGHT_DEFAULT: usize = 1024;
/// Java client `sendMsgTimeout`.
pub const SEND_TIMEOUT_DEFAULT_MS: u64 = 3000;
pub const SEND_TIMEOUT_MAX_MS: u64 = 60_000;
/// Catch-up backlog default and cap.
pub const BACKLOG_DEFAULT_BYTES: u64 = 1024 * 1024 * 1024;
pub const BACKLOG_MAX_BYTES: u64 = 64 * 1024 * 1024 * 1024;
/// Java client `pullBatchSize`.
pub const PULL_BATCH_DEFAULT: i32 = 32;
pub const PULL_BATCH_MAX: i32 = 1024;
/// Largest pid Linux hands out (`PID_MAX_LIMIT` on 64-bit: 2^22).
pub const PID_MAX: u64 = 4 * 1024 * 1024;
/// Echo server default queues per topic (broker `defaultTopicQueueNums`).
pub const ECHO_QUEUES_DEFAULT: i32 = 8;

/// What to run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Producer,
    Consumer,
    E2e,
    Catchup,
    EchoServer,
    /// Prints a Markdown table of JSON reports (for the scripts).
    Summary,
}

impl Kind {
    pub fn name(self) -> &'static str {
        match self {
            Kind::Producer => "producer",
            Kind::Consumer => "consumer",
            Kind::E2e => "e2e",
            Kind::Catchup => "catchup",
            Kind::EchoServer => "echo-server",
            Kind::Summary => "summary",
        }
    }

    fn from_name(name: &str) -> Option<Self> {
        [
            Kind::Producer,
            Kind::Consumer,
            Kind::E2e,
            Kind::Catchup,
            Kind::EchoServer,
            Kind::Summary,
        ]
        .into_iter()
        .find(|kind| kind.name() == name)
    }
}

/// Consumer filter kind (`-f`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FilterType {
    Tag,
    Sql92,
}

impl FilterType {
    pub fn name(self) -> &'static str {
        match self {
            FilterType::Tag => "TAG",
            FilterType::Sql92 => "SQL92",
        }
    }
}

/// Where a consumer group without a committed offset starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StartFrom {
    First,
    Last,
}

/// Every parameter of every kind, with defaults applied and bounds checked.
#[derive(Debug, Clone)]
pub struct Args {
    pub kind: Kind,
    /// Name server address (`-n`); `;`-separated lists use the first entry.
    pub namesrv: String,
    pub topic: String,
    /// With more than one, the topics are `<topic>_<i>`.
    pub topics: u32,
    /// `defaultTopicQueueNums` sent with each message (queues of an auto-created topic).
    pub queues_per_topic: i32,
    pub threads: usize,
    pub connections: usize,
    pub body_size_bytes: usize,
    pub keys: bool,
    pub tag_count: u32,
    pub property_size_bytes: usize,
    /// 0 = until the duration ends.
    pub count: u64,
    pub duration_s: u64,
    /// True when `-d` was given (the echo server otherwise runs for the cap).
    pub duration_explicit: bool,
    /// Total msg/s over all producer threads; 0 = as fast as possible.
    pub rate: u64,
    pub async_send: bool,
    pub inflight: usize,
    pub send_timeout_ms: u64,
    pub group: String,
    pub filter_type: FilterType,
    pub expression: String,
    pub from: StartFrom,
    pub commit: bool,
    pub pull_batch: i32,
    pub backlog_bytes: u64,
    pub skip_fill: bool,
    /// Catch-up: the pre-fill stops after this long even if the backlog is not complete.
    pub fill_duration_s: u64,
    /// Catch-up: the broker process whose CPU time is sampled around the consume phase.
    pub broker_pid: Option<u32>,
    pub report: Option<PathBuf>,
    pub svg: Option<PathBuf>,
    pub serialize: SerializeType,
    pub listen: String,
    pub echo_queues: i32,
    pub progress: bool,
    pub label: Option<String>,
    /// `summary` output: Markdown table (false) or tab-separated values (true).
    pub tsv: bool,
    /// Positional arguments (report paths for `summary`).
    pub inputs: Vec<PathBuf>,
}

/// The outcome of parsing.
#[derive(Debug)]
pub enum Parsed {
    Help,
    Run(Box<Args>),
}

struct FlagSpec {
    short: Option<&'static str>,
    long: &'static str,
    takes_value: bool,
    help: &'static str,
}

const fn flag(
    short: Option<&'static str>,
    long: &'static str,
    takes_value: bool,
    help: &'static str,
) -> FlagSpec {
    FlagSpec {
        short,
        long,
        takes_value,
        help,
    }
}

const FLAGS: &[FlagSpec] = &[
    flag(
        Some("n"),
        "namesrv",
        true,
        "name server address [127.0.0.1:9876]",
    ),
    flag(Some("t"), "topic", true, "topic [BenchmarkTest]"),
    flag(None, "topics", true, "number of topics <topic>_<i> [1]"),
    flag(
        None,
        "queues",
        true,
        "queues per auto-created topic (defaultTopicQueueNums) [4]",
    ),
    flag(
        Some("w"),
        "threads",
        true,
        "producer threads [64; 1 with -y true]",
    ),
    flag(Some("c"), "connections", true, "connections per broker [1]"),
    flag(Some("s"), "size", true, "body size in bytes [128]"),
    flag(
        Some("k"),
        "keys",
        true,
        "set KEYS on each message: true|false [false]",
    ),
    flag(
        Some("l"),
        "tags",
        true,
        "number of distinct tags tag0..tagN-1, 0 = no tag [0]",
    ),
    flag(
        Some("p"),
        "property-size",
        true,
        "bytes of user properties per message [0]",
    ),
    flag(
        Some("q"),
        "count",
        true,
        "messages to send (or consume), 0 = until the duration ends [0]",
    ),
    flag(
        Some("d"),
        "duration",
        true,
        "seconds to run, at most 600 [10]",
    ),
    flag(
        Some("r"),
        "rate",
        true,
        "target msg/s over all producers, 0 = unlimited [0; e2e 10000]",
    ),
    flag(Some("y"), "async", true, "async send: true|false [false]"),
    flag(
        None,
        "inflight",
        true,
        "async sends in flight per connection [1024]",
    ),
    flag(None, "timeout-ms", true, "send timeout [3000]"),
    flag(
        Some("g"),
        "group",
        true,
        "consumer group [benchmark_consumer]",
    ),
    flag(Some("f"), "filter-type", true, "TAG|SQL92 [TAG]"),
    flag(Some("e"), "expression", true, "subscription expression [*]"),
    flag(
        None,
        "from",
        true,
        "first|last: where a group without committed offset starts [last]",
    ),
    flag(
        None,
        "commit",
        true,
        "commit consumer offsets: true|false [true]",
    ),
    flag(None, "pull-batch", true, "maxMsgNums per pull [32]"),
    flag(
        None,
        "backlog-bytes",
        true,
        "catchup: bytes to pre-fill [1073741824]",
    ),
    flag(
        None,
        "fill-duration",
        true,
        "catchup: longest pre-fill in seconds, at most 600 [600]",
    ),
    flag(
        None,
        "skip-fill",
        false,
        "catchup: consume the existing backlog, do not pre-fill",
    ),
    flag(
        None,
        "broker-pid",
        true,
        "catchup: broker process id; report its user/sys CPU per GiB served while consuming",
    ),
    flag(None, "report", true, "write the JSON report here"),
    flag(
        None,
        "svg",
        true,
        "write the SVG chart here [report path with .svg]",
    ),
    flag(
        None,
        "serialize",
        true,
        "header encoding json|rocketmq [rocketmq, as RocketMQ's benchmark]",
    ),
    flag(
        None,
        "listen",
        true,
        "echo-server listen address [127.0.0.1:0]",
    ),
    flag(
        None,
        "echo-queues",
        true,
        "echo-server queues per topic [8]",
    ),
    flag(
        None,
        "progress",
        true,
        "print a progress line every second: true|false [true]",
    ),
    flag(None, "label", true, "free text stored in the report"),
    flag(None, "format", true, "summary output: md|tsv [md]"),
    flag(Some("h"), "help", false, "this help"),
];

/// The usage text.
pub fn usage() -> String {
    let mut text = String::from(
        "usage: ringmq-bench KIND [FLAGS]\n\
         kinds: producer | consumer | e2e | catchup | echo-server | summary REPORT.json...\n\
         Only loopback addresses are accepted.\n\nflags:\n",
    );
    for spec in FLAGS {
        let short = spec.short.map(|s| format!("-{s}, ")).unwrap_or_default();
        let value = if spec.takes_value { " V" } else { "" };
        text.push_str(&format!(
            "  {:<28} {}\n",
            format!("{short}--{}{value}", spec.long),
            spec.help
        ));
    }
    text
}

fn find_spec(name: &str) -> Option<&'static FlagSpec> {
    if let Some(long) = name.strip_prefix("--") {
        FLAGS.iter().find(|spec| spec.long == long)
    } else if let Some(short) = name.strip_prefix('-') {
        FLAGS.iter().find(|spec| spec.short == Some(short))
    } else {
        None
    }
}

/// The flags of one command line, in the order given; a later flag overrides an earlier one.
struct FlagValues(Vec<(&'static str, String)>);

impl FlagValues {
    /// The value of `--long` (the last one given), if any.
    fn get(&self, long: &str) -> Option<&str> {
        self.0
            .iter()
            .rev()
            .find(|(name, _)| *name == long)
            .map(|(_, v)| v.as_str())
    }

    /// The number given for `--long` (or `default`), checked to lie in `min..=max`.
    fn num(&self, long: &str, default: u64, min: u64, max: u64) -> Result<u64, BenchError> {
        num(self.get(long), &format!("--{long}"), default, min, max)
    }

    /// The boolean given for `--long` (or `default`).
    fn bool(&self, long: &str, default: bool) -> Result<bool, BenchError> {
        bool_flag(self.get(long), &format!("--{long}"), default)
    }
}

/// A command line split into its kind, flags and positional arguments.
struct CommandLine {
    kind: Kind,
    values: FlagValues,
    inputs: Vec<PathBuf>,
}

/// Parses `argv` (without the program name).
pub fn parse<I, S>(argv: I) -> Result<Parsed, BenchError>
where
    I: IntoIterator<Item = S>,
    S: Into<String>,
{
    let Some(line) = split_command_line(argv)? else {
        return Ok(Parsed::Help);
    };
    if line.kind != Kind::Summary && !line.inputs.is_empty() {
        return Err(BenchError::flag(
            &line.inputs[0].display().to_string(),
            "unexpected positional argument",
        ));
    }
    build_args(line).map(|args| Parsed::Run(Box::new(args)))
}

/// Splits `argv` into the kind, the flag values and the positional arguments. `None`: help was
/// asked for, or no kind was given.
fn split_command_line<I, S>(argv: I) -> Result<Option<CommandLine>, BenchError>
where
    I: IntoIterator<Item = S>,
    S: Into<String>,
{
    let mut kind = None;
    let mut inputs = Vec::new();
    let mut values: Vec<(&'static str, String)> = Vec::new();
    let mut iter = argv.into_iter().map(Into::into);
    while let Some(arg) = iter.next() {
        if arg.starts_with('-') && arg.len() > 1 {
            let (name, inline) = match arg.split_once('=') {
                Some((name, value)) if name.starts_with("--") => (name.to_owned(), Some(value)),
                _ => (arg.clone(), None),
            };
            let spec = find_spec(&name)
                .ok_or_else(|| BenchError::flag(&name, "unknown flag (see --help)"))?;
            if spec.long == "help" {
                return Ok(None);
            }
            let value = if spec.takes_value {
                match inline {
                    Some(value) => value.to_owned(),
                    None => iter
                        .next()
                        .ok_or_else(|| BenchError::flag(&name, "needs a value"))?,
                }
            } else {
                if inline.is_some() {
                    return Err(BenchError::flag(&name, "takes no value"));
                }
                "true".to_owned()
            };
            values.push((spec.long, value));
        } else if kind.is_none() {
            kind = Some(Kind::from_name(&arg).ok_or_else(|| {
                BenchError::flag(
                    &arg,
                    "unknown kind (producer, consumer, e2e, catchup, echo-server, summary)",
                )
            })?);
        } else {
            inputs.push(PathBuf::from(arg));
        }
    }
    Ok(kind.map(|kind| CommandLine {
        kind,
        values: FlagValues(values),
        inputs,
    }))
}

/// Applies defaults and bounds to every flag. Flags are checked in a fixed order, so the first
/// error reported does not depend on the order they were given in.
fn build_args(line: CommandLine) -> Result<Args, BenchError> {
    let CommandLine {
        kind,
        values: v,
        inputs,
    } = line;
    let async_send = v.bool("async", false)?;
    let threads_default = if async_send { 1 } else { THREADS_DEFAULT };
    let (report, svg) = report_paths(&v);
    let filter_type = filter_type(v.get("filter-type"))?;
    let from = start_from(v.get("from"))?;
    let serialize = serialize_type(v.get("serialize"))?;
    let topic = checked_name(&v, "topic", "BenchmarkTest")?;
    let group = checked_name(&v, "group", "benchmark_consumer")?;
    let broker_pid = broker_pid(v.get("broker-pid"), kind)?;

    Ok(Args {
        kind,
        namesrv: v.get("namesrv").unwrap_or("127.0.0.1:9876").to_owned(),
        topic,
        topics: v.num("topics", 1, 1, u64::from(TOPICS_MAX))? as u32,
        queues_per_topic: v.num(
            "queues",
            QUEUES_PER_TOPIC_DEFAULT as u64,
            1,
            QUEUES_PER_TOPIC_MAX as u64,
        )? as i32,
        threads: v.num("threads", threads_default as u64, 1, THREADS_MAX as u64)? as usize,
        connections: v.num("connections", 1, 1, CONNECTIONS_MAX as u64)? as usize,
        body_size_bytes: v.num(
            "size",
            BODY_SIZE_DEFAULT_BYTES as u64,
            1,
            BODY_SIZE_MAX_BYTES as u64,
        )? as usize,
        keys: v.bool("keys", false)?,
        tag_count: v.num("tags", 0, 0, u64::from(TAG_COUNT_MAX))? as u32,
        property_size_bytes: v.num("property-size", 0, 0, PROPERTY_SIZE_MAX_BYTES as u64)? as usize,
        count: v.num("count", 0, 0, COUNT_MAX)?,
        duration_s: v.num("duration", DURATION_DEFAULT_S, 1, DURATION_MAX_S)?,
        duration_explicit: v.get("duration").is_some(),
        rate: v.num("rate", rate_default(kind), 0, RATE_MAX)?,
        async_send,
        inflight: v.num("inflight", INFLIGHT_DEFAULT as u64, 1, INFLIGHT_MAX as u64)? as usize,
        send_timeout_ms: v.num(
            "timeout-ms",
            SEND_TIMEOUT_DEFAULT_MS,
            1,
            SEND_TIMEOUT_MAX_MS,
        )?,
        group,
        filter_type,
        expression: v.get("expression").unwrap_or("*").to_owned(),
        from,
        commit: v.bool("commit", true)?,
        pull_batch: v.num(
            "pull-batch",
            PULL_BATCH_DEFAULT as u64,
            1,
            PULL_BATCH_MAX as u64,
        )? as i32,
        backlog_bytes: v.num("backlog-bytes", BACKLOG_DEFAULT_BYTES, 1, BACKLOG_MAX_BYTES)?,
        skip_fill: v.bool("skip-fill", false)?,
        fill_duration_s: v.num("fill-duration", DURATION_MAX_S, 1, DURATION_MAX_S)?,
        broker_pid,
        report,
        svg,
        serialize,
        listen: v.get("listen").unwrap_or("127.0.0.1:0").to_owned(),
        echo_queues: v.num(
            "echo-queues",
            ECHO_QUEUES_DEFAULT as u64,
            1,
            QUEUES_PER_TOPIC_MAX as u64,
        )? as i32,
        progress: v.bool("progress", true)?,
        label: v.get("label").map(str::to_owned),
        tsv: summary_tsv(v.get("format"))?,
        inputs,
    })
}

/// `--rate`: e2e runs the canonical W3 rate unless told otherwise; the rest are unlimited.
fn rate_default(kind: Kind) -> u64 {
    if kind == Kind::E2e {
        E2E_RATE_DEFAULT
    } else {
        0
    }
}

/// `--report`, and `--svg` (by default the report path with `.svg`).
fn report_paths(v: &FlagValues) -> (Option<PathBuf>, Option<PathBuf>) {
    let report = v.get("report").map(PathBuf::from);
    let svg = match v.get("svg") {
        Some(path) => Some(PathBuf::from(path)),
        None => report.as_ref().map(|path| path.with_extension("svg")),
    };
    (report, svg)
}

/// `--topic` / `--group` (or `default`), checked by [`check_name`].
fn checked_name(v: &FlagValues, long: &str, default: &str) -> Result<String, BenchError> {
    let name = v.get(long).unwrap_or(default).to_owned();
    check_name(&format!("--{long}"), &name)?;
    Ok(name)
}

/// `--filter-type`: TAG (the default) or SQL92, in any case.
fn filter_type(value: Option<&str>) -> Result<FilterType, BenchError> {
    match value.unwrap_or("TAG") {
        v if v.eq_ignore_ascii_case("TAG") => Ok(FilterType::Tag),
        v if v.eq_ignore_ascii_case("SQL92") => Ok(FilterType::Sql92),
        v => Err(BenchError::flag(
            "--filter-type",
            format!("`{v}` is not TAG or SQL92"),
        )),
    }
}

/// `--from`: first or last (the default).
fn start_from(value: Option<&str>) -> Result<StartFrom, BenchError> {
    match value.unwrap_or("last") {
        "first" => Ok(StartFrom::First),
        "last" => Ok(StartFrom::Last),
        v => Err(BenchError::flag(
            "--from",
            format!("`{v}` is not first or last"),
        )),
    }
}

/// `--serialize`: json or rocketmq (the default, as RocketMQ's benchmark), in any case.
fn serialize_type(value: Option<&str>) -> Result<SerializeType, BenchError> {
    match value.unwrap_or("rocketmq") {
        v if v.eq_ignore_ascii_case("json") => Ok(SerializeType::Json),
        v if v.eq_ignore_ascii_case("rocketmq") => Ok(SerializeType::RocketMq),
        v => Err(BenchError::flag(
            "--serialize",
            format!("`{v}` is not json or rocketmq"),
        )),
    }
}

/// `--broker-pid`: only the catchup kind samples the broker's CPU time.
fn broker_pid(value: Option<&str>, kind: Kind) -> Result<Option<u32>, BenchError> {
    match value {
        None => Ok(None),
        Some(_) if kind != Kind::Catchup => Err(BenchError::flag(
            "--broker-pid",
            "only the catchup kind measures the broker's CPU",
        )),
        Some(value) => Ok(Some(num(Some(value), "--broker-pid", 0, 1, PID_MAX)? as u32)),
    }
}

/// `--format` of `summary`: md (the default) or tsv.
fn summary_tsv(value: Option<&str>) -> Result<bool, BenchError> {
    match value.unwrap_or("md") {
        "md" => Ok(false),
        "tsv" => Ok(true),
        v => Err(BenchError::flag(
            "--format",
            format!("`{v}` is not md or tsv"),
        )),
    }
}

impl Args {
    /// The topic names this run uses.
    pub fn topic_names(&self) -> Vec<String> {
        if self.topics <= 1 {
            vec![self.topic.clone()]
        } else {
            (0..self.topics)
                .map(|i| format!("{}_{i}", self.topic))
                .collect()
        }
    }

    /// Parameters for the JSON report.
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::json!({
            "kind": self.kind.name(),
            "namesrv": self.namesrv,
            "topic": self.topic,
            "topics": self.topics,
            "queues_per_topic": self.queues_per_topic,
            "threads": self.threads,
            "connections": self.connections,
            "body_size_bytes": self.body_size_bytes,
            "keys": self.keys,
            "tag_count": self.tag_count,
            "property_size_bytes": self.property_size_bytes,
            "count": self.count,
            "duration_s": self.duration_s,
            "rate": self.rate,
            "async_send": self.async_send,
            "inflight": self.inflight,
            "send_timeout_ms": self.send_timeout_ms,
            "group": self.group,
            "filter_type": self.filter_type.name(),
            "expression": self.expression,
            "from": match self.from { StartFrom::First => "first", StartFrom::Last => "last" },
            "commit": self.commit,
            "pull_batch": self.pull_batch,
            "backlog_bytes": self.backlog_bytes,
            "skip_fill": self.skip_fill,
            "fill_duration_s": self.fill_duration_s,
            "broker_pid": self.broker_pid,
            "serialize": self.serialize.name(),
            "label": self.label,
        })
    }
}

/// Topic and group names: RocketMQ's legal characters, at most 127 bytes (v1 records).
fn check_name(flag: &str, name: &str) -> Result<(), BenchError> {
    let legal = |c: char| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '%' | '|');
    if name.is_empty() || name.len() > 120 || !name.chars().all(legal) {
        return Err(BenchError::flag(
            flag,
            format!("`{name}` must be 1..=120 characters of [A-Za-z0-9_%|-]"),
        ));
    }
    Ok(())
}

fn num(
    value: Option<&str>,
    flag: &str,
    default: u64,
    min: u64,
    max: u64,
) -> Result<u64, BenchError> {
    let Some(value) = value else {
        return Ok(default);
    };
    let parsed: u64 = value
        .replace('_', "")
        .parse()
        .map_err(|_| BenchError::flag(flag, format!("`{value}` is not a non-negative integer")))?;
    if parsed < min || parsed > max {
        return Err(BenchError::flag(
            flag,
            format!("{parsed} is outside {min}..={max}"),
        ));
    }
    Ok(parsed)
}

fn bool_flag(value: Option<&str>, flag: &str, default: bool) -> Result<bool, BenchError> {
    match value {
        None => Ok(default),
        Some(v) if v.eq_ignore_ascii_case("true") => Ok(true),
        Some(v) if v.eq_ignore_ascii_case("false") => Ok(false),
        Some(v) => Err(BenchError::flag(
            flag,
            format!("`{v}` is not true or false"),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(argv: &[&str]) -> Args {
        match parse(argv.iter().copied()).expect("parses") {
            Parsed::Run(args) => *args,
            Parsed::Help => panic!("help"),
        }
    }

    #[test]
    fn rocketmq_style_flags() {
        let args = run(&[
            "producer",
            "-n",
            "127.0.0.1:1",
            "-t",
            "T",
            "-w",
            "8",
            "-s",
            "1024",
            "-k",
            "true",
            "-q",
            "100",
            "-y",
            "true",
            "--duration=5",
            "--report",
            "/tmp/r.json",
        ]);
        assert_eq!(args.kind, Kind::Producer);
        assert_eq!(args.namesrv, "127.0.0.1:1");
        assert_eq!(args.topic, "T");
        assert_eq!(args.threads, 8);
        assert_eq!(args.body_size_bytes, 1024);
        assert!(args.keys);
        assert!(args.async_send);
        assert_eq!(args.count, 100);
        assert_eq!(args.duration_s, 5);
        assert_eq!(args.svg, Some(PathBuf::from("/tmp/r.svg")));
    }

    /// Every flag the parser reads has a spec (otherwise it would be rejected as unknown).
    #[test]
    fn every_flag_read_is_declared() {
        let source = include_str!("args.rs");
        let mut names = Vec::new();
        // Flags are read by `FlagValues::get`, `::num` and `::bool`; rustfmt may put the name
        // on the next line.
        for reader in ["get(", "num(", "bool("] {
            for part in source.split(reader).skip(1) {
                let Some(quoted) = part.trim_start().strip_prefix('"') else {
                    continue;
                };
                if let Some(name) = quoted.split('"').next() {
                    if !name.is_empty() && name.chars().all(|c| c.is_ascii_lowercase() || c == '-')
                    {
                        names.push(name);
                    }
                }
            }
        }
        assert!(names.len() > 30, "found {names:?}");
        for name in names {
            assert!(
                find_spec(&format!("--{name}")).is_some(),
                "--{name} has no FLAGS entry"
            );
        }
        let args = run(&["catchup", "--fill-duration", "30", "--skip-fill"]);
        assert_eq!(args.fill_duration_s, 30);
        assert!(args.skip_fill);
        assert_eq!(args.broker_pid, None);
        assert_eq!(
            run(&["catchup", "--broker-pid", "4242"]).broker_pid,
            Some(4242)
        );
    }

    #[test]
    fn defaults_follow_rocketmq_and_kind() {
        let producer = run(&["producer"]);
        assert_eq!(producer.threads, 64);
        assert_eq!(producer.body_size_bytes, 128);
        assert_eq!(producer.topic, "BenchmarkTest");
        assert_eq!(producer.rate, 0);
        assert_eq!(run(&["producer", "-y", "true"]).threads, 1);
        assert_eq!(run(&["e2e"]).rate, E2E_RATE_DEFAULT);
        assert_eq!(
            run(&["e2e", "-t", "X", "--topics", "3"]).topic_names(),
            ["X_0", "X_1", "X_2"]
        );
    }

    #[test]
    fn bounds_are_enforced() {
        for argv in [
            &["producer", "-d", "601"][..],
            &["producer", "-c", "1025"],
            &["producer", "-s", "0"],
            &["producer", "-w", "x"],
            &["producer", "-k", "yes"],
            &["producer", "--bogus", "1"],
            &["producer", "-t", "bad topic"],
            &["nokind"],
            &["producer", "-n"],
            &["catchup", "--broker-pid", "0"],
            &["catchup", "--broker-pid", "abc"],
            &["catchup", "--broker-pid", "4194305"],
            &["consumer", "--broker-pid", "1"],
        ] {
            assert!(parse(argv.iter().copied()).is_err(), "{argv:?} should fail");
        }
        assert!(matches!(parse(["--help"]), Ok(Parsed::Help)));
        assert!(matches!(parse(Vec::<String>::new()), Ok(Parsed::Help)));
    }
}
