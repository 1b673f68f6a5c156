//! `echo-server`: a remoting server that acknowledges sends without storing them — the ceiling
//! any broker could reach with this client on this machine. It also answers the name server's
//! GET_ROUTEINFO_BY_TOPIC with a route pointing at itself, so `-n <echo addr>` works for every
//! kind without a broker.
//!
//! Pulls are served from per-queue counters: a queue that has seen N sends has offsets 0..N,
//! and a pull gets synthetic records of the last body size. The first [`RECENT_HEAD_BYTES`]
//! of the most recent [`RECENT_STAMPS_PER_QUEUE`] messages are kept with their born time (32
//! bytes each, not the messages) and start the records' bodies, so the records carry the
//! senders' stamps (the bench tool's send stamp, the W6 driver's sequence and due time) and
//! end-to-end latency through the echo server is real. Pulls at the end
//! of a queue are held (long polling) until a send arrives or the suspend timeout passes.
//!
//! A push consumer (rocketmq-client-rust's `DefaultMQPushConsumer`) is served too: heartbeats
//! register its client id in its group, GET_CONSUMER_LIST_BY_GROUP answers the group's client
//! ids (its rebalance needs them), and consumer offsets are kept in memory.
//!
//! Connections are served by a fixed pool of worker threads ([`crate::echo_workers`]), not a
//! thread per connection.

use std::collections::{HashMap, VecDeque};
use std::net::{SocketAddr, TcpListener};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use ringmq::remoting::body::heartbeat::HeartbeatData;
use ringmq::remoting::body::json::parse_lenient;
use ringmq::remoting::codes::{request_code, response_code};
use ringmq::remoting::command::RemotingCommand;
use ringmq::remoting::headers::{
    GetConsumerListByGroupRequestHeader, GetMaxOffsetRequestHeader, GetMinOffsetRequestHeader,
    GetRouteInfoRequestHeader, PullMessageRequestHeader, PullMessageResponseHeader,
    QueryConsumerOffsetRequestHeader, SendMessageRequestHeader, SendMessageResponseHeader,
    UnregisterClientRequestHeader, UpdateConsumerOffsetRequestHeader,
};

use crate::client::resolve_loopback;
use crate::consumer::FLAG_COMMIT_OFFSET;
use crate::consumer::FLAG_SUSPEND;
use crate::echo_clients::ConsumerTable;
use crate::echo_threads::PerConnection;
use crate::echo_workers::{Replies, ReplyTo, Service, Workers};
use crate::error::BenchError;
use crate::record::{encode_record, read_stamp, RecordFields};
use crate::stats::epoch_us;

/// Messages whose head and born time are kept per queue (32 bytes each).
pub const RECENT_STAMPS_PER_QUEUE: usize = 4096;
/// Bytes kept from the start of each recent message's body: the bench tool's send stamp
/// (12 bytes) and the W6 driver's header (24 bytes) fit.
pub const RECENT_HEAD_BYTES: usize = 24;
/// Pulls held at once over all queues; beyond this a pull at the end is answered at once.
pub const HELD_PULLS_MAX: usize = 65_536;
/// Most bytes of records in one pull response (well under the 16 MiB frame limit).
pub const PULL_RESPONSE_MAX_BYTES: usize = 8 * 1024 * 1024;
/// Most records in one pull response, whatever maxMsgNums asks.
pub const PULL_RECORDS_MAX: i32 = 1024;
/// Longest hold, whatever suspendTimeoutMillis asks.
pub const HOLD_MAX: Duration = Duration::from_secs(30);
/// How often held pulls are checked for expiry.
pub const SWEEP_INTERVAL: Duration = Duration::from_millis(50);
/// Consumer offsets kept (group, topic, queue); beyond this a commit of a new key is dropped
/// with an error answer (UPDATE_CONSUMER_OFFSET) or ignored (a pull's commit flag).
pub const OFFSETS_MAX: usize = 1 << 20;
/// Lock shards of the queue table.
const SHARDS: usize = 64;
/// The broker name the echo route announces.
pub const ECHO_BROKER_NAME: &str = "echo-broker";

struct HeldPull {
    reply: ReplyTo,
    request: RemotingCommand,
    header: PullMessageRequestHeader,
    deadline: Instant,
}

/// What is kept of a recent message.
struct RecentMessage {
    born_timestamp_ms: i64,
    /// The body's first bytes (`head_len` of them; the rest of a record's body is filler).
    head: [u8; RECENT_HEAD_BYTES],
    head_len: u8,
}

#[derive(Default)]
struct QueueState {
    next_offset: i64,
    body_len: usize,
    properties: String,
    /// Offsets `next_offset - recent.len() .. next_offset`.
    recent: VecDeque<RecentMessage>,
    held: Vec<HeldPull>,
}

