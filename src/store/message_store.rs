//! The message store facade (Java `DefaultMessageStore`): append, dispatch to the ConsumeQueue,
//! pull, offsets, durability, retention and lifecycle.
//!
//! Threads: callers append under one writer mutex (record write, ConsumeQueue unit write and
//! offset publication happen together, so queue offsets are assigned atomically with the
//! append). Readers never take the writer mutex: they read published atomics and snapshots of
//! the segment lists. One flush thread runs fsyncs (group commit for `sync`, a timer for
//! `async`), the ConsumeQueue fsync and the checkpoint; one retention thread deletes expired
//! files.

use std::collections::HashMap;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, RwLock};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, UNIX_EPOCH};

use crate::common::now_ms;
use crate::common::topic_validator::{self, RETRY_GROUP_TOPIC_PREFIX};

use bytes::{Bytes, BytesMut};
use tokio::sync::watch;

use crate::store::commit_log::CommitLog;
use crate::store::config::{FlushPolicy, StoreConfig};
use crate::store::consume_queue::ConsumeQueue;
use crate::store::error::StoreError;
use crate::store::filter::MessageFilter;
use crate::store::format::{
    self, decode_record_head, encode_cq_unit, CqUnit, RecordFields, RecordHead, CQ_UNIT_SIZE_BYTES,
    END_FILE_MIN_BLANK_LENGTH_BYTES, PROPERTIES_MAX_BYTES, STORE_TIMESTAMP_PROBE_BYTES,
    TOPIC_MAX_BYTES_V2,
};
use crate::store::fs;
use crate::store::io::{IoEngine, ReadOp};
use crate::store::segment::Segment;
use crate::store::types::{
    ArrivalListener, BatchToStore, BoundaryType, FileRegion, GetMessageRegions, GetMessageResult,
    GetMessageStatus, MessageToStore, PutMessageResult, PutMessageStatus, RecoveryReport,
    RegionShape,
};

/// Java `DefaultMessageStore.MAX_PULL_MSG_SIZE`: a pull never returns more bytes than this.
pub const MAX_PULL_MSG_SIZE_BYTES: usize = 128 * 1024 * 1024;
/// Name of the clean-shutdown marker (`StorePathConfigHelper.getAbortFile`).
pub const ABORT_FILE_NAME: &str = "abort";
/// Name of the checkpoint file.
pub const CHECKPOINT_FILE_NAME: &str = "checkpoint";
/// Name of the file locked while a store has the directory open.
pub const LOCK_FILE_NAME: &str = "lock";

/// State published by the flush thread.
#[derive(Debug, Clone, Default)]
struct FlushState {
    /// Every CommitLog byte below this offset is fsynced.
    flushed_offset: i64,
    /// Set once, when an fsync failed.
    poisoned: Option<Arc<str>>,
}

#[derive(Debug, Default)]
struct Signal {
    flush_requested: bool,
    stop: bool,
}

/// Scratch buffers of the single writer, reused across appends.
#[derive(Debug, Default)]
pub(crate) struct Writer {
    record_buf: Vec<u8>,
    unit_buf: Vec<u8>,
    pub(crate) last_store_timestamp_ms: i64,
}

type QueueMap = HashMap<String, HashMap<i32, Arc<ConsumeQueue>>>;

pub(crate) struct Inner {
    pub(crate) config: StoreConfig,
    pub(crate) io: Arc<IoEngine>,
    pub(crate) commit_log: CommitLog,
    pub(crate) queues: RwLock<QueueMap>,
    pub(crate) writer: Mutex<Writer>,
    poisoned: AtomicBool,
    flush_tx: watch::Sender<FlushState>,
    flush_lock: Mutex<()>,
    signal: Mutex<Signal>,
    signal_cv: Condvar,
    retention_cv: Condvar,
    /// Store timestamp of the last appended record (informational checkpoint fields).
    pub(crate) last_store_timestamp_ms: AtomicI64,
    /// CommitLog offset recorded by the last checkpoint write (an unchanged one is not rewritten).
    last_checkpoint_offset: AtomicI64,
    checkpoint_file: File,
    checkpoint_path: PathBuf,
    listener: RwLock<Option<Arc<dyn ArrivalListener>>>,
    retention_lock: Mutex<()>,
    shut_down: AtomicBool,
    _lock_file: nix::fcntl::Flock<File>,
}

/// The message store. Cheap to share (`Arc`); every method takes `&self`.
pub struct MessageStore {
    inner: Arc<Inner>,
    threads: Mutex<Vec<JoinHandle<()>>>,
    recovery: RecoveryReport,
}

impl std::fmt::Debug for MessageStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MessageStore")
            .field("root_dir", &self.inner.config.root_dir)
            .field("max_phy_offset", &self.inner.commit_log.max_offset())
            .finish_non_exhaustive()
    }
}

impl MessageStore {
    /// Opens (creating if needed) the store at `config.root_dir`, recovers it, and starts the
    /// flush and retention threads.
    pub fn open(config: StoreConfig, io: Arc<IoEngine>) -> Result<Arc<MessageStore>, StoreError> {
        config.validate()?;
        let root = config.root_dir.clone();
        fs::ensure_dir(&root)?;
        let lock_file = lock_root(&root)?;
        let abort_path = root.join(ABORT_FILE_NAME);
        let abnormal = abort_path.exists();
        let checkpoint_path = root.join(CHECKPOINT_FILE_NAME);
        let (checkpoint_file, checkpoint) = open_checkpoint(&checkpoint_path)?;
        let (flush_tx, _) = watch::channel(FlushState::default());
        let inner = Arc::new(Inner {
            commit_log: CommitLog::new(&root, config.commit_log_file_size_bytes),
            config,
            io,
            queues: RwLock::new(HashMap::new()),
            writer: Mutex::new(Writer::default()),
            poisoned: AtomicBool::new(false),
            flush_tx,
            flush_lock: Mutex::new(()),
            signal: Mutex::new(Signal::default()),
            signal_cv: Condvar::new(),
            retention_cv: Condvar::new(),
            last_store_timestamp_ms: AtomicI64::new(0),
            last_checkpoint_offset: AtomicI64::new(-1),
            checkpoint_file,
            checkpoint_path,
            listener: RwLock::new(None),
            retention_lock: Mutex::new(()),
            shut_down: AtomicBool::new(false),
            _lock_file: lock_file,
        });
        let recovery = inner.recover(abnormal, checkpoint)?;
        let end = inner.commit_log.max_offset();
        inner.flush_tx.send_modify(|s| s.flushed_offset = end);
        inner.flush_all()?;
        write_abort_file(&abort_path)?;
        let threads = vec![spawn_flush_thread(&inner)?, spawn_retention_thread(&inner)?];
        Ok(Arc::new(MessageStore {
            inner,
            threads: Mutex::new(threads),
            recovery,
        }))
    }

    /// What recovery did when this store was opened.
    pub fn recovery_report(&self) -> &RecoveryReport {
        &self.recovery
    }

    pub fn config(&self) -> &StoreConfig {
        &self.inner.config
    }

    /// Appends one message and writes its ConsumeQueue unit. Returns after the write, not after
    /// the fsync: with `sync` flush, await [`MessageStore::wait_flushed`] with
    /// [`PutMessageResult::end_offset`] before acknowledging.
    pub fn put_message(&self, msg: &MessageToStore) -> Result<PutMessageResult, StoreError> {
        self.inner.put_message(msg)
    }

    /// Appends a batch (Java `MessageBatch`) as consecutive records with consecutive queue offsets.
    pub fn put_messages(&self, batch: &BatchToStore) -> Result<PutMessageResult, StoreError> {
        self.inner.put_messages(batch)
    }

    /// Group commit: resolves once the fsync covering `end_offset` is done.
    pub async fn wait_flushed(&self, end_offset: i64) -> Result<(), StoreError> {
        self.inner.wait_flushed(end_offset).await
    }

    /// Pulls messages (Java `DefaultMessageStore.getMessage`, 5.x semantics), at most
    /// [`MAX_PULL_MSG_SIZE_BYTES`] of them. `group` is Java's parameter, kept for parity; the
    /// store does not use it.
    pub fn get_message(
        &self,
        _group: &str,
        topic: &str,
        queue_id: i32,
        offset: i64,
        max_msg_nums: i32,
        filter: &dyn MessageFilter,
    ) -> Result<GetMessageResult, StoreError> {
        self.inner.get_message(
            topic,
            queue_id,
            offset,
            max_msg_nums,
            MAX_PULL_MSG_SIZE_BYTES,
            filter,
            None,
        )
    }

