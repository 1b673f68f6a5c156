//! The writer side of a connection: the bounded outbound queue, the cross-thread
//! [`ConnectionSender`], and the one writer task that owns all writes to the socket.
//!
//! A single writer keeps frames whole and in queue order without locks. It takes whatever is
//! queued (up to `write_coalesce_max_bytes`) and sends it with one `write_all`, so a burst of
//! small responses costs one syscall; a large pre-encoded frame (a pull response) is written from
//! its own buffer without copying. A frame whose body lies in files ([`Outbound::File`], a
//! zero-copy pull response) is written as its head followed by the file ranges, spliced from the
//! files to the socket ([`super::zerocopy`]). A [`DeferredFrame`] is produced by the writer
//! itself when its turn comes: work another thread hands to the connection's own thread.

use super::call::{CallGuard, PendingCalls};
use super::error::ClientCallError;
use super::shutdown::RegisteredOnce;
use super::zerocopy::{self, FileRange};
use crate::remoting::codes::response_code;
use crate::remoting::command::{RemotingCommand, SerializeType};
use crate::remoting::frame::encode_frame;
use bytes::{Bytes, BytesMut};
use std::cell::Cell;
use std::future::Future;
use std::io;
use std::rc::Rc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use tokio::sync::{mpsc, Notify};
use tokio::time::Instant;
use tokio_uring::net::TcpStream;

/// Pre-encoded frames at least this long are written straight from their own buffer instead of
/// being copied into the coalescing buffer; below it one copy is cheaper than an extra syscall.
pub(crate) const WRITE_DIRECT_MIN_BYTES: usize = 64 * 1024;

/// What a command's frame adds to its ext fields, remark and body when encoded: the length
/// words and the fixed header fields with their JSON names. An estimate for the byte bound of
/// the write queue, not the exact size (encoding it would cost a copy per response).
const COMMAND_HEADER_ESTIMATE_BYTES: usize = 128;

/// Per ext field: quotes, colon and comma around key and value in the JSON header.
const EXT_FIELD_OVERHEAD_BYTES: usize = 6;

/// One frame for a connection's writer.
#[derive(Debug)]
pub enum Outbound {
    /// Encoded by the writer (`remoting::frame::encode_frame`).
    Command(RemotingCommand),
    /// A whole frame already encoded by the caller (length prefix included), sent as is.
    Encoded(Bytes),
    /// A frame whose body is file bytes: `head` (length prefix, header length word and header,
    /// as `remoting::frame::encode_frame_header` writes them) followed by `body`, the ranges in
    /// order. The frame on the wire is byte for byte the one `Encoded` would carry with the
    /// body read into memory.
    File(FileFrame),
    /// A frame the writer produces when its turn comes, on the connection's thread.
    Deferred(DeferredFrame),
}

/// What a [`DeferredFrame`] counts against the write queue's byte bound until it is produced:
/// what it is known to be by then, a response's header (its body is read when it runs).
const DEFERRED_FRAME_ESTIMATE_BYTES: usize = COMMAND_HEADER_ESTIMATE_BYTES;

/// Work another thread hands to a connection's writer, run on the connection's thread when the
/// writer takes it from the queue: its result, if any, goes on the wire after the frames queued
/// before it and before those queued after it. A woken pull's
/// re-execution goes this way, so that its store read and encoding run on the network thread
/// that serves the consumer rather than queue behind the other wake-ups on the wake thread.
/// `opaque` and `serialize_type` are those of the request it answers: if `produce` panics,
/// that request is answered SYSTEM_ERROR.
pub struct DeferredFrame {
    pub opaque: i32,
    pub serialize_type: SerializeType,
    pub produce: Box<dyn FnOnce() -> Option<Outbound> + Send>,
}

impl std::fmt::Debug for DeferredFrame {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeferredFrame")
            .field("opaque", &self.opaque)
            .finish_non_exhaustive()
    }
}

impl DeferredFrame {
    /// Runs the work: its frame, a SYSTEM_ERROR answer if it panicked, or nothing.
    pub fn produce(self) -> Option<Outbound> {
        let DeferredFrame {
            opaque,
            serialize_type,
            produce,
        } = self;
        match std::panic::catch_unwind(std::panic::AssertUnwindSafe(produce)) {
            Ok(produced) => produced,
            Err(panic) => {
                let message = super::error::panic_message(&*panic);
                tracing::error!(opaque, panic = message, "deferred frame panicked");
                let remark = format!("the broker failed while answering: {message}");
                Some(Outbound::Command(RemotingCommand::response(
                    response_code::SYSTEM_ERROR,
                    opaque,
                    serialize_type,
                    Some(remark),
                )))
            }
        }
    }
}

