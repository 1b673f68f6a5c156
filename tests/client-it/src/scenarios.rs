//! Test bodies shared by several test binaries (the JSON and binary-header variants of
//! send-and-consume run the same scenario in different processes).

use std::collections::{BTreeMap, HashSet};
use std::ops::Range;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rocketmq_client_rust::{
    ConsumeConcurrentlyContext, ConsumeConcurrentlyStatus, DefaultLitePullConsumer,
    DefaultMQProducer, DefaultMQPushConsumer, MessageSelector, SendStatus,
};
use rocketmq_model::common::message::message_ext::MessageExt;
use rocketmq_model::common::message::message_single::Message;

use crate::client::{
    shutdown_lite_pull_consumer, shutdown_producer, shutdown_push_consumer,
    shutdown_shared_producer, start_lite_pull_consumer, start_lite_pull_consumer_with_selector,
    start_producer_with_topic, start_push_consumer, start_push_consumer_with_selector, unique_name,
    wait_until, ClientEnv, SEND_TIMEOUT_MS, TEST_TOPIC_QUEUES,
};
use crate::messages::{build_message, seq_of_body, DeliveryLog};

/// Concurrent in-flight sends (one sync producer does about 700 msg/s on this machine).
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

/// A log a consumer records each delivered message of a run in.
pub trait RecordsDeliveries: Send + Sync + 'static {
    fn record_delivery(&self, msg: &MessageExt, run: &str);
}

impl RecordsDeliveries for DeliveryLog {
    fn record_delivery(&self, msg: &MessageExt, run: &str) {
        self.record(msg, run);
    }
}

impl RecordsDeliveries for FilterLog {
    fn record_delivery(&self, msg: &MessageExt, run: &str) {
        self.record(msg, run);
    }
}

