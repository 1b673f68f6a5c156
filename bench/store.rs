//! Store benchmark (issue 2 item 4): append throughput with async and sync flush, and read
//! throughput through `get_message` with the io_uring engine versus the pread engine.
//!
//! Run: `cargo bench --bench store`. Knobs: `RINGMQ_BENCH_SCALE` (multiplies every timed run,
//! default 1), `RINGMQ_BENCH_REPEATS` (default 3), `RINGMQ_BENCH_DIR` (where the temporary
//! stores live, default the system temp dir), `RINGMQ_BENCH_SYNC_THREADS` (comma list, default
//! `1,4,16,64`), `RINGMQ_BENCH_MESSAGE_INDEX` (1 = build the message index as the broker does
//! by default, 0 = off; default 1). Default total time is about 40 s.
//!
//! fsyncs per append: this binary defines `fdatasync` and `fsync` itself, counting each call and
//! forwarding it to the kernel with `syscall(2)`. The executable's definitions take precedence
//! over libc's in symbol resolution, so every `File::sync_data`/`sync_all` of the store comes
//! through here (the bench checks this before using the counts).

#[path = "common.rs"]
mod common;

use std::net::SocketAddr;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use common::{grouped, median, Table};
use ringmq::store::format::encode_properties;
use ringmq::store::io::{IoConfig, IoEngine, IoMode};
use ringmq::store::{
    AcceptAll, FlushPolicy, GetMessageRequest, MessageStore, MessageToStore, StoreConfig,
};

static FDATASYNC_CALLS: AtomicU64 = AtomicU64::new(0);
static FSYNC_CALLS: AtomicU64 = AtomicU64::new(0);

/// Counts, then does the real `fdatasync(2)`; errors come back exactly as from libc (-1, errno).
#[no_mangle]
pub extern "C" fn fdatasync(fd: libc::c_int) -> libc::c_int {
    FDATASYNC_CALLS.fetch_add(1, Ordering::Relaxed);
    // SAFETY: a plain system call on a caller-provided descriptor, as libc's wrapper does.
    unsafe { libc::syscall(libc::SYS_fdatasync, libc::c_long::from(fd)) as libc::c_int }
}

/// Counts, then does the real `fsync(2)`.
#[no_mangle]
pub extern "C" fn fsync(fd: libc::c_int) -> libc::c_int {
    FSYNC_CALLS.fetch_add(1, Ordering::Relaxed);
    // SAFETY: as above.
    unsafe { libc::syscall(libc::SYS_fsync, libc::c_long::from(fd)) as libc::c_int }
}

fn sync_calls() -> u64 {
    FDATASYNC_CALLS.load(Ordering::Relaxed) + FSYNC_CALLS.load(Ordering::Relaxed)
}

/// Body sizes measured.
const BODY_SIZES_BYTES: [usize; 2] = [128, 1024];
/// Seconds of one timed append run (times `RINGMQ_BENCH_SCALE`).
const APPEND_RUN_S: f64 = 0.8;
/// Seconds of one timed read run.
const READ_RUN_S: f64 = 0.8;
/// Bytes of CommitLog written per body size before the read runs (hot in the page cache).
const READ_DATA_BYTES: usize = 64 * 1024 * 1024;
/// Messages per `get_message`: RocketMQ's default `maxMsgNums` of a push consumer.
const PULL_BATCH_MSGS: i32 = 32;
/// Queues the append runs spread over (a topic's default queue count).
const APPEND_QUEUES: i32 = 8;

fn message(topic: &str, queue_id: i32, body: &Bytes, born_host: SocketAddr) -> MessageToStore {
    MessageToStore {
        topic: topic.to_string(),
        queue_id,
        flag: 0,
        body: body.clone(),
        properties: encode_properties([("TAGS", "TagA"), ("KEYS", "k1")]),
        sys_flag: 0,
        born_timestamp_ms: 1_700_000_000_000,
        born_host,
        reconsume_times: 0,
        prepared_transaction_offset: 0,
    }
}

fn open_store(dir: &Path, policy: FlushPolicy, mode: IoMode) -> Arc<MessageStore> {
    let mut cfg = StoreConfig::with_root(dir);
    cfg.flush_policy = policy;
    cfg.message_index_enable = common::env_num("RINGMQ_BENCH_MESSAGE_INDEX", 1u8) != 0;
    let io = IoEngine::new(IoConfig {
        mode,
        ..IoConfig::default()
    })
    .expect("io engine (io_uring must be available for the uring rows)");
    MessageStore::open(cfg, Arc::new(io)).expect("open store")
}

