//! Recovery at open (Java `CommitLog.recoverNormally` / `recoverAbnormally`,
//! `ConsumeQueue.recover`, `truncateDirtyLogicFiles`).
//!
//! 1. Pick the scan start S, a CommitLog file start: the third-last file (Java's normal
//!    recovery), or earlier when the checkpoint's durable-ConsumeQueue offset is earlier. After a
//!    crash without a usable checkpoint, S is the first file.
//! 2. Every ConsumeQueue keeps only its valid prefix of units pointing below S (plus Java's
//!    filler units); the rest of the queue is zeroed and rebuilt in step 3. This also drops
//!    units that point past the CommitLog end.
//! 3. Scan the CommitLog from S, validating each record (magic, length fields, PHYSICALOFFSET,
//!    body CRC), and write the unit of each dispatched record. The scan stops at the first
//!    invalid record; that is the end of the log.
//! 4. A record whose queue offset is beyond its queue's end means the queue lost units older
//!    than S (for example its files were deleted): redo 2-3 from the first CommitLog file.
//! 5. Zero the CommitLog after the end, delete later files, and correct queue min offsets.
//!
//! Work is bounded by the data after S (at most three files plus what the checkpoint says was
//! not durable), not by the total data size, except in case 4.

use std::sync::Arc;

use super::{lock, write_guard, Inner};
use crate::store::consume_queue::ConsumeQueue;
use crate::store::error::StoreError;
use crate::store::format::{
    self, decode_cq_unit, decode_record_head, encode_cq_unit, Checkpoint, CqUnit, RecordHead,
    CQ_UNIT_SIZE_BYTES, END_FILE_BLANK_SIZE_MIN_BYTES,
};
use crate::store::io::ReadOp;
use crate::store::segment::{self, Segment, SegmentList};
use crate::store::types::RecoveryReport;

/// Bytes read per call while scanning the CommitLog (records larger than this are read whole).
const COMMIT_LOG_SCAN_CHUNK_BYTES: usize = 1024 * 1024;
/// Bytes read per call while scanning a ConsumeQueue file (a multiple of 20).
const CONSUME_QUEUE_SCAN_CHUNK_BYTES: usize = 12_800 * CQ_UNIT_SIZE_BYTES;
const _: () = assert!(CONSUME_QUEUE_SCAN_CHUNK_BYTES.is_multiple_of(CQ_UNIT_SIZE_BYTES));
/// How many trailing CommitLog files a normal recovery re-validates (Java uses 3).
const RECOVER_TAIL_FILES: usize = 3;

enum ScanOutcome {
    End(ScanEnd),
    NeedFullRebuild,
}

/// Where and why the validating scan stopped.
struct ScanEnd {
    end_phy_offset: i64,
    invalid_tail: bool,
    last_store_timestamp_ms: i64,
    /// Why the bytes at `end_phy_offset` are not a record, when a later CommitLog file still
    /// holds data (corruption, not a torn tail).
    mid_log: Option<String>,
}

