//! Half messages from their end to their check-back (Java `TransactionalMessageServiceImpl`):
//! finding the half message an END_TRANSACTION names and checking it is that message
//! ([`half_message_for_end`]), recording its end ([`delete_prepare_message`]), and the scan that
//! checks back the half messages no op message ended ([`check`]).
//!
//! The scan reads the half queue from the progress offset of group `CID_SYS_RMQ_TRANS` and the
//! op queue from its own progress offset. An op message names the half queue offsets it ends;
//! a half message it names is passed over, and an op message is done once every half message
//! it names has been passed (the op progress moves over done op messages only, in order). A half
//! message no op message read so far names is checked only once the op queue is read to its
//! end, so a half message ended by an op message not yet read is never checked back.

use std::collections::{HashMap, HashSet};

use bytes::Bytes;

use crate::broker::controller::BrokerController;
use crate::broker::error::BrokerError;
use crate::common::{now_ms, StopFlag};
use crate::remoting::headers::EndTransactionRequestHeader;
use crate::store::format::{self, property_value, DecodedRecord};
use crate::store::{GetMessageStatus, StoreError};

use super::transactional_message_bridge as bridge;
use super::transactional_message_check_listener::{self as listener, CheckedCopy};
use super::transactional_message_util::{
    self as util, property, Properties, HALF_QUEUE_ID, HALF_TOPIC, OP_HALF_TOPIC, REMOVE_TAG,
};

/// Op messages read per store call (Java `OP_MSG_PULL_NUMS`).
const OP_MSG_PULL_NUMS: i32 = 32;
/// Longest a pass over the half queue runs (Java `MAX_PROCESS_TIME_LIMIT`).
const CHECK_PASS_TIME_MAX_MS: i64 = 60_000;
/// Most op messages one pass holds in memory. A pass that reaches it before the end of the op
/// queue stops (it cannot tell which half messages are ended) and the next pass goes on from
/// the op messages done so far. Java reads the whole op queue; this bounds the pass's memory.
const CHECK_PASS_OP_MESSAGES_MAX: usize = 262_144;
/// Most half messages one pass looks at, so one pass cannot run for ever on a queue that keeps
/// growing (Java bounds a pass by time only).
const CHECK_PASS_HALF_MESSAGES_MAX: usize = 262_144;

// ---------------------------------------------------------------------------------------------
// The end of a transaction.

/// Java `commitMessage` / `rollbackMessage` and `checkPrepareMessage`: the stored half message
/// at the header's CommitLog offset, if it is the one the header names (producer group, half
/// queue offset, CommitLog offset).
pub fn half_message_for_end(
    ctrl: &BrokerController,
    header: &EndTransactionRequestHeader,
) -> Result<Bytes, BrokerError> {
    let offset = header.commit_log_offset;
    let bytes = bridge::look_message_by_offset(ctrl, offset)?
        .ok_or(BrokerError::PrepareMessageNotFound { offset })?;
    let record = format::decode_record(&bytes)
        .map_err(|source| BrokerError::StoredMessageUnreadable { offset, source })?;
    check_prepare_message(&record, header)?;
    Ok(bytes)
}

/// Java `checkPrepareMessage`, plus the topic: a record that is not in the half topic is not a
/// half message (Java finds no producer group on it and fails the same way).
pub fn check_prepare_message(
    record: &DecodedRecord<'_>,
    header: &EndTransactionRequestHeader,
) -> Result<(), BrokerError> {
    let offset = header.commit_log_offset;
    if record.topic != HALF_TOPIC {
        return Err(BrokerError::PrepareMessageNotFound { offset });
    }
    let group = property_value(record.properties, property::PRODUCER_GROUP.as_bytes());
    if group != Some(header.producer_group.as_bytes()) {
        return Err(BrokerError::TransactionProducerGroupWrong {
            producer_group: header.producer_group.clone(),
        });
    }
    if record.queue_offset != header.tran_state_table_offset {
        return Err(BrokerError::TransactionStateTableOffsetWrong {
            expected: record.queue_offset,
            got: header.tran_state_table_offset,
        });
    }
    if record.phy_offset != offset {
        return Err(BrokerError::TransactionCommitLogOffsetWrong { offset });
    }
    Ok(())
}

/// Java `deletePrepareMessage`: the op message that ends the half message. Written at once (Java
/// 5 batches op messages for up to 3 s; one per end keeps an acknowledged end durable with the
/// rest of the CommitLog).
pub fn delete_prepare_message(
    ctrl: &BrokerController,
    record: &DecodedRecord<'_>,
) -> Result<(), StoreError> {
    bridge::write_op(ctrl, record.queue_id, record.queue_offset).map(|_| ())
}

