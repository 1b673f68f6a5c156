//! Offsets of topics and groups: Java `AdminBrokerProcessor.getTopicStatsInfo`
//! (GET_TOPIC_STATS_INFO 202) and `getConsumeStats` (GET_CONSUME_STATS 208).
//!
//! ringmq keeps no per-topic put or per-group get statistics (Java's `BrokerStatsManager`), so
//! `topicPutTps` and `consumeTps` are 0.0; and no pull-offset table, so a queue's `pullOffset`
//! is its consumer offset, which is what Java answers for a queue nobody pulled since start.

use std::collections::BTreeSet;

use bytes::Bytes;

use super::{respond, ProcessResult, RequestContext};
use crate::broker::controller::BrokerController;
use crate::broker::error::BrokerError;
use crate::remoting::body::admin::{ConsumeStats, OffsetWrapper, TopicOffset, TopicStatsTable};
use crate::remoting::body::lock_batch::MessageQueue;
use crate::remoting::codes::response_code as rc;
use crate::remoting::command::RemotingCommand;
use crate::remoting::headers::{GetConsumeStatsRequestHeader, GetTopicStatsInfoRequestHeader};

/// Java `GetConsumeStatsRequestHeader.TOPIC_NAME_SEPARATOR`.
const TOPIC_LIST_SEPARATOR: char = ';';

fn queue(ctrl: &BrokerController, topic: &str, queue_id: i32) -> MessageQueue {
    MessageQueue {
        topic: topic.to_string(),
        broker_name: ctrl.config.broker.name.clone(),
        queue_id,
    }
}

pub async fn get_topic_stats_info(
    cx: &RequestContext<'_>,
    request: &RemotingCommand,
) -> ProcessResult {
    let ctrl = cx.ctrl;
    let topic = GetTopicStatsInfoRequestHeader::decode(request)?.topic;
    let Some(tc) = ctrl.topics.select(&topic) else {
        return Err(BrokerError::StatsTopicNotExist { topic });
    };
    let mut table = TopicStatsTable::default();
    for queue_id in 0..tc.write_queue_nums.max(tc.read_queue_nums) {
        let min_offset = ctrl.store.min_offset_in_queue(&topic, queue_id).max(0);
        let max_offset = ctrl.store.max_offset_in_queue(&topic, queue_id).max(0);
        let last_update_timestamp = if max_offset > 0 {
            ctrl.store
                .message_store_timestamp(&topic, queue_id, max_offset - 1)?
                .unwrap_or(-1)
        } else {
            0
        };
        table.offset_table.insert(
            queue(ctrl, &topic, queue_id),
            TopicOffset {
                last_update_timestamp,
                max_offset,
                min_offset,
            },
        );
    }
    let body = table
        .encode()
        .map_err(|source| BrokerError::AdminBodyEncode {
            what: "TopicStatsTable",
            source,
        })?;
    respond(RemotingCommand::response_to(request, rc::SUCCESS, None).with_body(Bytes::from(body)))
}

/// Java `getTopicsForCollectingConsumeStats`: the listed topics as they are; otherwise the
/// one topic or every topic the group committed offsets for, less those an online group does
/// not subscribe to.
fn topics_for_consume_stats(
    ctrl: &BrokerController,
    header: &GetConsumeStatsRequestHeader,
) -> BTreeSet<String> {
    let listed: BTreeSet<String> = header
        .topic_list
        .as_deref()
        .unwrap_or_default()
        .split(TOPIC_LIST_SEPARATOR)
        .filter(|t| !t.trim().is_empty())
        .map(str::to_string)
        .collect();
    if !listed.is_empty() {
        return listed;
    }
    let group = &header.consumer_group;
    let mut topics = match header.topic.as_deref() {
        Some(t) if !t.trim().is_empty() => BTreeSet::from([t.to_string()]),
        _ => ctrl.offsets.which_topic_by_consumer(group),
    };
    ctrl.consumers.with_group(group, |info| {
        if let Some(info) = info.filter(|i| !i.subscriptions.is_empty()) {
            topics.retain(|t| info.subscriptions.contains_key(t));
        }
    });
    topics
}

fn offset_wrapper(
    ctrl: &BrokerController,
    group: &str,
    topic: &str,
    queue_id: i32,
) -> Result<OffsetWrapper, BrokerError> {
    let broker_offset = ctrl.store.max_offset_in_queue(topic, queue_id).max(0);
    let consumer_offset = ctrl
        .offsets
        .query_offset(group, topic, queue_id)
        .unwrap_or(-1)
        .max(0);
    let last_timestamp = if consumer_offset > 0 {
        ctrl.store
            .message_store_timestamp(topic, queue_id, consumer_offset - 1)?
            .filter(|t| *t > 0)
            .unwrap_or(0)
    } else {
        0
    };
    Ok(OffsetWrapper {
        broker_offset,
        consumer_offset,
        last_timestamp,
        pull_offset: consumer_offset,
    })
}

pub async fn get_consume_stats(
    cx: &RequestContext<'_>,
    request: &RemotingCommand,
) -> ProcessResult {
    let ctrl = cx.ctrl;
    let header = GetConsumeStatsRequestHeader::decode(request)?;
    let mut stats = ConsumeStats::default();
    for topic in topics_for_consume_stats(ctrl, &header) {
        let Some(tc) = ctrl.topics.select(&topic) else {
            tracing::warn!(topic, "consume stats: topic config does not exist");
            continue;
        };
        for queue_id in 0..tc.read_queue_nums {
            let wrapper = offset_wrapper(ctrl, &header.consumer_group, &topic, queue_id)?;
            stats
                .offset_table
                .insert(queue(ctrl, &topic, queue_id), wrapper);
        }
    }
    let body = stats
        .encode()
        .map_err(|source| BrokerError::AdminBodyEncode {
            what: "ConsumeStats",
            source,
        })?;
    respond(RemotingCommand::response_to(request, rc::SUCCESS, None).with_body(Bytes::from(body)))
}
