//! Request processors, one handler per request code, named after RocketMQ's Java processors so
//! each can be read beside its Java counterpart:
//!
//! | Java processor | file |
//! | --- | --- |
//! | `SendMessageProcessor` (send, batch send, send back) | `send.rs` |
//! | `PullMessageProcessor` (pull, lite pull) | `pull.rs` |
//! | `ConsumerManageProcessor` (offsets, consumer list) | `consumer_manage.rs` |
//! | `ClientManageProcessor` (heartbeat, unregister, check config) | `client_manage.rs` |
//! | `AdminBrokerProcessor` (topics, offsets by time, runtime info) | `admin.rs` |
//! | `QueryMessageProcessor` (view by id) | `query.rs` |
//!
//! Failures are [`BrokerError`]s; [`BrokerError::response_code`] is the one place where they
//! become response codes.

pub mod admin;
pub mod client_manage;
pub mod consumer_manage;
pub mod pull;
pub mod query;
pub mod send;

use super::error::BrokerError;
use crate::remoting::command::RemotingCommand;

/// A result of a processor: the response, or the error that becomes one.
pub type ProcessResult = Result<RemotingCommand, BrokerError>;
