//! Offset-commit benchmark (issue 4): commits per second of the sharded
//! `ConsumerOffsetManager` versus a single `RwLock<HashMap<String, HashMap<i32, i64>>>` keyed
//! `topic@group` (the shape of Java's `offsetTable` behind one lock), same workload, same run.
//!
//! Run: `cargo bench --bench offsets`. Knobs: `RINGMQ_BENCH_SCALE` (multiplies every timed run,
//! default 1), `RINGMQ_BENCH_REPEATS` (default 3). Default total time is about 15 s.
//!
//! Fairness: both tables are filled with every key before timing (steady state, no inserts),
//! and the baseline builds its `topic@group` key in a reused buffer, so neither side allocates
//! per commit; the only difference is the locking and the map layout.

#[path = "common.rs"]
mod common;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Barrier, RwLock};
use std::time::{Duration, Instant};

use common::{grouped, median, Rng, Table};
use ringmq::broker::consumer_offset_manager::ConsumerOffsetManager;

/// Seconds of one timed run (times `RINGMQ_BENCH_SCALE`).
const RUN_S: f64 = 0.6;
/// Commits between looks at the stop flag.
const COMMITS_PER_CHECK: usize = 256;

/// The baseline: one lock over `topic@group` → queueId → offset.
#[derive(Default)]
struct SingleLockTable {
    table: RwLock<HashMap<String, HashMap<i32, i64>>>,
}

impl SingleLockTable {
    fn commit_offset(&self, key_buf: &mut String, group: &str, topic: &str, queue: i32, off: i64) {
        key_buf.clear();
        key_buf.push_str(topic);
        key_buf.push('@');
        key_buf.push_str(group);
        let mut table = self.table.write().unwrap_or_else(|p| p.into_inner());
        match table.get_mut(key_buf.as_str()) {
            Some(queues) => {
                queues.insert(queue, off);
            }
            None => {
                table.entry(key_buf.clone()).or_default().insert(queue, off);
            }
        }
    }
}

/// One workload: the (group, topic, queue) keys the committing threads pick from at random.
struct Workload {
    name: String,
    keys: Vec<(String, String, i32)>,
    /// Each queue is committed by one thread only, as in RocketMQ's clustering mode, where
    /// rebalancing gives every queue to exactly one consumer of the group.
    queue_per_thread: bool,
}

impl Workload {
    fn new(topics: usize, groups_per_topic: usize, queues: i32, queue_per_thread: bool) -> Self {
        let mut keys = Vec::new();
        for t in 0..topics {
            for g in 0..groups_per_topic {
                for q in 0..queues {
                    keys.push((
                        format!("consumer_group_{t}_{g}"),
                        format!("BenchTopic_{t}"),
                        q,
                    ));
                }
            }
        }
        Workload {
            name: format!(
                "{topics} topics x {groups_per_topic} groups x {queues} queues = {} keys{}",
                keys.len(),
                if queue_per_thread {
                    ", each queue committed by one thread"
                } else {
                    ""
                }
            ),
            keys,
            queue_per_thread,
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Impl {
    Sharded,
    SingleRwLock,
}

/// Commits from `threads` threads for `duration`; returns commits per second.
fn run(
    which: Impl,
    sharded: &Arc<ConsumerOffsetManager>,
    single: &Arc<SingleLockTable>,
    workload: &Arc<Workload>,
    threads: usize,
    duration: Duration,
) -> f64 {
    let stop = Arc::new(AtomicBool::new(false));
    let start = Arc::new(Barrier::new(threads + 1));
    let handles: Vec<_> = (0..threads)
        .map(|t| {
            let (sharded, single, workload) = (sharded.clone(), single.clone(), workload.clone());
            let (stop, start) = (stop.clone(), start.clone());
            std::thread::spawn(move || {
                let mut rng = Rng::new(0x5EED + t as u64 * 7919);
                // The keys this thread commits: all, or the queues it owns.
                let mine: Vec<&(String, String, i32)> = workload
                    .keys
                    .iter()
                    .filter(|k| !workload.queue_per_thread || k.2 as usize % threads == t)
                    .collect();
                assert!(!mine.is_empty(), "more threads than queues to own");
                let mut key_buf = String::new();
                let mut commits = 0u64;
                start.wait();
                while !stop.load(Ordering::Relaxed) {
                    for _ in 0..COMMITS_PER_CHECK {
                        let (group, topic, queue) = mine[rng.below(mine.len())];
                        commits += 1;
                        let offset = commits as i64;
                        match which {
                            Impl::Sharded => sharded.commit_offset(group, topic, *queue, offset),
                            Impl::SingleRwLock => {
                                single.commit_offset(&mut key_buf, group, topic, *queue, offset)
                            }
                        }
                    }
                }
                commits
            })
        })
        .collect();
    start.wait();
    let started = Instant::now();
    std::thread::sleep(duration);
    stop.store(true, Ordering::Relaxed);
    let commits: u64 = handles
        .into_iter()
        .map(|h| h.join().expect("commit thread"))
        .sum();
    commits as f64 / started.elapsed().as_secs_f64()
}

fn main() {
    println!(
        "# ringmq offset-commit bench\n\n{}\n",
        common::machine_facts()
    );
    let repeats = common::repeats();
    let duration = common::run_duration(RUN_S);
    let tmp = tempfile::tempdir().expect("temp dir");
    let workloads = [
        // Many groups x queues: the workload.
        Workload::new(100, 10, 16, false),
        // One busy group on one topic: both threads commit every queue (true sharing).
        Workload::new(1, 1, 16, false),
        // The same group as consumers use it: each queue is owned by one thread.
        Workload::new(1, 1, 16, true),
    ];
    println!(
        "{repeats} repeats per cell, interleaved; {duration:?} per run; keys picked uniformly at \
         random; every key committed once before timing\n"
    );
    let mut table = Table::new(&[
        "workload",
        "threads",
        "table commits/s (median)",
        "single RwLock commits/s (median)",
        "table / RwLock (median of per-repeat ratios)",
        "table best",
        "RwLock best",
    ]);
    for workload in workloads {
        let workload = Arc::new(workload);
        let sharded = Arc::new(ConsumerOffsetManager::new(tmp.path()));
        let single = Arc::new(SingleLockTable::default());
        let mut key_buf = String::new();
        for (group, topic, queue) in &workload.keys {
            sharded.commit_offset(group, topic, *queue, 0);
            single.commit_offset(&mut key_buf, group, topic, *queue, 0);
        }
        for threads in [1usize, 2] {
            let (mut s, mut b, mut ratio) = (Vec::new(), Vec::new(), Vec::new());
            for _ in 0..repeats {
                let sr = run(
                    Impl::Sharded,
                    &sharded,
                    &single,
                    &workload,
                    threads,
                    duration,
                );
                let br = run(
                    Impl::SingleRwLock,
                    &sharded,
                    &single,
                    &workload,
                    threads,
                    duration,
                );
                s.push(sr);
                b.push(br);
                ratio.push(sr / br);
            }
            table.row(vec![
                workload.name.clone(),
                threads.to_string(),
                grouped(median(&s)),
                grouped(median(&b)),
                format!("{:.2}x", median(&ratio)),
                grouped(common::max(&s)),
                grouped(common::max(&b)),
            ]);
        }
    }
    println!("## Offset commits per second\n");
    table.print();
}
