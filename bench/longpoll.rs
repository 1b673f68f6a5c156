//! Long-polling benchmark (issue 4): wake-up latency of parked pulls through the real pipeline,
//! and memory per parked pull.
//!
//! Pipeline measured: `MessageStore::put_message` → `ArrivalNotifier` → `HoldTable` →
//! pull-wake thread → `pull::execute` with `PullExecution::Woken` (re-executed pull, store
//! read) → `ConnectionSender` →
//! the connection's outbound queue. An arrival that wakes at most
//! `WAKE_ON_CONNECTION_THREAD_PULLS_MAX` pulls (the `spread` layout) is not re-executed on the
//! wake thread but queued as a deferred frame: the bench thread that finds it re-executes it,
//! as the connection's writer would, and the latency includes that. The controller is built by `startup::build_controller` (what
//! `start_broker` runs, without sockets); connections are `ConnectionContext::detached`, whose
//! outbound queue is the receiver the bench reads. Pulls are parked by sending real
//! PULL_MESSAGE requests through `pull::pull_message`, the handler the dispatcher calls.
//!
//! Latency = from just before `put_message` is called to the moment the bench thread finds the
//! response in the connection's queue (it polls the queue with `try_recv`, calling
//! `sched_yield` between polls so it never keeps the pull-wake thread off a CPU).
//!
//! Layouts:
//! - `spread`: every parked pull waits on its own queue (topics of 1000 queues); an append wakes
//!   one pull while all the others stay parked. Appends go to 64 "hot" queues chosen across the
//!   table (their ConsumeQueue files exist before timing, so no file creation is timed).
//! - `one queue`: every parked pull waits on the same queue (as consumers of one queue, spread
//!   over `RINGMQ_BENCH_LONGPOLL_GROUPS` consumer groups, default 1); an append wakes all N, and every woken pull's latency is recorded. The bench polls the
//!   connections round-robin, so each latency carries up to one sweep of polling delay.
//!
//! Memory per parked pull: a child process (this binary re-run with
//! `RINGMQ_BENCH_LONGPOLL_MEMORY_CHILD=<layout>:<n>`) builds a broker and the connections, then parks
//! `n` pulls; it reports the RSS delta (`/proc/self/statm`) and the delta of live heap bytes (a
//! counting global allocator, switched on only in the child), each divided by `n`.
//!
//! Run: `cargo bench --bench longpoll`. Knobs: `RINGMQ_BENCH_REPEATS` (default 3),
//! `RINGMQ_BENCH_SCALE` (multiplies the samples, default 1), `RINGMQ_BENCH_LONGPOLL_SIZES` (comma list
//! of parked-pull counts, default `1,1000,100000`), `RINGMQ_BENCH_LONGPOLL_PULLS_PER_CONNECTION`
//! (default 100), `RINGMQ_BENCH_LONGPOLL_LAYOUTS` (comma list of `spread`, `one`; default both),
//! `RINGMQ_BENCH_LONGPOLL_GROUPS` (consumer groups of the one-queue layout, default 1). Default
//! total time is about 30 s.

#[path = "common.rs"]
mod common;

use std::alloc::{GlobalAlloc, Layout, System};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use bytes::Bytes;
use common::{median, Rng, Table};
use hdrhistogram::Histogram;
use ringmq::broker::controller::BrokerController;
use ringmq::broker::longpoll::pull_request::ParkedPullRequest;
use ringmq::broker::processor::pull::{self, pull_sys_flag};
use ringmq::broker::processor::{Handled, RequestContext};
use ringmq::broker::startup::{build_controller, start_pull_wake};
use ringmq::common::StopFlag;
use ringmq::config::Config;
use ringmq::net::{ConnectionContext, Outbound};
use ringmq::remoting::codes::{request_code, response_code};
use ringmq::remoting::command::RemotingCommand;
use ringmq::remoting::frame::{decode_frame, FRAME_SIZE_MAX_BYTES};
use ringmq::remoting::headers::PullMessageRequestHeader;
use ringmq::store::format::encode_properties;
use ringmq::store::MessageToStore;
use tokio::sync::mpsc;

// ---- Counting allocator (on only in the memory child).

static COUNTING: AtomicBool = AtomicBool::new(false);
static LIVE_HEAP_BYTES: AtomicI64 = AtomicI64::new(0);

struct CountingAlloc;

