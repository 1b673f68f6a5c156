//! Durability: group commit for `sync` flush, the periodic flush loop, the ConsumeQueue fsync
//! and checkpoint write, and poisoning (a failed fsync or write makes the store read-only; it
//! is never retried as success).

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::oneshot;

use super::group_commit::{self, FlusherState, GroupCommitBatcher, Waiter};
use super::{lock, Inner};
use crate::store::config::FlushPolicy;
use crate::store::error::StoreError;
use crate::store::format;
use crate::store::fs;

impl Inner {
    /// Group commit: resolves once the fsync covering `end_phy_offset` is done. The waiter is
    /// woken by the flush thread right after that fsync, through its own channel.
    pub(super) async fn wait_flushed(&self, end_phy_offset: i64) -> Result<(), StoreError> {
        let rx = {
            let mut signal = lock(&self.signal);
            // Under the signal lock: the flush thread publishes a new offset before it takes
            // this lock to wake the waiters below it, so a waiter added after that sees it.
            if let Some(done) = self.durable_or_failed(end_phy_offset) {
                return done;
            }
            let (tx, rx) = oneshot::channel();
            signal.waiters.push(Waiter { end_phy_offset, tx });
            signal.flush_requested = true;
            if signal.flusher.wakes_on(signal.waiters.len()) {
                // Once: the waiters after this one need not notify again.
                signal.flusher = FlusherState::Busy;
                self.signal_cv.notify_one();
            }
            rx
        };
        let timeout = Duration::from_millis(self.config.sync_flush_timeout_ms);
        match tokio::time::timeout(timeout, rx).await {
            Err(_) => Err(StoreError::FlushTimeout),
            // The store dropped the waiter without an answer: it was closed.
            Ok(Err(_)) => Err(StoreError::ShutDown),
            Ok(Ok(outcome)) => outcome,
        }
    }

    /// `Some` when nothing is left to wait for: the bytes below `end_phy_offset` are durable,
    /// or the store is read-only and never will make them so.
    fn durable_or_failed(&self, end_phy_offset: i64) -> Option<Result<(), StoreError>> {
        let state = self.flush_tx.borrow();
        if state.flushed_phy_offset >= end_phy_offset {
            return Some(Ok(()));
        }
        state.poisoned.as_deref().map(|reason| {
            Err(StoreError::Poisoned {
                reason: reason.to_owned(),
            })
        })
    }

    /// Wakes the flush thread for a group commit (if it sleeps; a busy one looks at
    /// `flush_requested` before it sleeps again).
    pub(super) fn request_flush(&self) {
        let mut signal = lock(&self.signal);
        signal.flush_requested = true;
        if signal.flusher == FlusherState::Idle {
            signal.flusher = FlusherState::Busy;
            self.signal_cv.notify_one();
        }
    }

    /// Fails every waiter: the store closes without flushing (a drop).
    pub(super) fn drop_waiters(&self) {
        let waiters = std::mem::take(&mut lock(&self.signal).waiters);
        drop(waiters);
    }

    pub(super) fn poison(&self, reason: String) {
        if self.poisoned.swap(true, Ordering::AcqRel) {
            return;
        }
        tracing::error!(%reason, "store turns read-only");
        let reason: Arc<str> = Arc::from(reason);
        self.flush_tx.send_modify(|s| {
            s.poisoned.get_or_insert(Arc::clone(&reason));
        });
        // Waiters added from now on see the poisoned state; those before it never get a flush.
        let waiters = std::mem::take(&mut lock(&self.signal).waiters);
        group_commit::fail(waiters, || StoreError::Poisoned {
            reason: reason.to_string(),
        });
    }

    fn is_poisoned(&self) -> bool {
        self.poisoned.load(Ordering::Acquire)
    }

    /// fsyncs every dirty CommitLog file and publishes the new flushed offset.
    fn flush_commit_log(&self) -> Result<CommitLogFlush, StoreError> {
        let _guard = lock(&self.flush_lock);
        self.flush_commit_log_locked()
    }

