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
//! [`ProcessError`] is the one place where failures become response codes.

pub mod admin;
pub mod client_manage;
pub mod consumer_manage;
pub mod pull;
pub mod query;
pub mod send;

use crate::remoting::codes::response_code;
use crate::remoting::command::{HeaderError, RemotingCommand};

/// A request that cannot be served: the response code Java gives and a remark.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProcessError {
    pub code: i32,
    pub remark: String,
}

impl ProcessError {
    pub fn new(code: i32, remark: impl Into<String>) -> Self {
        ProcessError {
            code,
            remark: remark.into(),
        }
    }

    pub fn system(remark: impl Into<String>) -> Self {
        Self::new(response_code::SYSTEM_ERROR, remark)
    }

    /// The response carrying this error.
    pub fn into_response(self, request: &RemotingCommand) -> RemotingCommand {
        RemotingCommand::response_to(request, self.code, Some(self.remark))
    }
}

/// Java answers a header it cannot decode (a missing or non-numeric field) with SYSTEM_ERROR and
/// the exception text, which names the field.
impl From<HeaderError> for ProcessError {
    fn from(e: HeaderError) -> Self {
        ProcessError::system(e.to_string())
    }
}

impl From<crate::broker::config_manager::PersistError> for ProcessError {
    fn from(e: crate::broker::config_manager::PersistError) -> Self {
        ProcessError::system(format!("persisting broker metadata failed: {e}"))
    }
}

impl From<crate::store::StoreError> for ProcessError {
    fn from(e: crate::store::StoreError) -> Self {
        ProcessError::system(format!("store error: {e}"))
    }
}

/// A result of a processor: the response, or an error turned into one.
pub type ProcessResult = Result<RemotingCommand, ProcessError>;
