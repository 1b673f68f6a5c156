//! Message query and operator offset moves, driven by rocketmq-client-rust:
//!
//! 1. `query_message_by_key_and_by_unique_key`: a producer sends messages with keys; the
//!    producer's `query_message` finds them by key (QUERY_MESSAGE 12 on the broker's index),
//!    and `view_message` with the msg id the send returned (the UNIQ_KEY, which the client
//!    cannot decode as an offset id) finds the message by unique key.
//! 2. `reset_offset_by_time_reconsumes_from_the_timestamp`: a running push consumer consumes
//!    batches A and B; the admin resets the group's offsets to a time between them
//!    (INVOKE_BROKER_TO_RESET_OFFSET 222); the broker tells the consumer
//!    (RESET_CONSUMER_CLIENT_OFFSET 220) and it consumes B again, and not A.
//! 3. The same consumer answers GET_CONSUMER_RUNNING_INFO (307) relayed by the broker: the
//!    admin gets the client's running info with the consumer's subscription.

#![recursion_limit = "512"]

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use ringmq_client_it::messages::expected_keys;
use ringmq_client_it::scenarios::{recording_listener, send_range, wait_for_distinct};
use ringmq_client_it::{
    build_message, check_message, run_bounded, shutdown_producer, shutdown_push_consumer,
    shutdown_shared_producer, start_producer_with_topic, unique_name, wait_until, ClientEnv,
    DeliveryLog, TestBroker,
};
use rocketmq_client_rust::{
    ClientConfig, ConsumerAdmin, DefaultMQAdminExt, DefaultMQPushConsumer, MQPushConsumer,
    OffsetAdmin,
};
use rocketmq_model::common::consumer::consume_from_where::ConsumeFromWhere;
use rocketmq_model::common::message::message_ext::MessageExt;

/// Java `MessageConst.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX`.
const UNIQ_KEY: &str = "UNIQ_KEY";
const TEST_TIMEOUT: Duration = Duration::from_secs(240);
const CONSUME_TIMEOUT: Duration = Duration::from_secs(60);
const WAIT_POLL_INTERVAL: Duration = Duration::from_millis(200);
/// Messages per batch of the reset test.
const BATCH: u64 = 20;
/// Gap around the reset timestamp, so no message of A shares B's side of it.
const BATCH_GAP: Duration = Duration::from_millis(1500);
/// Bound on retrying the reset while the consumer's first offsets reach the broker.
const RESET_RETRIES_MAX: usize = 50;