    /// [`MessageStore::get_message`] with the pull request's `maxMsgBytes` (5.x
    /// `maxTotalMsgSize`; at least 100, at most [`MAX_PULL_MSG_SIZE_BYTES`]) that can answer
    /// with where the records are (file regions, for a zero-copy transfer) instead of their
    /// bytes. Same planning, limits, status and offsets. Once the records are planned, `choose` sees the pull's shape and
    /// says whether to answer with regions (`true`) or to read the bytes as `get_message` does
    /// (`false`); a pull that finds nothing asks nothing and answers with empty regions.
    ///
    /// With regions only layer one of `filter` (`is_matched_by_consume_queue`) is applied: the
    /// records are not read, so `is_matched_by_commit_log` is never called. Let `choose` say
    /// `true` only for a filter whose layer two accepts every record (a TAG `*` subscription).
    /// The head of each record (TOTALSIZE and MAGICCODE, 8 bytes) is still read, so a
    /// ConsumeQueue unit that does not point at a record is the same `Corrupted` error as in
    /// `get_message`.
    #[allow(clippy::too_many_arguments)]
    pub fn get_message_regions(
        &self,
        _group: &str,
        topic: &str,
        queue_id: i32,
        offset: i64,
        max_msg_nums: i32,
        max_total_msg_size_bytes: usize,
        filter: &dyn MessageFilter,
        choose: &dyn Fn(RegionShape) -> bool,
    ) -> Result<GetMessageRegions, StoreError> {
        let max_pull = max_total_msg_size_bytes.clamp(100, MAX_PULL_MSG_SIZE_BYTES);
        let mut want = RegionsWanted {
            out: Vec::new(),
            choose,
            chosen: None,
        };
        let result = self.inner.get_message(
            topic,
            queue_id,
            offset,
            max_msg_nums,
            max_pull,
            filter,
            Some(&mut want),
        )?;
        let regions = (want.chosen != Some(false)).then_some(want.out);
        Ok(GetMessageRegions { result, regions })
    }

    /// Reads the bytes of `regions`, in order, appending them to `out` (one `read_batch`): the
    /// copy path for a pull that was planned as regions.
    pub fn read_regions(
        &self,
        regions: &[FileRegion],
        out: &mut BytesMut,
    ) -> Result<(), StoreError> {
        let ops: Vec<ReadOp<'_>> = regions
            .iter()
            .map(|r| ReadOp {
                file: r.file(),
                offset_bytes: r.offset_bytes,
                len_bytes: r.len_bytes,
            })
            .collect();
        out.reserve(regions.iter().map(|r| r.len_bytes).sum());
        self.inner
            .io
            .read_batch(&ops, &mut |_, bytes| out.extend_from_slice(bytes))
            .map_err(|e| {
                StoreError::io("read commit log", self.inner.commit_log.segments().dir(), e)
            })
    }

    /// Next logical offset of the queue (0 when it does not exist).
    pub fn max_offset_in_queue(&self, topic: &str, queue_id: i32) -> i64 {
        self.inner
            .find_queue(topic, queue_id)
            .map_or(0, |cq| cq.max_offset())
    }

    /// First live logical offset of the queue (0 when it does not exist).
    pub fn min_offset_in_queue(&self, topic: &str, queue_id: i32) -> i64 {
        self.inner
            .find_queue(topic, queue_id)
            .map_or(0, |cq| cq.min_offset())
    }

    /// Binary search on store timestamps (Java `getOffsetInQueueByTime`).
    pub fn offset_by_timestamp(
        &self,
        topic: &str,
        queue_id: i32,
        timestamp_ms: i64,
        boundary: BoundaryType,
    ) -> Result<i64, StoreError> {
        self.inner
            .offset_by_timestamp(topic, queue_id, timestamp_ms, boundary)
    }

    /// Store time of the oldest live message of the queue.
    pub fn earliest_message_store_time(
        &self,
        topic: &str,
        queue_id: i32,
    ) -> Result<Option<i64>, StoreError> {
        let Some(cq) = self.inner.find_queue(topic, queue_id) else {
            return Ok(None);
        };
        let min = cq.min_offset();
        if min >= cq.max_offset() {
            return Ok(None);
        }
        self.inner.store_time_at(&cq, min)
    }

    /// One whole record by CommitLog offset, or `None` when no record starts there.
    pub fn look_message_by_offset(&self, phy_offset: i64) -> Result<Option<Bytes>, StoreError> {
        self.inner.look_message_by_offset(phy_offset)
    }

    pub fn max_phy_offset(&self) -> i64 {
        self.inner.commit_log.max_offset()
    }

    pub fn min_phy_offset(&self) -> i64 {
        self.inner.commit_log.min_offset()
    }

    /// CommitLog offset below which everything is fsynced.
    pub fn flushed_phy_offset(&self) -> i64 {
        self.inner.flush_tx.borrow().flushed_offset
    }

    pub fn set_arrival_listener(&self, listener: Arc<dyn ArrivalListener>) {
        *write_guard(&self.inner.listener) = Some(listener);
    }

    /// Deletes CommitLog files older than `file_reserved_time_hours` (oldest first, never the
    /// file being written) and the ConsumeQueue units below the new minimum. Returns the number
    /// of CommitLog files deleted.
    pub fn delete_expired_files(&self, now_ms: i64) -> Result<usize, StoreError> {
        self.inner.delete_expired_files(now_ms)
    }

    /// Forces a CommitLog fsync now (also used by benches).
    pub fn flush(&self) -> Result<(), StoreError> {
        self.inner.flush_all()
    }

    /// Stops the threads, flushes, writes the checkpoint and removes the abort file.
    pub fn shutdown(&self) -> Result<(), StoreError> {
        if self.inner.shut_down.swap(true, Ordering::AcqRel) {
            return Ok(());
        }
        self.stop_threads();
        // Wait for any append in progress; new ones see `shut_down`.
        let _writer = lock(&self.inner.writer);
        if let Some(reason) = self.is_read_only() {
            return Err(StoreError::Poisoned { reason });
        }
        self.inner.flush_all()?;
        fs::remove_file(&self.inner.config.root_dir.join(ABORT_FILE_NAME))
    }

    /// `Some(reason)` once an fsync (or write) failed: the store then refuses appends.
    pub fn is_read_only(&self) -> Option<String> {
        self.inner
            .flush_tx
            .borrow()
            .poisoned
            .as_ref()
            .map(|r| r.to_string())
    }

    /// Every (topic, queue id) with a ConsumeQueue.
    pub fn topic_queue_ids(&self) -> Vec<(String, i32)> {
        let queues = read_guard(&self.inner.queues);
        let mut out: Vec<(String, i32)> = queues
            .iter()
            .flat_map(|(topic, by_id)| by_id.keys().map(move |id| (topic.clone(), *id)))
            .collect();
        out.sort();
        out
    }

    fn stop_threads(&self) {
        lock(&self.inner.signal).stop = true;
        self.inner.signal_cv.notify_all();
        self.inner.retention_cv.notify_all();
        let threads: Vec<JoinHandle<()>> = lock(&self.threads).drain(..).collect();
        for handle in threads {
            // A panicked background thread has nothing left to clean up.
            let _ = handle.join();
        }
    }
}

impl Drop for MessageStore {
    /// Dropping without `shutdown` behaves like a crash: threads stop, nothing is flushed and the
    /// abort file stays, so the next open runs crash recovery.
    fn drop(&mut self) {
        self.stop_threads();
    }
}

// -------------------------------------------------------------------------------------------
// Appends.

struct Placement {
    segment: Arc<Segment>,
    offset: i64,
}

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
    born_host: std::net::SocketAddr,
    reconsume_times: i32,
    prepared_transaction_offset: i64,
}

