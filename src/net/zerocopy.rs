//! Zero-copy file → socket transfer for the connection writer: every splice and io_uring detail
//! of the network runtime lives here.
//!
//! # How a range travels
//! For each chunk of a [`FileRange`] (at most one pipe's capacity):
//! 1. `splice(file → pipe)` on the runtime thread. The pipe is empty, so this never waits for the
//!    pipe; it only moves page-cache page references into the pipe (no byte copy). A page that
//!    is not cached is read from disk first, exactly as the copy path's store read (which also
//!    runs on the runtime thread) would.
//! 2. `splice(pipe → socket)` as an `IORING_OP_SPLICE` on this thread's own small io_uring. The
//!    socket is a blocking socket shared with tokio-uring (which must not see `O_NONBLOCK`), so a
//!    direct syscall could block the runtime thread on a full send buffer; io_uring runs the
//!    splice on a kernel io-wq worker, which may block, and posts a completion. The ring's fd is
//!    registered with the runtime's reactor (`AsyncFd`), so the writer task just awaits it: no
//!    busy loop and no blocked runtime thread. Short splices (partial writes) are repeated until
//!    the pipe is empty.
//!
//! # Resources and their bounds
//! - Pipes are pooled per worker thread: at most [`PIPES_MAX_PER_THREAD`] exist at once, each
//!   asking for [`PIPE_SIZE_BYTES`]. A transfer holds one pipe; when none is free the transfer
//!   falls back to read-and-write (`pread` + socket write), so a few peers that stop reading
//!   cannot stall the other connections of the thread. A pipe goes back to the pool only when
//!   it is known to be empty; after an error it is closed.
//!   With 2 worker threads that is at most 2 x 16 pipes x 64 pages = 2048 pages, well below the
//!   default per-user soft limit (`fs.pipe-user-pages-soft` = 16384 pages); if the kernel refuses
//!   the larger size the pipe keeps its default size.
//! - An operation in flight owns (reference counted) everything the kernel resolves when the
//!   io-wq worker runs it: the pipe and the socket. If the awaiting future is dropped, they stay
//!   alive until the completion arrives, so a closed-and-reused fd number can never receive
//!   the bytes. The file being read is only used synchronously (step 1).
//! - A CommitLog segment deleted by retention mid-transfer stays readable: the range holds the
//!   open file (`Arc`), and unlinking does not free the pages of an open file.
//! - A peer that closes mid-transfer makes the socket splice fail (EPIPE / ECONNRESET): the
//!   error goes back to the writer, which stops the connection as for any failed write.

use std::cell::{Cell, RefCell};
use std::fmt;
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};
use std::rc::{Rc, Weak};
use std::sync::Arc;
use std::task::{Context, Poll, Waker};

use io_uring::{opcode, types, IoUring};
use tokio::io::unix::AsyncFd;
use tokio::io::Interest;
use tokio_uring::net::TcpStream;

/// Most pipes one worker thread keeps (in use or idle); also the most zero-copy transfers one
/// thread runs at once.
pub const PIPES_MAX_PER_THREAD: usize = 16;
/// Capacity asked for each pipe (`F_SETPIPE_SZ`). One splice pair moves at most this much; 256
/// KiB is the default pull batch of in-memory data (`maxTransferBytesOnMessageInMemory`).
pub const PIPE_SIZE_BYTES: usize = 256 * 1024;
/// Submission entries of the per-thread splice ring: one splice in flight per pipe at most.
const SPLICE_RING_ENTRIES: u32 = 32;
const _: () = assert!(PIPES_MAX_PER_THREAD <= SPLICE_RING_ENTRIES as usize);
/// Chunk of the read-and-write fallback (no pipe free, or no ring on this thread).
const COPY_FALLBACK_CHUNK_BYTES: usize = 256 * 1024;

/// A byte range of an open file to send as is. The handle keeps the file open.
#[derive(Clone)]
pub struct FileRange {
    pub file: Arc<dyn AsFd + Send + Sync>,
    pub offset_bytes: u64,
    pub len_bytes: usize,
}

impl fmt::Debug for FileRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FileRange")
            .field("fd", &self.file.as_fd().as_raw_fd())
            .field("offset_bytes", &self.offset_bytes)
            .field("len_bytes", &self.len_bytes)
            .finish()
    }
}

