//! The message store facade (Java `DefaultMessageStore`): append, dispatch to the ConsumeQueue,
//! pull, offsets, durability, retention and lifecycle.
//!
//! Threads: callers append under one writer mutex (record write, ConsumeQueue unit write and
//! offset publication happen together, so queue offsets are assigned atomically with the
//! append). Readers never take the writer mutex: they read published atomics and snapshots of
//! the segment lists. One flush thread runs fsyncs (group commit for `sync`, a timer for
//! `async`), the ConsumeQueue fsync and the checkpoint; one retention thread deletes expired
//! files.
//!
//! This file holds the facade, the shared state (`Inner`) and the queue registry. The rest of
//! the implementation is split by concern, each file one or more `impl Inner` blocks:
//! - `append`: the put paths (validation, queue offsets, placement in the CommitLog, the
//!   record and unit writes, publication, arrival events);
//! - `get`: pulls, answered with bytes or with file regions;
//! - `lookup`: one record by CommitLog offset, the search of a queue by store time;
//! - `flush`: group commit, the flush loop, the checkpoint, poisoning;
//! - `retention`: deletion of expired files;
//! - `lifecycle`: open, the root directory's files, the threads, shutdown;
//! - `recovery`: what `open` does to find the end of the log and repair the queues;
//! - `zero_ahead`: with `sync` flush, zeros written past the CommitLog write position, so a
//!   group commit's fsync does not also write the file's block map.
//!
//! - `replica`: replication: the CommitLog bytes an HA master sends from an offset, and the
//!   slave's append of the master's bytes. It takes the writer lock, checks `check_writable`
//!   and that the offset is the current `max_phy_offset`, writes the bytes with
//!   `write_or_poison` (a failed write poisons here, unlike an append's), writes the units of the complete records it decodes, and publishes in
//!   the same order (CommitLog max, then queue max), so readers, flushing and recovery need no
//!   second path.

mod append;
mod deleted_topics;
mod flush;
mod get;
mod group_commit;
mod index;
mod lifecycle;
mod lookup;
mod quarantine;
mod recent_records;
mod recovery;
mod replica;
mod reput;
mod retention;
mod zero_ahead;

use std::collections::HashMap;
use std::fs::File;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, RwLock};
use std::thread::JoinHandle;
use std::time::Instant;

use bytes::{Bytes, BytesMut};
use tokio::sync::watch;

use self::deleted_topics::DeletedTopics;
use self::get::RegionsWanted;
pub use self::index::{QueryMessageResult, QUERY_MESSAGES_MAX};
use crate::store::commit_log::CommitLog;
use crate::store::config::StoreConfig;
use crate::store::consume_queue::ConsumeQueue;
use crate::store::error::StoreError;
use crate::store::fs::FileSystem;
use crate::store::index_service::IndexService;
use crate::store::io::IoEngine;
use crate::store::region::{FileRegion, GetMessageRegions, RegionShape};
use crate::store::store_stats_service::StoreStatsService;
use crate::store::types::{
    ArrivalListener, BatchToStore, BoundaryType, GetMessageRequest, GetMessageResult,
    MessageToStore, PutMessageResult, RecoveryReport,
};

/// Java `DefaultMessageStore.MAX_PULL_MSG_SIZE`: a pull never returns more bytes than this.
pub const PULL_MSG_SIZE_MAX_BYTES: usize = 128 * 1024 * 1024;
/// Name of the clean-shutdown marker (`StorePathConfigHelper.getAbortFile`).
pub const ABORT_FILE_NAME: &str = "abort";
/// Name of the checkpoint file.
pub const CHECKPOINT_FILE_NAME: &str = "checkpoint";
/// Name of the file locked while a store has the directory open.
pub const LOCK_FILE_NAME: &str = "lock";
pub use self::deleted_topics::DELETED_TOPICS_FILE_NAME;

pub use self::replica::ReplicaAppend;

/// Durability counters, read by the broker's metrics.
#[derive(Debug, Clone)]
pub struct FlushStats {
    pub fsyncs: u64,
    pub commit_log_flush_latency: crate::metrics::HistogramSnapshot,
}