impl Inner {
    fn put_message(&self, msg: &MessageToStore) -> Result<PutMessageResult, StoreError> {
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

    fn put_messages(&self, batch: &BatchToStore) -> Result<PutMessageResult, StoreError> {
        validate_topic(&batch.topic, false)?;
        if is_retry_topic(&batch.topic) {
            return Err(StoreError::MessageIllegal {
                reason: "batch messages cannot be sent to a retry topic".to_owned(),
            });
        }
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
        validate_queue_id(common.queue_id)?;
        let store_host = self.config.store_host;
        let sys_flag = format::sys_flag_for_hosts(common.sys_flag, &common.born_host, &store_host);
        let mut total = 0usize;
        for entry in entries {
            self.validate_body(entry.body.len())?;
            validate_properties(entry.properties.len())?;
            total += format::record_size(
                sys_flag,
                entry.body.len(),
                common.topic.len(),
                entry.properties.len(),
            );
        }
        self.validate_record_fits(total)?;
        let dispatched = format::is_dispatched_to_consume_queue(sys_flag);

        let mut writer = lock(&self.writer);
        self.check_writable()?;
        let cq = dispatched
            .then(|| self.get_or_create_queue(common.topic, common.queue_id))
            .transpose()?;
        let first_queue_offset = cq.as_ref().map_or(0, |cq| cq.max_offset());
        let store_timestamp_ms = next_store_timestamp(&mut writer);
        let place = self.place(total)?;
        let Writer {
            record_buf,
            unit_buf,
            ..
        } = &mut *writer;
        record_buf.clear();
        unit_buf.clear();
        let mut msg_ids = Vec::with_capacity(entries.len());
        for (i, entry) in entries.iter().enumerate() {
            let phy = place.offset + record_buf.len() as i64;
            let start = record_buf.len();
            let queue_offset = if dispatched {
                first_queue_offset + i as i64
            } else {
                0
            };
            format::encode_record(
                &RecordFields {
                    queue_id: common.queue_id,
                    flag: entry.flag,
                    queue_offset,
                    physical_offset: phy,
                    sys_flag,
                    born_timestamp_ms: common.born_timestamp_ms,
                    born_host: common.born_host,
                    store_timestamp_ms,
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
                commit_log_offset: phy,
                size: (record_buf.len() - start) as i32,
                tags_code: format::tags_code(entry.properties),
            }));
            msg_ids.push(format::encode_offset_msg_id(&store_host, phy));
        }
        debug_assert_eq!(record_buf.len(), total);
        self.write_records(&place, record_buf)?;
        if let Some(cq) = &cq {
            self.write_units(cq, first_queue_offset, unit_buf)?;
        }
        self.publish(place.offset + total as i64, store_timestamp_ms);
        if let Some(cq) = &cq {
            cq.set_max_offset(first_queue_offset + entries.len() as i64);
        }
        drop(writer);
        self.after_append();
        // Only messages that got a ConsumeQueue unit can be pulled, so only they arrive.
        if cq.is_some() {
            if let Some(listener) = read_guard(&self.listener).as_ref() {
                for (i, entry) in entries.iter().enumerate() {
                    listener.arriving(
                        common.topic,
                        common.queue_id,
                        first_queue_offset + i as i64 + 1,
                        format::tags_code(entry.properties),
                        store_timestamp_ms,
                        entry.properties,
                    );
                }
            }
        }
        Ok(PutMessageResult {
            status: PutMessageStatus::PutOk,
            wrote_offset: place.offset,
            wrote_bytes: total as i32,
            logics_offset: first_queue_offset,
            msg_ids,
            store_timestamp_ms,
            message_count: entries.len() as i32,
        })
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
        let max = self.commit_log.file_size_bytes() as usize - END_FILE_MIN_BLANK_LENGTH_BYTES;
        if size > max {
            return Err(StoreError::MessageTooLarge {
                size_bytes: size,
                max_bytes: max,
            });
        }
        Ok(())
    }

    fn check_writable(&self) -> Result<(), StoreError> {
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
        Ok(())
    }

    /// Finds where `size` bytes go, closing the current file with a BLANK filler when they do
    /// not fit before its end (a record never spans files). Writer only.
    fn place(&self, size: usize) -> Result<Placement, StoreError> {
        let file_size = self.commit_log.file_size_bytes();
        let mut offset = self.commit_log.max_offset();
        let in_file = offset % file_size;
        let remaining = (file_size - in_file) as usize;
        // Every append leaves at least END_FILE_MIN_BLANK_LENGTH bytes, so a BLANK always fits.
        assert!(remaining >= END_FILE_MIN_BLANK_LENGTH_BYTES);
        if size + END_FILE_MIN_BLANK_LENGTH_BYTES > remaining {
            let segment = self.commit_log.segments().get_or_create(offset - in_file)?;
            let mut blank = Vec::with_capacity(END_FILE_MIN_BLANK_LENGTH_BYTES);
            format::encode_blank(remaining, &mut blank);
            self.write_or_poison(&segment, &blank, in_file as u64)?;
            offset += remaining as i64;
            self.commit_log.set_max_offset(offset);
        }
        let in_file = offset % file_size;
        let segment = self.commit_log.segments().get_or_create(offset - in_file)?;
        Ok(Placement { segment, offset })
    }

    fn write_records(&self, place: &Placement, bytes: &[u8]) -> Result<(), StoreError> {
        let pos = (place.offset - place.segment.start_offset) as u64;
        self.write_or_poison(&place.segment, bytes, pos)
    }

    fn write_or_poison(&self, segment: &Segment, bytes: &[u8], pos: u64) -> Result<(), StoreError> {
        assert!(pos + bytes.len() as u64 <= self.commit_log.file_size_bytes() as u64);
        match fs::write_at(&segment.file, &segment.path, bytes, pos) {
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

    fn write_units(&self, cq: &ConsumeQueue, first: i64, units: &[u8]) -> Result<(), StoreError> {
        cq.write_units(first, units).inspect_err(|e| {
            self.poison(format!("consume queue write failed: {e}"));
        })
    }

    fn publish(&self, end_offset: i64, store_timestamp_ms: i64) {
        self.last_store_timestamp_ms
            .store(store_timestamp_ms, Ordering::Release);
        self.commit_log.set_max_offset(end_offset);
    }

    fn after_append(&self) {
        if self.config.flush_policy == FlushPolicy::Sync {
            self.request_flush();
        }
    }

    fn request_flush(&self) {
        lock(&self.signal).flush_requested = true;
        self.signal_cv.notify_all();
    }

    pub(crate) fn find_queue(&self, topic: &str, queue_id: i32) -> Option<Arc<ConsumeQueue>> {
        read_guard(&self.queues)
            .get(topic)
            .and_then(|by_id| by_id.get(&queue_id))
            .cloned()
    }

    pub(crate) fn get_or_create_queue(
        &self,
        topic: &str,
        queue_id: i32,
    ) -> Result<Arc<ConsumeQueue>, StoreError> {
        if let Some(cq) = self.find_queue(topic, queue_id) {
            return Ok(cq);
        }
        let mut queues = write_guard(&self.queues);
        let by_id = queues.entry(topic.to_owned()).or_default();
        let cq = by_id.entry(queue_id).or_insert_with(|| {
            Arc::new(ConsumeQueue::new(
                &self.cq_root(),
                topic,
                queue_id,
                self.config.consume_queue_file_units,
            ))
        });
        Ok(Arc::clone(cq))
    }

    pub(crate) fn cq_root(&self) -> PathBuf {
        self.config.root_dir.join("consumequeue")
    }

    pub(crate) fn all_queues(&self) -> Vec<Arc<ConsumeQueue>> {
        read_guard(&self.queues)
            .values()
            .flat_map(|by_id| by_id.values().cloned())
            .collect()
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
            topic: topic.chars().take(TOPIC_MAX_BYTES_V2 + 1).collect(),
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

// -------------------------------------------------------------------------------------------
// Pulls.

/// How a planned round of a pull ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum RoundEnd {
    /// Ran out of units, budget or file.
    Exhausted,
    /// Stopped at a unit because the (tentative) batch was full.
    BatchFull,
}

#[derive(Debug, Clone, Copy)]
struct Candidate {
    unit_index: usize,
    queue_offset: i64,
    commit_log_offset: i64,
    size: i32,
    segment_index: usize,
}

/// The regions side of `get_message_regions`: where regions go and who chooses.
pub(crate) struct RegionsWanted<'a> {
    out: Vec<FileRegion>,
    choose: &'a dyn Fn(RegionShape) -> bool,
    /// Asked once, at the first round that has candidates; later rounds follow it.
    chosen: Option<bool>,
}

impl RegionsWanted<'_> {
    /// Whether this round's candidates are answered as regions.
    fn choose_for(&mut self, candidates: &[Candidate]) -> bool {
        if let Some(chosen) = self.chosen {
            return chosen;
        }
        if candidates.is_empty() {
            return true;
        }
        let mut shape = RegionShape {
            regions: 0,
            bytes: 0,
            messages: candidates.len(),
        };
        let mut prev: Option<&Candidate> = None;
        for c in candidates {
            let continues = prev.is_some_and(|p| {
                p.segment_index == c.segment_index
                    && p.commit_log_offset + i64::from(p.size) == c.commit_log_offset
            });
            if !continues {
                shape.regions += 1;
            }
            shape.bytes += c.size as usize;
            prev = Some(c);
        }
        let chosen = (self.choose)(shape);
        self.chosen = Some(chosen);
        chosen
    }
}

/// Running totals of one pull.
struct PullState {
    status: GetMessageStatus,
    /// Index of the last unit that set `status` (Java updates status in unit order).
    status_unit: Option<usize>,
    next_begin_offset: i64,
    max_phy_offset_pulling: i64,
    total_bytes: usize,
    count: usize,
}

impl PullState {
    fn miss(&mut self, unit_index: usize, status: GetMessageStatus) {
        if self.status_unit.is_none_or(|u| u < unit_index) {
            self.status_unit = Some(unit_index);
            self.status = status;
        }
    }
}

impl Inner {
    /// Java `nextOffsetCorrection`: a slave keeps the requested offset unless
    /// `offsetCheckInSlave`.
    fn correct_offset(&self, old: i64, new: i64) -> i64 {
        if !self.config.broker_role_slave || self.config.offset_check_in_slave {
            new
        } else {
            old
        }
    }

