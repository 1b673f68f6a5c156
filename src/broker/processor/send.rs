//! SEND_MESSAGE (10), SEND_MESSAGE_V2 (310), SEND_BATCH_MESSAGE (320) and
//! CONSUMER_SEND_MSG_BACK (36): Java `SendMessageProcessor` / `AbstractSendMessageProcessor`.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

use bytes::Bytes;

use crate::broker::controller::BrokerController;
use crate::broker::ha::group_transfer_service::SlaveWaitError;
use crate::broker::topic_config_manager::{
    self as topic, dlq_topic, retry_topic, RETRY_GROUP_TOPIC_PREFIX, SCHEDULE_TOPIC,
};
use crate::broker::transaction::transactional_message_bridge::put_half_message;
use crate::broker::transaction::transactional_message_util::is_prepared_send;
use crate::common::topic_validator::validate_topic;
use crate::config::{BrokerRole, FlushPolicy};
use crate::remoting::body::{perm, TopicConfig};
use crate::remoting::codes::response_code as rc;
use crate::remoting::command::RemotingCommand;
use crate::remoting::frame::FRAME_SIZE_MAX_BYTES;
use crate::remoting::headers::{
    ConsumerSendMsgBackRequestHeader, SendMessageRequestHeader, SendMessageResponseHeader,
};
use crate::store::format::{self, property_value, sys_flag};
use crate::store::{BatchToStore, MessageToStore, PutMessageResult, PutMessageStatus, StoreError};

use super::{respond, ProcessResult, RequestContext};
use crate::broker::error::{put_status_code, Access, BrokerError};

/// Java `MQVersion.Version.V3_4_9`: from this client version on, the header's
/// maxReconsumeTimes is honoured.
const VERSION_V3_4_9: i32 = 121;

/// Message property names (Java `MessageConst`).
pub mod property {
    pub const TAGS: &str = "TAGS";
    pub const KEYS: &str = "KEYS";
    pub const UNIQ_KEY: &str = "UNIQ_KEY";
    pub const WAIT: &str = "WAIT";
    pub const DELAY: &str = "DELAY";
    pub const RETRY_TOPIC: &str = "RETRY_TOPIC";
    pub const REAL_TOPIC: &str = "REAL_TOPIC";
    pub const REAL_QID: &str = "REAL_QID";
    pub const ORIGIN_MESSAGE_ID: &str = "ORIGIN_MESSAGE_ID";
    pub const CLUSTER: &str = "CLUSTER";
    pub const TRAN_MSG: &str = "TRAN_MSG";
}

const MULTI_TAGS_FLAG: i32 = sys_flag::MULTI_TAGS;

/// Whether sysFlag marks a prepared or rolled-back transactional message: the store keeps such
/// a record without a ConsumeQueue unit.
fn is_prepared_or_rollback(flag: i32) -> bool {
    matches!(
        flag & sys_flag::TRANSACTION_MASK,
        sys_flag::TRANSACTION_PREPARED_TYPE | sys_flag::TRANSACTION_ROLLBACK_TYPE
    )
}

/// Characters one message adds to a send response's `msgId` list: 32 hex digits and a comma.
const MSG_ID_LIST_ENTRY_BYTES: usize = 33;

/// Most messages in one batch send. The response names every stored message in its `msgId`
/// header, which must fit in one frame with the rest of the header; half a frame for the list
/// leaves room for that (about 254,000 messages). A larger batch was once stored whole and
/// then could not be answered, so the producer's retry stored it twice. Java has no such
/// count: its batch body is bounded by maxMessageSize, which ours may be raised past that.
pub const BATCH_MESSAGES_MAX: usize = FRAME_SIZE_MAX_BYTES / 2 / MSG_ID_LIST_ENTRY_BYTES;

static QUEUE_PICKER: AtomicU32 = AtomicU32::new(0);

/// A queue picked for `queueId < 0` requests (Java uses a random one; a rotating counter spreads
/// load the same way without a random number generator).
fn pick_queue(queue_nums: i32) -> i32 {
    (QUEUE_PICKER.fetch_add(1, Ordering::Relaxed) % queue_nums.max(1) as u32) as i32
}