impl Inner {
    pub(super) fn recover(
        &self,
        abnormal: bool,
        checkpoint: Option<Checkpoint>,
    ) -> Result<RecoveryReport, StoreError> {
        let file_size = self.commit_log.file_size_bytes();
        let found = SegmentList::scan_dir(self.commit_log.segments().dir(), file_size as u64)?;
        self.commit_log.segments().install(&found)?;
        self.load_queues()?;
        let segs = self.commit_log.segments().snapshot();
        let mut report = RecoveryReport {
            abnormal,
            ..RecoveryReport::default()
        };
        if segs.is_empty() {
            // No CommitLog: no unit can point at anything.
            for cq in self.all_queues() {
                report.cq_units_dropped += self.cut_queue(&cq, 0)?;
                self.correct_min_offset_in_queue(&cq, 0)?;
            }
            self.commit_log.set_max_phy_offset(0);
            return Ok(report);
        }
        let start_index = scan_start_index(&segs, abnormal, checkpoint, file_size);
        let mut scan_from = segs[start_index].start_offset;
        let mut full = start_index == 0;
        let scan_end = loop {
            report.scanned_from_phy_offset = scan_from;
            for cq in self.all_queues() {
                report.cq_units_dropped += self.cut_queue(&cq, scan_from)?;
            }
            match self.scan_commit_log(&segs, scan_from, full, &mut report)? {
                ScanOutcome::End(scan_end) => break scan_end,
                ScanOutcome::NeedFullRebuild => {
                    tracing::warn!(
                        "a consume queue lacks units older than the scan window; rebuilding all"
                    );
                    scan_from = segs[0].start_offset;
                    full = true;
                    report.full_rebuild = true;
                }
            }
        };
        if let Some(reason) = &scan_end.mid_log {
            report.quarantined_files =
                self.handle_mid_log_corruption(&segs, scan_end.end_phy_offset, reason)?;
        }
        let ScanEnd {
            end_phy_offset,
            invalid_tail,
            last_store_timestamp_ms: last_ts,
            ..
        } = scan_end;
        report.end_phy_offset = end_phy_offset;
        report.invalid_tail_found = invalid_tail;
        report.commit_log_files_deleted =
            self.truncate_commit_log(end_phy_offset, abnormal || invalid_tail)?;
        self.commit_log.set_max_phy_offset(end_phy_offset);
        let min_phy_offset = self.commit_log.min_phy_offset();
        for cq in self.all_queues() {
            self.correct_min_offset_in_queue(&cq, min_phy_offset)?;
        }
        lock(&self.writer).last_store_timestamp_ms = last_ts;
        self.last_store_timestamp_ms
            .store(last_ts, std::sync::atomic::Ordering::Release);
        if invalid_tail {
            tracing::warn!(
                end_offset = end_phy_offset,
                "commit log truncated at an invalid record"
            );
        }
        Ok(report)
    }

    /// Discovers `<root>/consumequeue/<topic>/<queueId>/` directories.
    fn load_queues(&self) -> Result<(), StoreError> {
        let root = self.cq_root();
        let topics = match std::fs::read_dir(&root) {
            Ok(entries) => entries,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(StoreError::io("read dir", &root, e)),
        };
        let units = self.config.consume_queue_file_units;
        let mut loaded = Vec::new();
        for topic_entry in topics {
            let topic_entry = topic_entry.map_err(|e| StoreError::io("read dir", &root, e))?;
            let Ok(topic) = topic_entry.file_name().into_string() else {
                continue;
            };
            let topic_dir = topic_entry.path();
            if !topic_dir.is_dir() {
                continue;
            }
            let queues = std::fs::read_dir(&topic_dir)
                .map_err(|e| StoreError::io("read dir", &topic_dir, e))?;
            for queue_entry in queues {
                let queue_entry =
                    queue_entry.map_err(|e| StoreError::io("read dir", &topic_dir, e))?;
                let Some(queue_id) = queue_entry
                    .file_name()
                    .to_str()
                    .and_then(|name| name.parse::<i32>().ok())
                    .filter(|id| *id >= 0)
                else {
                    continue;
                };
                let cq = ConsumeQueue::new(&root, &topic, queue_id, units, Arc::clone(&self.fs));
                let found =
                    SegmentList::scan_dir(&queue_entry.path(), cq.segments().file_size_bytes())?;
                cq.segments().install(&found)?;
                if let Some(first) = found.first() {
                    cq.set_min_offset_in_queue(first.start_offset / CQ_UNIT_SIZE_BYTES as i64);
                }
                loaded.push(cq);
            }
        }
        let mut queues = write_guard(&self.queues);
        for cq in loaded {
            queues
                .entry(cq.topic.clone())
                .or_default()
                .insert(cq.queue_id, Arc::new(cq));
        }
        Ok(())
    }

