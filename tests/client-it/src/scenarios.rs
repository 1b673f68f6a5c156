//! Test bodies shared by several test binaries (the JSON and binary-header variants of
//! send-and-consume run the same scenario in different processes).

use std::collections::HashSet;
use std::ops::Range;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rocketmq_client_rust::{
    ConsumeConcurrentlyContext, ConsumeConcurrentlyStatus, DefaultMQProducer, SendStatus,
};
use rocketmq_model::common::message::message_ext::MessageExt;

use crate::client::{
    ensure_topic, shutdown_lite_pull_consumer, shutdown_producer, shutdown_push_consumer,
    start_lite_pull_consumer, start_producer, start_push_consumer, unique_name, wait_until,
    ClientEnv, SEND_TIMEOUT_MS, TEST_TOPIC_QUEUES,
};
use crate::messages::{build_message, DeliveryLog};

/// Concurrent in-flight sends (one sync producer does ~700 msg/s here; peers.md).
pub const SEND_CONCURRENCY: u64 = 8;
/// Bound on receiving every message once sending is done.
pub const CONSUME_TIMEOUT: Duration = Duration::from_secs(120);
/// After everything arrived, keep consuming this long to catch duplicates.
pub const DUPLICATE_GRACE: Duration = Duration::from_secs(3);
/// Lite pull poll timeout.
pub const POLL_TIMEOUT_MS: u64 = 500;
/// Poll interval of wait loops.
pub const WAIT_POLL_INTERVAL: Duration = Duration::from_millis(50);

/// What a batch of sends produced: acknowledged seqs (SEND_OK) and failures.
#[derive(Debug, Default)]
pub struct SendOutcome {
    pub acked: Vec<u64>,
    /// Queue ids the broker put acknowledged messages in.
    pub queues: HashSet<i32>,
    /// `(seq, error)` of sends that failed or were not SEND_OK.
    pub failures: Vec<(u64, String)>,
}

/// Sends messages `seqs` of run `run` with [`SEND_CONCURRENCY`] sends in flight.
/// With `stop_on_failure`, each sender stops at its first failure.
pub async fn send_range(
    producer: Arc<DefaultMQProducer>,
    topic: &str,
    run: &str,
    seqs: Range<u64>,
    stop_on_failure: bool,
) -> SendOutcome {
    let mut tasks = tokio::task::JoinSet::new();
    for lane in 0..SEND_CONCURRENCY {
        let producer = Arc::clone(&producer);
        let (topic, run) = (topic.to_string(), run.to_string());
        let seqs = seqs.clone();
        tasks.spawn(async move {
            let mut outcome = SendOutcome::default();
            let start = seqs.start + lane;
            for seq in (start..seqs.end).step_by(SEND_CONCURRENCY as usize) {
                let message = build_message(&topic, &run, seq);
                match producer.send_with_timeout(message, SEND_TIMEOUT_MS).await {
                    Ok(Some(result)) if result.send_status == SendStatus::SendOk => {
                        outcome.acked.push(seq);
                        if let Some(queue) = &result.message_queue {
                            outcome.queues.insert(queue.queue_id());
                        }
                    }
                    Ok(other) => {
                        outcome
                            .failures
                            .push((seq, format!("not SEND_OK: {other:?}")));
                    }
                    Err(error) => outcome.failures.push((seq, error.to_string())),
                }
                if stop_on_failure && !outcome.failures.is_empty() {
                    break;
                }
            }
            outcome
        });
    }
    let mut total = SendOutcome::default();
    while let Some(joined) = tasks.join_next().await {
        let outcome = joined.expect("a send task panicked");
        total.acked.extend(outcome.acked);
        total.queues.extend(outcome.queues);
        total.failures.extend(outcome.failures);
    }
    total.acked.sort_unstable();
    total
}

/// A push-consumer listener that records every message in `log` and acknowledges it.
pub fn recording_listener(
    log: Arc<DeliveryLog>,
    run: String,
) -> impl Fn(
    &[&MessageExt],
    &ConsumeConcurrentlyContext,
) -> rocketmq_client_rust::ClientResult<ConsumeConcurrentlyStatus>
       + Send
       + Sync
       + 'static {
    move |msgs: &[&MessageExt], _context: &ConsumeConcurrentlyContext| {
        for msg in msgs {
            log.record(msg, &run);
        }
        Ok(ConsumeConcurrentlyStatus::ConsumeSuccess)
    }
}