/// State published by the flush thread.
#[derive(Debug, Clone, Default)]
struct FlushState {
    /// Every CommitLog byte below this offset is fsynced.
    flushed_phy_offset: i64,
    /// Set once, when an fsync failed.
    poisoned: Option<Arc<str>>,
}

#[derive(Debug, Default)]
struct Signal {
    flush_requested: bool,
    stop: bool,
    /// What the flush thread is doing (whether a new waiter must wake it).
    flusher: group_commit::FlusherState,
    /// Producers waiting for a group commit (`sync` flush), in no particular order. At most
    /// one per send in flight, which the network layer bounds.
    waiters: Vec<group_commit::Waiter>,
    /// The highest end offset a waiter registered with (stays when that waiter goes).
    max_waiter_end_phy_offset: i64,
    /// The CommitLog fsyncs started, their order and what they cover (see `flush.rs`).
    fsyncs: group_commit::FsyncOrder,
    /// The second flusher sleeps: a waiter that no started fsync covers wakes it.
    second_flusher_idle: bool,
}

/// Scratch buffers of the single writer, reused across appends.
#[derive(Debug)]
struct Writer {
    record_buf: Vec<u8>,
    unit_buf: Vec<u8>,
    last_store_timestamp_ms: i64,
    /// Replicated bytes after the last complete record (an HA slave's partial record).
    replica_tail: Vec<u8>,
    /// CommitLog offset where `replica_tail` starts; `None` before the first replicated append.
    replica_dispatched_phy_offset: Option<i64>,
    /// Keeps each append's records for the pulls that follow (`recent_records`).
    recent: recent_records::RecentWriter,
}

impl Writer {
    /// A writer keeping about `window_bytes` of its newest records, and the readers' side of
    /// them.
    fn with_recent_window(window_bytes: u64) -> (Arc<recent_records::RecentRecords>, Writer) {
        let recent = Arc::new(recent_records::RecentRecords::default());
        let writer = Writer {
            record_buf: Vec::new(),
            unit_buf: Vec::new(),
            last_store_timestamp_ms: 0,
            replica_tail: Vec::new(),
            replica_dispatched_phy_offset: None,
            recent: recent_records::RecentWriter::new(Arc::clone(&recent), window_bytes),
        };
        (recent, writer)
    }
}

/// Used shares of the disks of the CommitLog and of the ConsumeQueues, as ratios (Java
/// `getDiskPartitionSpaceUsedPercent`; -1 when unknown).
#[derive(Debug, Clone, Copy, PartialEq)]
struct DiskRatios {
    commit_log: f64,
    consume_queue: f64,
}

impl Default for DiskRatios {
    fn default() -> Self {
        DiskRatios {
            commit_log: -1.0,
            consume_queue: -1.0,
        }
    }
}

/// foldhash, not SipHash: every append and every pull looks its queue up here.
type Fold = foldhash::fast::RandomState;
pub(super) type QueueMap = HashMap<String, HashMap<i32, Arc<ConsumeQueue>, Fold>, Fold>;

