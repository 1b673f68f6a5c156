//! A master outage with a real client: a SYNC_MASTER (so every acknowledged message is on the
//! slave) and its slave (slaveReadEnable on); a push consumer, paced by small pull batches,
//! works through a stream of messages. The master is SIGKILLed mid-way: the consumer goes on
//! from the slave and its offset commits land on the slave. The master restarts on its data:
//! the consumer goes back to it, without consuming again more than the messages it had in
//! flight at the kill, and gets the messages sent after the restart from it (all but one
//! batch per queue, which a pull still parked on the slave may take). Every
//! acknowledged message is received; duplicates are counted and bounded.

#![recursion_limit = "512"]

use std::sync::Arc;
use std::time::Duration;

use ringmq_client_it::ha::{consumer_offset, runtime_number, skip_with_external_namesrv, HaGroup};
use ringmq_client_it::scenarios::{recording_listener, send_range, wait_for_distinct};
use ringmq_client_it::{
    ensure_topic, run_bounded, shutdown_push_consumer, shutdown_shared_producer, unique_name,
    wait_until, ClientEnv, DeliveryLog,
};
use rocketmq_client_rust::{
    ClientConfig, DefaultMQProducer, DefaultMQPushConsumer, MQPushConsumer, MessageSelector,
};
use rocketmq_model::common::consumer::consume_from_where::ConsumeFromWhere;

/// Messages sent before the kill.
const BEFORE: u64 = 2000;
/// Messages sent after the master is back.
const AFTER: u64 = 300;
/// The kill comes once this many were consumed.
const CONSUMED_AT_KILL: usize = 400;
/// Pull pacing: 8 messages per queue every 100 ms (about 320 msg/s over 4 queues), so the
/// consumer is still far from done at the kill.
const PULL_BATCH: u32 = 8;
const PULL_INTERVAL_MS: u64 = 100;
/// The client's route refresh and heartbeat periods in this test (the client's minimum).
const CLIENT_ROUTE_PERIOD_MS: u32 = 10_000;
/// The client's offset upload period (the client's minimum).
const CLIENT_PERSIST_PERIOD_MS: u32 = 1000;
/// Messages consumed twice: at most what a consumer can hold in flight when its broker dies
/// (one pull batch per queue being consumed and one answered but uncommitted per queue), with
/// room for the client's own retry of an uncommitted batch.
const DUPLICATES_MAX: usize = 4 * 4 * PULL_BATCH as usize;
/// New messages the slave may still serve once the master is back: a pull parked on the slave
/// (the client parks for 15 s, and goes on pulling from the slave until a route refresh shows
/// it the master) is answered by the slave when the new messages reach it, one batch per
/// queue; that answer suggests the master (brokerId 0), so the queue's next pull goes there.
const SERVED_BY_THE_SLAVE_MAX: u64 = 4 * PULL_BATCH as u64;
const TEST_TIMEOUT: Duration = Duration::from_secs(300);
const PHASE_TIMEOUT: Duration = Duration::from_secs(90);

#[test]
fn consumption_goes_on_from_the_slave_while_the_master_is_down() {
    if skip_with_external_namesrv("consumption_goes_on_from_the_slave_while_the_master_is_down") {
        return;
    }
    let common = [("RINGMQ_BROKER_SLAVE_READ_ENABLED", "true")];
    let master = [("RINGMQ_BROKER_ROLE", "SYNC_MASTER")];
    let mut group =
        HaGroup::start("it-outage", &common, &master, &[]).expect("start master and slave");
    run_bounded(
        "consumption_goes_on_from_the_slave_while_the_master_is_down",
        TEST_TIMEOUT,
        outage(&mut group),
    );
}

/// What the phases share.
struct Run {
    namesrv: String,
    slave: String,
    run: String,
    topic: String,
    cg: String,
    log: Arc<DeliveryLog>,
}

async fn outage(g: &mut HaGroup) {
    let r = Run {
        namesrv: g.namesrv.addr(),
        slave: g.slave.broker_addr(),
        run: unique_name("r"),
        topic: unique_name("it_outage"),
        cg: unique_name("it_outage_cg"),
        log: Arc::new(DeliveryLog::default()),
    };
    let env = ClientEnv::new("ha-outage").expect("client runtime");
    // A SYNC_MASTER without its slave answers SLAVE_NOT_AVAILABLE.
    wait_connected(
        &g.master.broker_addr(),
        "the slave did not connect to the master",
    )
    .await;
    let producer = Arc::new(start_producer(&env, &r.namesrv, &r.topic).await);
    send_all(&producer, &r, 0..BEFORE).await;
    let consumer = start_consumer(&env, &r).await;
    assert!(
        wait_for_distinct(&r.log, CONSUMED_AT_KILL, PHASE_TIMEOUT).await,
        "only {} consumed before the kill",
        r.log.distinct()
    );
    g.master.kill_hard().expect("SIGKILL the master");
    consume_from_the_slave(&r).await;
    g.master.restart().expect("restart the master");
    let master = g.master.broker_addr();
    wait_connected(
        &master,
        "the slave did not reconnect to the restarted master",
    )
    .await;
    // Give the clients a route refresh to see the master again.
    tokio::time::sleep(Duration::from_millis(
        u64::from(CLIENT_ROUTE_PERIOD_MS) + 2000,
    ))
    .await;
    let master_got = runtime_number(&master, "msgGetTotalTodayNow").unwrap();
    send_all(&producer, &r, BEFORE..BEFORE + AFTER).await;
    assert!(
        wait_for_distinct(&r.log, (BEFORE + AFTER) as usize, PHASE_TIMEOUT).await,
        "only {} of {} consumed after the restart",
        r.log.distinct(),
        BEFORE + AFTER
    );
    let master_served = runtime_number(&master, "msgGetTotalTodayNow").unwrap() - master_got;
    assert!(
        master_served >= (AFTER - SERVED_BY_THE_SLAVE_MAX) as i64,
        "the restarted master served {master_served} of the {AFTER} new messages (pulls \
         parked on the slave may take {SERVED_BY_THE_SLAVE_MAX})"
    );
    tokio::time::sleep(Duration::from_secs(3)).await;
    check_deliveries(&r.log);
    shutdown_push_consumer(consumer).await;
    shutdown_shared_producer(producer).await;
    env.shutdown().await;
}

