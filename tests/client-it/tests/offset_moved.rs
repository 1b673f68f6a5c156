//! An out-of-range pull offset gets PULL_OFFSET_MOVED with the corrected offset, the client
//! adopts it, and the broker records an `OffsetMovedEvent` in topic `OFFSET_MOVED_EVENT`
//! (RocketMQ 4.9 `PullMessageProcessor.generateOffsetMovedEvent`), all driven by
//! rocketmq-client-rust:
//!
//! 1. Classic pull (`DefaultMQPullConsumer`): a pull at offset [`FAR_OFFSET`] on each queue of
//!    a topic holding [`OLD`] messages answers `OffsetIllegal` (the client's name for
//!    PULL_OFFSET_MOVED) with `nextBeginOffset` = the queue's max offset (OFFSET_OVERFLOW_BADLY),
//!    a pull at exactly the max answers `NoNewMsg` (OFFSET_OVERFLOW_ONE is not "moved"), and a
//!    pull at [`EMPTY_QUEUE_OFFSET`] on a queue with no messages answers `OffsetIllegal` with 0.
//! 2. Push consumer: a group consumes everything, its committed offsets are then set to
//!    [`FAR_OFFSET`] with the admin client's UPDATE_CONSUMER_OFFSET, and a new push consumer in
//!    the group starts: its first pulls get PULL_OFFSET_MOVED, the client stores the corrected
//!    offset, and every message sent afterwards arrives exactly once while none of the old ones
//!    comes again (the correction is to the max offset, as in Java 4.9).
//! 3. The events: read back from `OFFSET_MOVED_EVENT` queue 0 with the classic pull consumer,
//!    exactly one per moved pull, with tags and keys = the group and the JSON fields
//!    `consumerGroup`, `messageQueue` {topic, brokerName, queueId}, `offsetRequest`, `offsetNew`.
//!
//! 4. OFFSET_TOO_SMALL (second test): with tiny CommitLog files and a retention time of 0 h,
//!    retention deletes the old files, so every queue's min offset rises above 0. A classic
//!    pull at 0 and at min - 1 is moved to the min, a pull at the min finds the message there,
//!    and a push consumer of a new group (CONSUME_FROM_FIRST_OFFSET: it starts at 0) is moved
//!    to the min and gets exactly the messages at offsets min..max of every queue, once each.
//!
//! Against an external broker the test is skipped: RocketMQ 5.x brokers (and the peer broker)
//! no longer store the event, which this test requires.

#![recursion_limit = "512"]
#![allow(deprecated)] // DefaultMQPullConsumer (Classic Pull) is deprecated but still supported.

