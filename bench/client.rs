//! A lean remoting client: one TCP connection, many requests in flight, responses matched by
//! opaque on a reader thread, and the few broker/name-server calls the bench needs.
//!
//! Plain std threads and blocking sockets: a writer lock per connection, one reader thread per
//! connection that runs the response callbacks. Callbacks run on the reader thread, so they
//! must be short; they may issue new requests on any connection (the consumer re-pulls from its
//! callback).

use std::collections::HashMap;
use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream, ToSocketAddrs};
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use bytes::BytesMut;
use ringmq::remoting::codes::{request_code, response_code};
use ringmq::remoting::command::{RemotingCommand, SerializeType};
use ringmq::remoting::frame::{decode_frame, encode_frame, FRAME_SIZE_MAX_BYTES};
use ringmq::remoting::headers::GetRouteInfoRequestHeader;

use crate::error::{BenchError, RpcError};

/// Requests in flight per connection; beyond this a request fails at once (the async producer
/// keeps itself far below with its own permits).
pub const PENDING_MAX: usize = 1 << 20;
/// How often the reader thread looks for timed-out requests.
pub const EXPIRY_SCAN_INTERVAL: Duration = Duration::from_millis(100);
/// Bytes read from the socket per `read` call.
pub const READ_CHUNK_BYTES: usize = 256 * 1024;
/// Connect timeout.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);
/// Java client `timeoutMillis` for name server and admin calls.
pub const ADMIN_TIMEOUT_MS: u64 = 3000;

/// Called exactly once with the response or the reason there is none.
pub type ResponseCallback = Box<dyn FnOnce(Result<RemotingCommand, RpcError>) + Send>;

struct Pending {
    deadline: Instant,
    timeout_ms: u64,
    callback: ResponseCallback,
}

struct Shared {
    addr: String,
    /// Set under the `pending` lock so no request is added after the drain.
    closed: AtomicBool,
    pending: Mutex<HashMap<i32, Pending>>,
}

impl Shared {
    fn lock_pending(&self) -> std::sync::MutexGuard<'_, HashMap<i32, Pending>> {
        // A poisoned lock means a callback panicked; the map itself is still consistent.
        self.pending.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Marks the connection closed and fails everything in flight.
    fn fail_all(&self) {
        let drained: Vec<Pending> = {
            let mut pending = self.lock_pending();
            self.closed.store(true, Ordering::Release);
            pending.drain().map(|(_, p)| p).collect()
        };
        for p in drained {
            (p.callback)(Err(RpcError::Closed {
                addr: self.addr.clone(),
            }));
        }
    }

    fn expire(&self, now: Instant) {
        let expired: Vec<Pending> = {
            let mut pending = self.lock_pending();
            let keys: Vec<i32> = pending
                .iter()
                .filter(|(_, p)| p.deadline <= now)
                .map(|(k, _)| *k)
                .collect();
            keys.iter().filter_map(|k| pending.remove(k)).collect()
        };
        for p in expired {
            (p.callback)(Err(RpcError::Timeout {
                addr: self.addr.clone(),
                timeout_ms: p.timeout_ms,
            }));
        }
    }
}

struct Writer {
    stream: TcpStream,
    buf: BytesMut,
}

/// One multiplexed connection.
pub struct Connection {
    serialize_type: SerializeType,
    writer: Mutex<Writer>,
    shared: Arc<Shared>,
    next_opaque: AtomicI32,
    reader: Mutex<Option<JoinHandle<()>>>,
}

/// Resolves `addr` ("host:port", or the first entry of a `;` list) and refuses anything that
/// is not loopback: this machine may only send to loopback.
pub fn resolve_loopback(addr: &str) -> Result<SocketAddr, BenchError> {
    let first = addr.split(';').next().unwrap_or(addr).trim();
    let resolved: Vec<SocketAddr> = first
        .to_socket_addrs()
        .map_err(|source| BenchError::Resolve {
            addr: first.to_owned(),
            source,
        })?
        .collect();
    if resolved.is_empty() || !resolved.iter().all(|a| a.ip().is_loopback()) {
        return Err(BenchError::NotLoopback {
            addr: first.to_owned(),
        });
    }
    Ok(resolved[0])
}

