//! The network runtime's memory and connection bounds (issue 15): the write queue in bytes, the
//! idle and frame-read timeouts, the per-IP connection cap. A test handler on 127.0.0.1:0 and a
//! blocking std client, as in `server_runtime.rs`, with small bounds set through `ServerConfig`.

use bytes::{Bytes, BytesMut};
use ringmq::net::{
    serve, ConnectionContext, Outbound, RequestHandler, SendError, ServerConfig, ServerHandle,
    ShutdownSignal,
};
use ringmq::remoting::codes::response_code;
use ringmq::remoting::command::RemotingCommand;
use ringmq::remoting::frame::{decode_frame, encode_frame, FRAME_SIZE_MAX_BYTES};
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::sync::Mutex;
use std::time::{Duration, Instant};

const ECHO: i32 = 9101;
/// Held: the handler keeps the connection context and answers nothing.
const HOLD: i32 = 9102;
/// Answered with a body of `BIG_BODY_BYTES`.
const BIG: i32 = 9103;
const BIG_BODY_BYTES: usize = 1024 * 1024;

#[derive(Default)]
struct Handler {
    held: Mutex<Vec<ConnectionContext>>,
}

impl RequestHandler for Handler {
    async fn handle(
        &self,
        conn: ConnectionContext,
        request: RemotingCommand,
    ) -> Option<RemotingCommand> {
        let response = |body: Bytes| {
            RemotingCommand::response_to(&request, response_code::SUCCESS, None).with_body(body)
        };
        match request.code {
            ECHO => Some(response(request.body.clone())),
            HOLD => {
                self.held.lock().unwrap().push(conn);
                None
            }
            BIG => {
                self.held.lock().unwrap().push(conn);
                Some(response(Bytes::from(vec![1_u8; BIG_BODY_BYTES])))
            }
            _ => None,
        }
    }
}

fn config() -> ServerConfig {
    let mut config = ServerConfig::new("127.0.0.1:0".parse().unwrap());
    config.worker_threads = 1;
    config.shutdown_grace_ms = 500;
    config
}

fn start(config: ServerConfig) -> (ServerHandle, Arc<Handler>) {
    let handler = Arc::new(Handler::default());
    let handle = serve(config, handler.clone(), ShutdownSignal::new()).unwrap();
    (handle, handler)
}

fn connect(addr: SocketAddr) -> TcpStream {
    let stream = TcpStream::connect(addr).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    stream
}

fn send(stream: &mut TcpStream, cmd: RemotingCommand) {
    let mut buf = BytesMut::new();
    encode_frame(&cmd, &mut buf).unwrap();
    stream.write_all(&buf).unwrap();
}

/// Reads one frame; `Ok(None)` on a clean close.
fn recv(stream: &mut TcpStream) -> io::Result<Option<RemotingCommand>> {
    let mut prefix = [0_u8; 4];
    match stream.read_exact(&mut prefix) {
        Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(None),
        other => other?,
    }
    let mut frame = vec![0_u8; 4 + u32::from_be_bytes(prefix) as usize];
    frame[..4].copy_from_slice(&prefix);
    stream.read_exact(&mut frame[4..])?;
    Ok(decode_frame(&mut BytesMut::from(&frame[..]), FRAME_SIZE_MAX_BYTES).unwrap())
}

fn echo(stream: &mut TcpStream, opaque: i32) {
    send(stream, RemotingCommand::request(ECHO).with_opaque(opaque));
    let response = recv(stream).unwrap().expect("closed instead of answering");
    assert_eq!(response.opaque, opaque);
}

/// Asserts the server closes `stream` (EOF or reset) without sending a frame, and returns when.
fn expect_closed(stream: &mut TcpStream) -> Instant {
    match recv(stream) {
        Ok(None) => {}
        Err(e) if e.kind() == io::ErrorKind::ConnectionReset => {}
        other => panic!("expected the server to close the connection, got {other:?}"),
    }
    Instant::now()
}

