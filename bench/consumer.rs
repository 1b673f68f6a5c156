//! The long-polling pull consumer: one PULL_MESSAGE in flight per queue of every topic, each
//! re-issued from the response callback. The subscription travels in every pull
//! (FLAG_SUBSCRIPTION), so the broker needs no prior heartbeat for filtering; one HEART_BEAT
//! per broker (repeated every 30 s) still registers the group like a real client.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ringmq::remoting::codes::{request_code, response_code};
use ringmq::remoting::command::RemotingCommand;
use ringmq::remoting::headers::{
    GetMaxOffsetRequestHeader, GetMaxOffsetResponseHeader, PullMessageRequestHeader,
    PullMessageResponseHeader, QueryConsumerOffsetRequestHeader, QueryConsumerOffsetResponseHeader,
    UpdateConsumerOffsetRequestHeader,
};

use crate::args::{FilterType, StartFrom};
use crate::client::{fetch_route, Connection, ConnectionPool, QueueAddr, ADMIN_TIMEOUT_MS};
use crate::error::{BenchError, RpcError};
use crate::record::records;
use crate::stats::{epoch_us, Meter, Recorder};

/// `PullSysFlag.FLAG_COMMIT_OFFSET`.
pub const FLAG_COMMIT_OFFSET: i32 = 0x1;
/// `PullSysFlag.FLAG_SUSPEND`.
pub const FLAG_SUSPEND: i32 = 0x2;
/// `PullSysFlag.FLAG_SUBSCRIPTION`.
pub const FLAG_SUBSCRIPTION: i32 = 0x4;
/// Java client `BROKER_SUSPEND_MAX_TIME_MILLIS`.
pub const SUSPEND_TIMEOUT_MS: i64 = 15_000;
/// Java client `CONSUMER_TIMEOUT_MILLIS_WHEN_SUSPEND`: RPC timeout of a held pull.
pub const PULL_RPC_TIMEOUT_MS: u64 = 30_000;
/// Java client `PULL_TIME_DELAY_MILLS_WHEN_EXCEPTION`.
pub const PULL_DELAY_ON_ERROR: Duration = Duration::from_millis(3000);
/// Java client `heartbeatBrokerInterval`.
pub const HEARTBEAT_INTERVAL: Duration = Duration::from_secs(30);
/// How long a consumer waits for its topic to appear at the name server.
pub const ROUTE_WAIT: Duration = Duration::from_secs(10);
/// Longest wait for the final offset commits.
pub const COMMIT_WAIT: Duration = Duration::from_secs(3);

/// What a consume latency sample measures.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LatencyMode {
    /// Arrival time − send time carried in the message (end-to-end; the age of a backlog).
    FromBorn,
    /// Round trip of the pull request that fetched the batch.
    PullRoundTrip,
}

/// The subscription carried by every pull and the heartbeat.
#[derive(Debug, Clone)]
pub struct Subscription {
    pub filter_type: FilterType,
    pub expression: String,
    pub sub_version: i64,
}

impl Subscription {
    pub fn new(filter_type: FilterType, expression: &str) -> Self {
        let expression = expression.trim();
        Subscription {
            filter_type,
            expression: if expression.is_empty() {
                "*".into()
            } else {
                expression.into()
            },
            sub_version: epoch_us() / 1000,
        }
    }

    /// Tags of a TAG subscription (`None` = all), split like Java's `FilterAPI`.
    pub fn tags(&self) -> Option<Vec<String>> {
        if self.filter_type != FilterType::Tag || self.expression == "*" {
            return None;
        }
        let tags: Vec<String> = self
            .expression
            .split("||")
            .map(str::trim)
            .filter(|t| !t.is_empty())
            .map(str::to_owned)
            .collect();
        (!tags.is_empty()).then_some(tags)
    }

    /// `SubscriptionData` JSON.
    pub fn to_json(&self, topic: &str) -> serde_json::Value {
        let tags = self.tags().unwrap_or_default();
        let codes: Vec<i32> = tags.iter().map(|t| java_string_hash(t)).collect();
        serde_json::json!({
            "classFilterMode": false,
            "topic": topic,
            "subString": self.expression,
            "tagsSet": tags,
            "codeSet": codes,
            "subVersion": self.sub_version,
            "expressionType": self.filter_type.name(),
        })
    }
}

