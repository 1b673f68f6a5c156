//! The producer: sync (one request at a time per thread, like RocketMQ's benchmark) or async
//! (many in flight, bounded by permits), optionally at a fixed total rate, sending
//! SEND_MESSAGE_V2 round robin over every write queue of the topics.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use bytes::Bytes;
use ringmq::remoting::codes::{request_code, response_code};
use ringmq::remoting::command::RemotingCommand;
use ringmq::remoting::headers::SendMessageRequestHeader;

use crate::args::Args;
use crate::client::{fetch_route, Connection, ConnectionPool, QueueAddr};
use crate::error::{BenchError, RpcError};
use crate::record::{push_property, write_stamp};
use crate::stats::{Meter, Pacer};

/// RocketMQ's auto-create key topic (`TopicValidator.AUTO_CREATE_TOPIC_KEY_TOPIC`).
pub const AUTO_CREATE_TOPIC: &str = "TBW102";
/// Producer group of the bench (RocketMQ's benchmark uses `benchmark_producer`).
pub const PRODUCER_GROUP: &str = "benchmark_producer";
/// How long to wait for an auto-created topic to show up at the name server.
pub const ROUTE_WAIT: Duration = Duration::from_secs(15);
/// Poll interval while waiting for a route.
pub const ROUTE_POLL: Duration = Duration::from_millis(200);
/// Longest wait for async sends still in flight when a run stops.
pub const DRAIN_WAIT_EXTRA: Duration = Duration::from_secs(1);

/// Builds the messages: body template with the stamp, tags, keys, user properties.
pub struct MessageFactory {
    body_template: Vec<u8>,
    keys: bool,
    tag_count: u32,
    user_properties: String,
    default_topic_queue_nums: i32,
    uniq_prefix: String,
}

impl MessageFactory {
    pub fn new(args: &Args) -> Self {
        // Printable filler, like RocketMQ's random alphanumeric body.
        let body_template: Vec<u8> = (0..args.body_size_bytes)
            .map(|i| b"abcdefghijklmnopqrstuvwxyz0123456789"[i % 36])
            .collect();
        // RocketMQ's benchmark pattern: prop<i>=hello<v>, prop<i+1>=<v> until the size is
        // exceeded (built once; the Java benchmark rebuilds the same shape per message).
        let mut user_properties = String::new();
        let mut size = 0usize;
        let mut i = 0usize;
        let start_value = 42usize;
        while size <= args.property_size_bytes && args.property_size_bytes > 0 {
            let (k1, v1) = (format!("prop{i}"), format!("hello{}", start_value + i));
            let (k2, v2) = (format!("prop{}", i + 1), format!("{}", start_value + i));
            size += k1.len() + v1.len() + k2.len() + v2.len();
            push_property(&mut user_properties, &k1, &v1);
            push_property(&mut user_properties, &k2, &v2);
            i += 2;
        }
        // UNIQ_KEY layout like Java's (ip, pid, random), then a per-message sequence.
        let pid = std::process::id() & 0xFFFF;
        let random = (crate::stats::epoch_us() as u64 ^ 0x9E37_79B9_7F4A_7C15) as u32;
        MessageFactory {
            body_template,
            keys: args.keys,
            tag_count: args.tag_count,
            user_properties,
            default_topic_queue_nums: args.queues_per_topic,
            uniq_prefix: format!("7F000001{pid:04X}{random:08X}"),
        }
    }

    pub fn body_len(&self) -> usize {
        self.body_template.len()
    }