    /// Keeps the queue's valid prefix of units pointing below `cut` (and fillers), zeroes the
    /// rest and deletes files after it. Returns how many valid units were dropped.
    fn cut_queue(&self, cq: &ConsumeQueue, cut: i64) -> Result<u64, StoreError> {
        let segs = cq.segments().snapshot();
        let file_bytes = cq.segments().file_size_bytes();
        let mut dropped = 0u64;
        let mut end = 0i64;
        let mut remove_from = None;
        for idx in (0..segs.len()).rev() {
            let seg = &segs[idx];
            let scan = self.scan_cq_file(seg, file_bytes, cut)?;
            dropped += scan.dropped_valid_units;
            if scan.kept_units == 0 && idx > 0 {
                remove_from = Some(seg.start_offset);
                continue;
            }
            end = seg.start_offset / CQ_UNIT_SIZE_BYTES as i64 + scan.kept_units as i64;
            if scan.nonzero_after {
                let from = (scan.kept_units * CQ_UNIT_SIZE_BYTES) as u64;
                cq.zero_tail(seg, from)?;
                cq.mark_dirty();
            }
            break;
        }
        if let Some(start) = remove_from {
            cq.segments().remove_from(start)?;
        }
        cq.set_max_offset_in_queue(end);
        if cq.min_offset_in_queue() > end {
            cq.set_min_offset_in_queue(end);
        }
        Ok(dropped)
    }

    fn scan_cq_file(
        &self,
        seg: &Segment,
        file_bytes: u64,
        cut: i64,
    ) -> Result<CqFileScan, StoreError> {
        let mut scan = CqFileScan::default();
        let mut keeping = true;
        let mut prev_phy_offset = i64::MIN;
        let mut chunk = Vec::with_capacity(CONSUME_QUEUE_SCAN_CHUNK_BYTES);
        let mut pos = 0u64;
        while pos < file_bytes {
            let len = CONSUME_QUEUE_SCAN_CHUNK_BYTES.min((file_bytes - pos) as usize);
            read_into(self, seg, pos, len, &mut chunk)?;
            for bytes in chunk.chunks_exact(CQ_UNIT_SIZE_BYTES) {
                // chunks_exact yields 20 bytes, which always decode.
                let unit = decode_cq_unit(bytes).unwrap_or_default();
                if keeping {
                    let filler = unit == CqUnit::FILLER;
                    let keep = filler
                        || (unit.is_valid()
                            && unit.phy_offset < cut
                            && unit.phy_offset >= prev_phy_offset);
                    if keep {
                        if !filler {
                            prev_phy_offset = unit.phy_offset;
                        }
                        scan.kept_units += 1;
                        continue;
                    }
                    keeping = false;
                }
                if bytes.iter().any(|b| *b != 0) {
                    scan.nonzero_after = true;
                }
                if unit.is_valid() {
                    scan.dropped_valid_units += 1;
                }
            }
            pos += len as u64;
        }
        Ok(scan)
    }

    /// Scans records from `from`, rebuilding ConsumeQueue units, until the first invalid one.
    fn scan_commit_log(
        &self,
        segs: &[Arc<Segment>],
        from: i64,
        full: bool,
        report: &mut RecoveryReport,
    ) -> Result<ScanOutcome, StoreError> {
        let file_size = self.commit_log.file_size_bytes();
        let mut reader = ChunkReader::default();
        let mut pos = from;
        let mut last_ts = 0i64;
        let Some(mut seg_idx) = segment::index_in(segs, from, file_size as u64) else {
            return Ok(end(from, false, last_ts, None));
        };
        loop {
            let Some(seg) = segs.get(seg_idx) else {
                return Ok(end(pos, false, last_ts, None));
            };
            let in_file = pos - seg.start_offset;
            if in_file >= file_size {
                seg_idx += 1;
                continue;
            }
            let room = file_size - in_file;
            let head = reader.read(self, seg, in_file as u64, 8.min(room as usize))?;
            let head_zero = head.iter().all(|b| *b == 0);
            match decode_record_head(head) {
                Ok(RecordHead::Blank { total_size }) if i64::from(total_size) == room => {
                    pos = seg.start_offset + file_size;
                    seg_idx += 1;
                    continue;
                }
                Ok(RecordHead::Message { total_size, .. })
                    if total_size > 0
                        && i64::from(total_size) + END_FILE_BLANK_SIZE_MIN_BYTES as i64 <= room =>
                {
                    let bytes = reader.read(self, seg, in_file as u64, total_size as usize)?;
                    let record = match self.valid_record(bytes, pos) {
                        Ok(record) => record,
                        Err(reason) => {
                            let mid_log = self.mid_log(segs, seg_idx, reason)?;
                            return Ok(end(pos, true, last_ts, mid_log));
                        }
                    };
                    last_ts = last_ts.max(record.store_timestamp_ms);
                    if !self.redispatch(&record, full, report)? {
                        return Ok(ScanOutcome::NeedFullRebuild);
                    }
                    pos += i64::from(total_size);
                }
                head => {
                    let reason = match head {
                        _ if head_zero => "zeroed bytes where a record must be".to_owned(),
                        Ok(RecordHead::Blank { total_size }) => format!(
                            "a BLANK filler of {total_size} bytes that does not end the file"
                        ),
                        Ok(RecordHead::Message { total_size, .. }) => format!(
                            "a record TOTALSIZE of {total_size} bytes that does not fit the file"
                        ),
                        Ok(RecordHead::Invalid { magic_code, .. }) => {
                            format!("an unknown magic code {magic_code:#010x}")
                        }
                        Err(e) => format!("an invalid record head: {e}"),
                    };
                    let mid_log = self.mid_log(segs, seg_idx, reason)?;
                    return Ok(end(pos, !head_zero, last_ts, mid_log));
                }
            }
        }
    }

