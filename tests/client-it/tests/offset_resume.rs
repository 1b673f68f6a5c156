//! Consumer offsets survive (a) a consumer restart, (b) a graceful broker restart and (c) a
//! broker SIGKILL after the broker's offset flush: a new push consumer in the same group
//! resumes from the committed offsets, so every message sent afterwards arrives and at most a
//! handful of old ones (the last uncommitted batch; RocketMQ is at-least-once) come again.
//!
//! The first consumer sends its offsets to the broker every [`PERSIST_OFFSET_INTERVAL_MS`]
//! (UPDATE_CONSUMER_OFFSET) and on shutdown; the broker flushes its offset table every
//! [`BROKER_FLUSH_OFFSET_INTERVAL_MS`] and on graceful shutdown.

#![recursion_limit = "512"]

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ringmq_client_it::scenarios::{recording_listener, send_range, wait_for_distinct};
use ringmq_client_it::{
    run_bounded, shutdown_push_consumer, shutdown_shared_producer, skip_unless_restartable,
    start_producer_with_topic, start_push_consumer_with_selector, unique_name, wait_until,
    ClientEnv, DeliveryLog, DeliveryState, TestBroker,
};
use rocketmq_client_rust::{DefaultMQPushConsumer, MessageSelector};

/// Messages sent (and consumed) before the restart, and again after it.
const BATCH: u64 = 200;
/// The first consumer's offset upload interval (the client's minimum is 1 s).
const PERSIST_OFFSET_INTERVAL_MS: u32 = 1000;
/// The broker's consumer-offset flush interval in these tests.
const BROKER_FLUSH_OFFSET_INTERVAL_MS: &str = "200";
/// The client's first offset upload comes this long after its instance started
/// (`MQClientInstance`'s persist task has a fixed 10 s initial delay, as in Java); until then
/// only the commit offsets carried by pull requests reach the broker, and those lag.
const CLIENT_FIRST_PERSIST_DELAY: Duration = Duration::from_secs(10);
/// After the client's upload is due: time for the upload plus several broker flushes.
const FLUSH_MARGIN: Duration = Duration::from_millis(1500);
/// Old messages a resumed consumer may see again (at most one uncommitted batch per queue).
const OLD_REDELIVERED_MAX: usize = 32;
const CONSUME_TIMEOUT: Duration = Duration::from_secs(60);
const DUPLICATE_GRACE: Duration = Duration::from_secs(2);
const WAIT_POLL_INTERVAL: Duration = Duration::from_millis(50);
const TEST_TIMEOUT: Duration = Duration::from_secs(240);

