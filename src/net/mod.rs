//! The network runtime: serves the remoting protocol over TCP on io_uring (tokio-uring).
//!
//! # Shape
//! - [`serve`] binds every listen address once per worker thread with `SO_REUSEPORT`, so the kernel
//!   spreads incoming connections over the workers; each worker is one OS thread running its own
//!   tokio-uring runtime (one io_uring per thread). A connection lives on the thread that accepted
//!   it; there is no thread per connection.
//! - Each connection is split into a reader task (frames, dispatches without waiting, bounded by
//!   [`ServerConfig::requests_in_flight_max_per_connection`]), one task per in-flight request
//!   running [`RequestHandler::handle`], and a single writer task fed by a bounded queue
//!   ([`ServerConfig::write_queue_max_per_connection`]) that coalesces queued frames into one write.
//! - [`ConnectionSender`] lets any thread push a frame to a connection (held responses, broker to
//!   client requests) without blocking.
//!
//! See `docs/ARCHITECTURE-network.md` for the reasoning behind each choice.

mod config;
mod connection;
mod listener;
pub mod remoting_client;
mod runtime;
mod writer;
pub mod zerocopy;

pub use config::{
    ServerConfig, CONNECTIONS_MAX, FAST_LISTEN_PORT_OFFSET, LISTEN_BACKLOG,
    READ_BUFFER_INITIAL_BYTES, REQUESTS_IN_FLIGHT_MAX_PER_CONNECTION, RING_ENTRIES,
    SHUTDOWN_GRACE_MS, WRITE_COALESCE_MAX_BYTES, WRITE_QUEUE_MAX_PER_CONNECTION,
};
pub use connection::ConnectionContext;
pub use runtime::{serve, ServerHandle, ShutdownSignal};
pub use writer::{ConnectionSender, FileFrame, Outbound, SendError};
pub use zerocopy::{FileRange, PIPES_MAX_PER_THREAD, PIPE_SIZE_BYTES};

use crate::remoting::command::RemotingCommand;
use std::future::Future;
use std::net::SocketAddr;

/// What the broker (or name server) plugs into the runtime.
///
/// One handler instance is shared by every worker thread, hence `Send + Sync`. The futures it
/// returns run on the runtime thread of the connection and need not be `Send`.
pub trait RequestHandler: Send + Sync + 'static {
    /// Handles one request.
    ///
    /// `Some(response)` is sent back with the request's opaque (the runtime sets opaque and the
    /// response flag, so a handler cannot mis-correlate). `None` means no response now: the
    /// request is oneway, or the response is held and will be sent later through
    /// `conn.sender()` (long polling). A response returned for a oneway request is dropped.
    /// A panic inside the future is caught and answered with `SYSTEM_ERROR` (unless oneway).
    fn handle(
        &self,
        conn: ConnectionContext,
        request: RemotingCommand,
    ) -> impl Future<Output = Option<RemotingCommand>>;

    /// Called once, on the connection's thread, after the connection is closed and its writer has
    /// stopped (so `conn.sender().is_closed()` is true).
    fn on_connection_closed(&self, conn: &ConnectionContext) {
        let _ = conn;
    }
}

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