    /// fsyncs every dirty CommitLog file, publishes the new flushed offset and wakes the
    /// waiters it covers. A failed fsync poisons the store and fails every waiter.
    fn flush_commit_log_locked(&self) -> Result<CommitLogFlush, StoreError> {
        if let Some(reason) = self.flush_tx.borrow().poisoned.as_deref() {
            return Err(StoreError::Poisoned {
                reason: reason.to_owned(),
            });
        }
        let max_phy_offset = self.commit_log.max_phy_offset();
        if max_phy_offset <= self.flush_tx.borrow().flushed_phy_offset {
            return Ok(CommitLogFlush::default());
        }
        let started = Instant::now();
        for seg in self.commit_log.segments().snapshot().iter() {
            if seg.take_dirty() {
                if let Err(e) = self.fs.sync(&seg.file, &seg.path, fs::SyncKind::Data) {
                    let source = Arc::new(e);
                    // Every waiter, those beyond this fsync's bytes too: the store turns
                    // read-only, no flush will come for them.
                    // They hear of it only once the store is read-only, so a waiter that
                    // sees the failure also sees the state it left behind.
                    let waiters = std::mem::take(&mut lock(&self.signal).waiters);
                    self.poison(format!("commit log fsync failed: {source}"));
                    group_commit::fail(waiters, || StoreError::FlushFailed {
                        source: Arc::clone(&source),
                    });
                    return Err(StoreError::FlushFailed { source });
                }
            }
        }
        let fsync_time = started.elapsed();
        self.commit_log_flush_latency.observe(fsync_time);
        self.flush_tx
            .send_modify(|s| s.flushed_phy_offset = s.flushed_phy_offset.max(max_phy_offset));
        let covered = group_commit::take_covered(&mut lock(&self.signal).waiters, max_phy_offset);
        let woken = covered.len();
        group_commit::complete(covered);
        Ok(CommitLogFlush {
            fsync_time: Some(fsync_time),
            woken,
        })
    }

    /// fsyncs the CommitLog, every dirty ConsumeQueue file, then writes the checkpoint.
    pub(super) fn flush_all(&self) -> Result<(), StoreError> {
        let _guard = lock(&self.flush_lock);
        // Read before the fsyncs: every unit for records below it was written before it was
        // published, so the fsyncs below cover it.
        let dispatched_phy_offset = self.commit_log.max_phy_offset();
        let timestamp = self.last_store_timestamp_ms.load(Ordering::Acquire);
        self.flush_commit_log_locked()?;
        self.flush_consume_queues()?;
        self.flush_index();
        if self.last_checkpoint_phy_offset.load(Ordering::Acquire) == dispatched_phy_offset {
            return Ok(());
        }
        self.write_checkpoint(dispatched_phy_offset, timestamp)
    }

    fn flush_consume_queues(&self) -> Result<(), StoreError> {
        // A new queue's files and directories are made durable here (see
        // `ConsumeQueue::sync_dirty`); each directory once per flush.
        let mut synced_dirs = std::collections::HashSet::new();
        for cq in self.all_queues() {
            if let Err(e) = cq.sync_dirty(&mut synced_dirs) {
                self.poison(format!("consume queue fsync failed: {e}"));
                return Err(e);
            }
        }
        Ok(())
    }

    /// Writes the index headers and fsyncs the index files. The index is derived data that
    /// the CommitLog rebuilds, so a failure does not poison the store. It is not retried as
    /// such either (a second fsync could report pages the kernel dropped as durable): the
    /// index thread, woken here, sets the file back to its last durable header and indexes
    /// again from there, writing those keys again for the next flush.
    fn flush_index(&self) {
        if let Some(index) = &self.index {
            if let Err(e) = index.flush() {
                tracing::error!(
                    error = %e,
                    "index flush failed; the index is built again from its last durable flush"
                );
                self.wake_index();
            }
        }
    }

