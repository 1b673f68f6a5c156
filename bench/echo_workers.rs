//! The echo server's threads: a fixed pool of worker threads, each with its own epoll set,
//! serving every connection as a broker does (no thread per connection).
//!
//! Worker 0 also owns the listener and hands each accepted connection to the next worker in
//! turn. A connection belongs to one worker for its life: only that worker reads it and writes
//! it. An answer computed on another worker (a send on worker A waking a pull held for a
//! connection of worker B) is posted to B's inbox and B is woken through its eventfd. Answers
//! to one connection are gathered in its output buffer and written with one `write` per turn.
//!
//! Sockets are nonblocking and registered edge-triggered for reading and writing, so a worker
//! does not ask epoll again for a connection it knows to be ready: a connection is read until
//! the socket has no more bytes ([`READ_TURN_MAX_BYTES`] per turn, then the others get a turn),
//! and is not read while more than [`OUT_PENDING_MAX_BYTES`] wait to be written to it.

use std::collections::HashMap;
use std::io::{ErrorKind, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use bytes::{Buf, Bytes, BytesMut};
use nix::sys::epoll::{Epoll, EpollCreateFlags, EpollEvent, EpollFlags, EpollTimeout};
use nix::sys::eventfd::{EfdFlags, EventFd};
use ringmq::remoting::command::RemotingCommand;
use ringmq::remoting::frame::{decode_frame, encode_frame, FRAME_SIZE_MAX_BYTES};

use crate::error::BenchError;

/// Connections served at once over all workers.
pub const ECHO_CONNECTIONS_MAX: usize = 1024;
/// Most worker threads (`--echo-threads`).
pub const ECHO_THREADS_MAX: usize = 64;

/// The default `--echo-threads`: one worker per core.
pub fn echo_threads_default() -> usize {
    std::thread::available_parallelism()
        .map_or(1, std::num::NonZeroUsize::get)
        .min(ECHO_THREADS_MAX)
}
/// Bytes waiting to be written to one connection above which the worker stops reading it
/// (answers to its own requests; answers posted by other workers are bounded by the held
/// pulls, one answer each).
pub const OUT_PENDING_MAX_BYTES: usize = 4 * 1024 * 1024;
/// Most bytes read from one connection in one turn before the worker serves the others.
pub const READ_TURN_MAX_BYTES: usize = 1024 * 1024;
/// Bytes of one `read`.
pub const READ_CHUNK_BYTES: usize = 256 * 1024;
/// Events taken from epoll per wait.
pub const EVENTS_PER_WAIT: usize = 256;

/// The epoll key of a worker's eventfd; connection keys start above it.
const KEY_WAKE: u64 = 0;
/// The epoll key of the listener (worker 0 only).
const KEY_LISTENER: u64 = 1;
/// The first connection key.
const KEY_FIRST_CONNECTION: u64 = 2;

/// Where an answer goes: a connection of a worker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReplyTo {
    pub worker: usize,
    pub connection: u64,
}

/// What the workers serve.
pub trait Service: Send + Sync + 'static {
    /// Answers one request from `from`; `None` when there is no answer now (a oneway, or a
    /// held pull answered later through [`Replies::send`]).
    fn handle(
        &self,
        from: ReplyTo,
        request: RemotingCommand,
        replies: &mut Replies<'_>,
    ) -> Option<RemotingCommand>;
    /// Called by every worker about every `tick` (held pulls expire here): worker `worker` of
    /// `workers` does its share.
    fn tick(&self, worker: usize, workers: usize, replies: &mut Replies<'_>);
    /// The connection is gone.
    fn closed(&self, connection: u64);
}

enum Message {
    Frame(u64, Bytes),
    Connection(TcpStream),
}

struct Inbox {
    /// Bounded by the held pulls (one answer each) plus the connections being handed over.
    messages: Mutex<Vec<Message>>,
    /// Set while a wake-up is on its way, so posters write the eventfd once per turn.
    notified: AtomicBool,
    wake: EventFd,
}

struct Shared {
    inboxes: Vec<Inbox>,
    stop: AtomicBool,
    connection_count: AtomicUsize,
    next_connection: AtomicU64,
    next_worker: AtomicUsize,
}

impl Shared {
    fn post(&self, worker: usize, messages: impl IntoIterator<Item = Message>) {
        let inbox = &self.inboxes[worker];
        inbox
            .messages
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .extend(messages);
        if !inbox.notified.swap(true, Ordering::AcqRel) {
            // Fails only if the counter would overflow, and then a wake-up is pending anyway.
            let _ = inbox.wake.write(1);
        }
    }