/// What [`send_ranges`] did, for tests and counters.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct SendStats {
    pub spliced_bytes: usize,
    pub copied_bytes: usize,
}

/// Sends `head` and then `ranges`, in order, on `socket`. `more_follows`: the caller writes
/// more right after (keeps TCP from pushing a partial segment at the end).
///
/// With a pipe: the head is written into the pipe and the ranges spliced after it until the
/// pipe is full (or everything is in), then the pipe is emptied into the socket with as few
/// io_uring splices as the socket takes. So a response of many small, separate records costs
/// one socket operation per pipe-full, not one per record.
pub(crate) async fn send_frame(
    socket: &Rc<TcpStream>,
    head: &[u8],
    ranges: &[FileRange],
    more_follows: bool,
) -> io::Result<SendStats> {
    let ring = SpliceRing::for_this_thread();
    let lease = ring.as_ref().and_then(SpliceRing::take_pipe);
    let stats = match (ring.as_ref(), lease) {
        (Some(ring), Some(mut lease)) => {
            let mut pump = Pump {
                ring,
                pipe: Rc::clone(lease.pipe()),
                socket,
                in_pipe: 0,
            };
            pump.write_head(head).await?;
            for range in ranges {
                pump.splice_range(range).await?;
            }
            pump.drain(more_follows).await?;
            lease.mark_empty();
            SendStats {
                spliced_bytes: ranges.iter().map(|r| r.len_bytes).sum(),
                copied_bytes: 0,
            }
        }
        _ => {
            let (result, _) = socket.write_all(head.to_vec()).await;
            result?;
            for range in ranges {
                copy_range(socket, range).await?;
            }
            SendStats {
                spliced_bytes: 0,
                copied_bytes: ranges.iter().map(|r| r.len_bytes).sum(),
            }
        }
    };
    tracing::trace!(
        spliced_bytes = stats.spliced_bytes,
        copied_bytes = stats.copied_bytes,
        "file ranges sent"
    );
    Ok(stats)
}

/// Fills a pipe (non-blocking on the runtime thread) and empties it into the socket (io_uring).
struct Pump<'a> {
    ring: &'a Rc<SpliceRing>,
    pipe: Rc<Pipe>,
    socket: &'a Rc<TcpStream>,
    /// Bytes in the pipe not yet sent.
    in_pipe: usize,
}

impl Pump<'_> {
    /// Puts `head` (a frame header plus any coalesced small frames) first: copied into the
    /// empty pipe when it fits (a blocking write into an empty pipe with room never waits),
    /// else written to the socket directly.
    async fn write_head(&mut self, head: &[u8]) -> io::Result<()> {
        debug_assert_eq!(self.in_pipe, 0);
        if head.len() > self.pipe.capacity_bytes {
            let (result, _) = self.socket.write_all(head.to_vec()).await;
            return result;
        }
        let mut head = head;
        while !head.is_empty() {
            // SAFETY: `head` is valid readable memory of `head.len()` bytes for the call.
            let n = unsafe {
                libc::write(
                    self.pipe.write.as_raw_fd(),
                    head.as_ptr().cast(),
                    head.len(),
                )
            };
            if n > 0 {
                head = &head[n as usize..];
                self.in_pipe += n as usize;
                continue;
            }
            let e = io::Error::last_os_error();
            if e.kind() != io::ErrorKind::Interrupted {
                return Err(e);
            }
        }
        Ok(())
    }

    /// Splices the range into the pipe, emptying the pipe into the socket whenever it is full.
    async fn splice_range(&mut self, range: &FileRange) -> io::Result<()> {
        let file = range.file.as_fd();
        let mut offset = range.offset_bytes;
        let mut left = range.len_bytes;
        while left > 0 {
            // SPLICE_F_NONBLOCK while the pipe holds data: a full pipe answers EAGAIN instead of
            // blocking the thread, and is emptied. Into an empty pipe (which never waits for
            // room) the splice may only wait for the disk, as the copy path's read would.
            let nonblock = self.in_pipe > 0;
            match splice_file_to_pipe(file, offset, &self.pipe, left, nonblock) {
                Ok(n) => {
                    offset += n as u64;
                    left -= n;
                    self.in_pipe += n;
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock && nonblock => {
                    self.drain(true).await?
                }
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// Sends everything in the pipe. `more`: more bytes follow (SPLICE_F_MORE).
    async fn drain(&mut self, more: bool) -> io::Result<()> {
        while self.in_pipe > 0 {
            let len = u32::try_from(self.in_pipe).unwrap_or(u32::MAX);
            let flags = if more { libc::SPLICE_F_MORE } else { 0 };
            let sent = self
                .ring
                .splice_pipe_to_socket(&self.pipe, self.socket, len, flags)
                .await?;
            if sent == 0 {
                return Err(io::Error::new(
                    io::ErrorKind::WriteZero,
                    "splice to the socket moved no bytes",
                ));
            }
            self.in_pipe -= sent.min(self.in_pipe);
        }
        Ok(())
    }
}

/// Moves up to `len` bytes at `offset` of `file` into the pipe; returns how many (> 0).
fn splice_file_to_pipe(
    file: BorrowedFd<'_>,
    offset: u64,
    pipe: &Pipe,
    len: usize,
    nonblock: bool,
) -> io::Result<usize> {
    let mut off_in = libc::loff_t::try_from(offset)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "file offset out of range"))?;
    let flags = if nonblock {
        libc::SPLICE_F_MOVE | libc::SPLICE_F_NONBLOCK
    } else {
        libc::SPLICE_F_MOVE
    };
    loop {
        // SAFETY: both fds are open for the call (borrowed); `off_in` is a valid loff_t the
        // kernel updates; no memory of ours is handed over otherwise.
        let n = unsafe {
            libc::splice(
                file.as_raw_fd(),
                &mut off_in,
                pipe.write.as_raw_fd(),
                std::ptr::null_mut(),
                len,
                flags,
            )
        };
        match n {
            0 => {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "the file ends before the range",
                ))
            }
            n if n > 0 => return Ok(n as usize),
            _ => {
                let e = io::Error::last_os_error();
                if e.kind() != io::ErrorKind::Interrupted {
                    return Err(e);
                }
            }
        }
    }
}

