//! Pulls, answered with the records' bytes or with file regions.
//!
//! A pull (`get_message`) first answers the cases where the requested queue offset is outside
//! the queue's live units. Otherwise it reads the first ConsumeQueue units (what a full batch
//! of `maxMsgNums` records needs, plus the unit that shows the batch is full), then runs
//! rounds: [`QueueScan::plan_round`] walks the units with Java's rules (scan budget, layer-one
//! filter, batch-full limits) and collects candidate records, and [`Inner::answer_round`] reads
//! them (one more `read_batch`, layer-two filter in the callback) or locates them as file
//! regions. A round is planned again when the record filter rejected a candidate of a batch
//! that had filled up, and goes on over the rest of the scan budget (read then, with one more
//! `read_batch`) when the first units ran out before the batch filled: filtered or missing
//! records. The common unfiltered pull thus reads 33 units (660 bytes) of ConsumeQueue instead
//! of the whole 800-unit scan budget (16,000 bytes), which it would never look at.

use std::ops::Range;
use std::sync::Arc;

use bytes::BytesMut;

use super::Inner;

mod mapped;
mod recent;

use crate::store::config::StoreConfig;
use crate::store::consume_queue::{ConsumeQueue, UnitRead};
use crate::store::error::StoreError;
use crate::store::filter::MessageFilter;
use crate::store::format::{decode_record_head, CqUnit, RecordHead, CQ_UNIT_SIZE_BYTES};
use crate::store::io::ReadOp;
use crate::store::region::{FileRegion, RegionShape};
use crate::store::segment::{self, Segment};
use crate::store::types::{GetMessageRequest, GetMessageResult, GetMessageStatus};
#[cfg(test)]
pub(super) use mapped::MAPPED_READ_LAG_MIN_BYTES;

/// TOTALSIZE and MAGICCODE: what `record_head_matches` needs.
const RECORD_HEAD_BYTES: usize = 8;

/// The longest read of back-to-back records a pull makes (one record longer than this is read
/// alone). Java's `maxTransferBytesOnMessageInMemory` default, so a default in-memory pull's
/// batch of adjacent records is one read; at most the registered read buffers' total (1 MiB by
/// default), so such a read fits one io_uring round.
const RECORD_SPAN_READ_MAX_BYTES: usize = 256 * 1024;
const _: () = assert!(
    RECORD_SPAN_READ_MAX_BYTES
        <= crate::store::io::FIXED_BUFFER_COUNT_DEFAULT
            * crate::store::io::FIXED_BUFFER_SIZE_DEFAULT_BYTES
);

/// What one pull inside the queue's live units asks for, and the limits it runs under.
struct PullSpec<'a> {
    filter: &'a dyn MessageFilter,
    /// The requested queue offset: the first unit scanned.
    queue_offset: i64,
    /// The queue's max offset when the pull started; no unit at or past it is scanned.
    max_offset_in_queue: i64,
    max_msg_nums: i64,
    /// At most this many record bytes are returned.
    pull_size_max_bytes: usize,
}

impl PullSpec<'_> {
    /// Units one pull may scan: the scan budget (`maxFilterMessageSize` bytes of ConsumeQueue,
    /// at least `maxMsgNums` units), never past the queue's end nor past the end of the
    /// ConsumeQueue file holding `queue_offset` (one read never crosses a file, like Java's
    /// `getIndexBuffer`). The units are allocated before they are read, so this is their real
    /// bound: a client's maxMsgNums of i32::MAX asks no more than a file's worth.
    fn units_wanted(&self, config: &StoreConfig) -> usize {
        let unit_bytes = CQ_UNIT_SIZE_BYTES as i64;
        let budget_bytes = (config.max_filter_message_size_bytes as i64)
            .max(self.max_msg_nums.saturating_mul(unit_bytes));
        let budget_units = (budget_bytes + unit_bytes - 1) / unit_bytes;
        let units_per_file = config.consume_queue_file_units as i64;
        let left_in_file = units_per_file - self.queue_offset.rem_euclid(units_per_file);
        budget_units
            .min(left_in_file)
            .min(self.max_offset_in_queue - self.queue_offset) as usize
    }

    /// Units the pull reads first, out of `wanted` ([`Self::units_wanted`]): `maxMsgNums`
    /// records and the unit after them, at which an unfiltered pull finds its batch full.
    /// The rest is read only if the plan runs past these (see [`Inner::scan_queue`]).
    fn units_first_read(&self, wanted: usize) -> usize {
        let batch_and_next = self.max_msg_nums.saturating_add(1).max(1);
        usize::try_from(batch_and_next).map_or(wanted, |n| n.min(wanted))
    }

    /// Candidates the pull's plan makes room for at its first one: its `maxMsgNums`, at most
    /// [`RECORDS_RESERVED_MAX`] (a client may ask for i32::MAX; more still fit, by growing).
    /// The found records' lists are sized by each round's candidates instead
    /// (`PullState::reserve_found`).
    fn records_expected(&self) -> usize {
        usize::try_from(self.max_msg_nums.clamp(1, RECORDS_RESERVED_MAX as i64)).unwrap_or(1)
    }
}

