//! rocketmq-client-rust 1.0.0 set up the way that worked against a real broker: an explicitly owned runtime, producer, push consumer and
//! lite pull consumer helpers, and a bounded runner for async test bodies.

use std::collections::HashMap;
use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Once};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use rocketmq_client_rust::{
    ClientConfig, ClientError, ClientResult, ClientRuntime, ClientRuntimeConfig,
    DefaultLitePullConsumer, DefaultMQProducer, DefaultMQPushConsumer, MQPushConsumer,
    MessageListenerConcurrently, MessageListenerOrderly, MessageSelector, TelemetryHandle,
};
use rocketmq_model::common::consumer::consume_from_where::ConsumeFromWhere;
use rocketmq_model::common::topic::TopicValidator;
use rocketmq_runtime::{RuntimeConfig, RuntimeOwner};

/// Queue depth of the client's blocking lanes. The defaults (16/8/8 on 2 cores) overflow
/// under a 10k-message push consumer ("runtime.capacity.exhausted") and the client then sends
/// messages back for retry; 4096 was measured to avoid it.
pub const CLIENT_BLOCKING_QUEUE_DEPTH: usize = 4096;
/// Worker threads of the client's own runtime (the machine has 2 cores).
pub const CLIENT_WORKER_THREADS: usize = 2;
/// Send timeout for every producer send.
pub const SEND_TIMEOUT_MS: u64 = 5000;
/// Queues of topics the tests create (at least 4, so rebalancing has queues to spread).
pub const TEST_TOPIC_QUEUES: i32 = 4;
/// Bound on any client shutdown (producer, consumer, runtime).
pub const CLIENT_SHUTDOWN_TIMEOUT: Duration = Duration::from_secs(20);
/// Lite pull consumer batch size (the client's default pull batch).
pub const LITE_PULL_BATCH_SIZE: i32 = 32;

/// Env var the client reads once per process to choose header encoding.
pub const ENV_SERIALIZE_TYPE: &str = "ROCKETMQ_SERIALIZE_TYPE";

static CLIENT_CREATED: AtomicBool = AtomicBool::new(false);

/// Switches this process's client to binary ("ROCKETMQ") remoting headers.
///
/// rocketmq-client-rust resolves `ROCKETMQ_SERIALIZE_TYPE` once, when the first client runtime
/// of the process is created, and rejects a different value later. A test binary that wants
/// binary headers must therefore call this before any [`ClientEnv`] exists (every test of that
/// binary calls it first; the env var is set only once).
///
/// # Panics
/// If a client runtime was already created in this process with the default (JSON) headers.
pub fn use_binary_headers() {
    static SET: Once = Once::new();
    SET.call_once(|| {
        assert!(
            !CLIENT_CREATED.load(Ordering::SeqCst),
            "use_binary_headers() must run before the first ClientEnv of the process"
        );
        // Edition 2021: set_var is safe; the Once orders it before any client code reads it.
        std::env::set_var(ENV_SERIALIZE_TYPE, "ROCKETMQ");
    });
}

/// The header encoding this process's client uses ("JSON" unless binary headers were chosen).
pub fn header_encoding() -> String {
    std::env::var(ENV_SERIALIZE_TYPE).unwrap_or_else(|_| "JSON".to_string())
}

/// A runtime owner plus the client runtime every producer and consumer is built on.
pub struct ClientEnv {
    owner: RuntimeOwner,
    runtime: Arc<ClientRuntime>,
}

impl ClientEnv {
    /// Builds a client runtime named `scope` with raised blocking-lane queue depths.
    pub fn new(scope: &'static str) -> ClientResult<Self> {
        CLIENT_CREATED.store(true, Ordering::SeqCst);
        let mut config =
            RuntimeConfig::for_parallelism(format!("it-{scope}"), CLIENT_WORKER_THREADS);
        let lanes = &mut config.blocking_lane_policies;
        lanes.storage_io.max_queue_depth = CLIENT_BLOCKING_QUEUE_DEPTH;
        lanes.metadata_io.max_queue_depth = CLIENT_BLOCKING_QUEUE_DEPTH;
        lanes.cpu_crypto.max_queue_depth = CLIENT_BLOCKING_QUEUE_DEPTH;
        let owner = RuntimeOwner::plan(config)
            .map_err(|source| ClientError::internal("validate client runtime config", source))?
            .build()
            .map_err(|source| ClientError::internal("build client runtime", source))?;
        let runtime = ClientRuntime::try_new(
            owner.root_context().component(scope),
            ClientRuntimeConfig {
                shutdown_timeout: CLIENT_SHUTDOWN_TIMEOUT,
                ..ClientRuntimeConfig::default()
            },
            TelemetryHandle::noop(),
        )?;
        Ok(ClientEnv { owner, runtime })
    }