/// The fallback: read the range into memory and write it.
async fn copy_range(socket: &Rc<TcpStream>, range: &FileRange) -> io::Result<()> {
    let mut offset = range.offset_bytes;
    let mut left = range.len_bytes;
    while left > 0 {
        let n = left.min(COPY_FALLBACK_CHUNK_BYTES);
        let mut buf = vec![0u8; n];
        read_exact_at(range.file.as_fd(), &mut buf, offset)?;
        let (result, _) = socket.write_all(buf).await;
        result?;
        offset += n as u64;
        left -= n;
    }
    Ok(())
}

/// pread(2) until `buf` is full.
fn read_exact_at(fd: BorrowedFd<'_>, mut buf: &mut [u8], mut offset: u64) -> io::Result<()> {
    while !buf.is_empty() {
        let off = libc::off_t::try_from(offset)
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "file offset out of range"))?;
        // SAFETY: `buf` is valid writable memory of `buf.len()` bytes for the call.
        let n = unsafe { libc::pread(fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len(), off) };
        match n {
            0 => {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "the file ends before the range",
                ))
            }
            n if n > 0 => {
                buf = &mut buf[n as usize..];
                offset += n as u64;
            }
            _ => {
                let e = io::Error::last_os_error();
                if e.kind() != io::ErrorKind::Interrupted {
                    return Err(e);
                }
            }
        }
    }
    Ok(())
}

/// One pipe of the pool.
struct Pipe {
    read: OwnedFd,
    write: OwnedFd,
    capacity_bytes: usize,
    /// The pool's count of live pipes, decremented when the pipe is closed.
    live: Rc<Cell<usize>>,
}

impl Drop for Pipe {
    fn drop(&mut self) {
        self.live.set(self.live.get() - 1);
    }
}

