//! One connection: the reader loop, per-request handler tasks, and closing.
//!
//! The reader frames bytes and spawns one task per request without waiting for it, so a slow
//! request never delays later ones on the same connection (responses are matched by opaque, in
//! any order). A request the handler can serve without waiting
//! ([`RequestHandler::handle_now`]) is served by the reader itself, with no task. At most `requests_in_flight_max_per_connection` handler tasks run at once; when
//! that many are running the reader stops reading, which pushes back on the peer through TCP
//! instead of growing a queue. A framing error closes this connection only.

use super::error::panic_message;
use super::handler::{ConnectionContext, RequestHandler};
use super::worker::Worker;
use super::writer::{self, ConnectionSender, Outbound, QueuedBytes, WriterExit, WriterState};
use crate::remoting::codes::response_code;
use crate::remoting::command::RemotingCommand;
use crate::remoting::error::CodecError;
use crate::remoting::frame::decode_frame;
use bytes::BytesMut;
use std::any::Any;
use std::cell::Cell;
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::panic::AssertUnwindSafe;
use std::rc::Rc;
use std::sync::Arc;
use std::task::Poll;
use std::time::Duration;
use tokio::sync::{mpsc, Notify, OwnedSemaphorePermit, Semaphore};
use tokio::time::Instant;
use tokio_uring::buf::BoundedBuf;
use tokio_uring::net::TcpStream;
use tracing::Instrument;

/// Below this much free space the read buffer is grown before the next read, so a read is never
/// a tiny one.
const READ_SPARE_MIN_BYTES: usize = 4 * 1024;

/// Identity of an accepted connection, before its tasks exist.
pub(crate) struct Accepted {
    pub id: u64,
    pub remote_addr: SocketAddr,
    pub local_addr: SocketAddr,
    pub listener_index: usize,
}

/// Why the reader stopped.
#[derive(Debug)]
enum ReadExit {
    PeerClosed {
        unread_bytes: usize,
    },
    ReadFailed(io::Error),
    BadFrame(CodecError),
    /// Nothing read and nothing written for `channel_max_idle_time_ms`.
    Idle,
    /// A frame begun `frame_read_timeout_ms` ago is still not complete.
    FrameTimeout {
        unread_bytes: usize,
    },
    WriterStopped,
    Shutdown,
}

/// Serves one accepted connection until it closes. Runs on the accepting worker's thread.
pub(crate) async fn serve<H: RequestHandler>(
    stream: TcpStream,
    accepted: Accepted,
    worker: Rc<Worker<H>>,
) {
    let config = &worker.shared.config;
    let stream = Rc::new(stream);
    let (queue_tx, queue_rx) = mpsc::channel(config.write_queue_max_per_connection);
    let queued = Arc::new(QueuedBytes::new(
        config.write_queue_max_bytes_per_connection,
    ));
    let ctx = ConnectionContext {
        id: accepted.id,
        remote_addr: accepted.remote_addr,
        local_addr: accepted.local_addr,
        listener_index: accepted.listener_index,
        worker_index: worker.index,
        sender: ConnectionSender::new(queue_tx, queued.clone()),
    };
    let last_write = Rc::new(Cell::new(Instant::now()));
    let writer_state = WriterState {
        coalesce_max_bytes: config.write_coalesce_max_bytes,
        queued,
        last_write: last_write.clone(),
    };
    let close_writer = Rc::new(Notify::new());
    let writer_task = tokio_uring::spawn(
        writer::run(stream.clone(), queue_rx, close_writer.clone(), writer_state).in_current_span(),
    );
    let in_flight_max = config.requests_in_flight_max_per_connection;
    let in_flight = Arc::new(Semaphore::new(in_flight_max));
    tracing::debug!("connection accepted");

    let timeouts = ReadTimeouts::new(config, last_write);
    let exit = read_loop(&stream, &ctx, &in_flight, &worker, timeouts).await;
    log_read_exit(&exit);
    // Nothing more is read: calls waiting for this peer's responses end now.
    ctx.sender.close_calls();
    if matches!(exit, ReadExit::Shutdown) {
        // Let running requests answer before the writer closes, within the grace period.
        let grace = Duration::from_millis(config.shutdown_grace_ms);
        tokio::select! {
            () = wait_all_done(&in_flight, in_flight_max) => {}
            () = ctx.sender.closed() => {}
            () = tokio::time::sleep(grace) => {
                tracing::warn!("requests still running after the shutdown grace period")
            }
        }
    }
    if matches!(exit, ReadExit::Idle | ReadExit::FrameTimeout { .. }) {
        // The writer may be stuck in a write the peer never reads (that is what left the
        // connection idle); shutting the socket down first fails that write, so the writer
        // stops and the queued frames are freed, instead of the close waiting forever.
        if let Err(e) = stream.shutdown(std::net::Shutdown::Both) {
            tracing::debug!(error = %e, "socket shutdown failed (peer already gone)");
        }
    }
    close_writer.notify_one();
    match writer_task.await {
        Ok(WriterExit::Closed) => {}
        Ok(WriterExit::WriteFailed(e)) => tracing::debug!(error = %e, "write failed"),
        Err(e) => tracing::error!(error = %e, "writer task failed"),
    }
    // Shutting the socket down (not only dropping it) wakes a read still in flight in the ring,
    // which holds the file open, and sends the FIN now.
    if let Err(e) = stream.shutdown(std::net::Shutdown::Both) {
        tracing::debug!(error = %e, "socket shutdown failed (peer already gone)");
    }
    let handler = &worker.shared.handler;
    let closed = std::panic::catch_unwind(AssertUnwindSafe(|| handler.on_connection_closed(&ctx)));
    if let Err(panic) = closed {
        let panic = panic_message(&*panic);
        tracing::error!(panic, "on_connection_closed panicked");
    }
    // Handler tasks may still run (their responses now go nowhere). The connection keeps its
    // slot in `connections_max` until they end, so closed connections cannot pile up unbounded
    // background work. At shutdown the worker stops waiting after the grace period.
    wait_all_done(&in_flight, in_flight_max).await;
    tracing::debug!("connection closed");
}

