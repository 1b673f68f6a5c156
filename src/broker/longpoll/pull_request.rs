//! A pull parked by long polling (Java `PullRequest` of `broker.longpolling`): the decoded
//! request plus what is needed to answer it later. It owns all of it, so it borrows no queue or
//! connection state while it waits.

use std::net::SocketAddr;
use std::sync::Arc;

use crate::filter::ExpressionMessageFilter;
use crate::net::{ConnectionContext, ConnectionSender};
use crate::remoting::command::{RemotingCommand, SerializeType};
use crate::remoting::headers::PullMessageRequestHeader;

use super::connection_parks::ParkPermit;
use super::hold_table::ParkedPull;

/// What a request carried besides its header and body: enough to answer it after the request
/// itself is gone.
#[derive(Debug, Clone, Copy)]
pub struct RequestEnvelope {
    pub code: i32,
    pub opaque: i32,
    pub version: i32,
    pub serialize_type: SerializeType,
    pub remote_addr: SocketAddr,
    /// The connection it came on ([`ConnectionContext::id`]), whose parked pulls are bounded.
    pub connection_id: u64,
}

impl RequestEnvelope {
    pub fn of(request: &RemotingCommand, conn: &ConnectionContext) -> Self {
        RequestEnvelope {
            code: request.code,
            opaque: request.opaque,
            version: request.version,
            serialize_type: request.serialize_type,
            remote_addr: conn.remote_addr,
            connection_id: conn.id,
        }
    }

    /// An empty response with this request's opaque and encoding.
    pub fn response(&self, code: i32, remark: Option<String>) -> RemotingCommand {
        let mut shell = RemotingCommand::request(self.code);
        shell.opaque = self.opaque;
        shell.serialize_type = self.serialize_type;
        RemotingCommand::response_to(&shell, code, remark)
    }
}

/// A pull parked in the hold table.
pub struct ParkedPullRequest {
    pub header: PullMessageRequestHeader,
    pub envelope: RequestEnvelope,
    pub filter: Arc<ExpressionMessageFilter>,
    pub sender: ConnectionSender,
    pub deadline_ms: i64,
    /// Its place among its connection's parked pulls, taken when it is parked.
    pub permit: Option<ParkPermit>,
}

impl std::fmt::Debug for ParkedPullRequest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ParkedPullRequest")
            .field("topic", &self.header.topic)
            .field("queue_id", &self.header.queue_id)
            .field("queue_offset", &self.header.queue_offset)
            .field("deadline_ms", &self.deadline_ms)
            .finish()
    }
}

impl ParkedPull for ParkedPullRequest {
    fn request_offset(&self) -> i64 {
        self.header.queue_offset
    }
    fn deadline_ms(&self) -> i64 {
        self.deadline_ms
    }
    fn matches(&self, tags_code: i64, properties: &[u8]) -> bool {
        self.filter.matches_arrival(tags_code, properties)
    }
    fn is_cancelled(&self) -> bool {
        self.sender.is_closed()
    }
}