// SAFETY: forwards every call to the system allocator unchanged; only counts sizes.
unsafe impl GlobalAlloc for CountingAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if COUNTING.load(Ordering::Relaxed) {
            LIVE_HEAP_BYTES.fetch_add(layout.size() as i64, Ordering::Relaxed);
        }
        // SAFETY: same contract as ours.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        if COUNTING.load(Ordering::Relaxed) {
            LIVE_HEAP_BYTES.fetch_sub(layout.size() as i64, Ordering::Relaxed);
        }
        // SAFETY: same contract as ours.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if COUNTING.load(Ordering::Relaxed) {
            LIVE_HEAP_BYTES.fetch_add(new_size as i64 - layout.size() as i64, Ordering::Relaxed);
        }
        // SAFETY: same contract as ours.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: CountingAlloc = CountingAlloc;

// ---- Constants.

/// Queues per topic in the spread layout.
const QUEUES_PER_TOPIC: usize = 1000;
/// Queues that receive appends in the spread layout.
const HOT_QUEUES: usize = 64;
/// Long-poll hold time of every parked pull: longer than any run, so nothing expires.
const HOLD_TIME_MS: u64 = 3_600_000;
/// Latency samples per repeat in the spread layout (times `RINGMQ_BENCH_SCALE`).
const SPREAD_SAMPLES: f64 = 5_000.0;
/// Woken-pull latencies aimed for per repeat in the one-queue layout (rounds = this / n, at
/// least 1, at most [`ONE_QUEUE_ROUNDS_MAX`]).
const ONE_QUEUE_LATENCIES: f64 = 10_000.0;
const ONE_QUEUE_ROUNDS_MAX: usize = 1_000;
/// Largest latency the histograms hold (60 s, in ns).
const HIST_LATENCY_MAX_NS: u64 = 60_000_000_000;
/// A response not seen after this long means the pipeline lost it: the bench fails.
const RESPONSE_TIMEOUT: Duration = Duration::from_secs(30);
const GROUP: &str = "bench_longpoll_group";

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Shape {
    Spread,
    OneQueue,
}

impl Shape {
    fn name(self) -> &'static str {
        match self {
            Shape::Spread => "spread",
            Shape::OneQueue => "one queue",
        }
    }

    fn parse(text: &str) -> Shape {
        match text {
            "spread" => Shape::Spread,
            "one" => Shape::OneQueue,
            other => panic!("unknown layout {other}"),
        }
    }

    fn arg(self) -> &'static str {
        match self {
            Shape::Spread => "spread",
            Shape::OneQueue => "one",
        }
    }
}

// ---- A broker without sockets.

struct Bench {
    ctrl: Arc<BrokerController>,
    stop: StopFlag,
    wake_threads: Vec<JoinHandle<()>>,
    _dir: tempfile::TempDir,
    conns: Vec<Conn>,
    next_opaque: i32,
    born_host: SocketAddr,
    /// Consumer groups the one-queue layout spreads its pulls over.
    groups: Vec<String>,
}

/// `RINGMQ_LONGPOLL_WAKE_THREADS` for the brokers the next cell builds (set before each cell).
static WAKE_THREADS: AtomicU64 = AtomicU64::new(1);
/// Consumer groups of the one-queue layout (`RINGMQ_BENCH_LONGPOLL_GROUPS`): pull `i` belongs
/// to group `i % GROUPS`. With 1, every woken pull asks the same thing; with more, pulls of
/// different groups share at most the store read.
static GROUPS: AtomicUsize = AtomicUsize::new(1);

struct Conn {
    ctx: ConnectionContext,
    rx: mpsc::Receiver<Outbound>,
}

