//! The network runtime: serves the remoting protocol over TCP on io_uring (tokio-uring).
//!
//! # Shape
//! - [`serve`] binds one listening socket per address ([`bind_listener`], without `SO_REUSEPORT`,
//!   so an address in use fails the start) and every worker accepts on its own duplicate of it,
//!   so idle workers take the new connections in turn; each worker is one OS thread running its
//!   own tokio-uring runtime (one io_uring per thread). A connection lives on the thread that
//!   accepted it; there is no thread per connection.
//! - Each connection is split into a reader task (frames, dispatches without waiting, bounded by
//!   [`ServerConfig::requests_in_flight_max_per_connection`]), one task per in-flight request
//!   running [`RequestHandler::handle`], and a single writer task fed by a bounded queue
//!   ([`ServerConfig::write_queue_max_per_connection`]) that coalesces queued frames into one write.
//! - [`ConnectionSender`] lets any thread push a frame to a connection (held responses, broker to
//!   client requests) without blocking, and [`ConnectionSender::call`] sends a request to the
//!   client and awaits its response: the connection's reader hands response frames to the
//!   pending call with their opaque (at most [`PENDING_CALLS_MAX_PER_CONNECTION`] per
//!   connection, each with a timeout).
//!
//! # Files
//! Imports point one way, from the bottom of this list up:
//! `error`, `config` (settings), `call` (pending server → client calls), `shutdown` (stop
//! signals), `zerocopy` (file → socket splices),
//! `writer` (outbound queue and writer task), `handler` (the trait the broker implements and
//! the connection context it gets), `worker` (server-wide and per-thread state), `connection`
//! (reader and request tasks), `listener` (listen sockets, accept loop), `runtime` (threads,
//! startup, shutdown). `remoting_client` is a separate blocking client. This file only declares
//! and re-exports; the test at its end checks the order. Outside `net`, the files import only
//! `crate::remoting`, `crate::config` and `crate::common`.
//!
//! See `docs/ARCHITECTURE.md`, section "Network runtime", for the reasoning behind each choice.

mod call;
mod config;
mod connection;
mod error;
mod handler;
mod listener;
pub mod remoting_client;
mod runtime;
mod shutdown;
mod worker;
mod writer;
pub mod zerocopy;

pub use config::{
    presize_fd_table, ServerConfig, CHANNEL_MAX_IDLE_TIME_MS, CONNECTIONS_FD_HEADROOM,
    CONNECTIONS_MAX, CONNECTIONS_MAX_PER_IP, FAST_LISTEN_PORT_OFFSET, FD_TABLE_PRESIZE_FDS,
    FRAME_READ_TIMEOUT_MS, LISTEN_BACKLOG, PENDING_CALLS_MAX_PER_CONNECTION,
    READ_BUFFER_INITIAL_BYTES, REQUESTS_IN_FLIGHT_MAX_PER_CONNECTION, RING_ENTRIES,
    SHUTDOWN_GRACE_MS, WRITE_COALESCE_MAX_BYTES, WRITE_QUEUE_MAX_BYTES_PER_CONNECTION,
    WRITE_QUEUE_MAX_PER_CONNECTION,
};
pub use error::{ClientCallError, ServerError};
pub use handler::{ConnectionContext, RequestHandler};
pub use listener::bind_listener;
pub use runtime::{bind, serve, BoundServer, ServerHandle};
pub use shutdown::ShutdownSignal;
pub use worker::LiveConnections;
pub use writer::{ConnectionSender, DeferredFrame, FileFrame, Outbound, SendError};
pub use zerocopy::{FileRange, PIPES_MAX_PER_THREAD, PIPE_SIZE_BYTES};

#[cfg(test)]
mod tests {
    /// The files of this module, lowest first. A file may import only files listed before it,
    /// so imports point one way and there is no circle.
    const FILES_BY_LAYER: [(&str, &str); 12] = [
        ("remoting_client", include_str!("remoting_client.rs")),
        ("error", include_str!("error.rs")),
        ("config", include_str!("config.rs")),
        ("call", include_str!("call.rs")),
        ("shutdown", include_str!("shutdown.rs")),
        ("zerocopy", include_str!("zerocopy.rs")),
        ("writer", include_str!("writer.rs")),
        ("handler", include_str!("handler.rs")),
        ("worker", include_str!("worker.rs")),
        ("connection", include_str!("connection.rs")),
        ("listener", include_str!("listener.rs")),
        ("runtime", include_str!("runtime.rs")),
    ];

    /// The code of a file before its test module, without comment lines (doc links may point
    /// anywhere; they are not imports).
    fn code_lines(text: &str) -> impl Iterator<Item = &str> {
        text.lines()
            .take_while(|line| !line.starts_with("#[cfg(test)]"))
            .filter(|line| !line.trim_start().starts_with("//"))
    }

    #[test]
    fn imports_point_one_way() {
        for (layer, (name, text)) in FILES_BY_LAYER.iter().enumerate() {
            for line in code_lines(text) {
                for (at, _) in line.match_indices("super::") {
                    let target: String = line[at + "super::".len()..]
                        .chars()
                        .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                        .collect();
                    assert!(
                        FILES_BY_LAYER[..layer].iter().any(|(n, _)| *n == target),
                        "{name}.rs imports `super::{target}`, which is not a file below it: {line}"
                    );
                }
            }
        }
    }

    #[test]
    fn every_file_has_a_layer() {
        for line in include_str!("mod.rs").lines() {
            let Some(name) = line
                .trim_start_matches("pub ")
                .strip_prefix("mod ")
                .and_then(|rest| rest.strip_suffix(';'))
            else {
                continue;
            };
            assert!(
                FILES_BY_LAYER.iter().any(|(n, _)| *n == name),
                "{name}.rs is missing from FILES_BY_LAYER"
            );
        }
    }
}
