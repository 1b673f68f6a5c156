//! The put paths: validation, queue offset assignment under the writer lock, placement in the
//! CommitLog, the record and ConsumeQueue writes, publication and the arrival events.
//!
//! One append runs these steps, each its own function: [`Inner::validate_append`] (outside
//! the lock), then under the writer lock [`Inner::reserve`] (refuse when not writable, assign
//! queue offsets and the store time, place the records), [`Inner::encode`] (records and units
//! into the writer's reused buffers) and [`Inner::write_and_publish`], and after the lock
//! [`Inner::notify_arrivals`].

use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::{lock, read_guard, Inner, Writer};
use crate::common::now_ms;
use crate::common::topic_validator::{self, RETRY_GROUP_TOPIC_PREFIX};
use crate::store::config::FlushPolicy;
use crate::store::consume_queue::ConsumeQueue;
use crate::store::error::StoreError;
use crate::store::format::{
    self, encode_cq_unit, CqUnit, RecordFields, END_FILE_BLANK_SIZE_MIN_BYTES,
    PROPERTIES_MAX_BYTES, TOPIC_V2_MAX_BYTES,
};
use crate::store::segment::Segment;
use crate::store::store_stats_service::StoreStatsService;
use crate::store::types::{BatchToStore, MessageToStore, PutMessageResult, PutMessageStatus};

/// Per-message fields of an append.
struct AppendEntry<'a> {
    flag: i32,
    body: &'a [u8],
    properties: &'a [u8],
}

/// Fields shared by every message of an append (one queue, one producer request).
struct AppendCommon<'a> {
    topic: &'a str,
    queue_id: i32,
    sys_flag: i32,
    born_timestamp_ms: i64,
    born_host: SocketAddr,
    reconsume_times: i32,
    prepared_transaction_offset: i64,
}

/// What validation found out about an append, before the writer lock is taken.
struct AppendShape {
    /// SYSFLAG with the v6 bits of the born and store hosts set.
    sys_flag: i32,
    /// Bytes of all records together.
    total_bytes: usize,
    /// The messages get ConsumeQueue units and queue offsets.
    dispatched: bool,
}

/// Where the records of one append go: the CommitLog file and the phy offset of the first byte.
struct Placement {
    segment: Arc<Segment>,
    phy_offset: i64,
}

/// Marks the writer lock as held for Java's `pageCacheLockTimeMills` while it lives.
struct InLock<'a>(&'a StoreStatsService);

impl<'a> InLock<'a> {
    fn enter(stats: &'a StoreStatsService) -> Self {
        stats.set_in_lock(Some(now_ms()));
        InLock(stats)
    }
}

impl Drop for InLock<'_> {
    fn drop(&mut self) {
        self.0.set_in_lock(None);
    }
}

/// What the writer lock fixed for one append.
struct AppendSlot {
    place: Placement,
    /// The queue, when the messages are dispatched to one.
    cq: Option<Arc<ConsumeQueue>>,
    first_queue_offset: i64,
    store_timestamp_ms: i64,
}

impl AppendSlot {
    /// Queue offset of the `index`-th message (0 for a message that gets no ConsumeQueue unit).
    fn queue_offset(&self, index: usize) -> i64 {
        match self.cq {
            Some(_) => self.first_queue_offset + index as i64,
            None => 0,
        }
    }
}

impl Inner {
    pub(super) fn put_message(&self, msg: &MessageToStore) -> Result<PutMessageResult, StoreError> {
        validate_topic(&msg.topic, true)?;
        let entry = AppendEntry {
            flag: msg.flag,
            body: &msg.body,
            properties: msg.properties.as_bytes(),
        };
        let common = AppendCommon {
            topic: &msg.topic,
            queue_id: msg.queue_id,
            sys_flag: msg.sys_flag,
            born_timestamp_ms: msg.born_timestamp_ms,
            born_host: msg.born_host,
            reconsume_times: msg.reconsume_times,
            prepared_transaction_offset: msg.prepared_transaction_offset,
        };
        self.append(&common, std::slice::from_ref(&entry))
    }