/// Everything the facade and its threads share.
struct Inner {
    config: StoreConfig,
    io: Arc<IoEngine>,
    /// Every file creation, allocation, write, fsync and rename goes through it.
    fs: Arc<dyn FileSystem>,
    commit_log: CommitLog,
    queues: RwLock<QueueMap>,
    writer: Mutex<Writer>,
    /// The newest appended records, for pulls that keep up (`recent_records`).
    recent: Arc<recent_records::RecentRecords>,
    poisoned: AtomicBool,
    /// The disk is fuller than the warning level (Java `RunningFlags.DISK_FULL_BIT`): appends
    /// are refused until a retention pass finds space again.
    disk_full: AtomicBool,
    /// Used ratios measured by the last retention pass (see `retention`).
    disk_ratios: Mutex<DiskRatios>,
    flush_tx: watch::Sender<FlushState>,
    flush_lock: Mutex<()>,
    signal: Mutex<Signal>,
    signal_cv: Condvar,
    /// A completed fsync waits here for the fsyncs started before it to be published.
    publish_cv: Condvar,
    /// The second flusher (`sync` flush) sleeps here.
    second_flusher_cv: Condvar,
    /// Whether the measured fsync time makes a second fsync beside a running one worth its
    /// cost (set by the flush thread, [`group_commit::GroupCommitBatcher::wants_second_flusher`]).
    second_flusher_wanted: AtomicBool,
    /// Times the flush thread woke up: lets a test see that it sleeps rather than spins.
    flush_loop_wakeups: AtomicU64,
    /// Duration of each CommitLog flush that fsynced something (metrics).
    commit_log_flush_latency: crate::metrics::Histogram,
    retention_cv: Condvar,
    /// The zero-ahead thread sleeps here between passes (see `zero_ahead`).
    zero_ahead_cv: Condvar,
    /// Bytes of zeros the zero-ahead thread wrote (read by tests).
    zero_ahead_bytes_written: AtomicU64,
    /// Store timestamp of the last appended record (informational checkpoint fields).
    last_store_timestamp_ms: AtomicI64,
    /// CommitLog offset recorded by the last checkpoint write (an unchanged one is not rewritten).
    last_checkpoint_phy_offset: AtomicI64,
    checkpoint_file: File,
    checkpoint_path: PathBuf,
    listener: RwLock<Option<Arc<dyn ArrivalListener>>>,
    retention_lock: Mutex<()>,
    /// Deleted topics whose records recovery must not dispatch again.
    deleted_topics: Mutex<DeletedTopics>,
    /// The message index; `None` when `message_index_enable` is off.
    index: Option<IndexService>,
    /// The record at this CommitLog offset is indexed whole already and the index thread
    /// passes over it (set when indexing resumes after a failed index flush); -1 for none.
    index_skip_phy_offset: AtomicI64,
    /// CommitLog offset the index thread has indexed up to (Java `reputFromOffset`).
    index_phy_offset: AtomicI64,
    /// The index thread, woken after appends (set once it is spawned).
    index_thread: std::sync::OnceLock<std::thread::Thread>,
    /// The index thread sleeps until woken (not in its nap after catching up): only then
    /// does an append wake it.
    index_sleeping: AtomicBool,
    /// Times an append woke the index thread (lets a test see appends do not wake it each).
    index_wakeups: AtomicU64,
    /// Tells the index thread to stop.
    index_stop: AtomicBool,
    shut_down: AtomicBool,
    /// Java `StoreStatsService`: put and get counters, latencies and their samples.
    stats: StoreStatsService,
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
            .field("max_phy_offset", &self.inner.commit_log.max_phy_offset())
            .finish_non_exhaustive()
    }
}

impl MessageStore {
    /// What recovery did when this store was opened.
    pub fn recovery_report(&self) -> &RecoveryReport {
        &self.recovery
    }

    pub fn config(&self) -> &StoreConfig {
        &self.inner.config
    }

    /// Appends one message and writes its ConsumeQueue unit. Returns after the write, not after
    /// the fsync: with `sync` flush, await [`MessageStore::wait_flushed`] with
    /// [`PutMessageResult::end_phy_offset`] before acknowledging.
    pub fn put_message(&self, msg: &MessageToStore) -> Result<PutMessageResult, StoreError> {
        let started = Instant::now();
        let put = self.inner.put_message(msg);
        self.count_put(&put, started);
        put
    }

    /// Appends a batch (Java `MessageBatch`) as consecutive records with consecutive queue offsets.
    pub fn put_messages(&self, batch: &BatchToStore) -> Result<PutMessageResult, StoreError> {
        let started = Instant::now();
        let put = self.inner.put_messages(batch);
        self.count_put(&put, started);
        put
    }

