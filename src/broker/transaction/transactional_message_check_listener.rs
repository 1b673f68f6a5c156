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
    let body = encode_checked_message(ctrl.store_host, copy, real_topic, real_queue_id);
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
    store_host: std::net::SocketAddr,
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
            store_host,
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::PutMessageStatus;

    const BORN: &str = "10.0.0.7:5000";
    const STORE: &str = "127.0.0.1:10911";

    /// A half message as stored: "hi", flag 3, real queue TopicA:2.
    fn stored_half() -> Vec<u8> {
        let mut stored = Vec::new();
        format::encode_record(
            &RecordFields {
                queue_id: 0,
                flag: 3,
                queue_offset: 0,
                phy_offset: 0,
                sys_flag: 0,
                born_timestamp_ms: 1_000,
                born_host: BORN.parse().unwrap(),
                store_timestamp_ms: 1_001,
                store_host: STORE.parse().unwrap(),
                reconsume_times: 0,
                prepared_transaction_offset: 0,
                body: b"hi",
                topic: b"RMQ_SYS_TRANS_HALF_TOPIC",
                properties: "REAL_TOPIC\u{1}TopicA\u{2}REAL_QID\u{1}2\u{2}".as_bytes(),
            },
            &mut stored,
        );
        stored
    }

    /// Java's `MessageDecoder.encode` of the copy at queue offset 9, CommitLog offset 4096,
    /// stored at 2000, with its topic and queue set to TopicA:2, field by field.
    fn java_encoding(props_text: &str) -> Vec<u8> {
        let mut want = Vec::new();
        let fixed = 4 + 4 + 4 + 4 + 4 + 8 + 8 + 4 + 8 + 8 + 8 + 8 + 4 + 8;
        let total = fixed + 4 + 2 + 1 + 6 + 2 + props_text.len();
        want.extend((total as i32).to_be_bytes());
        want.extend(0xDAA3_20A7_u32.to_be_bytes());
        want.extend(((crc32fast::hash(b"hi") & 0x7FFF_FFFF) as i32).to_be_bytes());
        want.extend(2i32.to_be_bytes()); // QUEUEID: the real queue
        want.extend(3i32.to_be_bytes()); // FLAG
        want.extend(9i64.to_be_bytes()); // QUEUEOFFSET: the copy's
        want.extend(4096i64.to_be_bytes()); // PHYSICALOFFSET: the copy's
        want.extend(0i32.to_be_bytes()); // SYSFLAG
        want.extend(1_000i64.to_be_bytes()); // BORNTIMESTAMP
        want.extend([10, 0, 0, 7]);
        want.extend(5000i32.to_be_bytes());
        want.extend(2_000i64.to_be_bytes()); // STORETIMESTAMP: the copy's
        want.extend([127, 0, 0, 1]);
        want.extend(10911i32.to_be_bytes());
        want.extend(0i32.to_be_bytes()); // RECONSUMETIMES
        want.extend(0i64.to_be_bytes()); // PREPARED TRANSACTION OFFSET
        want.extend(2i32.to_be_bytes());
        want.extend(b"hi");
        want.push(6);
        want.extend(b"TopicA");
        want.extend((props_text.len() as i16).to_be_bytes());
        want.extend(props_text.as_bytes());
        want
    }

    /// The CHECK_TRANSACTION_STATE body, byte for byte as Java lays it out.
    #[test]
    fn the_check_body_is_javas_message_encoding_of_the_copy_in_its_real_queue() {
        let stored = stored_half();
        let record = format::decode_record(&stored).unwrap();
        let mut props = Properties::parse(record.properties);
        props.put(property::TRANSACTION_CHECK_TIMES, "1");
        let put = PutMessageResult {
            status: PutMessageStatus::PutOk,
            wrote_phy_offset: 4096,
            wrote_bytes: 0,
            queue_offset: 9,
            msg_ids: vec![],
            store_timestamp_ms: 2_000,
            message_count: 1,
        };
        let copy = CheckedCopy {
            record: &record,
            properties: &props,
            put: &put,
        };
        let body = encode_checked_message(STORE.parse().unwrap(), &copy, "TopicA", 2);
        let props_text =
            "REAL_TOPIC\u{1}TopicA\u{2}REAL_QID\u{1}2\u{2}TRANSACTION_CHECK_TIMES\u{1}1\u{2}";
        assert_eq!(body, java_encoding(props_text));
    }
}
