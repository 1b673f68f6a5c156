//! The index thread (Java `ReputMessageService` feeding `CommitLogDispatcherBuildIndex`): it
//! follows the CommitLog behind the writer and indexes each record, so the append path pays
//! no index write. The writer only wakes it (`Thread::unpark`, after the writer lock is
//! released, and only once it sleeps); the thread reads the records from the offset it has
//! indexed up to, a bounded step at a time, and when it has caught up naps [`INDEX_NAP`], then
//! sleeps until woken.
//!
//! Each step's keys are written at its end with one write ([`IndexService::publish`]). A
//! failed index read or file creation is logged and retried after [`INDEX_RETRY_DELAY_MS`]
//! from the first record not indexed (a record whose keys were indexed in part may then answer
//! a query once; queries drop duplicate offsets). A failed index write or flush (entries,
//! slots, header or fsync, here at a step's end, at a roll to a new file or in the flush
//! thread) is not retried as such: after the same delay the next step sets the file back to
//! its last durable header and indexes again from there, so every key since is written again
//! before the next fsync, as recovery does after a crash. Neither poisons the store: the index
//! is derived data, and sends and pulls go on.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use super::recovery::read_into;
use super::Inner;
use crate::store::error::StoreError;
use crate::store::format::{self, decode_record_head, RecordHead};
use crate::store::index_service::{IndexService, IndexedMessage};
use crate::store::segment::{self, Segment};

/// Most CommitLog bytes the index thread reads in one step (a larger record is read whole).
const INDEX_STEP_MAX_BYTES: usize = 1024 * 1024;
/// How long the index thread sleeps when it has caught up and nobody wakes it.
const INDEX_IDLE_PARK_MS: u64 = 1_000;
/// After catching up, the index thread naps this long before it sleeps until woken, and
/// appends during the nap do not wake it (Java's `ReputMessageService` sleeps 1 ms between its
/// passes): under a steady load it wakes about once a nap, not once an append, which on a
/// small machine is a thread switch per message saved.
const INDEX_NAP: Duration = Duration::from_millis(1);
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
    /// Wakes the index thread after an append, if it sleeps until woken (in its nap it
    /// looks again by itself).
    pub(super) fn wake_index(&self) {
        // Pairs with the fence in `index_sleep`: either the thread sees this append's offset
        // before it sleeps, or this sees it asleep.
        std::sync::atomic::fence(Ordering::SeqCst);
        if self.index_sleeping.load(Ordering::Relaxed) {
            self.index_wakeups.fetch_add(1, Ordering::Relaxed);
            self.unpark_index();
        }
    }

    /// Wakes the index thread whatever it does (a stop, a failed index flush).
    pub(super) fn unpark_index(&self) {
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
        // Whether the thread napped since its last step that indexed something.
        let mut napped = false;
        while !self.index_stop.load(Ordering::Acquire) {
            match self.index_step(&mut buf) {
                Ok(IndexStep::Progressed) => napped = false,
                Ok(IndexStep::CaughtUp) if napped => {
                    self.index_sleep();
                    napped = false;
                }
                Ok(IndexStep::CaughtUp) => {
                    std::thread::sleep(INDEX_NAP);
                    napped = true;
                }
                Err(e) => {
                    tracing::error!(
                        error = %e,
                        phy_offset = self.index_phy_offset.load(Ordering::Acquire),
                        retry_in_ms = INDEX_RETRY_DELAY_MS,
                        "building the message index failed; retrying"
                    );
                    self.index_retry_wait();
                }
            }
        }
    }

    /// Sleeps until an append wakes it (or [`INDEX_IDLE_PARK_MS`] passes), unless a record
    /// was published since the last step.
    fn index_sleep(&self) {
        self.index_sleeping.store(true, Ordering::Relaxed);
        // Pairs with the fence in `wake_index`.
        std::sync::atomic::fence(Ordering::SeqCst);
        if self.index_behind_bytes() == 0 && !self.index_stop.load(Ordering::Acquire) {
            std::thread::park_timeout(Duration::from_millis(INDEX_IDLE_PARK_MS));
        }
        self.index_sleeping.store(false, Ordering::Relaxed);
    }

    /// Sleeps [`INDEX_RETRY_DELAY_MS`] whole: the wake-ups of appends in the meantime do not
    /// shorten it (a failing disk is retried once a delay, not once a send); a stop does.
    fn index_retry_wait(&self) {
        let deadline = Instant::now() + Duration::from_millis(INDEX_RETRY_DELAY_MS);
        while !self.index_stop.load(Ordering::Acquire) {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return;
            }
            std::thread::park_timeout(left);
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
        self.resume_after_failed_flush(index)?;
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
        // Records appended since the last step are usually still in memory.
        if !self.recent.copy_from(from, len, buf) {
            read_into(self, &seg, in_file as u64, len, buf)?;
        }
        let step = self.index_records(index, &seg, (from, end), buf)?;
        index.publish()?;
        Ok(step)
    }

    /// Moves the indexed offset back to the end of the last durable index header when an
    /// index flush failed (see the module docs).
    fn resume_after_failed_flush(&self, index: &IndexService) -> Result<(), StoreError> {
        let Some((durable_end, indexed_whole)) = index.rewind_after_failed_flush()? else {
            return Ok(());
        };
        let from = durable_end.max(self.commit_log.min_phy_offset());
        let skip = if indexed_whole && from == durable_end {
            durable_end
        } else {
            -1
        };
        tracing::warn!(
            root = %self.config.root_dir.display(),
            phy_offset = from,
            was_at = self.index_phy_offset.load(Ordering::Acquire),
            "indexing again from the last durable index flush"
        );
        self.index_skip_phy_offset.store(skip, Ordering::Release);
        self.index_phy_offset.store(from, Ordering::Release);
        Ok(())
    }

    /// Indexes the whole records in `buf`, read from `seg` at the CommitLog offset `from`,
    /// below `end`, and advances the indexed offset past each.
    fn index_records(
        &self,
        index: &IndexService,
        seg: &Segment,
        (from, end): (i64, i64),
        buf: &mut Vec<u8>,
    ) -> Result<IndexStep, StoreError> {
        let file_size = self.commit_log.file_size_bytes();
        let in_file = from - seg.start_offset;
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
                read_into(self, seg, in_file as u64, size, buf)?;
            }
            let record =
                format::decode_record(&buf[at..at + size]).map_err(|e| StoreError::Corrupted {
                    path: seg.path.clone(),
                    offset: at_phy,
                    reason: format!("record below the written end: {e}"),
                })?;
            if self.index_skip_phy_offset.load(Ordering::Acquire) == at_phy {
                self.index_skip_phy_offset.store(-1, Ordering::Release);
            } else {
                index.build_index(&IndexedMessage::of_record(&record))?;
            }
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
