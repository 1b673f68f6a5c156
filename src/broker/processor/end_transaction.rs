//! END_TRANSACTION (37): Java `EndTransactionProcessor`. A producer ends its half message: a
//! commit stores the message in its real topic and queue, a rollback drops it; both write the
//! op message that ends the half message. Clients send it oneway, so a refusal is also logged
//! at warn (`dispatch`); a request-response caller gets Java's code.

use bytes::Bytes;

use crate::broker::transaction::transactional_message_bridge::reset_transaction_value;
use crate::broker::transaction::transactional_message_service as service;
use crate::broker::transaction::transactional_message_util::{self as util, property, Properties};
use crate::common::now_ms;
use crate::remoting::codes::response_code as rc;
use crate::remoting::command::RemotingCommand;
use crate::remoting::headers::EndTransactionRequestHeader;
use crate::store::format::{self, sys_flag, DecodedRecord};
use crate::store::MessageToStore;

use super::send::apply_delay_level;
use super::{respond, Handled, ProcessResult, RequestContext};
use crate::broker::controller::BrokerController;
use crate::broker::error::BrokerError;

/// END_TRANSACTION. A refusal is logged at warn here too when the request expects an answer
/// (`dispatch` logs the oneway ones): a transaction that could not be ended is worth a look.
pub async fn end_transaction(cx: &RequestContext<'_>, request: &RemotingCommand) -> ProcessResult {
    let result = end(cx, request);
    if let Err(e) = &result {
        if !request.is_oneway() {
            tracing::warn!(
                producer = %cx.conn.remote_addr,
                response = e.response_code(),
                error = %e,
                "END_TRANSACTION refused"
            );
        }
    }
    result
}

fn end(cx: &RequestContext<'_>, request: &RemotingCommand) -> ProcessResult {
    let ctrl = cx.ctrl;
    let header = EndTransactionRequestHeader::decode(request)?;
    if ctrl.is_slave() {
        return Err(BrokerError::EndTransactionOnSlave);
    }
    let commit = match header.commit_or_rollback {
        sys_flag::TRANSACTION_COMMIT_TYPE => true,
        sys_flag::TRANSACTION_ROLLBACK_TYPE => false,
        sys_flag::TRANSACTION_NOT_TYPE => {
            tracing::warn!(
                producer = %cx.conn.remote_addr,
                from_transaction_check = header.from_transaction_check,
                msg_id = header.msg_id,
                commit_log_offset = header.commit_log_offset,
                remark = request.remark.as_deref(),
                "the producer ended a transaction with its state unknown; the check-back will ask again"
            );
            return Ok(Handled::NoAnswer);
        }
        value => return Err(BrokerError::CommitOrRollbackWrong { value }),
    };
    if header.from_transaction_check || !commit {
        tracing::warn!(
            producer = %cx.conn.remote_addr,
            from_transaction_check = header.from_transaction_check,
            commit,
            msg_id = header.msg_id,
            commit_log_offset = header.commit_log_offset,
            remark = request.remark.as_deref(),
            "transaction ended"
        );
    }
    let bytes = service::half_message_for_end(ctrl, &header)?;
    let record =
        format::decode_record(&bytes).map_err(|source| BrokerError::StoredMessageUnreadable {
            offset: header.commit_log_offset,
            source,
        })?;
    reject_commit_or_rollback(ctrl, &header, &record)?;
    if commit {
        commit_message(ctrl, &header, &record)?;
    } else {
        service::delete_prepare_message(ctrl, &record).map_err(BrokerError::PutMessage)?;
    }
    respond(RemotingCommand::response_to(request, rc::SUCCESS, None))
}

/// Java `sendFinalMessage` then `deletePrepareMessage`. The op message is written after the
/// message: a failure between the two leaves the half message to the check-back, which may
/// deliver it twice but never loses it (Java's order).
fn commit_message(
    ctrl: &BrokerController,
    header: &EndTransactionRequestHeader,
    record: &DecodedRecord<'_>,
) -> Result<(), BrokerError> {
    let mut msg = end_message_transaction(record).ok_or(BrokerError::PrepareMessageNotFound {
        offset: header.commit_log_offset,
    })?;
    msg.prepared_transaction_offset = header.commit_log_offset;
    apply_delay_level(ctrl, &mut msg);
    let put = ctrl
        .store
        .put_message(&msg)
        .map_err(BrokerError::PutMessage)?;
    // Java `EndTransactionProcessor`: the committed message counts as a put of its topic.
    ctrl.stats
        .inc_put(&msg.topic, put.message_count.max(0) as u64);
    if let Err(e) = service::delete_prepare_message(ctrl, record) {
        tracing::error!(
            commit_log_offset = header.commit_log_offset,
            error = %e,
            "committed a transactional message but could not write its op message; the check-back may deliver it again"
        );
    }
    Ok(())
}