    fn valid_record<'a>(
        &self,
        bytes: &'a [u8],
        pos: i64,
    ) -> Result<format::DecodedRecord<'a>, String> {
        let record = format::decode_record(bytes).map_err(|e| format!("an invalid record: {e}"))?;
        if record.phy_offset != pos {
            return Err(format!(
                "a record whose PHYSICALOFFSET {} is not its position",
                record.phy_offset
            ));
        }
        if self.config.check_crc_on_recover && !record.body_crc_matches() {
            return Err("a record whose body CRC does not match".to_owned());
        }
        Ok(record)
    }

    /// `Some(reason)` when the CommitLog file after `segs[seg_idx]` holds data: the scan then
    /// stopped at corruption, not at a torn tail. Files are filled in order and the first
    /// record of a file starts at its byte 0, so a later file with data has a non-zero head.
    fn mid_log(
        &self,
        segs: &[Arc<Segment>],
        seg_idx: usize,
        reason: String,
    ) -> Result<Option<String>, StoreError> {
        let Some(next) = segs.get(seg_idx + 1) else {
            return Ok(None);
        };
        let mut head = Vec::with_capacity(8);
        read_into(self, next, 0, 8, &mut head)?;
        if head.iter().all(|b| *b == 0) {
            return Ok(None);
        }
        let later_files = segs.len() - seg_idx - 1;
        Ok(Some(format!(
            "{reason}, with {later_files} later CommitLog file(s) holding data after it"
        )))
    }

    /// Makes sure the record's unit is in its queue. `false` when the queue misses older
    /// units (a full rebuild is needed).
    fn redispatch(
        &self,
        record: &format::DecodedRecord<'_>,
        full: bool,
        report: &mut RecoveryReport,
    ) -> Result<bool, StoreError> {
        if !format::is_dispatched_to_consume_queue(record.sys_flag) || record.queue_offset < 0 {
            return Ok(true);
        }
        let cq = self.get_or_create_queue(record.topic, record.queue_id)?;
        let unit = CqUnit {
            phy_offset: record.phy_offset,
            size: record.total_size,
            tags_code: format::tags_code(record.properties),
        };
        let queue_offset = record.queue_offset;
        let max = cq.max_offset_in_queue();
        if queue_offset < max {
            if cq.read_unit(&self.io, queue_offset)? == Some(unit) {
                return Ok(true);
            }
            // The queue disagrees with the log (a torn unit): the log wins.
            report.cq_units_dropped += (max - queue_offset) as u64;
            truncate_queue(&cq, queue_offset)?;
        } else if queue_offset > max {
            if !full {
                return Ok(false);
            }
            // The log holds this queue only from `queue_offset` on (older data was deleted).
            report.cq_units_dropped += (max - cq.min_offset_in_queue()).max(0) as u64;
            cq.segments().remove_from(0)?;
            cq.set_min_offset_in_queue(queue_offset);
        }
        cq.write_units(queue_offset, &encode_cq_unit(&unit))?;
        cq.set_max_offset_in_queue(queue_offset + 1);
        if cq.min_offset_in_queue() > queue_offset {
            cq.set_min_offset_in_queue(queue_offset);
        }
        report.cq_units_rebuilt += 1;
        Ok(true)
    }

    /// Zeroes the CommitLog after `end` and deletes the files after it.
    fn truncate_commit_log(&self, end: i64, zero: bool) -> Result<usize, StoreError> {
        let file_size = self.commit_log.file_size_bytes();
        let segs = self.commit_log.segments();
        if let Some(seg) = segs.find(end) {
            if zero {
                segs.zero_tail(&seg, (end - seg.start_offset) as u64)?;
            }
            segs.remove_from(seg.start_offset + file_size)
        } else {
            segs.remove_from(end)
        }
    }
}