impl Pipe {
    fn new(live: &Rc<Cell<usize>>) -> io::Result<Pipe> {
        let mut fds = [0 as RawFd; 2];
        // SAFETY: `fds` has room for the two descriptors pipe2 writes.
        if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: pipe2 succeeded, so both fds are open and owned by nobody else.
        let (read, write) = unsafe {
            (
                <OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(fds[0]),
                <OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(fds[1]),
            )
        };
        live.set(live.get() + 1);
        let size = libc::c_int::try_from(PIPE_SIZE_BYTES).unwrap_or(libc::c_int::MAX);
        // SAFETY: fcntl on an fd we own, integer argument.
        let set = unsafe { libc::fcntl(write.as_raw_fd(), libc::F_SETPIPE_SZ, size) };
        let capacity_bytes = if set > 0 {
            set as usize
        } else {
            // Over the per-user pipe page limit (or pipe-max-size): keep the default size.
            tracing::debug!(error = %io::Error::last_os_error(), "F_SETPIPE_SZ refused");
            // SAFETY: as above.
            let got = unsafe { libc::fcntl(write.as_raw_fd(), libc::F_GETPIPE_SZ) };
            if got > 0 {
                got as usize
            } else {
                4096
            }
        };
        Ok(Pipe {
            read,
            write,
            capacity_bytes,
            live: Rc::clone(live),
        })
    }
}

/// A pipe taken from the pool; returned on drop if it was left empty, closed otherwise.
struct PipeLease {
    pipe: Option<Rc<Pipe>>,
    ring: Rc<SpliceRing>,
    empty: bool,
}

impl PipeLease {
    fn pipe(&self) -> &Rc<Pipe> {
        // Present from creation until drop.
        self.pipe
            .as_ref()
            .expect("lease holds its pipe until dropped")
    }

    fn mark_empty(&mut self) {
        self.empty = true;
    }
}

impl Drop for PipeLease {
    fn drop(&mut self) {
        let Some(pipe) = self.pipe.take() else { return };
        // Only an empty pipe that no operation still holds can be reused.
        if self.empty {
            if let Ok(pipe) = Rc::try_unwrap(pipe) {
                self.ring.idle_pipes.borrow_mut().push(pipe);
            }
        }
    }
}

/// An operation slot.
enum Slot {
    Free,
    /// In the kernel. `_hold` keeps the fds the kernel will resolve alive until completion.
    InFlight {
        waker: Option<Waker>,
        _hold: (Rc<Pipe>, Rc<TcpStream>),
    },
    /// In the kernel, its future gone: freed when the completion arrives.
    Abandoned {
        _hold: (Rc<Pipe>, Rc<TcpStream>),
    },
    Done(i32),
}

struct RingFd(RawFd);

impl AsRawFd for RingFd {
    fn as_raw_fd(&self) -> RawFd {
        self.0
    }
}

/// This thread's splice ring, its pipe pool and its in-flight operations.
struct SpliceRing {
    // Field order matters for drop: the reactor registration goes before the ring's fd closes.
    ready: AsyncFd<RingFd>,
    ring: RefCell<IoUring>,
    slots: RefCell<Vec<Slot>>,
    idle_pipes: RefCell<Vec<Pipe>>,
    live_pipes: Rc<Cell<usize>>,
}

/// This thread's ring. The completion task owns it (so it goes with the runtime); the
/// thread-local only points at it.
enum ThreadRing {
    Unset,
    Live(Weak<SpliceRing>),
    /// Setting the ring up failed on this thread (logged once); transfers copy.
    Failed,
}

thread_local! {
    static RING: RefCell<ThreadRing> = const { RefCell::new(ThreadRing::Unset) };
}

impl SpliceRing {
    /// This thread's ring, created (with its completion task) on first use. Must be called on
    /// a tokio-uring runtime thread.
    fn for_this_thread() -> Option<Rc<SpliceRing>> {
        RING.with(|slot| {
            let mut slot = slot.borrow_mut();
            match &*slot {
                ThreadRing::Failed => return None,
                ThreadRing::Live(weak) => {
                    if let Some(ring) = weak.upgrade() {
                        return Some(ring);
                    }
                }
                ThreadRing::Unset => {}
            }
            match SpliceRing::new() {
                Ok(ring) => {
                    let ring = Rc::new(ring);
                    *slot = ThreadRing::Live(Rc::downgrade(&ring));
                    drop(tokio_uring::spawn(drive(Rc::clone(&ring))));
                    Some(ring)
                }
                Err(e) => {
                    tracing::warn!(error = %e, "cannot set up the splice ring; zero-copy pull responses are sent by read and write on this thread");
                    *slot = ThreadRing::Failed;
                    None
                }
            }
        })
    }

