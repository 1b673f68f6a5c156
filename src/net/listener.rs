//! Listen sockets and the accept loop.
//!
//! Each listen address has one listening socket, bound without `SO_REUSEPORT`, so the bind
//! fails when any other socket (of this or another process) listens on the address. Every
//! worker accepts on its own duplicate of that socket's fd from its own io_uring: the workers
//! share the socket's accept queue. io_uring arms an accept that finds the queue empty as an
//! exclusive poll (`EPOLLEXCLUSIVE`), so a new connection wakes one waiting worker, not all of
//! them; the woken worker takes the connection and queues its next accept behind the others.
//! No lock is taken in user space.
//!
//! Left alone, a burst of connections piles onto one worker: re-queuing an accept first tries
//! to take a connection at once, so the first worker to run drains the queue while the others
//! are still waking (measured: 59 of 64 on one of 4 workers; and the two connections of a
//! client that opens two at once both on one of 2 workers). So the worker that accepted a
//! connection does not decide alone who serves it: the connection goes to the worker with the
//! fewest connections, ties taken in turn ([`super::worker::least_loaded`]), handed over through that worker's
//! queue when it is another ([`super::worker::Handoff`]). Which worker wins an accept then
//! makes no difference to the spread. (An earlier rule had a worker that held more than its
//! share wait 1 ms before its next accept; on a busy machine the other worker often did not
//! run within that 1 ms, and under load a client's pair still landed on one worker.)

use super::connection::{self, Accepted};
use super::error::ServerError;
use super::handler::RequestHandler;
use super::worker::{ConnectionSlot, Handoff, Refused, Worker};
use nix::sys::socket::{
    self, sockopt, AddressFamily, Backlog, SockFlag, SockType, SockaddrStorage,
};
use std::io;
use std::net::SocketAddr;
use std::os::fd::{AsRawFd, OwnedFd};
use std::rc::Rc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};
use tokio_uring::net::{TcpListener, TcpStream};
use tracing::Instrument;

/// After an accept error that is likely to repeat at once (out of file descriptors or memory),
/// wait this long before accepting again instead of spinning on the error.
const ACCEPT_ERROR_BACKOFF_MS: u64 = 100;

/// How long [`bind_listener`] keeps trying an address in use, and how often. A second server on
/// the address fails this much later; a killed one's socket is gone well within it.
const BIND_IN_USE_WAIT_MS: u64 = 1_000;
const BIND_IN_USE_RETRY_INTERVAL_MS: u64 = 10;

/// Connection ids are unique per process, across servers.
static NEXT_CONNECTION_ID: AtomicU64 = AtomicU64::new(1);

/// Creates the listening TCP socket of `addr`, the one bind function of the network runtime.
///
/// `SO_REUSEADDR` is set (as Java's server socket: a restarted broker can bind while old
/// connections are in TIME_WAIT); on Linux it does not let two sockets listen on one address.
/// `SO_REUSEPORT` is not set: with it, any other socket of the same user with `SO_REUSEPORT`
/// would join this one's group and silently share its connections. So an address another socket
/// listens on fails with [`ServerError::AddrInUse`], at `bind` or (when both bound before either
/// listened) at `listen`. Port 0 picks a free port; read it back with `local_addr`.
///
/// An address in use is tried again for [`BIND_IN_USE_WAIT_MS`] before the error is returned:
/// the listening socket of a process that was killed outlives it until the kernel has torn down
/// the process's io_uring, whose parked accept still holds the socket (measured: up to 12 ms
/// after the process was reaped), and a restart right after a crash must not fail on that.
/// Blocks the calling thread meanwhile; it is called at startup only.
pub fn bind_listener(addr: SocketAddr, backlog: u32) -> Result<std::net::TcpListener, ServerError> {
    let socket = bind_socket(addr)?;
    listen(&socket, addr, backlog)?;
    Ok(socket)
}

/// The first half of [`bind_listener`]: the socket bound, not listening yet. `bind` already
/// fails on an address another socket listens on, so a server can claim its addresses before
/// it is ready to serve, and clients meanwhile get a refused connection rather than a
/// handshake nobody answers.
pub(crate) fn bind_socket(addr: SocketAddr) -> Result<std::net::TcpListener, ServerError> {
    let deadline = Instant::now() + Duration::from_millis(BIND_IN_USE_WAIT_MS);
    loop {
        match try_bind_socket(addr) {
            Err(ServerError::AddrInUse { .. }) if Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(BIND_IN_USE_RETRY_INTERVAL_MS));
            }
            result => return result,
        }
    }
}