/// Most candidates a pull's plan reserves room for before it finds them: Java's default
/// in-memory batch cap (`maxTransferCountOnMessageInMemory`) is 32, so a default pull's list
/// never grows.
const RECORDS_RESERVED_MAX: usize = 64;

/// The CommitLog as one pull sees it, read once right after the pull's ConsumeQueue units.
struct CommitLogView {
    max_phy_offset: i64,
    /// Start of the first live file (the write position when there is none).
    min_phy_offset: i64,
    segments: Arc<Vec<Arc<Segment>>>,
    file_size_bytes: i64,
    /// Bytes behind the head that count as in memory (`accessMessageInMemoryMaxRatio`).
    memory_window_bytes: i64,
}

impl CommitLogView {
    fn is_in_memory(&self, phy_offset: i64) -> bool {
        self.max_phy_offset - phy_offset <= self.memory_window_bytes
    }

    /// Position in `segments` of the file holding the unit's whole record; `None` when the
    /// record is not (or no longer) readable.
    fn segment_of(&self, unit: &CqUnit) -> Option<usize> {
        let available = unit.size > 0
            && unit.phy_offset >= self.min_phy_offset
            && unit.phy_offset + i64::from(unit.size) <= self.max_phy_offset;
        if !available {
            return None;
        }
        segment::index_in(&self.segments, unit.phy_offset, self.file_size_bytes as u64)
    }

    fn segment(&self, candidate: &Candidate) -> &Arc<Segment> {
        &self.segments[candidate.segment_index]
    }
}

/// How a planned round of a pull ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum RoundEnd {
    /// Ran out of units, budget or file.
    Exhausted,
    /// Stopped before unit `at_unit` because the (tentative) batch was full.
    BatchFull { at_unit: usize },
}

/// A record the plan expects to return, unless the record filter rejects it.
#[derive(Debug, Clone, Copy)]
struct Candidate {
    unit_index: usize,
    queue_offset: i64,
    phy_offset: i64,
    size: i32,
    segment_index: usize,
}

/// Records counted into a pull: found ones, or found plus planned ones while planning.
#[derive(Debug, Clone, Copy, Default)]
struct Tally {
    bytes: usize,
    count: usize,
}

/// The regions side of `get_message_regions`: where regions go and who chooses.
pub(super) struct RegionsWanted<'a> {
    out: Vec<FileRegion>,
    choose: &'a dyn Fn(RegionShape) -> bool,
    /// Asked once, at the first round that has candidates; later rounds follow it.
    chosen: Option<bool>,
}

impl<'a> RegionsWanted<'a> {
    pub(super) fn new(choose: &'a dyn Fn(RegionShape) -> bool) -> Self {
        RegionsWanted {
            out: Vec::new(),
            choose,
            chosen: None,
        }
    }

    /// The regions, unless the pull was answered with bytes.
    pub(super) fn into_regions(self) -> Option<Vec<FileRegion>> {
        (self.chosen != Some(false)).then_some(self.out)
    }

    /// Whether this round's candidates are answered as regions.
    fn choose_for(&mut self, candidates: &[Candidate]) -> bool {
        if let Some(chosen) = self.chosen {
            return chosen;
        }
        if candidates.is_empty() {
            return true;
        }
        let chosen = (self.choose)(region_shape(candidates));
        self.chosen = Some(chosen);
        chosen
    }
}

