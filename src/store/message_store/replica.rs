//! Replication: the CommitLog bytes an HA master serves from an offset, and the slave's append
//! of bytes the master already encoded (Java `DefaultMessageStore.appendToCommitLog` followed by
//! `ReputMessageService` dispatching the complete records to the ConsumeQueue).
//!
//! A slave's CommitLog is the master's, byte for byte: the bytes arrive in frames that may end
//! in the middle of a record, so the append writes them as they are, publishes the new write
//! position (what the slave reports to the master), and dispatches every record that is now
//! complete. The incomplete tail waits in the writer's `replica_tail` until the next frame
//! completes it; it is bounded by one record (at most one CommitLog file). Flush, recovery and
//! retention see an ordinary CommitLog: recovery cuts an incomplete tail as after a crash, and
//! the slave then asks the master for the bytes again from there.

use std::sync::atomic::Ordering;

use super::{lock, read_guard, Inner, Writer};
use crate::store::error::StoreError;
use crate::store::format::{
    self, decode_record_head, encode_cq_unit, CqUnit, RecordHead, END_FILE_BLANK_SIZE_MIN_BYTES,
};
use crate::store::region::FileRegion;

/// What one replicated append did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ReplicaAppend {
    /// The CommitLog write position after the append (the slave's max offset).
    pub max_phy_offset: i64,
    /// Records whose ConsumeQueue unit this append wrote.
    pub records_dispatched: usize,
}

/// A complete record found in the replicated bytes, ready to be dispatched.
struct Dispatch {
    topic: String,
    queue_id: i32,
    queue_offset: i64,
    unit: CqUnit,
    store_timestamp_ms: i64,
    properties: Vec<u8>,
}

impl Inner {
    /// Up to `max_bytes` CommitLog bytes from `from`, never past the end of the file holding
    /// `from` nor past the write position (Java `CommitLog.getData`, which an HA master sends
    /// from). `None` when nothing is there yet, or `from` is outside the live files.
    pub(super) fn commit_log_region(&self, from: i64, max_bytes: usize) -> Option<FileRegion> {
        let max = self.commit_log.max_phy_offset();
        if from >= max || from < self.commit_log.min_phy_offset() || max_bytes == 0 {
            return None;
        }
        let segment = self.commit_log.segments().find(from)?;
        let in_file = from - segment.start_offset;
        let file_end = segment.start_offset + self.commit_log.file_size_bytes();
        let len = (max.min(file_end) - from).min(max_bytes as i64);
        Some(FileRegion {
            segment,
            offset_bytes: in_file as u64,
            len_bytes: len as usize,
        })
    }

    /// Appends `bytes` that an HA master sent for CommitLog offset `start_offset`. An empty
    /// store takes any start (a new slave starts where the master tells it); otherwise
    /// `start_offset` must be the write position.
    pub(super) fn append_replica(
        &self,
        start_offset: i64,
        bytes: &[u8],
    ) -> Result<ReplicaAppend, StoreError> {
        let mut writer = lock(&self.writer);
        self.check_writable()?;
        let max = self.commit_log.max_phy_offset();
        let empty = self.commit_log.segments().is_empty();
        if start_offset != max && !(empty && writer.replica_tail.is_empty()) {
            return Err(StoreError::ReplicaOffsetMismatch {
                expected: max,
                got: start_offset,
            });
        }
        if start_offset < 0 {
            return Err(StoreError::ReplicaOffsetMismatch {
                expected: max,
                got: start_offset,
            });
        }
        if empty && start_offset != max {
            // The first file of this slave starts at the master's offset.
            self.commit_log.set_max_phy_offset(start_offset);
            writer.replica_dispatched_phy_offset = Some(start_offset);
        }
        if bytes.is_empty() {
            return Ok(ReplicaAppend {
                max_phy_offset: self.commit_log.max_phy_offset(),
                records_dispatched: 0,
            });
        }
        self.write_replica_bytes(start_offset, bytes)?;
        let end = start_offset + bytes.len() as i64;
        self.commit_log.set_max_phy_offset(end);
        let dispatches = self.take_complete_records(&mut writer, bytes)?;
        let records_dispatched = dispatches.len();
        self.dispatch_replica(&mut writer, &dispatches)?;
        drop(writer);
        self.after_append();
        self.notify_replica_arrivals(&dispatches);
        Ok(ReplicaAppend {
            max_phy_offset: end,
            records_dispatched,
        })
    }

    /// Writes `bytes` at `start_offset`, across file boundaries when they cross one.
    fn write_replica_bytes(&self, start_offset: i64, bytes: &[u8]) -> Result<(), StoreError> {
        let file_size = self.commit_log.file_size_bytes();
        let mut offset = start_offset;
        let mut rest = bytes;
        while !rest.is_empty() {
            let in_file = offset % file_size;
            let segment = self.commit_log.segments().get_or_create(offset - in_file)?;
            let n = rest.len().min((file_size - in_file) as usize);
            let (now, later) = rest.split_at(n);
            self.write_or_poison(&segment, now, in_file as u64)?;
            offset += n as i64;
            rest = later;
        }
        Ok(())
    }

