//! Retention: deletes expired CommitLog files, the ConsumeQueue files and units that only
//! pointed at them, and the index files whose last message is gone; the ConsumeQueues of a deleted
//! topic; and the disk guard (Java `CleanCommitLogService.isSpaceToDelete`).
//!
//! The disk guard measures the used share of the disks holding the CommitLog and the
//! ConsumeQueues (through the store's `FileSystem`, so tests can report any usage) once per
//! pass, CommitLog disk first, as Java:
//! - above `disk_space_warning_level_ratio_percent` (90): the disk is full, appends are refused
//!   with [`StoreError::DiskFull`] (pulls go on), and the pass cleans forcibly;
//! - above `disk_space_clean_forcibly_ratio_percent` (85): the pass cleans forcibly (the
//!   oldest CommitLog files, never the last, at most `delete_files_batch_max`, expired or not)
//!   when `clean_file_forcibly_enabled`; a full disk stays full;
//! - otherwise the disk is not full any more: appends come back by themselves.

use std::fs::File;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant, UNIX_EPOCH};

use std::sync::atomic::Ordering;

use super::lookup::first_offset_where;
use super::{lock, read_guard, write_guard, DiskRatios, Inner};
use crate::common::now_ms;
use crate::store::consume_queue::ConsumeQueue;
use crate::store::error::StoreError;
use crate::store::format::CQ_UNIT_SIZE_BYTES;
use crate::store::fs;