    pub(super) fn put_messages(
        &self,
        batch: &BatchToStore,
    ) -> Result<PutMessageResult, StoreError> {
        validate_topic(&batch.topic, false)?;
        if is_retry_topic(&batch.topic) {
            return Err(StoreError::MessageIllegal {
                reason: "batch messages cannot be sent to a retry topic".to_owned(),
            });
        }
        // Java `DefaultMessageStore.checkMessages`: the whole batch body is bounded by
        // maxMessageSize, not only each message in it, and refused before anything is stored.
        self.validate_body(batch.encoded_messages.len())?;
        let entries = format::batch_entries(&batch.encoded_messages)
            .map(|e| {
                e.map(|e| AppendEntry {
                    flag: e.flag,
                    body: e.body,
                    properties: e.properties,
                })
            })
            .collect::<Result<Vec<_>, _>>()
            .map_err(|source| StoreError::BatchMalformed { source })?;
        if entries.is_empty() {
            return Err(StoreError::MessageIllegal {
                reason: "empty batch".to_owned(),
            });
        }
        let common = AppendCommon {
            topic: &batch.topic,
            queue_id: batch.queue_id,
            sys_flag: batch.sys_flag,
            born_timestamp_ms: batch.born_timestamp_ms,
            born_host: batch.born_host,
            reconsume_times: batch.reconsume_times,
            prepared_transaction_offset: 0,
        };
        self.append(&common, &entries)
    }

