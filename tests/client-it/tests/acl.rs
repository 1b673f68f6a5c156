//! ACL 1.0 with rocketmq-client-rust's `AclClientRPCHook`: against a broker started with
//! `RINGMQ_ACL_ENABLED`, a producer and a push consumer with the right keys send and receive;
//! with a wrong secret key or no key at all, sends fail and nothing is consumed.

#![recursion_limit = "512"]

use std::sync::Arc;
use std::time::Duration;

use ringmq_client_it::client::{shutdown_producer, shutdown_push_consumer, unique_name, ClientEnv};
use ringmq_client_it::scenarios::{recording_listener, wait_for_distinct};
use ringmq_client_it::{build_message, run_bounded, DeliveryLog, TestBroker};
use rocketmq_client_rust::{
    AclClientRPCHook, ClientConfig, ClientRpcHook, DefaultMQProducer, DefaultMQPushConsumer,
    MQPushConsumer, SendStatus, SessionCredentials,
};
use rocketmq_model::common::consumer::consume_from_where::ConsumeFromWhere;

const TEST_TIMEOUT: Duration = Duration::from_secs(240);
const TOPIC: &str = "it_acl_topic";
const GROUP: &str = "it_acl_group";
const MESSAGES: u64 = 20;
/// How long a refused consumer is watched for deliveries it must not get.
const REFUSED_WATCH: Duration = Duration::from_secs(8);

const PLAIN_ACL: &str = "\
accounts:
  - accessKey: itProducerAK
    secretKey: itProducerSecret
    defaultTopicPerm: DENY
    defaultGroupPerm: SUB
    topicPerms:
      - it_acl_topic=PUB
  - accessKey: itConsumerAK
    secretKey: itConsumerSecret
    defaultTopicPerm: DENY
    defaultGroupPerm: DENY
    topicPerms:
      - it_acl_topic=SUB
    groupPerms:
      - it_acl_group=SUB
";

/// `Some((access key, secret key))` signs every request; `None` sends no key.
type Keys = Option<(&'static str, &'static str)>;

fn hook(keys: Keys) -> Option<Arc<ClientRpcHook>> {
    keys.map(|(ak, sk)| {
        Arc::new(AclClientRPCHook::new(SessionCredentials::with_keys(ak, sk))) as Arc<ClientRpcHook>
    })
}

/// A client configuration of its own: the client shares one instance per client id, and an
/// instance has one RPC hook.
fn own_instance() -> ClientConfig {
    let mut config = ClientConfig::default();
    config.set_instance_name(unique_name("it_acl_inst").into());
    config
}

async fn producer(env: &ClientEnv, namesrv: &str, keys: Keys) -> DefaultMQProducer {
    let mut builder = DefaultMQProducer::builder(env.runtime()).client_config(own_instance());
    if let Some(hook) = hook(keys) {
        builder = builder.rpc_hook(hook);
    }
    let mut producer = builder
        .producer_group(unique_name("it_acl_pg"))
        .name_server_addr(namesrv.to_string())
        .send_msg_timeout(3_000)
        .retry_times_when_send_failed(0)
        .build();
    producer.start().await.expect("start producer");
    producer
}

/// Sends `count` messages of `run`; returns how many were SEND_OK and the first error.
async fn send(producer: &DefaultMQProducer, run: &str, count: u64) -> (u64, Option<String>) {
    let mut ok = 0;
    let mut first_error = None;
    for seq in 0..count {
        match producer.send(build_message(TOPIC, run, seq)).await {
            Ok(Some(result)) if result.send_status == SendStatus::SendOk => ok += 1,
            Ok(other) => {
                first_error.get_or_insert(format!("{other:?}"));
            }
            Err(error) => {
                first_error.get_or_insert(error.to_string());
            }
        }
    }
    (ok, first_error)
}

