//! The echo server's other way to run (`--echo-model per-connection`, the default): two
//! threads per connection, a reader that decodes requests and answers them, and a writer
//! that writes the connection's waiting answers in order, gathering what waits into one
//! write. Any thread answering on a connection (its reader, another connection's reader
//! waking a held pull, the expiry tick) appends the whole encoded frame to the connection's
//! [`Outlet`] under its lock and wakes its writer.
//!
//! This is the shape the echo server had before the worker pool ([`crate::echo_workers`]):
//! each answer leaves as soon as it is computed, and the kernel wakes exactly the thread
//! whose socket is ready. The old server of this shape had the lower W5 tail and the higher
//! W4 bandwidth of the two in the sessions of 2026-12-01; this one's figures, and why
//! `scripts/bench-compare.sh` runs both models, are in docs/BENCHMARKS.md ("The wake path,
//! and two echo models").

use std::collections::HashMap;
use std::io::{ErrorKind, Read};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use bytes::BytesMut;
use ringmq::remoting::frame::encode_frame;

use crate::echo_workers::{
    answer_each, Outlet, Replies, ReplyTo, Service, ECHO_CONNECTIONS_MAX, READ_CHUNK_BYTES,
};
use crate::error::BenchError;

/// How long the accept loop sleeps when nothing waits to be accepted (the listener is
/// nonblocking so that it sees the stop flag).
const ACCEPT_IDLE: Duration = Duration::from_millis(20);

struct Shared {
    stop: AtomicBool,
    /// Open connections: their write sides, to close them at shutdown.
    open: Mutex<HashMap<u64, Arc<Outlet>>>,
    /// Every connection thread not joined yet (finished ones are joined as new ones come).
    threads: Mutex<Vec<JoinHandle<()>>>,
    next_connection: AtomicU64,
}

/// The running server.
pub struct PerConnection {
    shared: Arc<Shared>,
    threads: Vec<JoinHandle<()>>,
}

fn spawn(name: String, f: impl FnOnce() + Send + 'static) -> Result<JoinHandle<()>, BenchError> {
    std::thread::Builder::new()
        .name(name.clone())
        .spawn(f)
        .map_err(|source| BenchError::Io {
            what: format!("spawn {name}"),
            source,
        })
}

impl PerConnection {
    /// Serves `listener` with `service`, calling its tick about every `tick`.
    pub fn start(
        listener: TcpListener,
        tick: Duration,
        service: Arc<dyn Service>,
    ) -> Result<Self, BenchError> {
        listener
            .set_nonblocking(true)
            .map_err(|source| BenchError::Io {
                what: "listener".into(),
                source,
            })?;
        let shared = Arc::new(Shared {
            stop: AtomicBool::new(false),
            open: Mutex::new(HashMap::new()),
            threads: Mutex::new(Vec::new()),
            next_connection: AtomicU64::new(1),
        });
        let mut started = PerConnection {
            shared: Arc::clone(&shared),
            threads: Vec::new(),
        };
        let (accept_shared, accept_service) = (Arc::clone(&shared), Arc::clone(&service));
        let accept = spawn("echo-accept".into(), move || {
            accept_loop(&listener, &accept_shared, &accept_service);
        });
        let tick_shared = Arc::clone(&shared);
        let ticker = spawn("echo-tick".into(), move || {
            let mut replies = Replies::new();
            while !tick_shared.stop.load(Ordering::Relaxed) {
                std::thread::sleep(tick);
                service.tick(0, 1, &mut replies);
                replies.deliver();
            }
        });
        for thread in [accept, ticker] {
            match thread {
                Ok(thread) => started.threads.push(thread),
                Err(e) => {
                    started.shutdown();
                    return Err(e);
                }
            }
        }
        Ok(started)
    }

    /// Stops accepting, closes every connection and joins every thread.
    pub fn shutdown(self) {
        self.shared.stop.store(true, Ordering::Relaxed);
        for thread in self.threads {
            let _ = thread.join();
        }
        let open: Vec<_> = lock(&self.shared.open).drain().map(|(_, o)| o).collect();
        for outlet in open {
            outlet.close();
        }
        let threads = std::mem::take(&mut *lock(&self.shared.threads));
        for thread in threads {
            let _ = thread.join();
        }
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

fn accept_loop(listener: &TcpListener, shared: &Arc<Shared>, service: &Arc<dyn Service>) {
    while !shared.stop.load(Ordering::Relaxed) {
        match listener.accept() {
            Ok((stream, peer)) => {
                if !peer.ip().is_loopback() || lock(&shared.open).len() >= ECHO_CONNECTIONS_MAX {
                    let _ = stream.shutdown(std::net::Shutdown::Both);
                    continue;
                }
                adopt(stream, shared, service);
            }
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            // WouldBlock, or e.g. out of descriptors: try again shortly.
            Err(_) => std::thread::sleep(ACCEPT_IDLE),
        }
    }
}

/// Starts the reader and writer threads of a new connection.
fn adopt(stream: TcpStream, shared: &Arc<Shared>, service: &Arc<dyn Service>) {
    if stream.set_nonblocking(false).is_err() {
        return;
    }
    let _ = stream.set_nodelay(true);
    let key = shared.next_connection.fetch_add(1, Ordering::Relaxed);
    let outlet = Arc::new(Outlet::with_writer_thread(stream));
    lock(&shared.open).insert(key, Arc::clone(&outlet));
    let writer_outlet = Arc::clone(&outlet);
    let writer = spawn(format!("echo-write-{key}"), move || {
        writer_outlet.write_loop();
    });
    let (reader_shared, reader_service) = (Arc::clone(shared), Arc::clone(service));
    let from = ReplyTo {
        connection: key,
        outlet: Arc::clone(&outlet),
    };
    let reader = spawn(format!("echo-read-{key}"), move || {
        read_loop(&from, reader_service.as_ref());
        from.outlet.close();
        lock(&reader_shared.open).remove(&from.connection);
        reader_service.closed(from.connection);
    });
    let mut threads = lock(&shared.threads);
    threads.retain(|t| !t.is_finished());
    match (writer, reader) {
        (Ok(writer), Ok(reader)) => threads.extend([writer, reader]),
        (writer, reader) => {
            outlet.close();
            lock(&shared.open).remove(&key);
            threads.extend(writer.into_iter().chain(reader));
        }
    }
}

/// Reads requests and answers each at once (its answer, and the answers to other
/// connections it produced), until the connection ends or fails.
fn read_loop(from: &ReplyTo, service: &dyn Service) {
    let mut input = BytesMut::with_capacity(64 * 1024);
    let mut chunk = vec![0u8; READ_CHUNK_BYTES];
    let mut replies = Replies::new();
    let mut out = BytesMut::new();
    loop {
        let answered = answer_each(
            service,
            from,
            &mut input,
            &mut replies,
            |response, replies| {
                // The pulls a send woke are answered before the send is acknowledged (the
                // producer's next send then finds their consumers' pulls held again sooner).
                replies.deliver();
                encode_frame(response, &mut out).is_ok() && from.outlet.write_frames(&mut out)
            },
        );
        // A request that produced no answer of its own may still have woken others.
        replies.deliver();
        if !answered || !from.outlet.wait_for_room() {
            return;
        }
        match (&from.outlet.stream).read(&mut chunk) {
            Ok(0) => return,
            Ok(n) => input.extend_from_slice(&chunk[..n]),
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(_) => return,
        }
    }
}