impl Connection {
    /// Connects to a loopback `addr` and starts the reader thread.
    pub fn connect(addr: &str, serialize_type: SerializeType) -> Result<Arc<Self>, BenchError> {
        let sock_addr = resolve_loopback(addr)?;
        let stream = TcpStream::connect_timeout(&sock_addr, CONNECT_TIMEOUT).map_err(|source| {
            BenchError::Connect {
                addr: addr.to_owned(),
                source,
            }
        })?;
        let io_err = |source| BenchError::Io {
            what: format!("socket to {addr}"),
            source,
        };
        stream.set_nodelay(true).map_err(io_err)?;
        let read_stream = stream.try_clone().map_err(io_err)?;
        read_stream
            .set_read_timeout(Some(EXPIRY_SCAN_INTERVAL))
            .map_err(io_err)?;
        let shared = Arc::new(Shared {
            addr: sock_addr.to_string(),
            closed: AtomicBool::new(false),
            pending: Mutex::new(HashMap::new()),
        });
        let conn = Arc::new(Connection {
            serialize_type,
            writer: Mutex::new(Writer {
                stream,
                buf: BytesMut::with_capacity(64 * 1024),
            }),
            shared: Arc::clone(&shared),
            next_opaque: AtomicI32::new(1),
            reader: Mutex::new(None),
        });
        let weak = Arc::downgrade(&conn);
        let handle = std::thread::Builder::new()
            .name(format!("bench-rd-{sock_addr}"))
            .spawn(move || reader_loop(read_stream, shared, weak))
            .map_err(|source| BenchError::Io {
                what: "spawn reader thread".into(),
                source,
            })?;
        *conn.reader.lock().unwrap_or_else(|e| e.into_inner()) = Some(handle);
        Ok(conn)
    }

    /// Sends `cmd` (its opaque and serialize type are set here); `callback` runs exactly once,
    /// on the reader thread, or right here if the request cannot be sent.
    pub fn send_async(
        &self,
        mut cmd: RemotingCommand,
        timeout_ms: u64,
        callback: ResponseCallback,
    ) {
        let opaque = self.next_opaque.fetch_add(1, Ordering::Relaxed) & i32::MAX;
        cmd.opaque = opaque;
        cmd.serialize_type = self.serialize_type;
        {
            let mut pending = self.shared.lock_pending();
            if self.shared.closed.load(Ordering::Acquire) {
                drop(pending);
                return callback(Err(RpcError::Closed {
                    addr: self.shared.addr.clone(),
                }));
            }
            if pending.len() >= PENDING_MAX {
                drop(pending);
                return callback(Err(RpcError::TooManyInFlight {
                    addr: self.shared.addr.clone(),
                    max: PENDING_MAX,
                }));
            }
            pending.insert(
                opaque,
                Pending {
                    deadline: Instant::now() + Duration::from_millis(timeout_ms),
                    timeout_ms,
                    callback,
                },
            );
        }
        if let Err(error) = self.write_command(&cmd) {
            let removed = self.shared.lock_pending().remove(&opaque);
            if let Some(p) = removed {
                (p.callback)(Err(error));
            }
        }
    }

    /// Sends `cmd` and waits for its response.
    pub fn call(&self, cmd: RemotingCommand, timeout_ms: u64) -> Result<RemotingCommand, RpcError> {
        let (tx, rx) = mpsc::sync_channel(1);
        self.send_async(
            cmd,
            timeout_ms,
            Box::new(move |result| {
                // The receiver only goes away if the caller is gone; nothing to tell then.
                let _ = tx.send(result);
            }),
        );
        rx.recv().unwrap_or_else(|_| {
            Err(RpcError::Closed {
                addr: self.shared.addr.clone(),
            })
        })
    }