use std::collections::{BTreeMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ringmq_client_it::client::TEST_TOPIC_QUEUES;
use ringmq_client_it::scenarios::{recording_listener, send_range, wait_for_distinct};
use ringmq_client_it::{
    check_message, create_topic, run_bounded, shutdown_producer, shutdown_push_consumer,
    start_producer, start_push_consumer_with_selector, unique_name, wait_until, ClientEnv,
    DeliveryLog, DeliveryState, TestBroker,
};
use rocketmq_client_rust::{
    ConsumeConcurrentlyContext, ConsumeConcurrentlyStatus, DefaultMQAdminExt, DefaultMQProducer,
    DefaultMQPullConsumer, DefaultMQPushConsumer, MessageListenerConcurrently, MessageSelector,
    OffsetAdmin, PullResult, PullStatus,
};
use rocketmq_model::common::message::message_queue::MessageQueue;

const TEST_NAME: &str = "out_of_range_offsets_get_pull_offset_moved_and_an_event";
/// Messages in the topic before any offset is moved.
const OLD: u64 = 40;
/// Messages sent after the push consumer's offsets were corrected.
const NEW: u64 = 40;
/// An offset far beyond any queue's max offset in this test.
const FAR_OFFSET: i64 = 1_000_000;
/// A non-zero offset on a queue that has no messages (NO_MESSAGE_IN_QUEUE or
/// NO_MATCHED_LOGIC_QUEUE: both move the consumer to 0).
const EMPTY_QUEUE_OFFSET: i64 = 5;
/// The broker's system topic for offset-moved events (one queue).
const OFFSET_MOVED_EVENT: &str = "OFFSET_MOVED_EVENT";
/// Messages per classic pull.
const PULL_BATCH: i32 = 32;
/// Bound on the pulls reading one queue to its end (events are few; this is a runaway guard).
const READ_PULLS_MAX: usize = 1000;
/// After the first push consumer's shutdown: its offset upload is one-way (as in Java), so it
/// gets this long to reach the broker before the admin overwrites the offsets.
const SHUTDOWN_UPLOAD_SETTLE: Duration = Duration::from_millis(500);
const CONSUME_TIMEOUT: Duration = Duration::from_secs(60);
/// Bound on the second push consumer starting, rebalancing and pulling every queue once.
const MOVED_TIMEOUT: Duration = Duration::from_secs(60);
const DUPLICATE_GRACE: Duration = Duration::from_secs(2);
const WAIT_POLL_INTERVAL: Duration = Duration::from_millis(200);
const TEST_TIMEOUT: Duration = Duration::from_secs(240);

const TOO_SMALL_TEST_NAME: &str = "offsets_below_the_min_are_moved_up_after_retention";
/// Messages sent in the too-small test: about 0.5 KiB each, so they span several of the
/// [`SMALL_COMMIT_LOG_FILE_SIZE_BYTES`] files.
const RETAINED_TEST_MESSAGES: u64 = 1200;
/// The smallest CommitLog file the broker accepts with [`SMALL_MAX_MESSAGE_SIZE_BYTES`]
/// (it must exceed the max message size + 64 KiB).
const SMALL_COMMIT_LOG_FILE_SIZE_BYTES: &str = "131072";
const SMALL_MAX_MESSAGE_SIZE_BYTES: &str = "32768";
/// Retention runs this often in the too-small test.
const FAST_DELETE_CHECK_INTERVAL_MS: &str = "200";
/// Bound on retention raising every queue's min offset above 0.
const RETENTION_TIMEOUT: Duration = Duration::from_secs(30);
/// Once every queue's min is above 0: a few more retention passes so that every file but the
/// one being written is gone and the mins no longer change.
const RETENTION_SETTLE: Duration = Duration::from_secs(1);

/// One `OffsetMovedEvent` as stored by the broker.
#[derive(Debug, Clone, PartialEq, Eq)]
struct MovedEvent {
    group: String,
    topic: String,
    broker_name: String,
    queue_id: i32,
    offset_request: i64,
    offset_new: i64,
    tags: Option<String>,
    keys: Option<Vec<String>>,
}

fn parse_event(msg: &rocketmq_model::common::message::message_ext::MessageExt) -> MovedEvent {
    let body = msg.body().map(|bytes| bytes.to_vec()).unwrap_or_default();
    let json: serde_json::Value = serde_json::from_slice(&body).unwrap_or_else(|error| {
        panic!(
            "OFFSET_MOVED_EVENT body is not JSON ({error}): {:?}",
            String::from_utf8_lossy(&body)
        )
    });
    let text = |value: &serde_json::Value, field: &str| -> String {
        value[field]
            .as_str()
            .unwrap_or_else(|| panic!("event field {field} is not a string: {json}"))
            .to_string()
    };
    let number = |value: &serde_json::Value, field: &str| -> i64 {
        value[field]
            .as_i64()
            .unwrap_or_else(|| panic!("event field {field} is not an integer: {json}"))
    };
    let queue = &json["messageQueue"];
    let inner = msg.message_inner();
    MovedEvent {
        group: text(&json, "consumerGroup"),
        topic: text(queue, "topic"),
        broker_name: text(queue, "brokerName"),
        queue_id: i32::try_from(number(queue, "queueId")).expect("queueId fits i32"),
        offset_request: number(&json, "offsetRequest"),
        offset_new: number(&json, "offsetNew"),
        tags: inner.tags().map(str::to_string),
        keys: inner.keys(),
    }
}

/// Reads every message of `queue` from offset 0 with classic pulls.
async fn read_queue(
    consumer: &DefaultMQPullConsumer,
    queue: &MessageQueue,
) -> Vec<rocketmq_model::common::message::message_ext::MessageExt> {
    let mut offset = 0_i64;
    let mut messages = Vec::new();
    for _ in 0..READ_PULLS_MAX {
        let result = consumer
            .pull(queue, "*", offset, PULL_BATCH)
            .await
            .unwrap_or_else(|error| panic!("pull {queue:?} at {offset}: {error}"));
        match result.pull_status() {
            PullStatus::Found => {
                messages.extend(result.msg_found_list().unwrap_or_default().iter().cloned());
            }
            PullStatus::NoNewMsg => return messages,
            other => panic!("reading {queue:?} at {offset}: unexpected {other:?}: {result}"),
        }
        offset = i64::try_from(result.next_begin_offset()).expect("offset fits i64");
    }
    panic!("{queue:?} did not end within {READ_PULLS_MAX} pulls");
}

/// All events of `group`, in store order.
async fn events_of(
    consumer: &DefaultMQPullConsumer,
    event_queue: &MessageQueue,
    group: &str,
) -> Vec<MovedEvent> {
    read_queue(consumer, event_queue)
        .await
        .iter()
        .map(parse_event)
        .filter(|event| event.group == group)
        .collect()
}

/// Checks that `events` are exactly one per `(queue, offset_request, offset_new)` expected.
fn check_events(
    who: &str,
    events: &[MovedEvent],
    group: &str,
    expected: &[(&MessageQueue, i64, i64)],
) {
    let mut expected_events: Vec<MovedEvent> = expected
        .iter()
        .map(|(queue, offset_request, offset_new)| MovedEvent {
            group: group.to_string(),
            topic: queue.topic().to_string(),
            broker_name: queue.broker_name().to_string(),
            queue_id: queue.queue_id(),
            offset_request: *offset_request,
            offset_new: *offset_new,
            tags: Some(group.to_string()),
            keys: Some(vec![group.to_string()]),
        })
        .collect();
    let mut got = events.to_vec();
    let order = |event: &MovedEvent| {
        (
            event.topic.clone(),
            event.queue_id,
            event.offset_request,
            event.offset_new,
        )
    };
    expected_events.sort_by_key(order);
    got.sort_by_key(order);
    assert_eq!(got, expected_events, "{who}: OffsetMovedEvents differ");
}

fn assert_moved(result: &PullResult, queue: &MessageQueue, requested: i64, corrected: u64) {
    assert_eq!(
        (result.pull_status(), result.next_begin_offset()),
        (&PullStatus::OffsetIllegal, corrected),
        "pull {queue:?} at {requested}: expected PULL_OFFSET_MOVED to {corrected}, got {result}"
    );
    assert!(
        result.msg_found_list().unwrap_or_default().is_empty(),
        "a moved pull carries no messages: {result}"
    );
}

/// A started producer after creating `topics` (with [`TEST_TOPIC_QUEUES`] queues each).
async fn producer_with_topics(
    env: &ClientEnv,
    namesrv: &str,
    topics: &[&str],
) -> Arc<DefaultMQProducer> {
    let mut producer = start_producer(env, namesrv, &unique_name("it_pg"))
        .await
        .expect("start producer");
    for topic in topics {
        create_topic(&mut producer, topic, TEST_TOPIC_QUEUES)
            .await
            .unwrap_or_else(|error| panic!("create topic {topic}: {error}"));
    }
    Arc::new(producer)
}

/// A started classic pull consumer of `group`.
async fn start_puller(env: &ClientEnv, namesrv: &str, group: &str) -> DefaultMQPullConsumer {
    let puller = DefaultMQPullConsumer::builder(env.runtime())
        .consumer_group(group.to_string())
        .name_server_addr(namesrv.to_string())
        .build()
        .expect("build classic pull consumer");
    puller.start().await.expect("start classic pull consumer");
    puller
}

/// The queues of `topic`, by queue id.
async fn sorted_queues(puller: &DefaultMQPullConsumer, topic: &str) -> Vec<MessageQueue> {
    let mut queues = puller
        .fetch_subscribe_message_queues(topic)
        .await
        .unwrap_or_else(|error| panic!("queues of {topic}: {error}"));
    queues.sort_by_key(MessageQueue::queue_id);
    queues
}

/// The single queue of the OFFSET_MOVED_EVENT topic.
async fn event_queue(puller: &DefaultMQPullConsumer) -> MessageQueue {
    let mut event_queues = sorted_queues(puller, OFFSET_MOVED_EVENT).await;
    assert_eq!(event_queues.len(), 1, "{event_queues:?}");
    event_queues.remove(0)
}

/// Stops the clients a test started.
async fn shut_down(
    env: ClientEnv,
    puller: DefaultMQPullConsumer,
    producer: Arc<DefaultMQProducer>,
) {
    if let Err(error) = puller.shutdown().await {
        eprintln!("[client-it] classic pull consumer shutdown: {error}");
    }
    match Arc::try_unwrap(producer) {
        Ok(producer) => shutdown_producer(producer).await,
        Err(_) => unreachable!("all send tasks have finished"),
    }
    env.shutdown().await;
}

/// Reads the events of `group` and checks them against `expected` (see [`check_events`]).
async fn assert_events(
    puller: &DefaultMQPullConsumer,
    event_queue: &MessageQueue,
    who: &str,
    group: &str,
    expected: &[(&MessageQueue, i64, i64)],
) {
    let events = events_of(puller, event_queue, group).await;
    check_events(who, &events, group, expected);
}

/// Starts a push consumer of `group` on every tag of `topic` with `listener`.
async fn start_push_group<L>(
    env: &ClientEnv,
    namesrv: &str,
    group: &str,
    topic: &str,
    listener: L,
) -> rocketmq_client_rust::ClientResult<DefaultMQPushConsumer>
where
    L: MessageListenerConcurrently + Send + Sync + 'static,
{
    start_push_consumer_with_selector(
        env,
        namesrv,
        group,
        topic,
        MessageSelector::by_tag("*"),
        None,
        listener,
    )
    .await
}

#[test]
fn out_of_range_offsets_get_pull_offset_moved_and_an_event() {
    let mut broker = TestBroker::start(&[]).expect("start broker");
    let Some(process) = broker.local_mut() else {
        eprintln!(
            "[client-it] SKIPPED {TEST_NAME}: needs ringmq (Java 4.9 behaviour); 5.x brokers do \
             not store OffsetMovedEvents"
        );
        return;
    };
    let namesrv = process.namesrv_addr();
    let broker_addr = process.broker_addr();
    run_bounded(
        TEST_NAME,
        TEST_TIMEOUT,
        offsets_beyond_the_max(namesrv, broker_addr),
    );
}

async fn offsets_beyond_the_max(namesrv: String, broker_addr: String) {
    let run = unique_name("r");
    let topic = unique_name("it_moved");
    let empty_topic = unique_name("it_moved_empty");
    let pull_group = unique_name("it_moved_pull_cg");
    let push_group = unique_name("it_moved_push_cg");
    let env = ClientEnv::new("offset-moved").expect("client runtime");

    let producer = producer_with_topics(&env, &namesrv, &[&topic, &empty_topic]).await;
    let old = send_range(Arc::clone(&producer), &topic, &run, 0..OLD, false).await;
    assert!(old.failures.is_empty(), "sends failed: {:?}", old.failures);

    // 1. Classic pulls out of range.
    let puller = start_puller(&env, &namesrv, &pull_group).await;
    let queues = sorted_queues(&puller, &topic).await;
    assert_eq!(queues.len(), TEST_TOPIC_QUEUES as usize, "{queues:?}");
    let max_offsets = check_pulls_beyond_the_max(&puller, &queues).await;
    let empty_queue = check_pull_on_an_empty_queue(&puller, &empty_topic).await;
    eprintln!("[client-it] classic pulls moved as expected; max offsets {max_offsets:?}");

    // 2. A push consumer whose committed offsets are beyond the max.
    consume_all_old(&env, &namesrv, &push_group, &topic, &run).await;
    commit_far_offsets(&env, &namesrv, &broker_addr, &push_group, &queues).await;
    let second_log = Arc::new(DeliveryLog::default());
    let started = Instant::now();
    let consumer = start_push_group(
        &env,
        &namesrv,
        &push_group,
        &topic,
        recording_listener(Arc::clone(&second_log), run.clone()),
    )
    .await
    .expect("start second push consumer");
    let event_queue = event_queue(&puller).await;
    wait_for_a_moved_pull_per_queue(&puller, &event_queue, &push_group, queues.len(), started)
        .await;

    let new = send_range(Arc::clone(&producer), &topic, &run, OLD..OLD + NEW, false).await;
    assert!(new.failures.is_empty(), "sends failed: {:?}", new.failures);
    let all_new = wait_until(CONSUME_TIMEOUT, WAIT_POLL_INTERVAL, || {
        second_log.has_all(OLD..OLD + NEW)
    })
    .await;
    eprintln!(
        "[client-it] moved consumer had all new messages: {all_new} after {:.1} s",
        started.elapsed().as_secs_f64()
    );
    tokio::time::sleep(DUPLICATE_GRACE).await;
    shutdown_push_consumer(consumer).await;
    assert_only_new_ones_once(&second_log.snapshot());

    // 3. The events, read once more now that everything has settled.
    let beyond_the_max: Vec<(&MessageQueue, i64, i64)> = queues
        .iter()
        .map(|queue| (queue, FAR_OFFSET, max_offsets[&queue.queue_id()]))
        .collect();
    assert_events(
        &puller,
        &event_queue,
        "push group",
        &push_group,
        &beyond_the_max,
    )
    .await;
    let mut pull_expected = beyond_the_max.clone();
    pull_expected.push((&empty_queue, EMPTY_QUEUE_OFFSET, 0));
    assert_events(
        &puller,
        &event_queue,
        "classic pull group",
        &pull_group,
        &pull_expected,
    )
    .await;

    shut_down(env, puller, producer).await;
}

/// On every queue (min offset 0): a pull at [`FAR_OFFSET`] is moved to the max, with the
/// queue's min and max in the result, and a pull at the max finds no new message. Asserts the
/// queues hold the [`OLD`] messages between them; returns each queue's max offset.
async fn check_pulls_beyond_the_max(
    puller: &DefaultMQPullConsumer,
    queues: &[MessageQueue],
) -> BTreeMap<i32, i64> {
    let mut max_offsets: BTreeMap<i32, i64> = BTreeMap::new();
    for queue in queues {
        let max = puller.max_offset(queue).await.expect("max offset");
        let min = puller.min_offset(queue).await.expect("min offset");
        assert_eq!(min, 0, "min offset of {queue:?}");
        max_offsets.insert(queue.queue_id(), max);
        let moved = puller
            .pull(queue, "*", FAR_OFFSET, PULL_BATCH)
            .await
            .expect("pull far beyond the max");
        assert_moved(&moved, queue, FAR_OFFSET, max as u64);
        assert_eq!(
            (moved.min_offset(), moved.max_offset()),
            (0, max as u64),
            "min/max offsets of a moved pull on {queue:?}"
        );
        let at_max = puller
            .pull(queue, "*", max, PULL_BATCH)
            .await
            .expect("pull at the max");
        assert_eq!(
            (at_max.pull_status(), at_max.next_begin_offset()),
            (&PullStatus::NoNewMsg, max as u64),
            "pull {queue:?} at its max {max}: {at_max}"
        );
    }
    assert_eq!(
        max_offsets.values().sum::<i64>(),
        OLD as i64,
        "every old message is in one of the queues: {max_offsets:?}"
    );
    max_offsets
}

/// A pull at [`EMPTY_QUEUE_OFFSET`] on the first queue of `empty_topic` is moved to 0;
/// returns that queue.
async fn check_pull_on_an_empty_queue(
    puller: &DefaultMQPullConsumer,
    empty_topic: &str,
) -> MessageQueue {
    let empty_queues = sorted_queues(puller, empty_topic).await;
    let empty_queue = empty_queues
        .first()
        .expect("the empty topic has queues")
        .clone();
    let moved = puller
        .pull(&empty_queue, "*", EMPTY_QUEUE_OFFSET, PULL_BATCH)
        .await
        .expect("pull an empty queue");
    assert_moved(&moved, &empty_queue, EMPTY_QUEUE_OFFSET, 0);
    empty_queue
}

/// A first push consumer of `group` consumes every old message and is shut down; its offset
/// upload then gets [`SHUTDOWN_UPLOAD_SETTLE`] to reach the broker, so that it cannot land
/// after (and undo) the offsets the admin commits next.
async fn consume_all_old(env: &ClientEnv, namesrv: &str, group: &str, topic: &str, run: &str) {
    let first_log = Arc::new(DeliveryLog::default());
    let consumer = start_push_group(
        env,
        namesrv,
        group,
        topic,
        recording_listener(Arc::clone(&first_log), run.to_string()),
    )
    .await
    .expect("start first push consumer");
    let complete = wait_for_distinct(&first_log, OLD as usize, CONSUME_TIMEOUT).await;
    assert!(
        complete,
        "first consumer got {} of {OLD}",
        first_log.distinct()
    );
    shutdown_push_consumer(consumer).await;
    tokio::time::sleep(SHUTDOWN_UPLOAD_SETTLE).await;
}

/// Sets `group`'s committed offset of every queue to [`FAR_OFFSET`] with the admin client
/// (UPDATE_CONSUMER_OFFSET to the broker at `broker_addr`).
async fn commit_far_offsets(
    env: &ClientEnv,
    namesrv: &str,
    broker_addr: &str,
    group: &str,
    queues: &[MessageQueue],
) {
    let mut admin = DefaultMQAdminExt::new(env.runtime());
    admin.set_namesrv_addr(namesrv.to_string());
    admin.start().await.expect("start admin client");
    for queue in queues {
        admin
            .update_consume_offset(
                broker_addr.to_string().into(),
                group.to_string().into(),
                queue.clone(),
                FAR_OFFSET as u64,
            )
            .await
            .unwrap_or_else(|error| panic!("commit {FAR_OFFSET} for {queue:?}: {error}"));
    }
    admin.shutdown().await;
}

/// Waits up to [`MOVED_TIMEOUT`] until `group` has an OffsetMovedEvent for each of the
/// `queue_count` queues, and asserts it does.
async fn wait_for_a_moved_pull_per_queue(
    puller: &DefaultMQPullConsumer,
    event_queue: &MessageQueue,
    group: &str,
    queue_count: usize,
    started: Instant,
) {
    // The broker stores the event before it answers the moved pull, so once every queue
    // has one, every queue's corrected offset is fixed and later messages lie beyond it.
    let deadline = Instant::now() + MOVED_TIMEOUT;
    let push_events = loop {
        let events = events_of(puller, event_queue, group).await;
        let moved_queues: HashSet<i32> = events.iter().map(|event| event.queue_id).collect();
        if moved_queues.len() == queue_count || Instant::now() >= deadline {
            break events;
        }
        tokio::time::sleep(WAIT_POLL_INTERVAL).await;
    };
    eprintln!(
        "[client-it] {} OffsetMovedEvents for the push group after {:.1} s: {push_events:?}",
        push_events.len(),
        started.elapsed().as_secs_f64()
    );
    assert_eq!(
        push_events
            .iter()
            .map(|event| event.queue_id)
            .collect::<HashSet<_>>()
            .len(),
        queue_count,
        "the second push consumer did not pull every queue at {FAR_OFFSET} within {} s",
        MOVED_TIMEOUT.as_secs()
    );
}

/// Asserts the moved push consumer got every new message exactly once and no old one.
fn assert_only_new_ones_once(state: &DeliveryState) {
    state.assert_no_problems();
    let missing = state.missing(OLD..OLD + NEW);
    assert!(
        missing.is_empty(),
        "messages sent after the offsets were corrected never arrived: {missing:?}"
    );
    let duplicates: Vec<(&u64, &u32)> = state
        .deliveries
        .iter()
        .filter(|(_, &count)| count > 1)
        .collect();
    assert!(
        duplicates.is_empty(),
        "delivered more than once: {duplicates:?}"
    );
    let old_again: Vec<&u64> = state.deliveries.range(..OLD).map(|(seq, _)| seq).collect();
    assert!(
        old_again.is_empty(),
        "the offsets were corrected to the max, yet old messages came again: {old_again:?}"
    );
}

/// A push-consumer listener recording `(queue id, queue offset)` of every message (with its
/// content checked) and acknowledging it.
fn offset_recording_listener(
    deliveries: Arc<Mutex<BTreeMap<(i32, i64), u32>>>,
    problems: Arc<Mutex<Vec<String>>>,
    run: String,
) -> impl Fn(
    &[&rocketmq_model::common::message::message_ext::MessageExt],
    &ConsumeConcurrentlyContext,
) -> rocketmq_client_rust::ClientResult<ConsumeConcurrentlyStatus>
       + Send
       + Sync
       + 'static {
    move |msgs, _context| {
        for msg in msgs {
            *deliveries
                .lock()
                .unwrap_or_else(|poison| poison.into_inner())
                .entry((msg.queue_id(), msg.queue_offset()))
                .or_insert(0) += 1;
            if let Err(problem) = check_message(msg, &run) {
                problems
                    .lock()
                    .unwrap_or_else(|poison| poison.into_inner())
                    .push(problem);
            }
        }
        Ok(ConsumeConcurrentlyStatus::ConsumeSuccess)
    }
}