/// Java `String.hashCode` (over UTF-16 code units), used for tag codes.
pub fn java_string_hash(s: &str) -> i32 {
    s.encode_utf16().fold(0i32, |h, unit| {
        h.wrapping_mul(31).wrapping_add(i32::from(unit))
    })
}

/// One queue being consumed.
pub struct QueueTask {
    pub queue: QueueAddr,
    conn: Arc<Connection>,
    recorder: Arc<Recorder>,
    /// This connection's recorders of the e2e's two sides (see [`E2eSides`]).
    sides: [Arc<Recorder>; 2],
    next_offset: AtomicI64,
    start_offset: i64,
    /// Catch-up: stop at this offset.
    end_offset: Option<i64>,
    done: AtomicBool,
    /// Records received (consumed or filtered) from this queue.
    consumed: AtomicI64,
}

impl QueueTask {
    pub fn next_offset(&self) -> i64 {
        self.next_offset.load(Ordering::Relaxed)
    }

    /// Offsets this queue moved over since the start: should equal the messages consumed from
    /// it (plus filtered ones); a gap means a broker answered a pull with fewer records than
    /// its nextBeginOffset skipped.
    pub fn advanced(&self) -> i64 {
        self.next_offset() - self.start_offset
    }

    /// Catch-up end offset.
    pub fn end_offset(&self) -> Option<i64> {
        self.end_offset
    }
}

/// The two sides of an e2e latency, split at the broker's store timestamp (whole
/// milliseconds, so each side is off by up to 1 ms): send to store, and store to consume.
/// They tell a tail made before the append (the send path) from one made after it (the
/// wake, the pull answer, the consumer).
pub struct E2eSides {
    pub to_store: Arc<Meter>,
    pub from_store: Arc<Meter>,
}

impl E2eSides {
    fn new() -> Self {
        E2eSides {
            to_store: Meter::new("born_to_stored"),
            from_store: Meter::new("stored_to_consumed"),
        }
    }

    /// p50, p99 and p99.9 of both sides in µs, for a report's `extra`.
    pub fn to_json(&self) -> serde_json::Value {
        let mut out = serde_json::Map::new();
        for meter in [&self.to_store, &self.from_store] {
            let merged = meter.merged();
            for (name, q) in [("p50", 0.5), ("p99", 0.99), ("p999", 0.999)] {
                out.insert(
                    format!("{}_{name}_us", meter.name),
                    serde_json::json!(merged.value_at_quantile(q)),
                );
            }
        }
        serde_json::Value::Object(out)
    }
}

/// Shared state of a running consumer.
pub struct ConsumerCtx {
    pub group: String,
    pub subscription: Subscription,
    tag_filter: Option<HashSet<Vec<u8>>>,
    pub pull_batch: i32,
    pub commit: bool,
    pub meter: Arc<Meter>,
    pub latency: LatencyMode,
    pub sides: E2eSides,
    pub stop: Arc<AtomicBool>,
    pub fatal: Arc<Mutex<Option<String>>>,
    delayed: Mutex<Vec<(Instant, Arc<QueueTask>)>>,
    in_flight: AtomicUsize,
    done_queues: AtomicUsize,
    filtered: AtomicI64,
    /// Pull requests sent, and answers that carried no message (hold expired, not found,
    /// retry, offset moved). Many empty answers per second mean the broker is not holding.
    pulls: AtomicI64,
    empty_pulls: AtomicI64,
    /// Bytes of SUCCESS pull response bodies: the whole records the broker sent.
    record_bytes: AtomicU64,
    pub tasks: Mutex<Vec<Arc<QueueTask>>>,
}

/// How a consumer pulls.
#[derive(Debug, Clone)]
pub struct ConsumerConfig {
    pub group: String,
    pub subscription: Subscription,
    /// maxMsgNums per pull.
    pub pull_batch: i32,
    /// Commit offsets with each pull and at the end.
    pub commit: bool,
    pub latency: LatencyMode,
}