    fn write_command(&self, cmd: &RemotingCommand) -> Result<(), RpcError> {
        let mut writer = self.writer.lock().unwrap_or_else(|e| e.into_inner());
        let Writer { stream, buf } = &mut *writer;
        buf.clear();
        encode_frame(cmd, buf).map_err(|e| RpcError::Encode {
            code: cmd.code,
            reason: e.to_string(),
        })?;
        if stream.write_all(buf).is_err() {
            // The reader sees the broken socket too and fails everything in flight.
            let _ = stream.shutdown(Shutdown::Both);
            return Err(RpcError::Closed {
                addr: self.shared.addr.clone(),
            });
        }
        if buf.capacity() > 4 * 1024 * 1024 {
            *buf = BytesMut::with_capacity(64 * 1024);
        }
        Ok(())
    }

    /// Closes the socket; every request in flight fails with [`RpcError::Closed`]. Waits for the
    /// reader thread unless called from it.
    pub fn close(&self) {
        {
            let writer = self.writer.lock().unwrap_or_else(|e| e.into_inner());
            let _ = writer.stream.shutdown(Shutdown::Both);
        }
        let handle = self.reader.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(handle) = handle {
            if handle.thread().id() != std::thread::current().id() {
                let _ = handle.join();
            }
        }
        self.shared.fail_all();
    }
}

impl Drop for Connection {
    fn drop(&mut self) {
        // The reader thread holds a duplicate of the socket; shutting it down makes that thread
        // see end-of-stream and exit even when nobody called `close`.
        let writer = self.writer.get_mut().unwrap_or_else(|e| e.into_inner());
        let _ = writer.stream.shutdown(Shutdown::Both);
    }
}

fn reader_loop(mut stream: TcpStream, shared: Arc<Shared>, conn: std::sync::Weak<Connection>) {
    let mut buf = BytesMut::with_capacity(READ_CHUNK_BYTES * 2);
    let mut chunk = vec![0u8; READ_CHUNK_BYTES];
    let mut last_scan = Instant::now();
    'outer: loop {
        loop {
            match decode_frame(&mut buf, FRAME_SIZE_MAX_BYTES) {
                Ok(Some(cmd)) => dispatch(cmd, &shared, &conn),
                Ok(None) => break,
                Err(error) => {
                    eprintln!("ringmq-bench: bad frame from {}: {error}", shared.addr);
                    break 'outer;
                }
            }
        }
        match stream.read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(_) => break,
        }
        let now = Instant::now();
        if now.duration_since(last_scan) >= EXPIRY_SCAN_INTERVAL {
            last_scan = now;
            shared.expire(now);
        }
    }
    let _ = stream.shutdown(Shutdown::Both);
    shared.fail_all();
}

fn dispatch(cmd: RemotingCommand, shared: &Shared, conn: &std::sync::Weak<Connection>) {
    if cmd.is_response() {
        let pending = shared.lock_pending().remove(&cmd.opaque);
        if let Some(p) = pending {
            (p.callback)(Ok(cmd));
        }
        return;
    }
    // A request from the broker (consumer ids changed, running info, ...): the bench answers
    // the two-way ones with "not supported", like a client that lacks the feature.
    if cmd.is_oneway() {
        return;
    }
    if let Some(conn) = conn.upgrade() {
        let response = RemotingCommand::response_to(
            &cmd,
            response_code::REQUEST_CODE_NOT_SUPPORTED,
            Some(format!(
                "ringmq-bench does not handle request code {}",
                cmd.code
            )),
        );
        let _ = conn.write_command(&response);
    }
}

/// One broker of a route.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BrokerRoute {
    pub name: String,
    /// Broker id 0.
    pub master_addr: Option<String>,
}

/// One `QueueData` of a route.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueueRoute {
    pub broker_name: String,
    pub read_queue_nums: i32,
    pub write_queue_nums: i32,
    pub perm: i32,
}

/// `TopicRouteData`, the parts the bench uses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicRoute {
    pub brokers: Vec<BrokerRoute>,
    pub queues: Vec<QueueRoute>,
}

/// `PermName.PERM_WRITE`.
pub const PERM_WRITE: i32 = 2;
/// `PermName.PERM_READ`.
pub const PERM_READ: i32 = 4;