    /// The SEND_MESSAGE_V2 request for message `seq` due at `due_epoch_us`.
    pub fn build(&self, queue: &QueueAddr, seq: u64, due_epoch_us: i64) -> RemotingCommand {
        let mut body = self.body_template.clone();
        write_stamp(&mut body, due_epoch_us);
        let mut properties = String::with_capacity(96 + self.user_properties.len());
        if self.tag_count > 0 {
            push_property(
                &mut properties,
                "TAGS",
                &format!("tag{}", seq % u64::from(self.tag_count)),
            );
        }
        if self.keys {
            push_property(
                &mut properties,
                "KEYS",
                &(due_epoch_us / 1_000_000).to_string(),
            );
        }
        push_property(
            &mut properties,
            "UNIQ_KEY",
            &format!("{}{:012X}", self.uniq_prefix, seq & 0xFFFF_FFFF_FFFF),
        );
        // Java's Message sets WAIT=true (waitStoreMsgOK): a sync-flush broker acks after fsync.
        push_property(&mut properties, "WAIT", "true");
        properties.push_str(&self.user_properties);
        let header = SendMessageRequestHeader {
            producer_group: PRODUCER_GROUP.to_owned(),
            topic: queue.topic.clone(),
            default_topic: AUTO_CREATE_TOPIC.to_owned(),
            default_topic_queue_nums: self.default_topic_queue_nums,
            queue_id: queue.queue_id,
            sys_flag: 0,
            born_timestamp: due_epoch_us / 1000,
            flag: 0,
            properties: Some(properties),
            reconsume_times: Some(0),
            unit_mode: false,
            batch: false,
            max_reconsume_times: None,
            broker_name: Some(queue.broker_name.clone()),
        };
        let mut cmd = RemotingCommand::request(request_code::SEND_MESSAGE_V2);
        header.encode_v2(&mut cmd);
        cmd.with_body(Bytes::from(body))
    }
}

/// The publish queues of every topic. A topic the name server does not know yet is sent to
/// the brokers of `TBW102` with `defaultTopicQueueNums` queues (Java's fallback; the broker
/// auto-creates it). Returns the queues and the topics that were missing.
pub fn resolve_publish_queues(
    namesrv: &Connection,
    topics: &[String],
    queues_per_topic: i32,
) -> Result<(Vec<QueueAddr>, Vec<String>), BenchError> {
    let mut queues = Vec::new();
    let mut missing = Vec::new();
    let mut fallback = None;
    for topic in topics {
        let found = fetch_route(namesrv, topic)?
            .map(|route| route.write_queues(topic, i32::MAX))
            .filter(|q| !q.is_empty());
        match found {
            Some(found) => queues.extend(found),
            None => {
                if fallback.is_none() {
                    fallback = Some(fetch_route(namesrv, AUTO_CREATE_TOPIC)?.ok_or_else(|| {
                        BenchError::Route {
                            topic: topic.clone(),
                            reason: "unknown, and no TBW102 route to auto-create it from".into(),
                        }
                    })?);
                }
                let route = fallback.as_ref().ok_or_else(|| BenchError::Route {
                    topic: topic.clone(),
                    reason: "no TBW102 route".into(),
                })?;
                let found = route.write_queues(topic, queues_per_topic);
                if found.is_empty() {
                    return Err(BenchError::Route {
                        topic: topic.clone(),
                        reason: "TBW102 has no writable queue with a master".into(),
                    });
                }
                queues.extend(found);
                missing.push(topic.clone());
            }
        }
    }
    Ok((queues, missing))
}

/// Makes sure every topic exists (one sync send to each missing one, then waits for its route)
/// and returns the publish queues from the real routes.
pub fn ensure_topics(
    namesrv: &Connection,
    pool: &ConnectionPool,
    factory: &MessageFactory,
    topics: &[String],
    queues_per_topic: i32,
    timeout_ms: u64,
) -> Result<Vec<QueueAddr>, BenchError> {
    let (queues, missing) = resolve_publish_queues(namesrv, topics, queues_per_topic)?;
    if missing.is_empty() {
        return Ok(queues);
    }
    for topic in &missing {
        let queue = queues
            .iter()
            .find(|q| &q.topic == topic)
            .ok_or_else(|| BenchError::Route {
                topic: topic.clone(),
                reason: "no queue to create it through".into(),
            })?;
        let conn = pool.get(&queue.broker_addr)?;
        let response = conn.call(
            factory.build(queue, 0, crate::stats::epoch_us()),
            timeout_ms,
        )?;
        if response.code != response_code::SUCCESS {
            return Err(BenchError::Response {
                what: format!("auto-creating topic {topic}"),
                code: response.code,
                remark: response.remark.unwrap_or_default(),
            });
        }
    }
    let deadline = Instant::now() + ROUTE_WAIT;
    loop {
        let (queues, missing) = resolve_publish_queues(namesrv, topics, queues_per_topic)?;
        if missing.is_empty() {
            return Ok(queues);
        }
        if Instant::now() >= deadline {
            return Err(BenchError::Route {
                topic: missing[0].clone(),
                reason: format!("no route {} s after auto-creating it", ROUTE_WAIT.as_secs()),
            });
        }
        std::thread::sleep(ROUTE_POLL);
    }
}