/// The shape the candidates would have as regions (records back to back in one file are one).
fn region_shape(candidates: &[Candidate]) -> RegionShape {
    let mut shape = RegionShape {
        regions: 0,
        bytes: 0,
        messages: candidates.len(),
    };
    let mut prev: Option<&Candidate> = None;
    for c in candidates {
        let continues = prev.is_some_and(|p| {
            p.segment_index == c.segment_index && p.phy_offset + i64::from(p.size) == c.phy_offset
        });
        if !continues {
            shape.regions += 1;
        }
        shape.bytes += c.size as usize;
        prev = Some(c);
    }
    shape
}

/// Running totals and the found records of one pull.
struct PullState {
    status: GetMessageStatus,
    /// Index of the last unit that set `status` (Java updates status in unit order).
    status_unit: Option<usize>,
    next_begin_offset: i64,
    max_phy_offset_pulling: i64,
    found: Tally,
    buffer: BytesMut,
    message_ranges: Vec<(usize, usize)>,
    message_locations: Vec<(i64, i32)>,
    queue_offsets: Vec<i64>,
}

impl PullState {
    fn new(queue_offset: i64) -> Self {
        PullState {
            status: GetMessageStatus::NoMatchedMessage,
            status_unit: None,
            next_begin_offset: queue_offset,
            max_phy_offset_pulling: 0,
            found: Tally::default(),
            buffer: BytesMut::new(),
            message_ranges: Vec::new(),
            message_locations: Vec::new(),
            queue_offsets: Vec::new(),
        }
    }

    fn miss(&mut self, unit_index: usize, status: GetMessageStatus) {
        if self.status_unit.is_none_or(|u| u < unit_index) {
            self.status_unit = Some(unit_index);
            self.status = status;
        }
    }

    /// Makes room in the lists for `records` more found records, `with_bytes` also in
    /// `message_ranges`. Grown one push at a time, they were reallocated 3 times each in a
    /// 32-record catch-up pull, about 2 % of the broker's samples in W4 (docs/BENCHMARKS.md,
    /// "W4: the pull's allocations"). A pull that plans no record allocates none.
    fn reserve_found(&mut self, records: usize, with_bytes: bool) {
        self.message_locations.reserve(records);
        self.queue_offsets.reserve(records);
        if with_bytes {
            self.message_ranges.reserve(records);
        }
    }

    /// Counts a found record of `len_bytes` (its bytes, if any, are already in `buffer`).
    fn add_found(&mut self, c: &Candidate, len_bytes: usize) {
        self.message_locations.push((c.phy_offset, c.size));
        self.queue_offsets.push(c.queue_offset);
        self.found.bytes += len_bytes;
        self.found.count += 1;
    }

    fn into_result(self, view: &CommitLogView) -> GetMessageResult {
        let status = if self.found.count > 0 {
            GetMessageStatus::Found
        } else {
            self.status
        };
        let suggest = view.max_phy_offset - self.max_phy_offset_pulling > view.memory_window_bytes;
        GetMessageResult {
            status,
            next_begin_offset: self.next_begin_offset,
            min_offset_in_queue: 0,
            max_offset_in_queue: 0,
            suggest_pulling_from_slave: suggest,
            buffer: self.buffer.freeze(),
            message_ranges: self.message_ranges,
            message_locations: self.message_locations,
            queue_offsets: self.queue_offsets,
            buffer_total_size: self.found.bytes,
            message_count: self.found.count,
        }
    }
}

/// The planning side of one pull: the units it read so far and the CommitLog they point into.
struct QueueScan<'a> {
    inner: &'a Inner,
    pull: &'a PullSpec<'a>,
    view: CommitLogView,
    units: Vec<CqUnit>,
    /// How the pull's ConsumeQueue units are read from their file.
    unit_read: UnitRead,
}