struct AppendRun {
    msgs: u64,
    body_bytes: u64,
    log_bytes: u64,
    elapsed_s: f64,
    sync_calls: u64,
    /// CommitLog bytes the index thread had still to index when the appenders stopped.
    index_behind_bytes: i64,
    /// Time the index thread then took to catch up.
    index_catch_up_ms: f64,
}

/// Longest wait for the index thread to catch up after a run.
const INDEX_CATCH_UP_MAX: Duration = Duration::from_secs(60);

/// Appends from `threads` threads for `duration`; with sync flush each append waits for its
/// fsync before the thread appends again (what a SYNC_FLUSH broker does per send).
fn run_append(
    store: &Arc<MessageStore>,
    body_size_bytes: usize,
    threads: usize,
    duration: Duration,
) -> AppendRun {
    let sync = store.config().flush_policy == FlushPolicy::Sync;
    let stop = Arc::new(AtomicBool::new(false));
    let born_host: SocketAddr = "127.0.0.1:40000".parse().expect("literal address");
    let body = Bytes::from(vec![b'x'; body_size_bytes]);
    let topic = format!("Append{body_size_bytes}");
    let sync_before = sync_calls();
    let started = Instant::now();
    let handles: Vec<_> = (0..threads)
        .map(|t| {
            let store = store.clone();
            let stop = stop.clone();
            let body = body.clone();
            let topic = topic.clone();
            std::thread::spawn(move || {
                let rt = tokio::runtime::Builder::new_current_thread()
                    .enable_time()
                    .build()
                    .expect("runtime");
                let (mut msgs, mut log_bytes) = (0u64, 0u64);
                let mut queue_id = t as i32 % APPEND_QUEUES;
                while !stop.load(Ordering::Relaxed) {
                    let msg = message(&topic, queue_id, &body, born_host);
                    let put = store.put_message(&msg).expect("put_message");
                    if sync {
                        rt.block_on(store.wait_flushed(put.end_phy_offset()))
                            .expect("wait_flushed");
                    }
                    msgs += 1;
                    log_bytes += put.wrote_bytes as u64;
                    queue_id = (queue_id + 1) % APPEND_QUEUES;
                }
                (msgs, log_bytes)
            })
        })
        .collect();
    std::thread::sleep(duration);
    stop.store(true, Ordering::Relaxed);
    let (mut msgs, mut log_bytes) = (0, 0);
    for h in handles {
        let (m, b) = h.join().expect("append thread");
        msgs += m;
        log_bytes += b;
    }
    let elapsed_s = started.elapsed().as_secs_f64();
    let sync_calls = sync_calls() - sync_before;
    let (index_behind_bytes, index_catch_up_ms) = wait_index_caught_up(store);
    AppendRun {
        msgs,
        body_bytes: msgs * body_size_bytes as u64,
        log_bytes,
        elapsed_s,
        sync_calls,
        index_behind_bytes,
        index_catch_up_ms,
    }
}