    /// Adds `bytes` to the undispatched tail and takes every complete record out of it.
    fn take_complete_records(
        &self,
        writer: &mut Writer,
        bytes: &[u8],
    ) -> Result<Vec<Dispatch>, StoreError> {
        let file_size = self.commit_log.file_size_bytes();
        let max_after = self.commit_log.max_phy_offset();
        let mut phy = match writer.replica_dispatched_phy_offset {
            Some(phy) => phy,
            // Recovery ends the log on a record boundary: everything below is dispatched.
            None => max_after - bytes.len() as i64,
        };
        writer.replica_tail.extend_from_slice(bytes);
        let tail = &writer.replica_tail;
        let mut cursor = 0usize;
        let mut out = Vec::new();
        loop {
            let room = (file_size - phy % file_size) as usize;
            let available = tail.len() - cursor;
            // Every file keeps room for a filler head, so a head always fits before its end.
            if available < END_FILE_BLANK_SIZE_MIN_BYTES {
                break;
            }
            let corrupted = |reason: String| StoreError::Corrupted {
                path: self.commit_log.segments().dir().to_path_buf(),
                offset: phy,
                reason,
            };
            let head = decode_record_head(&tail[cursor..cursor + END_FILE_BLANK_SIZE_MIN_BYTES]);
            let size = match head {
                Ok(RecordHead::Blank { total_size }) if total_size as usize == room => room,
                Ok(RecordHead::Message { total_size, .. })
                    if total_size > 0
                        && total_size as usize + END_FILE_BLANK_SIZE_MIN_BYTES <= room =>
                {
                    total_size as usize
                }
                other => {
                    return Err(corrupted(format!(
                        "replicated bytes hold no record or end-of-file filler here ({other:?})"
                    )))
                }
            };
            if available < size {
                break;
            }
            let record_bytes = &tail[cursor..cursor + size];
            if let Ok(RecordHead::Message { .. }) = head {
                let record = format::decode_record(record_bytes)
                    .map_err(|e| corrupted(format!("replicated record does not decode: {e}")))?;
                if record.phy_offset != phy {
                    return Err(corrupted(format!(
                        "replicated record says it is at {}",
                        record.phy_offset
                    )));
                }
                if format::is_dispatched_to_consume_queue(record.sys_flag)
                    && record.queue_offset >= 0
                {
                    out.push(Dispatch {
                        topic: record.topic.to_owned(),
                        queue_id: record.queue_id,
                        queue_offset: record.queue_offset,
                        unit: CqUnit {
                            phy_offset: phy,
                            size: record.total_size,
                            tags_code: format::tags_code(record.properties),
                        },
                        store_timestamp_ms: record.store_timestamp_ms,
                        properties: record.properties.to_vec(),
                    });
                }
            }
            cursor += size;
            phy += size as i64;
        }
        writer.replica_tail.drain(..cursor);
        writer.replica_dispatched_phy_offset = Some(phy);
        Ok(out)
    }

    /// Writes the ConsumeQueue unit of each record and publishes the queue's new end, as a
    /// master's append does (the CommitLog end is already published).
    fn dispatch_replica(
        &self,
        writer: &mut Writer,
        dispatches: &[Dispatch],
    ) -> Result<(), StoreError> {
        for d in dispatches {
            let cq = self.get_or_create_queue(&d.topic, d.queue_id)?;
            let max = cq.max_offset_in_queue();
            if d.queue_offset < max {
                // Already there (the queue was rebuilt from these bytes by recovery).
                continue;
            }
            if d.queue_offset > max {
                if max == cq.min_offset_in_queue() {
                    // A slave that starts in the middle of the master's log sees each queue
                    // from the offset its first record there has.
                    cq.set_min_offset_in_queue(d.queue_offset);
                } else {
                    tracing::warn!(
                        topic = %d.topic,
                        queue_id = d.queue_id,
                        expected = max,
                        got = d.queue_offset,
                        "replicated record skips queue offsets"
                    );
                }
            }
            cq.prepare_write(d.queue_offset, 1)?;
            self.write_units(&cq, d.queue_offset, &encode_cq_unit(&d.unit))?;
            cq.set_max_offset_in_queue(d.queue_offset + 1);
            writer.last_store_timestamp_ms =
                writer.last_store_timestamp_ms.max(d.store_timestamp_ms);
            self.last_store_timestamp_ms
                .fetch_max(d.store_timestamp_ms, Ordering::AcqRel);
        }
        Ok(())
    }

    fn notify_replica_arrivals(&self, dispatches: &[Dispatch]) {
        let listener = read_guard(&self.listener);
        let Some(listener) = listener.as_ref() else {
            return;
        };
        for d in dispatches {
            listener.arriving(
                &d.topic,
                d.queue_id,
                d.queue_offset + 1,
                d.unit.tags_code,
                d.store_timestamp_ms,
                &d.properties,
            );
        }
    }
}
