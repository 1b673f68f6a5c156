//! The read split with a real client: a master whose memory window (40 % of
//! `RINGMQ_STORE_TOTAL_PHYSICAL_MEMORY_BYTES` = 1 MiB) is far smaller than a consumer's
//! backlog suggests the group's `whichBrokerWhenConsumeSlowly` (1, Java's default for an
//! auto-created group) in its pull answers; the push consumer then pulls from the slave, whose
//! `msgGetTotalTodayNow` grows while the master's stays put, and comes back to the master
//! (brokerId 0) once it has caught up: messages sent then are served by the master.

#![recursion_limit = "512"]

use std::sync::Arc;
use std::time::Duration;

use ringmq_client_it::ha::{runtime_number, skip_with_external_namesrv, HaGroup};
use ringmq_client_it::scenarios::{recording_listener, send_range, wait_for_distinct};
use ringmq_client_it::{
    run_bounded, shutdown_push_consumer, shutdown_shared_producer, start_producer_with_topic,
    unique_name, wait_until, ClientEnv, DeliveryLog,
};
use rocketmq_client_rust::{ClientConfig, DefaultMQPushConsumer, MQPushConsumer, MessageSelector};
use rocketmq_model::common::consumer::consume_from_where::ConsumeFromWhere;

/// The backlog: about 3 MiB of messages (the test messages take ~500 bytes in the CommitLog)
/// against a 400 KiB window, so the consumer is "behind" for most of it.
const BACKLOG: u64 = 6000;
/// Sent once the consumer caught up: the master serves them.
const TAIL: u64 = 100;
/// 1 MiB of "RAM": a 400 KiB window.
const PHYSICAL_MEMORY_BYTES: &str = "1048576";
const TEST_TIMEOUT: Duration = Duration::from_secs(300);
const CONSUME_TIMEOUT: Duration = Duration::from_secs(120);

#[test]
fn a_consumer_behind_reads_from_the_slave_and_returns_to_the_master() {
    if skip_with_external_namesrv(
        "a_consumer_behind_reads_from_the_slave_and_returns_to_the_master",
    ) {
        return;
    }
    let common = [
        ("RINGMQ_BROKER_SLAVE_READ_ENABLED", "true"),
        (
            "RINGMQ_STORE_TOTAL_PHYSICAL_MEMORY_BYTES",
            PHYSICAL_MEMORY_BYTES,
        ),
    ];
    let group = HaGroup::start("it-split", &common, &[], &[]).expect("start master and slave");
    run_bounded(
        "a_consumer_behind_reads_from_the_slave_and_returns_to_the_master",
        TEST_TIMEOUT,
        split(&group),
    );
}

async fn split(g: &HaGroup) {
    let namesrv = g.namesrv.addr();
    let (master, slave) = (g.master.broker_addr(), g.slave.broker_addr());
    let run = unique_name("r");
    let topic = unique_name("it_split");
    let env = ClientEnv::new("ha-split").expect("client runtime");
    let producer = Arc::new(start_producer_with_topic(&env, &namesrv, &topic).await);
    let sent = send_range(Arc::clone(&producer), &topic, &run, 0..BACKLOG, false).await;
    assert!(
        sent.failures.is_empty(),
        "{:?}",
        &sent.failures[..sent.failures.len().min(5)]
    );
    let master_max = runtime_number(&master, "commitLogMaxOffset").unwrap();
    assert!(
        wait_until(Duration::from_secs(60), Duration::from_millis(100), || {
            runtime_number(&slave, "commitLogMaxOffset").ok() == Some(master_max)
        })
        .await,
        "the slave did not replicate the backlog"
    );
    let get = |addr: &str| runtime_number(addr, "msgGetTotalTodayNow").unwrap();
    let (master_before, slave_before) = (get(&master), get(&slave));

    let log = Arc::new(DeliveryLog::default());
    let consumer = start_consumer(&env, &namesrv, &topic, &run, &log).await;
    assert!(
        wait_for_distinct(&log, BACKLOG as usize, CONSUME_TIMEOUT).await,
        "only {} of {BACKLOG} consumed",
        log.distinct()
    );
    let (master_served, slave_served) = (get(&master) - master_before, get(&slave) - slave_before);
    eprintln!("[client-it] backlog served: master {master_served}, slave {slave_served}");
    assert!(
        slave_served >= BACKLOG as i64 / 2,
        "the slave served {slave_served} of {BACKLOG} (master {master_served})"
    );
    assert!(
        master_served < slave_served,
        "master {master_served}, slave {slave_served}"
    );

    // Caught up: the consumer is back on the master, which serves what comes now.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let (master_mid, slave_mid) = (get(&master), get(&slave));
    let tail = send_range(
        Arc::clone(&producer),
        &topic,
        &run,
        BACKLOG..BACKLOG + TAIL,
        false,
    )
    .await;
    assert!(tail.failures.is_empty(), "{:?}", tail.failures);
    assert!(
        wait_for_distinct(&log, (BACKLOG + TAIL) as usize, CONSUME_TIMEOUT).await,
        "only {} of {} consumed",
        log.distinct(),
        BACKLOG + TAIL
    );
    let (master_tail, slave_tail) = (get(&master) - master_mid, get(&slave) - slave_mid);
    eprintln!("[client-it] tail served: master {master_tail}, slave {slave_tail}");
    assert!(
        master_tail >= TAIL as i64 && slave_tail == 0,
        "after catching up: master served {master_tail}, slave {slave_tail} of {TAIL}"
    );
    let state = log.snapshot();
    state.assert_no_problems();
    state.assert_exactly_once("split consumer", 0..BACKLOG + TAIL);
    shutdown_push_consumer(consumer).await;
    shutdown_shared_producer(producer).await;
    env.shutdown().await;
}

async fn start_consumer(
    env: &ClientEnv,
    namesrv: &str,
    topic: &str,
    run: &str,
    log: &Arc<DeliveryLog>,
) -> DefaultMQPushConsumer {
    let mut config = ClientConfig::default();
    config.set_instance_name(unique_name("it_inst").into());
    config.set_persist_consumer_offset_interval(1000);
    let mut consumer = DefaultMQPushConsumer::builder(env.runtime())
        .client_config(config)
        .name_server_addr(namesrv.to_string())
        .consumer_group(unique_name("it_split_cg"))
        .consume_from_where(ConsumeFromWhere::ConsumeFromFirstOffset)
        .build();
    consumer
        .subscribe_with_selector(topic, Some(MessageSelector::by_tag("*")))
        .await
        .expect("subscribe");
    consumer.register_message_listener_concurrently(recording_listener(
        Arc::clone(log),
        run.to_string(),
    ));
    consumer.start().await.expect("start consumer");
    consumer
}
