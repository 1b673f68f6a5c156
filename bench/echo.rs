//! `echo-server`: a remoting server that acknowledges sends without storing them — the ceiling
//! any broker could reach with this client on this machine. It also answers the name server's
//! GET_ROUTEINFO_BY_TOPIC with a route pointing at itself, so `-n <echo addr>` works for every
//! kind without a broker.
//!
//! Pulls are served from per-queue counters: a queue that has seen N sends has offsets 0..N,
//! and a pull gets synthetic records of the last body size. The send stamps of the most recent
//! [`RECENT_STAMPS_PER_QUEUE`] messages are kept (8 bytes each, not the messages) so the
//! records carry them and end-to-end latency through the echo server is real. Pulls at the end
//! of a queue are held (long polling) until a send arrives or the suspend timeout passes.

use std::collections::{HashMap, VecDeque};
use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use ringmq::remoting::codes::{request_code, response_code};
use ringmq::remoting::command::RemotingCommand;
use ringmq::remoting::frame::{decode_frame, encode_frame, FRAME_SIZE_MAX_BYTES};
use ringmq::remoting::headers::{
    GetMaxOffsetRequestHeader, GetMinOffsetRequestHeader, GetRouteInfoRequestHeader,
    PullMessageRequestHeader, PullMessageResponseHeader, QueryConsumerOffsetRequestHeader,
    SendMessageRequestHeader, SendMessageResponseHeader, UpdateConsumerOffsetRequestHeader,
};

use crate::client::resolve_loopback;
use crate::consumer::FLAG_COMMIT_OFFSET;
use crate::consumer::FLAG_SUSPEND;
use crate::error::BenchError;
use crate::record::{encode_record, read_stamp, write_stamp, RecordFields, STAMP_BYTES};
use crate::stats::epoch_us;

/// Connections the echo server accepts at once.
pub const ECHO_CONNECTIONS_MAX: usize = 1024;
/// Send stamps kept per queue (8 bytes each).
pub const RECENT_STAMPS_PER_QUEUE: usize = 4096;
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
/// Lock shards of the queue table.
const SHARDS: usize = 64;
/// The broker name the echo route announces.
pub const ECHO_BROKER_NAME: &str = "echo-broker";

/// A connection's outgoing frames. One writer thread per connection writes them in order
/// ([`write_loop`]); any thread that answers on the connection (its own reader, a producer's
/// thread waking a held pull, the sweep) only queues an encoded frame. A thread preempted
/// while holding a socket lock used to stall every other thread answering on that connection
/// (on a loaded 2-core machine, for tens to hundreds of ms), which made the W5 ceiling's e2e
/// tail differ from run to run.
type SharedWriter = std::sync::mpsc::SyncSender<Bytes>;

/// Frames queued per connection before an answering thread waits for its writer.
pub const WRITE_QUEUE_FRAMES: usize = 65_536;
/// Most bytes the writer gathers from its queue into one write.
pub const WRITE_BATCH_MAX_BYTES: usize = 1024 * 1024;

struct HeldPull {
    writer: SharedWriter,
    request: RemotingCommand,
    header: PullMessageRequestHeader,
    deadline: Instant,
}

#[derive(Default)]
struct QueueState {
    next_offset: i64,
    body_len: usize,
    properties: String,
    /// Stamps of offsets `next_offset - recent.len() .. next_offset`.
    recent: VecDeque<i64>,
    held: Vec<HeldPull>,
}

struct EchoState {
    addr: SocketAddr,
    queues_per_topic: i32,
    shards: Vec<Mutex<HashMap<(String, i32), QueueState>>>,
    offsets: Mutex<HashMap<(String, String, i32), i64>>,
    held_count: AtomicUsize,
    stop: AtomicBool,
    /// Open connections by id (a clone of each socket, to shut them down at the end).
    connections: Mutex<HashMap<u64, TcpStream>>,
    connection_count: AtomicUsize,
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
}

/// A running echo server.
pub struct EchoServer {
    state: Arc<EchoState>,
    threads: Vec<JoinHandle<()>>,
}

impl EchoServer {
    /// Binds a loopback `listen` address and starts serving.
    pub fn start(listen: &str, queues_per_topic: i32) -> Result<Self, BenchError> {
        let addr = resolve_loopback(listen)?;
        let listener = TcpListener::bind(addr).map_err(|source| BenchError::Io {
            what: format!("bind {addr}"),
            source,
        })?;
        let addr = listener.local_addr().map_err(|source| BenchError::Io {
            what: "local address".into(),
            source,
        })?;
        listener
            .set_nonblocking(true)
            .map_err(|source| BenchError::Io {
                what: "listener".into(),
                source,
            })?;
        let state = Arc::new(EchoState {
            addr,
            queues_per_topic,
            shards: (0..SHARDS).map(|_| Mutex::new(HashMap::new())).collect(),
            offsets: Mutex::new(HashMap::new()),
            held_count: AtomicUsize::new(0),
            stop: AtomicBool::new(false),
            connections: Mutex::new(HashMap::new()),
            connection_count: AtomicUsize::new(0),
        });
        let spawn = |name: &str, f: Box<dyn FnOnce() + Send>| {
            std::thread::Builder::new()
                .name(name.to_owned())
                .spawn(f)
                .map_err(|source| BenchError::Io {
                    what: format!("spawn {name}"),
                    source,
                })
        };
        let accept_state = Arc::clone(&state);
        let sweep_state = Arc::clone(&state);
        let threads = vec![
            spawn(
                "echo-accept",
                Box::new(move || accept_loop(listener, accept_state)),
            )?,
            spawn("echo-sweep", Box::new(move || sweep_loop(sweep_state)))?,
        ];
        Ok(EchoServer { state, threads })
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.state.addr
    }