/// SEND_MESSAGE / SEND_MESSAGE_V2 / SEND_BATCH_MESSAGE.
pub async fn send_message(cx: &RequestContext<'_>, request: &RemotingCommand) -> ProcessResult {
    let (ctrl, remote_addr) = (cx.ctrl, cx.conn.remote_addr);
    let header = SendMessageRequestHeader::decode(request)?;
    let (topic_config, created) = msg_check(ctrl, &header, remote_addr)?;
    if created {
        // Java writes topics.json before it stores the message: so a crash never leaves an
        // acknowledged message in a topic the broker forgot. The write runs on the persister
        // thread; this request waits without holding its worker thread.
        ctrl.topics.wait_persisted().await?;
    }
    // A DLQ topic this send creates is waited for before the answer (see below).
    let topics_generation = ctrl.topics.gate.last_marked();
    let queue_id = if header.queue_id < 0 {
        pick_queue(topic_config.write_queue_nums)
    } else {
        header.queue_id
    };
    let stored = if header.batch {
        send_batch(ctrl, request, &header, queue_id, remote_addr)?
    } else {
        send_single(ctrl, request, &header, &topic_config, queue_id, remote_addr)?
    };
    let (put, uniq_key) = stored;
    ctrl.ha.notify_data_appended();
    if let Some(metrics) = ctrl.metrics() {
        let messages = u64::try_from(put.message_count).unwrap_or(0);
        let bytes = u64::try_from(put.wrote_bytes).unwrap_or(0);
        metrics.record_send(&header.topic, messages, bytes);
    }
    // Java `isWaitStoreMsgOK`: wait unless the message says WAIT=false.
    let wait_store_msg_ok = header
        .properties
        .as_deref()
        .and_then(|p| property_value(p.as_bytes(), property::WAIT.as_bytes()))
        .is_none_or(|v| !v.eq_ignore_ascii_case(b"false"));
    let put = wait_for_flush(ctrl, put, wait_store_msg_ok).await;
    let put = wait_for_slave(ctrl, put, wait_store_msg_ok).await;
    wait_topics_written_since(ctrl, topics_generation).await?;
    respond(send_response(ctrl, request, put, queue_id, uniq_key))
}

/// A slave stores only what it replicates from its master: every send is refused before
/// anything else is checked (Java `SendMessageProcessor.rejectRequest` / the store's slave
/// mode check).
fn refuse_on_slave(ctrl: &BrokerController) -> Result<(), BrokerError> {
    if ctrl.is_slave() {
        return Err(BrokerError::SlaveSendForbidden {
            broker_id: ctrl.config.broker.id,
        });
    }
    Ok(())
}

/// Waits until the topics created since `generation` (a DLQ topic made while storing) are in
/// topics.json, so an answered message never sits in a topic a crash made the broker forget.
async fn wait_topics_written_since(
    ctrl: &BrokerController,
    generation: u64,
) -> Result<(), BrokerError> {
    if ctrl.topics.gate.last_marked() > generation {
        ctrl.topics.wait_persisted().await?;
    }
    Ok(())
}

/// A send-back needs the master beside the broker that got it (Java 5's
/// `peekMasterBroker`), which only a master has.
fn refuse_send_back_on_slave(ctrl: &BrokerController) -> Result<(), BrokerError> {
    if ctrl.is_slave() {
        return Err(BrokerError::SendBackNoMaster {
            broker_ip: ctrl.config.broker.advertised_ip.clone(),
        });
    }
    Ok(())
}

/// Java `msgCheck` plus topic auto-creation. Says whether the topic was created now.
fn msg_check(
    ctrl: &BrokerController,
    header: &SendMessageRequestHeader,
    remote_addr: SocketAddr,
) -> Result<(Arc<TopicConfig>, bool), BrokerError> {
    refuse_on_slave(ctrl)?;
    if ctrl.broker_permission() & perm::PERM_WRITE == 0 {
        return Err(BrokerError::BrokerForbidden {
            broker_addr: ctrl.broker_addr.clone(),
            access: Access::Send,
        });
    }
    validate_topic(&header.topic, true)?;
    if !topic::is_send_allowed(&header.topic) {
        return Err(BrokerError::SystemTopicSendForbidden {
            topic: header.topic.clone(),
        });
    }
    let (tc, created) = match ctrl.topics.select(&header.topic) {
        Some(tc) => (tc, false),
        None => (
            Arc::new(create_topic_for_send(ctrl, header, remote_addr)?),
            true,
        ),
    };
    let queue_nums = tc.write_queue_nums.max(tc.read_queue_nums);
    if header.queue_id >= queue_nums {
        return Err(BrokerError::SendQueueIdIllegal {
            queue_id: header.queue_id,
            write_queue_nums: tc.write_queue_nums,
            read_queue_nums: tc.read_queue_nums,
            producer: remote_addr,
        });
    }
    if tc.perm & perm::PERM_WRITE == 0 {
        return Err(BrokerError::TopicForbidden {
            topic: header.topic.clone(),
            access: Access::Send,
        });
    }
    Ok((tc, created))
}

