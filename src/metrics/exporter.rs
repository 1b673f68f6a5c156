//! The HTTP listener of `RINGMQ_METRICS_LISTEN`: `GET /metrics` (Prometheus text), `GET /` and
//! its assets (the dashboard), `GET /api/stats` (the dashboard's JSON).
//!
//! A small server on std's `TcpListener`, one thread (`ringmq-metrics`) accepting and sampling
//! the dashboard's rates once a second, and one short-lived thread per connection. Everything
//! is bounded: [`HTTP_CONNECTIONS_MAX`] connections at once (more are answered 503 and
//! closed), one request per connection, a request head of at most
//! [`HTTP_REQUEST_HEAD_MAX_BYTES`] read within [`HTTP_READ_TIMEOUT_MS`], and the whole
//! connection (head, answer and the drain of what the client still sends) within
//! [`HTTP_CONNECTION_DEADLINE_MS`], however slowly the client reads or trickles bytes. Only GET
//! and HEAD are served; a request body is never read.

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::dashboard;
use super::exposition;
use super::rates::RateHistory;
use super::registry::BrokerMetrics;
use super::view::BrokerView;
use crate::common::{now_ms, StopFlag};

/// Connections served at once.
pub const HTTP_CONNECTIONS_MAX: usize = 16;
/// Longest request head (request line and headers) read.
pub const HTTP_REQUEST_HEAD_MAX_BYTES: usize = 8 * 1024;
/// Time a client has to send its request head.
pub const HTTP_READ_TIMEOUT_MS: u64 = 2_000;
/// Time a whole connection may take: reading the head, writing the answer and draining what
/// the client still sends. One deadline, so a slow client cannot hold a slot longer by
/// trickling bytes (each read or write is given only what is left of it).
#[cfg(not(test))]
pub const HTTP_CONNECTION_DEADLINE_MS: u64 = 10_000;
#[cfg(test)]
pub const HTTP_CONNECTION_DEADLINE_MS: u64 = 1_000;
/// How often the accept loop looks at the stop flag and the sampling clock.
const ACCEPT_POLL_INTERVAL_MS: u64 = 50;
/// How often the dashboard's rates are sampled.
pub const RATE_SAMPLE_INTERVAL_MS: u64 = 1_000;

/// What one connection thread needs.
struct Shared {
    metrics: Arc<BrokerMetrics>,
    view: Arc<dyn BrokerView>,
    history: Mutex<RateHistory>,
    active: AtomicUsize,
}

/// Binds the listener (at startup, so an address in use fails the start).
pub fn bind(addr: SocketAddr) -> io::Result<TcpListener> {
    let listener = TcpListener::bind(addr)?;
    listener.set_nonblocking(true)?;
    Ok(listener)
}

/// Serves `listener` on thread `ringmq-metrics` until `stop` is raised.
pub fn serve(
    listener: TcpListener,
    metrics: Arc<BrokerMetrics>,
    view: Arc<dyn BrokerView>,
    stop: StopFlag,
) -> io::Result<JoinHandle<()>> {
    let shared = Arc::new(Shared {
        metrics,
        view,
        history: Mutex::new(RateHistory::default()),
        active: AtomicUsize::new(0),
    });
    std::thread::Builder::new()
        .name("ringmq-metrics".into())
        .spawn(move || accept_loop(&listener, &shared, &stop))
}

fn accept_loop(listener: &TcpListener, shared: &Arc<Shared>, stop: &StopFlag) {
    let sample_interval = Duration::from_millis(RATE_SAMPLE_INTERVAL_MS);
    let mut next_sample = Instant::now();
    while !stop.is_raised() {
        if Instant::now() >= next_sample {
            sample(shared);
            // From now, not from the missed slot: a stalled thread takes one sample, not a
            // burst of them with tiny intervals.
            next_sample = Instant::now() + sample_interval;
        }
        match listener.accept() {
            Ok((stream, _)) => admit(stream, shared),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                stop.wait_timeout(Duration::from_millis(ACCEPT_POLL_INTERVAL_MS));
            }
            Err(e) => {
                tracing::warn!(error = %e, "metrics listener: accept failed");
                stop.wait_timeout(Duration::from_millis(ACCEPT_POLL_INTERVAL_MS));
            }
        }
    }
}

fn sample(shared: &Shared) {
    let totals = shared.metrics.topic_totals();
    lock(&shared.history).sample(Instant::now(), now_ms(), totals);
}

fn lock(history: &Mutex<RateHistory>) -> std::sync::MutexGuard<'_, RateHistory> {
    // A poisoned lock only means a connection thread panicked; the history is whole.
    history.lock().unwrap_or_else(|e| e.into_inner())
}