/// A queue of a topic on a broker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueueAddr {
    pub topic: String,
    pub broker_name: String,
    pub broker_addr: String,
    pub queue_id: i32,
}

impl TopicRoute {
    /// Parses the JSON body of a GET_ROUTEINFO_BY_TOPIC response.
    pub fn parse(topic: &str, body: &[u8]) -> Result<Self, BenchError> {
        let bad = |reason: &str| BenchError::Route {
            topic: topic.to_owned(),
            reason: reason.to_owned(),
        };
        let value: serde_json::Value =
            serde_json::from_slice(body).map_err(|e| bad(&format!("not JSON: {e}")))?;
        let mut brokers = Vec::new();
        for broker in value["brokerDatas"]
            .as_array()
            .ok_or_else(|| bad("no brokerDatas"))?
        {
            let name = broker["brokerName"]
                .as_str()
                .ok_or_else(|| bad("broker without brokerName"))?;
            let master_addr = broker["brokerAddrs"]
                .as_object()
                .and_then(|addrs| addrs.get("0"))
                .and_then(|addr| addr.as_str())
                .map(str::to_owned);
            brokers.push(BrokerRoute {
                name: name.to_owned(),
                master_addr,
            });
        }
        let mut queues = Vec::new();
        for queue in value["queueDatas"]
            .as_array()
            .ok_or_else(|| bad("no queueDatas"))?
        {
            let int = |key: &str| {
                queue[key]
                    .as_i64()
                    .and_then(|v| i32::try_from(v).ok())
                    .ok_or_else(|| bad(&format!("queueData without {key}")))
            };
            queues.push(QueueRoute {
                broker_name: queue["brokerName"]
                    .as_str()
                    .ok_or_else(|| bad("queueData without brokerName"))?
                    .to_owned(),
                read_queue_nums: int("readQueueNums")?,
                write_queue_nums: int("writeQueueNums")?,
                perm: int("perm")?,
            });
        }
        Ok(TopicRoute { brokers, queues })
    }

    fn master(&self, broker_name: &str) -> Option<&str> {
        self.brokers
            .iter()
            .find(|b| b.name == broker_name)
            .and_then(|b| b.master_addr.as_deref())
    }

    /// Publish queues of `topic` (Java `topicRouteData2TopicPublishInfo`): writable queue data
    /// whose broker has a master, at most `queue_cap` queues per broker.
    pub fn write_queues(&self, topic: &str, queue_cap: i32) -> Vec<QueueAddr> {
        self.queues_by(topic, PERM_WRITE, |q| q.write_queue_nums.min(queue_cap))
    }

    /// Subscribe queues of `topic`: readable queue data, `readQueueNums` each.
    pub fn read_queues(&self, topic: &str) -> Vec<QueueAddr> {
        self.queues_by(topic, PERM_READ, |q| q.read_queue_nums)
    }

    fn queues_by(
        &self,
        topic: &str,
        perm: i32,
        nums: impl Fn(&QueueRoute) -> i32,
    ) -> Vec<QueueAddr> {
        let mut out = Vec::new();
        for queue in &self.queues {
            if queue.perm & perm == 0 {
                continue;
            }
            let Some(addr) = self.master(&queue.broker_name) else {
                continue;
            };
            for queue_id in 0..nums(queue).max(0) {
                out.push(QueueAddr {
                    topic: topic.to_owned(),
                    broker_name: queue.broker_name.clone(),
                    broker_addr: addr.to_owned(),
                    queue_id,
                });
            }
        }
        out
    }
}

/// GET_ROUTEINFO_BY_TOPIC; `Ok(None)` when the name server does not know the topic.
pub fn fetch_route(namesrv: &Connection, topic: &str) -> Result<Option<TopicRoute>, BenchError> {
    let mut cmd = RemotingCommand::request(request_code::GET_ROUTEINFO_BY_TOPIC);
    GetRouteInfoRequestHeader {
        topic: topic.to_owned(),
        accept_standard_json_only: true,
    }
    .encode(&mut cmd);
    let response = namesrv.call(cmd, ADMIN_TIMEOUT_MS)?;
    match response.code {
        response_code::SUCCESS => TopicRoute::parse(topic, &response.body).map(Some),
        response_code::TOPIC_NOT_EXIST => Ok(None),
        code => Err(BenchError::Response {
            what: format!("route of {topic}"),
            code,
            remark: response.remark.unwrap_or_default(),
        }),
    }
}

