//! In-process tests of the network runtime: a test handler served on 127.0.0.1:0 and a tiny
//! blocking client over std::net::TcpStream that uses the remoting codec.

use bytes::{Bytes, BytesMut};
use ringmq::net::{
    bind, serve, ConnectionContext, DeferredFrame, Outbound, RequestHandler, SendError,
    ServerConfig, ServerError, ServerHandle, ShutdownSignal,
};
use ringmq::remoting::codes::{request_code, response_code};
use ringmq::remoting::command::{RemotingCommand, SerializeType};
use ringmq::remoting::frame::{decode_frame, encode_frame, FRAME_SIZE_MAX_BYTES};
use std::collections::{HashMap, HashSet};
use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

// Request codes of the test handler (not RocketMQ codes).
const ECHO: i32 = 9001;
const SLOW: i32 = 9002;
const BLOCK: i32 = 9003;
const HOLD: i32 = 9004;
const PANIC: i32 = 9005;
/// Served on the reading task ([`RequestHandler::handle_now`]): an echo and a panic.
const ECHO_NOW: i32 = 9006;
const PANIC_NOW: i32 = 9007;

const CLIENT_TIMEOUT: Duration = Duration::from_secs(10);

struct TestHandler {
    /// BLOCK requests that entered the handler.
    blocked_started: AtomicUsize,
    /// BLOCK requests wait for one permit each.
    gate: tokio::sync::Semaphore,
    oneway_seen: AtomicUsize,
    held: Mutex<Vec<(ConnectionContext, RemotingCommand)>>,
    closed_connections: AtomicUsize,
}

impl Default for TestHandler {
    fn default() -> Self {
        TestHandler {
            blocked_started: AtomicUsize::new(0),
            gate: tokio::sync::Semaphore::new(0),
            oneway_seen: AtomicUsize::new(0),
            held: Mutex::new(Vec::new()),
            closed_connections: AtomicUsize::new(0),
        }
    }
}

impl RequestHandler for TestHandler {
    async fn handle(
        &self,
        conn: ConnectionContext,
        request: RemotingCommand,
    ) -> Option<RemotingCommand> {
        if request.is_oneway() {
            self.oneway_seen.fetch_add(1, Ordering::SeqCst);
        }
        match request.code {
            // Answers even oneway requests: the runtime must drop those answers.
            ECHO => Some(echo(&conn, &request)),
            SLOW => {
                let delay_ms = request.ext_i64("delay_ms").unwrap() as u64;
                tokio::time::sleep(Duration::from_millis(delay_ms)).await;
                Some(echo(&conn, &request))
            }
            BLOCK => {
                self.blocked_started.fetch_add(1, Ordering::SeqCst);
                self.gate.acquire().await.unwrap().forget();
                Some(echo(&conn, &request))
            }
            HOLD => {
                self.held.lock().unwrap().push((conn, request));
                None
            }
            PANIC => panic!("test panic in handler"),
            _ => Some(RemotingCommand::response_to(
                &request,
                response_code::REQUEST_CODE_NOT_SUPPORTED,
                None,
            )),
        }
    }

    fn handle_now(
        &self,
        conn: &ConnectionContext,
        request: RemotingCommand,
    ) -> Result<Option<RemotingCommand>, RemotingCommand> {
        match request.code {
            ECHO_NOW => {
                if request.is_oneway() {
                    self.oneway_seen.fetch_add(1, Ordering::SeqCst);
                }
                Ok(Some(echo(conn, &request)))
            }
            PANIC_NOW => panic!("test panic served now"),
            _ => Err(request),
        }
    }

    fn on_connection_closed(&self, _conn: &ConnectionContext) {
        self.closed_connections.fetch_add(1, Ordering::SeqCst);
    }
}

fn echo(conn: &ConnectionContext, request: &RemotingCommand) -> RemotingCommand {
    RemotingCommand::response_to(request, response_code::SUCCESS, None)
        .with_body(request.body.clone())
        .with_ext("worker", conn.worker_index)
        .with_ext("listener", conn.listener_index)
        .with_ext("connection", conn.id)
}

fn init_tracing() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_test_writer()
        .try_init();
}

fn config() -> ServerConfig {
    let mut config = ServerConfig::new("127.0.0.1:0".parse().unwrap());
    config.worker_threads = 2;
    config.shutdown_grace_ms = 2_000;
    config
}

fn start(config: ServerConfig) -> (ServerHandle, Arc<TestHandler>) {
    init_tracing();
    let handler = Arc::new(TestHandler::default());
    let handle = serve(config, handler.clone(), ShutdownSignal::new()).unwrap();
    (handle, handler)
}

