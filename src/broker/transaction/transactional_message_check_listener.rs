//! What the check-back scan does with a half message (Java
//! `AbstractTransactionalMessageCheckListener`, `DefaultTransactionalMessageCheckListener`,
//! `Broker2Client.checkProducerTransactionState`): ask a producer of its group for the
//! transaction's state, or set aside a message checked too often.

use crate::broker::controller::BrokerController;
use crate::net::Outbound;
use crate::remoting::codes::request_code;
use crate::remoting::command::RemotingCommand;
use crate::remoting::headers::CheckTransactionStateRequestHeader;
use crate::store::format::{self, DecodedRecord, RecordFields};
use crate::store::{MessageToStore, PutMessageResult, StoreError};

use super::transactional_message_util::{
    property, Properties, CHECK_MAX_TIME_TOPIC, CHECK_MAX_TIME_TOPIC_QUEUE_NUMS,
};

/// A half message as stored at the end of the half queue for its check (the copy the producer's
/// answer names).
#[derive(Debug, Clone, Copy)]
pub struct CheckedCopy<'a> {
    pub record: &'a DecodedRecord<'a>,
    /// The copy's properties (with its TRANSACTION_CHECK_TIMES).
    pub properties: &'a Properties,
    pub put: &'a PutMessageResult,
}

/// Why no producer was asked.
#[derive(Debug, thiserror::Error)]
pub enum CheckNotSent {
    #[error("no producer of group {group:?} is connected")]
    NoProducer { group: String },
    #[error("the half message has no REAL_TOPIC / REAL_QID")]
    NoRealTopic,
    #[error("the connection of producer {client_id} did not take the request: {reason}")]
    Connection { client_id: String, reason: String },
}

/// Java `sendCheckMessage`: CHECK_TRANSACTION_STATE (oneway) to one connection of the message's
/// producer group, with the message (real topic and queue, the copy's offsets) as its body,
/// encoded as `MessageDecoder.encode` does.
pub fn send_check_message(
    ctrl: &BrokerController,
    copy: &CheckedCopy<'_>,
) -> Result<(), CheckNotSent> {
    let props = copy.properties;
    let real_topic = props
        .get(property::REAL_TOPIC)
        .ok_or(CheckNotSent::NoRealTopic)?;
    let real_queue_id = props
        .get(property::REAL_QUEUE_ID)
        .and_then(|q| q.trim().parse::<i32>().ok())
        .ok_or(CheckNotSent::NoRealTopic)?;
    let group = props.get(property::PRODUCER_GROUP).unwrap_or_default();
    let channel =
        ctrl.producers
            .available_channel(group)
            .ok_or_else(|| CheckNotSent::NoProducer {
                group: group.to_string(),
            })?;
    let uniq = props.get(property::UNIQ_KEY).map(str::to_string);
    let mut request = RemotingCommand::request(request_code::CHECK_TRANSACTION_STATE).oneway();
    CheckTransactionStateRequestHeader {
        topic: Some(copy.record.topic.to_string()),
        tran_state_table_offset: copy.put.queue_offset,
        commit_log_offset: copy.put.wrote_phy_offset,
        msg_id: uniq.clone(),
        transaction_id: uniq,
        offset_msg_id: copy.put.msg_ids.first().cloned(),
        broker_name: Some(ctrl.config.broker.name.clone()),
    }
    .encode(&mut request);
    let body = encode_checked_message(ctrl, copy, real_topic, real_queue_id);
    let request = request.with_body(body.into());
    channel
        .sender
        .send(Outbound::Command(request))
        .map_err(|e| CheckNotSent::Connection {
            client_id: channel.client_id.clone(),
            reason: e.to_string(),
        })
}

/// The body of CHECK_TRANSACTION_STATE: Java `MessageDecoder.encode(msgExt, false)` of the
/// copy with its topic and queue set to the real ones (the record layout, with the copy's
/// queue offset, CommitLog offset and store time).
fn encode_checked_message(
    ctrl: &BrokerController,
    copy: &CheckedCopy<'_>,
    real_topic: &str,
    real_queue_id: i32,
) -> Vec<u8> {
    let record = copy.record;
    let properties = copy.properties.encode();
    let mut out = Vec::new();
    format::encode_record(
        &RecordFields {
            queue_id: real_queue_id,
            flag: record.flag,
            queue_offset: copy.put.queue_offset,
            phy_offset: copy.put.wrote_phy_offset,
            sys_flag: record.sys_flag,
            born_timestamp_ms: record.born_timestamp_ms,
            born_host: record.born_host,
            store_timestamp_ms: copy.put.store_timestamp_ms,
            store_host: ctrl.store_host,
            reconsume_times: record.reconsume_times,
            prepared_transaction_offset: record.prepared_transaction_offset,
            body: record.body,
            topic: real_topic.as_bytes(),
            properties: properties.as_bytes(),
        },
        &mut out,
    );
    out
}

/// Java `resolveDiscardMsg`: a half message checked `transactionCheckMax` times (or older than
/// the CommitLog's retention) goes to `TRANS_CHECK_MAX_TIME_TOPIC` queue 0, as it is stored.
/// An error means it was not stored there; the scan keeps it for the next pass.
pub fn resolve_discard_msg(
    ctrl: &BrokerController,
    record: &DecodedRecord<'_>,
) -> Result<PutMessageResult, StoreError> {
    super::transactional_message_bridge::ensure_system_topic(
        ctrl,
        CHECK_MAX_TIME_TOPIC,
        CHECK_MAX_TIME_TOPIC_QUEUE_NUMS,
    );
    let msg = MessageToStore {
        topic: CHECK_MAX_TIME_TOPIC.to_string(),
        queue_id: 0,
        flag: record.flag,
        body: bytes::Bytes::copy_from_slice(record.body),
        properties: String::from_utf8_lossy(record.properties).into_owned(),
        sys_flag: record.sys_flag,
        born_timestamp_ms: record.born_timestamp_ms,
        born_host: record.born_host,
        reconsume_times: record.reconsume_times,
        prepared_transaction_offset: 0,
    };
    ctrl.store.put_message(&msg)
}