    fn wake_all(&self) {
        for inbox in &self.inboxes {
            let _ = inbox.wake.write(1);
        }
    }
}

/// Answers computed on a worker for connections anywhere: the worker's own are applied after
/// the current connection's turn, the others are posted once per turn.
pub struct Replies<'a> {
    shared: &'a Shared,
    worker: usize,
    local: Vec<(u64, Bytes)>,
    remote: Vec<Vec<(u64, Bytes)>>,
}

impl Replies<'_> {
    /// Queues `response` for `to` (dropped if its connection is gone by then).
    pub fn send(&mut self, to: ReplyTo, response: &RemotingCommand) {
        let mut frame = BytesMut::with_capacity(256 + response.body.len());
        if encode_frame(response, &mut frame).is_err() {
            return;
        }
        if to.worker == self.worker {
            self.local.push((to.connection, frame.freeze()));
        } else if let Some(queue) = self.remote.get_mut(to.worker) {
            queue.push((to.connection, frame.freeze()));
        }
    }

    fn post_remote(&mut self) {
        for (worker, queue) in self.remote.iter_mut().enumerate() {
            if !queue.is_empty() {
                self.shared.post(
                    worker,
                    queue.drain(..).map(|(id, frame)| Message::Frame(id, frame)),
                );
            }
        }
    }
}

/// The running pool.
pub struct Workers {
    shared: Arc<Shared>,
    threads: Vec<JoinHandle<()>>,
}

fn io_error(what: &str, source: impl Into<std::io::Error>) -> BenchError {
    BenchError::Io {
        what: what.to_owned(),
        source: source.into(),
    }
}

impl Workers {
    /// Starts `threads` workers serving `listener` with `service`, waking each about every
    /// `tick`.
    pub fn start(
        listener: TcpListener,
        threads: usize,
        tick: Duration,
        service: Arc<dyn Service>,
    ) -> Result<Self, BenchError> {
        assert!(
            (1..=ECHO_THREADS_MAX).contains(&threads),
            "{threads} echo threads"
        );
        listener
            .set_nonblocking(true)
            .map_err(|e| io_error("listener", e))?;
        let inboxes = (0..threads)
            .map(|_| {
                Ok(Inbox {
                    messages: Mutex::new(Vec::new()),
                    notified: AtomicBool::new(false),
                    wake: EventFd::from_flags(EfdFlags::EFD_NONBLOCK | EfdFlags::EFD_CLOEXEC)
                        .map_err(|e| io_error("eventfd", e))?,
                })
            })
            .collect::<Result<Vec<_>, BenchError>>()?;
        let shared = Arc::new(Shared {
            inboxes,
            stop: AtomicBool::new(false),
            connection_count: AtomicUsize::new(0),
            next_connection: AtomicU64::new(KEY_FIRST_CONNECTION),
            next_worker: AtomicUsize::new(0),
        });
        let mut listener = Some(listener);
        let mut handles = Vec::with_capacity(threads);
        for index in 0..threads {
            let epoll =
                Epoll::new(EpollCreateFlags::EPOLL_CLOEXEC).map_err(|e| io_error("epoll", e))?;
            epoll
                .add(
                    &shared.inboxes[index].wake,
                    EpollEvent::new(EpollFlags::EPOLLIN, KEY_WAKE),
                )
                .map_err(|e| io_error("epoll add eventfd", e))?;
            let listener = if index == 0 { listener.take() } else { None };
            if let Some(listener) = &listener {
                epoll
                    .add(listener, EpollEvent::new(EpollFlags::EPOLLIN, KEY_LISTENER))
                    .map_err(|e| io_error("epoll add listener", e))?;
            }
            let mut worker = Worker {
                index,
                epoll,
                listener,
                shared: Arc::clone(&shared),
                service: Arc::clone(&service),
                connections: HashMap::new(),
                turns: Vec::new(),
                tick,
            };
            let handle = std::thread::Builder::new()
                .name(format!("echo-worker-{index}"))
                .spawn(move || worker.run());
            match handle {
                Ok(handle) => handles.push(handle),
                Err(e) => {
                    let started = Workers {
                        shared,
                        threads: handles,
                    };
                    started.shutdown();
                    return Err(io_error("spawn echo worker", e));
                }
            }
        }
        Ok(Workers {
            shared,
            threads: handles,
        })
    }