impl Bench {
    fn new(parked: usize, pulls_per_connection: usize) -> Bench {
        let dir = tempfile::tempdir().expect("temp dir");
        let mut config = Config::default();
        config.store.root_dir = dir.path().join("store");
        config.longpoll.suspend_timeout_max_ms = HOLD_TIME_MS;
        config.longpoll.parked_pulls_max = (parked as u64 + 1024).max(200_000);
        config.longpoll.parked_pulls_max_per_connection = pulls_per_connection as u64;
        // One response per parked pull at most can be queued on a connection at once.
        config.server.write_queue_max = pulls_per_connection as u64 + 16;
        let write_queue_max = config.server.write_queue_max as usize;
        config.longpoll.wake_threads = WAKE_THREADS.load(Ordering::Relaxed);
        let parts = build_controller(config).expect("build controller");
        let stop = StopFlag::new();
        let wake_threads =
            start_pull_wake(&parts.ctrl, parts.wake_rx, &stop).expect("pull-wake threads");
        let addr: SocketAddr = "127.0.0.1:10911".parse().expect("literal address");
        let conn_count = parked.div_ceil(pulls_per_connection).max(1);
        let conns = (0..conn_count)
            .map(|i| {
                let remote = SocketAddr::new(addr.ip(), 20_000 + (i % 40_000) as u16);
                let (ctx, rx) =
                    ConnectionContext::detached(i as u64, remote, addr, write_queue_max);
                Conn { ctx, rx }
            })
            .collect();
        Bench {
            ctrl: parts.ctrl,
            stop,
            wake_threads,
            _dir: dir,
            conns,
            next_opaque: 1,
            born_host: "127.0.0.1:40000".parse().expect("literal address"),
            groups: (0..GROUPS.load(Ordering::Relaxed).max(1))
                .map(|g| format!("{GROUP}_{g}"))
                .collect(),
        }
    }

    fn create_topic(&self, topic: &str, queues: usize) {
        self.ctrl
            .topics
            .create_topic_if_absent(topic, queues as i32, 6, 0)
            .expect("create topic");
    }

    /// Sends a PULL_MESSAGE for (topic, queue, offset) on connection `conn`; it must park.
    /// Returns its opaque.
    fn park(&mut self, conn: usize, topic: &str, queue_id: i32, offset: i64) -> i32 {
        self.park_as(0, conn, topic, queue_id, offset)
    }

    /// [`Bench::park`] as consumer group number `group` (modulo the groups of the run).
    fn park_as(
        &mut self,
        group: usize,
        conn: usize,
        topic: &str,
        queue_id: i32,
        offset: i64,
    ) -> i32 {
        let opaque = self.next_opaque;
        self.next_opaque = self.next_opaque.wrapping_add(1);
        let header = PullMessageRequestHeader {
            consumer_group: self.groups[group % self.groups.len()].clone(),
            topic: topic.to_string(),
            queue_id,
            queue_offset: offset,
            max_msg_nums: 32,
            sys_flag: pull_sys_flag::SUSPEND | pull_sys_flag::SUBSCRIPTION,
            commit_offset: 0,
            suspend_timeout_millis: HOLD_TIME_MS as i64,
            subscription: Some("*".to_string()),
            sub_version: 0,
            expression_type: Some("TAG".to_string()),
            max_msg_bytes: None,
            request_source: None,
            proxy_froward_client_id: None,
        };
        let mut request = RemotingCommand::request(request_code::PULL_MESSAGE).with_opaque(opaque);
        header.encode(&mut request);
        let cx = RequestContext {
            ctrl: &self.ctrl,
            conn: &self.conns[conn].ctx,
        };
        match pull::pull_message(&cx, &request) {
            Ok(Handled::Parked) => opaque,
            Ok(Handled::Response(r)) => panic!(
                "pull on {topic}:{queue_id}@{offset} was answered, not parked: code {} {:?}",
                r.code, r.remark
            ),
            Ok(Handled::Queued | Handled::NoAnswer) => {
                panic!("pull on {topic}:{queue_id}@{offset} was answered")
            }
            Err(e) => panic!("pull on {topic}:{queue_id}@{offset} refused: {e}"),
        }
    }

    fn append(&self, topic: &str, queue_id: i32) {
        let msg = MessageToStore {
            topic: topic.to_string(),
            queue_id,
            flag: 0,
            body: Bytes::from_static(&[b'm'; 128]),
            properties: encode_properties([("TAGS", "TagA")]),
            sys_flag: 0,
            born_timestamp_ms: 1_700_000_000_000,
            born_host: self.born_host,
            reconsume_times: 0,
            prepared_transaction_offset: 0,
        };
        self.ctrl.store.put_message(&msg).expect("put_message");
    }

    fn close(mut self) {
        self.stop.raise();
        for t in self.wake_threads.drain(..) {
            t.join().expect("pull-wake thread");
        }
        self.ctrl.store.shutdown().expect("store shutdown");
    }
}

/// Spins on `rx` until a frame arrives; checks it answers `opaque` with SUCCESS.
fn wait_response(rx: &mut mpsc::Receiver<Outbound>, opaque: i32) {
    let started = Instant::now();
    loop {
        match rx.try_recv() {
            Ok(frame) => {
                check_response(frame, opaque, true);
                return;
            }
            Err(mpsc::error::TryRecvError::Empty) => {
                assert!(
                    started.elapsed() < RESPONSE_TIMEOUT,
                    "no response for opaque {opaque}"
                );
                // Give the CPU to the pipeline's threads if they wait for it (2 cores).
                std::thread::yield_now();
            }
            Err(e) => panic!("connection queue broke: {e}"),
        }
    }
}