/// A push-consumer listener that records every message in `log` and acknowledges it.
pub fn recording_listener<L: RecordsDeliveries>(
    log: Arc<L>,
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
            log.record_delivery(msg, &run);
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
    let producer = Arc::new(start_producer_with_topic(&env, namesrv_addr, &topic).await);
    let sent = send_all_to_every_queue(&producer, &topic, &run, message_count).await;

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
    poll_until_all_then_grace(
        &pull,
        |msg| pull_log.record(msg, &run),
        || push_log.distinct() >= target && pull_log.distinct() >= target,
        consume_started,
        &format!("both consumers had all {target}"),
    )
    .await;
    shutdown_lite_pull_consumer(pull).await;
    shutdown_push_consumer(push).await;
    shutdown_shared_producer(producer).await;
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

/// Sends messages `0..message_count` of run `run` and asserts that every send was
/// acknowledged and that the broker spread them over at least [`TEST_TOPIC_QUEUES`] queues
/// (so that both consumers read several queues).
async fn send_all_to_every_queue(
    producer: &Arc<DefaultMQProducer>,
    topic: &str,
    run: &str,
    message_count: u64,
) -> SendOutcome {
    let send_started = Instant::now();
    let sent = send_range(Arc::clone(producer), topic, run, 0..message_count, false).await;
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
    sent
}

/// Polls the lite pull consumer `pull`, handing every message to `record`, until `all_in`
/// holds (checked after each poll) and then for [`DUPLICATE_GRACE`] more, so that duplicates
/// that come after the last new message are seen too; gives up [`CONSUME_TIMEOUT`] after the
/// call. It asserts nothing: the caller checks the recorded deliveries afterwards, which also
/// catches a timeout. Prints `what` and the time since `started` once `all_in` holds.
pub async fn poll_until_all_then_grace(
    pull: &DefaultLitePullConsumer,
    mut record: impl FnMut(&MessageExt),
    all_in: impl Fn() -> bool,
    started: Instant,
    what: &str,
) {
    let deadline = Instant::now() + CONSUME_TIMEOUT;
    let mut grace_until: Option<Instant> = None;
    loop {
        for msg in pull.poll_with_timeout(POLL_TIMEOUT_MS).await {
            record(&msg);
        }
        let now = Instant::now();
        match grace_until {
            None if all_in() => {
                eprintln!(
                    "[client-it] {what} after {:.1} s",
                    started.elapsed().as_secs_f64()
                );
                grace_until = Some(now + DUPLICATE_GRACE);
            }
            Some(until) if now >= until => break,
            _ if now >= deadline => break,
            _ => {}
        }
    }
}

/// Waits until `log` has `count` distinct seqs, up to `timeout`; returns whether it did.
pub async fn wait_for_distinct(log: &DeliveryLog, count: usize, timeout: Duration) -> bool {
    wait_until(timeout, WAIT_POLL_INTERVAL, || log.distinct() >= count).await
}

/// Tags of the filter scenario: message `seq` has `FILTER_TAGS[seq % 3]`.
pub const FILTER_TAGS: [&str; 3] = ["TagA", "TagB", "TagC"];
/// Tag expression of the filter scenario's tag consumer.
pub const FILTER_TAG_EXPRESSION: &str = "TagA || TagC";
/// SQL92 expression of the filter scenario's SQL consumers.
pub const FILTER_SQL_EXPRESSION: &str = "a > 5 AND region = 'east'";
/// User property holding an integer 0..=9.
pub const FILTER_PROP_A: &str = "a";
/// User property holding "east" or "west".
pub const FILTER_PROP_REGION: &str = "region";

/// The tag, `a` and `region` of filter message `seq`. `a` cycles with period 10 and `region`
/// with period 14, so every tag/a/region combination occurs in a few hundred messages.
pub fn filter_attributes(seq: u64) -> (&'static str, u64, &'static str) {
    let tag = FILTER_TAGS[(seq % 3) as usize];
    let a = seq % 10;
    let region = if (seq / 7).is_multiple_of(2) {
        "east"
    } else {
        "west"
    };
    (tag, a, region)
}

/// Whether filter message `seq` matches [`FILTER_TAG_EXPRESSION`].
pub fn filter_tag_matches(seq: u64) -> bool {
    matches!(filter_attributes(seq).0, "TagA" | "TagC")
}

/// Whether filter message `seq` matches [`FILTER_SQL_EXPRESSION`].
pub fn filter_sql_matches(seq: u64) -> bool {
    let (_, a, region) = filter_attributes(seq);
    a > 5 && region == "east"
}

/// Filter message `seq` of run `run`: body `"<run>:<seq>:"`, key `key-<seq>`, tag and the
/// user properties `a` and `region` from [`filter_attributes`].
pub fn build_filter_message(topic: &str, run: &str, seq: u64) -> Message {
    let (tag, a, region) = filter_attributes(seq);
    Message::builder()
        .topic(topic)
        .tags(tag)
        .keys(vec![format!("key-{seq}")])
        .body(format!("{run}:{seq}:").into_bytes())
        .raw_property(FILTER_PROP_A, a.to_string())
        .and_then(|builder| builder.raw_property(FILTER_PROP_REGION, region))
        .expect("`a` and `region` are not reserved property names")
        .build_unchecked()
}

/// Checks a received filter message against [`build_filter_message`]; returns its seq.
pub fn check_filter_message(msg: &MessageExt, run: &str) -> Result<u64, String> {
    let body = msg.body().map(|bytes| bytes.to_vec()).unwrap_or_default();
    let seq = seq_of_body(run, &body).ok_or_else(|| {
        format!(
            "foreign body {:?}",
            String::from_utf8_lossy(&body[..body.len().min(64)])
        )
    })?;
    let (tag, a, region) = filter_attributes(seq);
    let inner = msg.message_inner();
    let actual = (
        inner.tags().map(str::to_string),
        inner.property(FILTER_PROP_A).map(str::to_string),
        inner.property(FILTER_PROP_REGION).map(str::to_string),
    );
    let expected = (
        Some(tag.to_string()),
        Some(a.to_string()),
        Some(region.to_string()),
    );
    if actual == expected {
        Ok(seq)
    } else {
        Err(format!(
            "seq {seq}: (tag, a, region) = {actual:?}, expected {expected:?}"
        ))
    }
}

/// Per-seq delivery counts of one filtered consumer, and content problems.
#[derive(Default)]
pub struct FilterLog {
    inner: Mutex<(BTreeMap<u64, u32>, Vec<String>)>,
}

impl FilterLog {
    pub fn record(&self, msg: &MessageExt, run: &str) {
        let checked = check_filter_message(msg, run);
        let mut state = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        match checked {
            Ok(seq) => *state.0.entry(seq).or_insert(0) += 1,
            Err(problem) => state.1.push(problem),
        }
    }

    pub fn distinct(&self) -> usize {
        self.inner.lock().unwrap_or_else(|p| p.into_inner()).0.len()
    }

    /// Asserts exactly the seqs of `0..sent` for which `matches` holds arrived, each once,
    /// and nothing else.
    pub fn assert_exactly(&self, who: &str, sent: u64, matches: impl Fn(u64) -> bool) {
        let state = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        let (deliveries, problems) = (&state.0, &state.1);
        let missing: Vec<u64> = (0..sent)
            .filter(|&seq| matches(seq) && !deliveries.contains_key(&seq))
            .collect();
        let unexpected: Vec<(u64, (&str, u64, &str))> = deliveries
            .keys()
            .copied()
            .filter(|&seq| seq >= sent || !matches(seq))
            .map(|seq| (seq, filter_attributes(seq)))
            .collect();
        let duplicates: Vec<(u64, u32)> = deliveries
            .iter()
            .filter(|(_, &count)| count > 1)
            .map(|(&seq, &count)| (seq, count))
            .collect();
        let expected = (0..sent).filter(|&seq| matches(seq)).count();
        assert!(
            missing.is_empty()
                && unexpected.is_empty()
                && duplicates.is_empty()
                && problems.is_empty(),
            "{who}: {} distinct of {expected} expected; {} missing (first {:?}); {} not \
             matching the filter (first {:?}); {} duplicated (first {:?}); {} problems: {:?}",
            deliveries.len(),
            missing.len(),
            &missing[..missing.len().min(20)],
            unexpected.len(),
            &unexpected[..unexpected.len().min(20)],
            duplicates.len(),
            &duplicates[..duplicates.len().min(20)],
            problems.len(),
            &problems[..problems.len().min(20)]
        );
    }
}

/// Filtering: `message_count` messages with tags TagA/TagB/TagC and user properties `a`
/// (0..=9) and `region` (east/west); a push consumer with the tag expression
/// [`FILTER_TAG_EXPRESSION`], and a push consumer and a lite pull consumer with the SQL92
/// expression [`FILTER_SQL_EXPRESSION`] (three groups) must each receive exactly the matching
/// messages, once, and nothing else (checked for [`DUPLICATE_GRACE`] after the last one).
pub async fn filters(namesrv_addr: &str, message_count: u64) {
    let run = unique_name("r");
    let topic = unique_name("it_filter");
    let env = ClientEnv::new("filters").expect("client runtime");
    let producer = start_producer_with_topic(&env, namesrv_addr, &topic).await;
    send_filter_messages(&producer, &topic, &run, message_count).await;

    let logs = FilterLogs::default();
    let started = Instant::now();
    let consumers = FilterConsumers::start(&env, namesrv_addr, &topic, &run, &logs).await;
    let tag_expected = (0..message_count)
        .filter(|&s| filter_tag_matches(s))
        .count();
    let sql_expected = (0..message_count)
        .filter(|&s| filter_sql_matches(s))
        .count();
    poll_until_all_then_grace(
        &consumers.sql_pull,
        |msg| logs.sql_pull.record(msg, &run),
        || {
            logs.tag_push.distinct() >= tag_expected
                && logs.sql_push.distinct() >= sql_expected
                && logs.sql_pull.distinct() >= sql_expected
        },
        started,
        &format!("filtered consumers had all ({tag_expected} by tag, {sql_expected} by SQL92)"),
    )
    .await;
    consumers.shutdown().await;
    shutdown_producer(producer).await;
    env.shutdown().await;

    logs.assert_exactly(message_count);
}

/// Sends filter messages `0..message_count` one by one; asserts every send was acknowledged.
async fn send_filter_messages(
    producer: &DefaultMQProducer,
    topic: &str,
    run: &str,
    message_count: u64,
) {
    let mut failures = Vec::new();
    for seq in 0..message_count {
        let message = build_filter_message(topic, run, seq);
        match producer.send_with_timeout(message, SEND_TIMEOUT_MS).await {
            Ok(Some(result)) if result.send_status == SendStatus::SendOk => {}
            Ok(other) => failures.push((seq, format!("not SEND_OK: {other:?}"))),
            Err(error) => failures.push((seq, error.to_string())),
        }
    }
    assert!(failures.is_empty(), "send failures: {failures:?}");
}

/// What each of the filter scenario's three consumers received.
#[derive(Default)]
struct FilterLogs {
    tag_push: Arc<FilterLog>,
    sql_push: Arc<FilterLog>,
    sql_pull: Arc<FilterLog>,
}

impl FilterLogs {
    /// Asserts each consumer got exactly the messages of `0..sent` its expression matches.
    fn assert_exactly(&self, sent: u64) {
        self.tag_push.assert_exactly(
            &format!("tag push consumer ({FILTER_TAG_EXPRESSION})"),
            sent,
            filter_tag_matches,
        );
        self.sql_push.assert_exactly(
            &format!("SQL92 push consumer ({FILTER_SQL_EXPRESSION})"),
            sent,
            filter_sql_matches,
        );
        self.sql_pull.assert_exactly(
            &format!("SQL92 lite pull consumer ({FILTER_SQL_EXPRESSION})"),
            sent,
            filter_sql_matches,
        );
    }
}

/// The filter scenario's consumers, each in a group of its own. The push consumers record
/// into their [`FilterLogs`] themselves; the lite pull consumer's messages are recorded by
/// whoever polls it.
struct FilterConsumers {
    tag_push: DefaultMQPushConsumer,
    sql_push: DefaultMQPushConsumer,
    sql_pull: DefaultLitePullConsumer,
}

impl FilterConsumers {
    async fn start(
        env: &ClientEnv,
        namesrv_addr: &str,
        topic: &str,
        run: &str,
        logs: &FilterLogs,
    ) -> Self {
        let tag_push = start_push_consumer_with_selector(
            env,
            namesrv_addr,
            &unique_name("it_tag"),
            topic,
            MessageSelector::by_tag(FILTER_TAG_EXPRESSION),
            None,
            recording_listener(Arc::clone(&logs.tag_push), run.to_string()),
        )
        .await
        .expect("start tag push consumer");
        let sql_push = start_push_consumer_with_selector(
            env,
            namesrv_addr,
            &unique_name("it_sql"),
            topic,
            MessageSelector::by_sql(FILTER_SQL_EXPRESSION),
            None,
            recording_listener(Arc::clone(&logs.sql_push), run.to_string()),
        )
        .await
        .expect("start SQL92 push consumer");
        let sql_pull = start_lite_pull_consumer_with_selector(
            env,
            namesrv_addr,
            &unique_name("it_sqlpull"),
            topic,
            MessageSelector::by_sql(FILTER_SQL_EXPRESSION),
        )
        .await
        .expect("start SQL92 lite pull consumer");
        FilterConsumers {
            tag_push,
            sql_push,
            sql_pull,
        }
    }

    async fn shutdown(self) {
        shutdown_lite_pull_consumer(self.sql_pull).await;
        shutdown_push_consumer(self.sql_push).await;
        shutdown_push_consumer(self.tag_push).await;
    }
}