/// Polls `condition` until it holds or the timeout passes.
fn eventually(what: &str, condition: impl Fn() -> bool) {
    let deadline = Instant::now() + CLIENT_TIMEOUT;
    while !condition() {
        assert!(Instant::now() < deadline, "timed out waiting for: {what}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// A blocking client: writes frames, reads frames, nothing else.
struct Client {
    stream: TcpStream,
    next_opaque: i32,
}

impl Client {
    fn connect(addr: SocketAddr) -> Client {
        let stream = TcpStream::connect(addr).unwrap();
        stream.set_read_timeout(Some(CLIENT_TIMEOUT)).unwrap();
        stream.set_nodelay(true).unwrap();
        Client {
            stream,
            next_opaque: 1,
        }
    }

    /// Sends `cmd` with a fresh opaque and returns it.
    fn send(&mut self, cmd: RemotingCommand) -> i32 {
        let opaque = self.next_opaque;
        self.next_opaque += 1;
        let mut buf = BytesMut::new();
        encode_frame(&cmd.with_opaque(opaque), &mut buf).unwrap();
        self.stream.write_all(&buf).unwrap();
        opaque
    }

    fn send_raw(&mut self, bytes: &[u8]) {
        self.stream.write_all(bytes).unwrap();
    }

    /// Reads one frame; `Ok(None)` on a clean close.
    fn try_recv(&mut self) -> io::Result<Option<RemotingCommand>> {
        let mut prefix = [0_u8; 4];
        match self.stream.read_exact(&mut prefix) {
            Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(None),
            other => other?,
        }
        let length = u32::from_be_bytes(prefix) as usize;
        let mut frame = vec![0_u8; 4 + length];
        frame[..4].copy_from_slice(&prefix);
        self.stream.read_exact(&mut frame[4..])?;
        let mut buf = BytesMut::from(&frame[..]);
        let cmd = decode_frame(&mut buf, FRAME_SIZE_MAX_BYTES)
            .unwrap()
            .unwrap();
        assert!(buf.is_empty());
        Ok(Some(cmd))
    }

    fn recv(&mut self) -> RemotingCommand {
        self.try_recv()
            .unwrap()
            .expect("connection closed while a frame was expected")
    }

    fn call(&mut self, cmd: RemotingCommand) -> RemotingCommand {
        let opaque = self.send(cmd);
        let response = self.recv();
        assert_eq!(response.opaque, opaque);
        assert!(response.is_response());
        response
    }

    /// Asserts the server closes the connection (clean EOF or reset), with no frame before.
    fn expect_closed(&mut self) {
        match self.try_recv() {
            Ok(None) => {}
            Err(e) if e.kind() == io::ErrorKind::ConnectionReset => {}
            other => panic!("expected the server to close the connection, got {other:?}"),
        }
    }

    /// Asserts nothing arrives within `wait`.
    fn expect_silence(&mut self, wait: Duration) {
        self.stream.set_read_timeout(Some(wait)).unwrap();
        let mut byte = [0_u8; 1];
        match self.stream.read(&mut byte) {
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) => {}
            other => panic!("expected no data, got {other:?}"),
        }
        self.stream.set_read_timeout(Some(CLIENT_TIMEOUT)).unwrap();
    }
}

fn echo_request(body: &'static [u8]) -> RemotingCommand {
    RemotingCommand::request(ECHO).with_body(Bytes::from_static(body))
}

#[test]
fn echo_round_trip_in_both_header_encodings() {
    let (server, _handler) = start(config());
    let mut client = Client::connect(server.local_addrs()[0]);
    for serialize_type in [SerializeType::Json, SerializeType::RocketMq] {
        let request = echo_request(b"hello").with_serialize_type(serialize_type);
        let response = client.call(request);
        assert_eq!(response.code, response_code::SUCCESS);
        assert_eq!(&response.body[..], b"hello");
        assert_eq!(response.serialize_type, serialize_type);
        assert_eq!(response.ext_opt_str("listener"), Some("0"));
    }
    let unknown = client.call(RemotingCommand::request(request_code::SEND_MESSAGE));
    assert_eq!(unknown.code, response_code::REQUEST_CODE_NOT_SUPPORTED);
}

#[test]
fn slow_request_does_not_block_later_ones_on_the_same_connection() {
    let (server, _handler) = start(config());
    let mut client = Client::connect(server.local_addrs()[0]);
    let started = Instant::now();
    let slow = client.send(RemotingCommand::request(SLOW).with_ext("delay_ms", 1_000));
    let fast: HashSet<i32> = (0..20).map(|_| client.send(echo_request(b"x"))).collect();
    let mut answered_fast = HashSet::new();
    for _ in 0..20 {
        let response = client.recv();
        assert!(
            fast.contains(&response.opaque),
            "got {} before the fast ones",
            response.opaque
        );
        answered_fast.insert(response.opaque);
    }
    assert_eq!(answered_fast, fast);
    assert!(
        started.elapsed() < Duration::from_millis(1_000),
        "fast requests waited for slow"
    );
    assert_eq!(client.recv().opaque, slow);
}

#[test]
fn pipelined_requests_are_all_answered_by_opaque() {
    let (server, _handler) = start(config());
    let mut client = Client::connect(server.local_addrs()[0]);
    let count = 2_000;
    // Written in one go: more than the in-flight bound, so the reader must pause and resume.
    let mut frames = BytesMut::new();
    for opaque in 1..=count {
        let request = echo_request(b"pipelined").with_opaque(opaque);
        encode_frame(&request, &mut frames).unwrap();
    }
    let writer_stream = client.stream.try_clone().unwrap();
    let writer = std::thread::spawn(move || (&writer_stream).write_all(&frames).unwrap());
    let mut seen = HashSet::new();
    for _ in 1..=count {
        let response = client.recv();
        assert_eq!(&response.body[..], b"pipelined");
        assert!(
            seen.insert(response.opaque),
            "duplicate opaque {}",
            response.opaque
        );
    }
    writer.join().unwrap();
    assert_eq!(seen, (1..=count).collect::<HashSet<_>>());
}

#[test]
fn large_frames_and_dribbled_frames_are_reassembled() {
    let (server, _handler) = start(config());
    let mut client = Client::connect(server.local_addrs()[0]);
    // 4 MiB spans many reads and grows the read buffer; the response exceeds the coalesce size.
    let body: Vec<u8> = (0..4 * 1024 * 1024).map(|i: u32| (i % 251) as u8).collect();
    let request = RemotingCommand::request(ECHO).with_body(Bytes::from(body.clone()));
    let response = client.call(request);
    assert_eq!(&response.body[..], &body[..]);
    // The same connection keeps working with small frames after the buffer shrank.
    assert_eq!(&client.call(echo_request(b"small")).body[..], b"small");

    // One frame written a byte at a time.
    let mut frame = BytesMut::new();
    encode_frame(&echo_request(b"dribble").with_opaque(4242), &mut frame).unwrap();
    for byte in frame.iter() {
        client.send_raw(&[*byte]);
    }
    let response = client.recv();
    assert_eq!(response.opaque, 4242);
    assert_eq!(&response.body[..], b"dribble");
}

#[test]
fn oneway_requests_get_no_response_even_when_the_handler_returns_one() {
    let (server, handler) = start(config());
    let mut client = Client::connect(server.local_addrs()[0]);
    client.send(echo_request(b"oneway").oneway());
    let normal = client.send(echo_request(b"normal"));
    let response = client.recv();
    assert_eq!(response.opaque, normal);
    assert_eq!(handler.oneway_seen.load(Ordering::SeqCst), 1);
    // A panicking oneway request is not answered either.
    client.send(RemotingCommand::request(PANIC).oneway());
    eventually("the oneway panic request was handled", || {
        handler.oneway_seen.load(Ordering::SeqCst) == 2
    });
    client.expect_silence(Duration::from_millis(300));
}

#[test]
fn handler_panic_answers_system_error_and_the_connection_keeps_working() {
    let (server, _handler) = start(config());
    let mut client = Client::connect(server.local_addrs()[0]);
    let response = client.call(RemotingCommand::request(PANIC));
    assert_eq!(response.code, response_code::SYSTEM_ERROR);
    assert!(response.remark.unwrap().contains("test panic in handler"));
    assert_eq!(
        client.call(echo_request(b"after")).code,
        response_code::SUCCESS
    );
}

/// Bytes of a frame whose header is `header` with serialize type `type_code`, padded with
/// `body`. Frame lengths are big-endian on the wire.
fn raw_frame(length: u32, header_word: u32, rest: &[u8]) -> Vec<u8> {
    let mut bytes = Vec::new();
    bytes.extend_from_slice(&length.to_be_bytes());
    bytes.extend_from_slice(&header_word.to_be_bytes());
    bytes.extend_from_slice(rest);
    bytes
}

#[test]
fn malformed_frames_close_only_their_connection() {
    let mut config = config();
    config.frame_size_max_bytes = 1024 * 1024;
    let (server, handler) = start(config);
    let addr = server.local_addrs()[0];
    let mut good = Client::connect(addr);
    assert_eq!(
        good.call(echo_request(b"before")).code,
        response_code::SUCCESS
    );

    let garbage_json = b"{{{{not json";
    let cases: Vec<(&str, Vec<u8>, bool)> = vec![
        // Frame says 100 bytes, 10 arrive, then the peer closes its write side.
        (
            "truncated then closed",
            raw_frame(100, 10, &[0_u8; 6]),
            true,
        ),
        (
            "oversize length",
            raw_frame(2 * 1024 * 1024, 10, b"abc"),
            false,
        ),
        (
            "header length beyond the frame",
            raw_frame(8, 100, b"abcd"),
            false,
        ),
        (
            "garbage JSON header",
            raw_frame(
                4 + garbage_json.len() as u32,
                garbage_json.len() as u32,
                garbage_json,
            ),
            false,
        ),
        (
            "unknown serialize type",
            raw_frame(8, (7 << 24) | 4, b"abcd"),
            false,
        ),
        ("negative length", raw_frame(0x8000_0000, 0, b""), false),
    ];
    for (i, (name, bytes, half_close)) in cases.into_iter().enumerate() {
        let mut bad = Client::connect(addr);
        bad.send_raw(&bytes);
        if half_close {
            bad.stream.shutdown(Shutdown::Write).unwrap();
        }
        bad.expect_closed();
        eventually(&format!("{name}: on_connection_closed"), || {
            handler.closed_connections.load(Ordering::SeqCst) == i + 1
        });
        let response = good.call(echo_request(b"still here"));
        assert_eq!(response.code, response_code::SUCCESS, "{name}");
    }
}

#[test]
fn in_flight_bound_stops_reading_until_a_request_completes() {
    let bound = 4;
    let mut config = config();
    config.requests_in_flight_max_per_connection = bound;
    let (server, handler) = start(config);
    let mut client = Client::connect(server.local_addrs()[0]);
    let opaques: Vec<i32> = (0..=bound)
        .map(|_| client.send(RemotingCommand::request(BLOCK)))
        .collect();
    eventually("bound requests started", || {
        handler.blocked_started.load(Ordering::SeqCst) == bound
    });
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(
        handler.blocked_started.load(Ordering::SeqCst),
        bound,
        "bound + 1 was started"
    );

    handler.gate.add_permits(1);
    let first = client.recv();
    eventually("request bound + 1 started once one finished", || {
        handler.blocked_started.load(Ordering::SeqCst) == bound + 1
    });
    handler.gate.add_permits(bound);
    let mut answered: HashSet<i32> = (0..bound).map(|_| client.recv().opaque).collect();
    answered.insert(first.opaque);
    assert_eq!(answered, opaques.into_iter().collect());
}

#[test]
fn held_response_and_encoded_frame_sent_from_another_thread() {
    let (server, handler) = start(config());
    let mut client = Client::connect(server.local_addrs()[0]);
    let held_opaque = client.send(RemotingCommand::request(HOLD));
    eventually("request held", || handler.held.lock().unwrap().len() == 1);
    client.expect_silence(Duration::from_millis(100));

    let (conn, request) = handler.held.lock().unwrap().pop().unwrap();
    let sender_conn = conn.clone();
    std::thread::spawn(move || {
        let sender = sender_conn.sender();
        let response = RemotingCommand::response_to(&request, response_code::SUCCESS, None)
            .with_body(Bytes::from_static(b"released"));
        sender.send(Outbound::Command(response)).unwrap();
        // A broker-to-client oneway request, encoded by the caller.
        // Large enough to take the writer's direct (uncopied) path.
        let notify = RemotingCommand::request(request_code::NOTIFY_CONSUMER_IDS_CHANGED)
            .with_ext("consumerGroup", "group-a")
            .with_body(Bytes::from(vec![7_u8; 300 * 1024]))
            .with_opaque(77)
            .oneway();
        let mut frame = BytesMut::new();
        encode_frame(&notify, &mut frame).unwrap();
        sender.send(Outbound::Encoded(frame.freeze())).unwrap();
    })
    .join()
    .unwrap();

    let response = client.recv();
    assert_eq!(response.opaque, held_opaque);
    assert_eq!(&response.body[..], b"released");
    let notify = client.recv();
    assert_eq!(notify.code, request_code::NOTIFY_CONSUMER_IDS_CHANGED);
    assert!(notify.is_oneway() && !notify.is_response());
    assert_eq!(notify.ext_opt_str("consumerGroup"), Some("group-a"));
    assert_eq!(notify.body.len(), 300 * 1024);

    drop(client);
    eventually("sender sees the close", || conn.sender().is_closed());
    let refused = conn
        .sender()
        .send(Outbound::Encoded(Bytes::from_static(b"late")));
    assert!(matches!(refused, Err(SendError::Closed(_))));
}

/// Work handed to a connection's writer from another thread runs on the connection's thread
/// in queue order: its frame is written where it was queued, nothing is written for work that
/// produced nothing, and work that panicked answers its request SYSTEM_ERROR while the
/// connection keeps serving.
#[test]
fn deferred_frames_are_produced_in_order_on_the_connections_thread() {
    let (server, handler) = start(config());
    let mut client = Client::connect(server.local_addrs()[0]);
    client.send(RemotingCommand::request(HOLD));
    eventually("request held", || handler.held.lock().unwrap().len() == 1);
    let (conn, request) = handler.held.lock().unwrap().pop().unwrap();
    let sender = conn.sender().clone();
    std::thread::spawn(move || {
        let answer = |opaque: i32, body: &'static [u8]| {
            let mut response = RemotingCommand::response_to(&request, response_code::SUCCESS, None)
                .with_body(Bytes::from_static(body));
            response.opaque = opaque;
            response
        };
        let deferred = |opaque: i32, produce: Box<dyn FnOnce() -> Option<Outbound> + Send>| {
            Outbound::Deferred(DeferredFrame {
                opaque,
                serialize_type: SerializeType::Json,
                produce,
            })
        };
        sender.send(Outbound::Command(answer(1, b"first"))).unwrap();
        let thread_name = || std::thread::current().name().map(str::to_owned);
        let second = answer(2, b"second");
        sender
            .send(deferred(
                2,
                Box::new(move || {
                    let mut second = second;
                    second.set_ext("thread", thread_name().unwrap_or_default());
                    Some(Outbound::Command(second))
                }),
            ))
            .unwrap();
        sender.send(deferred(3, Box::new(|| None))).unwrap();
        sender
            .send(deferred(4, Box::new(|| panic!("deferred boom"))))
            .unwrap();
        sender.send(Outbound::Command(answer(5, b"fifth"))).unwrap();
    })
    .join()
    .unwrap();

    let first = client.recv();
    assert_eq!((first.opaque, &first.body[..]), (1, &b"first"[..]));
    let second = client.recv();
    assert_eq!((second.opaque, &second.body[..]), (2, &b"second"[..]));
    let thread = second.ext_opt_str("thread").unwrap_or_default();
    assert!(
        thread.starts_with("ringmq-net-"),
        "produced on the connection's network thread, not {thread:?}"
    );
    let failed = client.recv();
    assert_eq!(failed.opaque, 4, "opaque 3 produced nothing");
    assert_eq!(failed.code, response_code::SYSTEM_ERROR);
    assert!(failed.remark.unwrap_or_default().contains("deferred boom"));
    let fifth = client.recv();
    assert_eq!((fifth.opaque, &fifth.body[..]), (5, &b"fifth"[..]));
    let echoed = client.call(echo_request(b"still serving"));
    assert_eq!(&echoed.body[..], b"still serving");
}

/// A server whose connections queue at most 4 frames, a client connected to it, and that
/// client's connection, held by a request the handler keeps unanswered.
fn held_connection() -> (ServerHandle, Arc<TestHandler>, Client, ConnectionContext) {
    let mut config = config();
    config.write_queue_max_per_connection = 4;
    let (server, handler) = start(config);
    let mut client = Client::connect(server.local_addrs()[0]);
    client.send(RemotingCommand::request(HOLD));
    eventually("request held", || handler.held.lock().unwrap().len() == 1);
    let (conn, _request) = handler.held.lock().unwrap().pop().unwrap();
    (server, handler, client, conn)
}

/// Queues `frame` on `conn` until the queue is full (the peer reads nothing): how many went
/// in, or `None` if the connection closed first.
fn fill_write_queue(conn: &ConnectionContext, frame: &Bytes) -> Option<usize> {
    let mut queued = 0;
    loop {
        match conn.sender().send(Outbound::Encoded(frame.clone())) {
            Ok(()) => queued += 1,
            Err(SendError::Full(_)) => return Some(queued),
            Err(SendError::Closed(_)) => return None,
        }
        assert!(queued < 256, "queue never filled");
        std::thread::sleep(Duration::from_millis(2));
    }
}

#[test]
fn write_queue_is_bounded_when_the_peer_does_not_read() {
    let (_server, _handler, _client, conn) = held_connection();
    // 1 MiB frames: socket buffers absorb a few, then the writer blocks and the queue fills.
    let frame = Bytes::from(vec![0_u8; 1024 * 1024]);
    assert!(
        fill_write_queue(&conn, &frame).is_some(),
        "connection closed"
    );
}

#[test]
fn connections_spread_over_worker_threads() {
    let mut config = config();
    config.worker_threads = 4;
    let (server, _handler) = start(config);
    let mut clients: Vec<Client> = (0..32)
        .map(|_| Client::connect(server.local_addrs()[0]))
        .collect();
    let mut workers = HashMap::new();
    for client in &mut clients {
        let response = client.call(echo_request(b""));
        let worker: usize = response.ext_opt_str("worker").unwrap().parse().unwrap();
        assert!(worker < 4);
        *workers.entry(worker).or_insert(0) += 1;
    }
    assert!(
        workers.len() > 1,
        "all 32 connections landed on one worker: {workers:?}"
    );
}

/// How many of `clients` each worker serves, by asking each client's connection once.
fn count_by_worker(clients: &mut [Client]) -> HashMap<usize, usize> {
    let mut workers = HashMap::new();
    for client in clients {
        let response = client.call(echo_request(b""));
        let worker: usize = response.ext_opt_str("worker").unwrap().parse().unwrap();
        *workers.entry(worker).or_insert(0) += 1;
    }
    workers
}

#[test]
fn a_burst_of_connections_is_shared_out_evenly() {
    let mut config = config();
    config.worker_threads = 4;
    let (server, _handler) = start(config);
    // All connected before any is used: whichever worker accepts a connection, it goes to the
    // worker with the fewest (one worker took up to 59 of 64 when the accepting worker served
    // what it took).
    let mut clients: Vec<Client> = (0..64)
        .map(|_| Client::connect(server.local_addrs()[0]))
        .collect();
    let workers = count_by_worker(&mut clients);
    let expected: HashMap<usize, usize> = (0..4).map(|w| (w, 16)).collect();
    assert_eq!(workers, expected, "64 connections spread unevenly");
}

/// A client that opens two connections at once (the bench's catch-up consumer does) gets one
/// on each of two workers, whichever worker accepts them: the second goes to the worker with
/// fewer connections, handed over when another worker accepted it. With the rule before (the
/// accepting worker served it, and waited 1 ms before its next accept when it held more than
/// its share) 17 to 20 of 20 pairs spread at load average 9 to 12, 1 to 8 of 20 without that
/// rule; the choice does not depend on timing now, so every pair must.
#[test]
fn two_connections_opened_together_land_on_two_workers() {
    let rounds = 20;
    for round in 0..rounds {
        let mut config = config();
        config.worker_threads = 2;
        let (server, _handler) = start(config);
        let mut clients: Vec<Client> = (0..2)
            .map(|_| Client::connect(server.local_addrs()[0]))
            .collect();
        let workers = count_by_worker(&mut clients);
        assert_eq!(workers.len(), 2, "round {round}: the pair on one worker");
    }
}

/// The bench's catch-up consumer opens its pair while the producers' two connections are still
/// closing; the pair spreads no matter when those closes are counted (a tie goes in turn).
/// Before, the accept-time counts raced with the closes and a pair could land on one worker.
/// (With more older connections on one worker than on the other, both of the pair may rightly
/// go to the emptier one; so one or two older connections, which spread evenly.)
#[test]
fn a_pair_opened_while_older_connections_close_lands_on_two_workers() {
    let mut config = config();
    config.worker_threads = 2;
    let (server, _handler) = start(config);
    let addr = server.local_addrs()[0];
    for round in 0..20 {
        let mut older: Vec<Client> = (0..round % 2 + 1).map(|_| Client::connect(addr)).collect();
        count_by_worker(&mut older);
        let pair_thread = std::thread::spawn(move || {
            let mut pair: Vec<Client> = (0..2).map(|_| Client::connect(addr)).collect();
            let workers = count_by_worker(&mut pair);
            (workers, pair)
        });
        drop(older);
        let (workers, pair) = pair_thread.join().unwrap();
        assert_eq!(workers.len(), 2, "round {round}: the pair on one worker");
        drop(pair);
        eventually("the round's connections closed", || {
            server.live_connections().get() == 0
        });
    }
}

#[test]
fn one_connection_at_a_time_goes_to_the_workers_in_turn() {
    let mut config = config();
    config.worker_threads = 4;
    let (server, _handler) = start(config);
    let mut workers = HashMap::new();
    for _ in 0..40 {
        let mut client = [Client::connect(server.local_addrs()[0])];
        for (worker, n) in count_by_worker(&mut client) {
            *workers.entry(worker).or_insert(0) += n;
        }
    }
    // The kernel wakes the worker that has waited longest; measured exactly 10 each.
    assert_eq!(
        workers.len(),
        4,
        "a worker got none of 40 connections: {workers:?}"
    );
}

/// A bound server refuses connections until it serves: a broker recovering its store is refused
/// at once, not left half-connected. (Binding already fails where another socket listens; see
/// the next test.)
#[test]
fn a_bound_server_refuses_connections_until_it_serves() {
    init_tracing();
    let bound = bind(config()).unwrap();
    let addr = bound.local_addrs()[0];
    assert_ne!(addr.port(), 0, "port 0 resolves at bind");
    let refused = TcpStream::connect(addr).expect_err("connected before the server listens");
    assert_eq!(refused.kind(), io::ErrorKind::ConnectionRefused);
    let server = bound
        .serve(Arc::new(TestHandler::default()), ShutdownSignal::new())
        .unwrap();
    let mut client = Client::connect(addr);
    let echoed = client.call(RemotingCommand::request(ECHO).with_body(Bytes::from_static(b"up")));
    assert_eq!(&echoed.body[..], b"up");
    server.shutdown();
    server.join().unwrap();
}

#[test]
fn an_address_in_use_fails_the_start_and_names_the_address() {
    init_tracing();
    let first = serve(
        config(),
        Arc::new(TestHandler::default()),
        ShutdownSignal::new(),
    )
    .unwrap();
    let taken = first.local_addrs()[0];
    let plain = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let held = plain.local_addr().unwrap();
    let main_taken = ServerConfig {
        listen_addr: taken,
        ..config()
    };
    let fast_taken = ServerConfig {
        additional_listen_addrs: vec![held],
        ..config()
    };
    for (config, addr) in [(main_taken, taken), (fast_taken, held)] {
        let result = serve(
            config,
            Arc::new(TestHandler::default()),
            ShutdownSignal::new(),
        );
        let error = result.expect_err("a second server started on an address in use");
        assert_eq!(error.addr_in_use(), Some(addr), "{error:?}");
        assert!(matches!(error, ServerError::AddrInUse { .. }));
        let message = error.to_string();
        assert!(
            message.contains(&addr.to_string()) && message.contains("already in use"),
            "{message}"
        );
    }
    // The first server still serves, alone.
    let response = Client::connect(taken).call(echo_request(b"still mine"));
    assert_eq!(&response.body[..], b"still mine");
}

#[test]
fn connections_over_the_limit_are_closed_at_once() {
    let mut config = config();
    config.connections_max = 1;
    let (server, _handler) = start(config);
    let addr = server.local_addrs()[0];
    let mut first = Client::connect(addr);
    assert_eq!(first.call(echo_request(b"")).code, response_code::SUCCESS);
    Client::connect(addr).expect_closed();
    drop(first);
    // The slot is released when the first connection's task ends.
    eventually("a slot is free again", || {
        let mut client = Client::connect(addr);
        let mut frame = BytesMut::new();
        encode_frame(&echo_request(b""), &mut frame).unwrap();
        // A refused connection may be reset before or after the write.
        client.stream.write_all(&frame).is_ok() && matches!(client.try_recv(), Ok(Some(_)))
    });
}

#[test]
fn additional_listen_addresses_share_the_handler() {
    let mut config = config();
    config
        .additional_listen_addrs
        .push("127.0.0.1:0".parse().unwrap());
    let (server, _handler) = start(config);
    let addrs = server.local_addrs().to_vec();
    assert_eq!(addrs.len(), 2);
    assert_ne!(addrs[0].port(), addrs[1].port());
    for (listener_index, addr) in addrs.into_iter().enumerate() {
        let response = Client::connect(addr).call(echo_request(b"port"));
        assert_eq!(
            response.ext_opt_str("listener"),
            Some(listener_index.to_string().as_str())
        );
    }
}

#[test]
fn shutdown_answers_running_requests_then_closes() {
    let shutdown = ShutdownSignal::new();
    init_tracing();
    let handler = Arc::new(TestHandler::default());
    let server = serve(config(), handler.clone(), shutdown.clone()).unwrap();
    let addr = server.local_addrs()[0];
    let mut idle = Client::connect(addr);
    assert_eq!(idle.call(echo_request(b"")).code, response_code::SUCCESS);
    let mut busy = Client::connect(addr);
    let slow = busy.send(RemotingCommand::request(SLOW).with_ext("delay_ms", 300));
    std::thread::sleep(Duration::from_millis(50));

    shutdown.trigger();
    assert_eq!(
        busy.recv().opaque,
        slow,
        "a running request is answered during shutdown"
    );
    busy.expect_closed();
    idle.expect_closed();
    server.join().unwrap();
    assert!(
        TcpStream::connect(addr).is_err(),
        "still accepting after shutdown"
    );
    assert_eq!(handler.closed_connections.load(Ordering::SeqCst), 2);
}

#[test]
fn stopping_through_the_handle_leaves_the_callers_signal_alone() {
    init_tracing();
    let shutdown = ShutdownSignal::new();
    let server = serve(config(), Arc::new(TestHandler::default()), shutdown.clone()).unwrap();
    let mut client = Client::connect(server.local_addrs()[0]);
    server.shutdown();
    client.expect_closed();
    server.join().unwrap();
    assert!(!shutdown.is_triggered());
}

#[test]
fn dropping_the_handle_stops_the_server() {
    let (server, _handler) = start(config());
    let addr = server.local_addrs()[0];
    let mut client = Client::connect(addr);
    assert_eq!(client.call(echo_request(b"")).code, response_code::SUCCESS);
    drop(server);
    client.expect_closed();
}

#[test]
fn invalid_config_is_refused_before_binding() {
    let mut config = config();
    config.write_queue_max_per_connection = 0;
    let result = serve(
        config,
        Arc::new(TestHandler::default()),
        ShutdownSignal::new(),
    );
    assert!(matches!(
        result,
        Err(ServerError::InvalidConfig {
            field: "write_queue_max_per_connection",
            ..
        })
    ));
}

/// A request served on the reading task is answered like one run as a task: its opaque, the
/// response flag, its header encoding; a oneway one is not answered; a panic is answered
/// SYSTEM_ERROR and the connection goes on.
#[test]
fn requests_served_now_are_answered_like_tasks() {
    let (server, handler) = start(config());
    let mut client = Client::connect(server.local_addrs()[0]);
    for serialize_type in [SerializeType::Json, SerializeType::RocketMq] {
        let mut request = RemotingCommand::request(ECHO_NOW).with_body(Bytes::from_static(b"now"));
        request.serialize_type = serialize_type;
        let response = client.call(request);
        assert_eq!(response.code, response_code::SUCCESS);
        assert_eq!(&response.body[..], b"now");
        assert_eq!(response.serialize_type, serialize_type);
    }
    client.send(RemotingCommand::request(ECHO_NOW).oneway());
    let normal = client.send(RemotingCommand::request(ECHO_NOW));
    assert_eq!(client.recv().opaque, normal);
    assert_eq!(handler.oneway_seen.load(Ordering::SeqCst), 1);

    let response = client.call(RemotingCommand::request(PANIC_NOW));
    assert_eq!(response.code, response_code::SYSTEM_ERROR);
    assert!(response.remark.unwrap().contains("test panic served now"));
    client.send(RemotingCommand::request(PANIC_NOW).oneway());
    client.expect_silence(Duration::from_millis(300));
    assert_eq!(
        client.call(echo_request(b"after")).code,
        response_code::SUCCESS
    );
}

/// The answer of a request served now, on a connection whose write queue is full, waits for
/// room and is sent after what was queued before it: never dropped.
#[test]
fn an_answer_served_now_to_a_full_write_queue_waits_for_room() {
    let (_server, _handler, mut client, conn) = held_connection();
    let big = RemotingCommand::request(ECHO).with_body(Bytes::from(vec![7_u8; 1024 * 1024]));
    let mut encoded = BytesMut::new();
    encode_frame(&echo(&conn, &big), &mut encoded).unwrap();
    let queued = fill_write_queue(&conn, &encoded.freeze()).expect("connection closed");
    let opaque =
        client.send(RemotingCommand::request(ECHO_NOW).with_body(Bytes::from_static(b"late")));
    let mut big_frames = 0;
    let answer = loop {
        let response = client.recv();
        if response.opaque == opaque {
            break response;
        }
        big_frames += 1;
    };
    assert_eq!(&answer.body[..], b"late");
    assert!(
        big_frames >= queued,
        "the answer overtook frames queued before it: {big_frames} of {queued}"
    );
}
