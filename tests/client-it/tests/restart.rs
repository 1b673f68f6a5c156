//! Test 4: with RINGMQ_STORE_FLUSH_POLICY=sync, every message the broker acknowledged survives
//! a SIGKILL: the broker is killed while a producer is sending, restarted on the same data dir
//! and ports, and a fresh consumer group reads every acknowledged message, intact.
//!
//! Needs control of the broker process, so against an external broker
//! (RINGMQ_IT_EXTERNAL_NAMESRV) it runs only when RINGMQ_IT_EXTERNAL_KILL_CMD and
//! RINGMQ_IT_EXTERNAL_RESTART_CMD are set (`scripts/peer-broker.sh exec` sets them for the
//! peer broker); otherwise it is skipped with a printed reason.

#![recursion_limit = "512"]

use std::collections::HashSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ringmq_client_it::scenarios::{recording_listener, send_range, wait_for_distinct};
use ringmq_client_it::{
    run_bounded, shutdown_push_consumer, shutdown_shared_producer, skip_unless_restartable,
    start_producer_with_topic, start_push_consumer, unique_name, ClientEnv, DeliveryLog,
    DeliveryState, TestBroker,
};

/// Sent (and all acknowledged) before the kill.
const BEFORE_KILL_COUNT: u64 = 2_000;
/// At most this many more are being sent when the kill comes.
const DURING_KILL_MAX: u64 = 100_000;
/// How long the second batch runs before SIGKILL.
const KILL_AFTER: Duration = Duration::from_millis(500);
/// Bound on the interrupted sender noticing the broker is gone.
const SENDER_STOP_TIMEOUT: Duration = Duration::from_secs(60);
const CONSUME_TIMEOUT: Duration = Duration::from_secs(120);
const DUPLICATE_GRACE: Duration = Duration::from_secs(2);
const TEST_TIMEOUT: Duration = Duration::from_secs(360);

#[test]
fn acknowledged_messages_survive_sigkill_and_restart() {
    let mut broker =
        TestBroker::start(&[("RINGMQ_STORE_FLUSH_POLICY", "sync")]).expect("start broker");
    if skip_unless_restartable(&broker, "acknowledged_messages_survive_sigkill_and_restart") {
        return;
    }
    let namesrv = broker.namesrv_addr();
    run_bounded(
        "acknowledged_messages_survive_sigkill_and_restart",
        TEST_TIMEOUT,
        kill_while_sending_then_read_back(&mut broker, namesrv),
    );
}

async fn kill_while_sending_then_read_back(broker: &mut TestBroker, namesrv: String) {
    let run = unique_name("r");
    let topic = unique_name("it_restart");
    let acked = send_and_kill_the_broker(broker, &namesrv, &topic, &run).await;

    let restarted = Instant::now();
    broker
        .restart()
        .expect("restart the broker on the same data dir");
    eprintln!(
        "[client-it] broker restarted in {:.1} s",
        restarted.elapsed().as_secs_f64()
    );

    let state = consume_with_a_fresh_group(&namesrv, &topic, &run, acked.len()).await;
    state.assert_no_problems();
    let missing = state.missing(acked.iter().copied());
    assert!(
        missing.is_empty(),
        "{} acknowledged messages lost across SIGKILL + restart (first {:?})",
        missing.len(),
        &missing[..missing.len().min(20)]
    );
    // Messages whose send failed may or may not have been stored (the client retries
    // sends); they must still be ones this test sent.
    let foreign: Vec<u64> = state
        .deliveries
        .keys()
        .copied()
        .filter(|&seq| seq >= BEFORE_KILL_COUNT + DURING_KILL_MAX)
        .collect();
    assert!(foreign.is_empty(), "unexpected seqs {foreign:?}");
}

/// Sends [`BEFORE_KILL_COUNT`] messages (all must be acknowledged), then SIGKILLs the broker
/// [`KILL_AFTER`] into a second batch of up to [`DURING_KILL_MAX`]; returns the seqs the
/// broker acknowledged in both. The producer's client runtime is its own and is shut down
/// here, before the broker restarts.
async fn send_and_kill_the_broker(
    broker: &mut TestBroker,
    namesrv: &str,
    topic: &str,
    run: &str,
) -> HashSet<u64> {
    let producer_env = ClientEnv::new("restart-producer").expect("client runtime");
    let producer = Arc::new(start_producer_with_topic(&producer_env, namesrv, topic).await);
    let before = send_range(
        Arc::clone(&producer),
        topic,
        run,
        0..BEFORE_KILL_COUNT,
        false,
    )
    .await;
    assert!(
        before.failures.is_empty(),
        "sends before the kill failed: {:?}",
        before.failures
    );

    let during_range = BEFORE_KILL_COUNT..BEFORE_KILL_COUNT + DURING_KILL_MAX;
    let sender = tokio::spawn({
        let producer = Arc::clone(&producer);
        let (topic, run) = (topic.to_string(), run.to_string());
        async move { send_range(producer, &topic, &run, during_range, true).await }
    });
    tokio::time::sleep(KILL_AFTER).await;
    broker.kill_hard().expect("SIGKILL the broker");
    eprintln!("[client-it] broker killed");
    let during = tokio::time::timeout(SENDER_STOP_TIMEOUT, sender)
        .await
        .expect("sender stops after the kill")
        .expect("sender task");
    eprintln!(
        "[client-it] {} acknowledged before the kill, {} during it ({} failed sends)",
        before.acked.len(),
        during.acked.len(),
        during.failures.len()
    );
    shutdown_shared_producer(producer).await;
    producer_env.shutdown().await;
    before.acked.iter().chain(&during.acked).copied().collect()
}

/// Consumes `topic` with a push consumer of a new group (so from offset 0) until it has
/// `acked` distinct messages or [`CONSUME_TIMEOUT`] passes, then for [`DUPLICATE_GRACE`]
/// more; returns what it received.
async fn consume_with_a_fresh_group(
    namesrv: &str,
    topic: &str,
    run: &str,
    acked: usize,
) -> DeliveryState {
    let consumer_env = ClientEnv::new("restart-consumer").expect("client runtime");
    let log = Arc::new(DeliveryLog::default());
    let consumer = start_push_consumer(
        &consumer_env,
        namesrv,
        &unique_name("it_restart_cg"),
        topic,
        recording_listener(Arc::clone(&log), run.to_string()),
    )
    .await
    .expect("start push consumer after restart");
    let complete = wait_for_distinct(&log, acked, CONSUME_TIMEOUT).await;
    tokio::time::sleep(DUPLICATE_GRACE).await;
    shutdown_push_consumer(consumer).await;
    consumer_env.shutdown().await;

    let state = log.snapshot();
    eprintln!(
        "[client-it] after restart: {} distinct delivered (complete: {complete}), {acked} acked",
        state.deliveries.len(),
    );
    state
}