    fn new() -> io::Result<SpliceRing> {
        let ring = IoUring::new(SPLICE_RING_ENTRIES)?;
        // SAFETY: the ring's fd stays open and the same for the AsyncFd's whole life: `ready`
        // is declared before `ring` in SpliceRing, so it is dropped (deregistered) first.
        let ready = unsafe {
            AsyncFd::register_with_interest(RingFd(ring.as_raw_fd()), Interest::READABLE)
        }?;
        Ok(SpliceRing {
            ready,
            ring: RefCell::new(ring),
            slots: RefCell::new(Vec::new()),
            idle_pipes: RefCell::new(Vec::new()),
            live_pipes: Rc::new(Cell::new(0)),
        })
    }

    /// A pipe from the pool, or a new one while fewer than the maximum exist; `None` when the
    /// pool is exhausted or a pipe cannot be created.
    fn take_pipe(self: &Rc<Self>) -> Option<PipeLease> {
        let pipe = match self.idle_pipes.borrow_mut().pop() {
            Some(pipe) => pipe,
            None if self.live_pipes.get() < PIPES_MAX_PER_THREAD => {
                match Pipe::new(&self.live_pipes) {
                    Ok(pipe) => pipe,
                    Err(e) => {
                        tracing::debug!(error = %e, "cannot create a pipe; copying instead");
                        return None;
                    }
                }
            }
            None => return None,
        };
        Some(PipeLease {
            pipe: Some(Rc::new(pipe)),
            ring: Rc::clone(self),
            empty: false,
        })
    }

    /// Splices up to `len` bytes from the pipe to the socket; returns the bytes moved.
    async fn splice_pipe_to_socket(
        self: &Rc<Self>,
        pipe: &Rc<Pipe>,
        socket: &Rc<TcpStream>,
        len: u32,
        flags: u32,
    ) -> io::Result<usize> {
        let key = {
            let mut slots = self.slots.borrow_mut();
            let key = match slots.iter().position(|s| matches!(s, Slot::Free)) {
                Some(key) => key,
                None => {
                    slots.push(Slot::Free);
                    slots.len() - 1
                }
            };
            slots[key] = Slot::InFlight {
                waker: None,
                _hold: (Rc::clone(pipe), Rc::clone(socket)),
            };
            key
        };
        let entry = opcode::Splice::new(
            types::Fd(pipe.read.as_raw_fd()),
            -1,
            types::Fd(socket.as_raw_fd()),
            -1,
            len,
        )
        .flags(flags)
        .build()
        .user_data(key as u64);
        let pushed = {
            let mut ring = self.ring.borrow_mut();
            // SAFETY: the entry refers only to fds that the slot keeps open until the
            // completion, and to no memory of ours.
            let pushed = unsafe { ring.submission().push(&entry) }.is_ok();
            pushed && ring.submit().is_ok()
        };
        if !pushed {
            // Cannot happen (at most one op per pipe, pipes <= entries); fail the write cleanly.
            self.slots.borrow_mut()[key] = Slot::Free;
            return Err(io::Error::other("the splice ring is full"));
        }
        let op = OpFuture {
            ring: Rc::clone(self),
            key,
            done: false,
        };
        let result = op.await;
        if result < 0 {
            Err(io::Error::from_raw_os_error(-result))
        } else {
            Ok(result as usize)
        }
    }

    /// Hands every available completion to its slot.
    fn reap(&self) {
        let mut ring = self.ring.borrow_mut();
        let mut slots = self.slots.borrow_mut();
        for cqe in ring.completion() {
            let key = cqe.user_data() as usize;
            let Some(slot) = slots.get_mut(key) else {
                tracing::error!(key, "completion for an unknown splice slot");
                continue;
            };
            match std::mem::replace(slot, Slot::Done(cqe.result())) {
                Slot::InFlight { waker, .. } => {
                    if let Some(waker) = waker {
                        waker.wake();
                    }
                }
                Slot::Abandoned { .. } => *slot = Slot::Free,
                Slot::Free | Slot::Done(_) => {
                    tracing::error!(key, "completion for a splice slot not in flight")
                }
            }
        }
    }
}

/// Bound on the completions `Drop` waits for after cancelling (each op completes once).
const DROP_CANCEL_USER_DATA: u64 = u64::MAX;

