//! Opening and closing the store: the root directory's lock, checkpoint and abort files, the
//! background threads, clean shutdown and the crash-like drop.

use super::QueueMap;
use std::fs::File;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, RwLock};
use std::thread::JoinHandle;

use tokio::sync::watch;

use super::deleted_topics::DeletedTopics;

use super::{
    lock, DiskRatios, FlushState, Inner, MessageStore, Signal, Writer, ABORT_FILE_NAME,
    CHECKPOINT_FILE_NAME, LOCK_FILE_NAME,
};
use crate::store::commit_log::CommitLog;
use crate::store::config::{FlushPolicy, StoreConfig};
use crate::store::error::StoreError;
use crate::store::format;
use crate::store::fs::{self, FileSystem, RealFs};
use crate::store::index_service::{IndexDimensions, IndexService};
use crate::store::io::IoEngine;
use crate::store::store_stats_service::StoreStatsService;

impl MessageStore {
    /// Opens (creating if needed) the store at `config.root_dir`, recovers it, and starts the
    /// flush and retention threads.
    pub fn open(config: StoreConfig, io: Arc<IoEngine>) -> Result<Arc<MessageStore>, StoreError> {
        MessageStore::open_on(config, io, RealFs::shared())
    }

    /// [`MessageStore::open`] on the given file system (tests pass one with failpoints).
    pub fn open_on(
        config: StoreConfig,
        io: Arc<IoEngine>,
        fs: Arc<dyn FileSystem>,
    ) -> Result<Arc<MessageStore>, StoreError> {
        config.validate()?;
        let root = config.root_dir.clone();
        fs::ensure_dir(fs.as_ref(), &root)?;
        let lock_file = lock_root(&root)?;
        let abort_path = root.join(ABORT_FILE_NAME);
        let abnormal = abort_path.exists();
        let checkpoint_path = root.join(CHECKPOINT_FILE_NAME);
        let (checkpoint_file, checkpoint) = open_checkpoint(fs.as_ref(), &checkpoint_path)?;
        let (flush_tx, _) = watch::channel(FlushState::default());
        let deleted_topics = DeletedTopics::load(&root)?;
        let index = config
            .message_index_enable
            .then(|| {
                let dims = IndexDimensions {
                    // validate() bounded both to Java's int.
                    hash_slot_num: config.max_hash_slot_num as i32,
                    index_num: config.max_index_num as i32,
                };
                IndexService::open(&root, dims, Arc::clone(&fs))
            })
            .transpose()?;
        let (recent, writer) = Writer::with_recent_window(config.recent_records_bytes);
        let inner = Arc::new(Inner {
            commit_log: CommitLog::new(&root, config.commit_log_file_size_bytes, Arc::clone(&fs)),
            config,
            io,
            fs,
            queues: RwLock::new(QueueMap::default()),
            writer: Mutex::new(writer),
            recent,
            poisoned: AtomicBool::new(false),
            disk_full: AtomicBool::new(false),
            disk_ratios: Mutex::new(DiskRatios::default()),
            flush_tx,
            flush_lock: Mutex::new(()),
            signal: Mutex::new(Signal::default()),
            signal_cv: Condvar::new(),
            publish_cv: Condvar::new(),
            second_flusher_cv: Condvar::new(),
            second_flusher_wanted: AtomicBool::new(false),
            flush_loop_wakeups: AtomicU64::new(0),
            commit_log_flush_latency: crate::metrics::Histogram::new(),
            retention_cv: Condvar::new(),
            zero_ahead_cv: Condvar::new(),
            zero_ahead_bytes_written: AtomicU64::new(0),
            last_store_timestamp_ms: AtomicI64::new(0),
            last_checkpoint_phy_offset: AtomicI64::new(-1),
            checkpoint_file,
            checkpoint_path,
            listener: RwLock::new(None),
            retention_lock: Mutex::new(()),
            deleted_topics: Mutex::new(deleted_topics),
            index,
            index_skip_phy_offset: AtomicI64::new(-1),
            index_phy_offset: AtomicI64::new(0),
            index_thread: std::sync::OnceLock::new(),
            index_sleeping: AtomicBool::new(false),
            index_wakeups: AtomicU64::new(0),
            index_stop: AtomicBool::new(false),
            shut_down: AtomicBool::new(false),
            stats: StoreStatsService::new(crate::common::now_ms()),
            _lock_file: lock_file,
        });
        let mut recovery = inner.recover(abnormal, checkpoint)?;
        recovery.index_records_rebuilt = inner.rebuild_index(recovery.end_phy_offset)?;
        inner
            .index_phy_offset
            .store(recovery.end_phy_offset, Ordering::Release);
        // Recovery kept only what is on disk; the flush below makes it durable before any new
        // append is acknowledged.
        let max_phy_offset = inner.commit_log.max_phy_offset();
        inner
            .flush_tx
            .send_modify(|s| s.flushed_phy_offset = max_phy_offset);
        inner.flush_all()?;
        write_abort_file(inner.fs.as_ref(), &abort_path)?;
        // A broker started on a full disk refuses writes from the start.
        inner.check_disk_space();
        let threads = spawn_threads(&inner)?;
        Ok(Arc::new(MessageStore {
            inner,
            threads: Mutex::new(threads),
            recovery,
        }))
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
        // The index thread is joined; index what it left so the clean restart has nothing to
        // index again.
        self.inner.index_drain();
        self.inner.flush_all()?;
        fs::remove_file(
            self.inner.fs.as_ref(),
            &self.inner.config.root_dir.join(ABORT_FILE_NAME),
        )
    }

