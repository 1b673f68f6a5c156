//! W6, the real-client workload of `scripts/bench-compare.sh`: rocketmq-client-rust 1.0 sends
//! at fixed rates (open loop) and a push consumer of the same process receives; the end-to-end
//! latency of each message runs from the time it was *meant* to be sent, not the time it was,
//! so a stalled producer shows up in the figures (coordinated-omission safe).
//!
//! Usage: `w6 <namesrv addr> [rate msg/s ...]` (default rates 1000 5000). Environment:
//! `W6_DURATION_S` (seconds per rate, default 15), `W6_BODY_BYTES` (default 1024),
//! `W6_QUEUES` (queues of the topic, default 8).
//!
//! Bounded: at most [`RATE_MAX`] msg/s × [`DURATION_MAX_S`] s per rate, [`SENDS_IN_FLIGHT_MAX`]
//! sends in flight (a send past that waits for a place, still stamped with its intended time),
//! and [`CONSUME_WAIT`] for the last messages after sending ends. One output line per rate:
//! `W6 rate=<r> sent=<n> acked=<n> consumed=<n> duplicates=<n> p50_us=.. p99_us=.. p999_us=..
//! max_us=..` (latencies of the consumed messages of the measured phase), then the split of
//! each consumed message's e2e into its two sides:
//! `start_p99_us` (the send's start − its due time: the driver's timer and in-flight bound),
//! `ack_p50_us ack_p99_us ack_p999_us` (send acknowledged − due: the producer side),
//! `deliver_p50_us deliver_p99_us deliver_p999_us` (listener − acknowledgement: the consumer
//! side, 0 when the listener ran first; `before_ack` counts those), and `stored_p50_ms
//! stored_p99_ms` (listener wall clock − the broker's store timestamp, whole milliseconds).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ringmq_client_it::client::{
    ensure_topic, shutdown_push_consumer, shutdown_shared_producer, start_producer,
    start_push_consumer, unique_name, ClientEnv, SEND_TIMEOUT_MS,
};
use rocketmq_client_rust::{ConsumeConcurrentlyContext, ConsumeConcurrentlyStatus, SendStatus};
use rocketmq_model::common::message::message_ext::MessageExt;
use rocketmq_model::common::message::message_single::Message;

/// Highest rate accepted (msg/s).
const RATE_MAX: u64 = 50_000;
/// Longest measured phase per rate (s).
const DURATION_MAX_S: u64 = 120;
/// Sends in flight at once.
const SENDS_IN_FLIGHT_MAX: usize = 512;
/// Wait for the consumer to receive the warm-up message (route, rebalance, first pulls).
const WARM_UP_WAIT: Duration = Duration::from_secs(60);
/// Wait for the last messages of a phase once its sending ended.
const CONSUME_WAIT: Duration = Duration::from_secs(30);
/// Body header: magic, phase, seq, intended send time (µs since the process's epoch).
const MAGIC: u32 = 0x5736_0001;
const STAMP_BYTES: usize = 4 + 4 + 8 + 8;
/// The phase number of warm-up messages (never measured).
const WARM_UP_PHASE: u32 = u32::MAX;

/// What the consumer saw, per phase.
struct Received {
    epoch: Instant,
    phase: AtomicU64,
    state: Mutex<PhaseState>,
    warm: AtomicU64,
}

#[derive(Default)]
struct PhaseState {
    latencies_us: Vec<u64>,
    seen: Vec<bool>,
    duplicates: u64,
    /// Per message of the phase: when its send started, was acknowledged, reached the
    /// listener (µs since the epoch; 0 = not yet).
    started_us: Vec<u64>,
    acked_us: Vec<u64>,
    consumed_us: Vec<u64>,
    /// Listener wall clock − store timestamp (ms), per consumed message.
    stored_ms: Vec<u64>,
}

impl PhaseState {
    fn new(count: usize) -> Self {
        Self {
            latencies_us: Vec::with_capacity(count),
            seen: vec![false; count],
            duplicates: 0,
            started_us: vec![0; count],
            acked_us: vec![0; count],
            consumed_us: vec![0; count],
            stored_ms: Vec::with_capacity(count),
        }
    }
}

fn wall_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

impl Received {
    fn now_us(&self) -> u64 {
        self.epoch.elapsed().as_micros() as u64
    }

    /// Notes when message `seq` of `phase` started sending (`acked` false) or was
    /// acknowledged (`acked` true).
    fn mark_send(&self, phase: u32, seq: u64, acked: bool) {
        if u64::from(phase) != self.phase.load(Ordering::Acquire) {
            return;
        }
        let now_us = self.now_us();
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let column = if acked {
            &mut state.acked_us
        } else {
            &mut state.started_us
        };
        if let Some(slot) = column.get_mut(seq as usize) {
            *slot = now_us;
        }
    }

