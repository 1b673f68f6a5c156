//! VIEW_MESSAGE_BY_ID (33): Java `QueryMessageProcessor.viewMessageById`. The client decodes an
//! offset msgId into (store host, CommitLog offset) and asks that broker for the record.

use crate::remoting::codes::response_code as rc;
use crate::remoting::command::RemotingCommand;
use crate::remoting::headers::ViewMessageRequestHeader;

use super::{respond, ProcessResult, RequestContext};
use crate::broker::error::BrokerError;

pub async fn view_message_by_id(
    cx: &RequestContext<'_>,
    request: &RemotingCommand,
) -> ProcessResult {
    let ctrl = cx.ctrl;
    let header = ViewMessageRequestHeader::decode(request)?;
    match ctrl.store.look_message_by_offset(header.offset)? {
        Some(record) => {
            respond(RemotingCommand::response_to(request, rc::SUCCESS, None).with_body(record))
        }
        None => Err(BrokerError::MessageNotFound {
            offset: header.offset,
        }),
    }
}