impl QueueScan<'_> {
    /// Walks the units from `cursor` as Java does, assuming every candidate passes the record
    /// filter, and collects the candidates of this round. `skip_below` is Java's
    /// `nextPhyFileStartOffset`: after a missing record, units pointing into the rest of its
    /// file are skipped; it carries over when a round goes on over units read later.
    fn plan_round(
        &self,
        cursor: usize,
        skip_below: &mut Option<i64>,
        state: &mut PullState,
        candidates: &mut Vec<Candidate>,
    ) -> RoundEnd {
        candidates.clear();
        let mut tentative = state.found;
        for (i, unit) in self.units.iter().enumerate().skip(cursor) {
            let size = unit.size.max(0) as usize;
            if self.is_batch_full(size, tentative, self.view.is_in_memory(unit.phy_offset)) {
                return RoundEnd::BatchFull { at_unit: i };
            }
            state.max_phy_offset_pulling = unit.phy_offset;
            state.next_begin_offset = self.pull.queue_offset + i as i64 + 1;
            if skip_below.is_some_and(|next_file_start| unit.phy_offset < next_file_start) {
                continue;
            }
            if !self.pull.filter.is_matched_by_consume_queue(unit.tags_code) {
                state.miss(i, GetMessageStatus::NoMatchedMessage);
                continue;
            }
            let Some(segment_index) = self.view.segment_of(unit) else {
                state.miss(i, GetMessageStatus::MessageWasRemoving);
                let next_file_start = self.inner.commit_log.roll_next_file(unit.phy_offset.max(0));
                *skip_below = Some(next_file_start);
                continue;
            };
            if candidates.capacity() == 0 {
                candidates.reserve(self.pull.records_expected());
            }
            candidates.push(Candidate {
                unit_index: i,
                queue_offset: self.pull.queue_offset + i as i64,
                phy_offset: unit.phy_offset,
                size: unit.size,
                segment_index,
            });
            tentative.bytes += size;
            tentative.count += 1;
            *skip_below = None;
        }
        RoundEnd::Exhausted
    }

    /// Reads the units of the scan budget past those read so far (up to `wanted` in all).
    /// Returns false when there were none left, or their file is gone (retention deleted it
    /// meanwhile): the pull then ends where its units end.
    fn read_rest(
        &mut self,
        cq: &ConsumeQueue,
        wanted: usize,
        more: &mut Vec<CqUnit>,
    ) -> Result<bool, StoreError> {
        let read = self.units.len();
        if read >= wanted {
            return Ok(false);
        }
        let from = self.pull.queue_offset + read as i64;
        if cq
            .read_units(&self.inner.io, from, wanted - read, self.unit_read, more)?
            .is_none()
            || more.is_empty()
        {
            return Ok(false);
        }
        self.units.append(more);
        Ok(true)
    }

    /// Java's batch-full rule (5.x `isTheBatchFull`; never full before the first message),
    /// and the pull's byte cap.
    fn is_batch_full(&self, size: usize, tally: Tally, in_memory: bool) -> bool {
        if tally.bytes >= self.pull.pull_size_max_bytes {
            return true;
        }
        if tally.bytes == 0 || tally.count == 0 {
            return false;
        }
        if tally.count as i64 + 1 > self.pull.max_msg_nums {
            return true;
        }
        if tally.bytes + size > self.pull.pull_size_max_bytes {
            return true;
        }
        let config = &self.inner.config;
        let (bytes_max, count_max) = if in_memory {
            (
                config.max_transfer_bytes_on_message_in_memory,
                config.max_transfer_count_on_message_in_memory,
            )
        } else {
            (
                config.max_transfer_bytes_on_message_in_disk,
                config.max_transfer_count_on_message_in_disk,
            )
        };
        tally.bytes + size > bytes_max || tally.count + 1 > count_max
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

    /// At most `pull_size_max_bytes` of records. With `regions`, found records are returned as
    /// file regions pushed there instead of bytes in the result's buffer (see
    /// `MessageStore::get_message_regions`).
    pub(super) fn get_message(
        &self,
        request: &GetMessageRequest<'_>,
        pull_size_max_bytes: usize,
        regions: Option<&mut RegionsWanted<'_>>,
    ) -> Result<GetMessageResult, StoreError> {
        let queue_offset = request.queue_offset;
        let Some(cq) = self.find_queue(request.topic, request.queue_id) else {
            let next = self.correct_offset(queue_offset, 0);
            return Ok(GetMessageResult::empty(
                GetMessageStatus::NoMatchedLogicQueue,
                next,
            ));
        };
        let min = cq.min_offset_in_queue();
        let max = cq.max_offset_in_queue();
        let mut result = match self.out_of_range(queue_offset, min, max) {
            Some((status, next)) => GetMessageResult::empty(status, next),
            None => {
                let pull = PullSpec {
                    filter: request.filter,
                    queue_offset,
                    max_offset_in_queue: max,
                    max_msg_nums: i64::from(request.max_msg_nums),
                    pull_size_max_bytes,
                };
                self.scan_queue(&cq, &pull, regions)?
            }
        };
        result.min_offset_in_queue = min;
        result.max_offset_in_queue = max;
        Ok(result)
    }

    /// The status and next offset of a pull at `queue_offset` when it is not a live unit of a
    /// queue holding `min..max`; `None` when it is.
    fn out_of_range(
        &self,
        queue_offset: i64,
        min: i64,
        max: i64,
    ) -> Option<(GetMessageStatus, i64)> {
        let (status, next) = if max == 0 {
            (GetMessageStatus::NoMessageInQueue, 0)
        } else if queue_offset < min {
            (GetMessageStatus::OffsetTooSmall, min)
        } else if queue_offset == max {
            (GetMessageStatus::OffsetOverflowOne, queue_offset)
        } else if queue_offset > max {
            (GetMessageStatus::OffsetOverflowBadly, max)
        } else {
            return None;
        };
        Some((status, self.correct_offset(queue_offset, next)))
    }

    fn scan_queue(
        &self,
        cq: &ConsumeQueue,
        pull: &PullSpec<'_>,
        mut regions: Option<&mut RegionsWanted<'_>>,
    ) -> Result<GetMessageResult, StoreError> {
        let wanted = pull.units_wanted(&self.config);
        let first = pull.units_first_read(wanted);
        let unit_read = mapped::unit_read(&self.config, pull);
        let mut units = Vec::with_capacity(first);
        if cq
            .read_units(&self.io, pull.queue_offset, first, unit_read, &mut units)?
            .is_none()
        {
            let next = cq.roll_next_file(pull.queue_offset);
            return Ok(GetMessageResult::empty(
                GetMessageStatus::OffsetFoundNull,
                self.correct_offset(pull.queue_offset, next),
            ));
        }
        // Every unit of the scan budget lies below the queue max read at the pull's start, so
        // its record is below this head too, whether it is read now or later.
        let mut scan = QueueScan {
            inner: self,
            pull,
            view: self.commit_log_view(),
            units,
            unit_read,
        };
        let mut state = PullState::new(pull.queue_offset);
        let mut candidates = Vec::new();
        let mut more = Vec::new();
        let mut cursor = 0usize;
        let mut skip_below = None;
        loop {
            let end = scan.plan_round(cursor, &mut skip_below, &mut state, &mut candidates);
            let rejected = self.answer_round(
                &scan.view,
                &candidates,
                pull.filter,
                regions.as_deref_mut(),
                &mut state,
            )?;
            match end {
                // A rejected candidate made the tentative totals too high: re-plan from the
                // unit where the round stopped, with the real totals.
                RoundEnd::BatchFull { at_unit } if rejected => {
                    cursor = at_unit;
                    skip_below = None;
                }
                RoundEnd::BatchFull { .. } => break,
                // The units read so far ran out before the batch filled: go on over the rest
                // of the budget with the real totals, exactly where one plan over every unit
                // would have gone (its tentative totals are never lower than these).
                RoundEnd::Exhausted => {
                    let read = scan.units.len();
                    if !scan.read_rest(cq, wanted, &mut more)? {
                        break;
                    }
                    cursor = read;
                }
            }
        }
        Ok(state.into_result(&scan.view))
    }

    /// The CommitLog as a pull sees it. Taken only after the pull's units are read: the writer
    /// publishes the CommitLog max before the queue max, so every unit just read has its record
    /// below this head. A head read before the units could miss records appended meanwhile, and
    /// they would be skipped as MESSAGE_WAS_REMOVING while nextBeginOffset moved past them.
    fn commit_log_view(&self) -> CommitLogView {
        let max_phy_offset = self.commit_log.max_phy_offset();
        let segments = self.commit_log.segments().snapshot();
        let min_phy_offset = segments.first().map_or(max_phy_offset, |s| s.start_offset);
        CommitLogView {
            max_phy_offset,
            min_phy_offset,
            segments,
            file_size_bytes: self.commit_log.file_size_bytes(),
            memory_window_bytes: self.config.memory_window_bytes(),
        }
    }

    /// Answers one round's candidates as regions or as bytes. Returns whether the record
    /// filter rejected any.
    fn answer_round(
        &self,
        view: &CommitLogView,
        candidates: &[Candidate],
        filter: &dyn MessageFilter,
        regions: Option<&mut RegionsWanted<'_>>,
        state: &mut PullState,
    ) -> Result<bool, StoreError> {
        let as_regions = regions.and_then(|wanted| wanted.choose_for(candidates).then_some(wanted));
        state.reserve_found(candidates.len(), as_regions.is_none());
        match as_regions {
            Some(wanted) => {
                self.locate_candidates(view, candidates, state, &mut wanted.out)?;
                // Layer two is not applied to regions, so nothing is ever rejected.
                Ok(false)
            }
            None => self.read_candidates(view, candidates, filter, state),
        }
    }

    /// Reads every candidate record in one `read_batch` and applies the record filter.
    /// Records back to back in one CommitLog file are read as one span ([`record_spans`]) and
    /// sliced out of it: a catch-up pull's batch is usually one span, so it costs one or two
    /// read ops instead of one per record. Returns whether any candidate was rejected.
    fn read_candidates(
        &self,
        view: &CommitLogView,
        candidates: &[Candidate],
        filter: &dyn MessageFilter,
        state: &mut PullState,
    ) -> Result<bool, StoreError> {
        if candidates.is_empty() {
            return Ok(false);
        }
        if let Some(read) =
            recent::read_candidates_recent(&self.recent, view, candidates, filter, state)
        {
            return read;
        }
        if self.config.read_mapped && mapped::lags_enough(view, candidates) {
            if let Some(read) = mapped::read_candidates_mapped(view, candidates, filter, state) {
                return read;
            }
        }
        let spans = record_spans(candidates, RECORD_SPAN_READ_MAX_BYTES);
        let ops = span_reads(view, candidates, &spans);
        let wanted: usize = candidates.iter().map(|c| c.size as usize).sum();
        state.buffer.reserve(wanted);
        let mut rejected = false;
        let mut corrupt: Option<usize> = None;
        self.io
            .read_batch(&ops, &mut |span_index, span_bytes| {
                let span = spans[span_index].clone();
                let span_start = candidates[span.start].phy_offset;
                for i in span {
                    let c = &candidates[i];
                    let from = (c.phy_offset - span_start) as usize;
                    let bytes = &span_bytes[from..from + c.size as usize];
                    if !record_head_matches(bytes, c.size) {
                        corrupt.get_or_insert(i);
                        continue;
                    }
                    if !filter.is_matched_by_commit_log(bytes) {
                        state.miss(c.unit_index, GetMessageStatus::NoMatchedMessage);
                        rejected = true;
                        continue;
                    }
                    state.message_ranges.push((state.buffer.len(), bytes.len()));
                    state.buffer.extend_from_slice(bytes);
                    state.add_found(c, bytes.len());
                }
            })
            .map_err(|e| self.commit_log_read_error(e))?;
        if let Some(i) = corrupt {
            return Err(not_a_record(view, &candidates[i]));
        }
        Ok(rejected)
    }

    /// The regions counterpart of `read_candidates`: checks each candidate's record head (one
    /// `read_batch` of 8-byte reads) and appends its location, merging it into the previous
    /// region when it continues it in the same file.
    fn locate_candidates(
        &self,
        view: &CommitLogView,
        candidates: &[Candidate],
        state: &mut PullState,
        regions: &mut Vec<FileRegion>,
    ) -> Result<(), StoreError> {
        if candidates.is_empty() {
            return Ok(());
        }
        let ops = candidate_reads(view, candidates, |c| RECORD_HEAD_BYTES.min(c.size as usize));
        let mut corrupt: Option<usize> = None;
        self.io
            .read_batch(&ops, &mut |i, head| {
                if corrupt.is_none() && !record_head_matches(head, candidates[i].size) {
                    corrupt = Some(i);
                }
            })
            .map_err(|e| self.commit_log_read_error(e))?;
        if let Some(i) = corrupt {
            return Err(not_a_record(view, &candidates[i]));
        }
        for c in candidates {
            let seg = view.segment(c);
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
            state.add_found(c, len_bytes);
        }
        Ok(())
    }

    /// Reads the bytes of `regions`, in order, appending them to `out` (one `read_batch`).
    pub(super) fn read_regions(
        &self,
        regions: &[FileRegion],
        out: &mut BytesMut,
    ) -> Result<(), StoreError> {
        let ops: Vec<ReadOp<'_>> = regions
            .iter()
            .map(|r| ReadOp {
                file: r.file(),
                offset_bytes: r.offset_bytes,
                len_bytes: r.len_bytes,
            })
            .collect();
        out.reserve(regions.iter().map(|r| r.len_bytes).sum());
        self.io
            .read_batch(&ops, &mut |_, bytes| out.extend_from_slice(bytes))
            .map_err(|e| self.commit_log_read_error(e))
    }

    fn commit_log_read_error(&self, e: std::io::Error) -> StoreError {
        StoreError::io("read commit log", self.commit_log.segments().dir(), e)
    }
}

