//! Delayed delivery (Java `ScheduleMessageService`): messages with a DELAY level are stored in
//! `SCHEDULE_TOPIC_XXXX` queue `level - 1` (see `processor::send::apply_delay_level`); this
//! service moves each one to its real topic and queue once `store time + level delay` has
//! passed. Retries (`CONSUMER_SEND_MSG_BACK`) use it. Progress per level is kept in
//! `config/delayOffset.json` (`{"offsetTable":{"1":0,...}}`, Java's format) so a restart neither
//! loses nor repeats deliveries beyond the last flush.
//!
//! A level's messages are delivered in order, so one message must never hold the rest back: a
//! message the store refuses for good goes to its group's DLQ or is dropped ([`set_aside`]),
//! and a store failure that may pass is retried after a growing wait ([`Backoff`]).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;

use crate::broker::config_manager::{self as persist, ContentError, Loaded, PersistError};
use crate::broker::controller::BrokerController;
use crate::broker::processor::send::{property, remove_property};
use crate::broker::topic_config_manager::{dlq_topic, RETRY_GROUP_TOPIC_PREFIX, SCHEDULE_TOPIC};
use crate::common::now_ms;
use crate::common::StopFlag;
use crate::remoting::body::perm;
use crate::store::filter::AcceptAll;
use crate::store::format::{self, property_value};
use crate::store::{
    GetMessageRequest, GetMessageStatus, MessageToStore, PutMessageStatus, StoreError,
};

/// How often each level's queue is looked at. Delay levels start at 1 s.
const SCHEDULE_TICK_MS: u64 = 100;
/// Messages moved per level per tick, so one level cannot starve the others.
const SCHEDULE_BATCH_MAX: i32 = 32;
/// delayOffset.json is written at most this often (and at shutdown).
const SCHEDULE_PERSIST_INTERVAL_MS: i64 = 5_000;
const SCHEDULE_GROUP: &str = "SCHEDULE_SERVICE";
/// First wait before a level is tried again after the store failed it (see [`Backoff`]).
const SCHEDULE_RETRY_BACKOFF_MIN_MS: i64 = 1_000;
/// Longest wait between two tries of a level the store keeps failing.
const SCHEDULE_RETRY_BACKOFF_MAX_MS: i64 = 60_000;

fn offset_file(ctrl: &BrokerController) -> PathBuf {
    offset_file_in(&ctrl.config.store.root_dir)
}

fn offset_file_in(store_root: &Path) -> PathBuf {
    store_root.join("config").join("delayOffset.json")
}

/// Loads each level's progress from `<store root>/config/delayOffset.json`, or from its `.bak`
/// (logged as an error) when the file is corrupt. Neither usable is an error naming the file:
/// the broker refuses to start, as Java's does when `ScheduleMessageService.load` (its
/// `ConfigManager.load`, which tries the `.bak` too) returns false. Starting every level from
/// 0 instead would deliver every delayed message and retry again.
pub fn load_offsets(store_root: &Path) -> Result<BTreeMap<i32, i64>, PersistError> {
    match persist::load_with_backup(&offset_file_in(store_root), parse_delay_offsets)? {
        Loaded::Main(t) => Ok(t),
        Loaded::Backup(t, used) => {
            tracing::error!("{used}");
            eprintln!("ringmq: WARNING: {used}");
            Ok(t)
        }
        Loaded::Missing => Ok(BTreeMap::new()),
    }
}

/// delayOffset.json: `{"offsetTable":{"<level>":<offset>,...}}`.
pub(crate) fn parse_delay_offsets(text: &str) -> Result<BTreeMap<i32, i64>, ContentError> {
    let table = persist::parse_offset_table(text)?;
    table
        .iter()
        .map(|(level, offset)| persist::queue_offset("offsetTable", level, offset))
        .collect()
}

/// delayOffset.json's text for `offsets` (also GET_ALL_DELAY_OFFSET's body, as Java's
/// `ScheduleMessageService.encode`).
pub fn encode_offsets(offsets: &BTreeMap<i32, i64>) -> String {
    let table: BTreeMap<String, i64> = offsets.iter().map(|(k, v)| (k.to_string(), *v)).collect();
    serde_json::json!({ "offsetTable": table }).to_string()
}

fn persist_offsets(ctrl: &BrokerController, offsets: &BTreeMap<i32, i64>) {
    publish_offsets(ctrl, offsets);
    let text = encode_offsets(offsets);
    if let Err(e) =
        persist::write_atomically_on(ctrl.offsets.fs.get(), &offset_file(ctrl), text.as_bytes())
    {
        tracing::error!(error = %e, "writing delayOffset.json failed");
    }
}