    /// Stops every worker; their connections close as they exit.
    pub fn shutdown(self) {
        self.shared.stop.store(true, Ordering::Relaxed);
        self.shared.wake_all();
        for thread in self.threads {
            let _ = thread.join();
        }
    }
}

struct Conn {
    stream: TcpStream,
    input: BytesMut,
    out: BytesMut,
    /// The socket may hold bytes not read yet (edge-triggered: set by every read event and
    /// cleared when a read would block).
    readable: bool,
    /// In the worker's list of connections to serve this turn.
    queued: bool,
}

struct Worker {
    index: usize,
    epoll: Epoll,
    listener: Option<TcpListener>,
    shared: Arc<Shared>,
    service: Arc<dyn Service>,
    connections: HashMap<u64, Conn>,
    /// Connections to serve (read and write) this turn.
    turns: Vec<u64>,
    tick: Duration,
}

impl Worker {
    fn run(&mut self) {
        let mut events = vec![EpollEvent::empty(); EVENTS_PER_WAIT];
        let mut chunk = vec![0u8; READ_CHUNK_BYTES];
        let mut next_tick = Instant::now() + self.tick;
        let workers = self.shared.inboxes.len();
        let shared = Arc::clone(&self.shared);
        let mut replies = Replies {
            shared: &shared,
            worker: self.index,
            local: Vec::new(),
            remote: vec![Vec::new(); workers],
        };
        while !self.shared.stop.load(Ordering::Relaxed) {
            let timeout = if self.turns.is_empty() {
                let ms = next_tick
                    .saturating_duration_since(Instant::now())
                    .as_millis();
                EpollTimeout::try_from(ms.min(u128::from(u16::MAX)) as i32)
                    .unwrap_or(EpollTimeout::ZERO)
            } else {
                EpollTimeout::ZERO
            };
            let ready = match self.epoll.wait(&mut events, timeout) {
                Ok(n) => n,
                Err(nix::errno::Errno::EINTR) => 0,
                Err(_) => break,
            };
            for event in &events[..ready] {
                match event.data() {
                    KEY_WAKE => self.take_inbox(),
                    KEY_LISTENER => self.accept(),
                    key => self.ready(key, event.events()),
                }
            }
            let turns = std::mem::take(&mut self.turns);
            for key in turns {
                self.serve(key, &mut chunk, &mut replies);
            }
            if Instant::now() >= next_tick {
                next_tick = Instant::now() + self.tick;
                self.service.tick(self.index, workers, &mut replies);
                self.apply_local(&mut replies);
            }
            replies.post_remote();
        }
    }

    fn queue_turn(&mut self, key: u64) {
        if let Some(conn) = self.connections.get_mut(&key) {
            if !conn.queued {
                conn.queued = true;
                self.turns.push(key);
            }
        }
    }

    fn ready(&mut self, key: u64, flags: EpollFlags) {
        if let Some(conn) = self.connections.get_mut(&key) {
            if flags.intersects(
                EpollFlags::EPOLLIN
                    | EpollFlags::EPOLLRDHUP
                    | EpollFlags::EPOLLHUP
                    | EpollFlags::EPOLLERR,
            ) {
                conn.readable = true;
            }
        }
        self.queue_turn(key);
    }

    fn take_inbox(&mut self) {
        let inbox = &self.shared.inboxes[self.index];
        let _ = inbox.wake.read();
        inbox.notified.store(false, Ordering::Release);
        let messages =
            std::mem::take(&mut *inbox.messages.lock().unwrap_or_else(|e| e.into_inner()));
        for message in messages {
            match message {
                Message::Frame(key, frame) => {
                    if let Some(conn) = self.connections.get_mut(&key) {
                        conn.out.extend_from_slice(&frame);
                        self.queue_turn(key);
                    }
                }
                Message::Connection(stream) => self.adopt(stream),
            }
        }
    }

