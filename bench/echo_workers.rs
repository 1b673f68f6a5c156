//! The echo server's threads: a fixed pool of worker threads, each with its own epoll set,
//! serving every connection as a broker does (no thread per connection).
//!
//! Worker 0 also owns the listener and hands each accepted connection to the next worker in
//! turn. A connection belongs to one worker for its life: only that worker reads it, and
//! answers to its own requests are gathered and written with one `write` per turn. Its write
//! side, an [`Outlet`], is shared: an answer computed on another worker (a send on worker A
//! waking a pull held for a connection of worker B) is encoded on A and written by A straight
//! to the socket, under the outlet's lock, with no hop through B. Whole frames only are
//! appended and written under that lock, so frames from several workers never interleave; the
//! bytes a full socket did not take wait in the outlet and the owning worker writes them when
//! the socket's edge-triggered writable event comes.
//!
//! Sockets are nonblocking and registered edge-triggered for reading and writing, so a worker
//! does not ask epoll again for a connection it knows to be ready: a connection is read until
//! the socket has no more bytes ([`READ_TURN_MAX_BYTES`] per turn, then the others get a turn),
//! and is not read while more than [`OUT_PENDING_MAX_BYTES`] wait to be written to it.

use std::collections::HashMap;
use std::io::{ErrorKind, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use bytes::{Buf, BytesMut};
use nix::sys::epoll::{Epoll, EpollCreateFlags, EpollEvent, EpollFlags, EpollTimeout};
use nix::sys::eventfd::{EfdFlags, EventFd};
use ringmq::remoting::command::RemotingCommand;
use ringmq::remoting::frame::{decode_frame, encode_frame, FRAME_SIZE_MAX_BYTES};

use crate::error::BenchError;

/// Connections served at once over all workers.
pub const ECHO_CONNECTIONS_MAX: usize = 1024;
/// Most worker threads (`--echo-threads`).
pub const ECHO_THREADS_MAX: usize = 64;

/// How the echo server serves its connections (`--echo-model`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EchoModel {
    /// Two threads per connection ([`crate::echo_threads`]).
    PerConnection,
    /// A fixed pool of `--echo-threads` epoll workers ([`Workers`]).
    Pool,
}

/// The default `--echo-threads`: one worker per core.
pub fn echo_threads_default() -> usize {
    std::thread::available_parallelism()
        .map_or(1, std::num::NonZeroUsize::get)
        .min(ECHO_THREADS_MAX)
}
/// Bytes waiting to be written to one connection above which the worker stops reading it
/// (answers to its own requests; answers written by other workers are bounded by the held
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

/// Where an answer goes: a connection (its key, and its write side, which any worker may
/// write).
#[derive(Clone)]
pub struct ReplyTo {
    pub connection: u64,
    pub(crate) outlet: Arc<Outlet>,
}

/// A connection's write side. Every write happens under `out`'s lock and writes whole frames
/// from the front of what waits, so `out` is non-empty only after a write that would block,
/// and the socket's next writable edge (delivered to the owning worker) drains it.
pub struct Outlet {
    pub(crate) stream: TcpStream,
    out: Mutex<Outgoing>,
    /// Set for a blocking socket served by its own writer thread
    /// ([`crate::echo_threads`]): answers are only appended, and this wakes the writer (and a
    /// reader waiting for room).
    writer: Option<Condvar>,
}

#[derive(Default)]
struct Outgoing {
    /// Bytes of whole frames, of which the socket took none or the first few.
    waiting: BytesMut,
    /// A write failed or the connection was closed: later answers are dropped.
    failed: bool,
    /// The writer thread waits for answers (only then is it woken: a wake-up is a syscall).
    writer_idle: bool,
    /// The reader thread waits for room.
    reader_blocked: bool,
}

impl Outlet {
    fn new(stream: TcpStream) -> Self {
        Outlet {
            stream,
            out: Mutex::new(Outgoing::default()),
            writer: None,
        }
    }

    /// The write side of a blocking socket whose writer thread runs [`Outlet::write_loop`].
    pub(crate) fn with_writer_thread(stream: TcpStream) -> Self {
        Outlet {
            stream,
            out: Mutex::new(Outgoing::default()),
            writer: Some(Condvar::new()),
        }
    }

    /// The writer thread of a blocking socket: writes whatever waits, in order, until the
    /// connection fails or is closed.
    pub(crate) fn write_loop(&self) {
        let Some(wake) = &self.writer else {
            return;
        };
        let mut batch = BytesMut::new();
        loop {
            {
                let mut out = self.lock();
                while out.waiting.is_empty() && !out.failed {
                    out.writer_idle = true;
                    out = wake.wait(out).unwrap_or_else(|e| e.into_inner());
                }
                out.writer_idle = false;
                if out.failed {
                    return;
                }
                std::mem::swap(&mut batch, &mut out.waiting);
                if out.reader_blocked {
                    // The reader waiting for room may go on.
                    wake.notify_all();
                }
            }
            if (&self.stream).write_all(&batch).is_err() {
                self.close();
                return;
            }
            batch.clear();
        }
    }