    /// Stops accepting, joins the server threads and closes every connection (their threads
    /// then see end-of-stream and exit).
    pub fn shutdown(self) {
        self.state.stop.store(true, Ordering::Relaxed);
        for thread in self.threads {
            let _ = thread.join();
        }
        let connections = self
            .state
            .connections
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        for conn in connections.values() {
            let _ = conn.shutdown(Shutdown::Both);
        }
    }
}

fn accept_loop(listener: TcpListener, state: Arc<EchoState>) {
    let mut next_id: u64 = 0;
    while !state.stop.load(Ordering::Relaxed) {
        match listener.accept() {
            Ok((stream, peer)) => {
                if !peer.ip().is_loopback()
                    || state.connection_count.load(Ordering::Relaxed) >= ECHO_CONNECTIONS_MAX
                {
                    let _ = stream.shutdown(Shutdown::Both);
                    continue;
                }
                let _ = stream.set_nonblocking(false);
                let _ = stream.set_nodelay(true);
                let (Ok(read), Ok(write), Ok(keep)) =
                    (stream.try_clone(), stream.try_clone(), stream.try_clone())
                else {
                    continue;
                };
                next_id += 1;
                let id = next_id;
                state
                    .connections
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .insert(id, keep);
                state.connection_count.fetch_add(1, Ordering::Relaxed);
                let conn_state = Arc::clone(&state);
                let (frames, queued) = std::sync::mpsc::sync_channel(WRITE_QUEUE_FRAMES);
                let writer = std::thread::Builder::new()
                    .name(format!("echo-write-{peer}"))
                    .spawn(move || write_loop(write, &queued));
                if writer.is_err() {
                    let _ = stream.shutdown(Shutdown::Both);
                    continue;
                }
                let spawned = std::thread::Builder::new()
                    .name(format!("echo-conn-{peer}"))
                    .spawn(move || {
                        serve(read, frames, &conn_state);
                        conn_state
                            .connections
                            .lock()
                            .unwrap_or_else(|e| e.into_inner())
                            .remove(&id);
                        conn_state.connection_count.fetch_sub(1, Ordering::Relaxed);
                    });
                if spawned.is_err() {
                    let _ = stream.shutdown(Shutdown::Both);
                    state
                        .connections
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .remove(&id);
                    state.connection_count.fetch_sub(1, Ordering::Relaxed);
                }
            }
            Err(e) if e.kind() == ErrorKind::WouldBlock => {
                std::thread::sleep(Duration::from_millis(20));
            }
            Err(_) => std::thread::sleep(Duration::from_millis(20)),
        }
    }
}

fn sweep_loop(state: Arc<EchoState>) {
    while !state.stop.load(Ordering::Relaxed) {
        std::thread::sleep(SWEEP_INTERVAL);
        let now = Instant::now();
        for shard in &state.shards {
            let mut expired = Vec::new();
            {
                let mut queues = shard.lock().unwrap_or_else(|e| e.into_inner());
                for queue in queues.values_mut() {
                    if queue.held.iter().any(|h| h.deadline <= now) {
                        let (gone, kept): (Vec<_>, Vec<_>) =
                            queue.held.drain(..).partition(|h| h.deadline <= now);
                        queue.held = kept;
                        for held in gone {
                            let response =
                                pull_response(&state, queue, &held.request, &held.header);
                            expired.push((held.writer, response));
                        }
                    }
                }
            }
            state.held_count.fetch_sub(expired.len(), Ordering::Relaxed);
            for (writer, response) in expired {
                write_response(&writer, &response);
            }
        }
    }
}

