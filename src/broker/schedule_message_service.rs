//! Delayed delivery (Java `ScheduleMessageService`): messages with a DELAY level are stored in
//! `SCHEDULE_TOPIC_XXXX` queue `level - 1` (see `processor::send::apply_delay_level`); this
//! service moves each one to its real topic and queue once `store time + level delay` has
//! passed. Retries (`CONSUMER_SEND_MSG_BACK`) use it. Progress per level is kept in
//! `config/delayOffset.json` (`{"offsetTable":{"1":0,...}}`, Java's format) so a restart neither
//! loses nor repeats deliveries beyond the last flush.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;

use crate::broker::config_manager::{self as persist, ContentError, Loaded};
use crate::broker::controller::BrokerController;
use crate::broker::processor::send::{property, remove_property};
use crate::broker::topic_config_manager::SCHEDULE_TOPIC;
use crate::common::now_ms;
use crate::common::StopFlag;
use crate::store::filter::AcceptAll;
use crate::store::format::{self, property_value};
use crate::store::{GetMessageRequest, GetMessageStatus, MessageToStore};

/// How often each level's queue is looked at. Delay levels start at 1 s.
const SCHEDULE_TICK_MS: u64 = 100;
/// Messages moved per level per tick, so one level cannot starve the others.
const SCHEDULE_BATCH_MAX: i32 = 32;
/// delayOffset.json is written at most this often (and at shutdown).
const SCHEDULE_PERSIST_INTERVAL_MS: i64 = 5_000;
const SCHEDULE_GROUP: &str = "SCHEDULE_SERVICE";

fn offset_file(ctrl: &BrokerController) -> PathBuf {
    ctrl.config
        .store
        .root_dir
        .join("config")
        .join("delayOffset.json")
}

fn load_offsets(ctrl: &BrokerController) -> BTreeMap<i32, i64> {
    match persist::load_with_backup(&offset_file(ctrl), parse_delay_offsets) {
        Ok(Loaded::Main(t)) => t,
        Ok(Loaded::Backup(t, used)) => {
            tracing::error!("{used}");
            t
        }
        Ok(Loaded::Missing) => BTreeMap::new(),
        Err(e) => {
            // Starting from the queues' min offsets would re-deliver; say so loudly.
            tracing::error!(error = %e, "delayOffset.json and its backup are unusable; delayed messages restart from each level's oldest");
            BTreeMap::new()
        }
    }
}

/// delayOffset.json: `{"offsetTable":{"<level>":<offset>,...}}`.
fn parse_delay_offsets(text: &str) -> Result<BTreeMap<i32, i64>, ContentError> {
    let table = persist::parse_offset_table(text)?;
    table
        .iter()
        .map(|(level, offset)| persist::queue_offset("offsetTable", level, offset))
        .collect()
}

fn persist_offsets(ctrl: &BrokerController, offsets: &BTreeMap<i32, i64>) {
    let table: BTreeMap<String, i64> = offsets.iter().map(|(k, v)| (k.to_string(), *v)).collect();
    let text = serde_json::json!({ "offsetTable": table }).to_string();
    if let Err(e) = persist::write_atomically(&offset_file(ctrl), text.as_bytes()) {
        tracing::error!(error = %e, "writing delayOffset.json failed");
    }
}

/// The `ringmq-schedule` thread's loop (started by `startup`): every tick, moves each level's
/// due messages; returns when `stop` is raised, after writing the progress once more.
pub fn run(ctrl: &Arc<BrokerController>, stop: &StopFlag) {
    let mut offsets = load_offsets(ctrl);
    let mut dirty = false;
    let mut last_persist_ms = now_ms();
    while !stop.wait_timeout(Duration::from_millis(SCHEDULE_TICK_MS)) {
        if ctrl.is_slave() {
            continue;
        }
        for (index, delay_ms) in ctrl.delay_levels_ms.iter().enumerate() {
            let level = index as i32 + 1;
            let offset = offsets.get(&level).copied().unwrap_or(0);
            let next = deliver_due(ctrl, level, *delay_ms as i64, offset);
            if next != offset {
                offsets.insert(level, next);
                dirty = true;
            }
        }
        if dirty && now_ms() - last_persist_ms >= SCHEDULE_PERSIST_INTERVAL_MS {
            persist_offsets(ctrl, &offsets);
            dirty = false;
            last_persist_ms = now_ms();
        }
    }
    if dirty {
        persist_offsets(ctrl, &offsets);
    }
}

/// Moves the due messages of one level; returns the level's new offset.
fn deliver_due(ctrl: &Arc<BrokerController>, level: i32, delay_ms: i64, offset: i64) -> i64 {
    let queue_id = level - 1;
    let result = match ctrl.store.get_message(&GetMessageRequest {
        group: SCHEDULE_GROUP,
        topic: SCHEDULE_TOPIC,
        queue_id,
        queue_offset: offset,
        max_msg_nums: SCHEDULE_BATCH_MAX,
        filter: &AcceptAll,
    }) {
        Ok(r) => r,
        Err(e) => {
            tracing::warn!(level, error = %e, "reading the schedule queue failed");
            return offset;
        }
    };
    match result.status {
        GetMessageStatus::Found => {}
        GetMessageStatus::OffsetTooSmall | GetMessageStatus::OffsetOverflowBadly => {
            return result.next_begin_offset
        }
        _ => return offset,
    }
    let now = now_ms();
    let mut next = offset;
    for (i, queue_offset) in result.queue_offsets.iter().enumerate() {
        let record = result.message(i);
        let Ok(decoded) = format::decode_record(record) else {
            tracing::error!(
                level,
                queue_offset,
                "unreadable record in the schedule queue; skipping it"
            );
            next = queue_offset + 1;
            continue;
        };
        if decoded.store_timestamp_ms + delay_ms > now {
            break;
        }
        if let Err(e) = deliver(ctrl, &decoded) {
            tracing::warn!(level, queue_offset, error = %e, "delivering a delayed message failed; will retry");
            break;
        }
        next = queue_offset + 1;
    }
    next
}

fn deliver(
    ctrl: &Arc<BrokerController>,
    record: &format::DecodedRecord<'_>,
) -> Result<(), crate::store::StoreError> {
    let props = record.properties;
    let text = |name: &str| {
        property_value(props, name.as_bytes()).map(|v| String::from_utf8_lossy(v).into_owned())
    };
    let Some(topic) = text(property::REAL_TOPIC) else {
        tracing::error!("delayed message without REAL_TOPIC; dropping it");
        return Ok(());
    };
    let queue_id = text(property::REAL_QID)
        .and_then(|q| q.parse().ok())
        .unwrap_or(0);
    let properties = remove_property(&String::from_utf8_lossy(props), property::DELAY);
    let msg = MessageToStore {
        topic,
        queue_id,
        flag: record.flag,
        body: Bytes::copy_from_slice(record.body),
        properties,
        sys_flag: record.sys_flag,
        born_timestamp_ms: record.born_timestamp_ms,
        born_host: record.born_host,
        reconsume_times: record.reconsume_times,
        prepared_transaction_offset: 0,
    };
    ctrl.store.put_message(&msg).map(|_| ())
}