    fn stop_threads(&self) {
        lock(&self.inner.signal).stop = true;
        self.inner.signal_cv.notify_all();
        self.inner.second_flusher_cv.notify_all();
        self.inner.retention_cv.notify_all();
        self.inner.zero_ahead_cv.notify_all();
        self.inner.index_stop.store(true, Ordering::Release);
        self.inner.unpark_index();
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
        // No flush comes any more: the waiters hear that the store closed.
        self.inner.drop_waiters();
    }
}

/// The store's background threads: flush (and for `sync` flush the second flusher, which
/// fsyncs for the producers that came in while the flush thread's fsync runs, and the
/// zero-ahead thread), retention, and the index thread when the index is on.
fn spawn_threads(inner: &Arc<Inner>) -> Result<Vec<JoinHandle<()>>, StoreError> {
    let mut threads = vec![
        spawn_store_thread(inner, "store-flush", Inner::flush_loop)?,
        spawn_store_thread(inner, "store-retention", Inner::retention_loop)?,
    ];
    if inner.config.flush_policy == FlushPolicy::Sync {
        threads.push(spawn_store_thread(
            inner,
            "store-flush-2",
            Inner::second_flusher_loop,
        )?);
        if inner.config.zero_ahead_bytes > 0 {
            threads.push(spawn_store_thread(
                inner,
                "store-zero-ahead",
                Inner::zero_ahead_loop,
            )?);
        }
    }
    if inner.index.is_some() {
        let handle = spawn_store_thread(inner, "store-index", Inner::index_loop)?;
        // Set once: `open` spawns one index thread per store.
        let _ = inner.index_thread.set(handle.thread().clone());
        threads.push(handle);
    }
    Ok(threads)
}

/// Runs `body` on a thread named `name` that shares the store.
fn spawn_store_thread(
    inner: &Arc<Inner>,
    name: &'static str,
    body: fn(&Inner),
) -> Result<JoinHandle<()>, StoreError> {
    let inner = Arc::clone(inner);
    std::thread::Builder::new()
        .name(name.to_owned())
        .spawn(move || body(&inner))
        .map_err(|e| StoreError::io("spawn thread", name, e))
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

fn open_checkpoint(
    fs: &dyn FileSystem,
    path: &Path,
) -> Result<(File, Option<format::Checkpoint>), StoreError> {
    let existed = path.exists();
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(path)
        .map_err(|e| StoreError::io("open", path, e))?;
    if !existed {
        fs::allocate(fs, &file, path, format::CHECKPOINT_FILE_SIZE_BYTES as u64)?;
        fs.sync(&file, path, fs::SyncKind::All)?;
        if let Some(dir) = path.parent() {
            fs::sync_dir(fs, dir)?;
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

fn write_abort_file(fs: &dyn FileSystem, path: &Path) -> Result<(), StoreError> {
    let file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .open(path)
        .map_err(|e| StoreError::io("create", path, e))?;
    // Java 5.x writes the PID into the abort file.
    fs.write_at(&file, path, std::process::id().to_string().as_bytes(), 0)?;
    fs.sync(&file, path, fs::SyncKind::All)?;
    if let Some(dir) = path.parent() {
        fs::sync_dir(fs, dir)?;
    }
    Ok(())
}