fn serve(mut read: TcpStream, writer: SharedWriter, state: &EchoState) {
    let mut buf = BytesMut::with_capacity(256 * 1024);
    let mut chunk = vec![0u8; 256 * 1024];
    loop {
        loop {
            match decode_frame(&mut buf, FRAME_SIZE_MAX_BYTES) {
                Ok(Some(request)) => {
                    if request.is_response() {
                        continue;
                    }
                    if let Some(response) = handle(state, &writer, request) {
                        write_response(&writer, &response);
                    }
                }
                Ok(None) => break,
                Err(_) => {
                    let _ = read.shutdown(Shutdown::Both);
                    return;
                }
            }
        }
        match read.read(&mut chunk) {
            Ok(0) | Err(_) => return,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    }
}

fn write_response(writer: &SharedWriter, response: &RemotingCommand) {
    let mut out = BytesMut::with_capacity(256 + response.body.len());
    if encode_frame(response, &mut out).is_err() {
        return;
    }
    // Fails only once the writer stopped (the connection is gone).
    let _ = writer.send(out.freeze());
}

/// The connection's writer: writes queued frames in order, gathering what is already queued
/// into one write, until the socket fails or every sender is gone.
fn write_loop(mut stream: TcpStream, queued: &std::sync::mpsc::Receiver<Bytes>) {
    let mut batch = Vec::with_capacity(64 * 1024);
    while let Ok(frame) = queued.recv() {
        batch.clear();
        batch.extend_from_slice(&frame);
        while batch.len() < WRITE_BATCH_MAX_BYTES {
            match queued.try_recv() {
                Ok(frame) => batch.extend_from_slice(&frame),
                Err(_) => break,
            }
        }
        if stream.write_all(&batch).is_err() {
            let _ = stream.shutdown(Shutdown::Both);
            return;
        }
    }
}

/// Answers one request; `None` for oneway requests and held pulls.
fn handle(
    state: &EchoState,
    writer: &SharedWriter,
    request: RemotingCommand,
) -> Option<RemotingCommand> {
    let response = match request.code {
        request_code::GET_ROUTEINFO_BY_TOPIC => route(state, &request),
        request_code::SEND_MESSAGE | request_code::SEND_MESSAGE_V2 => send(state, &request),
        request_code::PULL_MESSAGE => return pull(state, writer, request),
        request_code::HEART_BEAT | request_code::UNREGISTER_CLIENT => {
            RemotingCommand::response_to(&request, response_code::SUCCESS, None)
        }
        request_code::UPDATE_CONSUMER_OFFSET => update_offset(state, &request),
        request_code::QUERY_CONSUMER_OFFSET => query_offset(state, &request),
        request_code::GET_MAX_OFFSET => max_min_offset(state, &request, true),
        request_code::GET_MIN_OFFSET => max_min_offset(state, &request, false),
        code => RemotingCommand::response_to(
            &request,
            response_code::REQUEST_CODE_NOT_SUPPORTED,
            Some(format!(" request type {code} not supported")),
        ),
    };
    (!request.is_oneway()).then_some(response)
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

fn send(state: &EchoState, request: &RemotingCommand) -> RemotingCommand {
    let header = match SendMessageRequestHeader::decode(request) {
        Ok(header) => header,
        Err(e) => return bad_header(request, e),
    };
    let queue_id = if header.queue_id < 0 {
        0
    } else {
        header.queue_id
    };
    let stamp = read_stamp(&request.body).unwrap_or(header.born_timestamp.saturating_mul(1000));
    let (offset, woken) = {
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
        queue.recent.push_back(stamp);
        if queue.recent.len() > RECENT_STAMPS_PER_QUEUE {
            queue.recent.pop_front();
        }
        let held = std::mem::take(&mut queue.held);
        let woken: Vec<(SharedWriter, RemotingCommand)> = held
            .into_iter()
            .map(|h| {
                let response = pull_response(state, queue, &h.request, &h.header);
                (h.writer, response)
            })
            .collect();
        (offset, woken)
    };
    state.held_count.fetch_sub(woken.len(), Ordering::Relaxed);
    for (writer, response) in woken {
        write_response(&writer, &response);
    }
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

fn pull(
    state: &EchoState,
    writer: &SharedWriter,
    request: RemotingCommand,
) -> Option<RemotingCommand> {
    let header = match PullMessageRequestHeader::decode(&request) {
        Ok(header) => header,
        Err(e) => return Some(bad_header(&request, e)),
    };
    if header.sys_flag & FLAG_COMMIT_OFFSET != 0 {
        state
            .offsets
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(
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
            writer: writer.clone(),
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
            let stamp =
                (offset >= first_recent).then(|| queue.recent[(offset - first_recent) as usize]);
            if record_body.len() >= STAMP_BYTES {
                match stamp {
                    Some(stamp) => write_stamp(&mut record_body, stamp),
                    None => record_body[..STAMP_BYTES].fill(b'e'),
                }
            }
            encode_record(
                &RecordFields {
                    queue_id: header.queue_id,
                    queue_offset: offset,
                    physical_offset: offset,
                    born_timestamp_ms: stamp.map_or(now_ms, |s| s / 1000),
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
            state
                .offsets
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .insert((h.consumer_group, h.topic, h.queue_id), h.commit_offset);
            RemotingCommand::response_to(request, response_code::SUCCESS, None)
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
            let mut cmd = RemotingCommand::request(request_code::SEND_MESSAGE_V2);
            SendMessageRequestHeader {
                producer_group: "pg".into(),
                topic: "AnyTopic".into(),
                default_topic: "TBW102".into(),
                default_topic_queue_nums: 4,
                queue_id: 1,
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
}