    /// With `regions`, found records are returned as file regions pushed there instead of
    /// bytes in the result's buffer (see `MessageStore::get_message_regions`).
    #[allow(clippy::too_many_arguments)]
    fn get_message(
        &self,
        topic: &str,
        queue_id: i32,
        offset: i64,
        max_msg_nums: i32,
        max_pull_bytes: usize,
        filter: &dyn MessageFilter,
        regions: Option<&mut RegionsWanted<'_>>,
    ) -> Result<GetMessageResult, StoreError> {
        let Some(cq) = self.find_queue(topic, queue_id) else {
            let next = self.correct_offset(offset, 0);
            return Ok(GetMessageResult::empty(
                GetMessageStatus::NoMatchedLogicQueue,
                next,
            ));
        };
        let min = cq.min_offset();
        let max = cq.max_offset();
        let (status, next) = if max == 0 {
            (
                GetMessageStatus::NoMessageInQueue,
                self.correct_offset(offset, 0),
            )
        } else if offset < min {
            (
                GetMessageStatus::OffsetTooSmall,
                self.correct_offset(offset, min),
            )
        } else if offset == max {
            (
                GetMessageStatus::OffsetOverflowOne,
                self.correct_offset(offset, offset),
            )
        } else if offset > max {
            (
                GetMessageStatus::OffsetOverflowBadly,
                self.correct_offset(offset, max),
            )
        } else {
            let mut result = self.scan_queue(
                &cq,
                offset,
                max,
                max_msg_nums,
                max_pull_bytes,
                filter,
                regions,
            )?;
            result.min_offset = min;
            result.max_offset = max;
            return Ok(result);
        };
        let mut result = GetMessageResult::empty(status, next);
        result.min_offset = min;
        result.max_offset = max;
        Ok(result)
    }

    /// Java's batch-full rule (5.x `isTheBatchFull`); never full before the first message.
    fn is_batch_full(
        &self,
        size: usize,
        max_msg_nums: i64,
        max_pull: usize,
        total: usize,
        count: usize,
        in_mem: bool,
    ) -> bool {
        if total == 0 || count == 0 {
            return false;
        }
        if count as i64 + 1 > max_msg_nums {
            return true;
        }
        if total + size > max_pull {
            return true;
        }
        let (max_bytes, max_count) = if in_mem {
            (
                self.config.max_transfer_bytes_on_message_in_memory,
                self.config.max_transfer_count_on_message_in_memory,
            )
        } else {
            (
                self.config.max_transfer_bytes_on_message_in_disk,
                self.config.max_transfer_count_on_message_in_disk,
            )
        };
        total + size > max_bytes || count + 1 > max_count
    }

    #[allow(clippy::too_many_arguments)]
    fn scan_queue(
        &self,
        cq: &ConsumeQueue,
        offset: i64,
        max: i64,
        max_msg_nums: i32,
        max_pull: usize,
        filter: &dyn MessageFilter,
        mut regions: Option<&mut RegionsWanted<'_>>,
    ) -> Result<GetMessageResult, StoreError> {
        let max_msg_nums = i64::from(max_msg_nums);
        // Scan budget (`maxFilterMessageSize`): units whose distance from `offset` is below it.
        let budget_bytes = (self.config.max_filter_message_size_bytes as i64)
            .max(max_msg_nums.saturating_mul(CQ_UNIT_SIZE_BYTES as i64));
        let budget_units =
            (budget_bytes + CQ_UNIT_SIZE_BYTES as i64 - 1) / CQ_UNIT_SIZE_BYTES as i64;
        let want = budget_units.min(max - offset) as usize;
        let mut units = Vec::with_capacity(want);
        if cq.read_units(&self.io, offset, want, &mut units)?.is_none() {
            let next = self.correct_offset(offset, cq.roll_next_file(offset));
            return Ok(GetMessageResult::empty(
                GetMessageStatus::OffsetFoundNull,
                next,
            ));
        }
        // Read the CommitLog head only now, after the units: the writer publishes the CommitLog
        // max before the queue max, so every unit just read has its record below this head. A
        // head read before the units could miss records appended meanwhile, and they would be
        // skipped as MESSAGE_WAS_REMOVING while nextBeginOffset moved past them.
        let max_offset_py = self.commit_log.max_offset();
        let memory_window = self.config.memory_window_bytes();
        let cl_segments = self.commit_log.segments().snapshot();
        let cl_min = cl_segments
            .first()
            .map_or(max_offset_py, |s| s.start_offset);
        let file_size = self.commit_log.file_size_bytes();
        let mut state = PullState {
            status: GetMessageStatus::NoMatchedMessage,
            status_unit: None,
            next_begin_offset: offset,
            max_phy_offset_pulling: 0,
            total_bytes: 0,
            count: 0,
        };
        let mut buffer = BytesMut::new();
        let mut ranges = Vec::new();
        let mut locations = Vec::new();
        let mut queue_offsets = Vec::new();
        let mut candidates = Vec::new();
        let mut cursor = 0usize;
        loop {
            // Plan: walk units as Java does, assuming every candidate passes the record filter.
            candidates.clear();
            let (mut tentative_bytes, mut tentative_count) = (state.total_bytes, state.count);
            let mut next_phy_file_start = i64::MIN;
            let mut end = RoundEnd::Exhausted;
            let mut stop_at = units.len();
            for (i, unit) in units.iter().enumerate().skip(cursor) {
                let size = unit.size.max(0) as usize;
                let in_mem = max_offset_py - unit.commit_log_offset <= memory_window;
                if self.is_batch_full(
                    size,
                    max_msg_nums,
                    max_pull,
                    tentative_bytes,
                    tentative_count,
                    in_mem,
                ) || tentative_bytes >= max_pull
                {
                    end = RoundEnd::BatchFull;
                    stop_at = i;
                    break;
                }
                state.max_phy_offset_pulling = unit.commit_log_offset;
                state.next_begin_offset = offset + i as i64 + 1;
                if next_phy_file_start != i64::MIN && unit.commit_log_offset < next_phy_file_start {
                    continue;
                }
                if !filter.is_matched_by_consume_queue(unit.tags_code) {
                    state.miss(i, GetMessageStatus::NoMatchedMessage);
                    continue;
                }
                let available = unit.size > 0
                    && unit.commit_log_offset >= cl_min
                    && unit.commit_log_offset + i64::from(unit.size) <= max_offset_py;
                let segment_index = available
                    .then(|| segment_index(&cl_segments, unit.commit_log_offset, file_size))
                    .flatten();
                let Some(segment_index) = segment_index else {
                    state.miss(i, GetMessageStatus::MessageWasRemoving);
                    next_phy_file_start = self
                        .commit_log
                        .roll_next_file(unit.commit_log_offset.max(0));
                    continue;
                };
                candidates.push(Candidate {
                    unit_index: i,
                    queue_offset: offset + i as i64,
                    commit_log_offset: unit.commit_log_offset,
                    size: unit.size,
                    segment_index,
                });
                tentative_bytes += size;
                tentative_count += 1;
                next_phy_file_start = i64::MIN;
            }
            let as_regions = match regions.as_deref_mut() {
                Some(wanted) => wanted.choose_for(&candidates).then_some(wanted),
                None => None,
            };
            let rejected = match as_regions {
                Some(wanted) => {
                    self.locate_candidates(
                        &cl_segments,
                        &candidates,
                        &mut state,
                        &mut wanted.out,
                        &mut locations,
                        &mut queue_offsets,
                    )?;
                    // Layer two is not applied to regions, so nothing is ever rejected.
                    false
                }
                None => self.read_candidates(
                    &cl_segments,
                    &candidates,
                    filter,
                    &mut state,
                    &mut buffer,
                    &mut ranges,
                    &mut locations,
                    &mut queue_offsets,
                )?,
            };
            // A rejected candidate made the tentative totals too high: re-plan from the unit
            // where the round stopped, with the real totals.
            if end == RoundEnd::BatchFull && rejected {
                cursor = stop_at;
                continue;
            }
            break;
        }
        let status = if state.count > 0 {
            GetMessageStatus::Found
        } else {
            state.status
        };
        let suggest = max_offset_py - state.max_phy_offset_pulling > memory_window;
        Ok(GetMessageResult {
            status,
            next_begin_offset: state.next_begin_offset,
            min_offset: 0,
            max_offset: 0,
            suggest_pulling_from_slave: suggest,
            buffer: buffer.freeze(),
            message_ranges: ranges,
            message_locations: locations,
            queue_offsets,
            buffer_total_size: state.total_bytes,
            message_count: state.count,
        })
    }

    /// Reads every candidate record in one `read_batch` and applies the record filter.
    /// Returns whether any candidate was rejected.
    #[allow(clippy::too_many_arguments)]
    fn read_candidates(
        &self,
        cl_segments: &[Arc<Segment>],
        candidates: &[Candidate],
        filter: &dyn MessageFilter,
        state: &mut PullState,
        buffer: &mut BytesMut,
        ranges: &mut Vec<(usize, usize)>,
        locations: &mut Vec<(i64, i32)>,
        queue_offsets: &mut Vec<i64>,
    ) -> Result<bool, StoreError> {
        if candidates.is_empty() {
            return Ok(false);
        }
        let ops = candidate_reads(cl_segments, candidates, |c| c.size as usize);
        let wanted: usize = candidates.iter().map(|c| c.size as usize).sum();
        buffer.reserve(wanted);
        let mut rejected = false;
        let mut corrupt: Option<usize> = None;
        self.io
            .read_batch(&ops, &mut |i, bytes| {
                let c = &candidates[i];
                if !record_head_matches(bytes, c.size) {
                    corrupt.get_or_insert(i);
                    return;
                }
                if !filter.is_matched_by_commit_log(bytes) {
                    state.miss(c.unit_index, GetMessageStatus::NoMatchedMessage);
                    rejected = true;
                    return;
                }
                ranges.push((buffer.len(), bytes.len()));
                buffer.extend_from_slice(bytes);
                locations.push((c.commit_log_offset, c.size));
                queue_offsets.push(c.queue_offset);
                state.total_bytes += bytes.len();
                state.count += 1;
            })
            .map_err(|e| StoreError::io("read commit log", self.commit_log.segments().dir(), e))?;
        if let Some(i) = corrupt {
            return Err(not_a_record(cl_segments, &candidates[i]));
        }
        Ok(rejected)
    }

