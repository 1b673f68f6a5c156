//! Test 3: a push consumer that answers RECONSUME_LATER gets the message again through the
//! group's retry topic `%RETRY%<group>`.
//!
//! The client sends a failed message back with CONSUMER_SEND_MSG_BACK (36) and delay level 0,
//! which the broker turns into level 3 + reconsumeTimes (10 s in RocketMQ's default table), so
//! redelivery takes about 10 s. The broker stores the original topic in the RETRY_TOPIC
//! property and the client restores the topic from it; that property proves the message came
//! back through the retry topic rather than a client-side local retry (which the client does
//! when send-back fails, also with reconsume_times incremented).

#![recursion_limit = "512"]

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use ringmq_client_it::scenarios::send_range;
use ringmq_client_it::{
    check_message, run_bounded, shutdown_push_consumer, shutdown_shared_producer,
    start_producer_with_topic, start_push_consumer, unique_name, wait_until, ClientEnv, TestBroker,
};
use rocketmq_client_rust::{ClientResult, ConsumeConcurrentlyContext, ConsumeConcurrentlyStatus};
use rocketmq_model::common::message::message_ext::MessageExt;

const MESSAGE_COUNT: u64 = 100;
/// Messages whose seq is a multiple of this fail their first delivery.
const FAIL_EVERY: u64 = 5;
/// Property in which the broker keeps the original topic of a sent-back message.
const PROPERTY_RETRY_TOPIC: &str = "RETRY_TOPIC";
const FIRST_DELIVERY_TIMEOUT: Duration = Duration::from_secs(60);
/// Delay level 3 is 10 s; allow for the retry topic's rebalance and a slow machine.
const REDELIVERY_TIMEOUT: Duration = Duration::from_secs(90);
const DUPLICATE_GRACE: Duration = Duration::from_secs(2);
const TEST_TIMEOUT: Duration = Duration::from_secs(240);
const WAIT_POLL_INTERVAL: Duration = Duration::from_millis(50);

#[derive(Debug, Clone)]
struct Delivery {
    reconsume_times: i32,
    topic: String,
    retry_topic_property: Option<String>,
    answered_later: bool,
}

#[derive(Default)]
struct Deliveries {
    by_seq: BTreeMap<u64, Vec<Delivery>>,
    problems: Vec<String>,
}

fn should_fail_first(seq: u64) -> bool {
    seq.is_multiple_of(FAIL_EVERY)
}

type SharedDeliveries = Arc<Mutex<Deliveries>>;

fn lock(deliveries: &SharedDeliveries) -> MutexGuard<'_, Deliveries> {
    deliveries.lock().unwrap_or_else(|p| p.into_inner())
}

#[test]
fn reconsume_later_redelivers_through_retry_topic() {
    let broker = TestBroker::start(&[]).expect("start broker");
    run_bounded(
        "reconsume_later_redelivers_through_retry_topic",
        TEST_TIMEOUT,
        fail_first_then_check_redeliveries(broker.namesrv_addr()),
    );
}

async fn fail_first_then_check_redeliveries(namesrv: String) {
    let run = unique_name("r");
    let topic = unique_name("it_retry");
    let group = unique_name("it_retry_cg");
    let env = ClientEnv::new("retry").expect("client runtime");
    let producer = Arc::new(start_producer_with_topic(&env, &namesrv, &topic).await);
    let sent = send_range(Arc::clone(&producer), &topic, &run, 0..MESSAGE_COUNT, false).await;
    assert!(
        sent.failures.is_empty(),
        "send failures: {:?}",
        sent.failures
    );

    let deliveries: SharedDeliveries = Arc::default();
    let listener = failing_first_listener(Arc::clone(&deliveries), run.clone());
    let started = Instant::now();
    let consumer = start_push_consumer(&env, &namesrv, &group, &topic, listener)
        .await
        .expect("start push consumer");
    wait_for_first_deliveries_and_retries(&deliveries, started).await;
    // Whatever would come a second time (a duplicate retry, an acknowledged message) has
    // this long to show up.
    tokio::time::sleep(DUPLICATE_GRACE).await;
    shutdown_push_consumer(consumer).await;
    shutdown_shared_producer(producer).await;
    env.shutdown().await;

    let state = lock(&deliveries);
    assert!(
        state.problems.is_empty(),
        "content problems: {:#?}",
        state.problems
    );
    let errors = delivery_errors(&state, &topic);
    assert!(
        errors.is_empty(),
        "{} problems:\n{}",
        errors.len(),
        errors.join("\n")
    );
}