/// The index lag when the appenders stopped, and how long the index thread took to clear it
/// (so the next run starts with no backlog).
fn wait_index_caught_up(store: &MessageStore) -> (i64, f64) {
    let behind = store.dispatch_behind_bytes();
    let started = Instant::now();
    while store.dispatch_behind_bytes() > 0 {
        assert!(
            started.elapsed() < INDEX_CATCH_UP_MAX,
            "index still behind after {INDEX_CATCH_UP_MAX:?}"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
    (behind, started.elapsed().as_secs_f64() * 1e3)
}

struct ReadRun {
    msgs: u64,
    bytes: u64,
    elapsed_s: f64,
    cpu_s: f64,
}

/// Pulls the queue front to back (wrapping) in batches of [`PULL_BATCH_MSGS`] for `duration`.
fn run_read(store: &MessageStore, topic: &str, duration: Duration) -> ReadRun {
    let max_offset = store.max_offset_in_queue(topic, 0);
    let (mut msgs, mut bytes, mut offset) = (0u64, 0u64, 0i64);
    let started = Instant::now();
    let cpu_started = common::thread_cpu_s();
    while started.elapsed() < duration {
        // Check the clock every 64 pulls only; a pull is a few microseconds.
        for _ in 0..64 {
            let r = store
                .get_message(&GetMessageRequest {
                    group: "bench",
                    topic,
                    queue_id: 0,
                    queue_offset: offset,
                    max_msg_nums: PULL_BATCH_MSGS,
                    filter: &AcceptAll,
                })
                .expect("get_message");
            assert!(r.message_count > 0, "read past the data: {:?}", r.status);
            msgs += r.message_count as u64;
            bytes += r.buffer_total_size as u64;
            offset = if r.next_begin_offset >= max_offset {
                0
            } else {
                r.next_begin_offset
            };
        }
    }
    ReadRun {
        msgs,
        bytes,
        elapsed_s: started.elapsed().as_secs_f64(),
        cpu_s: common::thread_cpu_s() - cpu_started,
    }
}

fn mb(bytes: u64, elapsed_s: f64) -> f64 {
    bytes as f64 / 1e6 / elapsed_s
}

fn main() {
    // `cargo bench` passes `--bench`; nothing else is accepted.
    println!("# ringmq store bench\n\n{}\n", common::machine_facts());
    let repeats = common::repeats();
    let base = std::env::var_os("RINGMQ_BENCH_DIR").map_or_else(std::env::temp_dir, Into::into);
    let tmp = tempfile::Builder::new()
        .prefix("ringmq-store-bench")
        .tempdir_in(&base)
        .expect("temp dir");
    println!(
        "store dirs under {} ; {repeats} repeats per cell, interleaved\n",
        tmp.path().display()
    );
    bench_appends(tmp.path(), repeats, &sync_thread_counts());
    bench_reads(&tmp.path().join("read"), repeats);
}

/// `RINGMQ_BENCH_SYNC_THREADS`: the appending thread counts of the sync-flush cells.
fn sync_thread_counts() -> Vec<usize> {
    std::env::var("RINGMQ_BENCH_SYNC_THREADS")
        .unwrap_or_else(|_| "1,4,16,64".to_string())
        .split(',')
        .map(|t| {
            t.trim()
                .parse()
                .expect("RINGMQ_BENCH_SYNC_THREADS: comma list")
        })
        .collect()
}

/// One append cell: flush policy, body size, appending threads.
type AppendCell = (FlushPolicy, usize, usize);

/// Append throughput: async flush with one thread and sync flush with each of `sync_threads`,
/// for every body size, `repeats` times interleaved.
fn bench_appends(dir: &Path, repeats: usize, sync_threads: &[usize]) {
    let async_store = open_store(&dir.join("async"), FlushPolicy::Async, IoMode::Uring);
    let sync_store = open_store(&dir.join("sync"), FlushPolicy::Sync, IoMode::Uring);
    // Check the fsync counter sees the store's fsyncs before relying on it.
    let before = sync_calls();
    run_append(&async_store, 128, 1, Duration::from_millis(20));
    async_store.flush().expect("flush");
    let counting = sync_calls() > before;
    if !counting {
        println!("(fsync counting unavailable on this build: the column shows n/a)\n");
    }

    let append_duration = common::run_duration(APPEND_RUN_S);
    let mut cells: Vec<AppendCell> = Vec::new();
    for &size in &BODY_SIZES_BYTES {
        cells.push((FlushPolicy::Async, size, 1));
        for &t in sync_threads {
            cells.push((FlushPolicy::Sync, size, t));
        }
    }
    let mut results: Vec<Vec<AppendRun>> = cells.iter().map(|_| Vec::new()).collect();
    for _ in 0..repeats {
        for (i, &(policy, size, threads)) in cells.iter().enumerate() {
            let store = match policy {
                FlushPolicy::Async => &async_store,
                FlushPolicy::Sync => &sync_store,
            };
            results[i].push(run_append(store, size, threads, append_duration));
            // Write back what the run left dirty so it does not slow the next cell's fsyncs.
            store.flush().expect("flush");
        }
    }
    println!("## Append throughput ({append_duration:?} per run, MB = 10^6 bytes)\n");
    append_table(&cells, &results, counting).print();
    async_store.shutdown().expect("shutdown");
    sync_store.shutdown().expect("shutdown");
}

fn append_table(cells: &[AppendCell], results: &[Vec<AppendRun>], counting: bool) -> Table {
    let mut table = Table::new(&[
        "flush",
        "body",
        "appending threads",
        "msgs/s (median)",
        "msgs/s (best)",
        "body MB/s",
        "CommitLog MB/s",
        "fsync calls per append",
        "index behind at stop, KB (median)",
        "index catch-up ms (median)",
    ]);
    for (cell, runs) in cells.iter().zip(results) {
        let rates: Vec<f64> = runs.iter().map(|r| r.msgs as f64 / r.elapsed_s).collect();
        let body: Vec<f64> = runs.iter().map(|r| mb(r.body_bytes, r.elapsed_s)).collect();
        let log: Vec<f64> = runs.iter().map(|r| mb(r.log_bytes, r.elapsed_s)).collect();
        let per_append: Vec<f64> = runs
            .iter()
            .map(|r| r.sync_calls as f64 / r.msgs.max(1) as f64)
            .collect();
        let behind: Vec<f64> = runs
            .iter()
            .map(|r| r.index_behind_bytes as f64 / 1e3)
            .collect();
        let catch_up: Vec<f64> = runs.iter().map(|r| r.index_catch_up_ms).collect();
        table.row(vec![
            format!("{:?}", cell.0).to_lowercase(),
            format!("{} B", cell.1),
            cell.2.to_string(),
            grouped(median(&rates)),
            grouped(common::max(&rates)),
            format!("{:.1}", median(&body)),
            format!("{:.1}", median(&log)),
            if counting {
                format!("{:.3}", median(&per_append))
            } else {
                "n/a".to_string()
            },
            format!("{:.1}", median(&behind)),
            format!("{:.1}", median(&catch_up)),
        ]);
    }
    table
}

/// The read engines compared, pread last (the baseline of the ratio column).
const READ_ENGINES: [IoMode; 2] = [IoMode::Uring, IoMode::Pread];

/// Read throughput of each engine over [`READ_DATA_BYTES`] of CommitLog per body size,
/// `repeats` times interleaved.
fn bench_reads(read_dir: &Path, repeats: usize) {
    fill_read_data(read_dir);
    let read_duration = common::run_duration(READ_RUN_S);
    let mut reads: Vec<Vec<Vec<ReadRun>>> = BODY_SIZES_BYTES
        .iter()
        .map(|_| READ_ENGINES.iter().map(|_| Vec::new()).collect())
        .collect();
    for _ in 0..repeats {
        for (e, &mode) in READ_ENGINES.iter().enumerate() {
            let store = open_store(read_dir, FlushPolicy::Async, mode);
            for (s, &size) in BODY_SIZES_BYTES.iter().enumerate() {
                let topic = format!("Read{size}");
                // One untimed pass keeps the page cache and the thread's ring warm.
                run_read(&store, &topic, Duration::from_millis(50));
                reads[s][e].push(run_read(&store, &topic, read_duration));
            }
            store.shutdown().expect("shutdown");
        }
    }
    let table = read_table(&reads);
    println!(
        "## Read throughput via get_message ({PULL_BATCH_MSGS} msgs per pull, one thread, hot \
         page cache, {} MiB of CommitLog per size, {read_duration:?} per run)\n",
        READ_DATA_BYTES >> 20
    );
    table.print();
}

/// Writes [`READ_DATA_BYTES`] of records per body size, topic `Read<size>`, queue 0.
fn fill_read_data(read_dir: &Path) {
    let store = open_store(read_dir, FlushPolicy::Async, IoMode::Uring);
    let born_host: SocketAddr = "127.0.0.1:40000".parse().expect("literal address");
    for &size in &BODY_SIZES_BYTES {
        let body = Bytes::from(vec![b'r'; size]);
        let topic = format!("Read{size}");
        let mut written = 0usize;
        while written < READ_DATA_BYTES {
            let put = store
                .put_message(&message(&topic, 0, &body, born_host))
                .expect("put");
            written += put.wrote_bytes as usize;
        }
    }
    store.shutdown().expect("shutdown");
}

/// `reads[size][engine]`: the runs of one cell.
fn read_table(reads: &[Vec<Vec<ReadRun>>]) -> Table {
    let mut table = Table::new(&[
        "body",
        "engine",
        "msgs/s (median)",
        "msgs/s (best)",
        "MB/s",
        "reader CPU ns/msg",
        "msgs/s vs pread",
    ]);
    for (s, &size) in BODY_SIZES_BYTES.iter().enumerate() {
        let rate = |e: usize| -> Vec<f64> {
            reads[s][e]
                .iter()
                .map(|r| r.msgs as f64 / r.elapsed_s)
                .collect()
        };
        let pread_median = median(&rate(1));
        for (e, mode) in READ_ENGINES.iter().enumerate() {
            let runs = &reads[s][e];
            let rates = rate(e);
            let mbs: Vec<f64> = runs.iter().map(|r| mb(r.bytes, r.elapsed_s)).collect();
            let cpu: Vec<f64> = runs.iter().map(|r| r.cpu_s * 1e9 / r.msgs as f64).collect();
            table.row(vec![
                format!("{size} B"),
                format!("{mode:?}").to_lowercase(),
                grouped(median(&rates)),
                grouped(common::max(&rates)),
                format!("{:.1}", median(&mbs)),
                format!("{:.0}", median(&cpu)),
                format!("{:.2}x", median(&rates) / pread_median),
            ]);
        }
    }
    table
}