/// The UNIQ_KEY property: the msg id a send returns.
fn uniq_key(msg: &MessageExt) -> Option<&str> {
    msg.message_inner().property(UNIQ_KEY)
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

#[test]
fn query_message_by_key_and_by_unique_key() {
    let broker = TestBroker::start(&[]).expect("start broker");
    let namesrv = broker.namesrv_addr();
    run_bounded(
        "query_message_by_key_and_by_unique_key",
        TEST_TIMEOUT,
        async move {
            let env = ClientEnv::new("query").expect("client runtime");
            let topic = unique_name("it_query");
            let run = unique_name("q");
            let mut producer = start_producer_with_topic(&env, &namesrv, &topic).await;
            let begin = now_ms().saturating_sub(60_000);
            let mut ids = Vec::new();
            for seq in 0..5 {
                let result = producer
                    .send(build_message(&topic, &run, seq))
                    .await
                    .expect("send")
                    .expect("a send result");
                ids.push(result.msg_id.clone().expect("msg id").to_string());
            }
            // The broker indexes on a thread behind its writer (as Java's reput): wait,
            // bounded, until the last message answers its own key (earlier ones are indexed
            // before it).
            let last_key = &expected_keys(&run, 4)[0];
            let deadline = std::time::Instant::now() + Duration::from_secs(10);
            while producer
                .query_message(&topic, last_key, 32, begin, now_ms() + 60_000)
                .await
                .is_err()
            {
                assert!(std::time::Instant::now() < deadline, "not indexed in 10 s");
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            let key = &expected_keys(&run, 3)[0];
            let found = producer
                .query_message(&topic, key, 32, begin, now_ms() + 60_000)
                .await
                .expect("query by key");
            let list = found.message_list();
            assert_eq!(list.len(), 1, "{list:?}");
            assert_eq!(uniq_key(&list[0]), Some(ids[3].as_str()));
            assert_eq!(check_message(&list[0], &run), Ok(3));
            // The run key is on every message.
            let all = producer
                .query_message(
                    &topic,
                    &expected_keys(&run, 0)[1],
                    32,
                    begin,
                    now_ms() + 60_000,
                )
                .await
                .expect("query by the shared key");
            assert_eq!(all.message_list().len(), 5);
            // By the id the send returned (the UNIQ_KEY).
            let viewed = producer
                .view_message(&topic, &ids[2])
                .await
                .expect("view by unique key");
            assert_eq!(uniq_key(&viewed), Some(ids[2].as_str()));
            assert_eq!(check_message(&viewed, &run), Ok(2));
            assert!(producer
                .query_message(&topic, "no-such-key", 32, begin, now_ms() + 60_000)
                .await
                .is_err());
            shutdown_producer(producer).await;
            env.shutdown().await;
        },
    );
}

/// A push consumer with a known client id (`127.0.0.1@<instance>`).
async fn start_consumer(
    env: &ClientEnv,
    namesrv: &str,
    group: &str,
    topic: &str,
    log: Arc<DeliveryLog>,
    run: &str,
) -> (DefaultMQPushConsumer, String) {
    let mut config = ClientConfig::new();
    config.set_namesrv_addr(namesrv.to_string().into());
    config.set_client_ip("127.0.0.1".into());
    config.set_instance_name(unique_name("inst").into());
    let client_id = config.build_mq_client_id();
    let mut consumer = DefaultMQPushConsumer::builder(env.runtime())
        .client_config(config)
        .consumer_group(group.to_string())
        .consume_from_where(ConsumeFromWhere::ConsumeFromFirstOffset)
        .build();
    consumer.subscribe(topic, "*").await.expect("subscribe");
    consumer.register_message_listener_concurrently(recording_listener(log, run.to_string()));
    consumer.start().await.expect("start consumer");
    (consumer, client_id)
}

#[test]
fn reset_offset_by_time_reconsumes_from_the_timestamp() {
    let broker = TestBroker::start(&[]).expect("start broker");
    let namesrv = broker.namesrv_addr();
    run_bounded(
        "reset_offset_by_time_reconsumes_from_the_timestamp",
        TEST_TIMEOUT,
        async move {
            let env = ClientEnv::new("reset").expect("client runtime");
            let topic = unique_name("it_reset");
            let group = unique_name("it_reset_g");
            let run = unique_name("r");
            let producer = Arc::new(start_producer_with_topic(&env, &namesrv, &topic).await);
            let log = Arc::new(DeliveryLog::default());
            let (consumer, client_id) =
                start_consumer(&env, &namesrv, &group, &topic, Arc::clone(&log), &run).await;
            let a = send_range(Arc::clone(&producer), &topic, &run, 0..BATCH, true).await;
            assert_eq!(a.acked.len() as u64, BATCH, "{:?}", a.failures);
            tokio::time::sleep(BATCH_GAP).await;
            let reset_to = now_ms();
            tokio::time::sleep(BATCH_GAP).await;
            let b = send_range(Arc::clone(&producer), &topic, &run, BATCH..2 * BATCH, true).await;
            assert_eq!(b.acked.len() as u64, BATCH, "{:?}", b.failures);
            assert!(wait_for_distinct(&log, 2 * BATCH as usize, CONSUME_TIMEOUT).await);

            let mut admin = DefaultMQAdminExt::new(env.runtime());
            admin.set_namesrv_addr(namesrv.clone());
            admin.start().await.expect("start admin");
            check_running_info(&admin, &group, &client_id, &topic).await;

            // Every queue needs a committed offset first (Java's rule); the consumer's periodic
            // commit brings them.
            let mut reset = None;
            for _ in 0..RESET_RETRIES_MAX {
                match admin
                    .reset_offset_by_timestamp(
                        None,
                        topic.clone().into(),
                        group.clone().into(),
                        reset_to,
                        true,
                    )
                    .await
                {
                    Ok(table) => {
                        reset = Some(table);
                        break;
                    }
                    Err(error) => {
                        eprintln!("[client-it] reset not yet possible: {error}");
                        tokio::time::sleep(Duration::from_secs(1)).await;
                    }
                }
            }
            let table = reset.expect("the reset succeeded");
            assert!(!table.is_empty());
            // B again, A not.
            let again = wait_until(CONSUME_TIMEOUT, WAIT_POLL_INTERVAL, || {
                let state = log.snapshot();
                (BATCH..2 * BATCH).all(|seq| state.deliveries.get(&seq).copied().unwrap_or(0) >= 2)
            })
            .await;
            let state = log.snapshot();
            state.assert_no_problems();
            assert!(again, "B was not consumed again: {:?}", state.deliveries);
            for seq in 0..BATCH {
                assert_eq!(
                    state.deliveries.get(&seq),
                    Some(&1),
                    "A message {seq} came again"
                );
            }
            admin.shutdown().await;
            shutdown_push_consumer(consumer).await;
            shutdown_shared_producer(producer).await;
            env.shutdown().await;
        },
    );
}

/// GET_CONSUMER_RUNNING_INFO through the broker: the consumer's own answer.
async fn check_running_info(admin: &DefaultMQAdminExt, group: &str, client_id: &str, topic: &str) {
    let info = admin
        .get_consumer_running_info(
            group.to_string().into(),
            client_id.to_string().into(),
            false,
            None,
        )
        .await
        .expect("consumer running info");
    assert!(
        info.subscription_set
            .iter()
            .any(|sub| sub.topic.as_str() == topic),
        "{info:?}"
    );
    let missing = admin
        .get_consumer_running_info(
            group.to_string().into(),
            "127.0.0.1@nobody".into(),
            false,
            None,
        )
        .await;
    assert!(missing.is_err());
}
