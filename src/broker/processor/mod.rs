//! Request processors, one handler per request code, named after RocketMQ's Java processors so
//! each can be read beside its Java counterpart:
//!
//! | Java processor | file |
//! | --- | --- |
//! | `SendMessageProcessor` (send, batch send, send back) | `send.rs` |
//! | `PullMessageProcessor` (pull, lite pull) | `pull.rs` |
//! | `ConsumerManageProcessor` (offsets, consumer list) | `consumer_manage.rs` |
//! | `ClientManageProcessor` (heartbeat, unregister, check config) | `client_manage.rs` |
//! | `AdminBrokerProcessor` (topics, offsets by time, metadata tables) | `admin.rs` |
//! | `AdminBrokerProcessor.prepareRuntimeInfo` (GET_BROKER_RUNTIME_INFO) | `runtime_info.rs` |
//! | `AdminBrokerProcessor` (subscription groups: create/update, delete) | `admin_group.rs` |
//! | `AdminBrokerProcessor` (topic stats, consume stats) | `admin_stats.rs` |
//! | `AdminBrokerProcessor` (consumer and producer connections) | `admin_connection.rs` |
//! | `AdminBrokerProcessor` (delete topic, topic config) | `admin_topic.rs` |
//! | `AdminBrokerProcessor` (broker config: get, update) | `admin_config.rs` |
//! | `AdminBrokerProcessor` (orderly consumers' queue locks) | `lock.rs` |
//! | `QueryMessageProcessor` (view by id) | `query.rs` |
//! | `EndTransactionProcessor` (commit or rollback a half message) | `end_transaction.rs` |
//!
//! Every handler has one signature, `async fn(&RequestContext, &RemotingCommand) ->
//! ProcessResult`, so `dispatch` calls them all alike. Failures are [`BrokerError`]s; [`BrokerError::response_code`] is the one place where they
//! become response codes.

pub mod admin;
pub mod admin_config;
pub mod admin_connection;
pub mod admin_group;
pub mod admin_stats;
pub mod admin_topic;
pub mod client_manage;
pub mod consumer_manage;
pub mod end_transaction;
pub mod lock;
pub mod pull;
pub mod pull_wakeup;
pub mod query;
pub mod runtime_info;
pub mod send;

use super::controller::BrokerController;
use super::error::BrokerError;
use crate::net::ConnectionContext;
use crate::remoting::command::RemotingCommand;

/// What every processor is given besides the request: the broker and the connection the
/// request came on.
#[derive(Clone, Copy)]
pub struct RequestContext<'a> {
    pub ctrl: &'a BrokerController,
    pub conn: &'a ConnectionContext,
}

/// What a processor did with a request it could serve.
#[derive(Debug)]
pub enum Handled {
    /// Send this response back (nothing is sent for a oneway request).
    Response(RemotingCommand),
    /// The answer is already queued on the connection (a zero-copy pull response), or the
    /// connection closed: nothing to send back.
    Queued,
    /// The request waits in the hold table (long polling); its answer goes out later through
    /// the connection.
    Parked,
    /// Java answers nothing (END_TRANSACTION with the state unknown: the check-back decides);
    /// the processor has logged why.
    NoAnswer,
}

impl From<RemotingCommand> for Handled {
    fn from(response: RemotingCommand) -> Self {
        Handled::Response(response)
    }
}

/// The result of every processor: what it did, or why it could not serve the request.
pub type ProcessResult = Result<Handled, BrokerError>;

/// The result of a processor that answers with `response`.
pub fn respond(response: RemotingCommand) -> ProcessResult {
    Ok(Handled::Response(response))
}