/// The parts of an [`Outbound::File`] frame.
#[derive(Debug, Clone)]
pub struct FileFrame {
    pub head: Bytes,
    pub body: Vec<FileRange>,
}

impl FileFrame {
    /// Bytes of the whole frame on the wire.
    pub fn len_bytes(&self) -> usize {
        self.head.len() + self.body.iter().map(|r| r.len_bytes).sum::<usize>()
    }
}

impl Outbound {
    /// The bytes this frame counts against `write_queue_max_bytes_per_connection`: the exact
    /// frame for `Encoded` and `File`, an estimate for `Command` (header fields + body).
    pub fn queued_len_bytes(&self) -> usize {
        match self {
            Outbound::Command(cmd) => {
                let ext: usize = cmd
                    .ext_fields
                    .iter()
                    .map(|(k, v)| k.len() + v.len() + EXT_FIELD_OVERHEAD_BYTES)
                    .sum();
                let remark = cmd.remark.as_ref().map_or(0, String::len);
                COMMAND_HEADER_ESTIMATE_BYTES + ext + remark + cmd.body.len()
            }
            Outbound::Encoded(frame) => frame.len(),
            Outbound::File(frame) => frame.len_bytes(),
            Outbound::Deferred(_) => DEFERRED_FRAME_ESTIMATE_BYTES,
        }
    }

    /// This frame with any deferred work done ([`DeferredFrame::produce`]); `None` when the
    /// work produced nothing.
    pub fn resolve(self) -> Option<Outbound> {
        let mut outbound = self;
        loop {
            match outbound {
                Outbound::Deferred(deferred) => outbound = deferred.produce()?,
                ready => return Some(ready),
            }
        }
    }
}

/// The bytes queued on one connection, shared by its senders (any thread) and its writer, which
/// gives them back once it has written the frames. Only atomics on the way: a `Notify` is woken
/// only when a sender waits for room.
#[derive(Debug)]
pub(crate) struct QueuedBytes {
    bytes: AtomicUsize,
    max: usize,
    /// Senders in [`QueuedBytes::reserve`], so that releases skip the `Notify` when none waits.
    waiting: AtomicUsize,
    room: Notify,
}

impl QueuedBytes {
    pub(crate) fn new(max: usize) -> Self {
        QueuedBytes {
            bytes: AtomicUsize::new(0),
            max,
            waiting: AtomicUsize::new(0),
            room: Notify::new(),
        }
    }

    /// Counts `n` more bytes unless that would pass the bound. An empty queue takes any frame,
    /// so that a frame larger than the bound can still be sent.
    fn try_reserve(&self, n: usize) -> bool {
        self.bytes
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |queued| {
                (queued == 0 || queued.saturating_add(n) <= self.max).then_some(queued + n)
            })
            .is_ok()
    }

    /// Waits until `n` bytes fit, then counts them.
    async fn reserve(&self, n: usize) {
        if self.try_reserve(n) {
            return;
        }
        self.waiting.fetch_add(1, Ordering::SeqCst);
        let _waiting = WaitingGuard(&self.waiting);
        loop {
            let notified = self.room.notified();
            let mut notified = std::pin::pin!(notified);
            // Registered before the check, so a release between the check and the await is
            // not missed.
            notified.as_mut().enable();
            if self.try_reserve(n) {
                return;
            }
            notified.await;
        }
    }

    pub(crate) fn release(&self, n: usize) {
        if n == 0 {
            return;
        }
        self.bytes.fetch_sub(n, Ordering::SeqCst);
        if self.waiting.load(Ordering::SeqCst) > 0 {
            self.room.notify_waiters();
        }
    }

    fn get(&self) -> usize {
        self.bytes.load(Ordering::Relaxed)
    }
}

struct WaitingGuard<'a>(&'a AtomicUsize);