    /// The regions counterpart of `read_candidates`: checks each candidate's record head (one
    /// `read_batch` of 8-byte reads) and appends its location, merging it into the previous
    /// region when it continues it in the same file.
    fn locate_candidates(
        &self,
        cl_segments: &[Arc<Segment>],
        candidates: &[Candidate],
        state: &mut PullState,
        regions: &mut Vec<FileRegion>,
        locations: &mut Vec<(i64, i32)>,
        queue_offsets: &mut Vec<i64>,
    ) -> Result<(), StoreError> {
        if candidates.is_empty() {
            return Ok(());
        }
        let ops = candidate_reads(cl_segments, candidates, |c| {
            RECORD_HEAD_BYTES.min(c.size as usize)
        });
        let mut corrupt: Option<usize> = None;
        self.io
            .read_batch(&ops, &mut |i, head| {
                if corrupt.is_none() && !record_head_matches(head, candidates[i].size) {
                    corrupt = Some(i);
                }
            })
            .map_err(|e| StoreError::io("read commit log", self.commit_log.segments().dir(), e))?;
        if let Some(i) = corrupt {
            return Err(not_a_record(cl_segments, &candidates[i]));
        }
        for c in candidates {
            let seg = &cl_segments[c.segment_index];
            let offset_bytes = (c.commit_log_offset - seg.start_offset) as u64;
            let len_bytes = c.size as usize;
            match regions.last_mut() {
                Some(last)
                    if Arc::ptr_eq(&last.segment, seg)
                        && last.offset_bytes + last.len_bytes as u64 == offset_bytes =>
                {
                    last.len_bytes += len_bytes;
                }
                _ => regions.push(FileRegion {
                    segment: Arc::clone(seg),
                    offset_bytes,
                    len_bytes,
                }),
            }
            locations.push((c.commit_log_offset, c.size));
            queue_offsets.push(c.queue_offset);
            state.total_bytes += len_bytes;
            state.count += 1;
        }
        Ok(())
    }

    fn look_message_by_offset(&self, phy_offset: i64) -> Result<Option<Bytes>, StoreError> {
        let max = self.commit_log.max_offset();
        let file_size = self.commit_log.file_size_bytes();
        if phy_offset < self.commit_log.min_offset() || phy_offset + 8 > max {
            return Ok(None);
        }
        let Some(seg) = self.commit_log.segments().find(phy_offset) else {
            return Ok(None);
        };
        let pos = (phy_offset - seg.start_offset) as u64;
        let mut head = [0u8; 8];
        self.read_exact(&seg, pos, &mut head)?;
        let size = match decode_record_head(&head) {
            Ok(RecordHead::Message { total_size, .. }) => total_size,
            _ => return Ok(None),
        };
        if size <= 0
            || phy_offset + i64::from(size) > max
            || pos as i64 + i64::from(size) > file_size
        {
            return Ok(None);
        }
        let mut record = vec![0u8; size as usize];
        self.read_exact(&seg, pos, &mut record)?;
        if format::decode_record(&record).is_err() {
            return Ok(None);
        }
        Ok(Some(Bytes::from(record)))
    }

    /// Reads `out.len()` bytes at `pos` of a segment through the I/O engine.
    pub(crate) fn read_exact(
        &self,
        seg: &Segment,
        pos: u64,
        out: &mut [u8],
    ) -> Result<(), StoreError> {
        let op = ReadOp {
            file: &seg.file,
            offset_bytes: pos,
            len_bytes: out.len(),
        };
        self.io
            .read_batch(&[op], &mut |_, bytes| out.copy_from_slice(bytes))
            .map_err(|e| StoreError::io("read", &seg.path, e))
    }

    /// Store timestamp of the message at logical offset `index`, `None` if it is gone.
    fn store_time_at(&self, cq: &ConsumeQueue, index: i64) -> Result<Option<i64>, StoreError> {
        let Some(unit) = cq.read_unit(&self.io, index)? else {
            return Ok(None);
        };
        let max = self.commit_log.max_offset();
        if !unit.is_valid()
            || unit.size == i32::MAX
            || unit.commit_log_offset < self.commit_log.min_offset()
            || unit.commit_log_offset + i64::from(unit.size) > max
        {
            return Ok(None);
        }
        let Some(seg) = self.commit_log.segments().find(unit.commit_log_offset) else {
            return Ok(None);
        };
        let len = STORE_TIMESTAMP_PROBE_BYTES.min(unit.size as usize);
        let mut probe = vec![0u8; len];
        self.read_exact(
            &seg,
            (unit.commit_log_offset - seg.start_offset) as u64,
            &mut probe,
        )?;
        Ok(format::record_store_timestamp(&probe).ok())
    }

    fn offset_by_timestamp(
        &self,
        topic: &str,
        queue_id: i32,
        timestamp_ms: i64,
        boundary: BoundaryType,
    ) -> Result<i64, StoreError> {
        let Some(cq) = self.find_queue(topic, queue_id) else {
            return Ok(0);
        };
        let (min, max) = (cq.min_offset(), cq.max_offset());
        if min >= max {
            return Ok(max);
        }
        // Messages whose record is gone sort before every timestamp (Java treats them so).
        let time = |i: i64| -> Result<i64, StoreError> {
            Ok(self.store_time_at(&cq, i)?.unwrap_or(i64::MIN))
        };
        match boundary {
            BoundaryType::Lower => {
                // First offset with time >= timestamp, or max when none.
                let (mut lo, mut hi) = (min, max);
                while lo < hi {
                    let mid = lo + (hi - lo) / 2;
                    if time(mid)? >= timestamp_ms {
                        hi = mid;
                    } else {
                        lo = mid + 1;
                    }
                }
                Ok(lo)
            }
            BoundaryType::Upper => {
                // Last offset with time <= timestamp, or min when none.
                let (mut lo, mut hi) = (min, max);
                while lo < hi {
                    let mid = lo + (hi - lo) / 2;
                    if time(mid)? > timestamp_ms {
                        hi = mid;
                    } else {
                        lo = mid + 1;
                    }
                }
                Ok((lo - 1).max(min))
            }
        }
    }
}

pub(crate) fn segment_index(list: &[Arc<Segment>], offset: i64, file_size: i64) -> Option<usize> {
    let idx = list
        .partition_point(|s| s.start_offset <= offset)
        .checked_sub(1)?;
    (offset < list[idx].start_offset + file_size).then_some(idx)
}

/// TOTALSIZE and MAGICCODE: what `record_head_matches` needs.
const RECORD_HEAD_BYTES: usize = 8;

/// One read per candidate of the first `len_of(candidate)` bytes of its record.
fn candidate_reads<'a>(
    cl_segments: &'a [Arc<Segment>],
    candidates: &[Candidate],
    len_of: impl Fn(&Candidate) -> usize,
) -> Vec<ReadOp<'a>> {
    candidates
        .iter()
        .map(|c| {
            let seg = &cl_segments[c.segment_index];
            ReadOp {
                file: &seg.file,
                offset_bytes: (c.commit_log_offset - seg.start_offset) as u64,
                len_bytes: len_of(c),
            }
        })
        .collect()
}

/// The error for a ConsumeQueue unit whose CommitLog bytes are not the record it describes.
fn not_a_record(cl_segments: &[Arc<Segment>], c: &Candidate) -> StoreError {
    StoreError::Corrupted {
        path: cl_segments[c.segment_index].path.clone(),
        offset: c.commit_log_offset,
        reason: format!(
            "ConsumeQueue unit (size {}) does not point at a record",
            c.size
        ),
    }
}

fn record_head_matches(bytes: &[u8], size: i32) -> bool {
    matches!(
        decode_record_head(bytes),
        Ok(RecordHead::Message { total_size, .. }) if total_size == size
    )
}

// -------------------------------------------------------------------------------------------
// Durability.