/// A counting semaphore bounding async sends in flight.
pub struct Permits {
    available: Mutex<usize>,
    cond: Condvar,
    capacity: usize,
}

impl Permits {
    pub fn new(capacity: usize) -> Arc<Self> {
        Arc::new(Permits {
            available: Mutex::new(capacity),
            cond: Condvar::new(),
            capacity,
        })
    }

    /// Takes a permit; `false` if `stop` turned true first.
    pub fn acquire(&self, stop: &AtomicBool) -> bool {
        let mut available = self.available.lock().unwrap_or_else(|e| e.into_inner());
        loop {
            if *available > 0 {
                *available -= 1;
                return true;
            }
            if stop.load(Ordering::Relaxed) {
                return false;
            }
            available = self
                .cond
                .wait_timeout(available, Duration::from_millis(50))
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
    }

    pub fn release(&self) {
        let mut available = self.available.lock().unwrap_or_else(|e| e.into_inner());
        *available += 1;
        self.cond.notify_all();
    }

    /// Waits until every permit is back (all sends answered) or `timeout` passes.
    pub fn wait_all(&self, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        let mut available = self.available.lock().unwrap_or_else(|e| e.into_inner());
        while *available < self.capacity {
            let now = Instant::now();
            if now >= deadline {
                return false;
            }
            available = self
                .cond
                .wait_timeout(available, deadline - now)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
        true
    }
}

/// Shared state of a running producer.
pub struct SendPlan {
    pub queues: Arc<Vec<QueueAddr>>,
    pub pool: Arc<ConnectionPool>,
    pub factory: Arc<MessageFactory>,
    pub meter: Arc<Meter>,
    pub stop: Arc<AtomicBool>,
    /// Set when a connection closes under the producer: the run cannot go on.
    pub fatal: Arc<Mutex<Option<String>>>,
    /// 0 = no count limit.
    pub count: u64,
    pub rate: u64,
    pub threads: usize,
    pub async_send: bool,
    pub inflight_per_connection: usize,
    pub timeout_ms: u64,
}

impl SendPlan {
    /// A plan with `args`' count, rate, threads, async mode, in-flight bound and timeout.
    pub fn from_args(
        args: &Args,
        queues: Vec<QueueAddr>,
        pool: &Arc<ConnectionPool>,
        factory: Arc<MessageFactory>,
        meter: &Arc<Meter>,
        stop: &Arc<AtomicBool>,
        fatal: &Arc<Mutex<Option<String>>>,
    ) -> Self {
        SendPlan {
            queues: Arc::new(queues),
            pool: Arc::clone(pool),
            factory,
            meter: Arc::clone(meter),
            stop: Arc::clone(stop),
            fatal: Arc::clone(fatal),
            count: args.count,
            rate: args.rate,
            threads: args.threads,
            async_send: args.async_send,
            inflight_per_connection: args.inflight,
            timeout_ms: args.send_timeout_ms,
        }
    }
}

/// Running producer threads.
pub struct RunningProducers {
    handles: Vec<JoinHandle<()>>,
    permits: Option<Arc<Permits>>,
    timeout_ms: u64,
}

impl RunningProducers {
    /// True when every thread has finished (count reached or stopped).
    pub fn finished(&self) -> bool {
        self.handles.iter().all(|h| h.is_finished())
    }

    /// Joins the threads and waits (bounded) for async sends in flight.
    pub fn join(self) {
        for handle in self.handles {
            let _ = handle.join();
        }
        if let Some(permits) = self.permits {
            permits.wait_all(Duration::from_millis(self.timeout_ms) + DRAIN_WAIT_EXTRA);
        }
    }
}

/// Starts the producer threads.
pub fn start(plan: SendPlan) -> Result<RunningProducers, BenchError> {
    let plan = Arc::new(plan);
    // Connect everything up front so connect errors surface before the clock starts.
    let mut brokers: Vec<&str> = plan.queues.iter().map(|q| q.broker_addr.as_str()).collect();
    brokers.sort_unstable();
    brokers.dedup();
    let mut connection_count = 0;
    for addr in &brokers {
        connection_count += plan.pool.all(addr)?.len();
    }
    let permits = plan.async_send.then(|| {
        Permits::new(
            plan.inflight_per_connection
                .saturating_mul(connection_count.max(1)),
        )
    });
    let claimed = Arc::new(AtomicU64::new(0));
    let start = Instant::now();
    let start_epoch_us = crate::stats::epoch_us();
    let per_thread_rate = plan.rate as f64 / plan.threads as f64;
    let mut handles = Vec::with_capacity(plan.threads);
    for thread_index in 0..plan.threads {
        let plan = Arc::clone(&plan);
        let claimed = Arc::clone(&claimed);
        let permits = permits.clone();
        let phase = thread_index as f64 / plan.threads as f64;
        let pacer = Pacer::new(start, start_epoch_us, per_thread_rate, phase);
        let handle = std::thread::Builder::new()
            .name(format!("bench-producer-{thread_index}"))
            .spawn(move || producer_thread(&plan, thread_index, pacer, &claimed, permits))
            .map_err(|source| BenchError::Io {
                what: "spawn producer thread".into(),
                source,
            })?;
        handles.push(handle);
    }
    Ok(RunningProducers {
        handles,
        permits,
        timeout_ms: plan.timeout_ms,
    })
}

fn producer_thread(
    plan: &SendPlan,
    thread_index: usize,
    mut pacer: Pacer,
    claimed: &AtomicU64,
    permits: Option<Arc<Permits>>,
) {
    let recorder = plan.meter.recorder();
    let mut conns: HashMap<String, Arc<Connection>> = HashMap::new();
    let stop = || plan.stop.load(Ordering::Relaxed);
    let body_len = plan.factory.body_len() as u64;
    while !stop() {
        let Some(due) = pacer.next(&stop) else { break };
        let seq = claimed.fetch_add(1, Ordering::Relaxed);
        if plan.count > 0 && seq >= plan.count {
            break;
        }
        let queue = &plan.queues[(seq % plan.queues.len() as u64) as usize];
        let conn = match conns.get(&queue.broker_addr) {
            Some(conn) => Arc::clone(conn),
            None => match plan.pool.all(&queue.broker_addr) {
                Ok(list) => {
                    let conn = Arc::clone(&list[thread_index % list.len()]);
                    conns.insert(queue.broker_addr.clone(), Arc::clone(&conn));
                    conn
                }
                Err(error) => {
                    set_fatal(plan, error.to_string());
                    break;
                }
            },
        };
        let cmd = plan.factory.build(queue, seq, due.epoch_us);
        if let Some(permits) = &permits {
            if !permits.acquire(&plan.stop) {
                break;
            }
            let permits = Arc::clone(permits);
            let meter = Arc::clone(&plan.meter);
            let recorder = Arc::clone(&recorder);
            let stop_flag = Arc::clone(&plan.stop);
            let fatal = Arc::clone(&plan.fatal);
            conn.send_async(
                cmd,
                plan.timeout_ms,
                Box::new(move |result| {
                    if let Some(message) =
                        account(&meter, result, body_len, || recorder.record_since(due.at))
                    {
                        set_fatal_parts(&stop_flag, &fatal, message);
                    }
                    permits.release();
                }),
            );
        } else {
            let result = conn.call(cmd, plan.timeout_ms);
            if let Some(message) = account(&plan.meter, result, body_len, || {
                recorder.record_since(due.at)
            }) {
                set_fatal(plan, message);
                break;
            }
        }
    }
}

/// Counts one send result; returns a message if the run must stop (connection lost).
fn account(
    meter: &Meter,
    result: Result<RemotingCommand, RpcError>,
    body_len: u64,
    record: impl FnOnce(),
) -> Option<String> {
    match result {
        Ok(response) if response.code == response_code::SUCCESS => {
            record();
            meter.add(1, body_len);
            None
        }
        Ok(response) => {
            meter.fail(|| {
                format!(
                    "send answered {} ({})",
                    response.code,
                    response.remark.as_deref().unwrap_or("")
                )
            });
            None
        }
        Err(error @ RpcError::Closed { .. }) => {
            meter.fail(|| error.to_string());
            Some(error.to_string())
        }
        Err(error) => {
            meter.fail(|| error.to_string());
            None
        }
    }
}

fn set_fatal(plan: &SendPlan, message: String) {
    set_fatal_parts(&plan.stop, &plan.fatal, message);
}

/// Records the first fatal error and stops the run.
pub fn set_fatal_parts(stop: &AtomicBool, fatal: &Mutex<Option<String>>, message: String) {
    if stop.load(Ordering::Relaxed) {
        return; // closing connections at the end of a run is not an error
    }
    let mut fatal = fatal.lock().unwrap_or_else(|e| e.into_inner());
    if fatal.is_none() {
        *fatal = Some(message);
    }
    stop.store(true, Ordering::Relaxed);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::args::{parse, Parsed};
    use crate::record::property;

    #[test]
    fn message_has_v2_header_stamp_and_properties() {
        let Parsed::Run(args) = parse([
            "producer", "-s", "64", "-k", "true", "-l", "3", "-p", "40", "--queues", "8",
        ])
        .expect("args") else {
            panic!("help")
        };
        let factory = MessageFactory::new(&args);
        let queue = QueueAddr {
            topic: "T".into(),
            broker_name: "b".into(),
            broker_addr: "127.0.0.1:1".into(),
            queue_id: 5,
        };
        let cmd = factory.build(&queue, 7, 1_700_000_000_123_456);
        assert_eq!(cmd.code, request_code::SEND_MESSAGE_V2);
        let header = SendMessageRequestHeader::decode(&cmd).expect("v2 header");
        assert_eq!(header.topic, "T");
        assert_eq!(header.queue_id, 5);
        assert_eq!(header.default_topic, "TBW102");
        assert_eq!(header.default_topic_queue_nums, 8);
        assert_eq!(header.born_timestamp, 1_700_000_000_123);
        assert_eq!(cmd.ext_fields["b"], "T");
        let props = header.properties.expect("properties");
        assert_eq!(property(props.as_bytes(), b"TAGS"), Some(&b"tag1"[..]));
        assert_eq!(
            property(props.as_bytes(), b"KEYS"),
            Some(&b"1700000000"[..])
        );
        assert_eq!(property(props.as_bytes(), b"WAIT"), Some(&b"true"[..]));
        assert_eq!(
            property(props.as_bytes(), b"UNIQ_KEY").map(<[u8]>::len),
            Some(32)
        );
        assert!(property(props.as_bytes(), b"prop0").is_some());
        assert_eq!(cmd.body.len(), 64);
        assert_eq!(
            crate::record::read_stamp(&cmd.body),
            Some(1_700_000_000_123_456)
        );
    }

    #[test]
    fn permits_bound_and_drain() {
        let permits = Permits::new(2);
        let stop = AtomicBool::new(false);
        assert!(permits.acquire(&stop));
        assert!(permits.acquire(&stop));
        stop.store(true, Ordering::Relaxed);
        assert!(!permits.acquire(&stop), "no third permit");
        assert!(!permits.wait_all(Duration::from_millis(10)));
        permits.release();
        permits.release();
        assert!(permits.wait_all(Duration::from_millis(10)));
    }
}
