//! The bench's error types.
//!
//! [`RpcError`] is what one request can end with (cloneable: every pending request of a
//! closed connection gets its own copy). [`BenchError`] is everything that stops a run.

use std::io;

use ringmq::remoting::CodecError;

/// Why one request got no response.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RpcError {
    #[error("request to {addr} timed out after {timeout_ms} ms")]
    Timeout { addr: String, timeout_ms: u64 },
    #[error("connection to {addr} closed")]
    Closed { addr: String },
    #[error("too many requests in flight on the connection to {addr} (max {max})")]
    TooManyInFlight { addr: String, max: usize },
    #[error("cannot encode request {code}: {reason}")]
    Encode { code: i32, reason: String },
}

/// A failure that ends a run (a bad command line is clap's error).
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    #[error(
        "{addr} is not a loopback address: the bench only talks to loopback (127.0.0.0/8, ::1)"
    )]
    NotLoopback { addr: String },
    #[error("cannot resolve {addr}: {source}")]
    Resolve {
        addr: String,
        #[source]
        source: io::Error,
    },
    #[error("cannot connect to {addr}: {source}")]
    Connect {
        addr: String,
        #[source]
        source: io::Error,
    },
    #[error("i/o error on {what}: {source}")]
    Io {
        what: String,
        #[source]
        source: io::Error,
    },
    #[error("remoting codec: {0}")]
    Codec(#[from] CodecError),
    #[error(transparent)]
    Rpc(#[from] RpcError),
    #[error("{what}: answered code {code} ({remark})")]
    Response {
        what: String,
        code: i32,
        remark: String,
    },
    #[error("route of topic {topic}: {reason}")]
    Route { topic: String, reason: String },
    #[error("message record at byte {offset_bytes} of a pull body: {reason}")]
    Record {
        offset_bytes: usize,
        reason: &'static str,
    },
    #[error("cannot write {path}: {source}")]
    Report {
        path: String,
        #[source]
        source: io::Error,
    },
    #[error("bad report {path}: {reason}")]
    BadReport { path: String, reason: String },
    #[error("--broker-pid {pid}: cannot read {path} (is it a running process?): {source}")]
    BrokerPidRead {
        pid: u32,
        path: String,
        #[source]
        source: io::Error,
    },
    #[error("--broker-pid {pid}: {reason}")]
    BrokerPid { pid: u32, reason: String },
}