impl Inner {
    async fn wait_flushed(&self, end_offset: i64) -> Result<(), StoreError> {
        let mut rx = self.flush_tx.subscribe();
        self.request_flush();
        let timeout = Duration::from_millis(self.config.sync_flush_timeout_ms);
        let wait = async {
            rx.wait_for(|s| s.flushed_offset >= end_offset || s.poisoned.is_some())
                .await
                .map(|s| (s.flushed_offset, s.poisoned.clone()))
        };
        match tokio::time::timeout(timeout, wait).await {
            Err(_) => Err(StoreError::FlushTimeout),
            Ok(Err(_)) => Err(StoreError::ShutDown),
            Ok(Ok((flushed, _))) if flushed >= end_offset => Ok(()),
            Ok(Ok((_, poisoned))) => Err(StoreError::Poisoned {
                reason: poisoned.as_deref().unwrap_or("poisoned").to_owned(),
            }),
        }
    }

    pub(crate) fn poison(&self, reason: String) {
        if self.poisoned.swap(true, Ordering::AcqRel) {
            return;
        }
        tracing::error!(%reason, "store turns read-only");
        let reason: Arc<str> = Arc::from(reason);
        self.flush_tx.send_modify(|s| {
            s.poisoned.get_or_insert(reason);
        });
    }

    fn is_poisoned(&self) -> bool {
        self.poisoned.load(Ordering::Acquire)
    }

    /// fsyncs every dirty CommitLog file and publishes the new flushed offset.
    fn flush_commit_log(&self) -> Result<(), StoreError> {
        let _guard = lock(&self.flush_lock);
        self.flush_commit_log_locked()
    }

    fn flush_commit_log_locked(&self) -> Result<(), StoreError> {
        if let Some(reason) = self.flush_tx.borrow().poisoned.as_deref() {
            return Err(StoreError::Poisoned {
                reason: reason.to_owned(),
            });
        }
        let written = self.commit_log.max_offset();
        if written <= self.flush_tx.borrow().flushed_offset {
            return Ok(());
        }
        for seg in self.commit_log.segments().snapshot().iter() {
            if seg.take_dirty() {
                if let Err(e) = fs::sync_file(&seg.file, &seg.path, fs::SyncKind::Data) {
                    self.poison(format!("commit log fsync failed: {e}"));
                    return Err(e);
                }
            }
        }
        self.flush_tx
            .send_modify(|s| s.flushed_offset = s.flushed_offset.max(written));
        Ok(())
    }

    /// fsyncs the CommitLog, every dirty ConsumeQueue file, then writes the checkpoint.
    pub(crate) fn flush_all(&self) -> Result<(), StoreError> {
        let _guard = lock(&self.flush_lock);
        // Read before the fsyncs: every unit for records below it was written before it was
        // published, so the fsyncs below cover it.
        let dispatched = self.commit_log.max_offset();
        let timestamp = self.last_store_timestamp_ms.load(Ordering::Acquire);
        self.flush_commit_log_locked()?;
        for cq in self.all_queues() {
            if !cq.take_dirty() {
                continue;
            }
            for seg in cq.segments().snapshot().iter() {
                if seg.take_dirty() {
                    if let Err(e) = fs::sync_file(&seg.file, &seg.path, fs::SyncKind::Data) {
                        self.poison(format!("consume queue fsync failed: {e}"));
                        return Err(e);
                    }
                }
            }
        }
        if self.last_checkpoint_offset.load(Ordering::Acquire) == dispatched {
            return Ok(());
        }
        let checkpoint = format::Checkpoint {
            physic_msg_timestamp_ms: timestamp,
            logics_msg_timestamp_ms: timestamp,
            index_msg_timestamp_ms: 0,
            physic_flushed_offset: dispatched,
            logics_flushed_offset: dispatched,
        };
        let bytes = format::encode_checkpoint(&checkpoint);
        let written = fs::write_at(&self.checkpoint_file, &self.checkpoint_path, &bytes, 0)
            .and_then(|()| {
                fs::sync_file(
                    &self.checkpoint_file,
                    &self.checkpoint_path,
                    fs::SyncKind::Data,
                )
            });
        if let Err(e) = written {
            self.poison(format!("checkpoint write failed: {e}"));
            return Err(e);
        }
        self.last_checkpoint_offset
            .store(dispatched, Ordering::Release);
        Ok(())
    }

    fn flush_loop(&self) {
        let cq_interval = Duration::from_millis(self.config.flush_consume_queue_interval_ms);
        let cl_interval = Duration::from_millis(self.config.flush_interval_ms);
        let mut last_cq_flush = Instant::now();
        let mut last_cl_flush = Instant::now();
        loop {
            let requested = {
                let mut signal = lock(&self.signal);
                if !signal.flush_requested && !signal.stop {
                    let wait = match self.config.flush_policy {
                        FlushPolicy::Sync => cq_interval.saturating_sub(last_cq_flush.elapsed()),
                        FlushPolicy::Async => cl_interval
                            .saturating_sub(last_cl_flush.elapsed())
                            .min(cq_interval.saturating_sub(last_cq_flush.elapsed())),
                    };
                    signal = self
                        .signal_cv
                        .wait_timeout(signal, wait)
                        .unwrap_or_else(|e| e.into_inner())
                        .0;
                }
                if signal.stop {
                    return;
                }
                std::mem::take(&mut signal.flush_requested)
            };
            if self.is_poisoned() {
                // Nothing can be made durable any more; wait for shutdown.
                continue;
            }
            let cl_due = last_cl_flush.elapsed() >= cl_interval;
            if requested || cl_due {
                last_cl_flush = Instant::now();
                if let Err(e) = self.flush_commit_log() {
                    tracing::error!(error = %e, "commit log flush failed");
                }
            }
            if last_cq_flush.elapsed() >= cq_interval {
                last_cq_flush = Instant::now();
                if let Err(e) = self.flush_all() {
                    tracing::error!(error = %e, "consume queue flush failed");
                }
            }
        }
    }

    fn retention_loop(&self) {
        let interval = Duration::from_millis(self.config.delete_check_interval_ms);
        loop {
            let deadline = Instant::now() + interval;
            let mut signal = lock(&self.signal);
            loop {
                if signal.stop {
                    return;
                }
                let now = Instant::now();
                if now >= deadline {
                    break;
                }
                signal = self
                    .retention_cv
                    .wait_timeout(signal, deadline - now)
                    .unwrap_or_else(|e| e.into_inner())
                    .0;
            }
            drop(signal);
            if let Err(e) = self.delete_expired_files(now_ms()) {
                tracing::error!(error = %e, "retention pass failed");
            }
        }
    }
}

fn spawn_flush_thread(inner: &Arc<Inner>) -> Result<JoinHandle<()>, StoreError> {
    let inner = Arc::clone(inner);
    std::thread::Builder::new()
        .name("store-flush".to_owned())
        .spawn(move || inner.flush_loop())
        .map_err(|e| StoreError::io("spawn thread", "store-flush", e))
}

fn spawn_retention_thread(inner: &Arc<Inner>) -> Result<JoinHandle<()>, StoreError> {
    let inner = Arc::clone(inner);
    std::thread::Builder::new()
        .name("store-retention".to_owned())
        .spawn(move || inner.retention_loop())
        .map_err(|e| StoreError::io("spawn thread", "store-retention", e))
}

// -------------------------------------------------------------------------------------------
// Retention.

impl Inner {
    fn delete_expired_files(&self, now_ms: i64) -> Result<usize, StoreError> {
        let _guard = lock(&self.retention_lock);
        let reserved_ms = (self.config.file_reserved_time_hours as i64).saturating_mul(3_600_000);
        let segments = self.commit_log.segments().snapshot();
        let mut expired = 0usize;
        // Never the last file (it is being written); oldest first, stop at the first live one
        // so the CommitLog stays contiguous (Java `deleteExpiredFileByTime`).
        for seg in segments.iter().take(segments.len().saturating_sub(1)) {
            if expired >= self.config.delete_files_batch_max {
                break;
            }
            let modified_ms = modified_ms(&seg.file, &seg.path)?;
            if modified_ms.saturating_add(reserved_ms) > now_ms {
                break;
            }
            expired += 1;
        }
        if expired == 0 {
            return Ok(0);
        }
        self.commit_log.segments().remove_front(expired)?;
        let min_phy = self.commit_log.min_offset();
        for cq in self.all_queues() {
            self.delete_queue_files_below(&cq, min_phy)?;
            self.correct_min_offset(&cq, min_phy)?;
        }
        Ok(expired)
    }

    /// Deletes the queue's files (never the last) whose last unit points below `min_phy`.
    fn delete_queue_files_below(&self, cq: &ConsumeQueue, min_phy: i64) -> Result<(), StoreError> {
        let segments = cq.segments().snapshot();
        let units = cq.units_per_file();
        let mut count = 0;
        for seg in segments.iter().take(segments.len().saturating_sub(1)) {
            let last_index = seg.start_offset / CQ_UNIT_SIZE_BYTES as i64 + units - 1;
            match cq.read_unit(&self.io, last_index)? {
                Some(unit) if unit.commit_log_offset < min_phy => count += 1,
                _ => break,
            }
        }
        if count > 0 {
            cq.segments().remove_front(count)?;
        }
        Ok(())
    }