impl ConsumerCtx {
    pub fn new(
        config: ConsumerConfig,
        meter: Arc<Meter>,
        stop: Arc<AtomicBool>,
        fatal: Arc<Mutex<Option<String>>>,
    ) -> Arc<Self> {
        let tag_filter = config
            .subscription
            .tags()
            .map(|tags| tags.into_iter().map(String::into_bytes).collect());
        Arc::new(ConsumerCtx {
            group: config.group,
            subscription: config.subscription,
            tag_filter,
            pull_batch: config.pull_batch,
            commit: config.commit,
            meter,
            latency: config.latency,
            sides: E2eSides::new(),
            stop,
            fatal,
            delayed: Mutex::new(Vec::new()),
            in_flight: AtomicUsize::new(0),
            done_queues: AtomicUsize::new(0),
            filtered: AtomicI64::new(0),
            pulls: AtomicI64::new(0),
            empty_pulls: AtomicI64::new(0),
            record_bytes: AtomicU64::new(0),
            tasks: Mutex::new(Vec::new()),
        })
    }

    fn stopped(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }

    /// True when every queue reached its end offset (catch-up).
    pub fn all_done(&self) -> bool {
        let total = self.tasks.lock().unwrap_or_else(|e| e.into_inner()).len();
        total > 0 && self.done_queues.load(Ordering::Relaxed) >= total
    }

    /// Sum of [`QueueTask::advanced`] over all queues.
    pub fn advanced(&self) -> i64 {
        let tasks = self.tasks.lock().unwrap_or_else(|e| e.into_inner());
        tasks.iter().map(|t| t.advanced()).sum()
    }

    /// Queues whose offset moved over more messages than were consumed from them, as
    /// `topic:queue advanced/consumed` (at most 16).
    pub fn gaps(&self) -> Vec<String> {
        let tasks = self.tasks.lock().unwrap_or_else(|e| e.into_inner());
        tasks
            .iter()
            .filter(|t| t.advanced() != t.consumed.load(Ordering::Relaxed))
            .take(16)
            .map(|t| {
                format!(
                    "{}:{} advanced {} consumed {}",
                    t.queue.topic,
                    t.queue.queue_id,
                    t.advanced(),
                    t.consumed.load(Ordering::Relaxed)
                )
            })
            .collect()
    }

    /// `(pull requests sent, answers without messages)`.
    pub fn pull_counts(&self) -> (i64, i64) {
        (
            self.pulls.load(Ordering::Relaxed),
            self.empty_pulls.load(Ordering::Relaxed),
        )
    }

    /// Messages dropped by the client-side tag re-check.
    /// Bytes of the pull response bodies received with SUCCESS (whole message records,
    /// headers and properties included), as opposed to the meter's message body bytes.
    pub fn record_bytes(&self) -> u64 {
        self.record_bytes.load(Ordering::Relaxed)
    }

    pub fn filtered(&self) -> i64 {
        self.filtered.load(Ordering::Relaxed)
    }

    /// Re-issues pulls whose retry delay has passed. Call every few ms from the control loop.
    pub fn run_delayed(self: &Arc<Self>) {
        let now = Instant::now();
        let due: Vec<Arc<QueueTask>> = {
            let mut delayed = self.delayed.lock().unwrap_or_else(|e| e.into_inner());
            let (due, later): (Vec<_>, Vec<_>) = delayed.drain(..).partition(|(at, _)| *at <= now);
            *delayed = later;
            due.into_iter().map(|(_, task)| task).collect()
        };
        for task in due {
            issue_pull(self, task);
        }
    }

    fn retry_later(&self, task: Arc<QueueTask>) {
        self.delayed
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push((Instant::now() + PULL_DELAY_ON_ERROR, task));
    }

    fn set_fatal(&self, message: String) {
        crate::producer::set_fatal_parts(&self.stop, &self.fatal, message);
    }
}

