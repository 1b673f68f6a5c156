//! Admin and offset queries: Java `AdminBrokerProcessor` for UPDATE_AND_CREATE_TOPIC (17),
//! GET_ALL_TOPIC_CONFIG (21), SEARCH_OFFSET_BY_TIMESTAMP (29),
//! GET_MAX_OFFSET (30), GET_MIN_OFFSET (31), GET_EARLIEST_MSG_STORETIME (32),
//! GET_ALL_CONSUMER_OFFSET (43), GET_ALL_DELAY_OFFSET (45), GET_ALL_SUBSCRIPTIONGROUP_CONFIG
//! (201), INVOKE_BROKER_TO_RESET_OFFSET (222), GET_CONSUMER_RUNNING_INFO (307).
//! GET_BROKER_RUNTIME_INFO (28) is in `runtime_info.rs`.

use bytes::Bytes;

use crate::common::topic_validator::validate_topic;
use crate::remoting::body::{TopicConfig, TopicFilterType};
use crate::remoting::codes::response_code as rc;
use crate::remoting::command::RemotingCommand;
use crate::remoting::headers::{
    BoundaryType, CreateTopicRequestHeader, GetConsumerRunningInfoRequestHeader,
    GetEarliestMsgStoretimeRequestHeader, GetEarliestMsgStoretimeResponseHeader,
    GetMaxOffsetRequestHeader, GetMaxOffsetResponseHeader, GetMinOffsetRequestHeader,
    GetMinOffsetResponseHeader, ResetOffsetRequestHeader, SearchOffsetRequestHeader,
    SearchOffsetResponseHeader,
};
use crate::store;

use super::{respond, ProcessResult, RequestContext};
use crate::broker::client::broker2client;
use crate::broker::error::BrokerError;
use crate::common::now_ms;

/// Most queues a topic may have through UPDATE_AND_CREATE_TOPIC (bounds per-topic state).
pub const TOPIC_QUEUE_NUMS_MAX: i32 = 1024;

pub async fn update_and_create_topic(
    cx: &RequestContext<'_>,
    request: &RemotingCommand,
) -> ProcessResult {
    let ctrl = cx.ctrl;
    let header = CreateTopicRequestHeader::decode(request)?;
    validate_topic(&header.topic, true)?;
    if header.topic == ctrl.config.broker.cluster_name || header.topic == ctrl.config.broker.name {
        return Err(BrokerError::TopicNameConflict {
            topic: header.topic,
        });
    }
    for (field, value) in [
        ("readQueueNums", header.read_queue_nums),
        ("writeQueueNums", header.write_queue_nums),
    ] {
        if !(1..=TOPIC_QUEUE_NUMS_MAX).contains(&value) {
            return Err(BrokerError::QueueNumsOutOfRange {
                field,
                value,
                max: TOPIC_QUEUE_NUMS_MAX,
            });
        }
    }
    let filter_type = match header.topic_filter_type.as_str() {
        "MULTI_TAG" => TopicFilterType::MultiTag,
        _ => TopicFilterType::SingleTag,
    };
    let tc = TopicConfig {
        topic_name: header.topic.clone(),
        read_queue_nums: header.read_queue_nums,
        write_queue_nums: header.write_queue_nums,
        perm: header.perm,
        topic_filter_type: filter_type,
        topic_sys_flag: header.topic_sys_flag.unwrap_or(0),
        order: header.order,
        ..TopicConfig::default()
    };
    ctrl.topics.update_topic_config(tc.clone())?;
    ctrl.create_queue_files(&tc);
    ctrl.notify_topics_changed();
    respond(RemotingCommand::response_to(request, rc::SUCCESS, None))
}

pub async fn get_all_topic_config(
    cx: &RequestContext<'_>,
    request: &RemotingCommand,
) -> ProcessResult {
    let ctrl = cx.ctrl;
    let body = serde_json::to_vec(&ctrl.topics.wrapper()).map_err(BrokerError::TopicTableEncode)?;
    respond(RemotingCommand::response_to(request, rc::SUCCESS, None).with_body(Bytes::from(body)))
}

pub async fn get_all_consumer_offset(
    cx: &RequestContext<'_>,
    request: &RemotingCommand,
) -> ProcessResult {
    let ctrl = cx.ctrl;
    let body = ctrl.offsets.encode();
    respond(RemotingCommand::response_to(request, rc::SUCCESS, None).with_body(Bytes::from(body)))
}

pub async fn get_all_subscription_group_config(
    cx: &RequestContext<'_>,
    request: &RemotingCommand,
) -> ProcessResult {
    let ctrl = cx.ctrl;
    let body = serde_json::json!({
        "subscriptionGroupTable": ctrl.groups.all(),
        "forbiddenTable": {},
        "dataVersion": {"counter": 0, "stateVersion": 0, "timestamp": now_ms()},
    });
    respond(
        RemotingCommand::response_to(request, rc::SUCCESS, None)
            .with_body(Bytes::from(body.to_string())),
    )
}

