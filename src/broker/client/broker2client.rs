//! Requests the broker makes of its clients (Java `Broker2Client`): the offset reset that
//! tells each consumer of a group its new offsets (RESET_CONSUMER_CLIENT_OFFSET 220), and the
//! relay of an admin request to one client, answered with the client's response
//! (GET_CONSUMER_RUNNING_INFO 307).

use std::time::Duration;

use crate::broker::controller::BrokerController;
use crate::broker::error::BrokerError;
use crate::net::{ClientCallError, Outbound};
use crate::remoting::body::lock_batch::MessageQueue;
use crate::remoting::body::reset_offset::ResetOffsetBody;
use crate::remoting::codes::request_code;
use crate::remoting::command::{LanguageCode, RemotingCommand};
use crate::remoting::headers::ResetOffsetRequestHeader;
use crate::store::BoundaryType;

/// Java `Broker2Client.callClient`: how long the broker waits for a client's answer.
pub const CALL_CLIENT_TIMEOUT_MS: u64 = 10_000;

/// Java `Broker2Client.resetOffset` (with the 5.x single-queue form of the header): computes
/// each queue's new offset, commits it, and sends RESET_CONSUMER_CLIENT_OFFSET to every client
/// of the group. Returns the new offsets.
///
/// - The queues are all write queues of the topic, or only `queueId` when it is >= 0.
/// - A queue's target is `offset` when `queueId` and an `offset` other than -1 are given
///   (within the queue's min..=max+1, as Java's `resetOffsetInner`), the queue's max offset
///   when `timestamp` is -1, else the first offset stored at or after `timestamp`.
/// - The target replaces the committed offset when `isForce` or when it is below it.
/// - Nothing changes when the group has no client online (CONSUMER_NOT_ONLINE, as Java; the
///   admin tools then fall back to resetting offsets without clients).
pub fn reset_offset(
    ctrl: &BrokerController,
    header: &ResetOffsetRequestHeader,
) -> Result<ResetOffsetBody, BrokerError> {
    let topic = &header.topic;
    let Some(topic_config) = ctrl.topics.select(topic) else {
        return Err(BrokerError::ResetOffsetTopicNotExist {
            topic: topic.clone(),
        });
    };
    let queue_ids: Vec<i32> = if header.queue_id >= 0 {
        vec![header.queue_id]
    } else {
        (0..topic_config.write_queue_nums).collect()
    };
    let mut body = ResetOffsetBody::default();
    for queue_id in queue_ids {
        let Some(committed) = ctrl.offsets.query_offset(&header.group, topic, queue_id) else {
            return Err(BrokerError::ResetOffsetGroupNotExist {
                group: header.group.clone(),
            });
        };
        let target = target_offset(ctrl, header, queue_id)?.max(0);
        let offset = if header.is_force || target < committed {
            target
        } else {
            committed
        };
        let mq = MessageQueue {
            topic: topic.clone(),
            broker_name: ctrl.config.broker.name.clone(),
            queue_id,
        };
        body.offset_table.insert(mq, offset);
    }
    let channels = ctrl
        .consumers
        .group(&header.group)
        .map(|info| info.channels.into_values().collect::<Vec<_>>())
        .unwrap_or_default();
    if channels.is_empty() {
        return Err(BrokerError::ConsumerNotOnline {
            group: header.group.clone(),
            topic: topic.clone(),
            timestamp: header.timestamp,
        });
    }
    for (mq, offset) in &body.offset_table {
        ctrl.offsets
            .commit_offset(&header.group, topic, mq.queue_id, *offset);
    }
    for channel in channels {
        let request = reset_consumer_client_offset(header, &body, &channel.language);
        if let Err(e) = channel.sender.send(Outbound::Command(request)) {
            tracing::warn!(
                group = header.group,
                client = channel.client_id,
                error = %e,
                "could not send RESET_CONSUMER_CLIENT_OFFSET"
            );
        }
    }
    tracing::info!(
        topic,
        group = header.group,
        timestamp = header.timestamp,
        force = header.is_force,
        "offsets reset"
    );
    Ok(body)
}

/// The offset a reset moves one queue to, before the force rule.
fn target_offset(
    ctrl: &BrokerController,
    header: &ResetOffsetRequestHeader,
    queue_id: i32,
) -> Result<i64, BrokerError> {
    let store = &ctrl.store;
    let topic = &header.topic;
    match header.offset {
        Some(offset) if header.queue_id >= 0 && offset != -1 => {
            let min = store.min_offset_in_queue(topic, queue_id);
            let max = store.max_offset_in_queue(topic, queue_id);
            if (min >= 0 && offset < min) || offset > max + 1 {
                return Err(BrokerError::ResetOffsetOutOfRange { offset, min, max });
            }
            Ok(offset)
        }
        _ if header.timestamp == -1 => Ok(store.max_offset_in_queue(topic, queue_id)),
        _ => Ok(store.offset_by_timestamp(
            topic,
            queue_id,
            header.timestamp,
            BoundaryType::Lower,
        )?),
    }
}

/// The oneway RESET_CONSUMER_CLIENT_OFFSET to one client: Java's header (topic, group,
/// timestamp) and the new offsets, as a list for a C++ client (`ResetOffsetBodyForC`; Java
/// picks that form by the admin's language, ringmq by each client's own).
fn reset_consumer_client_offset(
    header: &ResetOffsetRequestHeader,
    body: &ResetOffsetBody,
    client_language: &str,
) -> RemotingCommand {
    let mut request = RemotingCommand::request(request_code::RESET_CONSUMER_CLIENT_OFFSET).oneway();
    ResetOffsetRequestHeader {
        topic: header.topic.clone(),
        group: header.group.clone(),
        timestamp: header.timestamp,
        is_force: false,
        queue_id: -1,
        offset: None,
    }
    .encode(&mut request);
    let bytes = if client_language == LanguageCode::Cpp.name() {
        body.encode_for_c()
    } else {
        body.encode()
    };
    request.with_body(bytes.into())
}

/// Java `AdminBrokerProcessor.callConsumer`: sends `request`'s code, ext fields and body to
/// the client `client_id` of `group` and returns the client's response.
pub async fn call_consumer(
    ctrl: &BrokerController,
    request: &RemotingCommand,
    group: &str,
    client_id: &str,
) -> Result<RemotingCommand, BrokerError> {
    let channel = ctrl
        .consumers
        .group(group)
        .and_then(|info| {
            info.channels
                .into_values()
                .find(|c| c.client_id == client_id)
        })
        .ok_or_else(|| BrokerError::ConsumerClientNotOnline {
            group: group.to_owned(),
            client_id: client_id.to_owned(),
        })?;
    let mut call = RemotingCommand::request(request.code);
    call.ext_fields = request.ext_fields.clone();
    call.body = request.body.clone();
    let timeout = Duration::from_millis(CALL_CLIENT_TIMEOUT_MS);
    channel
        .sender
        .call(call, timeout)
        .await
        .map_err(|source| match source {
            ClientCallError::Timeout { .. } => BrokerError::ClientCallTimeout {
                group: group.to_owned(),
                client_id: client_id.to_owned(),
                source,
            },
            source => BrokerError::ClientCallFailed {
                group: group.to_owned(),
                client_id: client_id.to_owned(),
                source,
            },
        })
}