    /// Blocks while more than [`OUT_PENDING_MAX_BYTES`] wait (blocking sockets only);
    /// `false` if the connection has failed.
    pub(crate) fn wait_for_room(&self) -> bool {
        let mut out = self.lock();
        if let Some(wake) = &self.writer {
            while out.waiting.len() > OUT_PENDING_MAX_BYTES && !out.failed {
                out.reader_blocked = true;
                out = wake.wait(out).unwrap_or_else(|e| e.into_inner());
            }
            out.reader_blocked = false;
        }
        !out.failed
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Outgoing> {
        self.out.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Writes `frames` (whole frames) after what waits, until done or the socket is full;
    /// what the socket did not take waits. `false` if the connection has failed.
    pub(crate) fn write_frames(&self, frames: &mut BytesMut) -> bool {
        let mut out = self.lock();
        if out.failed {
            frames.clear();
            return false;
        }
        if let Some(wake) = &self.writer {
            if out.waiting.is_empty() {
                std::mem::swap(&mut out.waiting, frames);
            } else {
                out.waiting.extend_from_slice(frames);
                frames.clear();
            }
            if out.writer_idle {
                wake.notify_all();
            }
            return true;
        }
        if out.waiting.is_empty() {
            // Nothing before them: write from the caller's buffer, keep only the rest.
            let ok = write_some(&self.stream, frames);
            if !ok {
                out.failed = true;
                frames.clear();
            } else if !frames.is_empty() {
                out.waiting = frames.split();
            }
            return ok;
        }
        out.waiting.extend_from_slice(frames);
        frames.clear();
        let ok = write_some(&self.stream, &mut out.waiting);
        if !ok {
            out.failed = true;
            out.waiting.clear();
        }
        ok
    }

    /// Writes what waits; `false` if the connection has failed.
    fn flush(&self) -> bool {
        let mut out = self.lock();
        if out.failed {
            return false;
        }
        let ok = write_some(&self.stream, &mut out.waiting);
        if !ok {
            out.failed = true;
            out.waiting.clear();
        }
        ok
    }

    /// Bytes waiting to be written.
    fn waiting_bytes(&self) -> usize {
        self.lock().waiting.len()
    }

    /// The owner closed the connection: answers still held for it are dropped, and the
    /// socket is shut down now (its descriptor closes with the last held answer's handle).
    pub(crate) fn close(&self) {
        let mut out = self.lock();
        out.failed = true;
        out.waiting = BytesMut::new();
        let _ = self.stream.shutdown(std::net::Shutdown::Both);
        if let Some(wake) = &self.writer {
            wake.notify_all();
        }
    }
}

/// What the workers serve.
pub trait Service: Send + Sync + 'static {
    /// Answers one request from `from`; `None` when there is no answer now (a oneway, or a
    /// held pull answered later through [`Replies::send`]).
    fn handle(
        &self,
        from: &ReplyTo,
        request: RemotingCommand,
        replies: &mut Replies,
    ) -> Option<RemotingCommand>;
    /// Called by every worker about every `tick` (held pulls expire here): worker `worker` of
    /// `workers` does its share.
    fn tick(&self, worker: usize, workers: usize, replies: &mut Replies);
    /// The connection is gone.
    fn closed(&self, connection: u64);
}

enum Message {
    Connection(TcpStream),
}

struct Inbox {
    /// Bounded by the connections being handed over ([`ECHO_CONNECTIONS_MAX`]).
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

/// Answers computed on a worker for connections anywhere (held pulls another request woke or
/// the tick expired), encoded at once and written by this worker after the request that
/// produced them (no lock of the service is held then).
pub struct Replies {
    frames: Vec<(Arc<Outlet>, BytesMut)>,
}

impl Replies {
    pub(crate) fn new() -> Self {
        Replies { frames: Vec::new() }
    }

    /// Queues `response` for `to` (dropped if its connection is gone by then).
    pub fn send(&mut self, to: &ReplyTo, response: &RemotingCommand) {
        let mut frame = BytesMut::with_capacity(256 + response.body.len());
        if encode_frame(response, &mut frame).is_err() {
            return;
        }
        self.frames.push((Arc::clone(&to.outlet), frame));
    }