fn create_topic_for_send(
    ctrl: &BrokerController,
    header: &SendMessageRequestHeader,
    remote_addr: SocketAddr,
) -> Result<TopicConfig, BrokerError> {
    let created = if header.topic.starts_with(RETRY_GROUP_TOPIC_PREFIX) {
        Some(ctrl.topics.create_topic_if_absent(
            &header.topic,
            1,
            perm::PERM_READ | perm::PERM_WRITE,
            0,
        )?)
    } else {
        ctrl.topics.create_topic_in_send_message_method(
            &header.topic,
            &header.default_topic,
            header.default_topic_queue_nums,
            0,
        )?
    };
    match created {
        Some((tc, new)) => {
            if new {
                tracing::info!(topic = header.topic, queues = tc.write_queue_nums, client = %remote_addr, "auto-created topic");
                ctrl.create_queue_files(&tc);
                ctrl.notify_topics_changed();
            }
            Ok(tc)
        }
        None => Err(BrokerError::TopicNotExist {
            topic: header.topic.clone(),
        }),
    }
}

type Stored = (PutMessageResult, Option<String>);

fn send_single(
    ctrl: &BrokerController,
    request: &RemotingCommand,
    header: &SendMessageRequestHeader,
    tc: &TopicConfig,
    queue_id: i32,
    remote_addr: SocketAddr,
) -> Result<Stored, BrokerError> {
    let mut properties = header.properties.clone().unwrap_or_default();
    let mut topic = header.topic.clone();
    let mut queue_id = queue_id;
    let reconsume_times = header.reconsume_times.unwrap_or(0);
    if topic.starts_with(RETRY_GROUP_TOPIC_PREFIX) {
        let group = &topic[RETRY_GROUP_TOPIC_PREFIX.len()..];
        let gc = ctrl
            .groups
            .find(group)
            .ok_or_else(|| BrokerError::RetryGroupNotExist {
                group: group.to_string(),
            })?;
        let max = match header.max_reconsume_times {
            Some(m) if request.version >= VERSION_V3_4_9 => m,
            _ => gc.retry_max_times,
        };
        if reconsume_times > max {
            topic = dead_letter_topic(ctrl, group)?;
            queue_id = 0;
        }
    }
    let sys_flag = if tc.topic_filter_type == crate::remoting::body::TopicFilterType::MultiTag {
        header.sys_flag | MULTI_TAGS_FLAG
    } else {
        header.sys_flag
    };
    complete_properties(ctrl, &mut properties);
    let uniq_key = property_value(properties.as_bytes(), property::UNIQ_KEY.as_bytes())
        .map(|v| String::from_utf8_lossy(v).into_owned());
    let mut msg = MessageToStore {
        topic,
        queue_id,
        flag: header.flag,
        body: request.body.clone(),
        properties,
        sys_flag,
        born_timestamp_ms: header.born_timestamp,
        born_host: remote_addr,
        reconsume_times,
        prepared_transaction_offset: 0,
    };
    let put = if is_prepared_send(msg.properties.as_bytes(), reconsume_times) {
        // Java `SendMessageProcessor`: TRAN_MSG=true makes it a half message.
        if ctrl.config.broker.reject_transaction_message {
            return Err(BrokerError::TransactionMessageRejected {
                broker_ip: ctrl.config.broker.advertised_ip.clone(),
            });
        }
        put_half_message(ctrl, msg)
    } else if is_prepared_or_rollback(msg.sys_flag) {
        return Err(BrokerError::TransactionSysFlagWithoutHalf {
            sys_flag: msg.sys_flag,
        });
    } else {
        apply_delay_level(ctrl, &mut msg);
        let put = ctrl.store.put_message(&msg);
        if let Ok(p) = &put {
            // Java counts the topic the message was stored in: a delayed one in
            // SCHEDULE_TOPIC_XXXX (a system topic) now, in its own when it is delivered.
            ctrl.stats
                .inc_put(&msg.topic, p.message_count.max(0) as u64);
        }
        put
    };
    // A half message is stored in RMQ_SYS_TRANS_HALF_TOPIC, which the totals leave out.
    Ok((put.map_err(BrokerError::PutMessage)?, uniq_key))
}