    fn record(&self, body: &[u8], store_timestamp_ms: i64) {
        if body.len() < STAMP_BYTES || u32::from_be_bytes(body[0..4].try_into().unwrap()) != MAGIC {
            return;
        }
        let phase = u32::from_be_bytes(body[4..8].try_into().unwrap());
        if phase == WARM_UP_PHASE {
            self.warm.fetch_add(1, Ordering::Relaxed);
            return;
        }
        if u64::from(phase) != self.phase.load(Ordering::Acquire) {
            return;
        }
        let seq = u64::from_be_bytes(body[8..16].try_into().unwrap()) as usize;
        let intended_us = u64::from_be_bytes(body[16..24].try_into().unwrap());
        let now_us = self.now_us();
        let stored_ms = wall_ms().saturating_sub(u64::try_from(store_timestamp_ms).unwrap_or(0));
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        match state.seen.get(seq).copied() {
            Some(false) => {
                state.seen[seq] = true;
                state.latencies_us.push(now_us.saturating_sub(intended_us));
                state.consumed_us[seq] = now_us;
                state.stored_ms.push(stored_ms);
            }
            Some(true) => state.duplicates += 1,
            None => {}
        }
    }
}

fn body(phase: u32, seq: u64, intended_us: u64, len: usize) -> Vec<u8> {
    let mut body = Vec::with_capacity(len.max(STAMP_BYTES));
    body.extend_from_slice(&MAGIC.to_be_bytes());
    body.extend_from_slice(&phase.to_be_bytes());
    body.extend_from_slice(&seq.to_be_bytes());
    body.extend_from_slice(&intended_us.to_be_bytes());
    body.resize(len.max(STAMP_BYTES), b'w');
    body
}

fn env_num(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .map(|v| {
            v.parse()
                .unwrap_or_else(|_| panic!("{name}: not a number: {v}"))
        })
        .unwrap_or(default)
}

fn percentile(sorted: &[u64], q: f64) -> u64 {
    if sorted.is_empty() {
        return 0;
    }
    let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1]
}

struct Plan {
    topic: String,
    body_bytes: usize,
    duration_s: u64,
}