/// Checks a woken pull's answer (SUCCESS, and for `opaque` ≥ 0 that opaque); returns its opaque.
/// Pre-encoded frames are decoded in full when `full` is set, else only their code and opaque
/// are read (so the bench thread's checking does not take the CPU the wake thread needs).
fn check_response(frame: Outbound, opaque: i32, full: bool) -> i32 {
    let (code, got_opaque, remark) = match frame {
        Outbound::Command(cmd) => (cmd.code, cmd.opaque, cmd.remark),
        // Woken pulls that asked the same thing share one encoded answer, each with its own
        // opaque.
        Outbound::Encoded(bytes) if full => {
            let mut buf = bytes::BytesMut::from(&bytes[..]);
            match decode_frame(&mut buf, FRAME_SIZE_MAX_BYTES) {
                Ok(Some(cmd)) if buf.is_empty() => (cmd.code, cmd.opaque, cmd.remark),
                other => panic!("woken pull answered with a bad frame: {other:?}"),
            }
        }
        Outbound::Encoded(bytes) => {
            let (code, opaque) = code_and_opaque(&bytes);
            (code, opaque, None)
        }
        // The bench's `*` pulls of small records are below the zero-copy threshold.
        Outbound::File(_) => panic!("unexpected zero-copy frame"),
        // An arrival that woke few pulls hands each to its connection's thread; this thread
        // plays that connection's writer and re-executes it.
        Outbound::Deferred(deferred) => {
            let produced = deferred.produce().expect("a woken pull is answered");
            return check_response(produced, opaque, full);
        }
    };
    assert_eq!(
        code,
        response_code::SUCCESS,
        "woken pull answered {code} {remark:?}"
    );
    if opaque >= 0 {
        assert_eq!(got_opaque, opaque, "response to the wrong pull");
    }
    got_opaque
}

/// The code and opaque of an encoded frame, read in place: a JSON header starts with its
/// `"code"` and has one top-level `"opaque"`; a binary one has them at fixed places.
fn code_and_opaque(frame: &[u8]) -> (i32, i32) {
    let header_len =
        (u32::from_be_bytes(frame[4..8].try_into().expect("4 bytes")) & 0xFF_FFFF) as usize;
    let header = &frame[8..8 + header_len];
    if frame[4] == 1 {
        let code = i16::from_be_bytes([header[0], header[1]]);
        let opaque = i32::from_be_bytes(header[5..9].try_into().expect("4 bytes"));
        return (i32::from(code), opaque);
    }
    let number_after = |key: &[u8], from_end: bool| -> i32 {
        let mut at = header.windows(key.len());
        let pos = if from_end {
            at.rposition(|w| w == key)
        } else {
            at.position(|w| w == key)
        }
        .expect("key in the JSON header")
            + key.len();
        let end = header[pos..]
            .iter()
            .position(|&b| b != b'-' && !b.is_ascii_digit())
            .map_or(header.len(), |n| pos + n);
        std::str::from_utf8(&header[pos..end])
            .ok()
            .and_then(|t| t.parse().ok())
            .expect("a number")
    };
    (
        number_after(b"{\"code\":", false),
        number_after(b"\"opaque\":", true),
    )
}

/// (ns on a CPU, ns waiting on a run queue) of the pull-wake threads together, from
/// `/proc/self/task/<tid>/schedstat`; `None` when the kernel does not provide it.
fn pull_wake_schedstat() -> Option<(u64, u64)> {
    let mut total = None;
    for entry in std::fs::read_dir("/proc/self/task").ok()?.flatten() {
        let comm = std::fs::read_to_string(entry.path().join("comm")).unwrap_or_default();
        if comm.trim_end().starts_with("ringmq-wake-") {
            let stat = std::fs::read_to_string(entry.path().join("schedstat")).ok()?;
            let mut fields = stat.split_whitespace().map(|f| f.parse::<u64>().ok());
            let (cpu, wait) = (fields.next()??, fields.next()??);
            let (c, w) = total.unwrap_or((0, 0));
            total = Some((c + cpu, w + wait));
        }
    }
    total
}