/// Makes `offsets` the progress GET_ALL_DELAY_OFFSET and GET_BROKER_RUNTIME_INFO report.
fn publish_offsets(ctrl: &BrokerController, offsets: &BTreeMap<i32, i64>) {
    *ctrl
        .schedule_offsets
        .write()
        .unwrap_or_else(|p| p.into_inner()) = offsets.clone();
}

/// A slave's copy of its master's progress (Java `syncDelayOffset` +
/// `loadWhenSyncDelayOffset`): written to delayOffset.json and published. The slave's own
/// delivery loop does not run, so nothing else writes them.
pub fn install_offsets(
    ctrl: &BrokerController,
    offsets: BTreeMap<i32, i64>,
) -> Result<(), PersistError> {
    let unchanged = *ctrl
        .schedule_offsets
        .read()
        .unwrap_or_else(|p| p.into_inner())
        == offsets;
    if unchanged && offset_file(ctrl).exists() {
        return Ok(());
    }
    persist::write_atomically_on(
        ctrl.offsets.fs.get(),
        &offset_file(ctrl),
        encode_offsets(&offsets).as_bytes(),
    )?;
    publish_offsets(ctrl, &offsets);
    Ok(())
}

/// [`run_from`] with the progress [`load_offsets`] reads; when it cannot be read, logs why
/// and delivers nothing rather than every level from 0. (The broker loads the progress before
/// it starts, so a broker with an unusable file never gets here.)
pub fn run(ctrl: &Arc<BrokerController>, stop: &StopFlag) {
    match load_offsets(&ctrl.config.store.root_dir) {
        Ok(offsets) => run_from(ctrl, stop, offsets),
        Err(e) => tracing::error!(error = %e, "delayed delivery stopped"),
    }
}

