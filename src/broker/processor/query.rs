//! VIEW_MESSAGE_BY_ID (33): Java `QueryMessageProcessor.viewMessageById`. The client decodes an
//! offset msgId into (store host, CommitLog offset) and asks that broker for the record.

use std::sync::Arc;

use crate::broker::controller::BrokerController;
use crate::remoting::codes::response_code as rc;
use crate::remoting::command::RemotingCommand;
use crate::remoting::headers::ViewMessageRequestHeader;

use super::ProcessResult;
use crate::broker::error::BrokerError;

pub fn view_message_by_id(
    ctrl: &Arc<BrokerController>,
    request: &RemotingCommand,
) -> ProcessResult {
    let h = ViewMessageRequestHeader::decode(request)?;
    match ctrl.store.look_message_by_offset(h.offset)? {
        Some(record) => {
            Ok(RemotingCommand::response_to(request, rc::SUCCESS, None).with_body(record))
        }
        None => Err(BrokerError::MessageNotFound { offset: h.offset }),
    }
}