/// One measured phase at `rate`: sends on schedule, waits for the consumer, prints the line.
async fn phase(
    producer: &Arc<rocketmq_client_rust::DefaultMQProducer>,
    received: &Arc<Received>,
    plan: &Plan,
    number: u32,
    rate: u64,
) {
    let count = rate * plan.duration_s;
    {
        let mut state = received.state.lock().unwrap_or_else(|p| p.into_inner());
        *state = PhaseState::new(count as usize);
    }
    received.phase.store(u64::from(number), Ordering::Release);
    let acked = Arc::new(AtomicU64::new(0));
    let places = Arc::new(tokio::sync::Semaphore::new(SENDS_IN_FLIGHT_MAX));
    let start = Instant::now();
    let mut tasks = tokio::task::JoinSet::new();
    for seq in 0..count {
        let due = start + Duration::from_nanos(seq * 1_000_000_000 / rate);
        tokio::time::sleep_until(due.into()).await;
        let intended_us = due.duration_since(received.epoch).as_micros() as u64;
        let message = Message::builder()
            .topic(plan.topic.as_str())
            .body(body(number, seq, intended_us, plan.body_bytes))
            .build_unchecked();
        let place = Arc::clone(&places)
            .acquire_owned()
            .await
            .expect("semaphore open");
        let (producer, acked) = (Arc::clone(producer), Arc::clone(&acked));
        let marks = Arc::clone(received);
        tasks.spawn(async move {
            marks.mark_send(number, seq, false);
            let sent = producer.send_with_timeout(message, SEND_TIMEOUT_MS).await;
            if matches!(&sent, Ok(Some(r)) if r.send_status == SendStatus::SendOk) {
                marks.mark_send(number, seq, true);
                acked.fetch_add(1, Ordering::Relaxed);
            }
            drop(place);
        });
        while tasks.try_join_next().is_some() {}
    }
    while tasks.join_next().await.is_some() {}
    let acked = acked.load(Ordering::Relaxed);
    let deadline = Instant::now() + CONSUME_WAIT;
    loop {
        let got = received
            .state
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .latencies_us
            .len();
        if got as u64 >= acked || Instant::now() >= deadline {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    received.phase.store(u64::MAX, Ordering::Release);
    let send_s = start.elapsed().as_secs_f64();
    let mut state = received.state.lock().unwrap_or_else(|p| p.into_inner());
    let mut sorted = std::mem::take(&mut state.latencies_us);
    sorted.sort_unstable();
    let split = Split::of(&state, received.epoch, start, rate);
    println!(
        "W6 rate={rate} sent={count} acked={acked} consumed={} duplicates={} p50_us={} p99_us={} \
         p999_us={} max_us={} send_s={send_s:.1} {split}",
        sorted.len(),
        state.duplicates,
        percentile(&sorted, 0.5),
        percentile(&sorted, 0.99),
        percentile(&sorted, 0.999),
        sorted.last().copied().unwrap_or(0),
    );
}

/// The two sides of the consumed messages' e2e (see the module's doc for the fields).
struct Split {
    start_us: Vec<u64>,
    ack_us: Vec<u64>,
    deliver_us: Vec<u64>,
    before_ack: u64,
    stored_ms: Vec<u64>,
}

impl Split {
    fn of(state: &PhaseState, epoch: Instant, start: Instant, rate: u64) -> Self {
        let base_us = start.duration_since(epoch).as_micros() as u64;
        let mut split = Split {
            start_us: Vec::new(),
            ack_us: Vec::new(),
            deliver_us: Vec::new(),
            before_ack: 0,
            stored_ms: state.stored_ms.clone(),
        };
        for seq in 0..state.seen.len() {
            let (started, acked, consumed) = (
                state.started_us[seq],
                state.acked_us[seq],
                state.consumed_us[seq],
            );
            if consumed == 0 || acked == 0 {
                continue;
            }
            let due_us = base_us + seq as u64 * 1_000_000 / rate;
            split.start_us.push(started.saturating_sub(due_us));
            split.ack_us.push(acked.saturating_sub(due_us));
            if consumed < acked {
                split.before_ack += 1;
            }
            split.deliver_us.push(consumed.saturating_sub(acked));
        }
        for column in [
            &mut split.start_us,
            &mut split.ack_us,
            &mut split.deliver_us,
            &mut split.stored_ms,
        ] {
            column.sort_unstable();
        }
        split
    }
}

impl std::fmt::Display for Split {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let p = percentile;
        write!(
            f,
            "start_p99_us={} ack_p50_us={} ack_p99_us={} ack_p999_us={} deliver_p50_us={} \
             deliver_p99_us={} deliver_p999_us={} before_ack={} stored_p50_ms={} stored_p99_ms={}",
            p(&self.start_us, 0.99),
            p(&self.ack_us, 0.5),
            p(&self.ack_us, 0.99),
            p(&self.ack_us, 0.999),
            p(&self.deliver_us, 0.5),
            p(&self.deliver_us, 0.99),
            p(&self.deliver_us, 0.999),
            self.before_ack,
            p(&self.stored_ms, 0.5),
            p(&self.stored_ms, 0.99),
        )
    }
}

/// Sends warm-up messages until the consumer has received one (its queues are assigned and
/// pulling), bounded by [`WARM_UP_WAIT`].
async fn warm_up(
    producer: &rocketmq_client_rust::DefaultMQProducer,
    received: &Received,
    plan: &Plan,
) {
    let deadline = Instant::now() + WARM_UP_WAIT;
    while received.warm.load(Ordering::Relaxed) == 0 {
        if Instant::now() >= deadline {
            eprintln!("W6: the consumer received nothing in {WARM_UP_WAIT:?}; no figures");
            std::process::exit(3);
        }
        let message = Message::builder()
            .topic(plan.topic.as_str())
            .body(body(WARM_UP_PHASE, 0, 0, plan.body_bytes))
            .build_unchecked();
        let _ = producer.send_with_timeout(message, SEND_TIMEOUT_MS).await;
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // Let every queue's consumer reach the end (warm-up messages go to all queues).
    tokio::time::sleep(Duration::from_secs(2)).await;
}

fn main() {
    let mut args = std::env::args().skip(1);
    let namesrv = args.next().expect("usage: w6 <namesrv addr> [rate ...]");
    let mut rates: Vec<u64> = args.map(|a| a.parse().expect("rate: a number")).collect();
    if rates.is_empty() {
        rates = vec![1000, 5000];
    }
    assert!(
        rates.iter().all(|&r| (1..=RATE_MAX).contains(&r)),
        "rates 1..={RATE_MAX}"
    );
    let plan = Plan {
        topic: unique_name("W6"),
        body_bytes: env_num("W6_BODY_BYTES", 1024) as usize,
        duration_s: env_num("W6_DURATION_S", 15).clamp(1, DURATION_MAX_S),
    };
    let queues = env_num("W6_QUEUES", 8) as i32;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio runtime");
    runtime.block_on(async {
        let env = ClientEnv::new("w6").expect("client runtime");
        let mut producer = start_producer(&env, &namesrv, &unique_name("w6_pg"))
            .await
            .expect("start producer");
        ensure_topic(&mut producer, &plan.topic, queues).await;
        let received = Arc::new(Received {
            epoch: Instant::now(),
            phase: AtomicU64::new(u64::MAX),
            state: Mutex::new(PhaseState::default()),
            warm: AtomicU64::new(0),
        });
        let sink = Arc::clone(&received);
        let listener = move |msgs: &[&MessageExt], _: &ConsumeConcurrentlyContext| {
            for msg in msgs {
                if let Some(body) = msg.body() {
                    sink.record(&body, msg.store_timestamp());
                }
            }
            Ok(ConsumeConcurrentlyStatus::ConsumeSuccess)
        };
        let consumer =
            start_push_consumer(&env, &namesrv, &unique_name("w6_cg"), &plan.topic, listener)
                .await
                .expect("start push consumer");
        let producer = Arc::new(producer);
        warm_up(&producer, &received, &plan).await;
        for (i, &rate) in rates.iter().enumerate() {
            phase(&producer, &received, &plan, i as u32, rate).await;
        }
        shutdown_push_consumer(consumer).await;
        shutdown_shared_producer(producer).await;
        env.shutdown().await;
    });
    runtime.shutdown_timeout(Duration::from_secs(5));
}