    /// Java `DefaultMessageStore.putMessage`'s accounting: the put's time, and on success its
    /// records and bytes (as `CommitLog` counts them), else one failure.
    fn count_put(&self, put: &Result<PutMessageResult, StoreError>, started: Instant) {
        let elapsed_ms = started.elapsed().as_millis() as u64;
        match put {
            Ok(p) => self.inner.stats.on_put_ok(
                p.message_count.max(0) as u64,
                p.wrote_bytes.max(0) as u64,
                elapsed_ms,
            ),
            Err(_) => self.inner.stats.on_put_failed(elapsed_ms),
        }
    }

    /// Java `DefaultMessageStore.getMessage`'s accounting: found or missed, messages
    /// returned, the lookup's time.
    fn count_get(&self, got: &Result<GetMessageResult, StoreError>, started: Instant) {
        let elapsed_ms = started.elapsed().as_millis() as u64;
        if let Ok(r) = got {
            let found = r.status == crate::store::types::GetMessageStatus::Found;
            self.inner
                .stats
                .on_get(found, r.message_count as u64, elapsed_ms);
        }
    }

    /// The store's counters (Java `getStoreStatsService`).
    pub fn stats(&self) -> &StoreStatsService {
        &self.inner.stats
    }

    /// Group commit: resolves once the fsync covering `end_phy_offset` is done.
    pub async fn wait_flushed(&self, end_phy_offset: i64) -> Result<(), StoreError> {
        self.inner.wait_flushed(end_phy_offset).await
    }

    /// Pulls messages (Java `DefaultMessageStore.getMessage`, 5.x semantics), at most
    /// [`PULL_MSG_SIZE_MAX_BYTES`] of them.
    pub fn get_message(
        &self,
        request: &GetMessageRequest<'_>,
    ) -> Result<GetMessageResult, StoreError> {
        let started = Instant::now();
        let got = self
            .inner
            .get_message(request, PULL_MSG_SIZE_MAX_BYTES, None);
        self.count_get(&got, started);
        got
    }

    /// [`MessageStore::get_message`] with the pull request's `maxMsgBytes` (5.x
    /// `maxTotalMsgSize`; at least 100, at most [`PULL_MSG_SIZE_MAX_BYTES`]) that can answer
    /// with where the records are (file regions, for a zero-copy transfer) instead of their
    /// bytes. Same planning, limits, status and offsets. Once the records are planned, `choose`
    /// sees the pull's shape and says whether to answer with regions (`true`) or to read the
    /// bytes as `get_message` does (`false`); a pull that finds nothing asks nothing and answers
    /// with empty regions.
    ///
    /// With regions only layer one of the request's filter (`is_matched_by_consume_queue`) is
    /// applied: the records are not read, so `is_matched_by_commit_log` is never called. Let
    /// `choose` say `true` only for a filter whose layer two accepts every record (a TAG `*`
    /// subscription). The head of each record (TOTALSIZE and MAGICCODE, 8 bytes) is still read,
    /// so a ConsumeQueue unit that does not point at a record is the same `Corrupted` error as
    /// in `get_message`.
    pub fn get_message_regions(
        &self,
        request: &GetMessageRequest<'_>,
        max_total_msg_size_bytes: usize,
        choose: &dyn Fn(RegionShape) -> bool,
    ) -> Result<GetMessageRegions, StoreError> {
        let pull_size_max_bytes = max_total_msg_size_bytes.clamp(100, PULL_MSG_SIZE_MAX_BYTES);
        let mut wanted = RegionsWanted::new(choose);
        let started = Instant::now();
        let got = self
            .inner
            .get_message(request, pull_size_max_bytes, Some(&mut wanted));
        self.count_get(&got, started);
        let result = got?;
        Ok(GetMessageRegions {
            result,
            regions: wanted.into_regions(),
        })
    }

    /// Reads the bytes of `regions`, in order, appending them to `out` (one `read_batch`): the
    /// copy path for a pull that was planned as regions.
    pub fn read_regions(
        &self,
        regions: &[FileRegion],
        out: &mut BytesMut,
    ) -> Result<(), StoreError> {
        self.inner.read_regions(regions, out)
    }