/// Completes when no request of the connection is running (every permit is back).
async fn wait_all_done(in_flight: &Semaphore, in_flight_max: usize) {
    if in_flight.available_permits() == in_flight_max {
        return;
    }
    // in_flight_max fits in u32: ServerConfig::validate checks it.
    let all = in_flight.acquire_many(u32::try_from(in_flight_max).unwrap_or(u32::MAX));
    // Err only if the semaphore is closed, which it never is; either way nothing runs then.
    drop(all.await);
}

fn log_read_exit(exit: &ReadExit) {
    match exit {
        ReadExit::PeerClosed { unread_bytes: 0 } => tracing::debug!("peer closed the connection"),
        ReadExit::PeerClosed { unread_bytes } => {
            let unread_bytes = *unread_bytes;
            tracing::warn!(
                unread_bytes,
                "peer closed the connection in the middle of a frame"
            )
        }
        ReadExit::ReadFailed(e) => tracing::debug!(error = %e, "read failed; closing"),
        ReadExit::BadFrame(e) => tracing::warn!(error = %e, "malformed frame; closing"),
        ReadExit::Idle => tracing::info!("connection idle (nothing read or written); closing"),
        ReadExit::FrameTimeout { unread_bytes } => {
            let unread_bytes = *unread_bytes;
            tracing::warn!(
                unread_bytes,
                "a frame did not complete within the frame read timeout; closing"
            )
        }
        ReadExit::WriterStopped => tracing::debug!("writer stopped; closing"),
        ReadExit::Shutdown => tracing::debug!("shutting down; finishing running requests"),
    }
}

/// The reader's clocks: when it last read, when the writer last wrote, when the unfinished
/// frame in the buffer began. Java closes a channel that is all-idle (`IdleStateHandler` in
/// `NettyRemotingServer`); it has no frame timeout, which keeps a peer from pinning a read buffer
/// of up to one frame forever by stopping half way.
struct ReadTimeouts {
    idle: Option<Duration>,
    frame: Option<Duration>,
    last_read: Instant,
    last_write: Rc<Cell<Instant>>,
    frame_started: Option<Instant>,
}

impl ReadTimeouts {
    fn new(config: &super::config::ServerConfig, last_write: Rc<Cell<Instant>>) -> Self {
        let millis = |ms: u64| (ms != 0).then(|| Duration::from_millis(ms));
        ReadTimeouts {
            idle: millis(config.channel_max_idle_time_ms),
            frame: millis(config.frame_read_timeout_ms),
            last_read: Instant::now(),
            last_write,
            frame_started: None,
        }
    }