    /// Sets the queue's min offset to its first unit pointing at live CommitLog data (Java
    /// `correctMinOffset`); filler units are skipped too.
    pub(crate) fn correct_min_offset(
        &self,
        cq: &ConsumeQueue,
        min_phy: i64,
    ) -> Result<(), StoreError> {
        let max = cq.max_offset();
        let Some(first) = cq.segments().first() else {
            cq.set_min_offset(max);
            return Ok(());
        };
        let mut lo = (first.start_offset / CQ_UNIT_SIZE_BYTES as i64).max(cq.min_offset().min(max));
        let mut hi = max;
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            let dead = match cq.read_unit(&self.io, mid)? {
                Some(u) => u.size == i32::MAX || u.commit_log_offset < min_phy,
                None => true,
            };
            if dead {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        cq.set_min_offset(lo);
        Ok(())
    }
}

fn modified_ms(file: &File, path: &Path) -> Result<i64, StoreError> {
    let modified = file
        .metadata()
        .and_then(|m| m.modified())
        .map_err(|e| StoreError::io("stat", path, e))?;
    Ok(modified
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64))
}

// -------------------------------------------------------------------------------------------
// Files of the root directory.

fn lock_root(root: &Path) -> Result<nix::fcntl::Flock<File>, StoreError> {
    let path = root.join(LOCK_FILE_NAME);
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&path)
        .map_err(|e| StoreError::io("open", &path, e))?;
    nix::fcntl::Flock::lock(file, nix::fcntl::FlockArg::LockExclusiveNonblock).map_err(
        |(_, errno)| match errno {
            nix::errno::Errno::EWOULDBLOCK => StoreError::Locked { path: path.clone() },
            errno => StoreError::io("flock", &path, std::io::Error::from(errno)),
        },
    )
}

fn open_checkpoint(path: &Path) -> Result<(File, Option<format::Checkpoint>), StoreError> {
    let existed = path.exists();
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(path)
        .map_err(|e| StoreError::io("open", path, e))?;
    if !existed {
        fs::allocate(&file, path, format::CHECKPOINT_FILE_SIZE_BYTES as u64)?;
        fs::sync_file(&file, path, fs::SyncKind::All)?;
        if let Some(dir) = path.parent() {
            fs::sync_dir(dir)?;
        }
        return Ok((file, None));
    }
    let mut buf = Vec::new();
    use std::io::Read as _;
    (&file)
        .read_to_end(&mut buf)
        .map_err(|e| StoreError::io("read", path, e))?;
    Ok((file, format::decode_checkpoint(&buf)))
}

fn write_abort_file(path: &Path) -> Result<(), StoreError> {
    let file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .open(path)
        .map_err(|e| StoreError::io("create", path, e))?;
    // Java 5.x writes the PID into the abort file.
    fs::write_at(&file, path, std::process::id().to_string().as_bytes(), 0)?;
    fs::sync_file(&file, path, fs::SyncKind::All)?;
    if let Some(dir) = path.parent() {
        fs::sync_dir(dir)?;
    }
    Ok(())
}

// A poisoned std lock only means another thread panicked while holding it; the data behind
// these locks stays consistent (scratch buffers, swapped Arcs), so the guard is recovered.
pub(crate) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

pub(crate) fn read_guard<T>(rw: &RwLock<T>) -> std::sync::RwLockReadGuard<'_, T> {
    rw.read().unwrap_or_else(|e| e.into_inner())
}

pub(crate) fn write_guard<T>(rw: &RwLock<T>) -> std::sync::RwLockWriteGuard<'_, T> {
    rw.write().unwrap_or_else(|e| e.into_inner())
}

