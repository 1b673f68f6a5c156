//! Pull-response transfer benchmark: copy vs zero-copy vs auto.
//!
//! For each body size and backlog layout it starts the release broker once to fill a backlog,
//! then restarts it over the same data once per transfer mode and pulls the backlog as fast as
//! possible (one connection per pulled queue, one pull in flight each, default pull limits),
//! repeating passes until `--min-bytes` and `--min-secs` are reached. It reports throughput and
//! the broker's CPU seconds per GiB served (user and system, from /proc/<pid>/stat, all threads
//! including io_uring workers).
//!
//! Layouts: `single` = one topic, each pulled queue written in one run, so a pull's records are
//! contiguous in the CommitLog; `many` = `--topics` topics written round robin, so every
//! record of a pulled queue is separate.
//!
//! ```text
//! cargo build --release --bin ringmq --example transfer_bench
//! target/release/examples/transfer_bench [--bin target/release/ringmq] [--sizes 128,4096,65536,1048576]
//!     [--layouts single,many] [--modes copy,zerocopy,auto] [--queue-bytes 16777216]
//!     [--min-bytes 268435456] [--min-secs 2] [--topics 8] [--reps 3] [--extra-env K=V,...]
//! ```
//!
//! Each point is measured `--reps` times, the modes taking turns (copy, zerocopy, auto, copy,
//! ...) so a burst of load from elsewhere on the host hits all of them. The table shows the
//! median and the best throughput, and the least CPU per GiB of the runs (the run least
//! disturbed by other processes; contention only ever adds cache misses and wake-ups).
//!
//! ```text
//! ```

use std::io::{BufRead, BufReader};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use ringmq::broker::remoting_client::BlockingClient;
use ringmq::remoting::codes::{request_code as req, response_code as rc};
use ringmq::remoting::command::RemotingCommand;
use ringmq::remoting::headers::{PullMessageRequestHeader, SendMessageRequestHeader};
use ringmq::store::format;

/// Pulled queues (one client connection each).
const QUEUES: i32 = 2;
/// Sends in flight while filling.
const FILL_PIPELINE: usize = 128;
/// Keeps the fill of small messages short (the many-topic layout writes `topics` times more).
const FILL_MESSAGES_MAX_PER_QUEUE: usize = 32768;

struct Args {
    bin: PathBuf,
    sizes: Vec<usize>,
    layouts: Vec<String>,
    modes: Vec<String>,
    queue_bytes: usize,
    min_bytes: u64,
    min_secs: f64,
    topics: usize,
    reps: usize,
    extra_env: Vec<(String, String)>,
}

fn parse_args() -> Args {
    let mut a = Args {
        bin: PathBuf::from("target/release/ringmq"),
        sizes: vec![128, 4096, 65536, 1 << 20],
        layouts: vec!["single".into(), "many".into()],
        modes: vec!["copy".into(), "zerocopy".into(), "auto".into()],
        queue_bytes: 16 << 20,
        min_bytes: 256 << 20,
        min_secs: 2.0,
        topics: 8,
        reps: 3,
        extra_env: Vec::new(),
    };
    let argv: Vec<String> = std::env::args().skip(1).collect();
    let mut i = 0;
    while i < argv.len() {
        let v = argv.get(i + 1).cloned().unwrap_or_default();
        let list = |v: &str| v.split(',').map(str::to_string).collect::<Vec<_>>();
        match argv[i].as_str() {
            "--bin" => a.bin = PathBuf::from(v),
            "--sizes" => a.sizes = list(&v).iter().map(|s| s.parse().expect("size")).collect(),
            "--layouts" => a.layouts = list(&v),
            "--modes" => a.modes = list(&v),
            "--queue-bytes" => a.queue_bytes = v.parse().expect("queue bytes"),
            "--min-bytes" => a.min_bytes = v.parse().expect("min bytes"),
            "--min-secs" => a.min_secs = v.parse().expect("min secs"),
            "--topics" => a.topics = v.parse().expect("topics"),
            "--reps" => a.reps = v.parse().expect("reps"),
            "--extra-env" => {
                a.extra_env = list(&v)
                    .into_iter()
                    .filter_map(|kv| kv.split_once('=').map(|(k, v)| (k.into(), v.into())))
                    .collect()
            }
            other => panic!("unknown argument {other}"),
        }
        i += 2;
    }
    a
}