#[test]
fn offsets_below_the_min_are_moved_up_after_retention() {
    let mut broker = TestBroker::start(&[
        (
            "RINGMQ_STORE_COMMIT_LOG_FILE_SIZE_BYTES",
            SMALL_COMMIT_LOG_FILE_SIZE_BYTES,
        ),
        (
            "RINGMQ_STORE_MAX_MESSAGE_SIZE_BYTES",
            SMALL_MAX_MESSAGE_SIZE_BYTES,
        ),
        ("RINGMQ_STORE_FILE_RESERVED_TIME_HOURS", "0"),
        (
            "RINGMQ_STORE_DELETE_CHECK_INTERVAL_MS",
            FAST_DELETE_CHECK_INTERVAL_MS,
        ),
    ])
    .expect("start broker");
    let Some(process) = broker.local_mut() else {
        eprintln!(
            "[client-it] SKIPPED {TOO_SMALL_TEST_NAME}: needs ringmq (retention settings, \
             OffsetMovedEvents)"
        );
        return;
    };
    let namesrv = process.namesrv_addr();
    run_bounded(
        TOO_SMALL_TEST_NAME,
        TEST_TIMEOUT,
        offsets_below_the_min(namesrv),
    );
}

async fn offsets_below_the_min(namesrv: String) {
    let run = unique_name("r");
    let topic = unique_name("it_small");
    let pull_group = unique_name("it_small_pull_cg");
    let push_group = unique_name("it_small_push_cg");
    let env = ClientEnv::new("offset-too-small").expect("client runtime");

    let producer = producer_with_topics(&env, &namesrv, &[&topic]).await;
    let sent = send_range(
        Arc::clone(&producer),
        &topic,
        &run,
        0..RETAINED_TEST_MESSAGES,
        false,
    )
    .await;
    assert!(
        sent.failures.is_empty(),
        "sends failed: {:?}",
        sent.failures
    );

    let puller = start_puller(&env, &namesrv, &pull_group).await;
    let queues = sorted_queues(&puller, &topic).await;
    assert_eq!(queues.len(), TEST_TOPIC_QUEUES as usize, "{queues:?}");
    wait_for_retention(&puller, &queues).await;
    let ranges = check_pulls_below_the_min(&puller, &queues).await;
    eprintln!("[client-it] after retention (min, max) per queue: {ranges:?}");

    // A new group starting from the first offset pulls at 0 and is moved to the min.
    let expected: BTreeMap<(i32, i64), u32> = ranges
        .iter()
        .flat_map(|(&queue_id, &(min, max))| (min..max).map(move |offset| ((queue_id, offset), 1)))
        .collect();
    let (got, problems) =
        consume_from_the_first_offset(&env, &namesrv, &push_group, &topic, &run, &expected).await;
    assert!(problems.is_empty(), "content problems: {problems:#?}");
    assert_retained_exactly_once(&expected, &got);

    let event_queue = event_queue(&puller).await;
    let mut pull_expected = Vec::new();
    let mut push_expected = Vec::new();
    for queue in &queues {
        let (min, _) = ranges[&queue.queue_id()];
        pull_expected.push((queue, 0, min));
        pull_expected.push((queue, min - 1, min));
        push_expected.push((queue, 0, min));
    }
    assert_events(
        &puller,
        &event_queue,
        "classic pull group",
        &pull_group,
        &pull_expected,
    )
    .await;
    assert_events(
        &puller,
        &event_queue,
        "push group",
        &push_group,
        &push_expected,
    )
    .await;

    shut_down(env, puller, producer).await;
}

