//! The transaction flow's access to the store and the offset table (Java
//! `TransactionalMessageBridge`): storing half messages, reading the half and op queues,
//! writing op messages, and the scan's progress as offsets of group `CID_SYS_RMQ_TRANS`.

use bytes::Bytes;

use crate::broker::controller::BrokerController;
use crate::broker::msg_id::create_uniq_id;
use crate::common::now_ms;
use crate::remoting::body::perm;
use crate::store::filter::AcceptAll;
use crate::store::format::{sys_flag, DecodedRecord};
use crate::store::{
    GetMessageRequest, GetMessageResult, MessageToStore, PutMessageResult, StoreError,
};

use super::transactional_message_util::{
    self as util, property, Properties, CONSUMER_GROUP, HALF_QUEUE_ID, HALF_TOPIC, OP_HALF_TOPIC,
    REMOVE_TAG,
};

/// Java `parseHalfMessageInner`: the message as it waits in the half queue. Its real topic and
/// queue move to REAL_TOPIC / REAL_QID, its UNIQ_KEY is copied to `__transactionId__`, and its
/// transaction bits are cleared, so the store gives it a ConsumeQueue unit in
/// `RMQ_SYS_TRANS_HALF_TOPIC` queue 0 (a PREPARED record would get none and could never be
/// found by the check-back scan).
pub fn half_message(mut msg: MessageToStore) -> MessageToStore {
    let mut props = Properties::parse(msg.properties.as_bytes());
    if let Some(uniq) = props.get(property::UNIQ_KEY).filter(|u| !u.is_empty()) {
        let uniq = uniq.to_string();
        props.put(property::TRANSACTION_ID, &uniq);
    }
    props.put(property::REAL_TOPIC, &msg.topic);
    props.put(property::REAL_QUEUE_ID, &msg.queue_id.to_string());
    msg.properties = props.encode();
    msg.sys_flag = reset_transaction_value(msg.sys_flag, sys_flag::TRANSACTION_NOT_TYPE);
    msg.topic = HALF_TOPIC.to_string();
    msg.queue_id = HALF_QUEUE_ID;
    msg
}

/// Java `MessageSysFlag.resetTransactionValue`.
pub fn reset_transaction_value(flag: i32, transaction_type: i32) -> i32 {
    (flag & !sys_flag::TRANSACTION_MASK) | transaction_type
}

/// Stores a half message (`prepareMessage`). The half topic gets its config first, so its queue
/// can be read like any other (Java creates it on the scan's first look).
pub fn put_half_message(
    ctrl: &BrokerController,
    msg: MessageToStore,
) -> Result<PutMessageResult, StoreError> {
    ensure_system_topic(ctrl, HALF_TOPIC, 1);
    ctrl.store.put_message(&half_message(msg))
}

/// Java `renewHalfMessageInner`: a copy of a stored half message for the end of the half queue,
/// with `properties` (the scan edits the check count or the first queue offset).
pub fn renew_half_message(record: &DecodedRecord<'_>, properties: &Properties) -> MessageToStore {
    MessageToStore {
        topic: record.topic.to_string(),
        queue_id: record.queue_id,
        flag: record.flag,
        body: Bytes::copy_from_slice(record.body),
        properties: properties.encode(),
        sys_flag: record.sys_flag,
        born_timestamp_ms: record.born_timestamp_ms,
        born_host: record.born_host,
        reconsume_times: record.reconsume_times,
        prepared_transaction_offset: 0,
    }
}

/// Java `addRemoveTagInTransactionOp` / `writeOp`: records in `RMQ_SYS_TRANS_OP_HALF_TOPIC`
/// (queue = the half message's queue) that the half message at `half_queue_offset` is ended.
pub fn write_op(
    ctrl: &BrokerController,
    half_queue_id: i32,
    half_queue_offset: i64,
) -> Result<PutMessageResult, StoreError> {
    ensure_system_topic(ctrl, OP_HALF_TOPIC, 1);
    let uniq = create_uniq_id(ctrl.store_host);
    let mut props = Properties::default();
    props.put(property::TAGS, REMOVE_TAG);
    props.put(property::UNIQ_KEY, &uniq);
    let op = MessageToStore {
        topic: OP_HALF_TOPIC.to_string(),
        queue_id: half_queue_id,
        flag: 0,
        body: Bytes::from(util::op_body(half_queue_offset)),
        properties: props.encode(),
        sys_flag: 0,
        born_timestamp_ms: now_ms(),
        born_host: ctrl.store_host,
        reconsume_times: 0,
        prepared_transaction_offset: 0,
    };
    ctrl.store.put_message(&op)
}