impl Drop for WaitingGuard<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Why [`ConnectionSender::send`] did not queue the frame; the frame is handed back (boxed, so
/// the `Ok` path stays small).
#[derive(Debug, thiserror::Error)]
pub enum SendError {
    #[error("the write queue of the connection is full")]
    Full(Box<Outbound>),
    #[error("the connection is closed")]
    Closed(Box<Outbound>),
}

impl SendError {
    /// The frame that was not queued.
    pub fn into_outbound(self) -> Outbound {
        match self {
            SendError::Full(o) | SendError::Closed(o) => *o,
        }
    }
}

/// A handle to queue frames on a connection's writer. Cheap to clone, usable from any thread.
#[derive(Debug, Clone)]
pub struct ConnectionSender {
    queue: mpsc::Sender<Outbound>,
    bytes: Arc<QueuedBytes>,
    calls: Arc<PendingCalls>,
}

impl ConnectionSender {
    pub(crate) fn new(queue: mpsc::Sender<Outbound>, bytes: Arc<QueuedBytes>) -> Self {
        ConnectionSender {
            queue,
            bytes,
            calls: Arc::new(PendingCalls::default()),
        }
    }

    /// Sends `request` to the peer and waits up to `timeout` for its response (Java
    /// `invokeSync` on a server channel). The request gets an opaque of this connection's
    /// call table; the connection's reader delivers the response frame with that opaque.
    /// Fails when [`PENDING_CALLS_MAX_PER_CONNECTION`](super::PENDING_CALLS_MAX_PER_CONNECTION)
    /// calls already wait, the frame cannot be queued, the connection closes, or the timeout
    /// passes.
    pub async fn call(
        &self,
        mut request: RemotingCommand,
        timeout: std::time::Duration,
    ) -> Result<RemotingCommand, ClientCallError> {
        let (opaque, response) = self.calls.register()?;
        let _guard = CallGuard {
            calls: &self.calls,
            opaque,
        };
        request.opaque = opaque;
        request.flag &= !crate::remoting::command::FLAG_RESPONSE;
        self.send(Outbound::Command(request))
            .map_err(|e| ClientCallError::NotSent {
                reason: e.to_string(),
            })?;
        match tokio::time::timeout(timeout, response).await {
            Ok(Ok(response)) => Ok(response),
            Ok(Err(_)) => Err(ClientCallError::Closed),
            Err(_) => Err(ClientCallError::Timeout {
                timeout_ms: timeout.as_millis() as u64,
            }),
        }
    }

    /// Hands a response frame read from the peer to the call waiting for its opaque; `false`
    /// when none waits.
    pub(crate) fn complete_call(&self, response: RemotingCommand) -> bool {
        self.calls.complete(response)
    }

    /// The connection closed: the waiting calls end, new ones fail.
    pub(crate) fn close_calls(&self) {
        self.calls.close();
    }

    /// Queues a frame without waiting. Fails with `Full` when `write_queue_max_per_connection`
    /// frames or `write_queue_max_bytes_per_connection` bytes are already queued (a peer that
    /// does not read), or `Closed` after the connection closed.
    pub fn send(&self, outbound: Outbound) -> Result<(), SendError> {
        if self.queue.is_closed() {
            return Err(SendError::Closed(Box::new(outbound)));
        }
        let len = outbound.queued_len_bytes();
        if !self.bytes.try_reserve(len) {
            return Err(SendError::Full(Box::new(outbound)));
        }
        self.queue.try_send(outbound).map_err(|e| {
            self.bytes.release(len);
            match e {
                mpsc::error::TrySendError::Full(o) => SendError::Full(Box::new(o)),
                mpsc::error::TrySendError::Closed(o) => SendError::Closed(Box::new(o)),
            }
        })
    }

    /// Queues a frame, waiting for room in the queue (frames and bytes). Fails only when the
    /// connection closed.
    pub async fn send_wait(&self, outbound: Outbound) -> Result<(), SendError> {
        let len = outbound.queued_len_bytes();
        // The common case first, without registering on the close notification (a lock).
        if !self.bytes.try_reserve(len) {
            tokio::select! {
                biased;
                () = self.bytes.reserve(len) => {}
                () = self.queue.closed() => return Err(SendError::Closed(Box::new(outbound))),
            }
        }
        self.queue.send(outbound).await.map_err(|e| {
            self.bytes.release(len);
            SendError::Closed(Box::new(e.0))
        })
    }

    /// Bytes queued and not yet written (the estimate [`Outbound::queued_len_bytes`] counts).
    pub fn queued_bytes(&self) -> usize {
        self.bytes.get()
    }

    /// True once the connection's writer stopped; frames sent after that are refused.
    pub fn is_closed(&self) -> bool {
        self.queue.is_closed()
    }

    /// Completes when the connection's writer stops. Cheap to poll again and again from one
    /// task ([`RegisteredOnce`]).
    pub(crate) fn closed(&self) -> impl Future<Output = ()> + '_ {
        RegisteredOnce::new(self.queue.closed(), move || self.queue.is_closed())
    }
}

/// How the writer task ended.
#[derive(Debug)]
pub(crate) enum WriterExit {
    /// Asked to close (or every sender dropped); everything queued before that was written.
    Closed,
    /// The socket refused a write (usually the peer is gone); queued frames were dropped.
    WriteFailed(io::Error),
}