/// Java `endMessageTransaction` with the commit's flags: the half message for its real topic
/// and queue, sysFlag TRANSACTION_COMMIT_TYPE, every property but REAL_TOPIC, REAL_QID and
/// TRAN_MSG. `None` when the half message does not name its real topic and queue.
pub fn end_message_transaction(record: &DecodedRecord<'_>) -> Option<MessageToStore> {
    let mut props = Properties::parse(record.properties);
    let topic = props.get(property::REAL_TOPIC)?.to_string();
    let queue_id = props.get(property::REAL_QUEUE_ID)?.trim().parse().ok()?;
    props.remove(property::REAL_TOPIC);
    props.remove(property::REAL_QUEUE_ID);
    props.remove(property::TRANSACTION_PREPARED);
    Some(MessageToStore {
        topic,
        queue_id,
        flag: record.flag,
        body: Bytes::copy_from_slice(record.body),
        properties: props.encode(),
        sys_flag: reset_transaction_value(record.sys_flag, sys_flag::TRANSACTION_COMMIT_TYPE),
        born_timestamp_ms: record.born_timestamp_ms,
        born_host: record.born_host,
        reconsume_times: record.reconsume_times,
        prepared_transaction_offset: 0,
    })
}

/// Java `rejectCommitOrRollback`: with a CHECK_IMMUNITY_TIME_IN_SECONDS, a producer's own end
/// that comes after it is refused (ILLEGAL_OPERATION); the check-back decides.
fn reject_commit_or_rollback(
    ctrl: &BrokerController,
    header: &EndTransactionRequestHeader,
    record: &DecodedRecord<'_>,
) -> Result<(), BrokerError> {
    if header.from_transaction_check {
        return Ok(());
    }
    let Some(seconds) = format::property_value(
        record.properties,
        property::CHECK_IMMUNITY_TIME_IN_SECONDS.as_bytes(),
    )
    .filter(|s| !s.is_empty()) else {
        return Ok(());
    };
    let timeout_ms = i64::try_from(ctrl.config.broker.transaction_timeout_ms).unwrap_or(i64::MAX);
    let immunity_ms = util::immunity_time_ms(&String::from_utf8_lossy(seconds), timeout_ms);
    if now_ms() - record.born_timestamp_ms > immunity_ms {
        return Err(BrokerError::TransactionImmunityPassed {
            offset: header.commit_log_offset,
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::broker::transaction::transactional_message_bridge::half_message;
    use crate::store::format::{encode_properties, encode_record, RecordFields};

    /// The committed message of Java's `endMessageTransaction`: the real topic and queue, the
    /// user's properties, COMMIT_TYPE.
    #[test]
    fn a_committed_half_message_is_the_sent_message_in_its_real_queue() {
        let props = encode_properties([
            ("TRAN_MSG", "true"),
            ("PGROUP", "pg"),
            ("UNIQ_KEY", "U1"),
            ("TAGS", "TagA"),
        ]);
        let sent = MessageToStore {
            topic: "TopicA".into(),
            queue_id: 2,
            flag: 7,
            body: Bytes::from_static(b"hello"),
            properties: props,
            sys_flag: sys_flag::TRANSACTION_PREPARED_TYPE,
            born_timestamp_ms: 1_700_000_000_000,
            born_host: "127.0.0.1:5000".parse().unwrap(),
            reconsume_times: 0,
            prepared_transaction_offset: 0,
        };
        let half = half_message(sent);
        let mut bytes = Vec::new();
        encode_record(
            &RecordFields {
                queue_id: half.queue_id,
                flag: half.flag,
                queue_offset: 4,
                phy_offset: 4096,
                sys_flag: half.sys_flag,
                born_timestamp_ms: half.born_timestamp_ms,
                born_host: half.born_host,
                store_timestamp_ms: 1_700_000_000_001,
                store_host: "127.0.0.1:10911".parse().unwrap(),
                reconsume_times: 0,
                prepared_transaction_offset: 0,
                body: &half.body,
                topic: half.topic.as_bytes(),
                properties: half.properties.as_bytes(),
            },
            &mut bytes,
        );
        let record = format::decode_record(&bytes).unwrap();
        let committed = end_message_transaction(&record).unwrap();
        assert_eq!(committed.topic, "TopicA");
        assert_eq!(committed.queue_id, 2);
        assert_eq!(committed.flag, 7);
        assert_eq!(&committed.body[..], b"hello");
        assert_eq!(committed.sys_flag, sys_flag::TRANSACTION_COMMIT_TYPE);
        assert!(format::is_dispatched_to_consume_queue(committed.sys_flag));
        assert_eq!(
            committed.properties,
            "PGROUP\u{1}pg\u{2}UNIQ_KEY\u{1}U1\u{2}TAGS\u{1}TagA\u{2}__transactionId__\u{1}U1\u{2}"
        );
    }
}