/// The second half of [`bind_listener`]. Fails with [`ServerError::AddrInUse`] when another
/// socket bound the same address before either listened.
pub(crate) fn listen(
    socket: &std::net::TcpListener,
    addr: SocketAddr,
    backlog: u32,
) -> Result<(), ServerError> {
    // ServerConfig::validate keeps the backlog within i32.
    let backlog = i32::try_from(backlog).unwrap_or(i32::MAX);
    let backlog = Backlog::new(backlog).map_err(socket_error(addr, "listen on"))?;
    socket::listen(socket, backlog).map_err(socket_error(addr, "listen on"))
}

fn socket_error(addr: SocketAddr, op: &'static str) -> impl Fn(nix::errno::Errno) -> ServerError {
    move |e: nix::errno::Errno| match e {
        nix::errno::Errno::EADDRINUSE => ServerError::AddrInUse {
            addr,
            source: io::Error::from(e),
        },
        e => ServerError::Socket {
            op,
            addr,
            source: io::Error::from(e),
        },
    }
}

fn try_bind_socket(addr: SocketAddr) -> Result<std::net::TcpListener, ServerError> {
    let err = |op: &'static str| socket_error(addr, op);
    let family = if addr.is_ipv4() {
        AddressFamily::Inet
    } else {
        AddressFamily::Inet6
    };
    let fd: OwnedFd = socket::socket(family, SockType::Stream, SockFlag::SOCK_CLOEXEC, None)
        .map_err(err("create"))?;
    socket::setsockopt(&fd, sockopt::ReuseAddr, &true).map_err(err("set SO_REUSEADDR on"))?;
    socket::bind(fd.as_raw_fd(), &SockaddrStorage::from(addr)).map_err(err("bind"))?;
    Ok(std::net::TcpListener::from(fd))
}

/// Accepts connections on one listen socket until shutdown, serving each on this thread.
///
/// The accept is never cancelled (an accept dropped while in flight in the ring can still
/// complete in the kernel and leave an accepted socket nobody owns); instead shutdown wakes it
/// with [`stop_listening`], and it then fails or returns a connection that is closed at once.
pub(crate) async fn accept_loop<H: RequestHandler>(
    listener: Rc<TcpListener>,
    listener_index: usize,
    worker: Rc<Worker<H>>,
) {
    loop {
        let accepted = listener.accept().await;
        if worker.shared.shutdown.is_triggered() {
            if let Ok((stream, _)) = accepted {
                close_refused(&stream);
            }
            break;
        }
        match accepted {
            Ok((stream, remote_addr)) => {
                accepted_connection(stream, remote_addr, listener_index, &worker);
            }
            Err(e) => {
                tracing::warn!(error = %e, "accept failed");
                if is_resource_exhaustion(&e) {
                    tokio::time::sleep(Duration::from_millis(ACCEPT_ERROR_BACKOFF_MS)).await;
                }
            }
        }
    }
}

/// Stops a listen socket: `shutdown(SHUT_RD)` on a listening TCP socket moves it out of LISTEN
/// (new connections are refused) and wakes every pending accept on it, on every worker's ring
/// (a state change wakes all waiters, exclusive ones too), which then fail with EINVAL.
///
/// Every worker calls this on its duplicate of the shared socket; the first call stops it, the
/// later ones find it no longer listening (ENOTCONN), which is the wanted state.
pub(crate) fn stop_listening(listener: &TcpListener) {
    match socket::shutdown(listener.as_raw_fd(), socket::Shutdown::Read) {
        Ok(()) | Err(nix::errno::Errno::ENOTCONN) => {}
        Err(e) => tracing::warn!(error = %e, "cannot shut down a listen socket"),
    }
}

fn close_refused(stream: &TcpStream) {
    if let Err(e) = stream.shutdown(std::net::Shutdown::Both) {
        tracing::debug!(error = %e, "shutdown of refused connection failed");
    }
}