/// Broker connections by address, `per_broker` each, handed out round robin.
pub struct ConnectionPool {
    serialize_type: SerializeType,
    per_broker: usize,
    conns: Mutex<HashMap<String, Vec<Arc<Connection>>>>,
    next: AtomicI32,
}

impl ConnectionPool {
    pub fn new(serialize_type: SerializeType, per_broker: usize) -> Self {
        ConnectionPool {
            serialize_type,
            per_broker: per_broker.max(1),
            conns: Mutex::new(HashMap::new()),
            next: AtomicI32::new(0),
        }
    }

    /// All `per_broker` connections to `addr` (connecting on first use).
    pub fn all(&self, addr: &str) -> Result<Vec<Arc<Connection>>, BenchError> {
        let mut conns = self.conns.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(list) = conns.get(addr) {
            return Ok(list.clone());
        }
        let mut list = Vec::with_capacity(self.per_broker);
        for _ in 0..self.per_broker {
            list.push(Connection::connect(addr, self.serialize_type)?);
        }
        conns.insert(addr.to_owned(), list.clone());
        Ok(list)
    }

    /// The next connection to `addr`, round robin.
    pub fn get(&self, addr: &str) -> Result<Arc<Connection>, BenchError> {
        let list = self.all(addr)?;
        let i = self.next.fetch_add(1, Ordering::Relaxed) as usize % list.len();
        Ok(Arc::clone(&list[i]))
    }

    /// Every connection of the pool.
    pub fn connections(&self) -> Vec<Arc<Connection>> {
        let conns = self.conns.lock().unwrap_or_else(|e| e.into_inner());
        conns.values().flatten().cloned().collect()
    }

    /// Closes every connection.
    pub fn close_all(&self) {
        for conn in self.connections() {
            conn.close();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refuses_non_loopback() {
        assert!(resolve_loopback("127.0.0.1:9876").is_ok());
        assert!(resolve_loopback("127.0.0.1:1;10.0.0.1:2").is_ok());
        assert!(matches!(
            resolve_loopback("10.1.2.3:9876"),
            Err(BenchError::NotLoopback { .. })
        ));
        assert!(matches!(
            resolve_loopback("8.8.8.8:53"),
            Err(BenchError::NotLoopback { .. })
        ));
    }

    #[test]
    fn parses_route_and_lists_queues() {
        let body = br#"{"brokerDatas":[{"brokerAddrs":{"0":"127.0.0.1:10911","1":"127.0.0.1:10921"},
            "brokerName":"broker-a","cluster":"DefaultCluster","enableActingMaster":false},
            {"brokerAddrs":{"1":"127.0.0.1:10931"},"brokerName":"broker-b","cluster":"c","enableActingMaster":false}],
            "filterServerTable":{},
            "queueDatas":[{"brokerName":"broker-a","perm":6,"readQueueNums":4,"topicSysFlag":0,"writeQueueNums":3},
            {"brokerName":"broker-b","perm":6,"readQueueNums":4,"topicSysFlag":0,"writeQueueNums":4}]}"#;
        let route = TopicRoute::parse("T", body).expect("parses");
        let write = route.write_queues("T", 8);
        assert_eq!(write.len(), 3, "broker-b has no master");
        assert_eq!(write[2].queue_id, 2);
        assert_eq!(write[0].broker_addr, "127.0.0.1:10911");
        assert_eq!(route.write_queues("T", 2).len(), 2);
        assert_eq!(route.read_queues("T").len(), 4);
        assert!(TopicRoute::parse("T", b"{").is_err());
        assert!(TopicRoute::parse("T", b"{}").is_err());
    }
}