    fn accept(&mut self) {
        let Some(listener) = self.listener.take() else {
            return;
        };
        let workers = self.shared.inboxes.len();
        loop {
            match listener.accept() {
                Ok((stream, peer)) => {
                    let count = &self.shared.connection_count;
                    if !peer.ip().is_loopback()
                        || count.load(Ordering::Relaxed) >= ECHO_CONNECTIONS_MAX
                        || stream.set_nonblocking(true).is_err()
                    {
                        continue;
                    }
                    let _ = stream.set_nodelay(true);
                    count.fetch_add(1, Ordering::Relaxed);
                    let to = self.shared.next_worker.fetch_add(1, Ordering::Relaxed) % workers;
                    if to == self.index {
                        self.adopt(stream);
                    } else {
                        self.shared.post(to, [Message::Connection(stream)]);
                    }
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                // WouldBlock: accepted everything; other errors (e.g. out of descriptors):
                // the listener stays registered and is tried again on the next event.
                Err(_) => break,
            }
        }
        self.listener = Some(listener);
    }

    fn adopt(&mut self, stream: TcpStream) {
        let key = self.shared.next_connection.fetch_add(1, Ordering::Relaxed);
        let flags = EpollFlags::EPOLLIN
            | EpollFlags::EPOLLOUT
            | EpollFlags::EPOLLRDHUP
            | EpollFlags::EPOLLET;
        if self
            .epoll
            .add(&stream, EpollEvent::new(flags, key))
            .is_err()
        {
            self.shared.connection_count.fetch_sub(1, Ordering::Relaxed);
            return;
        }
        self.connections.insert(
            key,
            Conn {
                stream,
                input: BytesMut::with_capacity(64 * 1024),
                out: BytesMut::new(),
                readable: true,
                queued: false,
            },
        );
        self.queue_turn(key);
    }

    /// One turn of a connection: write what waits, read and answer up to a turn's bytes,
    /// write the answers; then the answers this produced for the worker's other connections.
    fn serve(&mut self, key: u64, chunk: &mut [u8], replies: &mut Replies<'_>) {
        let Some(conn) = self.connections.get_mut(&key) else {
            return;
        };
        conn.queued = false;
        let mut open = flush(conn);
        let mut read_bytes = 0;
        while open && conn.readable && conn.out.len() < OUT_PENDING_MAX_BYTES {
            if read_bytes >= READ_TURN_MAX_BYTES {
                break;
            }
            match conn.stream.read(chunk) {
                Ok(0) => open = false,
                Ok(n) => {
                    read_bytes += n;
                    conn.input.extend_from_slice(&chunk[..n]);
                    let from = ReplyTo {
                        worker: self.index,
                        connection: key,
                    };
                    open = answer(self.service.as_ref(), from, conn, replies);
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => conn.readable = false,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(_) => open = false,
            }
        }
        if open {
            open = flush(conn);
        }
        let more = conn.readable && conn.out.len() < OUT_PENDING_MAX_BYTES;
        if !open {
            self.close(key);
        } else if more {
            // Bytes left after a full turn: serve it again next turn, after the others.
            self.queue_turn(key);
        }
        self.apply_local(replies);
    }

    fn apply_local(&mut self, replies: &mut Replies<'_>) {
        for (key, frame) in std::mem::take(&mut replies.local) {
            if let Some(conn) = self.connections.get_mut(&key) {
                conn.out.extend_from_slice(&frame);
                self.queue_turn(key);
            }
        }
    }

    fn close(&mut self, key: u64) {
        if let Some(conn) = self.connections.remove(&key) {
            let _ = self.epoll.delete(&conn.stream);
            self.shared.connection_count.fetch_sub(1, Ordering::Relaxed);
            self.service.closed(key);
        }
    }
}

/// Decodes and answers every whole request in the connection's input; `false` once the
/// stream is not a remoting stream (the connection is then closed).
fn answer(service: &dyn Service, from: ReplyTo, conn: &mut Conn, replies: &mut Replies) -> bool {
    loop {
        match decode_frame(&mut conn.input, FRAME_SIZE_MAX_BYTES) {
            Ok(Some(request)) => {
                if request.is_response() {
                    continue;
                }
                if let Some(response) = service.handle(from, request, replies) {
                    if encode_frame(&response, &mut conn.out).is_err() {
                        return false;
                    }
                }
            }
            Ok(None) => return true,
            Err(_) => return false,
        }
    }
}

/// Writes what waits until done or the socket is full; `false` if the connection failed.
fn flush(conn: &mut Conn) -> bool {
    while !conn.out.is_empty() {
        match conn.stream.write(&conn.out) {
            Ok(0) => return false,
            Ok(n) => conn.out.advance(n),
            Err(e) if e.kind() == ErrorKind::WouldBlock => return true,
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(_) => return false,
        }
    }
    conn.out.clear();
    true
}