impl Drop for SpliceRing {
    /// Operations still in the kernel (the runtime is going away) are cancelled and waited for
    /// before their pipes and sockets close, so the kernel never resolves a reused fd number.
    fn drop(&mut self) {
        let ring = self.ring.get_mut();
        let slots = self.slots.get_mut();
        let mut pending = slots
            .iter()
            .filter(|s| matches!(s, Slot::InFlight { .. } | Slot::Abandoned { .. }))
            .count();
        if pending == 0 {
            return;
        }
        for (key, slot) in slots.iter().enumerate() {
            if matches!(slot, Slot::InFlight { .. } | Slot::Abandoned { .. }) {
                let cancel = opcode::AsyncCancel::new(key as u64)
                    .build()
                    .user_data(DROP_CANCEL_USER_DATA);
                // SAFETY: a cancel entry refers to no memory or fd of ours.
                while unsafe { ring.submission().push(&cancel) }.is_err() {
                    if ring.submit().is_err() {
                        break;
                    }
                }
            }
        }
        while pending > 0 {
            if let Err(e) = ring.submit_and_wait(1) {
                if e.kind() == io::ErrorKind::Interrupted {
                    continue;
                }
                tracing::error!(error = %e, "cannot wait for cancelled splices; leaking their fds");
                // Keep the fds open for good rather than risk a reused fd number.
                for slot in slots.drain(..) {
                    std::mem::forget(slot);
                }
                return;
            }
            for cqe in ring.completion() {
                if cqe.user_data() != DROP_CANCEL_USER_DATA {
                    if let Some(slot) = slots.get_mut(cqe.user_data() as usize) {
                        *slot = Slot::Free;
                    }
                    pending -= 1;
                }
            }
        }
    }
}

/// Awaits the completion of slot `key`.
struct OpFuture {
    ring: Rc<SpliceRing>,
    key: usize,
    done: bool,
}

impl std::future::Future for OpFuture {
    type Output = i32;

    fn poll(mut self: std::pin::Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<i32> {
        let key = self.key;
        let result = {
            let mut slots = self.ring.slots.borrow_mut();
            let slot = &mut slots[key];
            match slot {
                Slot::Done(result) => {
                    let result = *result;
                    *slot = Slot::Free;
                    result
                }
                Slot::InFlight { waker, .. } => {
                    *waker = Some(cx.waker().clone());
                    return Poll::Pending;
                }
                Slot::Free | Slot::Abandoned { .. } => {
                    unreachable!("a splice future's slot is in flight or done until it completes")
                }
            }
        };
        self.done = true;
        Poll::Ready(result)
    }
}

impl Drop for OpFuture {
    fn drop(&mut self) {
        if self.done {
            return;
        }
        let mut slots = self.ring.slots.borrow_mut();
        let slot = &mut slots[self.key];
        *slot = match std::mem::replace(slot, Slot::Free) {
            // Keep the fds open until the kernel is done with them.
            Slot::InFlight { _hold, .. } => Slot::Abandoned { _hold },
            Slot::Done(_) | Slot::Free | Slot::Abandoned { .. } => Slot::Free,
        };
    }
}

/// The thread's completion task: wakes the futures whose splices completed.
async fn drive(ring: Rc<SpliceRing>) {
    loop {
        let mut guard = match ring.ready.readable().await {
            Ok(guard) => guard,
            Err(e) => {
                tracing::error!(error = %e, "the splice ring cannot be polled");
                return;
            }
        };
        ring.reap();
        guard.clear_ready();
        // A completion posted between reap and clear_ready raises a new readiness event, so
        // nothing is missed.
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};

    fn pattern(len: usize) -> Vec<u8> {
        (0..len).map(|i| (i * 7 + i / 4096) as u8).collect()
    }

    /// Runs `body` on a tokio-uring runtime with the server side of a loopback connection whose
    /// client reads everything (slowly, with a small buffer, so the sender meets a full socket)
    /// and returns it.
    fn with_connection<F, Fut>(body: F) -> Vec<u8>
    where
        F: FnOnce(Rc<TcpStream>) -> Fut,
        Fut: std::future::Future<Output = ()>,
    {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let reader = std::thread::spawn(move || {
            let s = std::net::TcpStream::connect(addr).unwrap();
            nix::sys::socket::setsockopt(&s, nix::sys::socket::sockopt::RcvBuf, &65536).unwrap();
            let mut s = s;
            let mut got = Vec::new();
            let mut chunk = [0u8; 4096];
            loop {
                let n = s.read(&mut chunk).unwrap();
                if n == 0 {
                    return got;
                }
                got.extend_from_slice(&chunk[..n]);
                if got.len() < 256 * 1024 {
                    std::thread::sleep(std::time::Duration::from_micros(200));
                }
            }
        });
        tokio_uring::start(async move {
            let (std_stream, _) = listener.accept().unwrap();
            let stream = Rc::new(TcpStream::from_std(std_stream));
            body(Rc::clone(&stream)).await;
            stream.shutdown(std::net::Shutdown::Both).unwrap();
        });
        reader.join().unwrap()
    }

    #[test]
    fn sends_head_and_ranges_in_order_and_returns_the_pipe() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("segment");
        let data = pattern(3 << 20);
        std::fs::File::create(&path)
            .unwrap()
            .write_all(&data)
            .unwrap();
        let file: Arc<dyn AsFd + Send + Sync> = Arc::new(std::fs::File::open(&path).unwrap());
        let range = |offset_bytes: u64, len_bytes: usize| FileRange {
            file: Arc::clone(&file),
            offset_bytes,
            len_bytes,
        };
        // Tiny ranges, a range of several pipe-fulls, and one byte.
        let ranges = vec![
            range(10, 100),
            range(4096, 1),
            range(5000, 2 << 20),
            range(0, 1),
        ];
        let rounds = 3;
        let sent_ranges = ranges.clone();
        let got = with_connection(|stream| async move {
            for round in 0..rounds {
                let head = format!("head-{round}");
                let stats = send_frame(&stream, head.as_bytes(), &sent_ranges, round + 1 < rounds)
                    .await
                    .unwrap();
                assert_eq!(stats.copied_bytes, 0);
                assert_eq!(stats.spliced_bytes, 100 + 1 + (2 << 20) + 1);
            }
            let ring = SpliceRing::for_this_thread().unwrap();
            assert_eq!(ring.live_pipes.get(), 1, "one pipe, reused every round");
            assert_eq!(ring.idle_pipes.borrow().len(), 1);
        });
        let mut want = Vec::new();
        for round in 0..rounds {
            want.extend_from_slice(format!("head-{round}").as_bytes());
            for r in &ranges {
                let start = r.offset_bytes as usize;
                want.extend_from_slice(&data[start..start + r.len_bytes]);
            }
        }
        assert_eq!(got.len(), want.len());
        assert!(got == want, "bytes differ");
    }