    fn idle_deadline(&self) -> Option<Instant> {
        let last_activity = self.last_read.max(self.last_write.get());
        self.idle.map(|idle| last_activity + idle)
    }

    fn frame_deadline(&self) -> Option<Instant> {
        Some(self.frame_started? + self.frame?)
    }

    /// The next time a timeout may fire, if any is on.
    fn deadline(&self) -> Option<Instant> {
        match (self.idle_deadline(), self.frame_deadline()) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Why the connection must close now, if a timeout has passed (the writer may have written
    /// since the deadline was taken, which moves the idle one).
    fn expired(&self, unread_bytes: usize) -> Option<ReadExit> {
        let now = Instant::now();
        if self.frame_deadline().is_some_and(|d| now >= d) {
            return Some(ReadExit::FrameTimeout { unread_bytes });
        }
        self.idle_deadline()
            .is_some_and(|d| now >= d)
            .then_some(ReadExit::Idle)
    }

    /// After decoding: the bytes left in the buffer begin a frame. When whole frames were just
    /// decoded, the rest came with the last read; otherwise it is the same frame as before.
    fn after_decode(&mut self, buffered: bool, decoded_any: bool) {
        self.frame_started = match (buffered, decoded_any) {
            (false, _) => None,
            (true, true) => Some(self.last_read),
            (true, false) => self.frame_started.or(Some(self.last_read)),
        };
    }
}

/// The reader's one timer. Arming a tokio timer takes the time driver's lock, so it is not
/// re-armed per read: it stays armed while the deadline it was set for is no earlier than the
/// one wanted now (reads only push deadlines later), and is moved only to an earlier deadline
/// (a frame began) or after it fired. A few arms per timeout period, whatever the read rate.
struct ReadTimer {
    sleep: std::pin::Pin<Box<tokio::time::Sleep>>,
    armed: Option<Instant>,
}

impl ReadTimer {
    fn new() -> Self {
        ReadTimer {
            // Never polled until armed.
            sleep: Box::pin(tokio::time::sleep(Duration::ZERO)),
            armed: None,
        }
    }

    fn arm(&mut self, deadline: Option<Instant>) {
        let Some(deadline) = deadline else { return };
        if self.armed.is_none_or(|armed| deadline < armed) {
            self.sleep.as_mut().reset(deadline);
            self.armed = Some(deadline);
        }
    }

    /// Completes when the armed deadline passes; never when unarmed.
    async fn fired(&mut self) {
        if self.armed.is_none() {
            return std::future::pending().await;
        }
        self.sleep.as_mut().await;
        self.armed = None;
    }
}

/// Reads and dispatches frames until the peer closes, a frame is malformed or times out, the
/// connection is idle, the writer stops, or the server shuts down.
async fn read_loop<H: RequestHandler>(
    stream: &TcpStream,
    ctx: &ConnectionContext,
    in_flight: &Arc<Semaphore>,
    worker: &Rc<Worker<H>>,
    mut timeouts: ReadTimeouts,
) -> ReadExit {
    let config = &worker.shared.config;
    let shutdown = &worker.shared.shutdown;
    let mut buf = BytesMut::with_capacity(config.read_buffer_initial_bytes);
    let mut timer = ReadTimer::new();
    // Made once per connection and polled again by every read's select: made per read, each
    // would subscribe to the watch and register with its waiters, then unregister (1.5 to
    // 2 % of the broker's samples in W3, one read per message).
    let mut stop = std::pin::pin!(shutdown.triggered());
    let mut writer_stopped = std::pin::pin!(ctx.sender.closed());
    loop {
        let decoded_any = match dispatch_decoded(&mut buf, ctx, in_flight, worker).await {
            Ok(decoded_any) => decoded_any,
            Err(exit) => return exit,
        };
        timeouts.after_decode(!buf.is_empty(), decoded_any);
        if buf.is_empty() && buf.capacity() > 2 * config.read_buffer_initial_bytes {
            // A large frame grew the buffer; give the memory back between frames.
            buf = BytesMut::with_capacity(config.read_buffer_initial_bytes);
        } else if buf.capacity() - buf.len() < READ_SPARE_MIN_BYTES {
            buf.reserve(config.read_buffer_initial_bytes.max(READ_SPARE_MIN_BYTES));
        }
        let unread_bytes = buf.len();
        // tokio-uring reads to the start of the buffer it is given, so hand it the spare part:
        // the slice starts after the unread bytes and ends at the capacity. The read stays in
        // flight across timer wake-ups that find no timeout passed yet (dropping it could lose
        // bytes the kernel already read).
        let read = stream.read(buf.slice(unread_bytes..));
        let mut read = std::pin::pin!(read);
        let (result, returned) = loop {
            timer.arm(timeouts.deadline());
            tokio::select! {
                biased;
                () = &mut stop => return ReadExit::Shutdown,
                () = &mut writer_stopped => return ReadExit::WriterStopped,
                read = &mut read => break read,
                () = timer.fired() => {
                    if let Some(exit) = timeouts.expired(unread_bytes) {
                        return exit;
                    }
                }
            }
        };
        buf = returned.into_inner();
        match result {
            Ok(0) => return ReadExit::PeerClosed { unread_bytes },
            Ok(_) => timeouts.last_read = Instant::now(),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return ReadExit::ReadFailed(e),
        }
    }
}

/// Decodes and dispatches every complete frame in `buf`; `Ok(true)` if there was at least one.
/// Waits for an in-flight permit when none is left (reading stops meanwhile).
async fn dispatch_decoded<H: RequestHandler>(
    buf: &mut BytesMut,
    ctx: &ConnectionContext,
    in_flight: &Arc<Semaphore>,
    worker: &Rc<Worker<H>>,
) -> Result<bool, ReadExit> {
    let config = &worker.shared.config;
    let shutdown = &worker.shared.shutdown;
    let mut decoded_any = false;
    loop {
        let cmd = match decode_frame(buf, config.frame_size_max_bytes) {
            Ok(Some(cmd)) => cmd,
            Ok(None) => return Ok(decoded_any),
            Err(e) => return Err(ReadExit::BadFrame(e)),
        };
        decoded_any = true;
        let permit = match in_flight.clone().try_acquire_owned() {
            Ok(permit) => permit,
            // Full: wait for a running request to finish; reading stops meanwhile.
            Err(_) => tokio::select! {
                permit = in_flight.clone().acquire_owned() => match permit {
                    Ok(permit) => permit,
                    // Only a closed semaphore errs, and it is never closed.
                    Err(_) => return Err(ReadExit::Shutdown),
                },
                () = shutdown.triggered() => return Err(ReadExit::Shutdown),
                () = ctx.sender.closed() => return Err(ReadExit::WriterStopped),
            },
        };
        dispatch(cmd, ctx, permit, worker);
    }
}

/// Runs one request in its own task on this thread; the permit is released when it is done.
fn dispatch<H: RequestHandler>(
    cmd: RemotingCommand,
    ctx: &ConnectionContext,
    permit: OwnedSemaphorePermit,
    worker: &Rc<Worker<H>>,
) {
    if cmd.is_response() {
        // The answer to a call of `ConnectionSender::call`; the permit goes back at once.
        let (code, opaque) = (cmd.code, cmd.opaque);
        if !ctx.sender.complete_call(cmd) {
            tracing::debug!(code, opaque, "dropping a response no call waits for");
        }
        return;
    }
    let request = RequestMeta::of(&cmd);
    let handler = &worker.shared.handler;
    let cmd = match std::panic::catch_unwind(AssertUnwindSafe(|| handler.handle_now(ctx, cmd))) {
        Ok(Err(cmd)) => cmd,
        Ok(Ok(response)) => return queue_now(request, Ok(response), &ctx.sender, permit),
        Err(panic) => return queue_now(request, Err(panic), &ctx.sender, permit),
    };
    let handler = handler.clone();
    let ctx = ctx.clone();
    let task = async move {
        let sender = ctx.sender.clone();
        let outcome = catch_unwind(handler.handle(ctx, cmd)).await;
        if let Some(response) = request.answer(outcome) {
            send_answer(&sender, response, request).await;
        }
        drop(permit);
    };
    // The task's JoinHandle is not awaited: it reports through the writer queue and the permit.
    drop(tokio_uring::spawn(task.in_current_span()));
}

/// What the runtime keeps of a request while its handler has it.
#[derive(Clone, Copy)]
struct RequestMeta {
    code: i32,
    opaque: i32,
    oneway: bool,
    serialize_type: crate::remoting::command::SerializeType,
}

impl RequestMeta {
    fn of(cmd: &RemotingCommand) -> Self {
        RequestMeta {
            code: cmd.code,
            opaque: cmd.opaque,
            oneway: cmd.is_oneway(),
            serialize_type: cmd.serialize_type,
        }
    }

    fn closed_before_answer(self) {
        tracing::debug!(
            code = self.code,
            opaque = self.opaque,
            "connection closed before the response was sent"
        );
    }

    /// The frame to send for the handler's `outcome`: its response with the request's opaque
    /// and the response flag, `SYSTEM_ERROR` for a panic, nothing for a oneway request.
    fn answer(
        self,
        outcome: Result<Option<RemotingCommand>, Box<dyn Any + Send>>,
    ) -> Option<RemotingCommand> {
        let RequestMeta { code, opaque, .. } = self;
        let mut response = match outcome {
            Ok(response) => response,
            Err(panic) => {
                let message = panic_message(&*panic);
                tracing::error!(code, opaque, panic = message, "request handler panicked");
                Some(RemotingCommand::response(
                    response_code::SYSTEM_ERROR,
                    opaque,
                    self.serialize_type,
                    Some(format!("request handler panicked: {message}")),
                ))
            }
        }?;
        if self.oneway {
            tracing::debug!(
                code,
                opaque,
                "dropping the handler's response to a oneway request"
            );
            return None;
        }
        response.opaque = opaque;
        response.flag |= crate::remoting::command::FLAG_RESPONSE;
        Some(response)
    }
}

/// Queues the answer of a request served on the reading task. The permit is held until the
/// response is queued, so in-flight requests plus queued responses stay bounded: a full write
/// queue hands the answer to a task that waits for room.
fn queue_now(
    request: RequestMeta,
    outcome: Result<Option<RemotingCommand>, Box<dyn Any + Send>>,
    sender: &ConnectionSender,
    permit: OwnedSemaphorePermit,
) {
    let Some(response) = request.answer(outcome) else {
        return;
    };
    match sender.send(Outbound::Command(response)) {
        Ok(()) => {}
        Err(writer::SendError::Closed(_)) => request.closed_before_answer(),
        Err(writer::SendError::Full(outbound)) => {
            let sender = sender.clone();
            let task = async move {
                if let Outbound::Command(response) = *outbound {
                    send_answer(&sender, response, request).await;
                }
                drop(permit);
            };
            drop(tokio_uring::spawn(task.in_current_span()));
        }
    }
}

async fn send_answer(sender: &ConnectionSender, response: RemotingCommand, request: RequestMeta) {
    if sender.send_wait(Outbound::Command(response)).await.is_err() {
        request.closed_before_answer();
    }
}

/// Polls `fut`, turning a panic inside it into `Err` so one bad request cannot take down the
/// thread's other connections. The future is dropped after a panic, never polled again.
async fn catch_unwind<F: Future>(fut: F) -> Result<F::Output, Box<dyn Any + Send>> {
    let mut fut = std::pin::pin!(fut);
    std::future::poll_fn(|cx| {
        match std::panic::catch_unwind(AssertUnwindSafe(|| fut.as_mut().poll(cx))) {
            Ok(Poll::Ready(output)) => Poll::Ready(Ok(output)),
            Ok(Poll::Pending) => Poll::Pending,
            Err(panic) => Poll::Ready(Err(panic)),
        }
    })
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn catch_unwind_returns_output_or_panic() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let ok = rt.block_on(catch_unwind(async { 7 }));
        assert_eq!(ok.unwrap(), 7);
        let err = rt.block_on(catch_unwind(async {
            tokio::task::yield_now().await;
            if true {
                panic!("boom {}", 1);
            }
        }));
        assert_eq!(panic_message(&*err.unwrap_err()), "boom 1");
    }

    #[test]
    fn panic_message_handles_static_and_other_payloads() {
        let payload: Box<dyn Any + Send> = Box::new("static");
        assert_eq!(panic_message(&*payload), "static");
        let payload: Box<dyn Any + Send> = Box::new(3_u8);
        assert_eq!(panic_message(&*payload), "non-string panic payload");
    }
}