/// Serves `stream` on a thread of its own, or answers 503 when [`HTTP_CONNECTIONS_MAX`] are
/// being served.
fn admit(stream: TcpStream, shared: &Arc<Shared>) {
    if shared.active.fetch_add(1, Ordering::AcqRel) >= HTTP_CONNECTIONS_MAX {
        shared.active.fetch_sub(1, Ordering::AcqRel);
        let mut stream = stream;
        let _ = stream.set_nonblocking(true);
        let _ = stream.write_all(&response(503, "text/plain", b"busy\n", false));
        return;
    }
    let shared = shared.clone();
    let spawned = std::thread::Builder::new()
        .name("ringmq-metrics-conn".into())
        .spawn(move || {
            if let Err(e) = serve_connection(stream, &shared) {
                tracing::debug!(error = %e, "metrics connection ended");
            }
            shared.active.fetch_sub(1, Ordering::AcqRel);
        });
    if let Err(e) = spawned {
        tracing::warn!(error = %e, "metrics listener: cannot start a connection thread");
    }
}

fn serve_connection(mut stream: TcpStream, shared: &Shared) -> io::Result<()> {
    stream.set_nonblocking(false)?;
    let deadline = Instant::now() + Duration::from_millis(HTTP_CONNECTION_DEADLINE_MS);
    let head_deadline = deadline.min(Instant::now() + Duration::from_millis(HTTP_READ_TIMEOUT_MS));
    let answer = match read_head(&mut stream, head_deadline)? {
        Some(head) => route(&head, shared),
        None => response(431, "text/plain", b"request head too large\n", false),
    };
    let mut written = 0;
    while written < answer.len() {
        stream.set_write_timeout(Some(left(deadline, "answer not taken in time")?))?;
        match stream.write(&answer[written..]) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => written += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    // Closing with unread input would reset the connection and could destroy the answer in
    // flight: end our side, then drop what the client still sends (bounded in bytes and by
    // the deadline) until it closes.
    stream.shutdown(std::net::Shutdown::Write)?;
    let mut sink = [0u8; 1024];
    let mut drained = 0;
    while drained < HTTP_REQUEST_HEAD_MAX_BYTES {
        let Ok(time_left) = left(deadline, "drain") else {
            break;
        };
        stream.set_read_timeout(Some(time_left))?;
        match stream.read(&mut sink) {
            Ok(0) | Err(_) => break,
            Ok(n) => drained += n,
        }
    }
    Ok(())
}

/// What is left until `deadline`; an error once it has passed.
fn left(deadline: Instant, what: &'static str) -> io::Result<Duration> {
    let now = Instant::now();
    if now >= deadline {
        return Err(io::Error::new(io::ErrorKind::TimedOut, what));
    }
    Ok(deadline - now)
}

/// Reads up to the blank line ending the head, by `deadline`; `None` when it is longer than
/// the bound.
fn read_head(stream: &mut TcpStream, deadline: Instant) -> io::Result<Option<String>> {
    let mut head = Vec::with_capacity(1024);
    let mut chunk = [0u8; 1024];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        if head.len() >= HTTP_REQUEST_HEAD_MAX_BYTES {
            return Ok(None);
        }
        stream.set_read_timeout(Some(left(deadline, "request head too slow")?))?;
        let n = stream.read(&mut chunk)?;
        if n == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "closed before the head ended",
            ));
        }
        head.extend_from_slice(&chunk[..n]);
    }
    Ok(Some(String::from_utf8_lossy(&head).into_owned()))
}

/// The whole answer to a request head.
fn route(head: &str, shared: &Shared) -> Vec<u8> {
    let mut parts = head.lines().next().unwrap_or("").split_whitespace();
    let (method, target) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
    let with_body = method == "GET";
    if !with_body && method != "HEAD" {
        return response(405, "text/plain", b"only GET and HEAD\n", true);
    }
    let path = target.split('?').next().unwrap_or("");
    match path {
        "/" | "/index.html" => response(
            200,
            "text/html; charset=utf-8",
            dashboard::INDEX_HTML.as_bytes(),
            with_body,
        ),
        "/dashboard.js" => response(
            200,
            "text/javascript; charset=utf-8",
            dashboard::DASHBOARD_JS.as_bytes(),
            with_body,
        ),
        "/dashboard.css" => response(
            200,
            "text/css; charset=utf-8",
            dashboard::DASHBOARD_CSS.as_bytes(),
            with_body,
        ),
        "/metrics" => match exposition::encode(&shared.metrics, shared.view.snapshot()) {
            Ok(text) => response(200, exposition::CONTENT_TYPE, text.as_bytes(), with_body),
            Err(_) => response(
                500,
                "text/plain",
                b"encoding the metrics failed\n",
                with_body,
            ),
        },
        "/api/stats" => {
            let snapshot = shared.view.snapshot();
            let json = dashboard::stats_json(&shared.metrics, &snapshot, &lock(&shared.history));
            match json {
                Ok(json) => response(200, "application/json", json.as_bytes(), with_body),
                Err(_) => response(500, "text/plain", b"encoding the stats failed\n", with_body),
            }
        }
        _ => response(404, "text/plain", b"not found\n", with_body),
    }
}