/// Splits `candidates` (in queue order) into runs of records that lie back to back in one
/// CommitLog file, each run at most `span_max_bytes` long unless it is a single record. One
/// read per run covers exactly its records' bytes, nothing between or around them.
fn record_spans(candidates: &[Candidate], span_max_bytes: usize) -> Vec<Range<usize>> {
    let mut spans: Vec<Range<usize>> = Vec::new();
    let mut span_bytes = 0usize;
    for (i, c) in candidates.iter().enumerate() {
        let size = c.size as usize;
        let continues = spans.last().is_some_and(|span| {
            let prev = &candidates[span.end - 1];
            prev.segment_index == c.segment_index
                && prev.phy_offset + i64::from(prev.size) == c.phy_offset
                && span_bytes + size <= span_max_bytes
        });
        match spans.last_mut() {
            Some(span) if continues => {
                span.end = i + 1;
                span_bytes += size;
            }
            _ => {
                spans.push(i..i + 1);
                span_bytes = size;
            }
        }
    }
    spans
}

/// One read per span of [`record_spans`]: from its first record's start to its last's end.
fn span_reads<'a>(
    view: &'a CommitLogView,
    candidates: &[Candidate],
    spans: &[Range<usize>],
) -> Vec<ReadOp<'a>> {
    spans
        .iter()
        .map(|span| {
            let first = &candidates[span.start];
            let last = &candidates[span.end - 1];
            let seg = view.segment(first);
            ReadOp {
                file: &seg.file,
                offset_bytes: (first.phy_offset - seg.start_offset) as u64,
                len_bytes: (last.phy_offset + i64::from(last.size) - first.phy_offset) as usize,
            }
        })
        .collect()
}