/// Per woken pull: (CPU ns, run-queue wait ns) of the pull-wake thread between two readings.
fn per_wake(before: Option<(u64, u64)>, woken: usize) -> (f64, f64) {
    match (before, pull_wake_schedstat()) {
        (Some((c0, w0)), Some((c1, w1))) if woken > 0 => (
            (c1 - c0) as f64 / woken as f64,
            (w1 - w0) as f64 / woken as f64,
        ),
        _ => (f64::NAN, f64::NAN),
    }
}

fn histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, HIST_LATENCY_MAX_NS, 3).expect("histogram bounds")
}

fn spread_topic(i: usize) -> (String, i32) {
    (
        format!("LpSpread{}", i / QUEUES_PER_TOPIC),
        (i % QUEUES_PER_TOPIC) as i32,
    )
}

/// One repeat's figures.
struct Repeat {
    latency: Histogram<u64>,
    put: Histogram<u64>,
    /// Per append: time until the last woken pull's response was queued.
    last: Histogram<u64>,
    /// Wake threads' CPU ns per woken pull (re-execution + send + its own wake-up).
    wake_cpu_ns: f64,
    /// Wake threads' ns spent runnable but waiting for a CPU, per woken pull.
    wake_wait_ns: f64,
}

impl Repeat {
    /// Nothing recorded yet; the wake-thread figures are unknown until measured.
    fn empty() -> Repeat {
        Repeat {
            latency: histogram(),
            put: histogram(),
            last: histogram(),
            wake_cpu_ns: f64::NAN,
            wake_wait_ns: f64::NAN,
        }
    }
}

fn run_spread(parked: usize, pulls_per_connection: usize, samples: usize) -> Repeat {
    let mut bench = Bench::new(parked, pulls_per_connection);
    for t in 0..parked.div_ceil(QUEUES_PER_TOPIC) {
        let (topic, _) = spread_topic(t * QUEUES_PER_TOPIC);
        bench.create_topic(&topic, QUEUES_PER_TOPIC);
    }
    // Hot pulls spread over the whole index range (so over topics and connections).
    let hot_count = HOT_QUEUES.min(parked);
    let hot: Vec<usize> = (0..hot_count).map(|j| j * (parked / hot_count)).collect();
    let mut hot_offset = vec![0i64; parked];
    for &i in &hot {
        let (topic, q) = spread_topic(i);
        bench.append(&topic, q);
        hot_offset[i] = 1;
    }
    let mut opaque = vec![0i32; parked];
    for (i, slot) in opaque.iter_mut().enumerate() {
        let (topic, q) = spread_topic(i);
        *slot = bench.park(i / pulls_per_connection, &topic, q, hot_offset[i]);
    }
    assert_eq!(bench.ctrl.pull_hold.parked_pulls(), parked);
    let mut rep = Repeat::empty();
    let mut rng = Rng::new(0xB0BA + parked as u64);
    let sched_before = pull_wake_schedstat();
    for _ in 0..samples {
        let i = hot[rng.below(hot.len())];
        let (topic, q) = spread_topic(i);
        let conn = i / pulls_per_connection;
        let started = Instant::now();
        bench.append(&topic, q);
        let put_ns = started.elapsed().as_nanos() as u64;
        wait_response(&mut bench.conns[conn].rx, opaque[i]);
        let ns = started.elapsed().as_nanos() as u64;
        rep.latency.saturating_record(ns);
        rep.last.saturating_record(ns);
        rep.put.saturating_record(put_ns);
        hot_offset[i] += 1;
        opaque[i] = bench.park(conn, &topic, q, hot_offset[i]);
        debug_assert_eq!(bench.ctrl.pull_hold.parked_pulls(), parked);
    }
    (rep.wake_cpu_ns, rep.wake_wait_ns) = per_wake(sched_before, samples);
    bench.close();
    rep
}