    /// Appends `entries` as consecutive records of one queue in one write (a single message is a
    /// batch of one): validation, queue offsets assigned under the writer lock, one `pwrite` for
    /// the records and one for the ConsumeQueue units, publication, then the arrival events.
    fn append(
        &self,
        common: &AppendCommon<'_>,
        entries: &[AppendEntry<'_>],
    ) -> Result<PutMessageResult, StoreError> {
        if self.config.broker_role_slave {
            return Err(StoreError::SlaveReadOnly);
        }
        let shape = self.validate_append(common, entries)?;
        let mut writer = lock(&self.writer);
        // Declared after the lock, so an early return clears it before the lock is released.
        let in_lock = InLock::enter(&self.stats);
        let slot = self.reserve(&mut writer, common, &shape, entries.len())?;
        let msg_ids = self.encode(&mut writer, common, entries, &shape, &slot);
        self.write_and_publish(&mut writer, &shape, &slot, entries.len())?;
        drop(in_lock);
        drop(writer);
        self.after_append();
        self.notify_arrivals(common, entries, &slot);
        Ok(PutMessageResult {
            status: PutMessageStatus::PutOk,
            wrote_phy_offset: slot.place.phy_offset,
            wrote_bytes: shape.total_bytes as i32,
            queue_offset: slot.first_queue_offset,
            msg_ids,
            store_timestamp_ms: slot.store_timestamp_ms,
            message_count: entries.len() as i32,
        })
    }

    /// Creates the first ConsumeQueue file of each queue `0..queue_count` of `topic` that has
    /// never had one, taking the writer lock once per queue as an append's first unit would.
    /// Done when the topic is created, so the first message of each queue does not create a
    /// directory and a file under the lock every append of every connection waits for: with
    /// thousands of new queues (W5's 2,048) that stalled all sends for seconds on a file
    /// system slow to allocate inodes (docs/BENCHMARKS.md, "W5: the first message of each
    /// queue"). A slave creates nothing: its files follow the master's records.
    pub(super) fn create_queue_files(
        &self,
        topic: &str,
        queue_count: i32,
    ) -> Result<usize, StoreError> {
        if self.config.broker_role_slave {
            return Ok(0);
        }
        let mut created = 0;
        for queue_id in 0..queue_count {
            validate_queue_id(queue_id)?;
            let _writer = lock(&self.writer);
            self.check_writable()?;
            let cq = self.get_or_create_queue(topic, queue_id)?;
            created += usize::from(cq.create_first_file()?);
        }
        Ok(created)
    }

    /// Checks every limit before anything is written, and sizes the records.
    fn validate_append(
        &self,
        common: &AppendCommon<'_>,
        entries: &[AppendEntry<'_>],
    ) -> Result<AppendShape, StoreError> {
        validate_queue_id(common.queue_id)?;
        let store_host = &self.config.store_host;
        let sys_flag = format::sys_flag_for_hosts(common.sys_flag, &common.born_host, store_host);
        let mut total_bytes = 0usize;
        for entry in entries {
            self.validate_body(entry.body.len())?;
            validate_properties(entry.properties.len())?;
            total_bytes += format::record_size(
                sys_flag,
                entry.body.len(),
                common.topic.len(),
                entry.properties.len(),
            );
        }
        self.validate_record_fits(total_bytes)?;
        Ok(AppendShape {
            sys_flag,
            total_bytes,
            dispatched: format::is_dispatched_to_consume_queue(sys_flag),
        })
    }

    /// Under the writer lock: refuses when the store takes no writes, assigns the queue offsets
    /// and the store time, makes room for the units, and places the records. Nothing is
    /// written before the units have their file and blocks, so a full disk fails this append
    /// only.
    fn reserve(
        &self,
        writer: &mut Writer,
        common: &AppendCommon<'_>,
        shape: &AppendShape,
        message_count: usize,
    ) -> Result<AppendSlot, StoreError> {
        self.check_writable()?;
        let cq = shape
            .dispatched
            .then(|| self.get_or_create_queue(common.topic, common.queue_id))
            .transpose()?;
        let first_queue_offset = cq.as_ref().map_or(0, |cq| cq.max_offset_in_queue());
        if let Some(cq) = &cq {
            cq.prepare_write(first_queue_offset, message_count)?;
        }
        let store_timestamp_ms = next_store_timestamp(writer);
        let place = self.place(shape.total_bytes)?;
        Ok(AppendSlot {
            place,
            cq,
            first_queue_offset,
            store_timestamp_ms,
        })
    }

    /// Encodes every record and its ConsumeQueue unit into the writer's buffers. Returns the
    /// offset msgIds.
    fn encode(
        &self,
        writer: &mut Writer,
        common: &AppendCommon<'_>,
        entries: &[AppendEntry<'_>],
        shape: &AppendShape,
        slot: &AppendSlot,
    ) -> Vec<String> {
        let store_host = self.config.store_host;
        let Writer {
            record_buf,
            unit_buf,
            ..
        } = writer;
        record_buf.clear();
        unit_buf.clear();
        let mut msg_ids = Vec::with_capacity(entries.len());
        for (i, entry) in entries.iter().enumerate() {
            let phy_offset = slot.place.phy_offset + record_buf.len() as i64;
            let start = record_buf.len();
            format::encode_record(
                &RecordFields {
                    queue_id: common.queue_id,
                    flag: entry.flag,
                    queue_offset: slot.queue_offset(i),
                    phy_offset,
                    sys_flag: shape.sys_flag,
                    born_timestamp_ms: common.born_timestamp_ms,
                    born_host: common.born_host,
                    store_timestamp_ms: slot.store_timestamp_ms,
                    store_host,
                    reconsume_times: common.reconsume_times,
                    prepared_transaction_offset: common.prepared_transaction_offset,
                    body: entry.body,
                    topic: common.topic.as_bytes(),
                    properties: entry.properties,
                },
                record_buf,
            );
            unit_buf.extend_from_slice(&encode_cq_unit(&CqUnit {
                phy_offset,
                size: (record_buf.len() - start) as i32,
                tags_code: format::tags_code(entry.properties),
            }));
            msg_ids.push(format::encode_offset_msg_id(&store_host, phy_offset));
        }
        debug_assert_eq!(record_buf.len(), shape.total_bytes);
        msg_ids
    }

    /// Writes the encoded records, then their units, then publishes: the CommitLog max first
    /// and the queue max after it, so a reader that sees a unit always finds its record.
    fn write_and_publish(
        &self,
        writer: &mut Writer,
        shape: &AppendShape,
        slot: &AppendSlot,
        message_count: usize,
    ) -> Result<(), StoreError> {
        let place = &slot.place;
        let pos = (place.phy_offset - place.segment.start_offset) as u64;
        self.write_record(&place.segment, &writer.record_buf, pos)?;
        if let Some(cq) = &slot.cq {
            // A failure here fails the append only, as in `write_record`: the queue's max is not
            // published and the next append stages the same units.
            cq.stage_units(slot.first_queue_offset, &writer.unit_buf)?;
        }
        // Written and about to be published: from here a pull may want these records.
        writer.recent.push(place.phy_offset, &writer.record_buf);
        self.publish(
            place.phy_offset + shape.total_bytes as i64,
            slot.store_timestamp_ms,
        );
        if let Some(cq) = &slot.cq {
            cq.set_max_offset_in_queue(slot.first_queue_offset + message_count as i64);
        }
        Ok(())
    }

    /// Tells the arrival listener about each message. Only messages that got a ConsumeQueue
    /// unit can be pulled, so only they arrive.
    fn notify_arrivals(
        &self,
        common: &AppendCommon<'_>,
        entries: &[AppendEntry<'_>],
        slot: &AppendSlot,
    ) {
        if slot.cq.is_none() {
            return;
        }
        let listener = read_guard(&self.listener);
        let Some(listener) = listener.as_ref() else {
            return;
        };
        for (i, entry) in entries.iter().enumerate() {
            listener.arriving(
                common.topic,
                common.queue_id,
                slot.first_queue_offset + i as i64 + 1,
                format::tags_code(entry.properties),
                slot.store_timestamp_ms,
                entry.properties,
            );
        }
    }

    fn validate_body(&self, len: usize) -> Result<(), StoreError> {
        if len > self.config.max_message_size_bytes {
            return Err(StoreError::MessageTooLarge {
                size_bytes: len,
                max_bytes: self.config.max_message_size_bytes,
            });
        }
        Ok(())
    }

    /// A record (or a whole batch) must fit one file with room for the BLANK filler.
    fn validate_record_fits(&self, size: usize) -> Result<(), StoreError> {
        let max = self.commit_log.file_size_bytes() as usize - END_FILE_BLANK_SIZE_MIN_BYTES;
        if size > max {
            return Err(StoreError::MessageTooLarge {
                size_bytes: size,
                max_bytes: max,
            });
        }
        Ok(())
    }

    pub(super) fn check_writable(&self) -> Result<(), StoreError> {
        if self.shut_down.load(Ordering::Acquire) {
            return Err(StoreError::ShutDown);
        }
        if self.poisoned.load(Ordering::Acquire) {
            let reason = self
                .flush_tx
                .borrow()
                .poisoned
                .as_deref()
                .unwrap_or("poisoned")
                .to_owned();
            return Err(StoreError::Poisoned { reason });
        }
        if self.disk_full.load(Ordering::Acquire) {
            return Err(StoreError::DiskFull {
                disk_util: self.disk_util(),
            });
        }
        Ok(())
    }

    /// Finds where `size` bytes go, closing the current file with a BLANK filler when they do
    /// not fit before its end (a record never spans files). Writer only.
    fn place(&self, size: usize) -> Result<Placement, StoreError> {
        let file_size = self.commit_log.file_size_bytes();
        let mut phy_offset = self.commit_log.max_phy_offset();
        let in_file = phy_offset % file_size;
        let remaining = (file_size - in_file) as usize;
        // Every append leaves at least END_FILE_BLANK_SIZE_MIN_BYTES bytes, so a BLANK always fits.
        assert!(remaining >= END_FILE_BLANK_SIZE_MIN_BYTES);
        if size + END_FILE_BLANK_SIZE_MIN_BYTES > remaining {
            let segment = self
                .commit_log
                .segments()
                .get_or_create(phy_offset - in_file)?;
            let mut blank = Vec::with_capacity(END_FILE_BLANK_SIZE_MIN_BYTES);
            format::encode_blank(remaining, &mut blank);
            self.write_record(&segment, &blank, in_file as u64)?;
            phy_offset += remaining as i64;
            self.commit_log.set_max_phy_offset(phy_offset);
        }
        let in_file = phy_offset % file_size;
        let segment = self
            .commit_log
            .segments()
            .get_or_create(phy_offset - in_file)?;
        Ok(Placement {
            segment,
            phy_offset,
        })
    }

    /// Writes record bytes at `pos` of `segment`. A failed (or short) write fails this append
    /// only: nothing is published, so the bytes past the write position are garbage no reader
    /// sees, the next append writes over them at the same position, and recovery after a crash
    /// takes any left in the last file for a torn tail. Only a failed fsync makes the store
    /// read-only (the kernel may then have dropped written pages).
    fn write_record(&self, segment: &Segment, bytes: &[u8], pos: u64) -> Result<(), StoreError> {
        assert!(pos + bytes.len() as u64 <= self.commit_log.file_size_bytes() as u64);
        self.fs.write_at(&segment.file, &segment.path, bytes, pos)?;
        segment.mark_dirty();
        Ok(())
    }

    /// The replica's write (`replica`): a failure poisons the store. A slave publishes the
    /// master's bytes and dispatches their units in steps that cannot be undone, so after a
    /// failed write it stops rather than guess; the appends of `append` need not (see
    /// [`Inner::write_record`]).
    pub(super) fn write_or_poison(
        &self,
        segment: &Segment,
        bytes: &[u8],
        pos: u64,
    ) -> Result<(), StoreError> {
        assert!(pos + bytes.len() as u64 <= self.commit_log.file_size_bytes() as u64);
        match self.fs.write_at(&segment.file, &segment.path, bytes, pos) {
            Ok(()) => {
                segment.mark_dirty();
                Ok(())
            }
            Err(e) => {
                // The file content is unknown after a failed write: stop accepting appends.
                self.poison(format!("write failed: {e}"));
                Err(e)
            }
        }
    }

    /// The replica's unit write; a failure poisons the store, as in [`Inner::write_or_poison`].
    pub(super) fn write_units(
        &self,
        cq: &ConsumeQueue,
        first_queue_offset: i64,
        units: &[u8],
    ) -> Result<(), StoreError> {
        cq.write_units(first_queue_offset, units).inspect_err(|e| {
            self.poison(format!("consume queue write failed: {e}"));
        })
    }

    fn publish(&self, end_phy_offset: i64, store_timestamp_ms: i64) {
        self.last_store_timestamp_ms
            .store(store_timestamp_ms, Ordering::Release);
        self.commit_log.set_max_phy_offset(end_phy_offset);
    }

    /// After the writer lock is released: the flush request (`sync`) and the index thread's
    /// wake-up.
    pub(super) fn after_append(&self) {
        if self.config.flush_policy == FlushPolicy::Sync {
            self.request_flush();
        }
        self.wake_index();
    }
}

fn next_store_timestamp(writer: &mut Writer) -> i64 {
    // Store timestamps never go backwards, so the binary search by time stays valid when the
    // wall clock steps back.
    let ts = now_ms().max(writer.last_store_timestamp_ms);
    writer.last_store_timestamp_ms = ts;
    ts
}

fn is_retry_topic(topic: &str) -> bool {
    topic.starts_with(RETRY_GROUP_TOPIC_PREFIX)
}

/// The record's topic length field allows 255 bytes only in the V2 layout, which retry and DLQ
/// topics may use; a batch is always written V1.
fn validate_topic(topic: &str, group_topic_long_allowed: bool) -> Result<(), StoreError> {
    topic_validator::validate_topic(topic, group_topic_long_allowed).map_err(|reason| {
        StoreError::TopicIllegal {
            topic: topic.chars().take(TOPIC_V2_MAX_BYTES + 1).collect(),
            reason,
        }
    })
}

fn validate_queue_id(queue_id: i32) -> Result<(), StoreError> {
    if queue_id < 0 {
        return Err(StoreError::QueueIdIllegal { queue_id });
    }
    Ok(())
}

fn validate_properties(len: usize) -> Result<(), StoreError> {
    if len > PROPERTIES_MAX_BYTES {
        return Err(StoreError::PropertiesTooLarge {
            size_bytes: len,
            max_bytes: PROPERTIES_MAX_BYTES,
        });
    }
    Ok(())
}