// ---------------------------------------------------------------------------------------------
// The check-back scan.

/// The settings of one scan (Java's `check(transactionTimeout, transactionCheckMax, listener)`).
#[derive(Debug, Clone, Copy)]
pub struct CheckSettings {
    pub transaction_timeout_ms: i64,
    pub transaction_check_max: i32,
    /// A half message born longer ago than this is past the CommitLog's retention (Java
    /// `needSkip`: fileReservedTime).
    pub file_reserved_time_ms: i64,
}

/// What one pass did (for logs and tests).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CheckReport {
    pub half_offset: i64,
    pub op_offset: i64,
    /// Half messages checked back with their producer.
    pub checked: usize,
    /// Half messages moved to TRANS_CHECK_MAX_TIME_TOPIC.
    pub discarded: usize,
}

/// Java `check`: one pass over the half queue; the progress is saved as it stops. A raised
/// `stop` ends the pass at the next half message (the broker is shutting down).
pub fn check(
    ctrl: &BrokerController,
    settings: CheckSettings,
    stop: &StopFlag,
) -> Result<CheckReport, StoreError> {
    bridge::ensure_system_topic(ctrl, HALF_TOPIC, 1);
    bridge::ensure_system_topic(ctrl, OP_HALF_TOPIC, 1);
    let queue_min = |topic| ctrl.store.min_offset_in_queue(topic, HALF_QUEUE_ID);
    let half_offset =
        bridge::fetch_consume_offset(ctrl, HALF_TOPIC, HALF_QUEUE_ID).max(queue_min(HALF_TOPIC));
    let op_offset = bridge::fetch_consume_offset(ctrl, OP_HALF_TOPIC, HALF_QUEUE_ID)
        .max(queue_min(OP_HALF_TOPIC));
    let mut pass = CheckPass {
        ctrl,
        settings,
        start_ms: now_ms(),
        stop,
        half_offset,
        ops: OpState::new(op_offset),
        report: CheckReport::default(),
    };
    let scanned = pass.scan();
    let new_op_offset = calculate_op_offset(&mut pass.ops.done, op_offset);
    if pass.half_offset != half_offset {
        bridge::update_consume_offset(ctrl, HALF_TOPIC, HALF_QUEUE_ID, pass.half_offset);
    }
    if new_op_offset != op_offset {
        bridge::update_consume_offset(ctrl, OP_HALF_TOPIC, HALF_QUEUE_ID, new_op_offset);
    }
    pass.report.half_offset = pass.half_offset;
    pass.report.op_offset = new_op_offset;
    scanned.map(|()| pass.report)
}

/// The op messages one pass has read (Java's `removeMap`, `opMsgMap`, `doneOpOffset`).
struct OpState {
    /// Half queue offset → the op message naming it.
    removed: HashMap<i64, i64>,
    /// Op offset → the half offsets it names that the pass has not passed yet.
    pending: HashMap<i64, HashSet<i64>>,
    /// Op offsets all of whose half messages are passed.
    done: Vec<i64>,
    next: i64,
    exhausted: bool,
    read: usize,
}

impl OpState {
    fn new(op_offset: i64) -> Self {
        OpState {
            removed: HashMap::new(),
            pending: HashMap::new(),
            done: Vec::new(),
            next: op_offset,
            exhausted: false,
            read: 0,
        }
    }

    /// The half message at `half_offset` is ended: its op message may be done.
    fn take_removed(&mut self, half_offset: i64) -> bool {
        let Some(op_offset) = self.removed.remove(&half_offset) else {
            return false;
        };
        if let Some(set) = self.pending.get_mut(&op_offset) {
            set.remove(&half_offset);
            if set.is_empty() {
                self.pending.remove(&op_offset);
                self.done.push(op_offset);
            }
        }
        true
    }

    /// Java `fillOpRemoveMap` for one op message.
    fn add(&mut self, op_offset: i64, record: &DecodedRecord<'_>, half_offset_min: i64) {
        self.read += 1;
        let tags = property_value(record.properties, property::TAGS.as_bytes());
        let mut set = HashSet::new();
        if tags == Some(REMOVE_TAG.as_bytes()) {
            for half in util::parse_op_body(record.body) {
                if half >= half_offset_min {
                    self.removed.insert(half, op_offset);
                    set.insert(half);
                }
            }
        } else {
            tracing::error!(
                op_offset,
                "an op message without the remove tag in RMQ_SYS_TRANS_OP_HALF_TOPIC"
            );
        }
        if set.is_empty() {
            self.done.push(op_offset);
        } else {
            self.pending.insert(op_offset, set);
        }
    }
}

