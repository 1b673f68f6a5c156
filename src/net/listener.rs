//! Listen sockets and the accept loop.
//!
//! Every worker binds its own socket to each listen address with `SO_REUSEPORT`; the kernel then
//! hashes each new connection to one socket of the group, so accepted connections spread over the
//! workers without a shared accept queue or a hand-off between threads.

use super::connection::{self, Accepted};
use super::error::ServerError;
use super::handler::RequestHandler;
use super::worker::Worker;
use nix::sys::socket::{
    self, sockopt, AddressFamily, Backlog, SockFlag, SockType, SockaddrStorage,
};
use std::io;
use std::net::SocketAddr;
use std::os::fd::{AsRawFd, OwnedFd};
use std::rc::Rc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;
use tokio_uring::net::{TcpListener, TcpStream};
use tracing::Instrument;

/// After an accept error that is likely to repeat at once (out of file descriptors or memory),
/// wait this long before accepting again instead of spinning on the error.
const ACCEPT_ERROR_BACKOFF_MS: u64 = 100;

/// Connection ids are unique per process, across servers.
static NEXT_CONNECTION_ID: AtomicU64 = AtomicU64::new(1);

/// Creates a listening TCP socket on `addr` with `SO_REUSEADDR` (as Java's server socket: a
/// restarted broker can bind while old connections are in TIME_WAIT) and `SO_REUSEPORT` (so every
/// worker can bind the same address).
pub(crate) fn bind_reuseport(
    addr: SocketAddr,
    backlog: u32,
) -> Result<std::net::TcpListener, ServerError> {
    let err = |op: &'static str| {
        move |e: nix::errno::Errno| ServerError::Socket {
            op,
            addr,
            source: io::Error::from(e),
        }
    };
    let family = if addr.is_ipv4() {
        AddressFamily::Inet
    } else {
        AddressFamily::Inet6
    };
    let fd: OwnedFd = socket::socket(family, SockType::Stream, SockFlag::SOCK_CLOEXEC, None)
        .map_err(err("create"))?;
    socket::setsockopt(&fd, sockopt::ReuseAddr, &true).map_err(err("set SO_REUSEADDR on"))?;
    socket::setsockopt(&fd, sockopt::ReusePort, &true).map_err(err("set SO_REUSEPORT on"))?;
    socket::bind(fd.as_raw_fd(), &SockaddrStorage::from(addr)).map_err(err("bind"))?;
    // ServerConfig::validate keeps the backlog within i32.
    let backlog = i32::try_from(backlog).unwrap_or(i32::MAX);
    let backlog = Backlog::new(backlog).map_err(err("listen on"))?;
    socket::listen(&fd, backlog).map_err(err("listen on"))?;
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
                start_connection(stream, remote_addr, listener_index, &worker)
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
/// (new connections are refused) and wakes a pending accept, which then fails with EINVAL.
pub(crate) fn stop_listening(listener: &TcpListener) {
    if let Err(e) = socket::shutdown(listener.as_raw_fd(), socket::Shutdown::Read) {
        tracing::warn!(error = %e, "cannot shut down a listen socket");
    }
}

fn close_refused(stream: &TcpStream) {
    if let Err(e) = stream.shutdown(std::net::Shutdown::Both) {
        tracing::debug!(error = %e, "shutdown of refused connection failed");
    }
}

fn start_connection<H: RequestHandler>(
    stream: TcpStream,
    remote_addr: SocketAddr,
    listener_index: usize,
    worker: &Rc<Worker<H>>,
) {
    let Some(slot) = worker.claim_connection_slot() else {
        tracing::warn!(
            %remote_addr,
            connections_max = worker.shared.config.connections_max,
            "too many connections; closing the new one"
        );
        close_refused(&stream);
        return;
    };
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

    #[test]
    fn two_sockets_share_a_port_with_reuseport() {
        let first = bind_reuseport("127.0.0.1:0".parse().unwrap(), 16).unwrap();
        let addr = first.local_addr().unwrap();
        assert_ne!(addr.port(), 0);
        let second = bind_reuseport(addr, 16).unwrap();
        assert_eq!(second.local_addr().unwrap(), addr);
    }

    #[test]
    fn bind_error_names_the_operation_and_address() {
        // A plain socket without SO_REUSEPORT makes the port unavailable to the reuseport group.
        let plain = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = plain.local_addr().unwrap();
        match bind_reuseport(addr, 16) {
            Err(ServerError::Socket {
                op: "bind",
                addr: a,
                source,
            }) => {
                assert_eq!(a, addr);
                assert_eq!(source.kind(), io::ErrorKind::AddrInUse);
            }
            other => panic!("expected a bind error, got {other:?}"),
        }
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