/// Writes queued frames until `close` is notified or a write fails, then closes the queue so
/// senders see `Closed`. Frames queued before `close` are written first.
pub(crate) async fn run(
    stream: Rc<TcpStream>,
    mut queue: mpsc::Receiver<Outbound>,
    close: Rc<Notify>,
    state: WriterState,
) -> WriterExit {
    let mut writer = Writer {
        stream,
        buf: BytesMut::new(),
        state,
        taken_bytes: 0,
    };
    let exit = loop {
        let first = tokio::select! {
            // Queued frames first: close only once the queue is empty at that moment.
            biased;
            outbound = queue.recv() => outbound,
            () = close.notified() => None,
        };
        let Some(first) = first else {
            queue.close();
            // Frames that raced in before close() are still owed to the peer.
            break match writer.write_queued(None, &mut queue).await {
                Ok(()) => WriterExit::Closed,
                Err(e) => WriterExit::WriteFailed(e),
            };
        };
        if let Err(e) = writer.write_queued(Some(first), &mut queue).await {
            queue.close();
            break WriterExit::WriteFailed(e);
        }
    };
    // Drop whatever is left so the memory goes now, not when the last sender drops.
    writer.release_taken();
    while let Ok(outbound) = queue.try_recv() {
        writer.state.queued.release(outbound.queued_len_bytes());
    }
    exit
}

/// What the writer shares with the rest of its connection.
pub(crate) struct WriterState {
    pub coalesce_max_bytes: usize,
    /// The byte count of the queue; the writer gives back what it has written.
    pub queued: Arc<QueuedBytes>,
    /// When the writer last wrote to the socket, for the idle timeout (same thread, so a `Cell`).
    pub last_write: Rc<Cell<Instant>>,
}

struct Writer {
    stream: Rc<TcpStream>,
    /// Coalescing buffer, reused across writes.
    buf: BytesMut,
    state: WriterState,
    /// Bytes of the frames taken from the queue and not yet written.
    taken_bytes: usize,
}

impl Writer {
    /// Writes `first` and then everything queued right now, in order.
    async fn write_queued(
        &mut self,
        first: Option<Outbound>,
        queue: &mut mpsc::Receiver<Outbound>,
    ) -> io::Result<()> {
        let mut next = first.or_else(|| queue.try_recv().ok());
        while let Some(queued) = next {
            // What it counted against the bound when queued, whatever it produces.
            self.taken_bytes += queued.queued_len_bytes();
            let Some(outbound) = queued.resolve() else {
                next = queue.try_recv().ok();
                continue;
            };
            match outbound {
                Outbound::Command(cmd) => encode_into(&cmd, &mut self.buf),
                Outbound::Encoded(frame) if frame.len() >= WRITE_DIRECT_MIN_BYTES => {
                    self.flush().await?;
                    let (result, _) = self.stream.write_all(frame).await;
                    result?;
                    self.written();
                }
                Outbound::Encoded(frame) => self.buf.extend_from_slice(&frame),
                Outbound::File(frame) => {
                    // Whatever is coalesced so far and the head go first, through the same
                    // pipe as the body, which goes from the files straight to the socket.
                    self.buf.extend_from_slice(&frame.head);
                    next = queue.try_recv().ok();
                    let more_follows = next.is_some();
                    zerocopy::send_frame(&self.stream, &self.buf, &frame.body, more_follows)
                        .await?;
                    self.written();
                    self.buf.clear();
                    if self.buf.capacity() > 2 * self.state.coalesce_max_bytes {
                        self.buf = BytesMut::new();
                    }
                    continue;
                }
                Outbound::Deferred(_) => unreachable!("resolve() runs deferred frames"),
            }
            if self.buf.len() >= self.state.coalesce_max_bytes {
                self.flush().await?;
            }
            next = queue.try_recv().ok();
        }
        self.flush().await
    }

    async fn flush(&mut self) -> io::Result<()> {
        if self.buf.is_empty() {
            return Ok(());
        }
        let (result, mut buf) = self.stream.write_all(std::mem::take(&mut self.buf)).await;
        buf.clear();
        // One huge frame can grow the buffer; do not keep that memory for the connection's life.
        if buf.capacity() <= 2 * self.state.coalesce_max_bytes {
            self.buf = buf;
        }
        result?;
        self.written();
        Ok(())
    }

    /// Everything taken from the queue so far is on the socket: its bytes leave the bound.
    fn written(&mut self) {
        self.state.last_write.set(Instant::now());
        self.release_taken();
    }

    fn release_taken(&mut self) {
        self.state
            .queued
            .release(std::mem::take(&mut self.taken_bytes));
    }
}

