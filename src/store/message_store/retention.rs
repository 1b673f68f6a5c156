//! Retention: deletes expired CommitLog files, the ConsumeQueue files and units that only
//! pointed at them, and the index files whose last message is gone.

use std::fs::File;
use std::path::Path;
use std::time::{Duration, Instant, UNIX_EPOCH};

use super::lookup::first_offset_where;
use super::{lock, Inner};
use crate::common::now_ms;
use crate::store::consume_queue::ConsumeQueue;
use crate::store::error::StoreError;
use crate::store::format::CQ_UNIT_SIZE_BYTES;

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
            if let Err(e) = self.delete_expired_files(now_ms()) {
                tracing::error!(error = %e, "retention pass failed");
            }
        }
    }

    pub(super) fn delete_expired_files(&self, now_ms: i64) -> Result<usize, StoreError> {
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
        let min_phy_offset = self.commit_log.min_phy_offset();
        for cq in self.all_queues() {
            self.delete_queue_files_below(&cq, min_phy_offset)?;
            self.correct_min_offset_in_queue(&cq, min_phy_offset)?;
        }
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

fn modified_ms(file: &File, path: &Path) -> Result<i64, StoreError> {
    let modified = file
        .metadata()
        .and_then(|m| m.modified())
        .map_err(|e| StoreError::io("stat", path, e))?;
    Ok(modified
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64))
}