/// The record at `commit_log_offset`, if one starts there (`lookMessageByOffset`).
pub fn look_message_by_offset(
    ctrl: &BrokerController,
    commit_log_offset: i64,
) -> Result<Option<Bytes>, StoreError> {
    ctrl.store.look_message_by_offset(commit_log_offset)
}

/// Java `fetchConsumeOffset`: the scan's progress in a queue, or the queue's first offset when
/// the scan never recorded one.
pub fn fetch_consume_offset(ctrl: &BrokerController, topic: &str, queue_id: i32) -> i64 {
    ctrl.offsets
        .query_offset(CONSUMER_GROUP, topic, queue_id)
        .unwrap_or_else(|| ctrl.store.min_offset_in_queue(topic, queue_id))
}

/// Java `updateConsumeOffset`: persisted with the consumer offsets (consumerOffset.json).
pub fn update_consume_offset(ctrl: &BrokerController, topic: &str, queue_id: i32, offset: i64) {
    ctrl.offsets
        .commit_offset(CONSUMER_GROUP, topic, queue_id, offset);
}

/// Up to `nums` messages of the half or op queue from `offset` (`getHalfMessage`,
/// `getOpMessage`).
pub fn get_messages(
    ctrl: &BrokerController,
    topic: &str,
    queue_id: i32,
    offset: i64,
    nums: i32,
) -> Result<GetMessageResult, StoreError> {
    ctrl.store.get_message(&GetMessageRequest {
        group: CONSUMER_GROUP,
        topic,
        queue_id,
        queue_offset: offset,
        max_msg_nums: nums,
        filter: &AcceptAll,
    })
}

/// Java `selectTopicConfig` (`createTopicInSendMessageBackMethod`): the half and op topics
/// get a config (one queue) the first time the scan looks at them, so admin tools list them.
/// A config file that cannot be written keeps the topic in memory; the scan goes on.
pub fn ensure_system_topic(ctrl: &BrokerController, topic: &str, queue_nums: i32) {
    if ctrl.topics.select(topic).is_some() {
        return;
    }
    match ctrl.topics.create_topic_if_absent(
        topic,
        queue_nums,
        perm::PERM_READ | perm::PERM_WRITE,
        0,
    ) {
        Ok((_, created)) => {
            if created {
                ctrl.notify_topics_changed();
            }
        }
        Err(e) => {
            tracing::error!(topic, error = %e, "persisting a transaction topic failed");
            ctrl.notify_topics_changed();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::format::encode_properties;

    fn msg(properties: String, flag: i32) -> MessageToStore {
        MessageToStore {
            topic: "TopicA".into(),
            queue_id: 3,
            flag: 0,
            body: Bytes::from_static(b"b"),
            properties,
            sys_flag: flag,
            born_timestamp_ms: 1,
            born_host: "127.0.0.1:1".parse().unwrap(),
            reconsume_times: 0,
            prepared_transaction_offset: 0,
        }
    }

    /// The half message of Java's `parseHalfMessageInner`, byte for byte in its properties.
    #[test]
    fn a_half_message_waits_in_queue_0_of_the_half_topic_with_no_transaction_bits() {
        let props = encode_properties([("TRAN_MSG", "true"), ("PGROUP", "pg"), ("UNIQ_KEY", "U1")]);
        let half = half_message(msg(props, sys_flag::TRANSACTION_PREPARED_TYPE | 0x2));
        assert_eq!(half.topic, "RMQ_SYS_TRANS_HALF_TOPIC");
        assert_eq!(half.queue_id, 0);
        assert_eq!(half.sys_flag, 0x2, "MULTI_TAGS kept, PREPARED cleared");
        assert_eq!(
            half.properties,
            "TRAN_MSG\u{1}true\u{2}PGROUP\u{1}pg\u{2}UNIQ_KEY\u{1}U1\u{2}__transactionId__\u{1}U1\u{2}REAL_TOPIC\u{1}TopicA\u{2}REAL_QID\u{1}3\u{2}"
        );
        assert!(crate::store::format::is_dispatched_to_consume_queue(
            half.sys_flag
        ));
    }

    #[test]
    fn reset_transaction_value_replaces_only_the_transaction_bits() {
        assert_eq!(reset_transaction_value(0x4 | 0x1, 0x8), 0x8 | 0x1);
        assert_eq!(reset_transaction_value(0xC | 0x10, 0), 0x10);
    }
}