    /// HA slave: appends `bytes` the master sent for CommitLog offset `start_offset` (Java
    /// `appendToCommitLog`): the offset must be this log's end (any offset when the log is
    /// empty); the bytes may end inside a record. Every record completed by them gets its
    /// ConsumeQueue unit, as on a master, and arrives at the listener.
    pub fn append_to_commit_log(
        &self,
        start_offset: i64,
        bytes: &[u8],
    ) -> Result<ReplicaAppend, StoreError> {
        self.inner.append_replica(start_offset, bytes)
    }

    /// HA master: where up to `max_bytes` CommitLog bytes from `from` are, never past the end
    /// of the file holding `from` nor past the write position (Java `CommitLog.getData`).
    /// `None` when there is nothing at `from` yet or it is outside the live files. Read the
    /// bytes with [`MessageStore::read_regions`] or send them from [`FileRegion::file`].
    pub fn commit_log_region(&self, from: i64, max_bytes: usize) -> Option<FileRegion> {
        self.inner.commit_log_region(from, max_bytes)
    }

    /// Next queue offset to be written (0 when the queue does not exist).
    pub fn max_offset_in_queue(&self, topic: &str, queue_id: i32) -> i64 {
        self.inner
            .find_queue(topic, queue_id)
            .map_or(0, |cq| cq.max_offset_in_queue())
    }

    /// First live queue offset (0 when the queue does not exist).
    pub fn min_offset_in_queue(&self, topic: &str, queue_id: i32) -> i64 {
        self.inner
            .find_queue(topic, queue_id)
            .map_or(0, |cq| cq.min_offset_in_queue())
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
        self.inner.earliest_message_store_time(topic, queue_id)
    }

    /// Store time of the message at `queue_offset` (Java `getMessageStoreTimeStamp`), `None`
    /// when the queue or the message is gone.
    pub fn message_store_timestamp(
        &self,
        topic: &str,
        queue_id: i32,
        queue_offset: i64,
    ) -> Result<Option<i64>, StoreError> {
        self.inner
            .message_store_timestamp(topic, queue_id, queue_offset)
    }

    /// Creates the first ConsumeQueue file of each of `topic`'s queues `0..queue_count` that
    /// has none yet, for a topic just created; returns how many it created. Appends create a
    /// missing file themselves, so a failure here costs only the time it was meant to save.
    pub fn create_queue_files(&self, topic: &str, queue_count: i32) -> Result<usize, StoreError> {
        self.inner.create_queue_files(topic, queue_count)
    }

    /// Deletes the ConsumeQueues of `topic` (Java `deleteTopics`); the CommitLog keeps its
    /// records. Returns the number of queues removed.
    pub fn delete_topic(&self, topic: &str) -> Result<usize, StoreError> {
        self.inner.delete_topic(topic)
    }

    /// Java `queryMessage`: the records indexed under `topic#key` (a KEYS token or the
    /// UNIQ_KEY) stored within `begin_ms..=end_ms`, oldest first, at most `max_num` and
    /// [`QUERY_MESSAGES_MAX`], and past the first record at most `max_total_bytes` in all.
    /// Empty when the index is disabled.
    pub fn query_message(
        &self,
        topic: &str,
        key: &str,
        max_num: usize,
        (begin_ms, end_ms): (i64, i64),
        max_total_bytes: usize,
    ) -> Result<QueryMessageResult, StoreError> {
        self.inner
            .query_message(topic, key, max_num, (begin_ms, end_ms), max_total_bytes)
    }

    /// Java `dispatchBehindBytes`: CommitLog bytes not yet dispatched. The ConsumeQueue is
    /// written with the record, so this is what the index thread has still to index (0 with
    /// the index off). A query right after an append may miss a message while it is not 0.
    pub fn dispatch_behind_bytes(&self) -> i64 {
        self.inner.index_behind_bytes()
    }

    /// The index files, oldest first (empty when the index is disabled).
    pub fn index_files(&self) -> Vec<std::path::PathBuf> {
        self.inner.index.as_ref().map_or_else(Vec::new, |index| {
            index.files().iter().map(|f| f.path.clone()).collect()
        })
    }

