//! The run parameters: the caps and defaults (named constants), and [`Args`], every parameter
//! of every kind resolved from the command line [`crate::cli`] parses.
//!
//! The kinds read one flat `Args` rather than the per-kind clap structs: defaults that depend on
//! other flags (`-w` on `-y`, `--svg` on `--report`) are resolved here once, and every report
//! keeps the same `parameters` keys whatever the kind.

use std::ffi::OsString;
use std::path::PathBuf;

use clap::{Command, FromArgMatches, Parser};
use ringmq::remoting::SerializeType;

use crate::cli::{
    CatchupFlags, Cli, ClientFlags, ConsumeFlags, EchoCmd, Format, KindCmd, SendFlags, SummaryCmd,
};

pub use crate::bounds::*;

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
    /// The echo server's defaults to the cap, the other kinds' to [`DURATION_DEFAULT_S`].
    pub duration_s: u64,
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
    /// Catch-up: a second consume of the whole backlog after the first (meter `catchup_warm`).
    pub warm_pass: bool,
    pub report: Option<PathBuf>,
    pub svg: Option<PathBuf>,
    pub serialize: SerializeType,
    pub listen: String,
    pub echo_queues: i32,
    /// `echo-server`: per-connection threads, or the pool's worker threads.
    pub echo_model: crate::echo_workers::EchoModel,
    /// `echo-server` worker threads (of the pool).
    pub echo_threads: usize,
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
    /// No kind given: print the usage.
    Help,
    Run(Box<Args>),
}

/// Parses `argv` (without the program name). `--help` and bad flags come back as clap's error,
/// which knows how to print itself (see `main`).
pub fn parse<I, T>(argv: I) -> Result<Parsed, clap::Error>
where
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
{
    let program = std::iter::once(OsString::from("ringmq-bench"));
    let cli = Cli::try_parse_from(program.chain(argv.into_iter().map(Into::into)))?;
    Ok(match cli.kind {
        None => Parsed::Help,
        Some(cmd) => Parsed::Run(Box::new(Parts::from(cmd).resolve())),
    })
}

/// The flag groups one kind took; the kind's command line has no flags of the other groups, so
/// those keep their defaults.
struct Parts {
    kind: Kind,
    client: Option<ClientFlags>,
    send: Option<SendFlags>,
    consume: Option<ConsumeFlags>,
    /// The consumer's own `-q` and `--from`.
    consumer: Option<(u64, StartFrom)>,
    catchup: Option<CatchupFlags>,
    echo: Option<EchoCmd>,
    summary: Option<SummaryCmd>,
}

impl Parts {
    fn empty(kind: Kind) -> Self {
        Parts {
            kind,
            client: None,
            send: None,
            consume: None,
            consumer: None,
            catchup: None,
            echo: None,
            summary: None,
        }
    }
}

impl From<KindCmd> for Parts {
    fn from(cmd: KindCmd) -> Self {
        match cmd {
            KindCmd::Producer(c) => Parts {
                client: Some(c.client),
                send: Some(c.send),
                ..Parts::empty(Kind::Producer)
            },
            KindCmd::Consumer(c) => Parts {
                client: Some(c.client),
                consume: Some(c.consume),
                consumer: Some((c.count, c.from)),
                ..Parts::empty(Kind::Consumer)
            },
            KindCmd::E2e(c) => Parts {
                client: Some(c.client),
                send: Some(c.send),
                consume: Some(c.consume),
                ..Parts::empty(Kind::E2e)
            },
            KindCmd::Catchup(c) => Parts {
                client: Some(c.client),
                send: Some(c.send),
                consume: Some(c.consume),
                catchup: Some(c.catchup),
                ..Parts::empty(Kind::Catchup)
            },
            KindCmd::EchoServer(c) => Parts {
                echo: Some(c),
                ..Parts::empty(Kind::EchoServer)
            },
            KindCmd::Summary(c) => Parts {
                summary: Some(c),
                ..Parts::empty(Kind::Summary)
            },
        }
    }
}