fn send_batch(
    ctrl: &BrokerController,
    request: &RemotingCommand,
    header: &SendMessageRequestHeader,
    queue_id: i32,
    remote_addr: SocketAddr,
) -> Result<Stored, BrokerError> {
    if header.topic.starts_with(RETRY_GROUP_TOPIC_PREFIX) {
        return Err(BrokerError::BatchToRetryTopic {
            topic: header.topic.clone(),
        });
    }
    if is_prepared_or_rollback(header.sys_flag) {
        return Err(BrokerError::BatchTransaction {
            sys_flag: header.sys_flag,
        });
    }
    // Counted before anything is stored, so a batch too big to answer is refused whole.
    let counted = format::batch_entries(&request.body)
        .take(BATCH_MESSAGES_MAX + 1)
        .count();
    if counted > BATCH_MESSAGES_MAX {
        return Err(BrokerError::BatchTooManyMessages {
            max: BATCH_MESSAGES_MAX,
        });
    }
    let batch = BatchToStore {
        topic: header.topic.clone(),
        queue_id,
        sys_flag: header.sys_flag,
        born_timestamp_ms: header.born_timestamp,
        born_host: remote_addr,
        reconsume_times: header.reconsume_times.unwrap_or(0),
        encoded_messages: request.body.clone(),
    };
    let put = ctrl
        .store
        .put_messages(&batch)
        .map_err(BrokerError::PutMessage)?;
    ctrl.stats
        .inc_put(&batch.topic, put.message_count.max(0) as u64);
    Ok((put, None))
}

/// Properties the broker adds: CLUSTER (Java 5.x `SendMessageProcessor`), and a UNIQ_KEY when
/// the client sent none (5.x), so every message has a client-style id.
fn complete_properties(ctrl: &BrokerController, properties: &mut String) {
    let bytes = properties.as_bytes();
    let has_cluster = property_value(bytes, property::CLUSTER.as_bytes()).is_some();
    let has_uniq = property_value(bytes, property::UNIQ_KEY.as_bytes()).is_some();
    if !properties.is_empty() && !properties.ends_with('\u{2}') {
        properties.push('\u{2}');
    }
    if !has_cluster {
        properties.push_str(&format::encode_properties([(
            property::CLUSTER,
            ctrl.config.broker.cluster_name.as_str(),
        )]));
    }
    if !has_uniq {
        let id = crate::broker::msg_id::create_uniq_id(ctrl.store_host);
        properties.push_str(&format::encode_properties([(
            property::UNIQ_KEY,
            id.as_str(),
        )]));
    }
}

/// Java `HookUtils.handleScheduleMessage`: a message with DELAY > 0 goes to
/// SCHEDULE_TOPIC_XXXX queue `level - 1`, remembering its real topic and queue.
pub fn apply_delay_level(ctrl: &BrokerController, msg: &mut MessageToStore) {
    if is_prepared_or_rollback(msg.sys_flag) {
        return;
    }
    let Some(level) = property_value(msg.properties.as_bytes(), property::DELAY.as_bytes())
        .and_then(|v| std::str::from_utf8(v).ok())
        .and_then(|v| v.trim().parse::<i32>().ok())
    else {
        return;
    };
    if level <= 0 {
        return;
    }
    let level_max = ctrl.delay_levels_ms.len() as i32;
    let level = level.min(level_max);
    let real_qid = msg.queue_id.to_string();
    let extra = format::encode_properties([
        (property::REAL_TOPIC, msg.topic.as_str()),
        (property::REAL_QID, real_qid.as_str()),
    ]);
    let mut props = remove_property(&msg.properties, property::DELAY);
    props.push_str(&format::encode_properties([(
        property::DELAY,
        level.to_string().as_str(),
    )]));
    props.push_str(&extra);
    msg.properties = props;
    msg.topic = SCHEDULE_TOPIC.to_string();
    msg.queue_id = level - 1;
}

/// The properties string without `name` (all occurrences).
pub fn remove_property(properties: &str, name: &str) -> String {
    let pairs: Vec<(&str, &str)> = format::properties_iter(properties.as_bytes())
        .filter(|(k, _)| *k != name.as_bytes())
        .filter_map(|(k, v)| Some((std::str::from_utf8(k).ok()?, std::str::from_utf8(v).ok()?)))
        .collect();
    format::encode_properties(pairs)
}