/// One read per candidate of the first `len_of(candidate)` bytes of its record.
fn candidate_reads<'a>(
    view: &'a CommitLogView,
    candidates: &[Candidate],
    len_of: impl Fn(&Candidate) -> usize,
) -> Vec<ReadOp<'a>> {
    candidates
        .iter()
        .map(|c| {
            let seg = view.segment(c);
            ReadOp {
                file: &seg.file,
                offset_bytes: (c.phy_offset - seg.start_offset) as u64,
                len_bytes: len_of(c),
            }
        })
        .collect()
}

/// The error for a ConsumeQueue unit whose CommitLog bytes are not the record it describes.
fn not_a_record(view: &CommitLogView, c: &Candidate) -> StoreError {
    StoreError::Corrupted {
        path: view.segment(c).path.clone(),
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::filter::AcceptAll;

    fn spec(queue_offset: i64, max_msg_nums: i32) -> PullSpec<'static> {
        PullSpec {
            filter: &AcceptAll,
            queue_offset,
            max_offset_in_queue: i64::MAX / 2,
            max_msg_nums: i64::from(max_msg_nums),
            pull_size_max_bytes: crate::store::PULL_MSG_SIZE_MAX_BYTES,
        }
    }

    /// The units a pull reads are allocated up front, so their count must be the real bound:
    /// never more than the ConsumeQueue file holding the offset has left (one read never
    /// crosses a file), however large the client's maxMsgNums.
    #[test]
    fn a_pull_wants_no_more_units_than_its_consume_queue_file_has_left() {
        let config = StoreConfig::default();
        let units_per_file = config.consume_queue_file_units as i64;
        assert_eq!(
            spec(0, i32::MAX).units_wanted(&config),
            units_per_file as usize
        );
        assert_eq!(
            spec(units_per_file - 10, i32::MAX).units_wanted(&config),
            10
        );
        let third_file = 3 * units_per_file + 5;
        assert_eq!(
            spec(third_file, i32::MAX).units_wanted(&config),
            units_per_file as usize - 5
        );
        // The ordinary budget: maxFilterMessageSize bytes of units, at least maxMsgNums.
        assert_eq!(spec(0, 32).units_wanted(&config), 800);
        assert_eq!(spec(third_file, 5_000).units_wanted(&config), 5_000);
    }

    /// A pull first reads a full batch and the unit after it, never more than it may scan.
    #[test]
    fn a_pull_first_reads_its_batch_and_one_more_unit() {
        assert_eq!(spec(0, 32).units_first_read(800), 33);
        assert_eq!(spec(0, 1).units_first_read(800), 2);
        assert_eq!(spec(0, 32).units_first_read(10), 10);
        assert_eq!(spec(0, 5_000).units_first_read(5_000), 5_000);
        assert_eq!(spec(0, i32::MAX).units_first_read(7_000), 7_000);
        // A maxMsgNums below one is treated as one by the caller; here it still reads a unit.
        assert_eq!(spec(0, 0).units_first_read(800), 1);
    }

    /// A default pull reserves its whole batch; one asking for more reserves a bounded amount.
    #[test]
    fn a_pull_reserves_room_for_its_batch_within_a_bound() {
        assert_eq!(spec(0, 32).records_expected(), 32);
        assert_eq!(spec(0, 1).records_expected(), 1);
        assert_eq!(spec(0, 0).records_expected(), 1);
        assert_eq!(spec(0, -5).records_expected(), 1);
        assert_eq!(spec(0, i32::MAX).records_expected(), RECORDS_RESERVED_MAX);
    }

    fn candidate(phy_offset: i64, size: i32, segment_index: usize) -> Candidate {
        Candidate {
            unit_index: 0,
            queue_offset: 0,
            phy_offset,
            size,
            segment_index,
        }
    }

    /// A batch of records back to back in one file is one read; a gap, another file or the
    /// span bound starts a new one, and a record longer than the bound is read alone.
    #[test]
    fn back_to_back_records_are_read_as_one_span() {
        let run: Vec<Candidate> = (0..32)
            .map(|i| candidate(1_000 + i * 1_200, 1_200, 0))
            .collect();
        assert_eq!(record_spans(&run, RECORD_SPAN_READ_MAX_BYTES), vec![0..32]);

        let mixed = [
            candidate(0, 100, 0),
            candidate(100, 50, 0),
            // A gap of one byte: another record of another queue lies between.
            candidate(151, 10, 0),
            // Adjacent offsets but the next file (the previous one ended with a blank).
            candidate(161, 10, 1),
            candidate(171, 10, 1),
            // Before the previous record: not a continuation.
            candidate(0, 10, 1),
        ];
        assert_eq!(
            record_spans(&mixed, RECORD_SPAN_READ_MAX_BYTES),
            vec![0..2, 2..3, 3..5, 5..6]
        );

        let bounded: Vec<Candidate> = (0..5).map(|i| candidate(i * 100, 100, 0)).collect();
        assert_eq!(record_spans(&bounded, 200), vec![0..2, 2..4, 4..5]);
        let big = [
            candidate(0, 300, 0),
            candidate(300, 100, 0),
            candidate(400, 100, 0),
        ];
        assert_eq!(record_spans(&big, 200), vec![0..1, 1..3]);
        assert_eq!(record_spans(&[], 200), Vec::<Range<usize>>::new());
    }
}
