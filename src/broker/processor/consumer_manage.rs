//! GET_CONSUMER_LIST_BY_GROUP (38), QUERY_CONSUMER_OFFSET (14), UPDATE_CONSUMER_OFFSET (15):
//! Java `ConsumerManageProcessor`.

use bytes::Bytes;

use crate::broker::controller::BrokerController;
use crate::remoting::codes::response_code as rc;
use crate::remoting::command::RemotingCommand;
use crate::remoting::headers::{
    GetConsumerListByGroupRequestHeader, QueryConsumerOffsetRequestHeader,
    QueryConsumerOffsetResponseHeader, UpdateConsumerOffsetRequestHeader,
};
use crate::store::filter::AcceptAll;
use crate::store::GetMessageRequest;

use super::{respond, ProcessResult, RequestContext};
use crate::broker::error::BrokerError;

pub async fn get_consumer_list_by_group(
    cx: &RequestContext<'_>,
    request: &RemotingCommand,
) -> ProcessResult {
    let ctrl = cx.ctrl;
    let header = GetConsumerListByGroupRequestHeader::decode(request)?;
    let ids = ctrl
        .consumers
        .group(&header.consumer_group)
        .map(|g| g.client_ids())
        .unwrap_or_default();
    if ids.is_empty() {
        return Err(BrokerError::NoConsumerInGroup {
            group: header.consumer_group,
        });
    }
    let body = serde_json::json!({ "consumerIdList": ids }).to_string();
    respond(RemotingCommand::response_to(request, rc::SUCCESS, None).with_body(Bytes::from(body)))
}

/// Java semantics: a stored offset answers SUCCESS; otherwise, unless the client asked not to,
/// offset 0 is answered when the queue still holds its first message in memory (a brand-new
/// queue), else QUERY_NOT_FOUND (the client then applies its consume-from-where policy).
pub async fn query_consumer_offset(
    cx: &RequestContext<'_>,
    request: &RemotingCommand,
) -> ProcessResult {
    let ctrl = cx.ctrl;
    let header = QueryConsumerOffsetRequestHeader::decode(request)?;
    if let Some(offset) =
        ctrl.offsets
            .query_offset(&header.consumer_group, &header.topic, header.queue_id)
    {
        if offset >= 0 {
            return respond(offset_response(request, offset));
        }
    }
    let set_zero = header.set_zero_if_not_found.unwrap_or(true);
    if set_zero {
        let min = ctrl
            .store
            .min_offset_in_queue(&header.topic, header.queue_id);
        if min <= 0 && !check_in_disk_by_consume_offset(ctrl, &header.topic, header.queue_id, 0)? {
            return respond(offset_response(request, 0));
        }
    }
    Err(BrokerError::ConsumerOffsetNotFound)
}

/// Java `checkInDiskByConsumeOffset`: true only when the queue has a message at `offset` and
/// that message lies outside the in-memory window behind the CommitLog head.
fn check_in_disk_by_consume_offset(
    ctrl: &BrokerController,
    topic: &str,
    queue_id: i32,
    offset: i64,
) -> Result<bool, BrokerError> {
    let result = ctrl.store.get_message(&GetMessageRequest {
        group: "",
        topic,
        queue_id,
        queue_offset: offset,
        max_msg_nums: 1,
        filter: &AcceptAll,
    })?;
    let Some((phy_offset, _)) = result.message_locations.first() else {
        return Ok(false);
    };
    let behind_head = ctrl.store.max_phy_offset() - phy_offset;
    Ok(behind_head > ctrl.store.config().memory_window_bytes())
}

fn offset_response(request: &RemotingCommand, offset: i64) -> RemotingCommand {
    let mut response = RemotingCommand::response_to(request, rc::SUCCESS, None);
    QueryConsumerOffsetResponseHeader { offset }.encode(&mut response);
    response
}

pub async fn update_consumer_offset(
    cx: &RequestContext<'_>,
    request: &RemotingCommand,
) -> ProcessResult {
    let ctrl = cx.ctrl;
    let header = UpdateConsumerOffsetRequestHeader::decode(request)?;
    if ctrl.groups.find(&header.consumer_group).is_none() {
        return Err(BrokerError::SubscriptionGroupNotExist {
            group: header.consumer_group,
        });
    }
    let Some(topic_config) = ctrl.topics.select(&header.topic) else {
        return Err(BrokerError::TopicNotExist {
            topic: header.topic,
        });
    };
    // Java's `ConsumerManageProcessor` stores any queueId of a known topic; each one is an entry
    // of the offset table kept and persisted forever, so a client could grow it without bound.
    // Only the queues a consumer can read are accepted, as the pull checks them.
    if header.queue_id < 0 || header.queue_id >= topic_config.read_queue_nums {
        return Err(BrokerError::OffsetQueueIdIllegal {
            queue_id: header.queue_id,
            topic: header.topic,
            read_queue_nums: topic_config.read_queue_nums,
        });
    }
    ctrl.offsets.commit_offset(
        &header.consumer_group,
        &header.topic,
        header.queue_id,
        header.commit_offset,
    );
    if ctrl.is_slave() {
        // Kept against the master's older offsets when the sync brings them
        // (`slave_sync_state::merge_offset`).
        ctrl.slave_sync.note_slave_commit(
            &header.consumer_group,
            &header.topic,
            header.queue_id,
            header.commit_offset,
        );
    }
    respond(RemotingCommand::response_to(request, rc::SUCCESS, None))
}
