//! Topic administration: Java `AdminBrokerProcessor.deleteTopic` (DELETE_TOPIC_IN_BROKER 215)
//! and `getTopicConfig` (GET_TOPIC_CONFIG 351).

use bytes::Bytes;

use super::{respond, ProcessResult, RequestContext};
use crate::broker::error::BrokerError;
use crate::common::topic_validator::is_system_topic;
use crate::remoting::codes::response_code as rc;
use crate::remoting::command::RemotingCommand;
use crate::remoting::headers::{DeleteTopicRequestHeader, GetTopicConfigRequestHeader};

/// Removes the topic's config, every group's offsets of it and its ConsumeQueues; the CommitLog
/// keeps the records until retention deletes their files, as in Java. System topics (and the
/// cluster and broker name topics, which Java adds to its system set) are refused, as with
/// Java's default `validateSystemTopicWhenUpdateTopic=true`.
pub async fn delete_topic(cx: &RequestContext<'_>, request: &RemotingCommand) -> ProcessResult {
    let ctrl = cx.ctrl;
    let topic = DeleteTopicRequestHeader::decode(request)?.topic;
    tracing::info!(topic, caller = %cx.conn.remote_addr, "delete topic");
    if topic.trim().is_empty() {
        return Err(BrokerError::DeleteTopicBlank);
    }
    let broker = &ctrl.config.broker;
    if is_system_topic(&topic) || topic == broker.cluster_name || topic == broker.name {
        return Err(BrokerError::SystemTopicConflict { topic });
    }
    let existed = ctrl.topics.delete_topic_config(&topic)?;
    if ctrl.offsets.clean_offset_by_topic(&topic) > 0 {
        ctrl.offsets.persist()?;
    }
    ctrl.store.delete_topic(&topic)?;
    if existed {
        ctrl.notify_topics_changed();
    }
    respond(RemotingCommand::response_to(request, rc::SUCCESS, None))
}

/// The topic's `TopicConfig` JSON (Java's `TopicConfigAndQueueMapping`, whose mapping is
/// absent: ringmq has no static topics).
pub async fn get_topic_config(cx: &RequestContext<'_>, request: &RemotingCommand) -> ProcessResult {
    let topic = GetTopicConfigRequestHeader::decode(request)?.topic;
    let Some(tc) = cx.ctrl.topics.select(&topic) else {
        return Err(BrokerError::NoTopicInBroker { topic });
    };
    let body = serde_json::to_vec(&*tc).map_err(|source| BrokerError::AdminBodyEncode {
        what: "TopicConfig",
        source,
    })?;
    respond(RemotingCommand::response_to(request, rc::SUCCESS, None).with_body(Bytes::from(body)))
}
