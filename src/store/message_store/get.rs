//! The read paths: pulls (as bytes or as file regions), lookups by CommitLog offset and by
//! store time.

use std::sync::Arc;

use bytes::{Bytes, BytesMut};

use super::Inner;
use crate::store::consume_queue::ConsumeQueue;
use crate::store::error::StoreError;
use crate::store::filter::MessageFilter;
use crate::store::format::{
    self, decode_record_head, RecordHead, CQ_UNIT_SIZE_BYTES, STORE_TIMESTAMP_PROBE_BYTES,
};
use crate::store::io::ReadOp;
use crate::store::region::{FileRegion, RegionShape};
use crate::store::segment::{self, Segment};
use crate::store::types::{BoundaryType, GetMessageResult, GetMessageStatus};

// -------------------------------------------------------------------------------------------
// Pulls.

/// How a planned round of a pull ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum RoundEnd {
    /// Ran out of units, budget or file.
    Exhausted,
    /// Stopped at a unit because the (tentative) batch was full.
    BatchFull,
}

#[derive(Debug, Clone, Copy)]
struct Candidate {
    unit_index: usize,
    queue_offset: i64,
    phy_offset: i64,
    size: i32,
    segment_index: usize,
}

/// The regions side of `get_message_regions`: where regions go and who chooses.
pub(super) struct RegionsWanted<'a> {
    pub(super) out: Vec<FileRegion>,
    pub(super) choose: &'a dyn Fn(RegionShape) -> bool,
    /// Asked once, at the first round that has candidates; later rounds follow it.
    pub(super) chosen: Option<bool>,
}

impl RegionsWanted<'_> {
    /// Whether this round's candidates are answered as regions.
    fn choose_for(&mut self, candidates: &[Candidate]) -> bool {
        if let Some(chosen) = self.chosen {
            return chosen;
        }
        if candidates.is_empty() {
            return true;
        }
        let mut shape = RegionShape {
            regions: 0,
            bytes: 0,
            messages: candidates.len(),
        };
        let mut prev: Option<&Candidate> = None;
        for c in candidates {
            let continues = prev.is_some_and(|p| {
                p.segment_index == c.segment_index
                    && p.phy_offset + i64::from(p.size) == c.phy_offset
            });
            if !continues {
                shape.regions += 1;
            }
            shape.bytes += c.size as usize;
            prev = Some(c);
        }
        let chosen = (self.choose)(shape);
        self.chosen = Some(chosen);
        chosen
    }
}

/// Running totals of one pull.
struct PullState {
    status: GetMessageStatus,
    /// Index of the last unit that set `status` (Java updates status in unit order).
    status_unit: Option<usize>,
    next_begin_offset: i64,
    max_phy_offset_pulling: i64,
    total_bytes: usize,
    count: usize,
}

impl PullState {
    fn miss(&mut self, unit_index: usize, status: GetMessageStatus) {
        if self.status_unit.is_none_or(|u| u < unit_index) {
            self.status_unit = Some(unit_index);
            self.status = status;
        }
    }
}

impl Inner {
    /// Java `nextOffsetCorrection`: a slave keeps the requested offset unless
    /// `offsetCheckInSlave`.
    fn correct_offset(&self, old: i64, new: i64) -> i64 {
        if !self.config.broker_role_slave || self.config.offset_check_in_slave {
            new
        } else {
            old
        }
    }