/// A push consumer of [`GROUP`] on [`TOPIC`]; `Err` if the client refuses to start.
async fn consumer(
    env: &ClientEnv,
    namesrv: &str,
    keys: Keys,
    log: Arc<DeliveryLog>,
    run: &str,
) -> Result<DefaultMQPushConsumer, String> {
    let mut consumer = DefaultMQPushConsumer::builder(env.runtime())
        .client_config(own_instance())
        .rpc_hook(hook(keys))
        .name_server_addr(namesrv.to_string())
        .consumer_group(GROUP.to_string())
        .consume_from_where(ConsumeFromWhere::ConsumeFromFirstOffset)
        .build();
    consumer
        .subscribe(TOPIC, "*")
        .await
        .map_err(|e| e.to_string())?;
    consumer.register_message_listener_concurrently(recording_listener(log, run.to_string()));
    consumer.start().await.map_err(|e| e.to_string())?;
    Ok(consumer)
}

/// A consumer with `keys` must receive nothing of `run`.
async fn assert_consumes_nothing(env: &ClientEnv, namesrv: &str, keys: Keys, run: &str) {
    let log = Arc::new(DeliveryLog::default());
    match consumer(env, namesrv, keys, Arc::clone(&log), run).await {
        Err(error) => {
            eprintln!("[client-it] consumer with keys {keys:?} refused at start: {error}")
        }
        Ok(consumer) => {
            let got_any = wait_for_distinct(&log, 1, REFUSED_WATCH).await;
            shutdown_push_consumer(consumer).await;
            assert!(!got_any, "a consumer with keys {keys:?} received messages");
        }
    }
}

#[test]
fn acl_right_key_works_wrong_key_and_no_key_are_refused() {
    let acl_dir = tempfile::tempdir().expect("tempdir");
    let acl_file = acl_dir.path().join("plain_acl.yml");
    std::fs::write(&acl_file, PLAIN_ACL).expect("write plain_acl.yml");
    let broker = TestBroker::start(&[
        ("RINGMQ_ACL_ENABLED", "true"),
        (
            "RINGMQ_ACL_FILE_PATH",
            acl_file.to_str().expect("utf-8 path"),
        ),
    ])
    .expect("start broker");
    if broker.is_external() {
        eprintln!("[client-it] skipped: an external broker has its own ACL configuration");
        return;
    }
    let namesrv = broker.namesrv_addr();
    run_bounded("acl", TEST_TIMEOUT, async {
        let env = ClientEnv::new("acl").expect("client runtime");
        let run = unique_name("r");

        let good = producer(&env, &namesrv, Some(("itProducerAK", "itProducerSecret"))).await;
        let (ok, error) = send(&good, &run, MESSAGES).await;
        assert_eq!(ok, MESSAGES, "right key: {error:?}");
        shutdown_producer(good).await;

        for keys in [Some(("itProducerAK", "wrong-secret")), None] {
            let bad = producer(&env, &namesrv, keys).await;
            let (ok, error) = send(&bad, &run, 2).await;
            eprintln!("[client-it] producer with keys {keys:?}: {error:?}");
            assert_eq!(ok, 0, "a producer with keys {keys:?} sent");
            assert!(error.is_some());
            shutdown_producer(bad).await;
        }

        assert_consumes_nothing(&env, &namesrv, Some(("itConsumerAK", "wrong-secret")), &run).await;
        assert_consumes_nothing(&env, &namesrv, None, &run).await;

        let log = Arc::new(DeliveryLog::default());
        let keys = Some(("itConsumerAK", "itConsumerSecret"));
        let good = consumer(&env, &namesrv, keys, Arc::clone(&log), &run)
            .await
            .expect("start consumer");
        let all = wait_for_distinct(&log, MESSAGES as usize, Duration::from_secs(60)).await;
        shutdown_push_consumer(good).await;
        assert!(
            all,
            "right key consumer got {} of {MESSAGES}",
            log.distinct()
        );
        env.shutdown().await;
    });
}