fn response(status: u16, content_type: &str, body: &[u8], with_body: bool) -> Vec<u8> {
    let reason = match status {
        200 => "OK",
        404 => "Not Found",
        405 => "Method Not Allowed",
        431 => "Request Header Fields Too Large",
        503 => "Service Unavailable",
        _ => "Internal Server Error",
    };
    let mut out = format!(
        "HTTP/1.1 {status} {reason}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\n\
         Cache-Control: no-store\r\nConnection: close\r\n\r\n",
        body.len()
    )
    .into_bytes();
    if with_body {
        out.extend_from_slice(body);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::view::BrokerSnapshot;

    struct Fixed;
    impl BrokerView for Fixed {
        fn snapshot(&self) -> BrokerSnapshot {
            BrokerSnapshot::default()
        }
    }

    fn get(addr: SocketAddr, request: &[u8]) -> String {
        let mut s = TcpStream::connect(addr).unwrap();
        s.write_all(request).unwrap();
        let mut out = String::new();
        s.read_to_string(&mut out).unwrap();
        out
    }

    #[test]
    fn routes_bounds_and_methods() {
        let listener = bind("127.0.0.1:0".parse().unwrap()).unwrap();
        let addr = listener.local_addr().unwrap();
        let metrics = Arc::new(BrokerMetrics::new());
        metrics.record_send("T", 1, 1);
        let stop = StopFlag::new();
        let thread = serve(listener, metrics, Arc::new(Fixed), stop.clone()).unwrap();
        let scrape = get(addr, b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
        assert!(scrape.starts_with("HTTP/1.1 200 OK\r\n"), "{scrape}");
        assert!(scrape.contains("ringmq_send_messages_total{topic=\"T\"} 1"));
        let page = get(addr, b"GET / HTTP/1.1\r\n\r\n");
        assert!(page.contains("text/html") && page.contains("/dashboard.js"));
        let stats = get(addr, b"GET /api/stats?x=1 HTTP/1.1\r\n\r\n");
        assert!(stats.contains("application/json") && stats.contains("\"not replicating\""));
        assert!(get(addr, b"POST /metrics HTTP/1.1\r\n\r\n").starts_with("HTTP/1.1 405"));
        assert!(get(addr, b"GET /nope HTTP/1.1\r\n\r\n").starts_with("HTTP/1.1 404"));
        let head = get(addr, b"HEAD /metrics HTTP/1.1\r\n\r\n");
        assert!(head.ends_with("\r\n\r\n"), "HEAD has no body: {head}");
        let mut huge = b"GET /metrics HTTP/1.1\r\nX: ".to_vec();
        huge.resize(HTTP_REQUEST_HEAD_MAX_BYTES + 10, b'a');
        huge.extend_from_slice(b"\r\n\r\n");
        assert!(get(addr, &huge).starts_with("HTTP/1.1 431"));
        stop.raise();
        thread.join().unwrap();
    }

    /// A client that takes its answer and then trickles bytes is closed once the connection's
    /// deadline passes (each byte no longer buys it another read timeout).
    #[test]
    fn a_trickling_client_is_closed_after_the_deadline() {
        let listener = bind("127.0.0.1:0".parse().unwrap()).unwrap();
        let addr = listener.local_addr().unwrap();
        let stop = StopFlag::new();
        let metrics = Arc::new(BrokerMetrics::new());
        let thread = serve(listener, metrics, Arc::new(Fixed), stop.clone()).unwrap();
        let mut s = TcpStream::connect(addr).unwrap();
        let started = Instant::now();
        s.write_all(b"GET /metrics HTTP/1.1\r\n\r\n").unwrap();
        let mut closed = false;
        while started.elapsed() < Duration::from_secs(15) {
            std::thread::sleep(Duration::from_millis(50));
            if s.write_all(b"x").is_err() {
                closed = true;
                break;
            }
        }
        let took = started.elapsed();
        assert!(closed, "still open after {took:?}");
        assert!(
            took >= Duration::from_millis(HTTP_CONNECTION_DEADLINE_MS),
            "closed before the deadline: {took:?}"
        );
        assert!(
            took < Duration::from_millis(HTTP_CONNECTION_DEADLINE_MS + 3_000),
            "{took:?}"
        );
        stop.raise();
        thread.join().unwrap();
    }
}