/// The read queues of every topic, waiting (bounded) for topics that are not routed yet.
pub fn resolve_read_queues(
    namesrv: &Connection,
    topics: &[String],
) -> Result<Vec<QueueAddr>, BenchError> {
    let deadline = Instant::now() + ROUTE_WAIT;
    let mut queues = Vec::new();
    for topic in topics {
        loop {
            let found = fetch_route(namesrv, topic)?
                .map(|route| route.read_queues(topic))
                .filter(|q| !q.is_empty());
            if let Some(found) = found {
                queues.extend(found);
                break;
            }
            if Instant::now() >= deadline {
                return Err(BenchError::Route {
                    topic: topic.clone(),
                    reason: format!("no readable queues after {} s", ROUTE_WAIT.as_secs()),
                });
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    }
    Ok(queues)
}

/// HEART_BEAT with the consumer group and its subscriptions, to one broker.
pub fn heartbeat(
    conn: &Connection,
    group: &str,
    topics: &[String],
    subscription: &Subscription,
    from: StartFrom,
) -> Result<(), BenchError> {
    let subs: Vec<serde_json::Value> = topics.iter().map(|t| subscription.to_json(t)).collect();
    let body = serde_json::json!({
        "clientID": format!("127.0.0.1@ringmq-bench-{}", std::process::id()),
        "consumerDataSet": [{
            "groupName": group,
            "consumeType": "CONSUME_PASSIVELY",
            "messageModel": "CLUSTERING",
            "consumeFromWhere": match from {
                StartFrom::First => "CONSUME_FROM_FIRST_OFFSET",
                StartFrom::Last => "CONSUME_FROM_LAST_OFFSET",
            },
            "subscriptionDataSet": subs,
            "unitMode": false,
        }],
        "producerDataSet": [],
        "heartbeatFingerprint": 0,
        "withoutSub": false,
    });
    let cmd = RemotingCommand::request(request_code::HEART_BEAT)
        .with_body(bytes::Bytes::from(body.to_string()));
    let response = conn.call(cmd, ADMIN_TIMEOUT_MS)?;
    if response.code != response_code::SUCCESS {
        return Err(BenchError::Response {
            what: format!("heartbeat of group {group}"),
            code: response.code,
            remark: response.remark.unwrap_or_default(),
        });
    }
    Ok(())
}

fn offset_call(
    conn: &Connection,
    cmd: RemotingCommand,
    what: impl Fn() -> String,
) -> Result<Option<i64>, BenchError> {
    let response = conn.call(cmd, ADMIN_TIMEOUT_MS)?;
    match response.code {
        response_code::SUCCESS => {
            let header = GetMaxOffsetResponseHeader::decode(&response).map_err(|e| {
                BenchError::Response {
                    what: what(),
                    code: response.code,
                    remark: e.to_string(),
                }
            })?;
            Ok(Some(header.offset))
        }
        response_code::QUERY_NOT_FOUND => Ok(None),
        code => Err(BenchError::Response {
            what: what(),
            code,
            remark: response.remark.unwrap_or_default(),
        }),
    }
}

/// GET_MAX_OFFSET of one queue.
pub fn max_offset(conn: &Connection, queue: &QueueAddr) -> Result<i64, BenchError> {
    let mut cmd = RemotingCommand::request(request_code::GET_MAX_OFFSET);
    GetMaxOffsetRequestHeader {
        topic: queue.topic.clone(),
        queue_id: queue.queue_id,
        committed: true,
    }
    .encode(&mut cmd);
    offset_call(conn, cmd, || {
        format!("max offset of {}:{}", queue.topic, queue.queue_id)
    })?
    .ok_or_else(|| BenchError::Response {
        what: format!("max offset of {}:{}", queue.topic, queue.queue_id),
        code: response_code::QUERY_NOT_FOUND,
        remark: String::new(),
    })
}

/// QUERY_CONSUMER_OFFSET of one queue; `None` if the group has none.
pub fn committed_offset(
    conn: &Connection,
    group: &str,
    queue: &QueueAddr,
) -> Result<Option<i64>, BenchError> {
    let mut cmd = RemotingCommand::request(request_code::QUERY_CONSUMER_OFFSET);
    QueryConsumerOffsetRequestHeader {
        consumer_group: group.to_owned(),
        topic: queue.topic.clone(),
        queue_id: queue.queue_id,
        set_zero_if_not_found: Some(false),
    }
    .encode(&mut cmd);
    let response = conn.call(cmd, ADMIN_TIMEOUT_MS)?;
    match response.code {
        response_code::SUCCESS => QueryConsumerOffsetResponseHeader::decode(&response)
            .map(|h| Some(h.offset))
            .map_err(|e| BenchError::Response {
                what: format!("consumer offset of {}:{}", queue.topic, queue.queue_id),
                code: response.code,
                remark: e.to_string(),
            }),
        response_code::QUERY_NOT_FOUND => Ok(None),
        code => Err(BenchError::Response {
            what: format!("consumer offset of {}:{}", queue.topic, queue.queue_id),
            code,
            remark: response.remark.unwrap_or_default(),
        }),
    }
}

/// Where each queue starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StartPolicy {
    /// Committed offset if any, else first (0) or last (max offset).
    Committed(StartFrom),
    /// The current max offset, ignoring committed offsets (e2e: only new messages).
    Latest,
    /// From 0 up to the max offset seen at start (catch-up).
    BacklogToEnd,
}

/// Connects, heartbeats, computes start offsets and registers the queue tasks (no pull yet).
pub fn prepare(
    ctx: &Arc<ConsumerCtx>,
    pool: &ConnectionPool,
    topics: &[String],
    queues: Vec<QueueAddr>,
    policy: StartPolicy,
    from: StartFrom,
) -> Result<(), BenchError> {
    let mut recorders: HashMap<usize, [Arc<Recorder>; 3]> = HashMap::new();
    let mut brokers: Vec<String> = queues.iter().map(|q| q.broker_addr.clone()).collect();
    brokers.sort_unstable();
    brokers.dedup();
    for addr in &brokers {
        let conns = pool.all(addr)?;
        heartbeat(&conns[0], &ctx.group, topics, &ctx.subscription, from)?;
    }
    let mut tasks = Vec::with_capacity(queues.len());
    for (i, queue) in queues.into_iter().enumerate() {
        let conns = pool.all(&queue.broker_addr)?;
        let conn = Arc::clone(&conns[i % conns.len()]);
        let key = Arc::as_ptr(&conn) as usize;
        let [recorder, to_store, from_store] = recorders
            .entry(key)
            .or_insert_with(|| {
                [
                    ctx.meter.recorder(),
                    ctx.sides.to_store.recorder(),
                    ctx.sides.from_store.recorder(),
                ]
            })
            .clone();
        let (start, end) = match policy {
            StartPolicy::Latest => (max_offset(&conn, &queue)?, None),
            StartPolicy::BacklogToEnd => (0, Some(max_offset(&conn, &queue)?)),
            StartPolicy::Committed(from) => match committed_offset(&conn, &ctx.group, &queue)? {
                Some(offset) if offset >= 0 => (offset, None),
                _ => match from {
                    StartFrom::First => (0, None),
                    StartFrom::Last => (max_offset(&conn, &queue)?, None),
                },
            },
        };
        tasks.push(Arc::new(QueueTask {
            queue,
            conn,
            recorder,
            sides: [to_store, from_store],
            next_offset: AtomicI64::new(start),
            start_offset: start,
            end_offset: end,
            done: AtomicBool::new(false),
            consumed: AtomicI64::new(0),
        }));
    }
    *ctx.tasks.lock().unwrap_or_else(|e| e.into_inner()) = tasks;
    Ok(())
}

/// Issues the first pull of every queue.
pub fn start_pulls(ctx: &Arc<ConsumerCtx>) {
    let tasks = ctx.tasks.lock().unwrap_or_else(|e| e.into_inner()).clone();
    for task in tasks {
        issue_pull(ctx, task);
    }
}

fn mark_done(ctx: &ConsumerCtx, task: &QueueTask) {
    if !task.done.swap(true, Ordering::Relaxed) {
        ctx.done_queues.fetch_add(1, Ordering::Relaxed);
    }
}

fn issue_pull(ctx: &Arc<ConsumerCtx>, task: Arc<QueueTask>) {
    if ctx.stopped() || task.done.load(Ordering::Relaxed) {
        return;
    }
    let offset = task.next_offset();
    if task.end_offset.is_some_and(|end| offset >= end) {
        mark_done(ctx, &task);
        return;
    }
    let mut sys_flag = FLAG_SUSPEND | FLAG_SUBSCRIPTION;
    if ctx.commit && offset > 0 {
        sys_flag |= FLAG_COMMIT_OFFSET;
    }
    let header = PullMessageRequestHeader {
        consumer_group: ctx.group.clone(),
        topic: task.queue.topic.clone(),
        queue_id: task.queue.queue_id,
        queue_offset: offset,
        max_msg_nums: ctx.pull_batch,
        sys_flag,
        commit_offset: offset,
        suspend_timeout_millis: SUSPEND_TIMEOUT_MS,
        subscription: Some(ctx.subscription.expression.clone()),
        sub_version: ctx.subscription.sub_version,
        expression_type: Some(ctx.subscription.filter_type.name().to_owned()),
        max_msg_bytes: None,
        request_source: None,
        proxy_froward_client_id: None,
    };
    let mut cmd = RemotingCommand::request(request_code::PULL_MESSAGE);
    header.encode(&mut cmd);
    let sent_at = Instant::now();
    ctx.in_flight.fetch_add(1, Ordering::Relaxed);
    ctx.pulls.fetch_add(1, Ordering::Relaxed);
    let ctx2 = Arc::clone(ctx);
    let conn = Arc::clone(&task.conn);
    conn.send_async(
        cmd,
        PULL_RPC_TIMEOUT_MS,
        Box::new(move |result| {
            ctx2.in_flight.fetch_sub(1, Ordering::Relaxed);
            on_pull(&ctx2, task, sent_at, result);
        }),
    );
}

fn on_pull(
    ctx: &Arc<ConsumerCtx>,
    task: Arc<QueueTask>,
    sent_at: Instant,
    result: Result<RemotingCommand, RpcError>,
) {
    let response = match result {
        Ok(response) => response,
        Err(error @ RpcError::Closed { .. }) => {
            if !ctx.stopped() {
                ctx.meter.fail(|| error.to_string());
                ctx.set_fatal(error.to_string());
            }
            return;
        }
        Err(error) => {
            ctx.meter.fail(|| error.to_string());
            ctx.retry_later(task);
            return;
        }
    };
    let header = PullMessageResponseHeader::decode(&response);
    match (response.code, header) {
        (response_code::SUCCESS, Ok(header)) => {
            ctx.record_bytes
                .fetch_add(response.body.len() as u64, Ordering::Relaxed);
            consume_batch(ctx, &task, &response.body, sent_at);
            task.next_offset
                .store(header.next_begin_offset, Ordering::Relaxed);
            issue_pull(ctx, task);
        }
        (
            response_code::PULL_NOT_FOUND
            | response_code::PULL_RETRY_IMMEDIATELY
            | response_code::PULL_OFFSET_MOVED,
            Ok(header),
        ) => {
            // Nothing new (the hold expired), nothing matched, or the offset was out of range:
            // adopt nextBeginOffset and pull again at once, like the Java client.
            ctx.empty_pulls.fetch_add(1, Ordering::Relaxed);
            task.next_offset
                .store(header.next_begin_offset, Ordering::Relaxed);
            if task.end_offset.is_some() && response.code == response_code::PULL_NOT_FOUND {
                // A catch-up queue with nothing left below its end offset is done.
                mark_done(ctx, &task);
                return;
            }
            issue_pull(ctx, task);
        }
        (code, header) => {
            ctx.meter.fail(|| match header {
                Ok(_) => format!(
                    "pull answered {code} ({})",
                    response.remark.as_deref().unwrap_or("")
                ),
                Err(e) => format!("pull answered {code} with a bad header: {e}"),
            });
            ctx.retry_later(task);
        }
    }
}

fn consume_batch(ctx: &ConsumerCtx, task: &QueueTask, body: &[u8], sent_at: Instant) {
    let now_us = epoch_us();
    let rtt_us = u64::try_from(sent_at.elapsed().as_micros()).unwrap_or(u64::MAX);
    let (mut messages, mut bytes, mut received) = (0u64, 0u64, 0i64);
    for record in records(body) {
        let record = match record {
            Ok(record) => record,
            Err(error) => {
                ctx.meter.fail(|| error.to_string());
                break;
            }
        };
        received += 1;
        if let Some(tags) = &ctx.tag_filter {
            // Java re-checks tag strings on the client (tag codes can collide).
            if !record.property("TAGS").is_some_and(|t| tags.contains(t)) {
                ctx.filtered.fetch_add(1, Ordering::Relaxed);
                continue;
            }
        }
        messages += 1;
        bytes += record.body.len() as u64;
        if ctx.latency == LatencyMode::FromBorn {
            let born_us = record.born_us();
            let stored_us = record.store_timestamp_ms.saturating_mul(1000);
            task.recorder
                .record_us(u64::try_from(now_us - born_us).unwrap_or(0));
            task.sides[0].record_us(u64::try_from(stored_us - born_us).unwrap_or(0));
            task.sides[1].record_us(u64::try_from(now_us - stored_us).unwrap_or(0));
        }
    }
    if ctx.latency == LatencyMode::PullRoundTrip && messages > 0 {
        task.recorder.record_us(rtt_us);
    }
    task.consumed.fetch_add(received, Ordering::Relaxed);
    ctx.meter.add(messages, bytes);
}

/// Stops pulling, commits every queue's offset (bounded wait) and closes the connections.
pub fn finish(ctx: &Arc<ConsumerCtx>, pool: &ConnectionPool) {
    ctx.stop.store(true, Ordering::Relaxed);
    if ctx.commit {
        let tasks = ctx.tasks.lock().unwrap_or_else(|e| e.into_inner()).clone();
        let outstanding = Arc::new(AtomicUsize::new(tasks.len()));
        for task in &tasks {
            let mut cmd = RemotingCommand::request(request_code::UPDATE_CONSUMER_OFFSET);
            UpdateConsumerOffsetRequestHeader {
                consumer_group: ctx.group.clone(),
                topic: task.queue.topic.clone(),
                queue_id: task.queue.queue_id,
                commit_offset: task.next_offset(),
            }
            .encode(&mut cmd);
            let outstanding = Arc::clone(&outstanding);
            task.conn.send_async(
                cmd,
                COMMIT_WAIT.as_millis() as u64,
                Box::new(move |_| {
                    outstanding.fetch_sub(1, Ordering::Relaxed);
                }),
            );
        }
        let deadline = Instant::now() + COMMIT_WAIT;
        while outstanding.load(Ordering::Relaxed) > 0 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
    }
    pool.close_all();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn e2e_sides_report_each_side_of_the_store_timestamp() {
        let sides = E2eSides::new();
        let (to, from) = (sides.to_store.recorder(), sides.from_store.recorder());
        for us in 1..=1000 {
            to.record_us(us);
            from.record_us(us * 10);
        }
        let json = sides.to_json();
        // HdrHistogram's 3 significant digits: within 0.1 %.
        let near =
            |name: &str, want: u64| json[name].as_u64().unwrap().abs_diff(want) <= want / 1000;
        assert!(near("born_to_stored_p50_us", 500), "{json}");
        assert!(near("stored_to_consumed_p99_us", 9900), "{json}");
        assert_eq!(json.as_object().unwrap().len(), 6);
    }

    #[test]
    fn java_hash_matches_known_values() {
        // "TagA".hashCode() == 2598919 in Java; "" is 0; non-ASCII uses UTF-16 units.
        assert_eq!(java_string_hash("TagA"), 2_598_919);
        assert_eq!(java_string_hash(""), 0);
        assert_eq!(java_string_hash("a"), 97);
        assert_eq!(java_string_hash("é"), 0xE9);
    }

    #[test]
    fn subscription_tags_and_json() {
        let sub = Subscription::new(FilterType::Tag, "tag0 || tag1 ||");
        assert_eq!(sub.tags(), Some(vec!["tag0".to_owned(), "tag1".to_owned()]));
        let json = sub.to_json("T");
        assert_eq!(json["expressionType"], "TAG");
        assert_eq!(json["codeSet"][0], java_string_hash("tag0"));
        assert_eq!(Subscription::new(FilterType::Tag, "*").tags(), None);
        assert_eq!(Subscription::new(FilterType::Tag, " ").expression, "*");
        assert_eq!(Subscription::new(FilterType::Sql92, "a > 1").tags(), None);
    }
}