/// Counts an accepted connection on the worker that is to serve it, then serves it here or
/// hands it to that worker.
fn accepted_connection<H: RequestHandler>(
    stream: TcpStream,
    remote_addr: SocketAddr,
    listener_index: usize,
    worker: &Rc<Worker<H>>,
) {
    let shared = &worker.shared;
    let slot = match shared.claim_connection_slot(remote_addr.ip()) {
        Ok(slot) => slot,
        Err(refused) => {
            log_refused(refused, remote_addr, worker);
            close_refused(&stream);
            return;
        }
    };
    let target = slot.worker_index();
    if target == worker.index {
        start_connection(stream, remote_addr, listener_index, slot, worker);
        return;
    }
    // The socket leaves this worker's runtime as a duplicate of its fd; the original closes
    // when `stream` drops, the connection stays open through the duplicate.
    let stream = match duplicate_stream(&stream) {
        Ok(duplicate) => duplicate,
        Err(e) => {
            tracing::warn!(%remote_addr, error = %e, "cannot hand a connection to another worker; closing it");
            close_refused(&stream);
            return;
        }
    };
    let handoff = Handoff {
        stream,
        remote_addr,
        listener_index,
        slot,
    };
    if let Err(unserved) = shared.hand_off(target, handoff) {
        // The target worker is shutting down: the connection closes with the hand-off.
        tracing::debug!(%remote_addr, target, "worker stopped taking connections; closing");
        drop(unserved);
    }
}

fn log_refused<H>(refused: Refused, remote_addr: SocketAddr, worker: &Worker<H>) {
    match refused {
        Refused::ConnectionsMax => tracing::warn!(
            %remote_addr,
            connections_max = worker.shared.connections_max,
            "too many connections; closing the new one"
        ),
        Refused::ConnectionsMaxPerIp => tracing::warn!(
            %remote_addr,
            connections_max_per_ip = worker.shared.config.connections_max_per_ip,
            "too many connections from this address; closing the new one"
        ),
    }
}

fn duplicate_stream(stream: &TcpStream) -> io::Result<std::net::TcpStream> {
    // SAFETY: `stream` owns this descriptor and outlives the borrow.
    let borrowed = unsafe { std::os::fd::BorrowedFd::borrow_raw(stream.as_raw_fd()) };
    // F_DUPFD_CLOEXEC.
    Ok(std::net::TcpStream::from(borrowed.try_clone_to_owned()?))
}

/// Serves the connections other workers accepted for this one, until shutdown; those that
/// arrive after it are closed.
pub(crate) async fn receive_handoffs<H: RequestHandler>(
    mut handoffs: tokio::sync::mpsc::UnboundedReceiver<Handoff<H>>,
    worker: Rc<Worker<H>>,
) {
    loop {
        let handoff = tokio::select! {
            biased;
            () = worker.shared.shutdown.triggered() => break,
            handoff = handoffs.recv() => handoff,
        };
        // The senders live as long as the server's shared state, which this worker holds.
        let Some(handoff) = handoff else { break };
        let Handoff {
            stream,
            remote_addr,
            listener_index,
            slot,
        } = handoff;
        debug_assert_eq!(slot.worker_index(), worker.index);
        let stream = TcpStream::from_std(stream);
        start_connection(stream, remote_addr, listener_index, slot, &worker);
    }
    // Dropping the receiver closes the queue: what was handed over after shutdown is dropped
    // with it (its socket closed, its slot given back), and later hand-offs fail and close.
    drop(handoffs);
}

fn start_connection<H: RequestHandler>(
    stream: TcpStream,
    remote_addr: SocketAddr,
    listener_index: usize,
    slot: ConnectionSlot<H>,
    worker: &Rc<Worker<H>>,
) {
    // Java sets TCP_NODELAY on every client channel (`NettyServerConfig`); responses are small
    // and latency-bound.
    if let Err(e) = stream.set_nodelay(true) {
        tracing::debug!(error = %e, "cannot set TCP_NODELAY");
    }
    let local_addr = match local_addr_of(&stream) {
        Ok(addr) => addr,
        Err(e) => {
            // getsockname fails only on a socket already torn down; nothing to serve.
            tracing::debug!(error = %e, %remote_addr, "getsockname failed; dropping connection");
            return;
        }
    };
    let id = NEXT_CONNECTION_ID.fetch_add(1, Ordering::Relaxed);
    let span = tracing::debug_span!(
        "conn",
        id,
        remote = %remote_addr,
        local = %local_addr,
        worker = worker.index,
        listener = listener_index
    );
    let accepted = Accepted {
        id,
        remote_addr,
        local_addr,
        listener_index,
    };
    let task = connection::serve(stream, accepted, worker.clone());
    drop(tokio_uring::spawn(
        async move {
            task.await;
            drop(slot);
        }
        .instrument(span),
    ));
}