/// Test 1/2: a producer sends `message_count` messages with tags, keys and properties to a
/// new topic with [`TEST_TOPIC_QUEUES`] queues; a push consumer and a lite pull consumer (two
/// groups) must each receive every message exactly once with all fields intact.
pub async fn send_and_consume(namesrv_addr: &str, message_count: u64) {
    let run = unique_name("r");
    let topic = unique_name("it_sc");
    let env = ClientEnv::new("send-consume").expect("client runtime");

    let mut producer = start_producer(&env, namesrv_addr, &unique_name("it_pg"))
        .await
        .expect("start producer");
    ensure_topic(&mut producer, &topic, TEST_TOPIC_QUEUES).await;
    let producer = Arc::new(producer);
    let send_started = Instant::now();
    let sent = send_range(Arc::clone(&producer), &topic, &run, 0..message_count, false).await;
    eprintln!(
        "[client-it] sent {} of {message_count} in {:.1} s to queues {:?}",
        sent.acked.len(),
        send_started.elapsed().as_secs_f64(),
        sent.queues
    );
    assert!(
        sent.failures.is_empty(),
        "{} sends failed, first: {:?}",
        sent.failures.len(),
        &sent.failures[..sent.failures.len().min(5)]
    );
    assert!(
        sent.queues.len() >= TEST_TOPIC_QUEUES as usize,
        "messages went to queues {:?}, expected at least {TEST_TOPIC_QUEUES}",
        sent.queues
    );

    let push_log = Arc::new(DeliveryLog::default());
    let pull_log = Arc::new(DeliveryLog::default());
    let consume_started = Instant::now();
    let push = start_push_consumer(
        &env,
        namesrv_addr,
        &unique_name("it_push"),
        &topic,
        recording_listener(Arc::clone(&push_log), run.clone()),
    )
    .await
    .expect("start push consumer");
    let pull = start_lite_pull_consumer(&env, namesrv_addr, &unique_name("it_pull"), &topic)
        .await
        .expect("start lite pull consumer");

    let target = message_count as usize;
    let deadline = Instant::now() + CONSUME_TIMEOUT;
    let mut grace_until: Option<Instant> = None;
    loop {
        for msg in pull.poll_with_timeout(POLL_TIMEOUT_MS).await {
            pull_log.record(&msg, &run);
        }
        let now = Instant::now();
        let all_in = push_log.distinct() >= target && pull_log.distinct() >= target;
        match grace_until {
            None if all_in => {
                eprintln!(
                    "[client-it] both consumers had all {target} after {:.1} s",
                    consume_started.elapsed().as_secs_f64()
                );
                grace_until = Some(now + DUPLICATE_GRACE);
            }
            Some(until) if now >= until => break,
            _ if now >= deadline => break,
            _ => {}
        }
    }
    shutdown_lite_pull_consumer(pull).await;
    shutdown_push_consumer(push).await;
    match Arc::try_unwrap(producer) {
        Ok(producer) => shutdown_producer(producer).await,
        Err(_) => unreachable!("all send tasks have finished"),
    }
    env.shutdown().await;

    let push_state = push_log.snapshot();
    let pull_state = pull_log.snapshot();
    eprintln!(
        "[client-it] push consumer: {} distinct from queues {:?}; lite pull: {} distinct from \
         queues {:?}",
        push_state.deliveries.len(),
        push_state.queues,
        pull_state.deliveries.len(),
        pull_state.queues
    );
    push_state.assert_exactly_once("push consumer", sent.acked.iter().copied());
    pull_state.assert_exactly_once("lite pull consumer", sent.acked.iter().copied());
}

/// Waits until `log` has `count` distinct seqs, up to `timeout`; returns whether it did.
pub async fn wait_for_distinct(log: &DeliveryLog, count: usize, timeout: Duration) -> bool {
    wait_until(timeout, WAIT_POLL_INTERVAL, || log.distinct() >= count).await
}