fn eventually(what: &str, condition: impl Fn() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !condition() {
        assert!(Instant::now() < deadline, "timed out waiting for: {what}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn held(handler: &Handler, count: usize) -> ConnectionContext {
    eventually("requests held", || {
        handler.held.lock().unwrap().len() >= count
    });
    handler.held.lock().unwrap()[0].clone()
}

const QUEUE_MAX_BYTES: usize = 4 * 1024 * 1024;

#[test]
fn send_reports_full_once_the_queued_bytes_reach_the_bound() {
    let mut config = config();
    config.write_queue_max_bytes_per_connection = QUEUE_MAX_BYTES;
    let (server, handler) = start(config);
    let mut client = connect(server.local_addrs()[0]);
    send(&mut client, RemotingCommand::request(HOLD));
    let conn = held(&handler, 1);
    // The client never reads: the socket buffers take a few frames, then the queue fills.
    let frame = Bytes::from(vec![0_u8; 1024 * 1024]);
    let mut sent = 0;
    loop {
        match conn.sender().send(Outbound::Encoded(frame.clone())) {
            Ok(()) => sent += 1,
            Err(SendError::Full(_)) => break,
            Err(e) => panic!("{e}"),
        }
        assert!(sent < 64, "the byte bound never refused a frame");
        std::thread::sleep(Duration::from_millis(2));
    }
    assert!(conn.sender().queued_bytes() <= QUEUE_MAX_BYTES);
    assert!(conn.sender().queued_bytes() > QUEUE_MAX_BYTES - frame.len());
}

#[test]
fn handler_responses_wait_for_room_in_bytes() {
    let mut config = config();
    config.write_queue_max_bytes_per_connection = QUEUE_MAX_BYTES;
    let (server, handler) = start(config);
    let mut client = connect(server.local_addrs()[0]);
    let requests = 64;
    for opaque in 0..requests {
        send(
            &mut client,
            RemotingCommand::request(BIG).with_opaque(opaque),
        );
    }
    let conn = held(&handler, requests as usize);
    // 64 MiB of responses are waiting; only the bound's worth may be queued at any moment.
    let started = Instant::now();
    let mut peak = 0;
    while started.elapsed() < Duration::from_millis(300) {
        peak = peak.max(conn.sender().queued_bytes());
        std::thread::sleep(Duration::from_millis(1));
    }
    assert!(peak > 0 && peak <= QUEUE_MAX_BYTES, "peak {peak}");
    // Reading frees room; every response arrives.
    for _ in 0..requests {
        let response = recv(&mut client).unwrap().unwrap();
        assert_eq!(response.body.len(), BIG_BODY_BYTES);
    }
    eventually("queue drained", || conn.sender().queued_bytes() == 0);
}

#[test]
fn an_idle_connection_is_closed() {
    let mut config = config();
    config.channel_max_idle_time_ms = 200;
    let (server, _handler) = start(config);
    let mut client = connect(server.local_addrs()[0]);
    echo(&mut client, 1);
    let last_activity = Instant::now();
    let closed = expect_closed(&mut client);
    let idle = closed - last_activity;
    assert!(idle >= Duration::from_millis(150), "closed after {idle:?}");
    assert!(idle < Duration::from_secs(3), "closed after {idle:?}");
}

#[test]
fn a_peer_that_stops_reading_is_idle_and_its_queue_freed() {
    let mut config = config();
    config.channel_max_idle_time_ms = 300;
    let (server, handler) = start(config);
    let mut client = connect(server.local_addrs()[0]);
    send(&mut client, RemotingCommand::request(HOLD));
    let conn = held(&handler, 1);
    let frame = Bytes::from(vec![0_u8; 1024 * 1024]);
    // Fill the socket buffers and the queue; the writer is then stuck in a write.
    while conn.sender().send(Outbound::Encoded(frame.clone())).is_ok() {
        std::thread::sleep(Duration::from_millis(2));
    }
    eventually("the stalled connection closed", || {
        conn.sender().is_closed()
    });
    eventually("its queue freed", || conn.sender().queued_bytes() == 0);
}

#[test]
fn a_frame_that_stops_half_way_closes_the_connection() {
    let mut config = config();
    config.channel_max_idle_time_ms = 0;
    config.frame_read_timeout_ms = 200;
    let (server, _handler) = start(config);
    let mut client = connect(server.local_addrs()[0]);
    // A 1000-byte frame of which only the first 14 bytes ever come.
    let mut partial = 1000_u32.to_be_bytes().to_vec();
    partial.extend_from_slice(&[0_u8; 10]);
    client.write_all(&partial).unwrap();
    let sent = Instant::now();
    let waited = expect_closed(&mut client) - sent;
    assert!(
        waited >= Duration::from_millis(150),
        "closed after {waited:?}"
    );
    assert!(waited < Duration::from_secs(3), "closed after {waited:?}");
}

#[test]
fn an_active_connection_is_not_closed() {
    let mut config = config();
    // Ample against a loaded test machine: each client is active every ~100 ms.
    config.channel_max_idle_time_ms = 600;
    config.frame_read_timeout_ms = 600;
    let (server, handler) = start(config);
    let addr = server.local_addrs()[0];
    // A client that talks (as a RocketMQ client heartbeats) stays.
    let mut talker = connect(addr);
    // A client that only receives (pushes from the server) is not idle either: Java closes on
    // all-idle, nothing read and nothing written.
    let mut listener = connect(addr);
    send(&mut listener, RemotingCommand::request(HOLD).with_opaque(1));
    let conn = held(&handler, 1);
    for opaque in 0..20 {
        echo(&mut talker, opaque);
        let push = RemotingCommand::request(ECHO)
            .with_opaque(100 + opaque)
            .oneway();
        conn.sender().send(Outbound::Command(push)).unwrap();
        assert_eq!(recv(&mut listener).unwrap().unwrap().opaque, 100 + opaque);
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(!conn.sender().is_closed());
}

#[test]
fn connections_over_the_per_ip_cap_are_closed_at_once() {
    let mut config = config();
    config.connections_max_per_ip = 2;
    let (server, _handler) = start(config);
    let addr = server.local_addrs()[0];
    let mut first = connect(addr);
    let mut second = connect(addr);
    echo(&mut first, 1);
    echo(&mut second, 2);
    let mut third = connect(addr);
    // A refused connection may be reset before the write reaches it.
    let _ = third.write_all(b"\0\0\0\x10");
    expect_closed(&mut third);
    echo(&mut first, 3);
    drop(first);
    eventually("a slot is free again", || {
        let mut client = connect(addr);
        let mut frame = BytesMut::new();
        encode_frame(&RemotingCommand::request(ECHO), &mut frame).unwrap();
        client.write_all(&frame).is_ok() && matches!(recv(&mut client), Ok(Some(_)))
    });
}