    pub fn runtime(&self) -> Arc<ClientRuntime> {
        Arc::clone(&self.runtime)
    }

    /// Shuts the client runtime and its owner down, bounded by [`CLIENT_SHUTDOWN_TIMEOUT`].
    pub async fn shutdown(self) {
        let runtime = Arc::clone(&self.runtime);
        let bounded = tokio::time::timeout(CLIENT_SHUTDOWN_TIMEOUT, async move {
            let report = runtime.shutdown().await;
            if !report.is_healthy() {
                eprintln!("[client-it] client runtime shutdown: {}", report.to_json());
            }
            self.owner.shutdown_tasks().await;
            // Does not wait for the Tokio runtime's own threads.
            self.owner.shutdown_background();
        })
        .await;
        if bounded.is_err() {
            eprintln!("[client-it] client runtime shutdown timed out; abandoning it");
        }
    }
}

/// A name unique to this process and call, safe for topics and groups
/// (`[A-Za-z0-9_-]`, well below the 127-character topic limit).
pub fn unique_name(prefix: &str) -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let millis = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|elapsed| elapsed.as_millis())
        .unwrap_or(0);
    let count = COUNTER.fetch_add(1, Ordering::Relaxed);
    format!("{prefix}_{}_{millis}_{count}", std::process::id())
}

/// Starts a producer for `group`.
pub async fn start_producer(
    env: &ClientEnv,
    namesrv_addr: &str,
    group: &str,
) -> ClientResult<DefaultMQProducer> {
    let mut producer = DefaultMQProducer::builder(env.runtime())
        .producer_group(group.to_string())
        .name_server_addr(namesrv_addr.to_string())
        .send_msg_timeout(SEND_TIMEOUT_MS as u32)
        .build();
    producer.start().await?;
    Ok(producer)
}

/// Creates `topic` with `queues` read and write queues through the broker that serves the
/// auto-create template topic TBW102 (UPDATE_AND_CREATE_TOPIC).
pub async fn create_topic(
    producer: &mut DefaultMQProducer,
    topic: &str,
    queues: i32,
) -> ClientResult<()> {
    producer
        .create_topic(
            TopicValidator::AUTO_CREATE_TOPIC_KEY_TOPIC,
            topic,
            queues,
            HashMap::new(),
        )
        .await
}

/// Creates the topic, and if the broker refuses, says so and relies on auto-creation when the
/// first message is sent (RocketMQ's default of 4 queues). Tests check the queue count they
/// actually observe.
pub async fn ensure_topic(producer: &mut DefaultMQProducer, topic: &str, queues: i32) {
    if let Err(error) = create_topic(producer, topic, queues).await {
        eprintln!(
            "[client-it] create_topic({topic}, {queues}) failed: {error}; \
             relying on auto-creation"
        );
    }
}

/// Starts a producer of a new group and creates `topic` with [`TEST_TOPIC_QUEUES`] queues
/// through it, or relies on auto-creation if the broker refuses (see [`ensure_topic`]).
pub async fn start_producer_with_topic(
    env: &ClientEnv,
    namesrv_addr: &str,
    topic: &str,
) -> DefaultMQProducer {
    let mut producer = start_producer(env, namesrv_addr, &unique_name("it_pg"))
        .await
        .expect("start producer");
    ensure_topic(&mut producer, topic, TEST_TOPIC_QUEUES).await;
    producer
}