    /// Records that everything below `dispatched_phy_offset` is durable, CommitLog and units.
    fn write_checkpoint(
        &self,
        dispatched_phy_offset: i64,
        timestamp_ms: i64,
    ) -> Result<(), StoreError> {
        let checkpoint = format::Checkpoint {
            physic_msg_timestamp_ms: timestamp_ms,
            logics_msg_timestamp_ms: timestamp_ms,
            index_msg_timestamp_ms: 0,
            flushed_phy_offset: dispatched_phy_offset,
            cq_flushed_phy_offset: dispatched_phy_offset,
        };
        let bytes = format::encode_checkpoint(&checkpoint);
        let written = self
            .fs
            .write_at(&self.checkpoint_file, &self.checkpoint_path, &bytes, 0)
            .and_then(|()| {
                self.fs.sync(
                    &self.checkpoint_file,
                    &self.checkpoint_path,
                    fs::SyncKind::Data,
                )
            });
        if let Err(e) = written {
            self.poison(format!("checkpoint write failed: {e}"));
            return Err(e);
        }
        self.last_checkpoint_phy_offset
            .store(dispatched_phy_offset, Ordering::Release);
        Ok(())
    }

    /// The flush thread: CommitLog fsyncs on request (group commit) or on the async timer, and
    /// the ConsumeQueue fsync with the checkpoint every `flush_consume_queue_interval_ms`.
    pub(super) fn flush_loop(&self) {
        let cq_interval = Duration::from_millis(self.config.flush_consume_queue_interval_ms);
        let cl_interval = Duration::from_millis(self.config.flush_interval_ms);
        let mut last_cq_flush = Instant::now();
        let mut last_cl_flush = Instant::now();
        let mut batcher = GroupCommitBatcher::default();
        loop {
            let wait = match self.config.flush_policy {
                FlushPolicy::Sync => cq_interval.saturating_sub(last_cq_flush.elapsed()),
                FlushPolicy::Async => cl_interval
                    .saturating_sub(last_cl_flush.elapsed())
                    .min(cq_interval.saturating_sub(last_cq_flush.elapsed())),
            };
            let Some(requested) = self.wait_for_request(wait, &batcher) else {
                return;
            };
            self.flush_loop_wakeups.fetch_add(1, Ordering::Relaxed);
            if self.is_poisoned() {
                // Nothing can be made durable any more; wait for shutdown. The flushes count as
                // done, so the next wait is a whole interval and not zero: without this the
                // thread spun on a flush that was due and would never run.
                last_cl_flush = Instant::now();
                last_cq_flush = Instant::now();
                continue;
            }
            let cl_due = last_cl_flush.elapsed() >= cl_interval;
            if requested || cl_due {
                last_cl_flush = Instant::now();
                match self.flush_commit_log() {
                    Ok(CommitLogFlush {
                        fsync_time: Some(t),
                        woken,
                    }) => batcher.observe(t, woken),
                    Ok(_) => {}
                    Err(e) => tracing::error!(error = %e, "commit log flush failed"),
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

    /// Sleeps until a flush is requested or `wait` passes; then, when producers wait but fewer
    /// than an fsync usually covers, gathers more for a moment ([`GroupCommitBatcher::plan`]).
    /// Returns whether a flush was requested, `None` on stop. A request that came in during the
    /// last fsync is seen here at once: the next fsync starts as soon as the previous one ends.
    fn wait_for_request(&self, wait: Duration, batcher: &GroupCommitBatcher) -> Option<bool> {
        let mut signal = lock(&self.signal);
        if !signal.flush_requested && !signal.stop {
            signal.flusher = FlusherState::Idle;
            signal = self
                .signal_cv
                .wait_timeout(signal, wait)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
        if let Some(gather) = batcher.plan(signal.waiters.len()) {
            let deadline = Instant::now() + gather.max_wait;
            signal.flusher = FlusherState::Gathering {
                target: gather.target,
            };
            while signal.waiters.len() < gather.target && !signal.stop {
                let left = deadline.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    break;
                }
                signal = self
                    .signal_cv
                    .wait_timeout(signal, left)
                    .unwrap_or_else(|e| e.into_inner())
                    .0;
            }
        }
        signal.flusher = FlusherState::Busy;
        if signal.stop {
            return None;
        }
        Some(std::mem::take(&mut signal.flush_requested))
    }
}

/// What one CommitLog flush did: the fsync time (`None` when nothing was dirty) and the
/// waiters it woke.
#[derive(Debug, Default)]
struct CommitLogFlush {
    fsync_time: Option<Duration>,
    woken: usize,
}
