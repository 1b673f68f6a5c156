//! Durability: group commit for `sync` flush, the periodic flush loop, the ConsumeQueue fsync
//! and checkpoint write, and poisoning (a failed fsync or write makes the store read-only; it
//! is never retried as success).

use std::fs::{File, OpenOptions};
use std::os::fd::AsRawFd;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use tokio::sync::oneshot;

use super::group_commit::{self, FlusherState, GroupCommitBatcher, Waiter};
use super::{lock, Inner};
use crate::store::config::FlushPolicy;
use crate::store::error::StoreError;
use crate::store::format;
use crate::store::fs;
use crate::store::segment::Segment;

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
            signal.max_waiter_end_phy_offset = signal.max_waiter_end_phy_offset.max(end_phy_offset);
            if signal.flusher.wakes_on(signal.waiters.len()) {
                // Once: the waiters after this one need not notify again.
                signal.flusher = FlusherState::Busy;
                self.signal_cv.notify_one();
            } else if signal.second_flusher_idle
                && self.second_flusher_wanted.load(Ordering::Relaxed)
                && signal.fsyncs.second_flusher_helps(end_phy_offset)
            {
                signal.second_flusher_idle = false;
                self.second_flusher_cv.notify_one();
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

    /// The flush thread's group commit: fsyncs the CommitLog unless an fsync already started
    /// (the second flusher's) covers everything written.
    pub(super) fn flush_commit_log(&self) -> Result<CommitLogFlush, StoreError> {
        let _guard = lock(&self.flush_lock);
        self.fsync_commit_log(&mut FsyncFiles::Segments, Coverage::UnlessStarted)
    }

    /// fsyncs the CommitLog (below): every byte written before it is durable when it returns.
    fn flush_commit_log_locked(&self) -> Result<CommitLogFlush, StoreError> {
        self.fsync_commit_log(&mut FsyncFiles::Segments, Coverage::Always)
    }

    /// fsyncs every CommitLog file holding bytes not yet durable (and any other dirty one),
    /// then, once every fsync started before it is published, publishes the new flushed offset
    /// and wakes the waiters it covers. A failed fsync poisons the store and fails every
    /// waiter; an fsync that ends after an earlier one failed vouches for nothing.
    fn fsync_commit_log(
        &self,
        files: &mut FsyncFiles<'_>,
        coverage: Coverage,
    ) -> Result<CommitLogFlush, StoreError> {
        if let Some(reason) = self.flush_tx.borrow().poisoned.as_deref() {
            return Err(StoreError::Poisoned {
                reason: reason.to_owned(),
            });
        }
        let (ticket, from_phy_offset, max_phy_offset) = {
            let mut signal = lock(&self.signal);
            let max_phy_offset = self.commit_log.max_phy_offset();
            let flushed = self.flush_tx.borrow().flushed_phy_offset;
            let started_covers =
                coverage == Coverage::UnlessStarted && signal.fsyncs.covers(max_phy_offset);
            if max_phy_offset <= flushed || started_covers {
                return Ok(CommitLogFlush::default());
            }
            (signal.fsyncs.start(max_phy_offset), flushed, max_phy_offset)
        };
        let started = Instant::now();
        let synced = self.fsync_segments(files, from_phy_offset, max_phy_offset);
        let fsync_time = started.elapsed();
        self.publish_fsync(ticket, max_phy_offset, synced, fsync_time)
    }

    /// fsyncs each CommitLog segment that is dirty or holds bytes in `[from, to)`.
    fn fsync_segments(
        &self,
        files: &mut FsyncFiles<'_>,
        from_phy_offset: i64,
        to_phy_offset: i64,
    ) -> Result<(), StoreError> {
        let file_size = self.commit_log.file_size_bytes();
        for seg in self.commit_log.segments().snapshot().iter() {
            let holds_range =
                seg.start_offset < to_phy_offset && seg.start_offset + file_size > from_phy_offset;
            // Both tests run: the dirty flag is cleared for the next flush either way.
            if seg.take_dirty() | holds_range {
                let file = files.file_for(seg)?;
                self.fs.sync(file, &seg.path, fs::SyncKind::Data)?;
            }
        }
        Ok(())
    }

    /// Publishes the fsync of `ticket` in its turn (see [`group_commit::FsyncOrder`]).
    fn publish_fsync(
        &self,
        ticket: u64,
        max_phy_offset: i64,
        synced: Result<(), StoreError>,
        fsync_time: Duration,
    ) -> Result<CommitLogFlush, StoreError> {
        let mut signal = lock(&self.signal);
        while !signal.fsyncs.is_turn(ticket) {
            signal = self
                .publish_cv
                .wait(signal)
                .unwrap_or_else(|e| e.into_inner());
        }
        let outcome = match synced {
            Err(e) => {
                let source = Arc::new(e);
                // Every waiter, those beyond this fsync's bytes too: the store turns
                // read-only, no flush will come for them. They hear of it only once the store
                // is read-only, so a waiter that sees the failure also sees the state it left
                // behind; and the fsyncs after this one see it before their turn.
                let waiters = std::mem::take(&mut signal.waiters);
                drop(signal);
                self.poison(format!("commit log fsync failed: {source}"));
                group_commit::fail(waiters, || StoreError::FlushFailed {
                    source: Arc::clone(&source),
                });
                signal = lock(&self.signal);
                Err(StoreError::FlushFailed { source })
            }
            Ok(()) => match self.flush_tx.borrow().poisoned.as_deref() {
                // An earlier fsync failed: this one's success says nothing about the pages
                // that one lost.
                Some(reason) => Err(StoreError::Poisoned {
                    reason: reason.to_owned(),
                }),
                None => Ok(()),
            },
        };
        let covered = if outcome.is_ok() {
            self.commit_log_flush_latency.observe(fsync_time);
            self.flush_tx
                .send_modify(|s| s.flushed_phy_offset = s.flushed_phy_offset.max(max_phy_offset));
            group_commit::take_covered(&mut signal.waiters, max_phy_offset)
        } else {
            Vec::new()
        };
        signal.fsyncs.published(ticket);
        drop(signal);
        self.publish_cv.notify_all();
        outcome?;
        let woken = covered.len();
        group_commit::complete(covered);
        Ok(CommitLogFlush {
            fsync_time: Some(fsync_time),
            woken,
        })
    }

    /// The second flusher (`sync` flush): while the flush thread's fsync runs, it fsyncs for
    /// the producers that fsync does not cover, so they need not wait for it to end.
    pub(super) fn second_flusher_loop(&self) {
        let mut own = OwnFiles::default();
        loop {
            {
                let mut signal = lock(&self.signal);
                loop {
                    if signal.stop {
                        return;
                    }
                    if !self.is_poisoned()
                        && self.second_flusher_wanted.load(Ordering::Relaxed)
                        && signal
                            .fsyncs
                            .second_flusher_helps(signal.max_waiter_end_phy_offset)
                    {
                        break;
                    }
                    signal.second_flusher_idle = true;
                    signal = self
                        .second_flusher_cv
                        .wait(signal)
                        .unwrap_or_else(|e| e.into_inner());
                }
                signal.second_flusher_idle = false;
            }
            own.forget_removed();
            if let Err(e) =
                self.fsync_commit_log(&mut FsyncFiles::Own(&mut own), Coverage::UnlessStarted)
            {
                tracing::error!(error = %e, "commit log flush failed");
            }
        }
    }

    /// fsyncs the CommitLog, every dirty ConsumeQueue file, then writes the checkpoint.
    pub(super) fn flush_all(&self) -> Result<(), StoreError> {
        self.flush_with_least_pages(0)
    }

    /// The periodic flush between two thorough ones (Java `FlushConsumeQueueService` with
    /// `flushConsumeQueueLeastPages`): the CommitLog, the ConsumeQueues whose end crossed at
    /// least `flush_consume_queue_least_pages` pages since their last fsync, and the index.
    /// With thousands of queues each growing by a few units a second, this is what keeps the
    /// flush thread from an fsync per queue per second (docs/BENCHMARKS.md, "ConsumeQueue
    /// flush: Java's least pages").
    pub(super) fn flush_consume_queues_least_pages(&self) -> Result<(), StoreError> {
        self.flush_with_least_pages(self.config.flush_consume_queue_least_pages)
    }

    /// fsyncs the CommitLog, the ConsumeQueues `least_pages` selects
    /// ([`ConsumeQueue::sync_dirty`](crate::store::consume_queue::ConsumeQueue::sync_dirty)) and
    /// the index. Only a flush that synced every dirty queue (`least_pages` 0) writes the
    /// checkpoint: it vouches for every unit below its offset, so recovery re-dispatches the
    /// units a least-pages flush skipped from the CommitLog.
    fn flush_with_least_pages(&self, least_pages: u64) -> Result<(), StoreError> {
        let _guard = lock(&self.flush_lock);
        // Read before the fsyncs: every unit for records below it was written before it was
        // published, so the fsyncs below cover it.
        let dispatched_phy_offset = self.commit_log.max_phy_offset();
        let timestamp = self.last_store_timestamp_ms.load(Ordering::Acquire);
        self.flush_commit_log_locked()?;
        let queues = self.flush_consume_queues(least_pages);
        // A queue whose units could not be written fails this flush, not the index's.
        self.flush_index();
        queues?;
        if least_pages > 0
            || self.last_checkpoint_phy_offset.load(Ordering::Acquire) == dispatched_phy_offset
        {
            return Ok(());
        }
        self.write_checkpoint(dispatched_phy_offset, timestamp)
    }

    /// Writes every queue's waiting units (its tail, see
    /// [`ConsumeQueue::stage_units`](crate::store::consume_queue::ConsumeQueue::stage_units)),
    /// then fsyncs the queues `least_pages` selects. A failed write keeps that queue's units in
    /// memory for the next flush (a write that failed dropped no page): the queue is not
    /// fsynced and the error is returned, so no checkpoint counts its units. A failed fsync
    /// poisons the store.
    fn flush_consume_queues(&self, least_pages: u64) -> Result<(), StoreError> {
        // A new queue's files and directories are made durable here (see
        // `ConsumeQueue::sync_dirty`); each directory once per flush.
        let mut synced_dirs = std::collections::HashSet::new();
        let mut write_failed = None;
        for cq in self.all_queues() {
            if let Err(e) = cq.write_tail() {
                tracing::error!(
                    error = %e,
                    topic = cq.topic,
                    queue_id = cq.queue_id,
                    "writing consume queue units failed; they stay in memory for the next flush"
                );
                write_failed.get_or_insert(e);
                continue;
            }
            if let Err(e) = cq.sync_dirty(least_pages, &mut synced_dirs) {
                self.poison(format!("consume queue fsync failed: {e}"));
                return Err(e);
            }
        }
        write_failed.map_or(Ok(()), Err)
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
                self.unpark_index();
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
        let thorough_interval =
            Duration::from_millis(self.config.flush_consume_queue_thorough_interval_ms);
        // As Java's service: the first flush is a thorough one.
        let mut last_thorough_flush = Instant::now()
            .checked_sub(thorough_interval)
            .unwrap_or_else(Instant::now);
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
                    }) => {
                        batcher.observe(t, woken);
                        self.second_flusher_wanted
                            .store(batcher.wants_second_flusher(), Ordering::Relaxed);
                    }
                    Ok(_) => {}
                    Err(e) => tracing::error!(error = %e, "commit log flush failed"),
                }
            }
            if last_cq_flush.elapsed() >= cq_interval {
                last_cq_flush = Instant::now();
                let flushed = if last_thorough_flush.elapsed() >= thorough_interval {
                    last_thorough_flush = Instant::now();
                    self.flush_all()
                } else {
                    self.flush_consume_queues_least_pages()
                };
                if let Err(e) = flushed {
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

/// Whether a CommitLog flush may leave its bytes to an fsync already started.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Coverage {
    /// Group commit: nothing to do when a started fsync covers every written byte.
    UnlessStarted,
    /// Flush before a checkpoint or on request: its own fsync.
    Always,
}

/// Which file handles an fsync goes through.
enum FsyncFiles<'a> {
    /// The segments' own (the flush thread, and any flush under the flush lock).
    Segments,
    /// The second flusher's.
    Own(&'a mut OwnFiles),
}

impl FsyncFiles<'_> {
    fn file_for<'s>(&'s mut self, seg: &'s Arc<Segment>) -> Result<&'s File, StoreError> {
        match self {
            FsyncFiles::Segments => Ok(&seg.file),
            FsyncFiles::Own(own) => own.file_for(seg),
        }
    }
}