#[derive(Debug, Default)]
struct CqFileScan {
    kept_units: usize,
    dropped_valid_units: u64,
    nonzero_after: bool,
}

fn end(
    end_phy_offset: i64,
    invalid_tail: bool,
    last_store_timestamp_ms: i64,
    mid_log: Option<String>,
) -> ScanOutcome {
    ScanOutcome::End(ScanEnd {
        end_phy_offset,
        invalid_tail,
        last_store_timestamp_ms,
        mid_log,
    })
}

/// Index of the file where the validating scan starts.
fn scan_start_index(
    segs: &[Arc<Segment>],
    abnormal: bool,
    checkpoint: Option<Checkpoint>,
    file_size: i64,
) -> usize {
    let tail = segs.len().saturating_sub(RECOVER_TAIL_FILES);
    let durable = checkpoint.map(|cp| cp.cq_flushed_phy_offset.min(cp.flushed_phy_offset));
    let checkpoint_index = durable.and_then(|offset| {
        let first = segs.first()?.start_offset;
        let last = segs.last()?;
        if offset < first {
            Some(0)
        } else if offset == last.start_offset + file_size {
            Some(segs.len() - 1)
        } else {
            segment::index_in(segs, offset, file_size as u64)
        }
    });
    match (checkpoint_index, abnormal) {
        (Some(index), _) => index.min(tail),
        (None, true) => 0,
        (None, false) => tail,
    }
}

/// Removes units `queue_offset..` of a queue.
fn truncate_queue(cq: &ConsumeQueue, queue_offset: i64) -> Result<(), StoreError> {
    let file_bytes = cq.segments().file_size_bytes();
    let byte = queue_offset * CQ_UNIT_SIZE_BYTES as i64;
    match cq.segments().find(byte) {
        Some(seg) => {
            cq.zero_tail(&seg, (byte - seg.start_offset) as u64)?;
            cq.segments()
                .remove_from(seg.start_offset + file_bytes as i64)?;
        }
        None => {
            cq.segments().remove_from(byte)?;
        }
    }
    cq.set_max_offset_in_queue(queue_offset);
    cq.mark_dirty();
    Ok(())
}

pub(super) fn read_into(
    inner: &Inner,
    seg: &Segment,
    pos: u64,
    len: usize,
    out: &mut Vec<u8>,
) -> Result<(), StoreError> {
    out.clear();
    let op = ReadOp {
        file: &seg.file,
        offset_bytes: pos,
        len_bytes: len,
    };
    inner
        .io
        .read_batch(&[op], &mut |_, bytes| out.extend_from_slice(bytes))
        .map_err(|e| StoreError::io("read", &seg.path, e))
}

/// A window over one CommitLog file, refilled through the I/O engine.
#[derive(Default)]
pub(super) struct ChunkReader {
    buf: Vec<u8>,
    segment_start: i64,
    /// File position of `buf[0]`.
    pos: u64,
}

impl ChunkReader {
    pub(super) fn read(
        &mut self,
        inner: &Inner,
        seg: &Segment,
        pos: u64,
        len: usize,
    ) -> Result<&[u8], StoreError> {
        let cached = self.segment_start == seg.start_offset
            && !self.buf.is_empty()
            && pos >= self.pos
            && pos + len as u64 <= self.pos + self.buf.len() as u64;
        if !cached {
            let file_size = inner.commit_log.file_size_bytes() as u64;
            let want = len
                .max(COMMIT_LOG_SCAN_CHUNK_BYTES)
                .min((file_size - pos) as usize);
            read_into(inner, seg, pos, want, &mut self.buf)?;
            self.segment_start = seg.start_offset;
            self.pos = pos;
        }
        let at = (pos - self.pos) as usize;
        Ok(&self.buf[at..at + len])
    }
}
