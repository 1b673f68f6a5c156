//! Message query (Java `QueryMessageProcessor`):
//! - QUERY_MESSAGE (12): the records the index holds under `topic#key` (a KEYS token, or the
//!   UNIQ_KEY, which is the msg id clients print), in a store time window;
//! - VIEW_MESSAGE_BY_ID (33): the client decodes an offset msgId into (store host, CommitLog
//!   offset) and asks that broker for the record.

use bytes::BytesMut;

use crate::remoting::codes::response_code as rc;
use crate::remoting::command::RemotingCommand;
use crate::remoting::frame::FRAME_SIZE_MAX_BYTES;
use crate::remoting::headers::{
    QueryMessageRequestHeader, QueryMessageResponseHeader, ViewMessageRequestHeader,
    UNIQUE_MSG_QUERY_FLAG,
};

use super::{respond, ProcessResult, RequestContext};
use crate::broker::error::BrokerError;

/// Java `defaultQueryMaxNum`: a query by unique key answers at most this many messages.
pub const DEFAULT_QUERY_MAX_NUM: usize = 32;
/// Most body bytes of a QUERY_MESSAGE response: a client refuses frames over
/// [`FRAME_SIZE_MAX_BYTES`], and 64 KiB is left for the header.
pub const QUERY_RESPONSE_BODY_MAX_BYTES: usize = FRAME_SIZE_MAX_BYTES - 64 * 1024;
/// Java's remark when nothing matched.
const QUERY_NOT_FOUND_REMARK: &str = "can not find message, maybe time range not correct";

pub async fn query_message(cx: &RequestContext<'_>, request: &RemotingCommand) -> ProcessResult {
    let header = QueryMessageRequestHeader::decode(request)?;
    let unique = request.ext_opt_str(UNIQUE_MSG_QUERY_FLAG) == Some("true");
    let max_num = if unique {
        DEFAULT_QUERY_MAX_NUM
    } else {
        usize::try_from(header.max_num).unwrap_or(0)
    };
    let result = cx.ctrl.store.query_message(
        &header.topic,
        &header.key,
        max_num,
        (header.begin_timestamp, header.end_timestamp),
        QUERY_RESPONSE_BODY_MAX_BYTES,
    )?;
    let found = result.buffer_total_size() > 0;
    let mut response = if found {
        let mut body = BytesMut::with_capacity(result.buffer_total_size());
        for record in &result.messages {
            body.extend_from_slice(record);
        }
        RemotingCommand::response_to(request, rc::SUCCESS, None).with_body(body.freeze())
    } else {
        RemotingCommand::response_to(
            request,
            rc::QUERY_NOT_FOUND,
            Some(QUERY_NOT_FOUND_REMARK.to_owned()),
        )
    };
    QueryMessageResponseHeader {
        index_last_update_timestamp: result.index_last_update_timestamp_ms,
        index_last_update_phyoffset: result.index_last_update_phy_offset,
    }
    .encode(&mut response);
    respond(response)
}

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