/// The second flusher's own open file descriptions of the CommitLog segments. Linux reports
/// a writeback error once per open file description: two fsyncs running at once through the
/// same one could each hear a different part of the news, the earlier "success" while the
/// later took the error meant for its pages too. Through its own description each fsync hears
/// every error since it last looked. At most one per segment still in the list.
#[derive(Default)]
struct OwnFiles {
    files: Vec<(Weak<Segment>, File)>,
}

impl OwnFiles {
    fn file_for(&mut self, seg: &Arc<Segment>) -> Result<&File, StoreError> {
        let at = match self
            .files
            .iter()
            .position(|(s, _)| std::ptr::eq(s.as_ptr(), Arc::as_ptr(seg)))
        {
            Some(at) => at,
            None => {
                // A new open file description of the same file (also when it was unlinked).
                let fd_path = format!("/proc/self/fd/{}", seg.file.as_raw_fd());
                let file = OpenOptions::new()
                    .read(true)
                    .open(&fd_path)
                    .map_err(|e| StoreError::io("open", &seg.path, e))?;
                self.files.push((Arc::downgrade(seg), file));
                self.files.len() - 1
            }
        };
        Ok(&self.files[at].1)
    }

    /// Closes the descriptions of segments the store let go of.
    fn forget_removed(&mut self) {
        self.files.retain(|(s, _)| s.strong_count() > 0);
    }
}

/// What one CommitLog flush did: the fsync time (`None` when nothing was dirty) and the
/// waiters it woke.
#[derive(Debug, Default)]
pub(super) struct CommitLogFlush {
    fsync_time: Option<Duration>,
    woken: usize,
}