    #[test]
    fn falls_back_to_copy_when_the_pool_is_empty_and_fails_on_a_short_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("segment");
        let data = pattern(300 * 1024);
        std::fs::write(&path, &data).unwrap();
        let file: Arc<dyn AsFd + Send + Sync> = Arc::new(std::fs::File::open(&path).unwrap());
        let ranges = vec![FileRange {
            file: Arc::clone(&file),
            offset_bytes: 7,
            len_bytes: 290 * 1024,
        }];
        let beyond = vec![FileRange {
            file: Arc::clone(&file),
            offset_bytes: 299 * 1024,
            len_bytes: 2 * 1024,
        }];
        let sent = ranges.clone();
        let got = with_connection(|stream| async move {
            let ring = SpliceRing::for_this_thread().unwrap();
            let leases: Vec<PipeLease> = (0..PIPES_MAX_PER_THREAD)
                .map(|_| ring.take_pipe().unwrap())
                .collect();
            assert!(ring.take_pipe().is_none(), "the pool is bounded");
            let stats = send_frame(&stream, b"H", &sent, false).await.unwrap();
            assert_eq!(stats.spliced_bytes, 0);
            assert_eq!(stats.copied_bytes, 290 * 1024);
            // Leases never marked empty are closed, not pooled.
            drop(leases);
            assert_eq!(ring.live_pipes.get(), 0);
            // A range past the end of the file is an error, not a hang or short frame.
            let err = send_frame(&stream, b"", &beyond, false).await.unwrap_err();
            assert_eq!(err.kind(), io::ErrorKind::UnexpectedEof);
            assert_eq!(
                ring.live_pipes.get(),
                0,
                "a failed transfer's pipe is closed"
            );
        });
        // The failed frame may have put part of its bytes on the wire before the error (the
        // writer then closes the connection); the complete frame before it is intact.
        let mut want = b"H".to_vec();
        want.extend_from_slice(&data[7..7 + 290 * 1024]);
        assert!(got.len() >= want.len());
        assert!(got[..want.len()] == want[..]);
    }
}