/// Starts a clustering push consumer for `group` on `topic` ("*"), consuming from the first
/// offset, with `listener`.
pub async fn start_push_consumer<L>(
    env: &ClientEnv,
    namesrv_addr: &str,
    group: &str,
    topic: &str,
    listener: L,
) -> ClientResult<DefaultMQPushConsumer>
where
    L: MessageListenerConcurrently + Send + Sync + 'static,
{
    let mut consumer = DefaultMQPushConsumer::builder(env.runtime())
        .consumer_group(group.to_string())
        .name_server_addr(namesrv_addr.to_string())
        .consume_from_where(ConsumeFromWhere::ConsumeFromFirstOffset)
        .build();
    consumer.subscribe(topic, "*").await?;
    consumer.register_message_listener_concurrently(listener);
    consumer.start().await?;
    Ok(consumer)
}

/// Starts a lite pull consumer for `group` on `topic` ("*") from the first offset, with
/// auto-commit. Call `commit_sync()` before shutdown where offsets matter (its
/// auto-commit was seen to commit offset 0 at shutdown).
pub async fn start_lite_pull_consumer(
    env: &ClientEnv,
    namesrv_addr: &str,
    group: &str,
    topic: &str,
) -> ClientResult<DefaultLitePullConsumer> {
    let consumer = DefaultLitePullConsumer::builder(env.runtime())
        .consumer_group(group.to_string())
        .name_server_addr(namesrv_addr.to_string())
        .consume_from_where(ConsumeFromWhere::ConsumeFromFirstOffset)
        .pull_batch_size(LITE_PULL_BATCH_SIZE)
        .auto_commit(true)
        .build()?;
    consumer.subscribe_with_expression(topic, "*").await?;
    consumer.start().await?;
    Ok(consumer)
}

/// Shuts a push consumer down within [`CLIENT_SHUTDOWN_TIMEOUT`].
pub async fn shutdown_push_consumer(mut consumer: DefaultMQPushConsumer) {
    if tokio::time::timeout(CLIENT_SHUTDOWN_TIMEOUT, consumer.shutdown())
        .await
        .is_err()
    {
        eprintln!("[client-it] push consumer shutdown timed out");
    }
}

/// Shuts a producer down within [`CLIENT_SHUTDOWN_TIMEOUT`].
pub async fn shutdown_producer(mut producer: DefaultMQProducer) {
    if tokio::time::timeout(CLIENT_SHUTDOWN_TIMEOUT, producer.shutdown())
        .await
        .is_err()
    {
        eprintln!("[client-it] producer shutdown timed out");
    }
}

/// Shuts down a producer that was shared (as an `Arc`) with send tasks such as
/// [`crate::scenarios::send_range`]; every one of them must have finished.
pub async fn shutdown_shared_producer(producer: Arc<DefaultMQProducer>) {
    match Arc::try_unwrap(producer) {
        Ok(producer) => shutdown_producer(producer).await,
        Err(_) => unreachable!("all send tasks have finished"),
    }
}

/// Commits and shuts a lite pull consumer down within [`CLIENT_SHUTDOWN_TIMEOUT`].
pub async fn shutdown_lite_pull_consumer(consumer: DefaultLitePullConsumer) {
    let bounded = tokio::time::timeout(CLIENT_SHUTDOWN_TIMEOUT, async {
        consumer.commit_sync().await;
        consumer.shutdown().await;
    })
    .await;
    if bounded.is_err() {
        eprintln!("[client-it] lite pull consumer shutdown timed out");
    }
}

/// Runs an async test body on a fresh multi-thread Tokio runtime, failing the test if it
/// takes longer than `timeout`. The body is polled on the calling (test) thread, so blocking
/// harness calls such as [`crate::BrokerProcess::restart`] may be used in it.
pub fn run_bounded<F>(test_name: &str, timeout: Duration, body: F)
where
    F: Future<Output = ()>,
{
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(CLIENT_WORKER_THREADS)
        .enable_all()
        .thread_name("it-test")
        .build()
        .expect("building the test's Tokio runtime");
    let started = Instant::now();
    // The timer must be created inside the runtime.
    let outcome = runtime.block_on(async { tokio::time::timeout(timeout, body).await });
    runtime.shutdown_timeout(Duration::from_secs(5));
    assert!(
        outcome.is_ok(),
        "{test_name} did not finish within {} s",
        timeout.as_secs()
    );
    eprintln!(
        "[client-it] {test_name} finished in {:.1} s (headers: {})",
        started.elapsed().as_secs_f64(),
        header_encoding()
    );
}