fn local_addr_of(stream: &TcpStream) -> io::Result<SocketAddr> {
    let storage: SockaddrStorage =
        socket::getsockname(stream.as_raw_fd()).map_err(io::Error::from)?;
    if let Some(v4) = storage.as_sockaddr_in() {
        Ok(SocketAddr::V4((*v4).into()))
    } else if let Some(v6) = storage.as_sockaddr_in6() {
        Ok(SocketAddr::V6((*v6).into()))
    } else {
        Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "socket is neither IPv4 nor IPv6",
        ))
    }
}

fn is_resource_exhaustion(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::EMFILE | libc::ENFILE | libc::ENOBUFS | libc::ENOMEM)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addr_in_use(result: Result<std::net::TcpListener, ServerError>, addr: SocketAddr) {
        match result {
            Err(ServerError::AddrInUse { addr: a, source }) => {
                assert_eq!(a, addr);
                assert_eq!(source.kind(), io::ErrorKind::AddrInUse);
            }
            other => panic!("expected AddrInUse for {addr}, got {other:?}"),
        }
    }

    #[test]
    fn port_zero_binds_a_real_port() {
        let listener = bind_listener("127.0.0.1:0".parse().unwrap(), 16).unwrap();
        assert_ne!(listener.local_addr().unwrap().port(), 0);
    }

    #[test]
    fn a_second_listener_on_the_same_address_is_refused() {
        let first = bind_listener("127.0.0.1:0".parse().unwrap(), 16).unwrap();
        let addr = first.local_addr().unwrap();
        addr_in_use(bind_listener(addr, 16), addr);
        // The wildcard address overlaps every specific one.
        let wildcard = SocketAddr::new([0, 0, 0, 0].into(), addr.port());
        addr_in_use(bind_listener(wildcard, 16), wildcard);
    }

    #[test]
    fn a_reuseport_socket_of_another_program_cannot_join() {
        let first = bind_listener("127.0.0.1:0".parse().unwrap(), 16).unwrap();
        let addr = first.local_addr().unwrap();
        // What a second process binding with SO_REUSEPORT (as ringmq itself once did) does.
        let other = socket::socket(
            AddressFamily::Inet,
            SockType::Stream,
            SockFlag::SOCK_CLOEXEC,
            None,
        )
        .unwrap();
        socket::setsockopt(&other, sockopt::ReusePort, &true).unwrap();
        let joined = socket::bind(other.as_raw_fd(), &SockaddrStorage::from(addr));
        assert_eq!(joined, Err(nix::errno::Errno::EADDRINUSE));
    }

    #[test]
    fn an_address_freed_while_waiting_is_bound() {
        let held = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = held.local_addr().unwrap();
        let release = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(100));
            drop(held);
        });
        let started = Instant::now();
        let listener = bind_listener(addr, 16).unwrap();
        assert_eq!(listener.local_addr().unwrap(), addr);
        assert!(started.elapsed() < Duration::from_millis(BIND_IN_USE_WAIT_MS));
        release.join().unwrap();
    }

    #[test]
    fn a_plain_listener_makes_the_address_in_use() {
        let plain = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = plain.local_addr().unwrap();
        addr_in_use(bind_listener(addr, 16), addr);
    }

    #[test]
    fn exhaustion_errors_are_recognised_by_errno() {
        assert!(is_resource_exhaustion(&io::Error::from_raw_os_error(
            libc::EMFILE
        )));
        assert!(!is_resource_exhaustion(&io::Error::from_raw_os_error(
            libc::ECONNABORTED
        )));
    }
}