/// Java `calculateOpOffset`: the op progress moves over the done op messages that follow it
/// without a gap.
fn calculate_op_offset(done: &mut [i64], old_offset: i64) -> i64 {
    done.sort_unstable();
    let mut offset = old_offset;
    for d in done.iter() {
        if *d != offset {
            break;
        }
        offset += 1;
    }
    offset
}

/// What to do with the half message at the scan's offset.
enum Step {
    /// Passed: move to the next offset.
    Next,
    /// Look at the same offset again (more op messages were read).
    Again,
    /// The pass ends here.
    Stop,
}

struct CheckPass<'a> {
    ctrl: &'a BrokerController,
    settings: CheckSettings,
    start_ms: i64,
    stop: &'a StopFlag,
    /// The half offset the pass has reached.
    half_offset: i64,
    ops: OpState,
    report: CheckReport,
}

impl CheckPass<'_> {
    fn scan(&mut self) -> Result<(), StoreError> {
        self.read_ops()?;
        let mut looked = 0usize;
        loop {
            if self.stop.is_raised() {
                return Ok(());
            }
            if now_ms() - self.start_ms > CHECK_PASS_TIME_MAX_MS
                || looked >= CHECK_PASS_HALF_MESSAGES_MAX
            {
                tracing::info!(
                    half_offset = self.half_offset,
                    "transaction check pass reached its bound"
                );
                return Ok(());
            }
            looked += 1;
            if self.ops.take_removed(self.half_offset) {
                self.half_offset += 1;
                continue;
            }
            match self.step()? {
                Step::Next => self.half_offset += 1,
                Step::Again => {}
                Step::Stop => return Ok(()),
            }
        }
    }

    /// Reads the next op messages (Java `fillOpRemoveMap`).
    fn read_ops(&mut self) -> Result<(), StoreError> {
        let result = bridge::get_messages(
            self.ctrl,
            OP_HALF_TOPIC,
            HALF_QUEUE_ID,
            self.ops.next,
            OP_MSG_PULL_NUMS,
        )?;
        if result.status != GetMessageStatus::Found {
            self.ops.exhausted = true;
            return Ok(());
        }
        for (i, op_offset) in result.queue_offsets.iter().enumerate() {
            match format::decode_record(result.message(i)) {
                Ok(record) => self.ops.add(*op_offset, &record, self.half_offset),
                Err(e) => {
                    tracing::error!(op_offset, error = %e, "unreadable op message");
                    self.ops.done.push(*op_offset);
                }
            }
        }
        self.ops.next = result.next_begin_offset;
        Ok(())
    }

    /// One look at the half message at `half_offset`, not named by any op message read so far.
    fn step(&mut self) -> Result<Step, StoreError> {
        let result =
            bridge::get_messages(self.ctrl, HALF_TOPIC, HALF_QUEUE_ID, self.half_offset, 1)?;
        match result.status {
            GetMessageStatus::Found => {}
            GetMessageStatus::OffsetTooSmall | GetMessageStatus::OffsetOverflowBadly
                if result.next_begin_offset > self.half_offset =>
            {
                // Java `getMessageNullCount` with an illegal offset: go on from where the
                // store says the queue goes on.
                self.half_offset = result.next_begin_offset;
                return Ok(Step::Again);
            }
            _ => return Ok(Step::Stop),
        }
        let bytes = result.message(0);
        let record = match format::decode_record(bytes) {
            Ok(r) => r,
            Err(e) => {
                tracing::error!(half_offset = self.half_offset, error = %e, "unreadable half message; passing it over");
                return Ok(Step::Next);
            }
        };
        self.step_record(&record)
    }

    fn step_record(&mut self, record: &DecodedRecord<'_>) -> Result<Step, StoreError> {
        let mut props = Properties::parse(record.properties);
        if self.need_discard(&mut props) || self.need_skip(record) {
            return self.discard(record);
        }
        if record.store_timestamp_ms >= self.start_ms {
            return Ok(Step::Stop);
        }
        let now = now_ms();
        let age_ms = now - record.born_timestamp_ms;
        let timeout_ms = self.settings.transaction_timeout_ms;
        let immunity = props
            .get(property::CHECK_IMMUNITY_TIME_IN_SECONDS)
            .map(|s| util::immunity_time_ms(s, timeout_ms));
        match immunity {
            Some(immunity_ms) if age_ms <= immunity_ms => {
                return self.check_prepare_queue_offset(record, &props);
            }
            None if (0..=timeout_ms).contains(&age_ms) => return Ok(Step::Stop),
            _ => {}
        }
        if !self.ops.exhausted {
            if self.ops.read >= CHECK_PASS_OP_MESSAGES_MAX {
                tracing::warn!(
                    half_offset = self.half_offset,
                    ops = self.ops.read,
                    "transaction check pass holds its most op messages; the next pass goes on"
                );
                return Ok(Step::Stop);
            }
            self.read_ops()?;
            return Ok(Step::Again);
        }
        self.check_back(record, &props)
    }

    /// Java `needDiscard`: counts this check in TRANSACTION_CHECK_TIMES; true once the count
    /// has reached transactionCheckMax.
    fn need_discard(&self, props: &mut Properties) -> bool {
        let times = match props.get(property::TRANSACTION_CHECK_TIMES) {
            None => 1,
            Some(t) => {
                let t = t.trim().parse::<i32>().unwrap_or(-1);
                if t >= self.settings.transaction_check_max {
                    return true;
                }
                t.saturating_add(1)
            }
        };
        props.put(property::TRANSACTION_CHECK_TIMES, &times.to_string());
        false
    }

    /// Java `needSkip`: a half message born before the CommitLog's retention.
    fn need_skip(&self, record: &DecodedRecord<'_>) -> bool {
        now_ms() - record.born_timestamp_ms > self.settings.file_reserved_time_ms
    }

    fn discard(&mut self, record: &DecodedRecord<'_>) -> Result<Step, StoreError> {
        let put = listener::resolve_discard_msg(self.ctrl, record)?;
        tracing::error!(
            half_offset = self.half_offset,
            real_topic = property_value(record.properties, property::REAL_TOPIC.as_bytes())
                .map(String::from_utf8_lossy)
                .as_deref(),
            uniq_key = property_value(record.properties, property::UNIQ_KEY.as_bytes())
                .map(String::from_utf8_lossy)
                .as_deref(),
            commit_log_offset = put.wrote_phy_offset,
            "half message checked too many times; moved to TRANS_CHECK_MAX_TIME_TOPIC"
        );
        self.report.discarded += 1;
        Ok(Step::Next)
    }

    /// Java `checkPrepareQueueOffset`: a half message still inside its immunity time is not
    /// checked; it is passed over once its first copy's end is read, else stored again at the
    /// end of the half queue (naming its first copy's offset) for a later pass.
    fn check_prepare_queue_offset(
        &mut self,
        record: &DecodedRecord<'_>,
        props: &Properties,
    ) -> Result<Step, StoreError> {
        let first = props.get(property::TRANSACTION_PREPARED_QUEUE_OFFSET);
        if let Some(first) = first {
            let Ok(first) = first.trim().parse::<i64>() else {
                return Ok(Step::Stop);
            };
            if self.ops.take_removed(first) {
                return Ok(Step::Next);
            }
        }
        let mut renewed = Properties::parse(record.properties);
        if first.is_none() {
            renewed.put(
                property::TRANSACTION_PREPARED_QUEUE_OFFSET,
                &record.queue_offset.to_string(),
            );
        }
        self.ctrl
            .store
            .put_message(&bridge::renew_half_message(record, &renewed))?;
        Ok(Step::Next)
    }

    /// Java `putBackHalfMsgQueue` and `resolveHalfMsg`: the half message is stored again at the
    /// end of the half queue with its check counted, and its producer is asked about that copy.
    fn check_back(
        &mut self,
        record: &DecodedRecord<'_>,
        props: &Properties,
    ) -> Result<Step, StoreError> {
        let put = self
            .ctrl
            .store
            .put_message(&bridge::renew_half_message(record, props))?;
        let copy = CheckedCopy {
            record,
            properties: props,
            put: &put,
        };
        self.report.checked += 1;
        match listener::send_check_message(self.ctrl, &copy) {
            Ok(()) => tracing::info!(
                half_offset = put.queue_offset,
                commit_log_offset = put.wrote_phy_offset,
                real_topic = props.get(property::REAL_TOPIC),
                uniq_key = props.get(property::UNIQ_KEY),
                "checking a transaction back with its producer"
            ),
            Err(e) => tracing::warn!(
                half_offset = put.queue_offset,
                uniq_key = props.get(property::UNIQ_KEY),
                error = %e,
                "check transaction failed"
            ),
        }
        Ok(Step::Next)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_op_offset_moves_over_done_op_messages_without_a_gap() {
        assert_eq!(calculate_op_offset(&mut [12, 10, 11, 14], 10), 13);
        assert_eq!(calculate_op_offset(&mut [11], 10), 10);
        assert_eq!(calculate_op_offset(&mut [], 10), 10);
    }
}