impl Inner {
    /// The retention thread: one pass every `delete_check_interval_ms` until the store stops.
    pub(super) fn retention_loop(&self) {
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
            if let Err(e) = self.clean_files_periodically(now_ms()) {
                tracing::error!(error = %e, "retention pass failed");
            }
        }
    }

    /// Java `deleteTopics`: forgets the ConsumeQueues of `topic` and deletes their files; the
    /// CommitLog keeps the records. Taken under the writer lock, so no append is placing a
    /// unit in them meanwhile; readers holding a queue finish on the unlinked files. Returns
    /// the number of queues removed.
    pub(super) fn delete_topic(&self, topic: &str) -> Result<usize, StoreError> {
        let _writer = lock(&self.writer);
        if !read_guard(&self.queues).contains_key(topic) {
            return Ok(0);
        }
        // The tombstone is durable before any file goes, so a crash in between leaves the
        // queues for recovery to drop (see `drop_deleted_queues`).
        lock(&self.deleted_topics).insert(
            topic,
            self.commit_log.max_phy_offset(),
            self.commit_log.min_phy_offset(),
            &*self.fs,
        )?;
        let Some(removed) = write_guard(&self.queues).remove(topic) else {
            return Ok(0);
        };
        for cq in removed.values() {
            // A flush holding the queue must not write its waiting units into a new file.
            cq.discard_tail();
            cq.segments().remove_front(cq.segments().len())?;
        }
        let dir = self.cq_root().join(topic);
        match std::fs::remove_dir_all(&dir) {
            Ok(()) => fs::sync_dir(&*self.fs, &self.cq_root())?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(StoreError::io("remove dir", dir, e)),
        }
        Ok(removed.len())
    }

    /// At open, before the scan: drops the queues of a deleted topic that still start below
    /// its tombstone (the process stopped between the tombstone and the file removal).
    /// Queues of a topic created again after its deletion start at or above it and stay.
    pub(super) fn drop_deleted_queues(&self) -> Result<(), StoreError> {
        let tombstones = lock(&self.deleted_topics).topics();
        for (topic, below) in tombstones {
            let queues: Vec<Arc<ConsumeQueue>> = read_guard(&self.queues)
                .get(&topic)
                .map(|by_id| by_id.values().cloned().collect())
                .unwrap_or_default();
            for cq in queues {
                let first = cq.read_unit(&self.io, cq.min_offset_in_queue())?;
                if first.is_none_or(|u| u.phy_offset < below) {
                    cq.segments().remove_front(cq.segments().len())?;
                    if let Some(by_id) = write_guard(&self.queues).get_mut(&topic) {
                        by_id.remove(&cq.queue_id);
                    }
                }
            }
            let mut queues = write_guard(&self.queues);
            if queues.get(&topic).is_some_and(|by_id| by_id.is_empty()) {
                queues.remove(&topic);
                drop(queues);
                let dir = self.cq_root().join(&topic);
                match std::fs::remove_dir_all(&dir) {
                    Ok(()) => fs::sync_dir(&*self.fs, &self.cq_root())?,
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                    Err(e) => return Err(StoreError::io("remove dir", dir, e)),
                }
            }
        }
        Ok(())
    }

    pub(super) fn clean_files_periodically(&self, now_ms: i64) -> Result<usize, StoreError> {
        let clean_immediately = self.check_disk_space();
        let forcibly = clean_immediately && self.config.clean_file_forcibly_enabled;
        let deleted = self.delete_files(now_ms, forcibly)?;
        if clean_immediately && deleted == 0 {
            tracing::warn!("disk space will be full soon, but delete file failed.");
        }
        Ok(deleted)
    }

    /// Deletes expired CommitLog files, or with `forcibly` the oldest ones whether expired or
    /// not (Java `deleteExpiredFile` with `cleanImmediately`).
    pub(super) fn delete_files(&self, now_ms: i64, forcibly: bool) -> Result<usize, StoreError> {
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
            if !forcibly && modified_ms.saturating_add(reserved_ms) > now_ms {
                break;
            }
            expired += 1;
        }
        if forcibly && expired > 0 {
            tracing::warn!(
                files = expired,
                disk = %self.disk_util(),
                "disk space above the clean-forcibly ratio: deleting the oldest commit log \
                 files whether they expired or not"
            );
        }
        if expired == 0 {
            return Ok(0);
        }
        self.commit_log.segments().remove_front(expired)?;
        let min_phy_offset = self.commit_log.min_phy_offset();
        for cq in self.all_queues() {
            self.delete_queue_files_below(&cq, min_phy_offset)?;
            self.correct_min_offset_in_queue(&cq, min_phy_offset)?;
        }
        lock(&self.deleted_topics).prune(min_phy_offset, &*self.fs)?;
        if let Some(index) = &self.index {
            index.delete_expired(min_phy_offset)?;
        }
        Ok(expired)
    }

    /// Deletes the queue's files (never the last) whose last unit points below `min_phy_offset`.
    fn delete_queue_files_below(
        &self,
        cq: &ConsumeQueue,
        min_phy_offset: i64,
    ) -> Result<(), StoreError> {
        let segments = cq.segments().snapshot();
        let units = cq.units_per_file();
        let mut count = 0;
        for seg in segments.iter().take(segments.len().saturating_sub(1)) {
            let last_queue_offset = seg.start_offset / CQ_UNIT_SIZE_BYTES as i64 + units - 1;
            match cq.read_unit(&self.io, last_queue_offset)? {
                Some(unit) if unit.phy_offset < min_phy_offset => count += 1,
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
    pub(super) fn correct_min_offset_in_queue(
        &self,
        cq: &ConsumeQueue,
        min_phy_offset: i64,
    ) -> Result<(), StoreError> {
        let max = cq.max_offset_in_queue();
        let Some(first) = cq.segments().first() else {
            cq.set_min_offset_in_queue(max);
            return Ok(());
        };
        let from =
            (first.start_offset / CQ_UNIT_SIZE_BYTES as i64).max(cq.min_offset_in_queue().min(max));
        let first_live = first_offset_where(from, max, |queue_offset| {
            let live = match cq.read_unit(&self.io, queue_offset)? {
                Some(u) => u.size != i32::MAX && u.phy_offset >= min_phy_offset,
                None => false,
            };
            Ok(live)
        })?;
        cq.set_min_offset_in_queue(first_live);
        Ok(())
    }
}

impl Inner {
    /// Measures the disks and sets or clears the disk-full state. `true`: clean immediately.
    pub(super) fn check_disk_space(&self) -> bool {
        let cl_dir = self.commit_log.segments().dir().to_path_buf();
        let ratios = DiskRatios {
            commit_log: self.used_ratio(&cl_dir),
            consume_queue: self.used_ratio(&self.cq_root()),
        };
        *lock(&self.disk_ratios) = ratios;
        let warning = self.config.disk_space_warning_level_ratio_percent as f64 / 100.0;
        let forcibly = self.config.disk_space_clean_forcibly_ratio_percent as f64 / 100.0;
        for (disk, ratio) in [
            ("commit log", ratios.commit_log),
            ("consume queue", ratios.consume_queue),
        ] {
            if ratio > warning {
                if !self.disk_full.swap(true, Ordering::AcqRel) {
                    tracing::error!(
                        disk,
                        used = ratio,
                        "disk maybe full soon, so mark disk full: sends are refused until \
                         space returns"
                    );
                }
                return true;
            }
            if ratio > forcibly {
                return true;
            }
            if self.disk_full.swap(false, Ordering::AcqRel) {
                tracing::info!(disk, used = ratio, "disk space OK, so mark disk ok");
            }
        }
        let max_used = self.config.disk_max_used_space_ratio_percent as f64 / 100.0;
        if ratios.commit_log > max_used || ratios.consume_queue > max_used {
            tracing::debug!(
                disk = %self.disk_util(),
                "disk above the max used space ratio, so reclaim space"
            );
        }
        false
    }

    /// Java `getDiskPartitionSpaceUsedPercent` of `path`, or of the root directory while
    /// `path` does not exist yet (Java creates both directories at start); -1 when it cannot
    /// be measured.
    fn used_ratio(&self, path: &Path) -> f64 {
        let path = if path.exists() {
            path
        } else {
            self.config.root_dir.as_path()
        };
        match self.fs.disk_usage(path) {
            Ok(usage) => usage.used_ratio(),
            Err(e) => {
                tracing::warn!(error = %e, "measuring disk space failed");
                -1.0
            }
        }
    }

    /// Java `diskUtil()`: the used ratios of the last measurement. ringmq keeps no index
    /// files, so INDEX is Java's value for a path that does not exist.
    pub(super) fn disk_util(&self) -> String {
        let ratios = *lock(&self.disk_ratios);
        format!(
            "CL: {:5.2} CQ: {:5.2} INDEX: {:5.2}",
            ratios.commit_log, ratios.consume_queue, -1.0
        )
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