/// Polls `condition` every `interval` until it is true or `timeout` passes; returns whether it
/// became true.
pub async fn wait_until<C>(timeout: Duration, interval: Duration, mut condition: C) -> bool
where
    C: FnMut() -> bool,
{
    let deadline = Instant::now() + timeout;
    loop {
        if condition() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(interval).await;
    }
}

/// Starts a clustering push consumer for `group` on `topic` with `selector` (a tag
/// expression or SQL92), consuming from the first offset, with `listener`.
///
/// With `persist_offset_interval_ms`, the consumer gets its own client instance (a unique
/// instance name: the client shares one instance per client id, configured by its first
/// user) that sends its consumed offsets to the broker at that interval (the client's
/// default is 5 s; it accepts 1 s to 60 s).
pub async fn start_push_consumer_with_selector<L>(
    env: &ClientEnv,
    namesrv_addr: &str,
    group: &str,
    topic: &str,
    selector: MessageSelector,
    persist_offset_interval_ms: Option<u32>,
    listener: L,
) -> ClientResult<DefaultMQPushConsumer>
where
    L: MessageListenerConcurrently + Send + Sync + 'static,
{
    let mut builder = DefaultMQPushConsumer::builder(env.runtime());
    if let Some(interval_ms) = persist_offset_interval_ms {
        let mut config = ClientConfig::default();
        config.set_persist_consumer_offset_interval(interval_ms);
        config.set_instance_name(unique_name("it_inst").into());
        builder = builder.client_config(config);
    }
    // After client_config, which replaces the whole client configuration.
    let mut consumer = builder
        .name_server_addr(namesrv_addr.to_string())
        .consumer_group(group.to_string())
        .consume_from_where(ConsumeFromWhere::ConsumeFromFirstOffset)
        .build();
    consumer
        .subscribe_with_selector(topic, Some(selector))
        .await?;
    consumer.register_message_listener_concurrently(listener);
    consumer.start().await?;
    Ok(consumer)
}

/// [`start_lite_pull_consumer`] with a tag or SQL92 `selector` instead of "*".
pub async fn start_lite_pull_consumer_with_selector(
    env: &ClientEnv,
    namesrv_addr: &str,
    group: &str,
    topic: &str,
    selector: MessageSelector,
) -> ClientResult<DefaultLitePullConsumer> {
    let consumer = DefaultLitePullConsumer::builder(env.runtime())
        .consumer_group(group.to_string())
        .name_server_addr(namesrv_addr.to_string())
        .consume_from_where(ConsumeFromWhere::ConsumeFromFirstOffset)
        .pull_batch_size(LITE_PULL_BATCH_SIZE)
        .auto_commit(true)
        .build()?;
    consumer
        .subscribe_with_selector(topic, Some(selector))
        .await?;
    consumer.start().await?;
    Ok(consumer)
}

/// Starts a clustering push consumer for `group` on `topic` ("*") with an orderly `listener`
/// (`MessageListenerOrderly`: it consumes only queues it locked on the broker with
/// LOCK_BATCH_MQ), from the first offset. It gets its own client instance (a unique instance
/// name), so several members of one group can run in one process, each with its own client
/// id and its own locks.
pub async fn start_orderly_push_consumer<L>(
    env: &ClientEnv,
    namesrv_addr: &str,
    group: &str,
    topic: &str,
    listener: L,
) -> ClientResult<DefaultMQPushConsumer>
where
    L: MessageListenerOrderly + Send + Sync + 'static,
{
    let mut config = ClientConfig::default();
    config.set_instance_name(unique_name("it_orderly").into());
    // After client_config, which replaces the whole client configuration.
    let mut consumer = DefaultMQPushConsumer::builder(env.runtime())
        .client_config(config)
        .name_server_addr(namesrv_addr.to_string())
        .consumer_group(group.to_string())
        .consume_from_where(ConsumeFromWhere::ConsumeFromFirstOffset)
        .build();
    consumer.subscribe(topic, "*").await?;
    consumer.register_message_listener_orderly(listener);
    consumer.start().await?;
    Ok(consumer)
}