    /// With `regions`, found records are returned as file regions pushed there instead of
    /// bytes in the result's buffer (see `MessageStore::get_message_regions`).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn get_message(
        &self,
        topic: &str,
        queue_id: i32,
        offset: i64,
        max_msg_nums: i32,
        max_pull_bytes: usize,
        filter: &dyn MessageFilter,
        regions: Option<&mut RegionsWanted<'_>>,
    ) -> Result<GetMessageResult, StoreError> {
        let Some(cq) = self.find_queue(topic, queue_id) else {
            let next = self.correct_offset(offset, 0);
            return Ok(GetMessageResult::empty(
                GetMessageStatus::NoMatchedLogicQueue,
                next,
            ));
        };
        let min = cq.min_offset_in_queue();
        let max = cq.max_offset_in_queue();
        let (status, next) = if max == 0 {
            (
                GetMessageStatus::NoMessageInQueue,
                self.correct_offset(offset, 0),
            )
        } else if offset < min {
            (
                GetMessageStatus::OffsetTooSmall,
                self.correct_offset(offset, min),
            )
        } else if offset == max {
            (
                GetMessageStatus::OffsetOverflowOne,
                self.correct_offset(offset, offset),
            )
        } else if offset > max {
            (
                GetMessageStatus::OffsetOverflowBadly,
                self.correct_offset(offset, max),
            )
        } else {
            let mut result = self.scan_queue(
                &cq,
                offset,
                max,
                max_msg_nums,
                max_pull_bytes,
                filter,
                regions,
            )?;
            result.min_offset_in_queue = min;
            result.max_offset_in_queue = max;
            return Ok(result);
        };
        let mut result = GetMessageResult::empty(status, next);
        result.min_offset_in_queue = min;
        result.max_offset_in_queue = max;
        Ok(result)
    }

    /// Java's batch-full rule (5.x `isTheBatchFull`); never full before the first message.
    fn is_batch_full(
        &self,
        size: usize,
        max_msg_nums: i64,
        max_pull: usize,
        total: usize,
        count: usize,
        in_mem: bool,
    ) -> bool {
        if total == 0 || count == 0 {
            return false;
        }
        if count as i64 + 1 > max_msg_nums {
            return true;
        }
        if total + size > max_pull {
            return true;
        }
        let (max_bytes, max_count) = if in_mem {
            (
                self.config.max_transfer_bytes_on_message_in_memory,
                self.config.max_transfer_count_on_message_in_memory,
            )
        } else {
            (
                self.config.max_transfer_bytes_on_message_in_disk,
                self.config.max_transfer_count_on_message_in_disk,
            )
        };
        total + size > max_bytes || count + 1 > max_count
    }

    #[allow(clippy::too_many_arguments)]
    fn scan_queue(
        &self,
        cq: &ConsumeQueue,
        offset: i64,
        max: i64,
        max_msg_nums: i32,
        max_pull: usize,
        filter: &dyn MessageFilter,
        mut regions: Option<&mut RegionsWanted<'_>>,
    ) -> Result<GetMessageResult, StoreError> {
        let max_msg_nums = i64::from(max_msg_nums);
        // Scan budget (`maxFilterMessageSize`): units whose distance from `offset` is below it.
        let budget_bytes = (self.config.max_filter_message_size_bytes as i64)
            .max(max_msg_nums.saturating_mul(CQ_UNIT_SIZE_BYTES as i64));
        let budget_units =
            (budget_bytes + CQ_UNIT_SIZE_BYTES as i64 - 1) / CQ_UNIT_SIZE_BYTES as i64;
        let want = budget_units.min(max - offset) as usize;
        let mut units = Vec::with_capacity(want);
        if cq.read_units(&self.io, offset, want, &mut units)?.is_none() {
            let next = self.correct_offset(offset, cq.roll_next_file(offset));
            return Ok(GetMessageResult::empty(
                GetMessageStatus::OffsetFoundNull,
                next,
            ));
        }
        // Read the CommitLog head only now, after the units: the writer publishes the CommitLog
        // max before the queue max, so every unit just read has its record below this head. A
        // head read before the units could miss records appended meanwhile, and they would be
        // skipped as MESSAGE_WAS_REMOVING while nextBeginOffset moved past them.
        let max_phy_offset = self.commit_log.max_phy_offset();
        let memory_window = self.config.memory_window_bytes();
        let cl_segments = self.commit_log.segments().snapshot();
        let cl_min = cl_segments
            .first()
            .map_or(max_phy_offset, |s| s.start_offset);
        let file_size = self.commit_log.file_size_bytes();
        let mut state = PullState {
            status: GetMessageStatus::NoMatchedMessage,
            status_unit: None,
            next_begin_offset: offset,
            max_phy_offset_pulling: 0,
            total_bytes: 0,
            count: 0,
        };
        let mut buffer = BytesMut::new();
        let mut ranges = Vec::new();
        let mut locations = Vec::new();
        let mut queue_offsets = Vec::new();
        let mut candidates = Vec::new();
        let mut cursor = 0usize;
        loop {
            // Plan: walk units as Java does, assuming every candidate passes the record filter.
            candidates.clear();
            let (mut tentative_bytes, mut tentative_count) = (state.total_bytes, state.count);
            let mut next_phy_file_start = i64::MIN;
            let mut end = RoundEnd::Exhausted;
            let mut stop_at = units.len();
            for (i, unit) in units.iter().enumerate().skip(cursor) {
                let size = unit.size.max(0) as usize;
                let in_mem = max_phy_offset - unit.phy_offset <= memory_window;
                if self.is_batch_full(
                    size,
                    max_msg_nums,
                    max_pull,
                    tentative_bytes,
                    tentative_count,
                    in_mem,
                ) || tentative_bytes >= max_pull
                {
                    end = RoundEnd::BatchFull;
                    stop_at = i;
                    break;
                }
                state.max_phy_offset_pulling = unit.phy_offset;
                state.next_begin_offset = offset + i as i64 + 1;
                if next_phy_file_start != i64::MIN && unit.phy_offset < next_phy_file_start {
                    continue;
                }
                if !filter.is_matched_by_consume_queue(unit.tags_code) {
                    state.miss(i, GetMessageStatus::NoMatchedMessage);
                    continue;
                }
                let available = unit.size > 0
                    && unit.phy_offset >= cl_min
                    && unit.phy_offset + i64::from(unit.size) <= max_phy_offset;
                let segment_index = available
                    .then(|| segment::index_in(&cl_segments, unit.phy_offset, file_size as u64))
                    .flatten();
                let Some(segment_index) = segment_index else {
                    state.miss(i, GetMessageStatus::MessageWasRemoving);
                    next_phy_file_start = self.commit_log.roll_next_file(unit.phy_offset.max(0));
                    continue;
                };
                candidates.push(Candidate {
                    unit_index: i,
                    queue_offset: offset + i as i64,
                    phy_offset: unit.phy_offset,
                    size: unit.size,
                    segment_index,
                });
                tentative_bytes += size;
                tentative_count += 1;
                next_phy_file_start = i64::MIN;
            }
            let as_regions = match regions.as_deref_mut() {
                Some(wanted) => wanted.choose_for(&candidates).then_some(wanted),
                None => None,
            };
            let rejected = match as_regions {
                Some(wanted) => {
                    self.locate_candidates(
                        &cl_segments,
                        &candidates,
                        &mut state,
                        &mut wanted.out,
                        &mut locations,
                        &mut queue_offsets,
                    )?;
                    // Layer two is not applied to regions, so nothing is ever rejected.
                    false
                }
                None => self.read_candidates(
                    &cl_segments,
                    &candidates,
                    filter,
                    &mut state,
                    &mut buffer,
                    &mut ranges,
                    &mut locations,
                    &mut queue_offsets,
                )?,
            };
            // A rejected candidate made the tentative totals too high: re-plan from the unit
            // where the round stopped, with the real totals.
            if end == RoundEnd::BatchFull && rejected {
                cursor = stop_at;
                continue;
            }
            break;
        }
        let status = if state.count > 0 {
            GetMessageStatus::Found
        } else {
            state.status
        };
        let suggest = max_phy_offset - state.max_phy_offset_pulling > memory_window;
        Ok(GetMessageResult {
            status,
            next_begin_offset: state.next_begin_offset,
            min_offset_in_queue: 0,
            max_offset_in_queue: 0,
            suggest_pulling_from_slave: suggest,
            buffer: buffer.freeze(),
            message_ranges: ranges,
            message_locations: locations,
            queue_offsets,
            buffer_total_size: state.total_bytes,
            message_count: state.count,
        })
    }

    /// Reads every candidate record in one `read_batch` and applies the record filter.
    /// Returns whether any candidate was rejected.
    #[allow(clippy::too_many_arguments)]
    fn read_candidates(
        &self,
        cl_segments: &[Arc<Segment>],
        candidates: &[Candidate],
        filter: &dyn MessageFilter,
        state: &mut PullState,
        buffer: &mut BytesMut,
        ranges: &mut Vec<(usize, usize)>,
        locations: &mut Vec<(i64, i32)>,
        queue_offsets: &mut Vec<i64>,
    ) -> Result<bool, StoreError> {
        if candidates.is_empty() {
            return Ok(false);
        }
        let ops = candidate_reads(cl_segments, candidates, |c| c.size as usize);
        let wanted: usize = candidates.iter().map(|c| c.size as usize).sum();
        buffer.reserve(wanted);
        let mut rejected = false;
        let mut corrupt: Option<usize> = None;
        self.io
            .read_batch(&ops, &mut |i, bytes| {
                let c = &candidates[i];
                if !record_head_matches(bytes, c.size) {
                    corrupt.get_or_insert(i);
                    return;
                }
                if !filter.is_matched_by_commit_log(bytes) {
                    state.miss(c.unit_index, GetMessageStatus::NoMatchedMessage);
                    rejected = true;
                    return;
                }
                ranges.push((buffer.len(), bytes.len()));
                buffer.extend_from_slice(bytes);
                locations.push((c.phy_offset, c.size));
                queue_offsets.push(c.queue_offset);
                state.total_bytes += bytes.len();
                state.count += 1;
            })
            .map_err(|e| StoreError::io("read commit log", self.commit_log.segments().dir(), e))?;
        if let Some(i) = corrupt {
            return Err(not_a_record(cl_segments, &candidates[i]));
        }
        Ok(rejected)
    }

    /// The regions counterpart of `read_candidates`: checks each candidate's record head (one
    /// `read_batch` of 8-byte reads) and appends its location, merging it into the previous
    /// region when it continues it in the same file.
    fn locate_candidates(
        &self,
        cl_segments: &[Arc<Segment>],
        candidates: &[Candidate],
        state: &mut PullState,
        regions: &mut Vec<FileRegion>,
        locations: &mut Vec<(i64, i32)>,
        queue_offsets: &mut Vec<i64>,
    ) -> Result<(), StoreError> {
        if candidates.is_empty() {
            return Ok(());
        }
        let ops = candidate_reads(cl_segments, candidates, |c| {
            RECORD_HEAD_BYTES.min(c.size as usize)
        });
        let mut corrupt: Option<usize> = None;
        self.io
            .read_batch(&ops, &mut |i, head| {
                if corrupt.is_none() && !record_head_matches(head, candidates[i].size) {
                    corrupt = Some(i);
                }
            })
            .map_err(|e| StoreError::io("read commit log", self.commit_log.segments().dir(), e))?;
        if let Some(i) = corrupt {
            return Err(not_a_record(cl_segments, &candidates[i]));
        }
        for c in candidates {
            let seg = &cl_segments[c.segment_index];
            let offset_bytes = (c.phy_offset - seg.start_offset) as u64;
            let len_bytes = c.size as usize;
            match regions.last_mut() {
                Some(last)
                    if Arc::ptr_eq(&last.segment, seg)
                        && last.offset_bytes + last.len_bytes as u64 == offset_bytes =>
                {
                    last.len_bytes += len_bytes;
                }
                _ => regions.push(FileRegion {
                    segment: Arc::clone(seg),
                    offset_bytes,
                    len_bytes,
                }),
            }
            locations.push((c.phy_offset, c.size));
            queue_offsets.push(c.queue_offset);
            state.total_bytes += len_bytes;
            state.count += 1;
        }
        Ok(())
    }

    pub(super) fn look_message_by_offset(
        &self,
        phy_offset: i64,
    ) -> Result<Option<Bytes>, StoreError> {
        let max = self.commit_log.max_phy_offset();
        let file_size = self.commit_log.file_size_bytes();
        if phy_offset < self.commit_log.min_phy_offset() || phy_offset + 8 > max {
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
            || phy_offset + i64::from(size) > max
            || pos as i64 + i64::from(size) > file_size
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
    pub(crate) fn read_exact(
        &self,
        seg: &Segment,
        pos: u64,
        out: &mut [u8],
    ) -> Result<(), StoreError> {
        let op = ReadOp {
            file: &seg.file,
            offset_bytes: pos,
            len_bytes: out.len(),
        };
        self.io
            .read_batch(&[op], &mut |_, bytes| out.copy_from_slice(bytes))
            .map_err(|e| StoreError::io("read", &seg.path, e))
    }

    /// Store timestamp of the message at queue offset `index`, `None` if it is gone.
    pub(super) fn store_time_at(
        &self,
        cq: &ConsumeQueue,
        index: i64,
    ) -> Result<Option<i64>, StoreError> {
        let Some(unit) = cq.read_unit(&self.io, index)? else {
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
            BoundaryType::Lower => {
                // First offset with time >= timestamp, or max when none.
                let (mut lo, mut hi) = (min, max);
                while lo < hi {
                    let mid = lo + (hi - lo) / 2;
                    if time(mid)? >= timestamp_ms {
                        hi = mid;
                    } else {
                        lo = mid + 1;
                    }
                }
                Ok(lo)
            }
            BoundaryType::Upper => {
                // Last offset with time <= timestamp, or min when none.
                let (mut lo, mut hi) = (min, max);
                while lo < hi {
                    let mid = lo + (hi - lo) / 2;
                    if time(mid)? > timestamp_ms {
                        hi = mid;
                    } else {
                        lo = mid + 1;
                    }
                }
                Ok((lo - 1).max(min))
            }
        }
    }
}

/// TOTALSIZE and MAGICCODE: what `record_head_matches` needs.
const RECORD_HEAD_BYTES: usize = 8;

/// One read per candidate of the first `len_of(candidate)` bytes of its record.
fn candidate_reads<'a>(
    cl_segments: &'a [Arc<Segment>],
    candidates: &[Candidate],
    len_of: impl Fn(&Candidate) -> usize,
) -> Vec<ReadOp<'a>> {
    candidates
        .iter()
        .map(|c| {
            let seg = &cl_segments[c.segment_index];
            ReadOp {
                file: &seg.file,
                offset_bytes: (c.phy_offset - seg.start_offset) as u64,
                len_bytes: len_of(c),
            }
        })
        .collect()
}

/// The error for a ConsumeQueue unit whose CommitLog bytes are not the record it describes.
fn not_a_record(cl_segments: &[Arc<Segment>], c: &Candidate) -> StoreError {
    StoreError::Corrupted {
        path: cl_segments[c.segment_index].path.clone(),
        offset: c.phy_offset,
        reason: format!(
            "ConsumeQueue unit (size {}) does not point at a record",
            c.size
        ),
    }
}

fn record_head_matches(bytes: &[u8], size: i32) -> bool {
    matches!(
        decode_record_head(bytes),
        Ok(RecordHead::Message { total_size, .. }) if total_size == size
    )
}