/// Appends `cmd`'s frame. If it cannot be encoded (a header too large for its length field, ...)
/// and it is a response, a `SYSTEM_ERROR` response with the same opaque goes instead, so the
/// client is answered rather than left to time out.
fn encode_into(cmd: &RemotingCommand, buf: &mut BytesMut) {
    let mark = buf.len();
    let Err(e) = encode_frame(cmd, buf) else {
        return;
    };
    buf.truncate(mark);
    tracing::error!(code = cmd.code, opaque = cmd.opaque, error = %e, "cannot encode frame");
    if !cmd.is_response() {
        return;
    }
    let remark = format!("the broker could not encode its response: {e}");
    let fallback = RemotingCommand::response_to(cmd, response_code::SYSTEM_ERROR, Some(remark));
    if let Err(e) = encode_frame(&fallback, buf) {
        buf.truncate(mark);
        tracing::error!(opaque = cmd.opaque, error = %e, "cannot encode SYSTEM_ERROR fallback");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn send_reports_full_then_closed_and_returns_the_frame() {
        let (tx, mut rx) = mpsc::channel(1);
        let sender = ConnectionSender::new(tx, Arc::new(QueuedBytes::new(usize::MAX)));
        let frame = Bytes::from_static(b"frame");
        sender.send(Outbound::Encoded(frame.clone())).unwrap();
        match sender.send(Outbound::Encoded(frame.clone())) {
            Err(e @ SendError::Full(_)) => match e.into_outbound() {
                Outbound::Encoded(b) => assert_eq!(b, frame),
                other => panic!("wrong frame handed back: {other:?}"),
            },
            other => panic!("expected Full, got {other:?}"),
        }
        assert!(!sender.is_closed());
        rx.close();
        assert!(sender.is_closed());
        assert!(matches!(
            sender.send(Outbound::Encoded(frame)),
            Err(SendError::Closed(_))
        ));
    }

    #[test]
    fn send_reports_full_at_the_byte_bound_and_an_empty_queue_takes_any_frame() {
        let (tx, _rx) = mpsc::channel(16);
        let bytes = Arc::new(QueuedBytes::new(100));
        let sender = ConnectionSender::new(tx, bytes.clone());
        let frame = |n| Outbound::Encoded(Bytes::from(vec![0_u8; n]));
        sender.send(frame(60)).unwrap();
        assert!(matches!(sender.send(frame(60)), Err(SendError::Full(_))));
        sender.send(frame(40)).unwrap();
        assert_eq!(sender.queued_bytes(), 100);
        bytes.release(100);
        // Larger than the bound, but the queue is empty: it goes.
        sender.send(frame(500)).unwrap();
        assert_eq!(sender.queued_bytes(), 500);
    }

    #[test]
    fn send_wait_waits_for_room_in_bytes() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let (tx, _rx) = mpsc::channel(16);
        let bytes = Arc::new(QueuedBytes::new(100));
        let sender = ConnectionSender::new(tx, bytes.clone());
        let frame = || Outbound::Encoded(Bytes::from(vec![0_u8; 80]));
        rt.block_on(async {
            sender.send_wait(frame()).await.unwrap();
            let mut second = std::pin::pin!(sender.send_wait(frame()));
            assert!(futures_poll_once(second.as_mut()).await.is_none());
            bytes.release(80);
            second.await.unwrap();
        });
        assert_eq!(sender.queued_bytes(), 80);
    }

    /// Polls `fut` once: `Some` if it completed.
    async fn futures_poll_once<F: std::future::Future + Unpin>(fut: F) -> Option<F::Output> {
        let mut fut = fut;
        std::future::poll_fn(|cx| {
            std::task::Poll::Ready(match std::pin::Pin::new(&mut fut).poll(cx) {
                std::task::Poll::Ready(v) => Some(v),
                std::task::Poll::Pending => None,
            })
        })
        .await
    }

    #[test]
    fn encode_into_appends_a_decodable_frame() {
        let request = RemotingCommand::request(34);
        let response = RemotingCommand::response_to(&request, response_code::SUCCESS, None);
        let mut buf = BytesMut::from(&b"prefix"[..]);
        encode_into(&response, &mut buf);
        let mut frame = buf.split_off(b"prefix".len());
        assert_eq!(&buf[..], b"prefix");
        let decoded = crate::remoting::frame::decode_frame(&mut frame, 1 << 20)
            .unwrap()
            .unwrap();
        assert_eq!(decoded.opaque, response.opaque);
        assert!(decoded.is_response());
        assert!(frame.is_empty());
    }
}