fn run_one_queue(parked: usize, pulls_per_connection: usize, rounds: usize) -> Repeat {
    const TOPIC: &str = "LpOneQueue";
    let mut bench = Bench::new(parked, pulls_per_connection);
    bench.create_topic(TOPIC, 1);
    // The queue's ConsumeQueue file exists before timing.
    bench.append(TOPIC, 0);
    let mut offset = 1i64;
    let mut rep = Repeat::empty();
    let (mut cpu, mut wait) = (Vec::new(), Vec::new());
    let conn_count = bench.conns.len();
    let mut pending = vec![0usize; conn_count];
    // Per connection: sum of the opaques parked minus those answered (each answer must carry
    // its own pull's opaque, shared encodings included).
    let mut opaque_sums = vec![0i64; conn_count];
    for _ in 0..rounds {
        for i in 0..parked {
            let conn = i / pulls_per_connection;
            opaque_sums[conn] += i64::from(bench.park_as(i, conn, TOPIC, 0, offset));
        }
        assert_eq!(bench.ctrl.pull_hold.parked_pulls(), parked);
        for (c, p) in pending.iter_mut().enumerate() {
            *p = (parked - c * pulls_per_connection).min(pulls_per_connection);
        }
        let mut remaining = parked;
        let mut first_answer = vec![true; conn_count];
        let sched_before = pull_wake_schedstat();
        let started = Instant::now();
        bench.append(TOPIC, 0);
        rep.put
            .saturating_record(started.elapsed().as_nanos() as u64);
        while remaining > 0 {
            let mut got_any = false;
            for (((conn, left), sum), first) in bench
                .conns
                .iter_mut()
                .zip(pending.iter_mut())
                .zip(opaque_sums.iter_mut())
                .zip(first_answer.iter_mut())
            {
                if *left == 0 {
                    continue;
                }
                while let Ok(frame) = conn.rx.try_recv() {
                    let ns = started.elapsed().as_nanos() as u64;
                    // Each connection's first answer is decoded in full, the rest read in place.
                    *sum -= i64::from(check_response(frame, -1, std::mem::take(first)));
                    rep.latency.saturating_record(ns);
                    *left -= 1;
                    remaining -= 1;
                    got_any = true;
                }
            }
            if !got_any {
                assert!(
                    started.elapsed() < RESPONSE_TIMEOUT,
                    "{remaining} woken pulls never answered"
                );
                std::thread::yield_now();
            }
        }
        let last_ns = started.elapsed().as_nanos() as u64;
        assert!(
            opaque_sums.iter().all(|&s| s == 0),
            "an answer carried another pull's opaque"
        );
        rep.last.saturating_record(last_ns);
        let (c, w) = per_wake(sched_before, parked);
        cpu.push(c);
        wait.push(w);
        offset += 1;
    }
    rep.wake_cpu_ns = median(&cpu);
    rep.wake_wait_ns = median(&wait);
    bench.close();
    rep
}

// ---- Memory child.

fn memory_child(spec: &str) {
    let (layout, n) = spec.split_once(':').expect("layout:n");
    let layout = Shape::parse(layout);
    let n: usize = n.parse().expect("pull count");
    let pulls_per_connection =
        common::env_num::<usize>("RINGMQ_BENCH_LONGPOLL_PULLS_PER_CONNECTION", 100);
    let mut bench = Bench::new(n, pulls_per_connection);
    match layout {
        Shape::Spread => {
            for t in 0..n.div_ceil(QUEUES_PER_TOPIC) {
                let (topic, _) = spread_topic(t * QUEUES_PER_TOPIC);
                bench.create_topic(&topic, QUEUES_PER_TOPIC);
            }
        }
        Shape::OneQueue => bench.create_topic("LpOneQueue", 1),
    }
    // Warm every per-thread and per-group cache with one pull, then take it out again.
    let (topic, q) = match layout {
        Shape::Spread => ("LpWarm".to_string(), 0),
        Shape::OneQueue => ("LpOneQueue".to_string(), 0),
    };
    bench.create_topic(&topic, 1);
    bench.park(0, &topic, q, 0);
    bench.append(&topic, q);
    wait_response(&mut bench.conns[0].rx, -1);
    let (topic, q) = ("LpOneQueue".to_string(), 0);
    std::thread::sleep(Duration::from_millis(100));
    COUNTING.store(true, Ordering::SeqCst);
    let heap_before = LIVE_HEAP_BYTES.load(Ordering::SeqCst);
    let rss_before = common::rss_bytes();
    for i in 0..n {
        match layout {
            Shape::Spread => {
                let (t, queue) = spread_topic(i);
                bench.park(i / pulls_per_connection, &t, queue, 0);
            }
            Shape::OneQueue => {
                // Offset 1: the warm-up message is at 0, so the pull waits for the next one.
                bench.park_as(i, i / pulls_per_connection, &topic, q, 1);
            }
        }
    }
    let rss_after = common::rss_bytes();
    let heap_after = LIVE_HEAP_BYTES.load(Ordering::SeqCst);
    COUNTING.store(false, Ordering::SeqCst);
    assert_eq!(bench.ctrl.pull_hold.parked_pulls(), n);
    println!(
        "MEMORY {} {} {}",
        n,
        rss_after as i64 - rss_before as i64,
        heap_after - heap_before
    );
    bench.close();
}

