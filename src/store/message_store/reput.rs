//! The index thread (Java `ReputMessageService` feeding `CommitLogDispatcherBuildIndex`): it
//! follows the CommitLog behind the writer and indexes each record, so the append path pays
//! no index write. The writer only wakes it (`Thread::unpark`, after the writer lock is
//! released); the thread reads the records from the offset it has indexed up to, a bounded
//! step at a time, and sleeps when it has caught up.
//!
//! A failed index write is logged and retried after [`INDEX_RETRY_DELAY_MS`] from the first
//! record not indexed (a record whose keys were indexed in part may then answer a query once;
//! queries drop duplicate offsets). A failed index fsync stops indexing until the next open,
//! whose recovery indexes again from the last durable header. Neither poisons the store: the
//! index is derived data.

use std::sync::atomic::Ordering;
use std::time::Duration;

use super::recovery::read_into;
use super::Inner;
use crate::store::error::StoreError;
use crate::store::format::{self, decode_record_head, RecordHead};
use crate::store::index_service::IndexedMessage;
use crate::store::segment;

/// Most CommitLog bytes the index thread reads in one step (a larger record is read whole).
const INDEX_STEP_MAX_BYTES: usize = 1024 * 1024;
/// How long the index thread sleeps when it has caught up and nobody wakes it.
const INDEX_IDLE_PARK_MS: u64 = 1_000;
/// How long the index thread waits after a failed index write before trying again.
pub(super) const INDEX_RETRY_DELAY_MS: u64 = 1_000;
/// Bytes of a record's TOTALSIZE and MAGICCODE, enough to tell a record from a BLANK.
const RECORD_HEAD_BYTES: usize = 8;

/// What one step of the index thread found.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum IndexStep {
    /// Everything published is indexed (or the index is off or stopped).
    CaughtUp,
    /// Records were indexed; there may be more.
    Progressed,
}

impl Inner {
    /// Wakes the index thread after an append (cheap when it is already awake).
    pub(super) fn wake_index(&self) {
        if let Some(thread) = self.index_thread.get() {
            thread.unpark();
        }
    }

    /// Java `ReputMessageService.behind`: CommitLog bytes written but not yet indexed (0 when
    /// the index is off).
    pub(super) fn index_behind_bytes(&self) -> i64 {
        if self.index.is_none() {
            return 0;
        }
        let indexed = self.index_phy_offset.load(Ordering::Acquire);
        (self.commit_log.max_phy_offset() - indexed.max(self.commit_log.min_phy_offset())).max(0)
    }

    /// The index thread: steps until it has caught up, then sleeps until woken.
    pub(super) fn index_loop(&self) {
        let mut buf = Vec::new();
        while !self.index_stop.load(Ordering::Acquire) {
            match self.index_step(&mut buf) {
                Ok(IndexStep::Progressed) => {}
                Ok(IndexStep::CaughtUp) => {
                    std::thread::park_timeout(Duration::from_millis(INDEX_IDLE_PARK_MS));
                }
                Err(e) => {
                    tracing::error!(
                        error = %e,
                        phy_offset = self.index_phy_offset.load(Ordering::Acquire),
                        retry_in_ms = INDEX_RETRY_DELAY_MS,
                        "building the message index failed; retrying"
                    );
                    std::thread::park_timeout(Duration::from_millis(INDEX_RETRY_DELAY_MS));
                }
            }
        }
    }

    /// Indexes what the thread left (shutdown, with the writer lock held and the thread
    /// joined). A failure is logged: the next open indexes those records again.
    pub(super) fn index_drain(&self) {
        let mut buf = Vec::new();
        loop {
            match self.index_step(&mut buf) {
                Ok(IndexStep::Progressed) => {}
                Ok(IndexStep::CaughtUp) => return,
                Err(e) => {
                    tracing::error!(error = %e, "indexing at shutdown failed; the next open indexes again");
                    return;
                }
            }
        }
    }

    /// Indexes the complete records of at most [`INDEX_STEP_MAX_BYTES`] from the indexed
    /// offset, within one CommitLog file, and advances the offset past each.
    pub(super) fn index_step(&self, buf: &mut Vec<u8>) -> Result<IndexStep, StoreError> {
        let Some(index) = &self.index else {
            return Ok(IndexStep::CaughtUp);
        };
        if self.index_failed.load(Ordering::Acquire) {
            return Ok(IndexStep::CaughtUp);
        }
        let end = self.commit_log.max_phy_offset();
        let from = self
            .index_phy_offset
            .load(Ordering::Acquire)
            .max(self.commit_log.min_phy_offset());
        if from >= end {
            return Ok(IndexStep::CaughtUp);
        }
        let file_size = self.commit_log.file_size_bytes();
        let segs = self.commit_log.segments().snapshot();
        let Some(seg) = segment::find_in(&segs, from, file_size as u64) else {
            return Err(StoreError::Corrupted {
                path: self.config.root_dir.clone(),
                offset: from,
                reason: "no CommitLog file holds this offset below the written end".to_owned(),
            });
        };
        let in_file = from - seg.start_offset;
        let room = file_size - in_file;
        if room < RECORD_HEAD_BYTES as i64 {
            self.index_phy_offset
                .store(seg.start_offset + file_size, Ordering::Release);
            return Ok(IndexStep::Progressed);
        }
        let len = (end - from).min(room).min(INDEX_STEP_MAX_BYTES as i64) as usize;
        read_into(self, &seg, in_file as u64, len, buf)?;
        let mut at = 0usize;
        while at + RECORD_HEAD_BYTES <= buf.len() {
            let size = match decode_record_head(&buf[at..at + RECORD_HEAD_BYTES]) {
                Ok(RecordHead::Message { total_size, .. }) if total_size > 0 => total_size as usize,
                // A BLANK filler (or the zeroed end of a file): the next file.
                _ => {
                    self.index_phy_offset
                        .store(seg.start_offset + file_size, Ordering::Release);
                    return Ok(IndexStep::Progressed);
                }
            };
            let at_phy = from + at as i64;
            if at_phy + size as i64 > end {
                break; // An HA slave's partial record: the rest comes later.
            }
            if at + size > buf.len() {
                if at > 0 {
                    break;
                }
                read_into(self, &seg, in_file as u64, size, buf)?;
            }
            let record =
                format::decode_record(&buf[at..at + size]).map_err(|e| StoreError::Corrupted {
                    path: seg.path.clone(),
                    offset: at_phy,
                    reason: format!("record below the written end: {e}"),
                })?;
            index.build_index(&IndexedMessage {
                topic: record.topic,
                properties: record.properties,
                sys_flag: record.sys_flag,
                phy_offset: record.phy_offset,
                store_timestamp_ms: record.store_timestamp_ms,
            })?;
            at += size;
            self.index_phy_offset
                .store(at_phy + size as i64, Ordering::Release);
        }
        Ok(if at == 0 {
            IndexStep::CaughtUp
        } else {
            IndexStep::Progressed
        })
    }
}