/// Waits until retention has deleted every CommitLog file but the one being written: every
/// queue's min offset is above 0 (asserted within [`RETENTION_TIMEOUT`]), and then
/// [`RETENTION_SETTLE`] more.
async fn wait_for_retention(puller: &DefaultMQPullConsumer, queues: &[MessageQueue]) {
    let deadline = Instant::now() + RETENTION_TIMEOUT;
    loop {
        let mut all_above_zero = true;
        for queue in queues {
            all_above_zero &= puller.min_offset(queue).await.expect("min offset") > 0;
        }
        if all_above_zero {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "retention did not raise every queue's min offset above 0 within {} s",
            RETENTION_TIMEOUT.as_secs()
        );
        tokio::time::sleep(WAIT_POLL_INTERVAL).await;
    }
    tokio::time::sleep(RETENTION_SETTLE).await;
}

/// On every queue (with 0 < min < max): pulls at 0 and at min - 1 are moved to the min, and a
/// pull at the min finds the message there. Returns each queue's (min, max) offsets.
async fn check_pulls_below_the_min(
    puller: &DefaultMQPullConsumer,
    queues: &[MessageQueue],
) -> BTreeMap<i32, (i64, i64)> {
    let mut ranges: BTreeMap<i32, (i64, i64)> = BTreeMap::new();
    for queue in queues {
        let min = puller.min_offset(queue).await.expect("min offset");
        let max = puller.max_offset(queue).await.expect("max offset");
        assert!(0 < min && min < max, "{queue:?}: min {min}, max {max}");
        ranges.insert(queue.queue_id(), (min, max));
        for requested in [0, min - 1] {
            let moved = puller
                .pull(queue, "*", requested, PULL_BATCH)
                .await
                .expect("pull below the min");
            assert_moved(&moved, queue, requested, min as u64);
        }
        let found = puller
            .pull(queue, "*", min, 1)
            .await
            .expect("pull at the min");
        let first = found.msg_found_list().unwrap_or_default().first().cloned();
        assert_eq!(
            (found.pull_status(), first.map(|msg| msg.queue_offset())),
            (&PullStatus::Found, Some(min)),
            "pull {queue:?} at its min {min}: {found}"
        );
    }
    ranges
}