struct Broker {
    child: Child,
    port: u16,
}

impl Broker {
    fn start(args: &Args, root: &Path, mode: &str) -> Broker {
        let port = free_port_pair();
        let mut cmd = Command::new(&args.bin);
        cmd.arg("broker")
            .env("RINGMQ_STORE_ROOT_DIR", root)
            .env("RINGMQ_BROKER_LISTEN_PORT", port.to_string())
            .env("RINGMQ_NAMESRV_LISTEN_PORT", free_port().to_string())
            .env(
                "RINGMQ_STORE_COMMIT_LOG_FILE_SIZE_BYTES",
                (256u64 << 20).to_string(),
            )
            .env("RINGMQ_TRANSFER_MODE", mode)
            .env("RINGMQ_LOG_LEVEL", "warn")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        for (k, v) in &args.extra_env {
            cmd.env(k, v);
        }
        let mut child = cmd
            .spawn()
            .expect("spawn the broker (build it with --release)");
        let stderr = child.stderr.take().expect("piped");
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut tx = Some(tx);
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if line.contains("ringmq broker listening") {
                    if let Some(tx) = tx.take() {
                        let _ = tx.send(());
                    }
                } else if !line.is_empty() {
                    eprintln!("broker: {line}");
                }
            }
        });
        rx.recv_timeout(Duration::from_secs(60))
            .expect("broker did not start");
        Broker { child, port }
    }

    fn client(&self) -> BlockingClient {
        BlockingClient::connect(&format!("127.0.0.1:{}", self.port), Duration::from_secs(60))
            .expect("connect")
    }

    /// (user, system) CPU seconds of the whole process so far.
    fn cpu_secs(&self) -> (f64, f64) {
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", self.child.id()))
            .expect("read /proc/<pid>/stat");
        // Fields after the command name (which is in parentheses and may contain spaces).
        let rest = &stat[stat.rfind(')').expect("stat format") + 2..];
        let fields: Vec<&str> = rest.split_whitespace().collect();
        // utime and stime are fields 14 and 15 of stat(5); `rest` starts at field 3.
        let tick = clock_ticks_per_sec();
        let utime: f64 = fields[11].parse::<u64>().expect("utime") as f64 / tick;
        let stime: f64 = fields[12].parse::<u64>().expect("stime") as f64 / tick;
        (utime, stime)
    }

    fn stop(mut self) {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(self.child.id() as i32),
            nix::sys::signal::Signal::SIGTERM,
        );
        let _ = self.child.wait();
    }
}

