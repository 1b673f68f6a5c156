//! SIGKILL cycles under sync flush while producing and consuming (`scripts/crash-cycles.sh N`
//! runs N; the suite runs `CRASH_CYCLES_DEFAULT`).
//!
//! Each cycle: a producer sends to 4 queues and records every acknowledged message; a consumer
//! pulls from its committed offsets and commits as it goes; after a random 200-700 ms the
//! broker gets SIGKILL and is restarted. After every restart:
//! - every acknowledged message of every cycle is served at its queue offset with its body;
//! - no committed offset went backwards: each queue's offset is at least the one read after
//!   the previous restart, at least every commit acknowledged longer ago than a few offset
//!   flush intervals before the kill, and at most the queue's end.

mod common;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use common::Broker;
use ringmq::net::remoting_client::BlockingClient;
use ringmq::remoting::codes::{request_code as req, response_code as rc};
use ringmq::remoting::command::{RemotingCommand, SerializeType};
use ringmq::store::format::decode_record;

const CRASH_CYCLES_ENV: &str = "CRASH_CYCLES";
const CRASH_CYCLES_DEFAULT: u64 = 3;
const CRASH_CYCLES_MAX: u64 = 10_000;
const TOPIC: &str = "CrashCycles";
/// The group of `common::pull`'s requests (a pull auto-creates it).
const GROUP: &str = "cg";
const QUEUES: i32 = 4;
const OFFSET_FLUSH_INTERVAL_MS: u64 = 100;
/// A commit acknowledged this long before the kill must have reached consumerOffset.json.
const OFFSET_DURABLE_AFTER: Duration = Duration::from_millis(10 * OFFSET_FLUSH_INTERVAL_MS);
const PULL_BATCH: i32 = 32;

#[derive(Default)]
struct Shared {
    /// (queue, queue offset) → body of every acknowledged send.
    acked: Mutex<BTreeMap<(i32, i64), Vec<u8>>>,
    /// Per queue: the commits the broker acknowledged, with when.
    commits: Mutex<BTreeMap<i32, Vec<(Instant, i64)>>>,
}

fn connect(broker: &Broker) -> BlockingClient {
    BlockingClient::connect(&broker.addr(), Duration::from_secs(10)).expect("connect")
}

fn produce(mut c: BlockingClient, cycle: u64, shared: &Shared, stop: &AtomicBool) {
    let mut i = 0u64;
    while !stop.load(Ordering::Acquire) {
        let queue = (i % QUEUES as u64) as i32;
        let body = format!("c{cycle}-m{i}");
        let request = common::send_v2(
            TOPIC,
            queue,
            Bytes::from(body.clone()),
            &[("TAGS", "t")],
            0,
            SerializeType::Json,
        );
        let Ok(response) = c.invoke(request) else {
            return; // killed
        };
        assert_eq!(response.code, rc::SUCCESS, "{response:?}");
        let offset = response.ext_i64("queueOffset").unwrap();
        let old = shared
            .acked
            .lock()
            .unwrap()
            .insert((queue, offset), body.into_bytes());
        assert!(
            old.is_none(),
            "queue {queue} offset {offset} acknowledged twice"
        );
        i += 1;
    }
}

fn update_offset(queue: i32, offset: i64) -> RemotingCommand {
    RemotingCommand::request(req::UPDATE_CONSUMER_OFFSET)
        .with_ext("consumerGroup", GROUP)
        .with_ext("topic", TOPIC)
        .with_ext("queueId", queue)
        .with_ext("commitOffset", offset)
}

fn pull(queue: i32, offset: i64) -> RemotingCommand {
    common::pull(
        req::PULL_MESSAGE,
        TOPIC,
        queue,
        offset,
        PULL_BATCH,
        0,
        "*",
        0,
        SerializeType::Json,
    )
}

/// Consumes from `next` (per queue), committing after each batch.
fn consume(mut c: BlockingClient, mut next: [i64; 4], shared: &Shared, stop: &AtomicBool) {
    while !stop.load(Ordering::Acquire) {
        for queue in 0..QUEUES {
            let Ok(response) = c.invoke(pull(queue, next[queue as usize])) else {
                return;
            };
            if response.code != rc::SUCCESS {
                continue;
            }
            let mut at = 0;
            while at < response.body.len() {
                let record = decode_record(&response.body[at..]).unwrap();
                assert_eq!(
                    record.queue_offset, next[queue as usize],
                    "in order, no gap"
                );
                next[queue as usize] += 1;
                at += record.total_size as usize;
            }
            let Ok(committed) = c.invoke(update_offset(queue, next[queue as usize])) else {
                return;
            };
            assert_eq!(committed.code, rc::SUCCESS, "{committed:?}");
            let mut commits = shared.commits.lock().unwrap();
            let queue_commits = commits.entry(queue).or_default();
            queue_commits.push((Instant::now(), next[queue as usize]));
        }
    }
}