/// With `sync` flush, a send is acknowledged only after the fsync covering it (unless the
/// message says WAIT=false). A timeout answers FLUSH_DISK_TIMEOUT; the message is stored. So
/// does a failed fsync of the group commit covering it, as in Java (its flush never reaches the
/// record's offset); the store is read-only from then on.
async fn wait_for_flush(
    ctrl: &BrokerController,
    mut put: PutMessageResult,
    wait_store_msg_ok: bool,
) -> PutMessageResult {
    if ctrl.config.store.flush_policy != FlushPolicy::Sync
        || put.status != PutMessageStatus::PutOk
        || !wait_store_msg_ok
    {
        return put;
    }
    match ctrl.store.wait_flushed(put.end_phy_offset()).await {
        Ok(()) => {}
        Err(e) => {
            if !matches!(e, StoreError::FlushTimeout) {
                tracing::error!(error = %e, "sync flush failed");
            }
            put.status = e.put_status();
        }
    }
    put
}

/// On a SYNC_MASTER a send is acknowledged only after a slave acknowledged its bytes (unless
/// the message says WAIT=false; Java `CommitLog.handleHA`). No slave in sync answers
/// SLAVE_NOT_AVAILABLE, no ack within the slave timeout FLUSH_SLAVE_TIMEOUT; the message is
/// stored either way.
async fn wait_for_slave(
    ctrl: &BrokerController,
    mut put: PutMessageResult,
    wait_store_msg_ok: bool,
) -> PutMessageResult {
    if ctrl.config.broker.role != BrokerRole::SyncMaster
        || put.status != PutMessageStatus::PutOk
        || !wait_store_msg_ok
    {
        return put;
    }
    match ctrl.ha.wait_for_slave(put.end_phy_offset()).await {
        Ok(()) => {}
        Err(SlaveWaitError::NotAvailable) => put.status = PutMessageStatus::SlaveNotAvailable,
        Err(SlaveWaitError::Timeout) => put.status = PutMessageStatus::FlushSlaveTimeout,
    }
    put
}

fn send_response(
    ctrl: &BrokerController,
    request: &RemotingCommand,
    put: PutMessageResult,
    queue_id: i32,
    uniq_key: Option<String>,
) -> RemotingCommand {
    let code = put_status_code(put.status);
    let mut response = RemotingCommand::response_to(request, code, None);
    if matches!(
        code,
        rc::SUCCESS | rc::FLUSH_DISK_TIMEOUT | rc::FLUSH_SLAVE_TIMEOUT | rc::SLAVE_NOT_AVAILABLE
    ) {
        SendMessageResponseHeader {
            msg_id: put.msg_ids.join(","),
            queue_id,
            queue_offset: put.queue_offset,
            transaction_id: uniq_key,
            batch_uniq_id: None,
            recall_handle: None,
        }
        .encode(&mut response);
    } else {
        response.remark = Some(format!("{:?}", put.status));
    }
    // Java clients dereference extFields of every send response.
    response.set_ext("MSG_REGION", &ctrl.config.broker.region_id);
    response.set_ext("TRACE_ON", ctrl.config.broker.trace_on);
    response
}