    /// One whole record by CommitLog offset, or `None` when no record starts there.
    pub fn look_message_by_offset(&self, phy_offset: i64) -> Result<Option<Bytes>, StoreError> {
        self.inner.look_message_by_offset(phy_offset)
    }

    pub fn max_phy_offset(&self) -> i64 {
        self.inner.commit_log.max_phy_offset()
    }

    pub fn min_phy_offset(&self) -> i64 {
        self.inner.commit_log.min_phy_offset()
    }

    /// fsyncs so far (every file and directory fsync of this process's stores) and the
    /// latency of CommitLog flushes, for metrics.
    pub fn flush_stats(&self) -> FlushStats {
        FlushStats {
            fsyncs: crate::store::fs::fsync_count(),
            commit_log_flush_latency: self.inner.commit_log_flush_latency.snapshot(),
        }
    }

    /// CommitLog offset below which everything is fsynced.
    pub fn flushed_phy_offset(&self) -> i64 {
        self.inner.flush_tx.borrow().flushed_phy_offset
    }

    pub fn set_arrival_listener(&self, listener: Arc<dyn ArrivalListener>) {
        *write_guard(&self.inner.listener) = Some(listener);
    }

    /// Deletes CommitLog files older than `file_reserved_time_hours` (oldest first, never the
    /// file being written) and the ConsumeQueue units below the new minimum. Returns the number
    /// of CommitLog files deleted.
    pub fn delete_expired_files(&self, now_ms: i64) -> Result<usize, StoreError> {
        self.inner.delete_files(now_ms, false)
    }

    /// One pass of the retention thread (Java `cleanFilesPeriodically`): measures the disk
    /// (the disk guard: sets or clears the disk-full state, and above
    /// `disk_space_clean_forcibly_ratio_percent` deletes the oldest files even if they have
    /// not expired), then deletes expired files. Returns the number of CommitLog files deleted.
    pub fn clean_files_periodically(&self, now_ms: i64) -> Result<usize, StoreError> {
        self.inner.clean_files_periodically(now_ms)
    }

    /// `Some(used ratios)` while the disk is full and appends are refused.
    pub fn disk_full(&self) -> Option<String> {
        self.inner
            .disk_full
            .load(std::sync::atomic::Ordering::Acquire)
            .then(|| self.inner.disk_util())
    }

    /// Forces a CommitLog fsync now (also used by benches).
    pub fn flush(&self) -> Result<(), StoreError> {
        self.inner.flush_all()
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
}

impl Inner {
    fn find_queue(&self, topic: &str, queue_id: i32) -> Option<Arc<ConsumeQueue>> {
        read_guard(&self.queues)
            .get(topic)
            .and_then(|by_id| by_id.get(&queue_id))
            .cloned()
    }

    fn get_or_create_queue(
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
                Arc::clone(&self.fs),
            ))
        });
        Ok(Arc::clone(cq))
    }

    fn cq_root(&self) -> PathBuf {
        self.config.root_dir.join("consumequeue")
    }

    fn all_queues(&self) -> Vec<Arc<ConsumeQueue>> {
        read_guard(&self.queues)
            .values()
            .flat_map(|by_id| by_id.values().cloned())
            .collect()
    }
}

// A poisoned std lock only means another thread panicked while holding it; the data behind
// these locks stays consistent (scratch buffers, swapped Arcs), so the guard is recovered.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

fn read_guard<T>(rw: &RwLock<T>) -> std::sync::RwLockReadGuard<'_, T> {
    rw.read().unwrap_or_else(|e| e.into_inner())
}

fn write_guard<T>(rw: &RwLock<T>) -> std::sync::RwLockWriteGuard<'_, T> {
    rw.write().unwrap_or_else(|e| e.into_inner())
}

// The store is shared between the network runtime's threads.
const _: () = {
    const fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<MessageStore>();
};

#[cfg(test)]
mod replica_tests;
#[cfg(test)]
mod tests;

#[cfg(test)]
mod fault_tests;
#[cfg(test)]
mod index_fault_tests;