/// Every message of `queue` from 0, by queue offset.
fn read_queue(c: &mut BlockingClient, queue: i32) -> BTreeMap<i64, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut offset = 0;
    loop {
        let response = c.invoke(pull(queue, offset)).unwrap();
        if response.code != rc::SUCCESS {
            return out;
        }
        let mut at = 0;
        while at < response.body.len() {
            let record = decode_record(&response.body[at..]).unwrap();
            out.insert(record.queue_offset, record.body.to_vec());
            at += record.total_size as usize;
        }
        offset = response.ext_i64("nextBeginOffset").unwrap();
    }
}

fn query_offset(c: &mut BlockingClient, queue: i32) -> i64 {
    let response = c
        .invoke(
            RemotingCommand::request(req::QUERY_CONSUMER_OFFSET)
                .with_ext("consumerGroup", GROUP)
                .with_ext("topic", TOPIC)
                .with_ext("queueId", queue),
        )
        .unwrap();
    if response.code == rc::QUERY_NOT_FOUND {
        return 0;
    }
    assert_eq!(response.code, rc::SUCCESS, "{response:?}");
    response.ext_i64("offset").unwrap()
}

fn max_offset(c: &mut BlockingClient, queue: i32) -> i64 {
    let response = c
        .invoke(
            RemotingCommand::request(req::GET_MAX_OFFSET)
                .with_ext("topic", TOPIC)
                .with_ext("queueId", queue),
        )
        .unwrap();
    response.ext_i64("offset").unwrap()
}

/// Checks the two promises after a restart; returns the committed offsets.
fn verify(
    broker: &Broker,
    shared: &Shared,
    killed_at: Instant,
    previous: [i64; 4],
    cycle: u64,
) -> [i64; 4] {
    let mut c = connect(broker);
    let acked = shared.acked.lock().unwrap();
    let mut offsets = [0i64; 4];
    for queue in 0..QUEUES {
        let stored = read_queue(&mut c, queue);
        for ((q, offset), body) in acked.range((queue, 0)..=(queue, i64::MAX)) {
            assert_eq!(
                stored.get(offset),
                Some(body),
                "cycle {cycle}: acknowledged message at queue {q} offset {offset} lost"
            );
        }
        let committed = query_offset(&mut c, queue);
        let durable_floor = shared
            .commits
            .lock()
            .unwrap()
            .get(&queue)
            .into_iter()
            .flatten()
            .filter(|(at, _)| *at + OFFSET_DURABLE_AFTER < killed_at)
            .map(|(_, offset)| *offset)
            .max()
            .unwrap_or(0);
        let i = queue as usize;
        assert!(
            committed >= previous[i] && committed >= durable_floor,
            "cycle {cycle}: queue {queue} offset went back to {committed} (after the last \
             restart {}, durable commit {durable_floor})",
            previous[i]
        );
        assert!(committed <= max_offset(&mut c, queue));
        offsets[i] = committed;
    }
    offsets
}

/// A small deterministic generator for the kill delays (reproducible runs).
fn next_delay_ms(state: &mut u64) -> u64 {
    *state = state
        .wrapping_mul(6_364_136_223_846_793_005)
        .wrapping_add(1_442_695_040_888_963_407);
    200 + (*state >> 33) % 500
}

#[test]
fn sigkill_cycles_under_sync_flush_lose_no_acknowledged_message_and_no_offset() {
    let cycles = std::env::var(CRASH_CYCLES_ENV)
        .ok()
        .map(|v| v.parse::<u64>().expect("CRASH_CYCLES is a number"))
        .unwrap_or(CRASH_CYCLES_DEFAULT)
        .min(CRASH_CYCLES_MAX);
    let started = Instant::now();
    let mut broker = Broker::start(&[
        ("RINGMQ_STORE_FLUSH_POLICY", "sync"),
        (
            "RINGMQ_BROKER_FLUSH_CONSUMER_OFFSET_INTERVAL_MS",
            &OFFSET_FLUSH_INTERVAL_MS.to_string(),
        ),
        ("RINGMQ_STORE_COMMIT_LOG_FILE_SIZE_BYTES", "8388608"),
    ]);
    let shared = Arc::new(Shared::default());
    let mut offsets = [0i64; 4];
    let mut rng = 0x5eed_u64;
    for cycle in 0..cycles {
        let stop = Arc::new(AtomicBool::new(false));
        let producer = {
            let (c, shared, stop) = (connect(&broker), shared.clone(), stop.clone());
            std::thread::spawn(move || produce(c, cycle, &shared, &stop))
        };
        let consumer = {
            let (c, shared, stop) = (connect(&broker), shared.clone(), stop.clone());
            std::thread::spawn(move || consume(c, offsets, &shared, &stop))
        };
        std::thread::sleep(Duration::from_millis(next_delay_ms(&mut rng)));
        broker.kill_hard();
        let killed_at = Instant::now();
        stop.store(true, Ordering::Release);
        producer.join().unwrap();
        consumer.join().unwrap();
        broker.restart();
        offsets = verify(&broker, &shared, killed_at, offsets, cycle);
    }
    let acked = shared.acked.lock().unwrap().len();
    println!(
        "crash cycles: {cycles} SIGKILL cycles, {acked} acknowledged messages, none lost, no \
         committed offset went backwards (final offsets {offsets:?}), {:.1} s",
        started.elapsed().as_secs_f64()
    );
    assert!(acked > 0);
}
