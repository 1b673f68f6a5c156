//! Test 5 (issue 4, long polling): an idle push consumer gets a new message within 50 ms of the
//! send returning.
//!
//! It passes only because the broker suspends PULL_MESSAGE requests and wakes them on message
//! arrival: with `RINGMQ_LONGPOLL_ENABLED=false` (short polling) it fails.
//!
//! Method: a push consumer drains a warm-up message, then the consumer is left idle for 10 s
//! (its pull requests are parked in the broker). Then 20 messages are sent 200 ms apart; for
//! each, the time from the send returning to the consume callback is measured. The median
//! must be <= 50 ms and no message may wait anywhere near a polling interval (max < 1 s).

#![recursion_limit = "512"]

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ringmq_client_it::client::SEND_TIMEOUT_MS;
use ringmq_client_it::{
    build_message, check_message, run_bounded, shutdown_producer, shutdown_push_consumer,
    start_producer_with_topic, start_push_consumer, unique_name, wait_until, ClientEnv, TestBroker,
};
use rocketmq_client_rust::{
    ClientResult, ConsumeConcurrentlyContext, ConsumeConcurrentlyStatus, DefaultMQProducer,
};
use rocketmq_model::common::message::message_ext::MessageExt;

const IDLE_BEFORE_MEASURING: Duration = Duration::from_secs(10);
const MEASURED_MESSAGES: u64 = 20;
const SEND_INTERVAL: Duration = Duration::from_millis(200);
const MEDIAN_LATENCY_MAX: Duration = Duration::from_millis(50);
/// Without long polling a message waits for the next pull (seconds); with it, milliseconds.
const SINGLE_LATENCY_MAX: Duration = Duration::from_millis(1000);
const WARMUP_TIMEOUT: Duration = Duration::from_secs(60);
const DELIVERY_TIMEOUT: Duration = Duration::from_secs(30);
const TEST_TIMEOUT: Duration = Duration::from_secs(180);
const WAIT_POLL_INTERVAL: Duration = Duration::from_millis(5);

/// Seq -> when the consume callback first saw it.
type ReceivedAt = Arc<Mutex<HashMap<u64, Instant>>>;

fn lock(received: &ReceivedAt) -> std::sync::MutexGuard<'_, HashMap<u64, Instant>> {
    received.lock().unwrap_or_else(|p| p.into_inner())
}

#[test]
fn idle_push_consumer_receives_new_message_within_50ms() {
    let broker = TestBroker::start(&[]).expect("start broker");
    run_bounded(
        "idle_push_consumer_receives_new_message_within_50ms",
        TEST_TIMEOUT,
        measure_idle_consumer_latency(broker.namesrv_addr()),
    );
}

async fn measure_idle_consumer_latency(namesrv: String) {
    let run = unique_name("r");
    let topic = unique_name("it_lp");
    let env = ClientEnv::new("long-polling").expect("client runtime");
    let producer = start_producer_with_topic(&env, &namesrv, &topic).await;
    // seq 0 is the warm-up message; it also makes the topic's route known.
    producer
        .send_with_timeout(build_message(&topic, &run, 0), SEND_TIMEOUT_MS)
        .await
        .expect("send warm-up message");

    let received: ReceivedAt = Arc::default();
    let consumer = start_push_consumer(
        &env,
        &namesrv,
        &unique_name("it_lp_cg"),
        &topic,
        timestamping_listener(Arc::clone(&received), run.clone()),
    )
    .await
    .expect("start push consumer");
    let warm = wait_until(WARMUP_TIMEOUT, WAIT_POLL_INTERVAL, || {
        lock(&received).contains_key(&0)
    })
    .await;
    assert!(
        warm,
        "warm-up message not consumed within {WARMUP_TIMEOUT:?}"
    );
    // Idle, so that the consumer's pull requests are parked in the broker when the measured
    // messages arrive.
    tokio::time::sleep(IDLE_BEFORE_MEASURING).await;

    let returned_at = send_measured_messages(&producer, &topic, &run).await;
    let all = wait_until(DELIVERY_TIMEOUT, WAIT_POLL_INTERVAL, || {
        let received = lock(&received);
        (1..=MEASURED_MESSAGES).all(|seq| received.contains_key(&seq))
    })
    .await;
    shutdown_push_consumer(consumer).await;
    shutdown_producer(producer).await;
    env.shutdown().await;
    assert!(
        all,
        "not every measured message arrived within {DELIVERY_TIMEOUT:?}"
    );
    assert_latencies(&lock(&received), &returned_at);
}

/// A push-consumer listener that checks every message and notes when it first arrived.
fn timestamping_listener(
    received: ReceivedAt,
    run: String,
) -> impl Fn(&[&MessageExt], &ConsumeConcurrentlyContext) -> ClientResult<ConsumeConcurrentlyStatus>
       + Send
       + Sync
       + 'static {
    move |msgs: &[&MessageExt], _context: &ConsumeConcurrentlyContext| {
        let now = Instant::now();
        let mut received = lock(&received);
        for msg in msgs {
            let seq = check_message(msg, &run).expect("message intact");
            received.entry(seq).or_insert(now);
        }
        Ok(ConsumeConcurrentlyStatus::ConsumeSuccess)
    }
}

/// Sends messages `1..=MEASURED_MESSAGES`, [`SEND_INTERVAL`] apart; returns when each send
/// returned (the start of its latency).
async fn send_measured_messages(
    producer: &DefaultMQProducer,
    topic: &str,
    run: &str,
) -> HashMap<u64, Instant> {
    let mut returned_at = HashMap::new();
    for seq in 1..=MEASURED_MESSAGES {
        let result = producer
            .send_with_timeout(build_message(topic, run, seq), SEND_TIMEOUT_MS)
            .await;
        returned_at.insert(seq, Instant::now());
        result.expect("send measured message");
        tokio::time::sleep(SEND_INTERVAL).await;
    }
    returned_at
}

/// Asserts the median send-return -> consume latency of the measured messages is at most
/// [`MEDIAN_LATENCY_MAX`] and none reached [`SINGLE_LATENCY_MAX`].
fn assert_latencies(received: &HashMap<u64, Instant>, returned_at: &HashMap<u64, Instant>) {
    let mut latencies: Vec<Duration> = (1..=MEASURED_MESSAGES)
        .map(|seq| received[&seq].saturating_duration_since(returned_at[&seq]))
        .collect();
    eprintln!("[client-it] send-return -> consume latencies: {latencies:?}");
    latencies.sort_unstable();
    let median = latencies[latencies.len() / 2];
    let max = latencies[latencies.len() - 1];
    eprintln!("[client-it] median {median:?}, max {max:?}");
    assert!(
        median <= MEDIAN_LATENCY_MAX,
        "median latency {median:?} > {MEDIAN_LATENCY_MAX:?} (long polling missing?)"
    );
    assert!(max < SINGLE_LATENCY_MAX, "a message waited {max:?}");
}