/// CONSUMER_SEND_MSG_BACK: a consumer could not process a message; store it again in the
/// group's retry topic with a delay, or in its DLQ after too many attempts.
pub async fn consumer_send_msg_back(
    cx: &RequestContext<'_>,
    request: &RemotingCommand,
) -> ProcessResult {
    let (ctrl, remote_addr) = (cx.ctrl, cx.conn.remote_addr);
    let header = ConsumerSendMsgBackRequestHeader::decode(request)?;
    refuse_send_back_on_slave(ctrl)?;
    let gc = ctrl
        .groups
        .find_or_auto_create(&header.group)?
        .ok_or_else(|| BrokerError::RetryGroupNotExist {
            group: header.group.clone(),
        })?;
    if ctrl.broker_permission() & perm::PERM_WRITE == 0 {
        return Err(BrokerError::BrokerForbidden {
            broker_addr: ctrl.broker_addr.clone(),
            access: Access::Send,
        });
    }
    if gc.retry_queue_nums <= 0 {
        return respond(RemotingCommand::response_to(request, rc::SUCCESS, None));
    }
    let (retry, retry_tc) = send_back_retry_topic(ctrl, &header.group, gc.retry_queue_nums).await?;
    let topics_generation = ctrl.topics.gate.last_marked();
    let record = ctrl.store.look_message_by_offset(header.offset)?.ok_or(
        BrokerError::SendBackMessageNotFound {
            offset: header.offset,
        },
    )?;
    let decoded =
        format::decode_record(&record).map_err(|source| BrokerError::StoredMessageUnreadable {
            offset: header.offset,
            source,
        })?;
    let reconsume_times_max = match header.max_reconsume_times {
        Some(m) if request.version >= VERSION_V3_4_9 => m,
        _ => gc.retry_max_times,
    };
    let reconsume_times = decoded.reconsume_times;
    let mut properties = send_back_properties(&decoded, header.origin_msg_id.as_deref());
    let (topic, queue_id) = if reconsume_times >= reconsume_times_max || header.delay_level < 0 {
        (dead_letter_topic(ctrl, &header.group)?, 0)
    } else {
        let level = if header.delay_level == 0 {
            // Past the last level is the last level (`apply_delay_level`).
            reconsume_times.saturating_add(3)
        } else {
            header.delay_level
        };
        properties.push_str(&format::encode_properties([(
            property::DELAY,
            level.to_string().as_str(),
        )]));
        (retry, pick_queue(retry_tc.write_queue_nums))
    };
    let mut msg = MessageToStore {
        topic,
        queue_id,
        flag: decoded.flag,
        body: Bytes::copy_from_slice(decoded.body),
        properties,
        sys_flag: decoded.sys_flag,
        born_timestamp_ms: decoded.born_timestamp_ms,
        born_host: remote_addr,
        // A count at i32::MAX went to the DLQ above (it is past any maximum) and stays there.
        reconsume_times: reconsume_times.saturating_add(1),
        prepared_transaction_offset: 0,
    };
    apply_delay_level(ctrl, &mut msg);
    let put = ctrl
        .store
        .put_message(&msg)
        .map_err(BrokerError::PutMessage)?;
    wait_topics_written_since(ctrl, topics_generation).await?;
    let code = put_status_code(put.status);
    let remark = (code != rc::SUCCESS).then(|| format!("{:?}", put.status));
    respond(RemotingCommand::response_to(request, code, remark))
}

/// The group's retry topic, created if it is new; as for a send, a new one is on disk before a
/// message is stored in it.
async fn send_back_retry_topic(
    ctrl: &BrokerController,
    group: &str,
    queue_nums: i32,
) -> Result<(String, TopicConfig), BrokerError> {
    let retry = retry_topic(group)?;
    let (retry_tc, created) = ctrl.topics.create_topic_if_absent(
        &retry,
        queue_nums,
        perm::PERM_READ | perm::PERM_WRITE,
        0,
    )?;
    if created {
        ctrl.notify_topics_changed();
        ctrl.topics.wait_persisted().await?;
    }
    Ok((retry, retry_tc))
}

/// The properties of a sent-back message: the original ones without DELAY, plus RETRY_TOPIC
/// (the topic it was first consumed from) and ORIGIN_MESSAGE_ID (the client's, else the
/// stored record's offset msgId).
fn send_back_properties(
    decoded: &format::DecodedRecord<'_>,
    origin_msg_id: Option<&str>,
) -> String {
    let props_str = String::from_utf8_lossy(decoded.properties).into_owned();
    let mut properties = remove_property(&props_str, property::DELAY);
    if property_value(decoded.properties, property::RETRY_TOPIC.as_bytes()).is_none() {
        properties.push_str(&format::encode_properties([(
            property::RETRY_TOPIC,
            decoded.topic,
        )]));
    }
    let origin_id = match origin_msg_id {
        Some(id) if !id.trim().is_empty() => id.to_string(),
        _ => format::encode_offset_msg_id(&decoded.store_host, decoded.phy_offset),
    };
    properties = remove_property(&properties, property::ORIGIN_MESSAGE_ID);
    properties.push_str(&format::encode_properties([(
        property::ORIGIN_MESSAGE_ID,
        origin_id.as_str(),
    )]));
    properties
}

/// The group's dead-letter topic, created (one queue) if it is new.
fn dead_letter_topic(ctrl: &BrokerController, group: &str) -> Result<String, BrokerError> {
    let dlq = dlq_topic(group)?;
    let (_, created) =
        ctrl.topics
            .create_topic_if_absent(&dlq, 1, perm::PERM_READ | perm::PERM_WRITE, 0)?;
    if created {
        ctrl.notify_topics_changed();
    }
    Ok(dlq)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn remove_property_drops_every_occurrence() {
        let props =
            format::encode_properties([("A", "1"), ("DELAY", "3"), ("B", "2"), ("DELAY", "4")]);
        assert_eq!(
            remove_property(&props, "DELAY"),
            format::encode_properties([("A", "1"), ("B", "2")])
        );
    }
}