type OffsetKey = (String, String, i32);

struct EchoState {
    addr: SocketAddr,
    queues_per_topic: i32,
    shards: Vec<Mutex<HashMap<(String, i32), QueueState>>>,
    offsets: Mutex<HashMap<OffsetKey, i64>>,
    consumers: Mutex<ConsumerTable>,
    held_count: AtomicUsize,
}

impl EchoState {
    fn shard(&self, topic: &str, queue_id: i32) -> &Mutex<HashMap<(String, i32), QueueState>> {
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        for b in topic.bytes() {
            h = (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3);
        }
        h = (h ^ queue_id as u64).wrapping_mul(0x100_0000_01b3);
        &self.shards[(h % SHARDS as u64) as usize]
    }

    /// Stores a consumer offset; `false` if the table is full and the key is new.
    fn commit_offset(&self, key: OffsetKey, offset: i64) -> bool {
        let mut offsets = self.offsets.lock().unwrap_or_else(|e| e.into_inner());
        if offsets.len() >= OFFSETS_MAX && !offsets.contains_key(&key) {
            return false;
        }
        offsets.insert(key, offset);
        true
    }
}

/// A running echo server.
pub struct EchoServer {
    addr: SocketAddr,
    runner: Runner,
}

enum Runner {
    Pool(Workers),
    PerConnection(PerConnection),
}

impl EchoServer {
    /// Binds a loopback `listen` address and starts serving as `echo-server` does by
    /// default (two threads per connection).
    #[cfg(test)]
    pub fn start(listen: &str, queues_per_topic: i32) -> Result<Self, BenchError> {
        Self::start_with(listen, queues_per_topic, None)
    }

    /// Binds a loopback `listen` address and starts serving with a pool of `pool_threads`
    /// workers, or with two threads per connection (`None`).
    pub fn start_with(
        listen: &str,
        queues_per_topic: i32,
        pool_threads: Option<usize>,
    ) -> Result<Self, BenchError> {
        let addr = resolve_loopback(listen)?;
        let listener = TcpListener::bind(addr).map_err(|source| BenchError::Io {
            what: format!("bind {addr}"),
            source,
        })?;
        let addr = listener.local_addr().map_err(|source| BenchError::Io {
            what: "local address".into(),
            source,
        })?;
        let state = Arc::new(EchoState {
            addr,
            queues_per_topic,
            shards: (0..SHARDS).map(|_| Mutex::new(HashMap::new())).collect(),
            offsets: Mutex::new(HashMap::new()),
            consumers: Mutex::new(ConsumerTable::default()),
            held_count: AtomicUsize::new(0),
        });
        let runner = match pool_threads {
            Some(threads) => {
                Runner::Pool(Workers::start(listener, threads, SWEEP_INTERVAL, state)?)
            }
            None => Runner::PerConnection(PerConnection::start(listener, SWEEP_INTERVAL, state)?),
        };
        Ok(EchoServer { addr, runner })
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// Stops serving; every connection closes.
    pub fn shutdown(self) {
        match self.runner {
            Runner::Pool(workers) => workers.shutdown(),
            Runner::PerConnection(threads) => threads.shutdown(),
        }
    }
}

impl Service for EchoState {
    fn handle(
        &self,
        from: &ReplyTo,
        request: RemotingCommand,
        replies: &mut Replies,
    ) -> Option<RemotingCommand> {
        let response = match request.code {
            request_code::GET_ROUTEINFO_BY_TOPIC => route(self, &request),
            request_code::SEND_MESSAGE | request_code::SEND_MESSAGE_V2 => {
                send(self, &request, replies)
            }
            request_code::PULL_MESSAGE => return pull(self, from, request),
            request_code::HEART_BEAT => heartbeat(self, from, &request),
            request_code::UNREGISTER_CLIENT => unregister(self, from, &request),
            request_code::GET_CONSUMER_LIST_BY_GROUP => consumer_list(self, &request),
            request_code::UPDATE_CONSUMER_OFFSET => update_offset(self, &request),
            request_code::QUERY_CONSUMER_OFFSET => query_offset(self, &request),
            request_code::GET_MAX_OFFSET => max_min_offset(self, &request, true),
            request_code::GET_MIN_OFFSET => max_min_offset(self, &request, false),
            code => RemotingCommand::response_to(
                &request,
                response_code::REQUEST_CODE_NOT_SUPPORTED,
                Some(format!(" request type {code} not supported")),
            ),
        };
        if request.is_oneway() {
            if response.code != response_code::SUCCESS {
                eprintln!(
                    "echo-server: oneway request {} not served: {}",
                    request.code,
                    response.remark.as_deref().unwrap_or("")
                );
            }
            return None;
        }
        Some(response)
    }

