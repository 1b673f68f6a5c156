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

use ringmq_client_it::client::{ensure_topic, SEND_TIMEOUT_MS, TEST_TOPIC_QUEUES};
use ringmq_client_it::{
    build_message, check_message, run_bounded, shutdown_producer, shutdown_push_consumer,
    start_producer, start_push_consumer, unique_name, wait_until, ClientEnv, TestBroker,
};
use rocketmq_client_rust::{ClientResult, ConsumeConcurrentlyContext, ConsumeConcurrentlyStatus};
use rocketmq_model::common::message::message_ext::MessageExt;

const IDLE_BEFORE_MEASURING: Duration = Duration::from_secs(10);
const MEASURED_MESSAGES: u64 = 20;
const SEND_INTERVAL: Duration = Duration::from_millis(200);
const MAX_MEDIAN_LATENCY: Duration = Duration::from_millis(50);
/// Without long polling a message waits for the next pull (seconds); with it, milliseconds.
const MAX_SINGLE_LATENCY: Duration = Duration::from_millis(1000);
const WARMUP_TIMEOUT: Duration = Duration::from_secs(60);
const DELIVERY_TIMEOUT: Duration = Duration::from_secs(30);
const TEST_TIMEOUT: Duration = Duration::from_secs(180);
const WAIT_POLL_INTERVAL: Duration = Duration::from_millis(5);

#[test]
fn idle_push_consumer_receives_new_message_within_50ms() {
    let broker = TestBroker::start(&[]).expect("start broker");
    run_bounded(
        "idle_push_consumer_receives_new_message_within_50ms",
        TEST_TIMEOUT,
        async {
            let namesrv = broker.namesrv_addr();
            let run = unique_name("r");
            let topic = unique_name("it_lp");
            let env = ClientEnv::new("long-polling").expect("client runtime");
            let mut producer = start_producer(&env, &namesrv, &unique_name("it_pg"))
                .await
                .expect("start producer");
            ensure_topic(&mut producer, &topic, TEST_TOPIC_QUEUES).await;
            // seq 0 is the warm-up message; it also makes the topic's route known.
            producer
                .send_with_timeout(build_message(&topic, &run, 0), SEND_TIMEOUT_MS)
                .await
                .expect("send warm-up message");

            let received: Arc<Mutex<HashMap<u64, Instant>>> = Arc::default();
            let listener = {
                let received = Arc::clone(&received);
                let run = run.clone();
                move |msgs: &[&MessageExt],
                      _context: &ConsumeConcurrentlyContext|
                      -> ClientResult<ConsumeConcurrentlyStatus> {
                    let now = Instant::now();
                    let mut received = received.lock().unwrap_or_else(|p| p.into_inner());
                    for msg in msgs {
                        let seq = check_message(msg, &run).expect("message intact");
                        received.entry(seq).or_insert(now);
                    }
                    Ok(ConsumeConcurrentlyStatus::ConsumeSuccess)
                }
            };
            let consumer =
                start_push_consumer(&env, &namesrv, &unique_name("it_lp_cg"), &topic, listener)
                    .await
                    .expect("start push consumer");
            let warm = wait_until(WARMUP_TIMEOUT, WAIT_POLL_INTERVAL, || {
                received
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .contains_key(&0)
            })
            .await;
            assert!(
                warm,
                "warm-up message not consumed within {WARMUP_TIMEOUT:?}"
            );
            tokio::time::sleep(IDLE_BEFORE_MEASURING).await;

            let mut returned_at = HashMap::new();
            for seq in 1..=MEASURED_MESSAGES {
                let result = producer
                    .send_with_timeout(build_message(&topic, &run, seq), SEND_TIMEOUT_MS)
                    .await;
                returned_at.insert(seq, Instant::now());
                result.expect("send measured message");
                tokio::time::sleep(SEND_INTERVAL).await;
            }
            let all = wait_until(DELIVERY_TIMEOUT, WAIT_POLL_INTERVAL, || {
                let received = received.lock().unwrap_or_else(|p| p.into_inner());
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

            let received = received.lock().unwrap_or_else(|p| p.into_inner());
            let mut latencies: Vec<Duration> = (1..=MEASURED_MESSAGES)
                .map(|seq| received[&seq].saturating_duration_since(returned_at[&seq]))
                .collect();
            eprintln!("[client-it] send-return -> consume latencies: {latencies:?}");
            latencies.sort_unstable();
            let median = latencies[latencies.len() / 2];
            let max = latencies[latencies.len() - 1];
            eprintln!("[client-it] median {median:?}, max {max:?}");
            assert!(
                median <= MAX_MEDIAN_LATENCY,
                "median latency {median:?} > {MAX_MEDIAN_LATENCY:?} (long polling missing?)"
            );
            assert!(max < MAX_SINGLE_LATENCY, "a message waited {max:?}");
        },
    );
}