/// A push-consumer listener that records every delivery and answers RECONSUME_LATER for the
/// first delivery of each [`should_fail_first`] message (and acknowledges all others).
fn failing_first_listener(
    deliveries: SharedDeliveries,
    run: String,
) -> impl Fn(&[&MessageExt], &ConsumeConcurrentlyContext) -> ClientResult<ConsumeConcurrentlyStatus>
       + Send
       + Sync
       + 'static {
    move |msgs: &[&MessageExt], _context: &ConsumeConcurrentlyContext| {
        let mut status = ConsumeConcurrentlyStatus::ConsumeSuccess;
        let mut state = lock(&deliveries);
        for msg in msgs {
            match check_message(msg, &run) {
                Ok(seq) => {
                    let later = should_fail_first(seq) && msg.reconsume_times() == 0;
                    if later {
                        status = ConsumeConcurrentlyStatus::ReconsumeLater;
                    }
                    state.by_seq.entry(seq).or_default().push(Delivery {
                        reconsume_times: msg.reconsume_times(),
                        topic: msg.topic().to_string(),
                        retry_topic_property: msg
                            .message_inner()
                            .property(PROPERTY_RETRY_TOPIC)
                            .map(str::to_string),
                        answered_later: later,
                    });
                }
                Err(problem) => state.problems.push(problem),
            }
        }
        Ok(status)
    }
}

/// Waits up to [`FIRST_DELIVERY_TIMEOUT`] for every message's first delivery, then up to
/// [`REDELIVERY_TIMEOUT`] for a redelivery of every failed one. It asserts nothing:
/// [`delivery_errors`] names whatever is missing.
async fn wait_for_first_deliveries_and_retries(deliveries: &SharedDeliveries, started: Instant) {
    let first_all = wait_until(FIRST_DELIVERY_TIMEOUT, WAIT_POLL_INTERVAL, || {
        lock(deliveries).by_seq.len() as u64 >= MESSAGE_COUNT
    })
    .await;
    let failing: Vec<u64> = (0..MESSAGE_COUNT)
        .filter(|&s| should_fail_first(s))
        .collect();
    let redelivered = wait_until(REDELIVERY_TIMEOUT, WAIT_POLL_INTERVAL, || {
        let state = lock(deliveries);
        failing.iter().all(|seq| {
            state
                .by_seq
                .get(seq)
                .is_some_and(|list| list.iter().any(|d| d.reconsume_times >= 1))
        })
    })
    .await;
    eprintln!(
        "[client-it] first deliveries complete: {first_all}; redeliveries complete: \
         {redelivered} after {:.1} s",
        started.elapsed().as_secs_f64()
    );
}

/// Every way the deliveries differ from: each message once first, each acknowledged one never
/// again, and each failed one exactly once more through the retry topic of `topic`.
fn delivery_errors(state: &Deliveries, topic: &str) -> Vec<String> {
    let mut errors = Vec::new();
    for seq in 0..MESSAGE_COUNT {
        let list = state.by_seq.get(&seq).cloned().unwrap_or_default();
        let first = list.iter().filter(|d| d.reconsume_times == 0).count();
        if first != 1 {
            errors.push(format!("seq {seq}: {first} first deliveries: {list:?}"));
            continue;
        }
        let retries: Vec<&Delivery> = list.iter().filter(|d| d.reconsume_times >= 1).collect();
        if !should_fail_first(seq) {
            if !retries.is_empty() {
                errors.push(format!(
                    "seq {seq} was acknowledged but came again: {list:?}"
                ));
            }
            continue;
        }
        // Failed once: exactly one redelivery, through %RETRY%group, with the topic
        // restored and acknowledged.
        match retries.as_slice() {
            [retry] => {
                if retry.topic != topic {
                    errors.push(format!("seq {seq}: redelivered with topic {}", retry.topic));
                }
                if retry.retry_topic_property.as_deref() != Some(topic) {
                    errors.push(format!(
                        "seq {seq}: redelivery has {PROPERTY_RETRY_TOPIC}={:?}, expected \
                         {topic:?} (not through the retry topic?)",
                        retry.retry_topic_property
                    ));
                }
                if retry.answered_later {
                    errors.push(format!("seq {seq}: redelivery was not acknowledged"));
                }
            }
            _ => errors.push(format!(
                "seq {seq}: expected exactly one redelivery with reconsume_times >= 1: \
                 {list:?}"
            )),
        }
    }
    errors
}