fn clock_ticks_per_sec() -> f64 {
    // SAFETY: sysconf has no memory effects.
    let t = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if t > 0 {
        t as f64
    } else {
        100.0
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("bind")
        .port()
}

fn free_port_pair() -> u16 {
    loop {
        let p = free_port();
        if p > 3 && TcpListener::bind(("127.0.0.1", p - 2)).is_ok() {
            return p;
        }
    }
}

fn send_request(topic: &str, queue_id: i32, body: Bytes) -> RemotingCommand {
    let mut cmd = RemotingCommand::request(req::SEND_MESSAGE_V2);
    SendMessageRequestHeader {
        producer_group: "bench-pg".into(),
        topic: topic.into(),
        default_topic: "TBW102".into(),
        default_topic_queue_nums: QUEUES,
        queue_id,
        sys_flag: 0,
        born_timestamp: 1_700_000_000_000,
        flag: 0,
        properties: Some(format::encode_properties([("TAGS", "bench")])),
        reconsume_times: Some(0),
        unit_mode: false,
        batch: false,
        max_reconsume_times: None,
        broker_name: None,
    }
    .encode(&mut cmd);
    cmd.with_body(body)
}

fn pull_request(topic: &str, queue_id: i32, offset: i64) -> RemotingCommand {
    let mut cmd = RemotingCommand::request(req::PULL_MESSAGE);
    PullMessageRequestHeader {
        consumer_group: "bench-cg".into(),
        topic: topic.into(),
        queue_id,
        queue_offset: offset,
        max_msg_nums: 32,
        sys_flag: 0x4,
        commit_offset: 0,
        suspend_timeout_millis: 0,
        subscription: Some("*".into()),
        sub_version: 0,
        expression_type: Some("TAG".into()),
        max_msg_bytes: None,
        request_source: None,
        proxy_froward_client_id: None,
    }
    .encode(&mut cmd);
    cmd
}

/// Sends `sends` with up to FILL_PIPELINE in flight.
fn pipelined_sends(client: &mut BlockingClient, sends: impl Iterator<Item = RemotingCommand>) {
    let mut in_flight = 0usize;
    for (i, mut cmd) in sends.enumerate() {
        cmd.opaque = i as i32;
        client.send(&cmd).expect("send");
        in_flight += 1;
        if in_flight == FILL_PIPELINE {
            let r = client.read_command().expect("send response");
            assert_eq!(r.code, rc::SUCCESS, "{r:?}");
            in_flight -= 1;
        }
    }
    while in_flight > 0 {
        let r = client.read_command().expect("send response");
        assert_eq!(r.code, rc::SUCCESS, "{r:?}");
        in_flight -= 1;
    }
}

/// Writes the backlog; returns the messages per pulled queue.
fn fill(broker: &Broker, layout: &str, size: usize, queue_bytes: usize, topics: usize) -> i64 {
    let per_queue = (queue_bytes / size).clamp(64, FILL_MESSAGES_MAX_PER_QUEUE);
    let body = Bytes::from(vec![b'x'; size]);
    let mut c = broker.client();
    match layout {
        "single" => {
            for q in 0..QUEUES {
                pipelined_sends(
                    &mut c,
                    (0..per_queue).map(|_| send_request("Bench0", q, body.clone())),
                );
            }
        }
        _ => {
            let sends = (0..per_queue).flat_map(|_| {
                let body = body.clone();
                (0..QUEUES).flat_map(move |q| {
                    let body = body.clone();
                    (0..topics).map(move |t| send_request(&format!("Bench{t}"), q, body.clone()))
                })
            });
            pipelined_sends(&mut c, sends);
        }
    }
    per_queue as i64
}

/// Pulls queue `queue_id` of Bench0 from 0 to `max`, repeatedly, until `stop` says so.
/// Returns (bytes of pull bodies, pulls).
fn pull_loop(
    client: &mut BlockingClient,
    queue_id: i32,
    max: i64,
    deadline: &dyn Fn(u64) -> bool,
) -> (u64, u64) {
    let (mut bytes, mut pulls) = (0u64, 0u64);
    loop {
        let mut offset = 0;
        while offset < max {
            let r = client
                .invoke(pull_request("Bench0", queue_id, offset))
                .expect("pull");
            assert_eq!(r.code, rc::SUCCESS, "{r:?}");
            bytes += r.body.len() as u64;
            pulls += 1;
            offset = r.ext_i64("nextBeginOffset").expect("nextBeginOffset");
        }
        if deadline(bytes) {
            return (bytes, pulls);
        }
    }
}

struct Point {
    mib_per_s: f64,
    user_s_per_gib: f64,
    sys_s_per_gib: f64,
    avg_pull_bytes: f64,
}

fn measure(args: &Args, root: &Path, mode: &str, per_queue: i64) -> Point {
    let broker = Broker::start(args, root, mode);
    // Warm-up pass (page cache, connections, rings).
    let mut clients: Vec<BlockingClient> = (0..QUEUES).map(|_| broker.client()).collect();
    for (q, c) in clients.iter_mut().enumerate() {
        pull_loop(c, q as i32, per_queue, &|_| true);
    }
    let cpu0 = broker.cpu_secs();
    let start = Instant::now();
    let min_bytes_per_queue = args.min_bytes / QUEUES as u64;
    let min_secs = args.min_secs;
    let results: Vec<(u64, u64)> = std::thread::scope(|scope| {
        let handles: Vec<_> = clients
            .iter_mut()
            .enumerate()
            .map(|(q, c)| {
                scope.spawn(move || {
                    pull_loop(c, q as i32, per_queue, &|bytes| {
                        bytes >= min_bytes_per_queue && start.elapsed().as_secs_f64() >= min_secs
                    })
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("puller"))
            .collect()
    });
    let secs = start.elapsed().as_secs_f64();
    let cpu1 = broker.cpu_secs();
    drop(clients);
    broker.stop();
    let bytes: u64 = results.iter().map(|r| r.0).sum();
    let pulls: u64 = results.iter().map(|r| r.1).sum();
    let gib = bytes as f64 / (1u64 << 30) as f64;
    Point {
        mib_per_s: bytes as f64 / (1 << 20) as f64 / secs,
        user_s_per_gib: (cpu1.0 - cpu0.0) / gib,
        sys_s_per_gib: (cpu1.1 - cpu0.1) / gib,
        avg_pull_bytes: bytes as f64 / pulls as f64,
    }
}

fn main() {
    let args = parse_args();
    println!(
        "| layout | body | mode | MiB/s median | MiB/s best | CPU user s/GiB | CPU sys s/GiB | CPU total s/GiB | avg pull body |"
    );
    println!("| --- | --- | --- | --- | --- | --- | --- | --- | --- |");
    for layout in &args.layouts {
        for &size in &args.sizes {
            let tmp = tempfile::tempdir().expect("tempdir");
            let root = tmp.path().join("store");
            let filler = Broker::start(&args, &root, "copy");
            let per_queue = fill(&filler, layout, size, args.queue_bytes, args.topics);
            filler.stop();
            let mut runs: Vec<Vec<Point>> = args.modes.iter().map(|_| Vec::new()).collect();
            for _ in 0..args.reps {
                for (m, mode) in args.modes.iter().enumerate() {
                    runs[m].push(measure(&args, &root, mode, per_queue));
                }
            }
            for (m, mode) in args.modes.iter().enumerate() {
                let runs = &runs[m];
                let median = median(runs);
                let best_mib_per_s = runs.iter().map(|p| p.mib_per_s).fold(0.0, f64::max);
                // The run with the least total CPU per GiB.
                let least = runs
                    .iter()
                    .min_by(|a, b| {
                        (a.user_s_per_gib + a.sys_s_per_gib)
                            .total_cmp(&(b.user_s_per_gib + b.sys_s_per_gib))
                    })
                    .expect("at least one run");
                println!(
                    "| {layout} | {} | {mode} | {:.0} | {:.0} | {:.3} | {:.3} | {:.3} | {:.0} KiB |",
                    human(size),
                    median.mib_per_s,
                    best_mib_per_s,
                    least.user_s_per_gib,
                    least.sys_s_per_gib,
                    least.user_s_per_gib + least.sys_s_per_gib,
                    median.avg_pull_bytes / 1024.0
                );
            }
        }
    }
}

/// Column-wise median.
fn median(points: &[Point]) -> Point {
    let mid = |f: &dyn Fn(&Point) -> f64| {
        let mut v: Vec<f64> = points.iter().map(f).collect();
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    Point {
        mib_per_s: mid(&|p| p.mib_per_s),
        user_s_per_gib: mid(&|p| p.user_s_per_gib),
        sys_s_per_gib: mid(&|p| p.sys_s_per_gib),
        avg_pull_bytes: mid(&|p| p.avg_pull_bytes),
    }
}

fn human(size: usize) -> String {
    if size >= 1 << 20 && size.is_multiple_of(1 << 20) {
        format!("{} MiB", size >> 20)
    } else if size >= 1024 && size.is_multiple_of(1024) {
        format!("{} KiB", size >> 10)
    } else {
        format!("{size} B")
    }
}
