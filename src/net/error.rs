//! Why the server could not start or stopped badly.

use std::net::SocketAddr;

/// Failures to start the server. Each names what to change.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    #[error("the server setting `{field}` has an invalid value `{value}`: {reason}")]
    InvalidConfig {
        field: &'static str,
        value: String,
        reason: &'static str,
    },
    #[error("cannot {op} the listen socket {addr}: {source}")]
    Socket {
        op: &'static str,
        addr: SocketAddr,
        #[source]
        source: std::io::Error,
    },
    /// Another socket (of this process or another one) already listens on `addr`.
    #[error(
        "cannot listen on {addr}: the address is already in use by another listening socket \
         ({source})"
    )]
    AddrInUse {
        addr: SocketAddr,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot spawn network worker thread {worker_index}: {source}")]
    SpawnThread {
        worker_index: usize,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "cannot create the io_uring runtime of network worker {worker_index} ({source}); check \
         that io_uring is allowed (sysctl kernel.io_uring_disabled, container seccomp profile), \
         that RLIMIT_MEMLOCK is large enough for `ring_entries`, and that the kernel is >= 5.11"
    )]
    RuntimeStart {
        worker_index: usize,
        #[source]
        source: std::io::Error,
    },
    #[error("network worker thread {worker_index} exited before it was ready (it panicked)")]
    WorkerDied { worker_index: usize },
    #[error("network worker thread {worker_index} panicked")]
    WorkerPanicked { worker_index: usize },
}

impl ServerError {
    /// The listen address another socket already holds, when that is why the server did not
    /// start. Callers use it to name the setting that chose the address.
    pub fn addr_in_use(&self) -> Option<SocketAddr> {
        match self {
            ServerError::AddrInUse { addr, .. } => Some(*addr),
            _ => None,
        }
    }
}

/// Why a call to a client ([`super::ConnectionSender::call`]) got no response.
#[derive(Debug, thiserror::Error)]
pub enum ClientCallError {
    #[error("{max} calls already wait for this client's responses")]
    TooManyPending { max: usize },
    #[error("the request could not be queued on the client's connection: {reason}")]
    NotSent { reason: String },
    #[error("the client's connection closed before it answered")]
    Closed,
    #[error("no response from the client within {timeout_ms} ms")]
    Timeout { timeout_ms: u64 },
}

/// The text of a caught panic's payload (a `&str` or `String` message), for the log and the
/// SYSTEM_ERROR remark that answer it.
pub(crate) fn panic_message(panic: &(dyn std::any::Any + Send)) -> &str {
    if let Some(s) = panic.downcast_ref::<&'static str>() {
        s
    } else if let Some(s) = panic.downcast_ref::<String>() {
        s
    } else {
        "non-string panic payload"
    }
}