/// Runs a push consumer of the new `group` (CONSUME_FROM_FIRST_OFFSET) until it has every
/// `(queue id, offset)` of `expected` or [`CONSUME_TIMEOUT`] passes, then for
/// [`DUPLICATE_GRACE`] more. Returns how often each `(queue id, offset)` was delivered and
/// the content problems seen.
async fn consume_from_the_first_offset(
    env: &ClientEnv,
    namesrv: &str,
    group: &str,
    topic: &str,
    run: &str,
    expected: &BTreeMap<(i32, i64), u32>,
) -> (BTreeMap<(i32, i64), u32>, Vec<String>) {
    let deliveries = Arc::new(Mutex::new(BTreeMap::new()));
    let problems = Arc::new(Mutex::new(Vec::new()));
    let started = Instant::now();
    let consumer = start_push_group(
        env,
        namesrv,
        group,
        topic,
        offset_recording_listener(
            Arc::clone(&deliveries),
            Arc::clone(&problems),
            run.to_string(),
        ),
    )
    .await
    .expect("start push consumer");
    let complete = wait_until(CONSUME_TIMEOUT, WAIT_POLL_INTERVAL, || {
        let got = deliveries
            .lock()
            .unwrap_or_else(|poison| poison.into_inner());
        expected.keys().all(|key| got.contains_key(key))
    })
    .await;
    eprintln!(
        "[client-it] push consumer had every retained message: {complete} after {:.1} s",
        started.elapsed().as_secs_f64()
    );
    tokio::time::sleep(DUPLICATE_GRACE).await;
    shutdown_push_consumer(consumer).await;
    let got = deliveries
        .lock()
        .unwrap_or_else(|poison| poison.into_inner())
        .clone();
    let problems = problems
        .lock()
        .unwrap_or_else(|poison| poison.into_inner())
        .clone();
    (got, problems)
}

/// Asserts `got` has every `(queue id, offset)` of `expected`, each exactly once, and nothing
/// else.
fn assert_retained_exactly_once(
    expected: &BTreeMap<(i32, i64), u32>,
    got: &BTreeMap<(i32, i64), u32>,
) {
    let missing: Vec<&(i32, i64)> = expected
        .keys()
        .filter(|key| !got.contains_key(key))
        .collect();
    let unexpected: Vec<(&(i32, i64), &u32)> = got
        .iter()
        .filter(|(key, count)| expected.get(key) != Some(count))
        .collect();
    assert!(
        missing.is_empty() && unexpected.is_empty(),
        "push consumer: {} retained messages missing (first {:?}); (queue, offset) -> count \
         not exactly once in min..max: {:?}",
        missing.len(),
        &missing[..missing.len().min(20)],
        &unexpected[..unexpected.len().min(20)]
    );
}
