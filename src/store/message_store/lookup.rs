//! Lookups outside a pull: one record by CommitLog offset, the store time of a queue's oldest
//! message, and the binary search of a queue by store time.

use bytes::Bytes;

use super::Inner;
use crate::store::consume_queue::ConsumeQueue;
use crate::store::error::StoreError;
use crate::store::format::{self, decode_record_head, RecordHead, STORE_TIMESTAMP_PROBE_BYTES};
use crate::store::io::ReadOp;
use crate::store::segment::Segment;
use crate::store::types::BoundaryType;

impl Inner {
    pub(super) fn look_message_by_offset(
        &self,
        phy_offset: i64,
    ) -> Result<Option<Bytes>, StoreError> {
        let max = self.commit_log.max_phy_offset();
        let file_size = self.commit_log.file_size_bytes();
        // Offsets come from clients (END_TRANSACTION's header): one whose end overflows is
        // past the log.
        let past_max = |len: i64| phy_offset.checked_add(len).is_none_or(|end| end > max);
        if phy_offset < self.commit_log.min_phy_offset() || past_max(8) {
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
            || past_max(i64::from(size))
            || (pos as i64).saturating_add(i64::from(size)) > file_size
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
    fn read_exact(&self, seg: &Segment, pos: u64, out: &mut [u8]) -> Result<(), StoreError> {
        let op = ReadOp {
            file: &seg.file,
            offset_bytes: pos,
            len_bytes: out.len(),
        };
        self.io
            .read_batch(&[op], &mut |_, bytes| out.copy_from_slice(bytes))
            .map_err(|e| StoreError::io("read", &seg.path, e))
    }

    /// Store time of the oldest live message of the queue.
    pub(super) fn earliest_message_store_time(
        &self,
        topic: &str,
        queue_id: i32,
    ) -> Result<Option<i64>, StoreError> {
        let Some(cq) = self.find_queue(topic, queue_id) else {
            return Ok(None);
        };
        let min = cq.min_offset_in_queue();
        if min >= cq.max_offset_in_queue() {
            return Ok(None);
        }
        self.store_time_at(&cq, min)
    }

    /// Java `getMessageStoreTimeStamp`: store time of the message at `queue_offset` of the
    /// queue, `None` when the queue or the message is gone.
    pub(super) fn message_store_timestamp(
        &self,
        topic: &str,
        queue_id: i32,
        queue_offset: i64,
    ) -> Result<Option<i64>, StoreError> {
        let Some(cq) = self.find_queue(topic, queue_id) else {
            return Ok(None);
        };
        if queue_offset < cq.min_offset_in_queue() || queue_offset >= cq.max_offset_in_queue() {
            return Ok(None);
        }
        self.store_time_at(&cq, queue_offset)
    }

    /// Store timestamp of the message at `queue_offset`, `None` if it is gone.
    fn store_time_at(
        &self,
        cq: &ConsumeQueue,
        queue_offset: i64,
    ) -> Result<Option<i64>, StoreError> {
        let Some(unit) = cq.read_unit(&self.io, queue_offset)? else {
            return Ok(None);
        };
        let max = self.commit_log.max_phy_offset();
        if !unit.is_valid()
            || unit.size == i32::MAX
            || unit.phy_offset < self.commit_log.min_phy_offset()
            || unit.phy_offset + i64::from(unit.size) > max
        {
            return Ok(None);
        }
        let Some(seg) = self.commit_log.segments().find(unit.phy_offset) else {
            return Ok(None);
        };
        let len = STORE_TIMESTAMP_PROBE_BYTES.min(unit.size as usize);
        let mut probe = vec![0u8; len];
        self.read_exact(
            &seg,
            (unit.phy_offset - seg.start_offset) as u64,
            &mut probe,
        )?;
        Ok(format::record_store_timestamp(&probe).ok())
    }

    pub(super) fn offset_by_timestamp(
        &self,
        topic: &str,
        queue_id: i32,
        timestamp_ms: i64,
        boundary: BoundaryType,
    ) -> Result<i64, StoreError> {
        let Some(cq) = self.find_queue(topic, queue_id) else {
            return Ok(0);
        };
        let (min, max) = (cq.min_offset_in_queue(), cq.max_offset_in_queue());
        if min >= max {
            return Ok(max);
        }
        // Messages whose record is gone sort before every timestamp (Java treats them so).
        let time = |i: i64| -> Result<i64, StoreError> {
            Ok(self.store_time_at(&cq, i)?.unwrap_or(i64::MIN))
        };
        match boundary {
            // First offset with time >= timestamp, or max when none.
            BoundaryType::Lower => first_offset_where(min, max, |i| Ok(time(i)? >= timestamp_ms)),
            // Last offset with time <= timestamp, or min when none.
            BoundaryType::Upper => {
                let after = first_offset_where(min, max, |i| Ok(time(i)? > timestamp_ms))?;
                Ok((after - 1).max(min))
            }
        }
    }
}

/// Binary search: the first offset of `lo..hi` for which `pred` holds, `hi` when none does.
/// `pred` must be false up to some offset and true from there on.
pub(super) fn first_offset_where(
    mut lo: i64,
    mut hi: i64,
    mut pred: impl FnMut(i64) -> Result<bool, StoreError>,
) -> Result<i64, StoreError> {
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if pred(mid)? {
            hi = mid;
        } else {
            lo = mid + 1;
        }
    }
    Ok(lo)
}