#[allow(dead_code)]
fn _assert_send_sync() {
    fn check<T: Send + Sync>() {}
    check::<MessageStore>();
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::filter::AcceptAll;
    use std::net::SocketAddr;

    fn config(dir: &Path) -> StoreConfig {
        let mut cfg = StoreConfig::with_root(dir);
        cfg.commit_log_file_size_bytes = 4096;
        cfg.consume_queue_file_units = 8;
        cfg
    }

    fn open(cfg: StoreConfig) -> Arc<MessageStore> {
        MessageStore::open(cfg, Arc::new(IoEngine::new_pread())).unwrap()
    }

    fn msg(topic: &str, queue_id: i32, body: &[u8], tags: &str) -> MessageToStore {
        let born: SocketAddr = "127.0.0.1:5000".parse().unwrap();
        MessageToStore {
            topic: topic.to_owned(),
            queue_id,
            flag: 0,
            body: Bytes::copy_from_slice(body),
            properties: format::encode_properties([("TAGS", tags)]),
            sys_flag: 0,
            born_timestamp_ms: 1,
            born_host: born,
            reconsume_times: 0,
            prepared_transaction_offset: 0,
        }
    }

    struct TagFilter(i64);
    impl MessageFilter for TagFilter {
        fn is_matched_by_consume_queue(&self, tags_code: i64) -> bool {
            tags_code == self.0
        }
        fn is_matched_by_commit_log(&self, _record: &[u8]) -> bool {
            true
        }
    }

    struct RejectRecords;
    impl MessageFilter for RejectRecords {
        fn is_matched_by_consume_queue(&self, _tags_code: i64) -> bool {
            true
        }
        fn is_matched_by_commit_log(&self, _record: &[u8]) -> bool {
            false
        }
    }

    #[test]
    fn regions_carry_the_same_records_as_get_message() {
        let dir = tempfile::tempdir().unwrap();
        let store = open(config(dir.path()));
        // Two queues interleaved, so queue 0's records are contiguous only in pairs of runs, and
        // enough data to roll over several 4 KiB files.
        for i in 0..120 {
            let q = if i % 3 == 0 { 1 } else { 0 };
            store
                .put_message(&msg("T", q, format!("body-{i:04}").as_bytes(), "A"))
                .unwrap();
        }
        assert!(store.max_phy_offset() > 3 * 4096);
        let mut crossed_files = false;
        let shapes = std::cell::Cell::new(0);
        for q in 0..2 {
            let max = store.max_offset_in_queue("T", q);
            for offset in (0..max + 3).chain([-1]) {
                for max_nums in [1, 3, 32] {
                    let copied = store
                        .get_message("g", "T", q, offset, max_nums, &AcceptAll)
                        .unwrap();
                    let located = store
                        .get_message_regions(
                            "g",
                            "T",
                            q,
                            offset,
                            max_nums,
                            MAX_PULL_MSG_SIZE_BYTES,
                            &AcceptAll,
                            &|shape| {
                                assert!(shape.regions >= 1 && shape.regions <= shape.messages);
                                shapes.set(shapes.get() + 1);
                                true
                            },
                        )
                        .unwrap();
                    let regions = located.regions.clone().unwrap();
                    let r = &located.result;
                    assert_eq!(r.status, copied.status);
                    assert_eq!(r.next_begin_offset, copied.next_begin_offset);
                    assert_eq!(
                        (r.min_offset, r.max_offset),
                        (copied.min_offset, copied.max_offset)
                    );
                    assert_eq!(r.message_locations, copied.message_locations);
                    assert_eq!(r.queue_offsets, copied.queue_offsets);
                    assert_eq!(r.buffer_total_size, copied.buffer_total_size);
                    assert!(r.buffer.is_empty() && r.message_ranges.is_empty());
                    let mut bytes = BytesMut::new();
                    store.read_regions(&regions, &mut bytes).unwrap();
                    assert_eq!(&bytes[..], &copied.buffer[..]);
                    // Regions are maximal: two neighbours never continue each other in one file.
                    for w in regions.windows(2) {
                        let same_file = Arc::ptr_eq(&w[0].segment, &w[1].segment);
                        if !same_file {
                            crossed_files = true;
                        }
                        assert!(
                            !same_file
                                || w[0].offset_bytes + w[0].len_bytes as u64 != w[1].offset_bytes
                        );
                    }
                    let total: usize = regions.iter().map(|r| r.len_bytes).sum();
                    assert_eq!(total, copied.buffer_total_size);
                    // Choosing bytes gives exactly get_message's answer.
                    let as_bytes = store
                        .get_message_regions(
                            "g",
                            "T",
                            q,
                            offset,
                            max_nums,
                            MAX_PULL_MSG_SIZE_BYTES,
                            &AcceptAll,
                            &|_| false,
                        )
                        .unwrap();
                    if copied.message_count > 0 {
                        assert!(as_bytes.regions.is_none());
                    }
                    assert_eq!(as_bytes.result, copied);
                }
            }
        }
        assert!(crossed_files, "some pull spans two CommitLog files");
        assert!(shapes.get() > 100);
        // A layer-one filter applies to regions too; nothing found asks nothing.
        let located = store
            .get_message_regions(
                "g",
                "T",
                0,
                0,
                32,
                MAX_PULL_MSG_SIZE_BYTES,
                &TagFilter(0),
                &|_| unreachable!("nothing to choose"),
            )
            .unwrap();
        assert_eq!(located.result.status, GetMessageStatus::NoMatchedMessage);
        assert!(located.regions.unwrap().is_empty());
    }

    #[test]
    fn put_then_get_round_trips_and_rolls_files() {
        let dir = tempfile::tempdir().unwrap();
        let store = open(config(dir.path()));
        let mut ends = Vec::new();
        for i in 0..100 {
            let r = store
                .put_message(&msg("T", 0, format!("body-{i}").as_bytes(), "A"))
                .unwrap();
            assert_eq!(r.logics_offset, i);
            ends.push(r.end_offset());
        }
        assert!(
            store.max_phy_offset() > 4096,
            "the log rolled to a second file"
        );
        let mut offset = 0;
        while offset < 100 {
            let got = store
                .get_message("g", "T", 0, offset, 32, &AcceptAll)
                .unwrap();
            assert_eq!(got.status, GetMessageStatus::Found);
            for (k, q) in got.queue_offsets.iter().enumerate() {
                let rec = format::decode_record(got.message(k)).unwrap();
                assert_eq!(rec.body, format!("body-{q}").as_bytes());
                assert_eq!(rec.queue_offset, *q);
                assert!(rec.body_crc_matches());
            }
            offset = got.next_begin_offset;
        }
        assert_eq!(offset, 100);
        store.shutdown().unwrap();
    }

    #[test]
    fn every_get_message_status_row() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("consumequeue/Empty/0")).unwrap();
        let store = open(config(dir.path()));
        for i in 0..20 {
            let tags = if i % 2 == 0 { "A" } else { "B" };
            store
                .put_message(&msg("T", 0, &[i as u8; 10], tags))
                .unwrap();
        }
        let tag_a = i64::from(format::java_string_hash_code("A"));
        let tag_none = i64::from(format::java_string_hash_code("none"));
        struct Row {
            name: &'static str,
            topic: &'static str,
            offset: i64,
            filter: Box<dyn MessageFilter>,
            status: GetMessageStatus,
            next: i64,
        }
        let row = |name, topic, offset, filter: Box<dyn MessageFilter>, status, next| Row {
            name,
            topic,
            offset,
            filter,
            status,
            next,
        };
        use GetMessageStatus::*;
        let rows = vec![
            row(
                "no queue",
                "Nope",
                5,
                Box::new(AcceptAll),
                NoMatchedLogicQueue,
                0,
            ),
            row(
                "empty queue",
                "Empty",
                3,
                Box::new(AcceptAll),
                NoMessageInQueue,
                0,
            ),
            row(
                "at max",
                "T",
                20,
                Box::new(AcceptAll),
                OffsetOverflowOne,
                20,
            ),
            row(
                "past max",
                "T",
                25,
                Box::new(AcceptAll),
                OffsetOverflowBadly,
                20,
            ),
            // The scan stops at the end of the CQ file holding the offset (8 units per file).
            row(
                "tags miss",
                "T",
                0,
                Box::new(TagFilter(tag_none)),
                NoMatchedMessage,
                8,
            ),
            row(
                "record miss",
                "T",
                9,
                Box::new(RejectRecords),
                NoMatchedMessage,
                16,
            ),
            row("found", "T", 0, Box::new(TagFilter(tag_a)), Found, 8),
        ];
        for r in &rows {
            let got = store
                .get_message("g", r.topic, 0, r.offset, 32, r.filter.as_ref())
                .unwrap();
            assert_eq!(got.status, r.status, "{}", r.name);
            assert_eq!(got.next_begin_offset, r.next, "{}", r.name);
        }
        let found = store
            .get_message("g", "T", 0, 0, 32, &TagFilter(tag_a))
            .unwrap();
        assert_eq!(found.queue_offsets, vec![0, 2, 4, 6]);

        // OFFSET_TOO_SMALL: move the min as retention would.
        let cq = store.inner.find_queue("T", 0).unwrap();
        cq.set_min_offset(4);
        let got = store.get_message("g", "T", 0, 1, 32, &AcceptAll).unwrap();
        assert_eq!((got.status, got.next_begin_offset), (OffsetTooSmall, 4));
        assert_eq!((got.min_offset, got.max_offset), (4, 20));

        // MESSAGE_WAS_REMOVING: CommitLog file gone while the CQ still points at it.
        store.inner.commit_log.segments().remove_front(1).unwrap();
        let got = store.get_message("g", "T", 0, 4, 2, &AcceptAll).unwrap();
        let first_live = store.min_phy_offset();
        assert!(first_live > 0);
        assert_eq!(got.status, MessageWasRemoving);

        // OFFSET_FOUND_NULL: the CQ file for the offset is gone; next = start of the next file.
        cq.segments().remove_front(1).unwrap();
        let got = store.get_message("g", "T", 0, 5, 32, &AcceptAll).unwrap();
        assert_eq!((got.status, got.next_begin_offset), (OffsetFoundNull, 8));
        drop(store);
    }

    #[test]
    fn slave_does_not_correct_offsets() {
        let dir = tempfile::tempdir().unwrap();
        let mut cfg = config(dir.path());
        cfg.broker_role_slave = true;
        let store = open(cfg);
        store.put_message(&msg("T", 0, b"x", "A")).unwrap();
        let got = store.get_message("g", "T", 0, 7, 32, &AcceptAll).unwrap();
        assert_eq!(
            (got.status, got.next_begin_offset),
            (GetMessageStatus::OffsetOverflowBadly, 7)
        );
        let got = store
            .get_message("g", "Nope", 0, 7, 32, &AcceptAll)
            .unwrap();
        assert_eq!(got.next_begin_offset, 7);
    }

    #[test]
    fn bad_input_is_a_typed_error_and_writes_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let mut cfg = config(dir.path());
        cfg.max_message_size_bytes = 100;
        let store = open(cfg);
        let before = store.max_phy_offset();
        let big = msg("T", 0, &[0u8; 101], "A");
        assert!(matches!(
            store.put_message(&big),
            Err(StoreError::MessageTooLarge { .. })
        ));
        let long_topic = "x".repeat(128);
        assert!(matches!(
            store.put_message(&msg(&long_topic, 0, b"x", "A")),
            Err(StoreError::TopicIllegal { .. })
        ));
        assert!(matches!(
            store.put_message(&msg("bad topic", 0, b"x", "A")),
            Err(StoreError::TopicIllegal { .. })
        ));
        let mut props = msg("T", 0, b"x", "A");
        props.properties = "a".repeat(40_000);
        let err = store.put_message(&props).unwrap_err();
        assert!(matches!(err, StoreError::PropertiesTooLarge { .. }));
        assert_eq!(err.put_status(), PutMessageStatus::PropertiesSizeExceeded);
        assert!(matches!(
            store.put_message(&msg("T", -1, b"x", "A")),
            Err(StoreError::QueueIdIllegal { .. })
        ));
        // A record that cannot fit one CommitLog file.
        let mut cfg_small = config(&dir.path().join("b"));
        cfg_small.max_message_size_bytes = 10_000;
        let small = open(cfg_small);
        assert!(matches!(
            small.put_message(&msg("T", 0, &[0u8; 5000], "A")),
            Err(StoreError::MessageTooLarge { .. })
        ));
        assert_eq!(store.max_phy_offset(), before);
        assert_eq!(store.max_offset_in_queue("T", 0), 0);
    }

    #[tokio::test]
    async fn a_failed_fsync_makes_the_store_read_only() {
        let dir = tempfile::tempdir().unwrap();
        let mut cfg = config(dir.path());
        cfg.flush_policy = FlushPolicy::Sync;
        let store = open(cfg);
        let ok = store.put_message(&msg("T", 0, b"a", "A")).unwrap();
        store.wait_flushed(ok.end_offset()).await.unwrap();
        // What the flush path does when fdatasync returns an error.
        store
            .inner
            .poison("commit log fsync failed: EIO".to_owned());
        let reason = store.is_read_only().unwrap();
        assert!(reason.contains("EIO"));
        // Already-durable data stays acknowledged; nothing new is accepted or acknowledged.
        store.wait_flushed(ok.end_offset()).await.unwrap();
        let err = store.wait_flushed(ok.end_offset() + 1).await.unwrap_err();
        assert!(matches!(err, StoreError::Poisoned { .. }));
        let err = store.put_message(&msg("T", 0, b"b", "A")).unwrap_err();
        assert!(matches!(err, StoreError::Poisoned { .. }));
        assert_eq!(err.put_status(), PutMessageStatus::ServiceNotAvailable);
        assert!(
            store.inner.flush_all().is_err(),
            "a flush is never retried as success"
        );
        // Reads still work.
        let got = store.get_message("g", "T", 0, 0, 32, &AcceptAll).unwrap();
        assert_eq!(got.status, GetMessageStatus::Found);
        // Shutdown refuses to mark the store clean.
        assert!(store.shutdown().is_err());
        assert!(dir.path().join(ABORT_FILE_NAME).exists());
    }

    #[test]
    fn second_open_of_the_same_dir_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let store = open(config(dir.path()));
        let again = MessageStore::open(config(dir.path()), Arc::new(IoEngine::new_pread()));
        assert!(matches!(again, Err(StoreError::Locked { .. })));
        drop(store);
    }
}