/// GET_ALL_DELAY_OFFSET (45): delayed delivery's progress, the body Java's
/// `ScheduleMessageService.encode` gives (delayOffset.json's text); a slave's sync reads it.
pub async fn get_all_delay_offset(
    cx: &RequestContext<'_>,
    request: &RemotingCommand,
) -> ProcessResult {
    let offsets = cx
        .ctrl
        .schedule_offsets
        .read()
        .unwrap_or_else(|p| p.into_inner())
        .clone();
    let body = crate::broker::schedule_message_service::encode_offsets(&offsets);
    respond(RemotingCommand::response_to(request, rc::SUCCESS, None).with_body(Bytes::from(body)))
}

pub async fn get_max_offset(cx: &RequestContext<'_>, request: &RemotingCommand) -> ProcessResult {
    let ctrl = cx.ctrl;
    let header = GetMaxOffsetRequestHeader::decode(request)?;
    let offset = ctrl
        .store
        .max_offset_in_queue(&header.topic, header.queue_id);
    let mut response = RemotingCommand::response_to(request, rc::SUCCESS, None);
    GetMaxOffsetResponseHeader { offset }.encode(&mut response);
    respond(response)
}

pub async fn get_min_offset(cx: &RequestContext<'_>, request: &RemotingCommand) -> ProcessResult {
    let ctrl = cx.ctrl;
    let header = GetMinOffsetRequestHeader::decode(request)?;
    let offset = ctrl
        .store
        .min_offset_in_queue(&header.topic, header.queue_id);
    let mut response = RemotingCommand::response_to(request, rc::SUCCESS, None);
    GetMinOffsetResponseHeader { offset }.encode(&mut response);
    respond(response)
}

pub async fn search_offset_by_timestamp(
    cx: &RequestContext<'_>,
    request: &RemotingCommand,
) -> ProcessResult {
    let ctrl = cx.ctrl;
    let header = SearchOffsetRequestHeader::decode(request)?;
    let boundary = match header.boundary_type {
        BoundaryType::Lower => store::BoundaryType::Lower,
        BoundaryType::Upper => store::BoundaryType::Upper,
    };
    let offset = ctrl.store.offset_by_timestamp(
        &header.topic,
        header.queue_id,
        header.timestamp,
        boundary,
    )?;
    let mut response = RemotingCommand::response_to(request, rc::SUCCESS, None);
    SearchOffsetResponseHeader { offset }.encode(&mut response);
    respond(response)
}

/// INVOKE_BROKER_TO_RESET_OFFSET (222): Java `AdminBrokerProcessor.resetOffset` through
/// `Broker2Client.resetOffset`; answers the new offsets (`ResetOffsetBody`).
pub async fn invoke_broker_to_reset_offset(
    cx: &RequestContext<'_>,
    request: &RemotingCommand,
) -> ProcessResult {
    let header = ResetOffsetRequestHeader::decode(request)?;
    let body = broker2client::reset_offset(cx.ctrl, &header)?;
    respond(
        RemotingCommand::response_to(request, rc::SUCCESS, None).with_body(body.encode().into()),
    )
}

/// GET_CONSUMER_RUNNING_INFO (307): Java `AdminBrokerProcessor.getConsumerRunningInfo`, the
/// request relayed to the client and the client's response relayed back.
pub async fn get_consumer_running_info(
    cx: &RequestContext<'_>,
    request: &RemotingCommand,
) -> ProcessResult {
    let header = GetConsumerRunningInfoRequestHeader::decode(request)?;
    let answer =
        broker2client::call_consumer(cx.ctrl, request, &header.consumer_group, &header.client_id)
            .await?;
    let mut response = RemotingCommand::response_to(request, answer.code, answer.remark);
    response.ext_fields = answer.ext_fields;
    response.body = answer.body;
    respond(response)
}

pub async fn get_earliest_msg_storetime(
    cx: &RequestContext<'_>,
    request: &RemotingCommand,
) -> ProcessResult {
    let ctrl = cx.ctrl;
    let header = GetEarliestMsgStoretimeRequestHeader::decode(request)?;
    // Java answers -1 when the queue has no message.
    let timestamp = ctrl
        .store
        .earliest_message_store_time(&header.topic, header.queue_id)?
        .unwrap_or(-1);
    let mut response = RemotingCommand::response_to(request, rc::SUCCESS, None);
    GetEarliestMsgStoretimeResponseHeader { timestamp }.encode(&mut response);
    respond(response)
}