fn measure_memory(layout: Shape, n: usize) -> (f64, f64) {
    let exe = std::env::current_exe().expect("current exe");
    let out = std::process::Command::new(exe)
        .env(
            "RINGMQ_BENCH_LONGPOLL_MEMORY_CHILD",
            format!("{}:{n}", layout.arg()),
        )
        .output()
        .expect("run memory child");
    assert!(
        out.status.success(),
        "memory child failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text
        .lines()
        .find(|l| l.starts_with("MEMORY "))
        .expect("memory child output");
    let v: Vec<i64> = line
        .split_whitespace()
        .skip(1)
        .map(|x| x.parse().expect("number"))
        .collect();
    (v[1] as f64 / v[0] as f64, v[2] as f64 / v[0] as f64)
}

fn median_of(reps: &[Repeat], f: impl Fn(&Repeat) -> f64) -> f64 {
    median(&reps.iter().map(f).collect::<Vec<_>>())
}

fn us(ns: u64) -> String {
    format!("{:.1}", ns as f64 / 1000.0)
}

/// A comma list of numbers from the environment variable `var`, or from `default`.
fn comma_list<T: std::str::FromStr>(var: &str, default: &str) -> Vec<T> {
    std::env::var(var)
        .unwrap_or_else(|_| default.to_string())
        .split(',')
        .map(|s| {
            s.trim()
                .parse()
                .unwrap_or_else(|_| panic!("{var}: comma list of numbers"))
        })
        .collect()
}

/// The layouts to run (`RINGMQ_BENCH_LONGPOLL_LAYOUTS`, a comma list of `spread` and `one`;
/// default both).
fn layouts() -> Vec<Shape> {
    std::env::var("RINGMQ_BENCH_LONGPOLL_LAYOUTS")
        .unwrap_or_else(|_| "spread,one".to_string())
        .split(',')
        .map(|s| Shape::parse(s.trim()))
        .collect()
}

/// What every cell of the latency table shares.
struct Plan {
    repeats: usize,
    scale: f64,
    pulls_per_connection: usize,
}

/// `plan.repeats` repeats of one cell, each on a fresh broker.
fn run_cell(plan: &Plan, layout: Shape, parked: usize) -> Vec<Repeat> {
    let pulls_per_connection = plan.pulls_per_connection;
    (0..plan.repeats)
        .map(|_| match layout {
            Shape::Spread => {
                let samples = ((SPREAD_SAMPLES * plan.scale) as usize).max(10);
                run_spread(parked, pulls_per_connection, samples)
            }
            Shape::OneQueue => {
                let rounds = ((ONE_QUEUE_LATENCIES * plan.scale) as usize / parked)
                    .clamp(1, ONE_QUEUE_ROUNDS_MAX);
                run_one_queue(parked, pulls_per_connection, rounds)
            }
        })
        .collect()
}

const LATENCY_COLUMNS: [&str; 14] = [
    "layout",
    "wake threads",
    "parked pulls",
    "woken per append",
    "latencies per repeat",
    "p50 µs",
    "p99 µs",
    "p99.9 µs",
    "max µs",
    "best p99 µs",
    "put_message p50 µs",
    "last response per append, median µs",
    "pull-wake CPU µs per woken pull",
    "pull-wake run-queue wait µs per woken pull",
];

/// One row of the latency table: the medians over `reps`.
fn latency_row(layout: Shape, wake_threads: u64, parked: usize, reps: &[Repeat]) -> Vec<String> {
    let q = |f: &dyn Fn(&Repeat) -> u64| -> f64 {
        median(&reps.iter().map(|r| f(r) as f64).collect::<Vec<_>>())
    };
    let p99s: Vec<f64> = reps
        .iter()
        .map(|r| r.latency.value_at_quantile(0.99) as f64)
        .collect();
    vec![
        layout.name().to_string(),
        match wake_threads {
            0 => format!(
                "{} (one per core)",
                std::thread::available_parallelism().map_or(1, |n| n.get())
            ),
            w => w.to_string(),
        },
        parked.to_string(),
        match layout {
            Shape::Spread => "1".to_string(),
            Shape::OneQueue => parked.to_string(),
        },
        reps[0].latency.len().to_string(),
        us(q(&|r| r.latency.value_at_quantile(0.5)) as u64),
        us(q(&|r| r.latency.value_at_quantile(0.99)) as u64),
        us(q(&|r| r.latency.value_at_quantile(0.999)) as u64),
        us(q(&|r| r.latency.max()) as u64),
        us(common::min(&p99s) as u64),
        us(q(&|r| r.put.value_at_quantile(0.5)) as u64),
        us(q(&|r| r.last.value_at_quantile(0.5)) as u64),
        format!("{:.1}", median_of(reps, |r| r.wake_cpu_ns) / 1000.0),
        format!("{:.1}", median_of(reps, |r| r.wake_wait_ns) / 1000.0),
    ]
}

/// The wake-up latency table: every layout × wake-thread count × parked-pull count.
fn print_latency_table(plan: &Plan, sizes: &[usize], wake_thread_counts: &[u64]) {
    let mut table = Table::new(&LATENCY_COLUMNS);
    for (layout, &wake_threads) in layouts()
        .into_iter()
        .flat_map(|l| wake_thread_counts.iter().map(move |w| (l, w)))
    {
        WAKE_THREADS.store(wake_threads, Ordering::Relaxed);
        for &n in sizes {
            let reps = run_cell(plan, layout, n);
            table.row(latency_row(layout, wake_threads, n, &reps));
        }
    }
    println!("## Wake-up latency (append → response in the parked connection's queue)\n");
    println!(
        "Figures are the median over repeats of each repeat's percentile. The last two columns \
         come from the pull-wake threads' /proc schedstat (summed): CPU time they used, and time they were \
         runnable but waiting for a CPU (other processes on this shared machine), per woken \
         pull.\n"
    );
    table.print();
}

/// The memory table: `mem_n` parked pulls in each layout, `repeats` child processes each.
fn print_memory_table(repeats: usize, mem_n: usize) {
    let mut table = Table::new(&[
        "layout",
        "parked pulls",
        "RSS bytes per parked pull (median)",
        "live heap bytes per parked pull (median)",
    ]);
    for layout in layouts() {
        let (mut rss, mut heap) = (Vec::new(), Vec::new());
        for _ in 0..repeats {
            let (r, h) = measure_memory(layout, mem_n);
            rss.push(r);
            heap.push(h);
        }
        table.row(vec![
            layout.name().to_string(),
            mem_n.to_string(),
            format!("{:.0}", median(&rss)),
            format!("{:.0}", median(&heap)),
        ]);
    }
    println!(
        "## Memory per parked pull (child process; connections and topics exist before the \
         first measurement)\n"
    );
    table.print();
}

fn main() {
    GROUPS.store(
        common::env_num::<usize>("RINGMQ_BENCH_LONGPOLL_GROUPS", 1).max(1),
        Ordering::Relaxed,
    );
    if let Ok(spec) = std::env::var("RINGMQ_BENCH_LONGPOLL_MEMORY_CHILD") {
        memory_child(&spec);
        return;
    }
    println!(
        "# ringmq long-polling bench\n\n{}\n",
        common::machine_facts()
    );
    let plan = Plan {
        repeats: common::repeats(),
        scale: common::env_num("RINGMQ_BENCH_SCALE", 1.0),
        pulls_per_connection: common::env_num::<usize>(
            "RINGMQ_BENCH_LONGPOLL_PULLS_PER_CONNECTION",
            100,
        )
        .max(1),
    };
    let sizes: Vec<usize> = comma_list("RINGMQ_BENCH_LONGPOLL_SIZES", "1,1000,100000");
    println!(
        "{} repeats per cell (each on a fresh broker); {} parked pulls per \
         detached connection; {} consumer group(s) in the one-queue layout; \
         size_of::<ParkedPullRequest>() = {} bytes\n",
        plan.repeats,
        plan.pulls_per_connection,
        GROUPS.load(Ordering::Relaxed),
        std::mem::size_of::<ParkedPullRequest>()
    );
    // RINGMQ_BENCH_WAKE_THREADS: comma list of RINGMQ_LONGPOLL_WAKE_THREADS values to run
    // (0 = one per core); default the broker's default.
    let default_wake_threads = Config::default().longpoll.wake_threads.to_string();
    let wake_thread_counts: Vec<u64> =
        comma_list("RINGMQ_BENCH_WAKE_THREADS", &default_wake_threads);
    print_latency_table(&plan, &sizes, &wake_thread_counts);
    print_memory_table(plan.repeats, *sizes.iter().max().unwrap_or(&100_000));
}