/// The defaults of a flag group, taken from its clap declaration so each default is written
/// once.
fn defaults<T: clap::Args + FromArgMatches>() -> T {
    T::augment_args(Command::new("ringmq-bench"))
        .try_get_matches_from(["ringmq-bench"])
        .and_then(|matches| T::from_arg_matches(&matches))
        .expect("every flag of a group has a default")
}

impl Parts {
    /// Applies the defaults that depend on other flags or on the kind.
    fn resolve(self) -> Args {
        let client = self.client.unwrap_or_else(defaults::<ClientFlags>);
        let send = self.send.unwrap_or_else(defaults::<SendFlags>);
        let consume = self.consume.unwrap_or_else(defaults::<ConsumeFlags>);
        let catchup = self.catchup.unwrap_or_else(defaults::<CatchupFlags>);
        let echo = self.echo.unwrap_or_else(defaults::<EchoCmd>);
        let summary = self.summary.unwrap_or_else(defaults::<SummaryCmd>);
        let (count, from) = self.consumer.unwrap_or((send.count, StartFrom::Last));
        let threads_default = if send.async_send { 1 } else { THREADS_DEFAULT };
        let duration_s = match self.kind {
            Kind::EchoServer => echo.duration,
            _ => client.duration,
        };
        let svg = client.svg.or_else(|| {
            let report = client.report.as_ref();
            report.map(|path| path.with_extension("svg"))
        });
        Args {
            kind: self.kind,
            namesrv: client.namesrv,
            topic: client.topic,
            topics: client.topics,
            queues_per_topic: send.queues,
            threads: send.threads.unwrap_or(threads_default),
            connections: client.connections,
            body_size_bytes: send.size,
            keys: send.keys,
            tag_count: send.tags,
            property_size_bytes: send.property_size,
            count,
            duration_s,
            rate: send.rate,
            async_send: send.async_send,
            inflight: send.inflight,
            send_timeout_ms: send.timeout_ms,
            group: consume.group,
            filter_type: consume.filter_type,
            expression: consume.expression,
            from,
            commit: consume.commit,
            pull_batch: consume.pull_batch,
            backlog_bytes: catchup.backlog_bytes,
            skip_fill: catchup.skip_fill,
            fill_duration_s: catchup.fill_duration,
            broker_pid: catchup.broker_pid,
            warm_pass: catchup.warm_pass,
            report: client.report,
            svg,
            serialize: client.serialize.into(),
            listen: echo.listen,
            echo_queues: echo.echo_queues,
            echo_model: match echo.echo_model {
                crate::cli::EchoModel::PerConnection => {
                    crate::echo_workers::EchoModel::PerConnection
                }
                crate::cli::EchoModel::Pool => crate::echo_workers::EchoModel::Pool,
            },
            echo_threads: echo
                .echo_threads
                .unwrap_or_else(crate::echo_workers::echo_threads_default),
            progress: client.progress,
            label: client.label,
            tsv: summary.format == Format::Tsv,
            inputs: summary.inputs,
        }
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
            "warm_pass": self.warm_pass,
            "serialize": self.serialize.name(),
            "label": self.label,
        })
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

    /// Every flag and short letter of the hand-written parser this replaced, each still taken
    /// by at least one kind.
    const FLAGS_BEFORE_CLAP: &[(Option<char>, &str)] = &[
        (Some('n'), "namesrv"),
        (Some('t'), "topic"),
        (None, "topics"),
        (None, "queues"),
        (Some('w'), "threads"),
        (Some('c'), "connections"),
        (Some('s'), "size"),
        (Some('k'), "keys"),
        (Some('l'), "tags"),
        (Some('p'), "property-size"),
        (Some('q'), "count"),
        (Some('d'), "duration"),
        (Some('r'), "rate"),
        (Some('y'), "async"),
        (None, "inflight"),
        (None, "timeout-ms"),
        (Some('g'), "group"),
        (Some('f'), "filter-type"),
        (Some('e'), "expression"),
        (None, "from"),
        (None, "commit"),
        (None, "pull-batch"),
        (None, "backlog-bytes"),
        (None, "fill-duration"),
        (None, "skip-fill"),
        (None, "broker-pid"),
        (None, "report"),
        (None, "svg"),
        (None, "serialize"),
        (None, "listen"),
        (None, "echo-queues"),
        (None, "progress"),
        (None, "label"),
        (None, "format"),
        (Some('h'), "help"),
    ];

    #[test]
    fn every_flag_before_clap_is_still_declared() {
        use clap::CommandFactory;
        let mut command = Cli::command();
        // Builds the generated `--help` arguments too.
        command.build();
        for &(short, long) in FLAGS_BEFORE_CLAP {
            let mut declared = command
                .get_subcommands()
                .flat_map(|kind| kind.get_arguments())
                .filter(|arg| arg.get_long() == Some(long));
            assert!(
                declared.all(|arg| arg.get_short() == short),
                "--{long} lost or changed its short letter {short:?}"
            );
            assert!(
                command
                    .get_subcommands()
                    .any(|kind| kind.get_arguments().any(|a| a.get_long() == Some(long))),
                "--{long} is gone"
            );
        }
    }

    #[test]
    fn catchup_flags() {
        let args = run(&["catchup", "--fill-duration", "30", "--skip-fill"]);
        assert_eq!(args.fill_duration_s, 30);
        assert!(args.skip_fill);
        assert_eq!(args.broker_pid, None);
        assert_eq!(args.backlog_bytes, BACKLOG_DEFAULT_BYTES);
        assert!(!args.warm_pass);
        assert_eq!(
            run(&["catchup", "--broker-pid", "4242"]).broker_pid,
            Some(4242)
        );
        assert!(run(&["catchup", "--warm-pass", "true"]).warm_pass);
    }

    #[test]
    fn later_flags_override_earlier_ones_and_case_is_ignored_where_it_was() {
        let args = run(&[
            "consumer",
            "-d",
            "5",
            "--duration=7",
            "-f",
            "sql92",
            "--serialize",
            "JSON",
        ]);
        assert_eq!(args.duration_s, 7);
        assert_eq!(args.filter_type, FilterType::Sql92);
        assert_eq!(args.serialize, SerializeType::Json);
        let args = run(&[
            "consumer", "-q", "1_000", "--from", "first", "--commit", "FALSE",
        ]);
        assert_eq!(
            (args.count, args.from, args.commit),
            (1000, StartFrom::First, false)
        );
    }

    #[test]
    fn echo_server_and_summary() {
        let echo = run(&["echo-server"]);
        assert_eq!(echo.duration_s, DURATION_MAX_S);
        assert_eq!(echo.echo_queues, ECHO_QUEUES_DEFAULT);
        assert_eq!(echo.listen, "127.0.0.1:0");
        assert_eq!(run(&["echo-server", "-d", "3"]).duration_s, 3);
        assert_eq!(
            echo.echo_threads,
            crate::echo_workers::echo_threads_default()
        );
        assert_eq!(run(&["echo-server", "--echo-threads", "3"]).echo_threads, 3);
        assert_eq!(
            echo.echo_model,
            crate::echo_workers::EchoModel::PerConnection
        );
        assert_eq!(
            run(&["echo-server", "--echo-model", "pool"]).echo_model,
            crate::echo_workers::EchoModel::Pool
        );
        let summary = run(&["summary", "a.json", "--format", "tsv", "b.json"]);
        assert!(summary.tsv);
        assert_eq!(
            summary.inputs,
            [PathBuf::from("a.json"), PathBuf::from("b.json")]
        );
        assert!(!run(&["summary"]).tsv);
    }

    #[test]
    fn defaults_follow_rocketmq_and_kind() {
        let producer = run(&["producer"]);
        assert_eq!(producer.threads, 64);
        assert_eq!(producer.body_size_bytes, 128);
        assert_eq!(producer.topic, "BenchmarkTest");
        assert_eq!(producer.rate, 0);
        assert_eq!(run(&["producer", "-y", "true"]).threads, 1);
        assert_eq!(run(&["e2e"]).rate, 10_000);
        assert_eq!(run(&["e2e", "-r", "0"]).rate, 0);
        assert_eq!(run(&["consumer"]).count, 0);
        assert_eq!(
            run(&["e2e", "-t", "X", "--topics", "3"]).topic_names(),
            ["X_0", "X_1", "X_2"]
        );
    }

    /// The command lines scripts/bench.sh, bench-compare.sh, bench-transfer.sh and profile.sh
    /// run (with their default settings).
    #[test]
    fn the_scripts_command_lines_parse() {
        let shared = "-n 127.0.0.1:9876 --serialize rocketmq --report /tmp/W.json --label W";
        let catchup = "catchup -n 127.0.0.1:9876 -t XferM --topics 64 --queues 1 -s 4096";
        for line in [
            format!("producer -t BenchW1 -s 128 -w 64 -d 20 {shared}"),
            format!("e2e -t BenchW3 -s 1024 -r 10000 -w 32 -d 20 {shared}"),
            format!(
                "catchup -t BenchW4 -s 1024 -y true -c 2 --backlog-bytes 8589934592 \
                 --fill-duration 300 -d 60 --warm-pass true {shared}"
            ),
            format!("e2e -t BenchW5 --topics 256 --queues 8 -s 1024 -r 0 -w 32 -d 20 {shared}"),
            "echo-server --listen 127.0.0.1:4567 -d 600 --echo-queues 8".to_owned(),
            "summary --format tsv /tmp/W1.json".to_owned(),
            format!(
                "{catchup} -y true --inflight 256 --backlog-bytes 1073741824 --fill-duration 600 \
                 -d 600 --pull-batch 32 --progress false --report /tmp/f.json --svg /dev/null"
            ),
            format!(
                "{catchup} --skip-fill --broker-pid 1234 -d 600 --pull-batch 32 --progress false \
                 --label many-4096-auto-r1 --report /tmp/r.json --svg /dev/null"
            ),
        ] {
            let argv: Vec<&str> = line.split_whitespace().collect();
            assert!(
                matches!(parse(argv.iter().copied()), Ok(Parsed::Run(_))),
                "{line}: {:?}",
                parse(argv.iter().copied()).err()
            );
        }
    }

    #[test]
    fn bounds_are_enforced_and_errors_name_the_flag() {
        for (argv, needle) in [
            (
                &["producer", "-d", "601"][..],
                "'--duration <SECONDS>': 601 is outside 1..=600",
            ),
            (&["producer", "-c", "1025"], "--connections"),
            (
                &["producer", "-s", "0"],
                "'--size <BYTES>': 0 is outside 1..=4194304",
            ),
            (
                &["producer", "-w", "x"],
                "'x' for '--threads <N>': not a non-negative integer",
            ),
            (
                &["producer", "-k", "yes"],
                "'yes' for '--keys <BOOL>': not true or false",
            ),
            (&["producer", "--bogus", "1"], "--bogus"),
            (&["producer", "-t", "bad topic"], "--topic"),
            (&["producer", "stray"], "'stray'"),
            (&["nokind"], "nokind"),
            (&["producer", "-n"], "--namesrv"),
            (&["catchup", "--skip-fill=yes"], "--skip-fill"),
            (&["catchup", "--broker-pid", "0"], "--broker-pid"),
            (&["catchup", "--broker-pid", "abc"], "--broker-pid"),
            (
                &["catchup", "--broker-pid", "4194305"],
                "4194305 is outside 1..=4194304",
            ),
            (&["consumer", "--broker-pid", "1"], "--broker-pid"),
            (&["summary", "--format", "xml"], "--format"),
        ] {
            let error = parse(argv.iter().copied()).expect_err(&format!("{argv:?} should fail"));
            assert_eq!(error.exit_code(), 2, "{argv:?}");
            assert!(error.to_string().contains(needle), "{argv:?}: {error}");
        }
        let help = parse(["producer", "--help"]).expect_err("help is clap's");
        assert_eq!(help.kind(), clap::error::ErrorKind::DisplayHelp);
        // Each kind's help lists only its own flags.
        assert!(!help.to_string().contains("--backlog-bytes"));
        assert!(matches!(parse(Vec::<String>::new()), Ok(Parsed::Help)));
    }
}