    /// Writes every queued answer to its connection's socket.
    pub(crate) fn deliver(&mut self) {
        for (outlet, mut frame) in self.frames.drain(..) {
            // A failed connection's owner sees the failure on its next event and closes it.
            let _ = outlet.write_frames(&mut frame);
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
    outlet: Arc<Outlet>,
    input: BytesMut,
    /// Answers to this connection's own requests, written at the end of its turn.
    out: BytesMut,
    /// The socket may hold bytes not read yet (edge-triggered: set by every read event and
    /// cleared when a read would block).
    readable: bool,
    /// In the worker's list of connections to serve this turn.
    queued: bool,
}

impl Conn {
    /// Writes this turn's answers after what waits; `false` if the connection failed.
    fn flush(&mut self) -> bool {
        if self.out.is_empty() {
            self.outlet.flush()
        } else {
            self.outlet.write_frames(&mut self.out)
        }
    }
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
        let mut replies = Replies::new();
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
                replies.deliver();
            }
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
                outlet: Arc::new(Outlet::new(stream)),
                input: BytesMut::with_capacity(64 * 1024),
                out: BytesMut::new(),
                readable: true,
                queued: false,
            },
        );
        self.queue_turn(key);
    }

    /// One turn of a connection: write what waits, read and answer up to a turn's bytes,
    /// write the answers; the answers this produced for other connections are written after
    /// each read.
    fn serve(&mut self, key: u64, chunk: &mut [u8], replies: &mut Replies) {
        let Some(conn) = self.connections.get_mut(&key) else {
            return;
        };
        conn.queued = false;
        let mut open = conn.flush();
        let mut read_bytes = 0;
        let from = ReplyTo {
            connection: key,
            outlet: Arc::clone(&conn.outlet),
        };
        while open
            && conn.readable
            && conn.out.len() + conn.outlet.waiting_bytes() < OUT_PENDING_MAX_BYTES
        {
            if read_bytes >= READ_TURN_MAX_BYTES {
                break;
            }
            match (&conn.outlet.stream).read(chunk) {
                Ok(0) => open = false,
                Ok(n) => {
                    read_bytes += n;
                    conn.input.extend_from_slice(&chunk[..n]);
                    open = answer(self.service.as_ref(), &from, conn, replies);
                    replies.deliver();
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => conn.readable = false,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(_) => open = false,
            }
        }
        if open {
            open = conn.flush();
        }
        let more = conn.readable && conn.outlet.waiting_bytes() < OUT_PENDING_MAX_BYTES;
        if !open {
            self.close(key);
        } else if more {
            // Bytes left after a full turn: serve it again next turn, after the others.
            self.queue_turn(key);
        }
    }

    fn close(&mut self, key: u64) {
        if let Some(conn) = self.connections.remove(&key) {
            let _ = self.epoll.delete(&conn.outlet.stream);
            conn.outlet.close();
            self.shared.connection_count.fetch_sub(1, Ordering::Relaxed);
            self.service.closed(key);
        }
    }
}

/// Decodes and answers every whole request in the connection's input; `false` once the
/// stream is not a remoting stream (the connection is then closed).
fn answer(service: &dyn Service, from: &ReplyTo, conn: &mut Conn, replies: &mut Replies) -> bool {
    answer_each(
        service,
        from,
        &mut conn.input,
        replies,
        |response, replies| {
            // The pulls a request woke are answered (written to their sockets) before its own
            // answer, as the per-connection model does.
            replies.deliver();
            encode_frame(response, &mut conn.out).is_ok()
        },
    )
}

/// Decodes every whole request in `input` and hands each answer to `emit` (`false` from it
/// stops: the connection is closed); `false` once the stream is not a remoting stream.
pub(crate) fn answer_each(
    service: &dyn Service,
    from: &ReplyTo,
    input: &mut BytesMut,
    replies: &mut Replies,
    mut emit: impl FnMut(&RemotingCommand, &mut Replies) -> bool,
) -> bool {
    loop {
        match decode_frame(input, FRAME_SIZE_MAX_BYTES) {
            Ok(Some(request)) => {
                if request.is_response() {
                    continue;
                }
                if let Some(response) = service.handle(from, request, replies) {
                    if !emit(&response, replies) {
                        return false;
                    }
                }
            }
            Ok(None) => return true,
            Err(_) => return false,
        }
    }
}

/// Writes from the front of `buf` until it is empty or the socket is full; `false` if the
/// connection failed.
fn write_some(stream: &TcpStream, buf: &mut BytesMut) -> bool {
    let mut stream = stream;
    while !buf.is_empty() {
        match stream.write(buf) {
            Ok(0) => return false,
            Ok(n) => buf.advance(n),
            Err(e) if e.kind() == ErrorKind::WouldBlock => return true,
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(_) => return false,
        }
    }
    buf.clear();
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::client::Connection;
    use ringmq::remoting::codes::response_code;
    use ringmq::remoting::command::SerializeType;

    /// Request codes of the test service.
    const PARK: i32 = 1;
    const WAKE: i32 = 2;
    const SLEEP: i32 = 3;
    const SLEEP_FOR: Duration = Duration::from_millis(1500);

    /// Parks PARK requests; a WAKE answers the parked ones (on whatever connection and
    /// worker they came from); a SLEEP blocks its worker for [`SLEEP_FOR`].
    #[derive(Default)]
    struct Parking {
        parked: Mutex<Vec<(ReplyTo, RemotingCommand)>>,
    }

    impl Service for Parking {
        fn handle(
            &self,
            from: &ReplyTo,
            request: RemotingCommand,
            replies: &mut Replies,
        ) -> Option<RemotingCommand> {
            match request.code {
                PARK => {
                    self.parked.lock().unwrap().push((from.clone(), request));
                    return None;
                }
                WAKE => {
                    for (to, parked) in self.parked.lock().unwrap().drain(..) {
                        let mut answer =
                            RemotingCommand::response_to(&parked, response_code::SUCCESS, None);
                        if let Some(tag) = parked.ext_fields.get("tag") {
                            answer.set_ext("tag", tag.clone());
                        }
                        replies.send(&to, &answer);
                    }
                }
                SLEEP => std::thread::sleep(SLEEP_FOR),
                _ => {}
            }
            Some(RemotingCommand::response_to(
                &request,
                response_code::SUCCESS,
                None,
            ))
        }

        fn tick(&self, _worker: usize, _workers: usize, _replies: &mut Replies) {}

        fn closed(&self, _connection: u64) {}
    }

    /// The answer to a parked request, computed on another worker, reaches the parked
    /// connection while its own worker is busy: the waking worker writes it to the socket
    /// (through the owner's inbox it would wait until the owner is free).
    #[test]
    fn a_woken_answer_is_written_by_the_waking_worker() {
        let listener = TcpListener::bind("127.0.0.1:0").expect("binds");
        let addr = listener.local_addr().expect("addr").to_string();
        let workers = Workers::start(
            listener,
            2,
            Duration::from_millis(50),
            Arc::new(Parking::default()),
        )
        .expect("starts");
        // Connections go to the workers in turn: parked and sleeper on worker 0, waker on 1.
        let parked = Connection::connect(&addr, SerializeType::Json).expect("connects");
        let waker = Connection::connect(&addr, SerializeType::Json).expect("connects");
        let sleeper = Connection::connect(&addr, SerializeType::Json).expect("connects");
        for conn in [&parked, &waker, &sleeper] {
            let answer = conn
                .call(RemotingCommand::request(99), 3000)
                .expect("answer");
            assert_eq!(answer.code, response_code::SUCCESS);
        }
        let (done, woken) = std::sync::mpsc::channel();
        // The client matches the answer to this request by its opaque; the tag shows it is
        // the answer to this request.
        let mut park = RemotingCommand::request(PARK);
        park.set_ext("tag", "parked-1");
        parked.send_async(
            park,
            10_000,
            Box::new(move |r| {
                let _ = done.send(r.map(|r| (r.code, r.ext_fields.get("tag").cloned())));
            }),
        );
        std::thread::sleep(Duration::from_millis(100));
        let (slept_tx, slept) = std::sync::mpsc::channel();
        let asleep = Arc::clone(&sleeper);
        let sleeping = std::thread::spawn(move || {
            let r = asleep.call(RemotingCommand::request(SLEEP), 10_000);
            let _ = slept_tx.send(r.map(|r| r.code));
        });
        std::thread::sleep(Duration::from_millis(200));
        let started = Instant::now();
        let answer = waker
            .call(RemotingCommand::request(WAKE), 3000)
            .expect("answer");
        assert_eq!(answer.code, response_code::SUCCESS);
        let (code, tag) = woken
            .recv_timeout(SLEEP_FOR)
            .expect("answered while worker 0 sleeps")
            .expect("answer");
        assert!(started.elapsed() < SLEEP_FOR / 2, "{:?}", started.elapsed());
        assert_eq!(code, response_code::SUCCESS);
        assert_eq!(tag.as_deref(), Some("parked-1"));
        assert!(
            slept.try_recv().is_err(),
            "worker 0 was still asleep when the answer came"
        );
        assert_eq!(
            slept.recv_timeout(Duration::from_secs(5)).expect("slept"),
            Ok(response_code::SUCCESS)
        );
        sleeping.join().expect("joins");
        for conn in [parked, waker, sleeper] {
            conn.close();
        }
        workers.shutdown();
    }
}