async fn wait_connected(master: &str, failure: &str) {
    assert!(
        wait_until(PHASE_TIMEOUT, Duration::from_millis(100), || {
            runtime_number(master, "haConnectionNums").ok() == Some(1)
        })
        .await,
        "{failure}"
    );
}

async fn send_all(producer: &Arc<DefaultMQProducer>, r: &Run, seqs: std::ops::Range<u64>) {
    let sent = send_range(Arc::clone(producer), &r.topic, &r.run, seqs, false).await;
    assert!(
        sent.failures.is_empty(),
        "{:?}",
        &sent.failures[..sent.failures.len().min(5)]
    );
}

/// With the master down: every message acknowledged before the kill comes from the slave,
/// and the consumer's commits land there.
async fn consume_from_the_slave(r: &Run) {
    let at_kill = r.log.distinct();
    let slave_got_at_kill = runtime_number(&r.slave, "msgGetTotalTodayNow").unwrap();
    eprintln!("[client-it] master killed after {at_kill} consumed");
    assert!(
        wait_for_distinct(&r.log, BEFORE as usize, PHASE_TIMEOUT).await,
        "only {} of {BEFORE} consumed with the master down",
        r.log.distinct()
    );
    let slave_served = runtime_number(&r.slave, "msgGetTotalTodayNow").unwrap() - slave_got_at_kill;
    assert!(
        slave_served >= (BEFORE as usize - at_kill) as i64,
        "the slave served {slave_served}, {} were left at the kill",
        BEFORE as usize - at_kill
    );
    let committed = || -> i64 {
        (0..4)
            .map(|q| {
                consumer_offset(&r.slave, &r.cg, &r.topic, q)
                    .ok()
                    .flatten()
                    .unwrap_or(0)
            })
            .sum()
    };
    assert!(
        wait_until(PHASE_TIMEOUT, Duration::from_millis(200), || committed()
            >= BEFORE as i64)
        .await,
        "the slave holds commits summing to {} of {BEFORE}",
        committed()
    );
}

/// Every message arrived, intact; duplicates within the in-flight bound.
fn check_deliveries(log: &DeliveryLog) {
    let state = log.snapshot();
    state.assert_no_problems();
    assert_eq!(state.missing(0..BEFORE + AFTER), Vec::<u64>::new());
    let duplicates: usize = state
        .deliveries
        .values()
        .map(|n| (*n as usize).saturating_sub(1))
        .sum();
    eprintln!("[client-it] duplicates across the outage: {duplicates}");
    assert!(
        duplicates <= DUPLICATES_MAX,
        "{duplicates} messages consumed again (at most {DUPLICATES_MAX} were in flight)"
    );
}

/// A producer that refreshes its routes every [`CLIENT_ROUTE_PERIOD_MS`], so it finds the master
/// again soon after the restart; it creates `topic`.
async fn start_producer(env: &ClientEnv, namesrv: &str, topic: &str) -> DefaultMQProducer {
    let mut config = ClientConfig::default();
    config.set_instance_name(unique_name("it_inst").into());
    config.set_poll_name_server_interval(CLIENT_ROUTE_PERIOD_MS);
    let mut producer = DefaultMQProducer::builder(env.runtime())
        .client_config(config)
        .producer_group(unique_name("it_pg"))
        .name_server_addr(namesrv.to_string())
        .build();
    producer.start().await.expect("start producer");
    ensure_topic(&mut producer, topic, 4).await;
    producer
}

async fn start_consumer(env: &ClientEnv, r: &Run) -> DefaultMQPushConsumer {
    let mut config = ClientConfig::default();
    config.set_instance_name(unique_name("it_inst").into());
    config.set_persist_consumer_offset_interval(CLIENT_PERSIST_PERIOD_MS);
    config.set_poll_name_server_interval(CLIENT_ROUTE_PERIOD_MS);
    config.set_heartbeat_broker_interval(CLIENT_ROUTE_PERIOD_MS);
    let mut consumer = DefaultMQPushConsumer::builder(env.runtime())
        .client_config(config)
        .name_server_addr(r.namesrv.clone())
        .consumer_group(r.cg.clone())
        .consume_from_where(ConsumeFromWhere::ConsumeFromFirstOffset)
        .pull_batch_size(PULL_BATCH)
        .pull_interval(PULL_INTERVAL_MS)
        .build();
    consumer
        .subscribe_with_selector(&r.topic, Some(MessageSelector::by_tag("*")))
        .await
        .expect("subscribe");
    consumer.register_message_listener_concurrently(recording_listener(
        Arc::clone(&r.log),
        r.run.clone(),
    ));
    consumer.start().await.expect("start consumer");
    consumer
}