/// The `ringmq-schedule` thread's loop (started by `startup` with the loaded `offsets`): every
/// tick, moves each level's due messages; returns when `stop` is raised, after writing the
/// progress once more.
pub fn run_from(ctrl: &Arc<BrokerController>, stop: &StopFlag, offsets: BTreeMap<i32, i64>) {
    let mut offsets = offsets;
    publish_offsets(ctrl, &offsets);
    let mut backoffs = vec![Backoff::default(); ctrl.delay_levels_ms.len()];
    let mut dirty = false;
    let mut last_persist_ms = now_ms();
    while !stop.wait_timeout(Duration::from_millis(SCHEDULE_TICK_MS)) {
        if ctrl.is_slave() {
            // A slave delivers nothing; its progress is the master's (`install_offsets`).
            offsets = ctrl
                .schedule_offsets
                .read()
                .unwrap_or_else(|p| p.into_inner())
                .clone();
            continue;
        }
        for (index, delay_ms) in ctrl.delay_levels_ms.iter().enumerate() {
            let level = index as i32 + 1;
            let offset = offsets.get(&level).copied().unwrap_or(0);
            let next = run_level(ctrl, level, *delay_ms as i64, offset, &mut backoffs[index]);
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

/// One level's pass, unless it waits out a store failure; returns the level's new offset.
fn run_level(
    ctrl: &Arc<BrokerController>,
    level: i32,
    delay_ms: i64,
    offset: i64,
    backoff: &mut Backoff,
) -> i64 {
    let now = now_ms();
    if !backoff.is_due(now) {
        return offset;
    }
    let pass = deliver_due(ctrl, level, delay_ms, offset);
    match &pass.failure {
        None => backoff.succeeded(),
        Some(e) => {
            let retry_in_ms = backoff.failed(now);
            tracing::warn!(level, queue_offset = pass.next_offset, error = %e, retry_in_ms, "delivering a delayed message failed in the store; will retry");
        }
    }
    pass.next_offset
}

/// When a level whose delivery failed in the store is tried again. A store that cannot append
/// now (an I/O error, not writable) may recover, so the message is kept and retried, but
/// after a wait that doubles from [`SCHEDULE_RETRY_BACKOFF_MIN_MS`] to
/// [`SCHEDULE_RETRY_BACKOFF_MAX_MS`] rather than every tick (Java's asynchronous delivery
/// likewise grows its resend interval, to at most a minute).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
struct Backoff {
    /// The last wait; 0 while the level has no failure pending.
    wait_ms: i64,
    retry_at_ms: i64,
}

impl Backoff {
    fn is_due(&self, now_ms: i64) -> bool {
        now_ms >= self.retry_at_ms
    }

    /// Records a failure at `now_ms`; returns the wait before the next try.
    fn failed(&mut self, now_ms: i64) -> i64 {
        self.wait_ms = if self.wait_ms == 0 {
            SCHEDULE_RETRY_BACKOFF_MIN_MS
        } else {
            (self.wait_ms * 2).min(SCHEDULE_RETRY_BACKOFF_MAX_MS)
        };
        self.retry_at_ms = now_ms + self.wait_ms;
        self.wait_ms
    }

    fn succeeded(&mut self) {
        *self = Backoff::default();
    }
}

/// How one pass over a level ended.
#[derive(Debug)]
pub(crate) struct Pass {
    /// The level's offset after the pass.
    pub next_offset: i64,
    /// A store failure that may pass; the message at `next_offset` is tried again later.
    pub failure: Option<StoreError>,
}

impl Pass {
    fn done(next_offset: i64) -> Pass {
        Pass {
            next_offset,
            failure: None,
        }
    }
}

/// Moves the due messages of one level from `offset` on.
pub(crate) fn deliver_due(
    ctrl: &Arc<BrokerController>,
    level: i32,
    delay_ms: i64,
    offset: i64,
) -> Pass {
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
            return Pass {
                next_offset: offset,
                failure: Some(e),
            }
        }
    };
    match result.status {
        GetMessageStatus::Found => {}
        GetMessageStatus::OffsetTooSmall | GetMessageStatus::OffsetOverflowBadly => {
            return Pass::done(result.next_begin_offset)
        }
        _ => return Pass::done(offset),
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
        if let Err(e) = deliver(ctrl, level, *queue_offset, &decoded) {
            return Pass {
                next_offset: next,
                failure: Some(e),
            };
        }
        next = queue_offset + 1;
    }
    Pass::done(next)
}

/// Moves one due message to its real topic. One the store refuses for good goes to
/// [`set_aside`]; an error returned may pass, and the message is tried again.
fn deliver(
    ctrl: &BrokerController,
    level: i32,
    queue_offset: i64,
    record: &format::DecodedRecord<'_>,
) -> Result<(), StoreError> {
    let Some(msg) = message_time_up(record) else {
        tracing::error!(
            level,
            queue_offset,
            "delayed message without REAL_TOPIC; dropping it"
        );
        return Ok(());
    };
    match ctrl.store.put_message(&msg) {
        Ok(put) => {
            // Java's `DeliverDelayedMessageTimerTask` counts a delivery as a put of its topic.
            ctrl.stats
                .inc_put(&msg.topic, put.message_count.max(0) as u64);
            Ok(())
        }
        Err(e) if is_refused_for_good(&e) => set_aside(ctrl, level, queue_offset, msg, &e),
        Err(e) => Err(e),
    }
}

/// Whether the store refuses the message itself (its topic, size or properties), so trying it
/// again can never succeed.
fn is_refused_for_good(e: &StoreError) -> bool {
    matches!(
        e.put_status(),
        PutMessageStatus::MessageIllegal | PutMessageStatus::PropertiesSizeExceeded
    )
}

/// A due message the store will never take: it goes to the DLQ of its consumer group when its
/// real topic is the group's retry topic and the DLQ takes it, else it is dropped with an ERROR
/// naming it. Either way the level moves on; Java retries such a message forever, holding back
/// every later message of its level.
fn set_aside(
    ctrl: &BrokerController,
    level: i32,
    queue_offset: i64,
    mut msg: MessageToStore,
    refusal: &StoreError,
) -> Result<(), StoreError> {
    let uniq_key = property_value(msg.properties.as_bytes(), property::UNIQ_KEY.as_bytes())
        .map(|v| String::from_utf8_lossy(v).into_owned());
    let dlq = msg
        .topic
        .strip_prefix(RETRY_GROUP_TOPIC_PREFIX)
        .and_then(|group| dlq_topic(group).ok());
    let Some(dlq) = dlq else {
        tracing::error!(level, queue_offset, topic = msg.topic, uniq_key, error = %refusal, "the store refuses a delayed message that has no dead-letter topic; dropping it");
        return Ok(());
    };
    create_dlq_topic(ctrl, &dlq);
    let real_topic = std::mem::replace(&mut msg.topic, dlq);
    msg.queue_id = 0;
    match ctrl.store.put_message(&msg) {
        Ok(_) => {
            tracing::error!(level, queue_offset, topic = real_topic, dlq = msg.topic, uniq_key, error = %refusal, "the store refuses a delayed message; moved it to its group's dead-letter topic");
            Ok(())
        }
        Err(e) if is_refused_for_good(&e) => {
            tracing::error!(level, queue_offset, topic = real_topic, dlq = msg.topic, uniq_key, error = %refusal, dlq_error = %e, "the store refuses a delayed message and its dead-letter topic; dropping it");
            Ok(())
        }
        Err(e) => Err(e),
    }
}

/// The DLQ topic's config (one queue, like a send-back's DLQ). A config file that cannot be
/// written keeps the topic in memory, so the message is still stored.
fn create_dlq_topic(ctrl: &BrokerController, dlq: &str) {
    match ctrl
        .topics
        .create_topic_if_absent(dlq, 1, perm::PERM_READ | perm::PERM_WRITE, 0)
    {
        Ok((_, false)) => {}
        Ok((_, true)) => {
            ctrl.notify_topics_changed();
            // This thread may wait for the file: the message it stores next is in a topic
            // that survives a crash.
            if let Err(e) = ctrl.topics.persist_if_dirty() {
                tracing::error!(topic = dlq, error = %e, "persisting a new dead-letter topic failed");
            }
        }
        Err(e) => {
            tracing::error!(topic = dlq, error = %e, "persisting a new dead-letter topic failed");
            ctrl.notify_topics_changed();
        }
    }
}

/// Java `messageTimeUp`: the message for its real topic and queue, without DELAY; `None` when
/// the record does not say its real topic.
fn message_time_up(record: &format::DecodedRecord<'_>) -> Option<MessageToStore> {
    let props = record.properties;
    let text = |name: &str| {
        property_value(props, name.as_bytes()).map(|v| String::from_utf8_lossy(v).into_owned())
    };
    let topic = text(property::REAL_TOPIC)?;
    let queue_id = text(property::REAL_QID)
        .and_then(|q| q.parse().ok())
        .unwrap_or(0);
    let properties = remove_property(&String::from_utf8_lossy(props), property::DELAY);
    Some(MessageToStore {
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
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delay_offsets_encode_as_javas_delay_offset_json() {
        let offsets = BTreeMap::from([(1, 0), (3, 17)]);
        assert_eq!(
            encode_offsets(&offsets),
            r#"{"offsetTable":{"1":0,"3":17}}"#
        );
        assert_eq!(
            parse_delay_offsets(r#"{"dataVersion":{"counter":2},"offsetTable":{1:0,"3":"17"}}"#)
                .unwrap(),
            offsets,
            "a Java master's body (bare integer keys, dataVersion) reads the same"
        );
    }

    #[test]
    fn delay_offsets_come_from_the_backup_when_the_file_is_corrupt() {
        let dir = tempfile::tempdir().unwrap();
        let file = offset_file_in(dir.path());
        persist::write_atomically(&file, br#"{"offsetTable":{"1":7,"3":9}}"#).unwrap();
        persist::write_atomically(&file, br#"{"offsetTable":{"1":8,"3":9}}"#).unwrap();
        assert_eq!(
            load_offsets(dir.path()).unwrap(),
            BTreeMap::from([(1, 8), (3, 9)])
        );
        std::fs::write(&file, br#"{"offsetTable":{"1":"#).unwrap();
        assert_eq!(
            load_offsets(dir.path()).unwrap(),
            BTreeMap::from([(1, 7), (3, 9)])
        );
        assert!(load_offsets(tempfile::tempdir().unwrap().path())
            .unwrap()
            .is_empty());
    }

    /// Both copies unusable: the broker must not start (and so never re-deliver every delay
    /// level from 0); the error names the file.
    #[test]
    fn a_broker_with_an_unusable_delay_offset_file_refuses_to_start() {
        let dir = tempfile::tempdir().unwrap();
        let mut config = crate::config::Config::default();
        config.store.root_dir = dir.path().join("store");
        config.broker.listen_port = 0;
        config.broker.fast_port_enabled = false;
        config.metrics.listen = "127.0.0.1:0".to_string();
        // No embedded name server; registration runs after the load, if ever.
        config.namesrv.addr = "127.0.0.1:9".to_string();
        let file = offset_file_in(&config.store.root_dir);
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        std::fs::write(&file, b"{\"offsetTable\":").unwrap();
        std::fs::write(persist::backup_path(&file), b"not json").unwrap();
        match crate::broker::startup::start_broker(config) {
            Ok(handle) => {
                handle.stop().unwrap();
                panic!("the broker started from delay offsets 0");
            }
            Err(e) => {
                let text = e.to_string();
                assert!(text.contains("delayOffset.json"), "{text}");
            }
        }
    }

    #[test]
    fn a_failing_level_waits_longer_each_time_up_to_a_minute() {
        let mut b = Backoff::default();
        assert!(b.is_due(0));
        assert_eq!(b.failed(10_000), 1_000);
        assert!(!b.is_due(10_999));
        assert!(b.is_due(11_000));
        let waits: Vec<i64> = (0..8).map(|_| b.failed(20_000)).collect();
        assert_eq!(
            waits,
            [2_000, 4_000, 8_000, 16_000, 32_000, 60_000, 60_000, 60_000]
        );
        assert!(!b.is_due(79_999));
        b.succeeded();
        assert!(b.is_due(0));
        assert_eq!(b.failed(0), 1_000, "a success starts the next wait afresh");
    }
}