/// Sends `seqs` to `topic` (created if needed) with a producer of its own, then stops it.
async fn send_with_new_producer(
    env: &ClientEnv,
    namesrv: &str,
    topic: &str,
    run: &str,
    seqs: std::ops::Range<u64>,
) {
    let producer = Arc::new(start_producer_with_topic(env, namesrv, topic).await);
    let sent = send_range(Arc::clone(&producer), topic, run, seqs.clone(), false).await;
    assert!(
        sent.failures.is_empty(),
        "sends of {seqs:?} failed: {:?}",
        sent.failures
    );
    shutdown_shared_producer(producer).await;
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Between {
    /// Only the consumer restarts.
    Nothing,
    /// The broker is stopped with SIGTERM and started again.
    GracefulBrokerRestart,
    /// The broker is SIGKILLed (after its offset flush had time to run) and started again.
    BrokerSigkill,
}

#[test]
fn consumer_restart_resumes_from_committed_offsets() {
    offset_resume(
        "consumer_restart_resumes_from_committed_offsets",
        Between::Nothing,
    );
}

#[test]
fn graceful_broker_restart_keeps_committed_offsets() {
    offset_resume(
        "graceful_broker_restart_keeps_committed_offsets",
        Between::GracefulBrokerRestart,
    );
}

#[test]
fn broker_sigkill_after_offset_flush_keeps_committed_offsets() {
    offset_resume(
        "broker_sigkill_after_offset_flush_keeps_committed_offsets",
        Between::BrokerSigkill,
    );
}

fn offset_resume(test_name: &str, between: Between) {
    let mut broker = TestBroker::start(&[(
        "RINGMQ_BROKER_FLUSH_CONSUMER_OFFSET_INTERVAL_MS",
        BROKER_FLUSH_OFFSET_INTERVAL_MS,
    )])
    .expect("start broker");
    if between != Between::Nothing && skip_unless_restartable(&broker, test_name) {
        return;
    }
    if between == Between::GracefulBrokerRestart && broker.local_mut().is_none() {
        eprintln!("[client-it] SKIPPED {test_name}: no graceful stop for an external broker");
        return;
    }
    let namesrv = broker.namesrv_addr();
    run_bounded(
        test_name,
        TEST_TIMEOUT,
        resume_across(test_name, between, &mut broker, namesrv),
    );
}

async fn resume_across(
    test_name: &str,
    between: Between,
    broker: &mut TestBroker,
    namesrv: String,
) {
    let run = unique_name("r");
    let topic = unique_name("it_offsets");
    let group = unique_name("it_offsets_cg");
    let env = ClientEnv::new("offset-resume").expect("client runtime");

    // Phase 1: send BATCH, consume all of them, commit.
    send_with_new_producer(&env, &namesrv, &topic, &run, 0..BATCH).await;
    let first_log = Arc::new(DeliveryLog::default());
    let first_started = Instant::now();
    let consumer = start_push_consumer_with_selector(
        &env,
        &namesrv,
        &group,
        &topic,
        MessageSelector::by_tag("*"),
        Some(PERSIST_OFFSET_INTERVAL_MS),
        recording_listener(Arc::clone(&first_log), run.clone()),
    )
    .await
    .expect("start first consumer");
    let complete = wait_for_distinct(&first_log, BATCH as usize, CONSUME_TIMEOUT).await;
    assert!(
        complete,
        "first consumer got {} of {BATCH}",
        first_log.distinct()
    );

    restart(between, broker, consumer, first_started).await;

    // Phase 2: BATCH more; a new consumer in the same group gets exactly those.
    send_with_new_producer(&env, &namesrv, &topic, &run, BATCH..2 * BATCH).await;
    let second_log = consume_resumed(&env, &namesrv, &group, &topic, &run).await;
    env.shutdown().await;
    assert_resumed(test_name, &second_log.snapshot());
}

/// The restart between the phases; the first consumer (`consumer`, started at
/// `first_started`) is shut down in every case.
async fn restart(
    between: Between,
    broker: &mut TestBroker,
    consumer: DefaultMQPushConsumer,
    first_started: Instant,
) {
    match between {
        Between::Nothing => shutdown_push_consumer(consumer).await,
        Between::GracefulBrokerRestart => {
            // The consumer's shutdown sends its offsets; the broker's stop flushes them.
            shutdown_push_consumer(consumer).await;
            let process = broker.local_mut().expect("checked above: a local broker");
            let status = process.stop().expect("graceful broker stop");
            eprintln!("[client-it] broker stopped: {status}");
            broker.restart().expect("restart the broker");
        }
        Between::BrokerSigkill => {
            sigkill_after_offset_flush(broker, consumer, first_started).await;
            broker.restart().expect("restart the broker");
        }
    }
}

/// SIGKILLs the broker while the first consumer is still up, so that only the consumer's
/// periodic upload and the broker's periodic flush can have saved the offsets; then shuts
/// the consumer down against the dead broker.
async fn sigkill_after_offset_flush(
    broker: &mut TestBroker,
    consumer: DefaultMQPushConsumer,
    first_started: Instant,
) {
    // The SIGKILL comes once the first periodic upload after the last message is
    // due and the broker has flushed a few times since.
    let upload_due = (first_started + CLIENT_FIRST_PERSIST_DELAY).max(Instant::now())
        + Duration::from_millis(PERSIST_OFFSET_INTERVAL_MS.into());
    tokio::time::sleep_until((upload_due + FLUSH_MARGIN).into()).await;
    if let Some(process) = broker.local_mut() {
        let path = process
            .store_root()
            .join("config")
            .join("consumerOffset.json");
        eprintln!(
            "[client-it] {} before SIGKILL: {:?}",
            path.display(),
            std::fs::read_to_string(&path)
        );
    }
    broker.kill_hard().expect("SIGKILL the broker");
    let stopping = Instant::now();
    shutdown_push_consumer(consumer).await;
    eprintln!(
        "[client-it] first consumer shut down against a dead broker in {:.1} s",
        stopping.elapsed().as_secs_f64()
    );
}

/// Starts a new consumer in `group` and lets it run until it has every message of the
/// second batch or [`CONSUME_TIMEOUT`] passes, then for [`DUPLICATE_GRACE`] more; returns
/// its log once it is shut down.
async fn consume_resumed(
    env: &ClientEnv,
    namesrv: &str,
    group: &str,
    topic: &str,
    run: &str,
) -> Arc<DeliveryLog> {
    let second_log = Arc::new(DeliveryLog::default());
    let resumed = Instant::now();
    let consumer = start_push_consumer_with_selector(
        env,
        namesrv,
        group,
        topic,
        MessageSelector::by_tag("*"),
        None,
        recording_listener(Arc::clone(&second_log), run.to_string()),
    )
    .await
    .expect("start second consumer");
    let all_new = wait_until(CONSUME_TIMEOUT, WAIT_POLL_INTERVAL, || {
        second_log.has_all(BATCH..2 * BATCH)
    })
    .await;
    eprintln!(
        "[client-it] resumed consumer had all new messages: {all_new} after {:.1} s",
        resumed.elapsed().as_secs_f64()
    );
    tokio::time::sleep(DUPLICATE_GRACE).await;
    shutdown_push_consumer(consumer).await;
    second_log
}

/// Asserts the resumed consumer got every message of the second batch, nothing this test
/// did not send, and at most [`OLD_REDELIVERED_MAX`] of the first batch again.
fn assert_resumed(test_name: &str, state: &DeliveryState) {
    state.assert_no_problems();
    let missing = state.missing(BATCH..2 * BATCH);
    let old: BTreeMap<u64, u32> = state
        .deliveries
        .range(..BATCH)
        .map(|(&seq, &count)| (seq, count))
        .collect();
    let new_duplicates: Vec<(u64, u32)> = state
        .deliveries
        .range(BATCH..)
        .filter(|(_, &count)| count > 1)
        .map(|(&seq, &count)| (seq, count))
        .collect();
    eprintln!(
        "[client-it] {test_name}: resumed consumer got {} distinct; {} old ones again \
         ({:?}); {} new ones more than once ({:?})",
        state.deliveries.len(),
        old.len(),
        old.keys().take(40).collect::<Vec<_>>(),
        new_duplicates.len(),
        &new_duplicates[..new_duplicates.len().min(20)]
    );
    assert!(
        missing.is_empty(),
        "{} messages sent after the restart never arrived (first {:?})",
        missing.len(),
        &missing[..missing.len().min(20)]
    );
    assert!(
        state.deliveries.range(2 * BATCH..).next().is_none(),
        "seqs this test never sent: {:?}",
        state.deliveries.range(2 * BATCH..).collect::<Vec<_>>()
    );
    assert!(
        old.len() <= OLD_REDELIVERED_MAX,
        "{} already-consumed messages came again (at most {OLD_REDELIVERED_MAX} allowed): \
         the committed offsets were not kept; first {:?}",
        old.len(),
        old.keys().take(40).collect::<Vec<_>>()
    );
}