    fn tick(&self, worker: usize, workers: usize, replies: &mut Replies) {
        let now = Instant::now();
        for shard in self.shards.iter().skip(worker).step_by(workers.max(1)) {
            let mut queues = shard.lock().unwrap_or_else(|e| e.into_inner());
            for queue in queues.values_mut() {
                if queue.held.iter().any(|h| h.deadline <= now) {
                    let (gone, kept): (Vec<_>, Vec<_>) =
                        queue.held.drain(..).partition(|h| h.deadline <= now);
                    queue.held = kept;
                    self.held_count.fetch_sub(gone.len(), Ordering::Relaxed);
                    for held in gone {
                        let response = pull_response(self, queue, &held.request, &held.header);
                        replies.send(&held.reply, &response);
                    }
                }
            }
        }
    }

    fn closed(&self, connection: u64) {
        self.consumers
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .closed(connection);
    }
}

fn heartbeat(state: &EchoState, from: &ReplyTo, request: &RemotingCommand) -> RemotingCommand {
    let data: HeartbeatData = match parse_lenient(&request.body, "HeartbeatData") {
        Ok(data) => data,
        Err(e) => return bad_header(request, e),
    };
    let registered = state
        .consumers
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .register(from.connection, &data);
    if let Err(e) = registered {
        return bad_header(request, e);
    }
    let mut response = RemotingCommand::response_to(request, response_code::SUCCESS, None);
    response.set_ext("IS_SUPPORT_HEART_BEAT_V2", "true");
    response.set_ext("IS_SUB_CHANGE", "true");
    response
}

fn unregister(state: &EchoState, from: &ReplyTo, request: &RemotingCommand) -> RemotingCommand {
    let header = match UnregisterClientRequestHeader::decode(request) {
        Ok(header) => header,
        Err(e) => return bad_header(request, e),
    };
    if let Some(group) = header.consumer_group.filter(|g| !g.is_empty()) {
        state
            .consumers
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .unregister(from.connection, &group);
    }
    RemotingCommand::response_to(request, response_code::SUCCESS, None)
}

/// Java `ConsumerManageProcessor.getConsumerListByGroup`: the ids, or SYSTEM_ERROR "no
/// consumer for this group" when none sent a heartbeat.
fn consumer_list(state: &EchoState, request: &RemotingCommand) -> RemotingCommand {
    let header = match GetConsumerListByGroupRequestHeader::decode(request) {
        Ok(header) => header,
        Err(e) => return bad_header(request, e),
    };
    let ids = state
        .consumers
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .client_ids(&header.consumer_group);
    if ids.is_empty() {
        return RemotingCommand::response_to(
            request,
            response_code::SYSTEM_ERROR,
            Some(format!(
                "no consumer for this group, {}",
                header.consumer_group
            )),
        );
    }
    let body = serde_json::json!({ "consumerIdList": ids }).to_string();
    RemotingCommand::response_to(request, response_code::SUCCESS, None).with_body(Bytes::from(body))
}

fn bad_header(request: &RemotingCommand, error: impl std::fmt::Display) -> RemotingCommand {
    RemotingCommand::response_to(
        request,
        response_code::SYSTEM_ERROR,
        Some(error.to_string()),
    )
}

fn route(state: &EchoState, request: &RemotingCommand) -> RemotingCommand {
    let header = match GetRouteInfoRequestHeader::decode(request) {
        Ok(header) => header,
        Err(e) => return bad_header(request, e),
    };
    // PERM_READ | PERM_WRITE, plus PERM_INHERIT for the auto-create key topic.
    let perm = if header.topic == crate::producer::AUTO_CREATE_TOPIC {
        7
    } else {
        6
    };
    let body = serde_json::json!({
        "brokerDatas": [{
            "brokerAddrs": {"0": state.addr.to_string()},
            "brokerName": ECHO_BROKER_NAME,
            "cluster": "EchoCluster",
            "enableActingMaster": false,
        }],
        "filterServerTable": {},
        "queueDatas": [{
            "brokerName": ECHO_BROKER_NAME,
            "perm": perm,
            "readQueueNums": state.queues_per_topic,
            "writeQueueNums": state.queues_per_topic,
            "topicSysFlag": 0,
        }],
    });
    RemotingCommand::response_to(request, response_code::SUCCESS, None)
        .with_body(Bytes::from(body.to_string()))
}

fn send(state: &EchoState, request: &RemotingCommand, replies: &mut Replies) -> RemotingCommand {
    let header = match SendMessageRequestHeader::decode(request) {
        Ok(header) => header,
        Err(e) => return bad_header(request, e),
    };
    let queue_id = if header.queue_id < 0 {
        0
    } else {
        header.queue_id
    };
    let born_timestamp_ms = read_stamp(&request.body).map_or(header.born_timestamp, |us| us / 1000);
    let head_len = request.body.len().min(RECENT_HEAD_BYTES);
    let mut head = [0u8; RECENT_HEAD_BYTES];
    head[..head_len].copy_from_slice(&request.body[..head_len]);
    let recent = RecentMessage {
        born_timestamp_ms,
        head,
        head_len: head_len as u8,
    };
    let offset = {
        let mut queues = state
            .shard(&header.topic, queue_id)
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        let queue = queues.entry((header.topic.clone(), queue_id)).or_default();
        let offset = queue.next_offset;
        queue.next_offset += 1;
        queue.body_len = request.body.len();
        if let Some(props) = &header.properties {
            if props != &queue.properties {
                queue.properties = props.clone();
            }
        }
        queue.recent.push_back(recent);
        if queue.recent.len() > RECENT_STAMPS_PER_QUEUE {
            queue.recent.pop_front();
        }
        let held = std::mem::take(&mut queue.held);
        state.held_count.fetch_sub(held.len(), Ordering::Relaxed);
        for h in held {
            let response = pull_response(state, queue, &h.request, &h.header);
            replies.send(&h.reply, &response);
        }
        offset
    };
    let mut response = RemotingCommand::response_to(request, response_code::SUCCESS, None);
    SendMessageResponseHeader {
        msg_id: format!("7F000001{:08X}{:016X}", state.addr.port(), offset),
        queue_id,
        queue_offset: offset,
        transaction_id: None,
        batch_uniq_id: None,
        recall_handle: None,
    }
    .encode_with_region_and_trace(&mut response);
    response
}

fn pull(state: &EchoState, from: &ReplyTo, request: RemotingCommand) -> Option<RemotingCommand> {
    let header = match PullMessageRequestHeader::decode(&request) {
        Ok(header) => header,
        Err(e) => return Some(bad_header(&request, e)),
    };
    if header.sys_flag & FLAG_COMMIT_OFFSET != 0 {
        // A full table drops the commit, as a broker ignores a commit it cannot keep.
        let _ = state.commit_offset(
            (
                header.consumer_group.clone(),
                header.topic.clone(),
                header.queue_id,
            ),
            header.commit_offset,
        );
    }
    let mut queues = state
        .shard(&header.topic, header.queue_id)
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    let queue = queues
        .entry((header.topic.clone(), header.queue_id))
        .or_default();
    let at_end = header.queue_offset == queue.next_offset;
    if at_end
        && header.sys_flag & FLAG_SUSPEND != 0
        && header.suspend_timeout_millis > 0
        && state.held_count.load(Ordering::Relaxed) < HELD_PULLS_MAX
    {
        let hold_ms = u64::try_from(header.suspend_timeout_millis).unwrap_or(0);
        state.held_count.fetch_add(1, Ordering::Relaxed);
        queue.held.push(HeldPull {
            reply: from.clone(),
            deadline: Instant::now() + Duration::from_millis(hold_ms).min(HOLD_MAX),
            request,
            header,
        });
        return None;
    }
    Some(pull_response(state, queue, &request, &header))
}

fn pull_response(
    state: &EchoState,
    queue: &QueueState,
    request: &RemotingCommand,
    header: &PullMessageRequestHeader,
) -> RemotingCommand {
    let max = queue.next_offset;
    let (code, next, body) = if header.queue_offset < 0 || header.queue_offset > max {
        (response_code::PULL_OFFSET_MOVED, max, Vec::new())
    } else if header.queue_offset == max {
        (response_code::PULL_NOT_FOUND, max, Vec::new())
    } else {
        let count = i64::from(header.max_msg_nums.clamp(1, PULL_RECORDS_MAX))
            .min(max - header.queue_offset);
        let first_recent = max - queue.recent.len() as i64;
        let now_ms = epoch_us() / 1000;
        let mut body = Vec::new();
        let mut record_body = vec![b'e'; queue.body_len];
        let mut offset = header.queue_offset;
        while offset < header.queue_offset + count && body.len() < PULL_RESPONSE_MAX_BYTES {
            let recent =
                (offset >= first_recent).then(|| &queue.recent[(offset - first_recent) as usize]);
            let head_len = record_body.len().min(RECENT_HEAD_BYTES);
            match recent {
                Some(recent) => {
                    let kept = usize::from(recent.head_len).min(head_len);
                    record_body[..kept].copy_from_slice(&recent.head[..kept]);
                    record_body[kept..head_len].fill(b'e');
                }
                None => record_body[..head_len].fill(b'e'),
            }
            encode_record(
                &RecordFields {
                    queue_id: header.queue_id,
                    queue_offset: offset,
                    physical_offset: offset,
                    born_timestamp_ms: recent.map_or(now_ms, |r| r.born_timestamp_ms),
                    store_timestamp_ms: now_ms,
                    host: ([127, 0, 0, 1], i32::from(state.addr.port())),
                    body: &record_body,
                    topic: header.topic.as_bytes(),
                    properties: queue.properties.as_bytes(),
                },
                &mut body,
            );
            offset += 1;
        }
        (response_code::SUCCESS, offset, body)
    };
    let mut response = RemotingCommand::response_to(
        request,
        code,
        Some(match code {
            response_code::SUCCESS => "FOUND".to_owned(),
            response_code::PULL_NOT_FOUND => "OFFSET_OVERFLOW_ONE".to_owned(),
            _ => "OFFSET_OVERFLOW_BADLY".to_owned(),
        }),
    );
    PullMessageResponseHeader {
        suggest_which_broker_id: 0,
        next_begin_offset: next,
        min_offset: 0,
        max_offset: max,
        offset_delta: None,
        topic_sys_flag: None,
        group_sys_flag: None,
        forbidden_type: None,
    }
    .encode(&mut response);
    response.with_body(Bytes::from(body))
}

fn update_offset(state: &EchoState, request: &RemotingCommand) -> RemotingCommand {
    match UpdateConsumerOffsetRequestHeader::decode(request) {
        Ok(h) => {
            if state.commit_offset((h.consumer_group, h.topic, h.queue_id), h.commit_offset) {
                RemotingCommand::response_to(request, response_code::SUCCESS, None)
            } else {
                RemotingCommand::response_to(
                    request,
                    response_code::SYSTEM_ERROR,
                    Some(format!(
                        "echo server: more than {OFFSETS_MAX} consumer offsets"
                    )),
                )
            }
        }
        Err(e) => bad_header(request, e),
    }
}

fn query_offset(state: &EchoState, request: &RemotingCommand) -> RemotingCommand {
    match QueryConsumerOffsetRequestHeader::decode(request) {
        Ok(h) => {
            let offsets = state.offsets.lock().unwrap_or_else(|e| e.into_inner());
            match offsets.get(&(h.consumer_group, h.topic, h.queue_id)) {
                Some(offset) => RemotingCommand::response_to(request, response_code::SUCCESS, None)
                    .with_ext("offset", offset),
                None => RemotingCommand::response_to(
                    request,
                    response_code::QUERY_NOT_FOUND,
                    Some("Not found, V3_0_6_SNAPSHOT maybe".into()),
                ),
            }
        }
        Err(e) => bad_header(request, e),
    }
}

fn max_min_offset(state: &EchoState, request: &RemotingCommand, max: bool) -> RemotingCommand {
    let key = if max {
        GetMaxOffsetRequestHeader::decode(request).map(|h| (h.topic, h.queue_id))
    } else {
        GetMinOffsetRequestHeader::decode(request).map(|h| (h.topic, h.queue_id))
    };
    match key {
        Ok((topic, queue_id)) => {
            let offset = if max {
                let queues = state
                    .shard(&topic, queue_id)
                    .lock()
                    .unwrap_or_else(|e| e.into_inner());
                queues.get(&(topic, queue_id)).map_or(0, |q| q.next_offset)
            } else {
                0
            };
            RemotingCommand::response_to(request, response_code::SUCCESS, None)
                .with_ext("offset", offset)
        }
        Err(e) => bad_header(request, e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::client::{fetch_route, Connection};
    use ringmq::remoting::command::SerializeType;

    #[test]
    fn routes_to_itself_and_acks_sends() {
        let server = EchoServer::start("127.0.0.1:0", 3).expect("starts");
        let addr = server.local_addr().to_string();
        for serialize in [SerializeType::Json, SerializeType::RocketMq] {
            let conn = Connection::connect(&addr, serialize).expect("connects");
            let route = fetch_route(&conn, "AnyTopic")
                .expect("route")
                .expect("known");
            let queues = route.write_queues("AnyTopic", 8);
            assert_eq!(queues.len(), 3);
            assert_eq!(queues[0].broker_addr, addr);
            let cmd = send_command("AnyTopic", 1, b"");
            let response = conn.call(cmd.clone(), 3000).expect("answer");
            assert_eq!(response.code, response_code::SUCCESS);
            assert!(response.ext_fields.contains_key("MSG_REGION"));
            let second = conn.call(cmd, 3000).expect("answer");
            let offset = |r: &RemotingCommand| r.ext_fields["queueOffset"].clone();
            assert_ne!(offset(&response), offset(&second));
            let unknown = conn
                .call(RemotingCommand::request(9999), 3000)
                .expect("answer");
            assert_eq!(unknown.code, response_code::REQUEST_CODE_NOT_SUPPORTED);
            conn.close();
        }
        server.shutdown();
    }

    fn send_command(topic: &str, queue_id: i32, body: &[u8]) -> RemotingCommand {
        let mut cmd = RemotingCommand::request(request_code::SEND_MESSAGE_V2);
        SendMessageRequestHeader {
            producer_group: "pg".into(),
            topic: topic.into(),
            default_topic: "TBW102".into(),
            default_topic_queue_nums: 4,
            queue_id,
            sys_flag: 0,
            born_timestamp: 1,
            flag: 0,
            properties: None,
            reconsume_times: None,
            unit_mode: false,
            batch: false,
            max_reconsume_times: None,
            broker_name: None,
        }
        .encode_v2(&mut cmd);
        cmd.with_body(Bytes::copy_from_slice(body))
    }

    fn pull_command(topic: &str, queue_id: i32, offset: i64, suspend_ms: i64) -> RemotingCommand {
        let mut cmd = RemotingCommand::request(request_code::PULL_MESSAGE);
        PullMessageRequestHeader {
            consumer_group: "cg".into(),
            topic: topic.into(),
            queue_id,
            queue_offset: offset,
            max_msg_nums: 32,
            sys_flag: if suspend_ms > 0 { FLAG_SUSPEND } else { 0 },
            commit_offset: 0,
            suspend_timeout_millis: suspend_ms,
            subscription: Some("*".into()),
            sub_version: 0,
            expression_type: Some("TAG".into()),
            max_msg_bytes: None,
            request_source: None,
            proxy_froward_client_id: None,
        }
        .encode(&mut cmd);
        cmd
    }

    fn next_begin_offset(response: &RemotingCommand) -> i64 {
        response.ext_fields["nextBeginOffset"]
            .parse()
            .expect("offset")
    }

    /// A pull held on one worker is answered when a send arrives on a connection of another
    /// worker, and a held pull nobody wakes is answered at its suspend timeout.
    #[test]
    fn held_pulls_are_woken_across_workers_and_expire() {
        for model in [Some(2), None] {
            let server = EchoServer::start_with("127.0.0.1:0", 2, model).expect("starts");
            let addr = server.local_addr().to_string();
            // Connections go to the workers in turn: these two land on different workers.
            let consumer = Connection::connect(&addr, SerializeType::Json).expect("connects");
            let producer = Connection::connect(&addr, SerializeType::Json).expect("connects");
            let (done, woken) = std::sync::mpsc::channel();
            let started = Instant::now();
            consumer.send_async(
                pull_command("Held", 0, 0, 20_000),
                30_000,
                Box::new(move |r| {
                    let _ = done.send((r, started.elapsed()));
                }),
            );
            std::thread::sleep(Duration::from_millis(200));
            assert!(woken.try_recv().is_err(), "held until a send arrives");
            let sent_body: Vec<u8> = (0..100u8).collect();
            let sent = producer.call(send_command("Held", 0, &sent_body), 3000);
            assert_eq!(sent.expect("sent").code, response_code::SUCCESS);
            let (pulled, after) = woken.recv_timeout(Duration::from_secs(5)).expect("woken");
            let pulled = pulled.expect("answer");
            assert_eq!(pulled.code, response_code::SUCCESS);
            assert_eq!(next_begin_offset(&pulled), 1);
            let bodies: Vec<Vec<u8>> = crate::record::records(&pulled.body)
                .map(|r| r.expect("record").body.to_vec())
                .collect();
            // The record starts with the sent body's head; the rest is filler of the same length.
            let mut expected = sent_body[..RECENT_HEAD_BYTES].to_vec();
            expected.resize(sent_body.len(), b'e');
            assert_eq!(bodies, [expected]);
            assert!(after < Duration::from_secs(5), "{after:?}");
            let started = Instant::now();
            let expired = consumer
                .call(pull_command("Held", 0, 1, 300), 5000)
                .expect("answer");
            assert_eq!(expired.code, response_code::PULL_NOT_FOUND);
            let held_for = started.elapsed();
            assert!(held_for >= Duration::from_millis(290), "{held_for:?}");
            assert!(held_for < Duration::from_secs(3), "{held_for:?}");
            consumer.close();
            producer.close();
            server.shutdown();
        }
    }

    /// Pulls held for one connection and woken at once by sends from two other workers get
    /// every answer, each the whole frame of its own pull (the right opaque, its queue's
    /// record): two workers writing large answers to one socket do not interleave them.
    #[test]
    fn answers_written_by_two_workers_to_one_connection_do_not_interleave() {
        const QUEUES: i32 = 128;
        const BODY_BYTES: usize = 64 * 1024;
        for model in [Some(3), None] {
            let server = EchoServer::start_with("127.0.0.1:0", 8, model).expect("starts");
            let addr = server.local_addr().to_string();
            // Connections go to the workers in turn: one each.
            let consumer = Connection::connect(&addr, SerializeType::RocketMq).expect("connects");
            let producers = [
                Connection::connect(&addr, SerializeType::RocketMq).expect("connects"),
                Connection::connect(&addr, SerializeType::RocketMq).expect("connects"),
            ];
            let (done, answered) = std::sync::mpsc::channel();
            for queue_id in 0..QUEUES {
                let done = done.clone();
                consumer.send_async(
                    pull_command("Fan", queue_id, 0, 20_000),
                    30_000,
                    Box::new(move |r| {
                        let _ = done.send((queue_id, r));
                    }),
                );
            }
            std::thread::sleep(Duration::from_millis(200));
            assert!(answered.try_recv().is_err(), "held until a send arrives");
            let sending: Vec<_> = producers
                .iter()
                .enumerate()
                .map(|(p, producer)| {
                    let producer = Arc::clone(producer);
                    std::thread::spawn(move || {
                        for queue_id in (0..QUEUES).filter(|q| q % 2 == p as i32) {
                            let mut body = vec![b'x'; BODY_BYTES];
                            body[..4].copy_from_slice(&queue_id.to_be_bytes());
                            let sent = producer
                                .call(send_command("Fan", queue_id, &body), 5000)
                                .expect("sent");
                            assert_eq!(sent.code, response_code::SUCCESS);
                        }
                    })
                })
                .collect();
            for thread in sending {
                thread.join().expect("sends");
            }
            let mut seen = std::collections::BTreeSet::new();
            for _ in 0..QUEUES {
                let (queue_id, pulled) = answered
                    .recv_timeout(Duration::from_secs(20))
                    .expect("answered");
                let pulled = pulled.expect("a well-formed answer");
                assert_eq!(pulled.code, response_code::SUCCESS);
                assert_eq!(next_begin_offset(&pulled), 1);
                let records: Vec<_> = crate::record::records(&pulled.body)
                    .map(|r| r.expect("record"))
                    .collect();
                assert_eq!(records.len(), 1);
                assert_eq!(records[0].queue_id, queue_id);
                assert_eq!(records[0].body.len(), BODY_BYTES);
                assert_eq!(records[0].body[..4], queue_id.to_be_bytes());
                assert!(seen.insert(queue_id), "queue {queue_id} answered twice");
            }
            consumer.close();
            for producer in producers {
                producer.close();
            }
            server.shutdown();
        }
    }

    /// A client that sends far more than the output bound before reading gets every answer,
    /// in order (the worker stops reading it while its answers wait, then goes on).
    #[test]
    fn a_client_that_reads_late_gets_every_answer() {
        for model in [Some(1), None] {
            let server = EchoServer::start_with("127.0.0.1:0", 1, model).expect("starts");
            let addr = server.local_addr().to_string();
            let conn = Connection::connect(&addr, SerializeType::Json).expect("connects");
            let body = vec![b'x'; 8 * 1024];
            let sent = conn
                .call(send_command("Late", 0, &body), 3000)
                .expect("sent");
            assert_eq!(sent.code, response_code::SUCCESS);
            // Each answer carries one 8 KiB record: 2,000 of them are about four times the bound.
            let pulls = 4 * crate::echo_workers::OUT_PENDING_MAX_BYTES / body.len() / 2;
            let (done, answered) = std::sync::mpsc::channel();
            for _ in 0..pulls {
                let done = done.clone();
                conn.send_async(
                    pull_command("Late", 0, 0, 0),
                    30_000,
                    Box::new(move |r| {
                        let _ = done.send(r.map(|r| (r.code, r.body.len())));
                    }),
                );
            }
            for _ in 0..pulls {
                let (code, body_len) = answered
                    .recv_timeout(Duration::from_secs(30))
                    .expect("answered")
                    .expect("answer");
                assert_eq!(code, response_code::SUCCESS);
                assert!(body_len > body.len());
            }
            conn.close();
            server.shutdown();
        }
    }

    fn heartbeat_command(client_id: &str, group: &str) -> RemotingCommand {
        let body = serde_json::json!({
            "clientID": client_id,
            "consumerDataSet": [{"groupName": group, "consumeType": "CONSUME_PASSIVELY",
                "messageModel": "CLUSTERING", "consumeFromWhere": "CONSUME_FROM_FIRST_OFFSET",
                "subscriptionDataSet": [], "unitMode": false}],
            "producerDataSet": [],
        });
        RemotingCommand::request(request_code::HEART_BEAT).with_body(Bytes::from(body.to_string()))
    }

    fn consumer_ids(conn: &Connection, group: &str) -> (i32, Vec<String>) {
        let mut cmd = RemotingCommand::request(request_code::GET_CONSUMER_LIST_BY_GROUP);
        GetConsumerListByGroupRequestHeader {
            consumer_group: group.into(),
        }
        .encode(&mut cmd);
        let response = conn.call(cmd, 3000).expect("answer");
        if response.code != response_code::SUCCESS {
            return (response.code, Vec::new());
        }
        let body: serde_json::Value = serde_json::from_slice(&response.body).expect("json");
        let ids = body["consumerIdList"]
            .as_array()
            .expect("list")
            .iter()
            .map(|v| v.as_str().expect("id").to_owned())
            .collect();
        (response.code, ids)
    }

    /// What a push consumer's rebalance and offset store ask: the group's client ids (from
    /// heartbeats, gone with the connection or an unregister) and offsets kept in memory.
    #[test]
    fn serves_the_push_consumers_requests() {
        for model in [Some(2), None] {
            let server = EchoServer::start_with("127.0.0.1:0", 2, model).expect("starts");
            let addr = server.local_addr().to_string();
            let a = Connection::connect(&addr, SerializeType::Json).expect("connects");
            let b = Connection::connect(&addr, SerializeType::RocketMq).expect("connects");
            let (code, _) = consumer_ids(&a, "pushGroup");
            assert_eq!(code, response_code::SYSTEM_ERROR);
            for (conn, id) in [(&a, "127.0.0.1@a"), (&b, "127.0.0.1@b")] {
                let response = conn
                    .call(heartbeat_command(id, "pushGroup"), 3000)
                    .expect("answer");
                assert_eq!(response.code, response_code::SUCCESS);
            }
            assert_eq!(
                consumer_ids(&a, "pushGroup"),
                (
                    response_code::SUCCESS,
                    vec!["127.0.0.1@a".into(), "127.0.0.1@b".into()]
                )
            );
            let bad =
                RemotingCommand::request(request_code::HEART_BEAT).with_body(Bytes::from("{"));
            assert_eq!(
                a.call(bad, 3000).expect("answer").code,
                response_code::SYSTEM_ERROR
            );
            let mut unregister = RemotingCommand::request(request_code::UNREGISTER_CLIENT);
            UnregisterClientRequestHeader {
                client_id: "127.0.0.1@a".into(),
                producer_group: None,
                consumer_group: Some("pushGroup".into()),
            }
            .encode(&mut unregister);
            assert_eq!(
                a.call(unregister, 3000).expect("answer").code,
                response_code::SUCCESS
            );
            assert_eq!(consumer_ids(&a, "pushGroup").1, ["127.0.0.1@b"]);
            b.close();
            let deadline = Instant::now() + Duration::from_secs(5);
            while consumer_ids(&a, "pushGroup").0 == response_code::SUCCESS {
                assert!(
                    Instant::now() < deadline,
                    "the closed connection's client stays"
                );
                std::thread::sleep(Duration::from_millis(20));
            }
            let query = |queue_id| {
                let mut cmd = RemotingCommand::request(request_code::QUERY_CONSUMER_OFFSET);
                QueryConsumerOffsetRequestHeader {
                    consumer_group: "pushGroup".into(),
                    topic: "T".into(),
                    queue_id,
                    set_zero_if_not_found: None,
                }
                .encode(&mut cmd);
                a.call(cmd, 3000).expect("answer")
            };
            assert_eq!(query(3).code, response_code::QUERY_NOT_FOUND);
            let mut update = RemotingCommand::request(request_code::UPDATE_CONSUMER_OFFSET);
            UpdateConsumerOffsetRequestHeader {
                consumer_group: "pushGroup".into(),
                topic: "T".into(),
                queue_id: 3,
                commit_offset: 42,
            }
            .encode(&mut update);
            assert_eq!(
                a.call(update, 3000).expect("answer").code,
                response_code::SUCCESS
            );
            let found = query(3);
            assert_eq!(found.code, response_code::SUCCESS);
            assert_eq!(found.ext_fields["offset"], "42");
            a.close();
            server.shutdown();
        }
    }
}
