//! One ConsumeQueue: the per topic/queue index of 20-byte units under
//! `<root>/consumequeue/<topic>/<queueId>/`, files of `consume_queue_file_units` units named by
//! their start byte offset (Java `ConsumeQueue`). Queue offset N is unit N.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use crate::store::error::StoreError;
use crate::store::format::{decode_cq_unit, encode_cq_unit, CqUnit, CQ_UNIT_SIZE_BYTES};
use crate::store::fs::{self, Durability, FileSystem, SyncKind};
use crate::store::io::{IoEngine, ReadOp};
use crate::store::segment::{Segment, SegmentList};

const UNIT: i64 = CQ_UNIT_SIZE_BYTES as i64;

/// The files are sparse; [`ConsumeQueue::prepare_write`] allocates their blocks this far
/// ahead of the units being written (3,276 units), one `fallocate` per step.
const CQ_RESERVE_STEP_BYTES: i64 = 64 * 1024;

/// Most units an append leaves in a queue's tail ([`ConsumeQueue::stage_units`]) before it
/// writes them (1,280 bytes): with 10,000 queues, 12.8 MB at most.
pub const CQ_TAIL_UNITS_MAX: usize = 64;

/// The units appended and not yet written to the file: `units` (encoded) from queue offset
/// `from` on, all in one file.
#[derive(Debug, Default)]
struct Tail {
    from: i64,
    units: Vec<u8>,
    /// The queue was deleted: its tail is never written.
    discarded: bool,
}

impl Tail {
    fn len_units(&self) -> i64 {
        (self.units.len() / CQ_UNIT_SIZE_BYTES) as i64
    }

    fn end(&self) -> i64 {
        self.from + self.len_units()
    }
}

#[derive(Debug)]
pub struct ConsumeQueue {
    pub topic: String,
    pub queue_id: i32,
    segs: SegmentList,
    units_per_file: i64,
    /// Next queue offset to write (published after the unit is written).
    max_offset_in_queue: AtomicI64,
    /// First queue offset that still points at live CommitLog data.
    min_offset_in_queue: AtomicI64,
    /// Written since the last ConsumeQueue flush.
    dirty: AtomicBool,
    /// Queue byte offset (unit index × 20) of the end the last fsync of this queue covered:
    /// how much was written since is what [`ConsumeQueue::sync_dirty`]'s least-pages rule
    /// measures. 0 after open.
    synced_end_bytes: AtomicI64,
    /// Queue byte offset (unit index × 20) below which the blocks of the file being written
    /// are allocated (by [`ConsumeQueue::prepare_write`]); 0 after open.
    reserved_end_bytes: AtomicI64,
    /// Units appended and not yet written (see [`ConsumeQueue::stage_units`]).
    tail: Mutex<Tail>,
}

impl ConsumeQueue {
    pub fn new(
        cq_root: &Path,
        topic: &str,
        queue_id: i32,
        units_per_file: u64,
        fs: Arc<dyn FileSystem>,
    ) -> Self {
        let dir = cq_root.join(topic).join(queue_id.to_string());
        ConsumeQueue {
            topic: topic.to_owned(),
            queue_id,
            // Sparse: a unit past the written end reads as zero, which recovery takes as the end
            // of the queue (a written unit has size > 0), so nothing needs the blocks up front.
            // Durable at the flush: a new queue's first append makes no fsync (see
            // `sync_dirty`).
            segs: SegmentList::new(
                dir,
                units_per_file * CQ_UNIT_SIZE_BYTES as u64,
                fs::Prealloc::Sparse,
                fs,
            )
            .with_durability(Durability::AtFlush),
            units_per_file: units_per_file as i64,
            max_offset_in_queue: AtomicI64::new(0),
            min_offset_in_queue: AtomicI64::new(0),
            dirty: AtomicBool::new(false),
            synced_end_bytes: AtomicI64::new(0),
            reserved_end_bytes: AtomicI64::new(0),
            tail: Mutex::new(Tail::default()),
        }
    }

    fn lock_tail(&self) -> MutexGuard<'_, Tail> {
        // Plain data changed in one place at a time; a panic elsewhere leaves it whole.
        self.tail.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The append path's unit write (Java's ConsumeQueue is a memory map: a unit costs a copy,
    /// not a syscall). The units wait in the queue's tail, where readers find them, until
    /// [`CQ_TAIL_UNITS_MAX`] wait, the next units start another file, or the flush thread
    /// writes them ([`ConsumeQueue::write_tail`]) before its fsyncs; a crash loses them and
    /// recovery writes them again from the CommitLog, as it does for units never fsynced.
    /// Units that would span two files are written at once. A failure to write the waiting
    /// units fails this call with nothing staged; they stay in the tail.
    pub fn stage_units(&self, first_queue_offset: i64, units: &[u8]) -> Result<(), StoreError> {
        assert_eq!(units.len() % CQ_UNIT_SIZE_BYTES, 0);
        let count = (units.len() / CQ_UNIT_SIZE_BYTES) as i64;
        let file_start = first_queue_offset - first_queue_offset % self.units_per_file;
        let mut tail = self.lock_tail();
        if tail.discarded {
            // Deleted under the writer lock that appends hold: no append gets here.
            debug_assert!(false, "an append to a deleted queue");
            return Ok(());
        }
        let joins = tail.units.is_empty()
            || (tail.end() == first_queue_offset
                && tail.from - tail.from % self.units_per_file == file_start);
        let direct = first_queue_offset + count > file_start + self.units_per_file
            || count > CQ_TAIL_UNITS_MAX as i64;
        if direct || !joins || tail.len_units() + count > CQ_TAIL_UNITS_MAX as i64 {
            self.write_tail_locked(&mut tail)?;
        }
        if direct {
            drop(tail);
            return self.write_units_unstaged(first_queue_offset, units);
        }
        if tail.units.is_empty() {
            tail.from = first_queue_offset;
        }
        tail.units.extend_from_slice(units);
        self.dirty.store(true, Ordering::Release);
        Ok(())
    }

    /// Writes the units waiting in the tail. On a failure they stay there.
    pub fn write_tail(&self) -> Result<(), StoreError> {
        let mut tail = self.lock_tail();
        self.write_tail_locked(&mut tail)
    }

    fn write_tail_locked(&self, tail: &mut Tail) -> Result<(), StoreError> {
        if tail.units.is_empty() || tail.discarded {
            return Ok(());
        }
        self.write_units_unstaged(tail.from, &tail.units)?;
        tail.from = tail.end();
        tail.units.clear();
        Ok(())
    }

    /// The queue is deleted: what waits in its tail is never written. Pulls still reading the
    /// queue read the units from the tail; its memory goes with the queue.
    pub fn discard_tail(&self) {
        self.lock_tail().discarded = true;
    }

    pub fn segments(&self) -> &SegmentList {
        &self.segs
    }

    pub fn max_offset_in_queue(&self) -> i64 {
        self.max_offset_in_queue.load(Ordering::Acquire)
    }

    pub fn min_offset_in_queue(&self) -> i64 {
        self.min_offset_in_queue.load(Ordering::Acquire)
    }

    pub(crate) fn set_max_offset_in_queue(&self, max: i64) {
        self.max_offset_in_queue.store(max, Ordering::Release);
    }

    pub(crate) fn set_min_offset_in_queue(&self, min: i64) {
        self.min_offset_in_queue.store(min, Ordering::Release);
    }

    pub fn units_per_file(&self) -> i64 {
        self.units_per_file
    }

    /// First queue offset of the next file (Java `ConsumeQueue.rollNextFile`).
    pub fn roll_next_file(&self, queue_offset: i64) -> i64 {
        queue_offset + self.units_per_file - queue_offset % self.units_per_file
    }

    /// Creates the files for units `first_queue_offset..+count` and allocates their blocks,
    /// before the append writes its records: a full disk or a failed creation then fails the
    /// append with nothing written and the store stays writable, while a unit write failing
    /// after its record poisons the store.
    pub fn prepare_write(&self, first_queue_offset: i64, count: usize) -> Result<(), StoreError> {
        let end = first_queue_offset + count as i64;
        let mut queue_offset = first_queue_offset;
        while queue_offset < end {
            let file_start_unit = queue_offset - queue_offset % self.units_per_file;
            let seg = self.segment_for_write(file_start_unit, queue_offset)?;
            let upto = end.min(file_start_unit + self.units_per_file);
            self.reserve_blocks(&seg, upto * UNIT)?;
            queue_offset = upto;
        }
        Ok(())
    }

    /// Creates the first file of a queue that has never had one (no file, no unit), without
    /// allocating its blocks: the sparse file costs an inode, not disk. Says whether it made
    /// one. The caller holds the store's writer lock, as appends do when they create files.
    pub fn create_first_file(&self) -> Result<bool, StoreError> {
        if !self.segs.is_empty() || self.max_offset_in_queue() != 0 {
            return Ok(false);
        }
        self.segment_for_write(0, 0)?;
        Ok(true)
    }

    /// Allocates the blocks of `seg` up to queue byte `end_bytes`, rounded up to the next
    /// [`CQ_RESERVE_STEP_BYTES`] (and at most to the end of the file).
    fn reserve_blocks(&self, seg: &Segment, end_bytes: i64) -> Result<(), StoreError> {
        let reserved = self.reserved_end_bytes.load(Ordering::Acquire);
        if end_bytes <= reserved {
            return Ok(());
        }
        let file_bytes = self.segs.file_size_bytes() as i64;
        // Below the written units nothing is a hole, so starting at the file's start (after an
        // open) costs only a walk over allocated extents.
        let from = (reserved - seg.start_offset).clamp(0, file_bytes);
        // end_bytes > reserved >= 0 and the write is inside seg: the difference is positive.
        let in_file_end = (end_bytes - seg.start_offset) as u64;
        let step = CQ_RESERVE_STEP_BYTES as u64;
        let to = (in_file_end.div_ceil(step) * step).min(file_bytes as u64) as i64;
        fs::allocate_range(
            self.segs.fs(),
            &seg.file,
            &seg.path,
            from as u64,
            (to - from) as u64,
        )?;
        self.reserved_end_bytes
            .store(seg.start_offset + to, Ordering::Release);
        Ok(())
    }

    /// Zeroes `seg` from byte `from_bytes` on (recovery's truncation); the freed blocks are no
    /// longer reserved.
    pub fn zero_tail(&self, seg: &Segment, from_bytes: u64) -> Result<(), StoreError> {
        self.segs.zero_tail(seg, from_bytes)?;
        self.reserved_end_bytes
            .fetch_min(seg.start_offset + from_bytes as i64, Ordering::AcqRel);
        Ok(())
    }

    /// Writes encoded units for queue offsets `first_queue_offset..` (the caller publishes the
    /// new max). A queue whose first file starts before `first_queue_offset` gets Java's filler
    /// units in front.
    pub fn write_units(&self, first_queue_offset: i64, units: &[u8]) -> Result<(), StoreError> {
        self.write_tail()?;
        self.write_units_unstaged(first_queue_offset, units)
    }

    fn write_units_unstaged(
        &self,
        first_queue_offset: i64,
        units: &[u8],
    ) -> Result<(), StoreError> {
        assert_eq!(units.len() % CQ_UNIT_SIZE_BYTES, 0);
        assert!(first_queue_offset >= 0);
        let mut queue_offset = first_queue_offset;
        let mut rest = units;
        while !rest.is_empty() {
            let file_start_unit = queue_offset - queue_offset % self.units_per_file;
            let seg = self.segment_for_write(file_start_unit, queue_offset)?;
            let room_units = (file_start_unit + self.units_per_file - queue_offset) as usize;
            let n = room_units.min(rest.len() / CQ_UNIT_SIZE_BYTES);
            let (now, later) = rest.split_at(n * CQ_UNIT_SIZE_BYTES);
            let pos = ((queue_offset - file_start_unit) * UNIT) as u64;
            self.segs.fs().write_at(&seg.file, &seg.path, now, pos)?;
            seg.mark_dirty();
            queue_offset += n as i64;
            rest = later;
        }
        self.dirty.store(true, Ordering::Release);
        Ok(())
    }

    fn segment_for_write(
        &self,
        file_start_unit: i64,
        queue_offset: i64,
    ) -> Result<Arc<Segment>, StoreError> {
        let start_byte = file_start_unit * UNIT;
        if let Some(seg) = self.segs.find(start_byte) {
            return Ok(seg);
        }
        let first_in_queue = self.segs.is_empty();
        let seg = self.segs.get_or_create(start_byte)?;
        // The new file waits for the flush's fsyncs even if nothing is written into it.
        self.mark_dirty();
        if first_in_queue && queue_offset > file_start_unit {
            // Java `fillPreBlank`: a queue that starts mid-file gets filler units before it.
            let filler = encode_cq_unit(&CqUnit::FILLER);
            let count = (queue_offset - file_start_unit) as usize;
            let mut buf = Vec::with_capacity(count * CQ_UNIT_SIZE_BYTES);
            for _ in 0..count {
                buf.extend_from_slice(&filler);
            }
            self.segs.fs().write_at(&seg.file, &seg.path, &buf, 0)?;
            seg.mark_dirty();
        }
        Ok(seg)
    }

    /// Reads up to `count_max` units from `queue_offset`, never past the end of the file
    /// holding `queue_offset`, those in the file the way `how` says. `None` when that file does
    /// not exist (Java `getIndexBuffer` returning null).
    pub fn read_units(
        &self,
        io: &IoEngine,
        queue_offset: i64,
        count_max: usize,
        how: UnitRead,
        out: &mut Vec<CqUnit>,
    ) -> Result<Option<()>, StoreError> {
        out.clear();
        let Some(seg) = self.segs.find(queue_offset * UNIT) else {
            return Ok(None);
        };
        let in_file = queue_offset - seg.start_offset / UNIT;
        let room = (self.units_per_file - in_file) as usize;
        let count = count_max.min(room);
        if count == 0 {
            return Ok(Some(()));
        }
        // Units from the tail's start on are copied from the tail now (units leave it only
        // after they are written, so those below its start are in the file); the file's go in
        // front of them.
        let (from_file, staged) = self.copy_staged(queue_offset, count, out);
        if from_file > 0 {
            let op = ReadOp {
                file: &seg.file,
                offset_bytes: (in_file * UNIT) as u64,
                len_bytes: from_file * CQ_UNIT_SIZE_BYTES,
            };
            let mapped = how == UnitRead::Mapped && copy_mapped_units(&seg, &op, out);
            if !mapped {
                read_units_op(io, &seg, op, out)?;
            }
            out.rotate_left(staged);
        }
        Ok(Some(()))
    }

    /// Appends to `out` the tail's units among the `count` from `queue_offset`. Returns how
    /// many of the `count` lie before the tail (in the file), and how many it appended.
    fn copy_staged(
        &self,
        queue_offset: i64,
        count: usize,
        out: &mut Vec<CqUnit>,
    ) -> (usize, usize) {
        let tail = self.lock_tail();
        if tail.units.is_empty() || queue_offset >= tail.end() {
            return (count, 0);
        }
        let from_file = usize::try_from(tail.from - queue_offset).map_or(0, |n| n.min(count));
        let skip = usize::try_from(queue_offset - tail.from).unwrap_or(0);
        let before = out.len();
        out.extend(
            tail.units
                .chunks_exact(CQ_UNIT_SIZE_BYTES)
                .skip(skip)
                .take(count - from_file)
                .filter_map(|chunk| decode_cq_unit(chunk).ok()),
        );
        (from_file, out.len() - before)
    }

    /// The unit at `queue_offset`, if its file exists.
    pub fn read_unit(
        &self,
        io: &IoEngine,
        queue_offset: i64,
    ) -> Result<Option<CqUnit>, StoreError> {
        let mut out = Vec::with_capacity(1);
        Ok(self
            .read_units(io, queue_offset, 1, UnitRead::Engine, &mut out)?
            .and_then(|()| out.first().copied()))
    }

    /// Clears and returns the dirty flag.
    pub fn take_dirty(&self) -> bool {
        self.dirty.swap(false, Ordering::AcqRel)
    }

    pub(crate) fn mark_dirty(&self) {
        self.dirty.store(true, Ordering::Release);
    }

    /// The flush's part for this queue: fdatasyncs every file written since the last flush;
    /// a file created since (its creation made no fsync) is fsynced with its metadata, and
    /// then the directories its creation may have added entries to: the queue's, the topic's
    /// and the ConsumeQueue root (each once per flush, through `synced_dirs`). So the units
    /// are durable, and findable after a crash, before the checkpoint counts them.
    ///
    /// With `least_pages` > 0 (Java `flushConsumeQueueLeastPages`), a queue whose end moved
    /// across fewer than that many 4 KiB page boundaries since its last fsync is left dirty
    /// for a later flush (Java `MappedFile.isAbleToFlush`); 0 syncs whatever is dirty.
    pub fn sync_dirty(
        &self,
        least_pages: u64,
        synced_dirs: &mut HashSet<PathBuf>,
    ) -> Result<(), StoreError> {
        // Read before the fsyncs: the units below it were written before it was published.
        let end_bytes = self.max_offset_in_queue() * UNIT;
        if least_pages > 0 && !spans_pages(self.synced_end_bytes(), end_bytes, least_pages) {
            return Ok(());
        }
        if !self.take_dirty() {
            return Ok(());
        }
        let fs = self.segs.fs();
        for seg in self.segs.snapshot().iter() {
            if !seg.take_dirty() {
                continue;
            }
            let new_entry = seg.take_entry_unsynced();
            let kind = if new_entry {
                SyncKind::All
            } else {
                SyncKind::Data
            };
            // A failure is returned as is: the caller poisons the store, and nothing is marked
            // dirty again, so no later fsync is taken as vouching for these bytes.
            fs.sync(&seg.file, &seg.path, kind)?;
            if new_entry {
                self.sync_dirs(synced_dirs)?;
            }
        }
        self.synced_end_bytes.store(end_bytes, Ordering::Release);
        Ok(())
    }

    fn synced_end_bytes(&self) -> i64 {
        self.synced_end_bytes.load(Ordering::Acquire)
    }

    /// fsyncs the queue's directory, the topic's and the ConsumeQueue root, skipping those in
    /// `synced_dirs` and adding the others.
    fn sync_dirs(&self, synced_dirs: &mut HashSet<PathBuf>) -> Result<(), StoreError> {
        let queue_dir = self.segs.dir();
        let topic_dir = queue_dir.parent();
        let root = topic_dir.and_then(Path::parent);
        for dir in [Some(queue_dir), topic_dir, root].into_iter().flatten() {
            if synced_dirs.contains(dir) {
                continue;
            }
            fs::sync_dir(self.segs.fs(), dir)?;
            synced_dirs.insert(dir.to_path_buf());
        }
        Ok(())
    }
}

/// The page size of Java's least-pages rule (`MappedFile.OS_PAGE_SIZE`).
const FLUSH_PAGE_BYTES: i64 = 4096;

/// Whether the written end moved from `synced_end_bytes` to `end_bytes` across at least
/// `least_pages` page boundaries (Java compares page numbers, not byte counts). An end that
/// moved back (a truncated queue) spans none: the thorough flush syncs it.
fn spans_pages(synced_end_bytes: i64, end_bytes: i64, least_pages: u64) -> bool {
    let pages = end_bytes / FLUSH_PAGE_BYTES - synced_end_bytes / FLUSH_PAGE_BYTES;
    pages >= i64::try_from(least_pages).unwrap_or(i64::MAX)
}

/// How [`ConsumeQueue::read_units`] reads the units that are in the file (those still in the
/// queue's tail are copied from memory either way).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UnitRead {
    /// One read op of the io engine.
    Engine,
    /// Copied from the file's read-only mapping ([`Segment::mapped`]); through the engine when
    /// the file has no usable mapping or the copy faulted.
    Mapped,
}

/// Appends the units `op` covers, copied from `seg`'s mapping; false (with `out` as it was)
/// when that cannot be done, so the caller reads them through the engine, which reports any
/// real error.
fn copy_mapped_units(seg: &Segment, op: &ReadOp<'_>, out: &mut Vec<CqUnit>) -> bool {
    let Some(map) = seg.mapped() else {
        return false;
    };
    let before = out.len();
    let from = op.offset_bytes as usize;
    let copied = map.copy_guarded(|bytes| {
        let Some(units) = bytes.get(from..from + op.len_bytes) else {
            return;
        };
        out.extend(
            units
                .chunks_exact(CQ_UNIT_SIZE_BYTES)
                .filter_map(|chunk| decode_cq_unit(chunk).ok()),
        );
    });
    let complete = copied.is_ok() && out.len() - before == op.len_bytes / CQ_UNIT_SIZE_BYTES;
    if !complete {
        out.truncate(before);
    }
    complete
}

fn read_units_op(
    io: &IoEngine,
    seg: &Segment,
    op: ReadOp<'_>,
    out: &mut Vec<CqUnit>,
) -> Result<(), StoreError> {
    let mut decode_error = None;
    io.read_batch(&[op], &mut |_, bytes| {
        for chunk in bytes.chunks_exact(CQ_UNIT_SIZE_BYTES) {
            match decode_cq_unit(chunk) {
                Ok(unit) => out.push(unit),
                Err(e) => decode_error = Some(e),
            }
        }
    })
    .map_err(|e| StoreError::io("read consume queue", &seg.path, e))?;
    match decode_error {
        // Cannot happen: chunks_exact yields exactly 20 bytes; kept as a typed error anyway.
        Some(e) => Err(StoreError::Corrupted {
            path: seg.path.clone(),
            offset: op.offset_bytes as i64,
            reason: e.to_string(),
        }),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use std::fs::File;
    use std::sync::Mutex;

    use super::*;
    use crate::store::fs::{DiskUsage, RealFs};

    /// The real file system, recording every fsync (path and kind).
    #[derive(Debug, Default)]
    struct SyncLog(Mutex<Vec<(PathBuf, SyncKind)>>);

    impl SyncLog {
        fn take(&self) -> Vec<(PathBuf, SyncKind)> {
            std::mem::take(&mut *self.0.lock().unwrap())
        }
    }

    impl FileSystem for SyncLog {
        fn create(&self, path: &Path) -> Result<File, StoreError> {
            RealFs.create(path)
        }
        fn allocate(
            &self,
            file: &File,
            path: &Path,
            offset_bytes: u64,
            len_bytes: u64,
            keep_size: bool,
        ) -> Result<(), StoreError> {
            RealFs.allocate(file, path, offset_bytes, len_bytes, keep_size)
        }
        fn write_at(
            &self,
            file: &File,
            path: &Path,
            buf: &[u8],
            at: u64,
        ) -> Result<(), StoreError> {
            RealFs.write_at(file, path, buf, at)
        }
        fn read_at(
            &self,
            file: &File,
            path: &Path,
            buf: &mut [u8],
            at: u64,
        ) -> Result<(), StoreError> {
            RealFs.read_at(file, path, buf, at)
        }
        fn sync(&self, file: &File, path: &Path, kind: SyncKind) -> Result<(), StoreError> {
            self.0.lock().unwrap().push((path.to_path_buf(), kind));
            RealFs.sync(file, path, kind)
        }
        fn rename(&self, from: &Path, to: &Path) -> Result<(), StoreError> {
            RealFs.rename(from, to)
        }
        fn disk_usage(&self, path: &Path) -> Result<DiskUsage, StoreError> {
            RealFs.disk_usage(path)
        }
    }

    fn unit(phy_offset: i64) -> [u8; CQ_UNIT_SIZE_BYTES] {
        encode_cq_unit(&CqUnit {
            phy_offset,
            size: 100,
            tags_code: 0,
        })
    }

    /// Java's least-pages rule: the periodic flush skips a queue whose end crossed fewer page
    /// boundaries than asked since its last fsync, and keeps it dirty; 0 (the thorough flush)
    /// syncs it whatever was written.
    #[test]
    fn a_queue_that_grew_less_than_the_least_pages_waits_for_the_thorough_flush() {
        let (_tmp, root, log) = queue_root();
        let q = ConsumeQueue::new(&root, "T", 0, 2_000, log.clone());
        append(&q);
        q.sync_dirty(2, &mut HashSet::new()).unwrap();
        assert_eq!(log.take(), vec![], "one unit: skipped");
        // Up to the unit that ends at byte 8,180: still inside page 1.
        while q.max_offset_in_queue() < 409 {
            append(&q);
        }
        q.sync_dirty(2, &mut HashSet::new()).unwrap();
        assert_eq!(log.take(), vec![], "one page boundary crossed: skipped");
        append(&q);
        q.sync_dirty(2, &mut HashSet::new()).unwrap();
        let file = root.join("T/0/00000000000000000000");
        assert_eq!(
            log.take().first(),
            Some(&(file.clone(), SyncKind::All)),
            "two page boundaries: synced, the new file with its directories"
        );
        append(&q);
        q.sync_dirty(2, &mut HashSet::new()).unwrap();
        assert_eq!(log.take(), vec![], "counted from the last fsync");
        q.sync_dirty(0, &mut HashSet::new()).unwrap();
        assert_eq!(
            log.take(),
            vec![(file, SyncKind::Data)],
            "the thorough flush syncs what the rule left"
        );
        q.sync_dirty(0, &mut HashSet::new()).unwrap();
        assert_eq!(log.take(), vec![], "nothing dirty: nothing synced");
    }

    #[test]
    fn spans_pages_compares_page_numbers_like_java() {
        assert!(spans_pages(0, 8_192, 2));
        assert!(!spans_pages(0, 8_191, 2));
        assert!(
            spans_pages(4_095, 8_192, 1),
            "one byte over a boundary counts"
        );
        assert!(!spans_pages(8_192, 4_096, 1), "a queue cut back spans none");
        assert!(spans_pages(100, 100, 0));
    }

    /// A ConsumeQueue root in a temporary directory, and the log of the fsyncs made there.
    fn queue_root() -> (tempfile::TempDir, PathBuf, Arc<SyncLog>) {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("consumequeue");
        std::fs::create_dir(&root).unwrap();
        (tmp, root, Arc::new(SyncLog::default()))
    }

    /// Appends one unit at the queue's end, as the store's append does.
    fn append(cq: &ConsumeQueue) {
        let at = cq.max_offset_in_queue();
        cq.prepare_write(at, 1).unwrap();
        cq.write_units(at, &unit(at * 100)).unwrap();
        cq.set_max_offset_in_queue(at + 1);
    }

    /// Stages units at the queue's end, as the store's append does.
    fn stage(cq: &ConsumeQueue, count: i64) {
        let at = cq.max_offset_in_queue();
        cq.prepare_write(at, count as usize).unwrap();
        let units: Vec<u8> = (at..at + count).flat_map(|o| unit(o * 100)).collect();
        cq.stage_units(at, &units).unwrap();
        cq.set_max_offset_in_queue(at + count);
    }

    /// The phyOffsets `read_units` answers, and those the file holds, from `from` on.
    fn read_back(cq: &ConsumeQueue, from: i64, count: usize) -> (Vec<i64>, Vec<i64>) {
        let io = IoEngine::new_pread();
        let mut out = Vec::new();
        cq.read_units(&io, from, count, UnitRead::Engine, &mut out)
            .unwrap();
        let read = out.iter().map(|u| u.phy_offset).collect();
        let seg = cq.segments().find(from * UNIT).unwrap();
        let mut raw = vec![0u8; count * CQ_UNIT_SIZE_BYTES];
        let in_file = (from * UNIT - seg.start_offset) as u64;
        RealFs
            .read_at(&seg.file, &seg.path, &mut raw, in_file)
            .unwrap();
        let on_disk = raw
            .chunks_exact(CQ_UNIT_SIZE_BYTES)
            .map(|c| decode_cq_unit(c).unwrap().phy_offset)
            .collect();
        (read, on_disk)
    }

    /// Appended units wait in the tail, where reads find them; the file gets them when the tail
    /// is full (then in one write) or at write_tail, and a read across both answers them all.
    #[test]
    fn staged_units_are_read_from_the_tail_until_they_are_written() {
        let (_tmp, root, log) = queue_root();
        let q = ConsumeQueue::new(&root, "T", 0, 1000, log);
        stage(&q, 3);
        assert_eq!(read_back(&q, 0, 3), (vec![0, 100, 200], vec![0, 0, 0]));
        q.write_tail().unwrap();
        assert_eq!(read_back(&q, 0, 3), (vec![0, 100, 200], vec![0, 100, 200]));
        for _ in 0..CQ_TAIL_UNITS_MAX {
            stage(&q, 1);
        }
        let end = 3 + CQ_TAIL_UNITS_MAX as i64;
        let last = read_back(&q, end - 1, 1);
        assert_eq!(last, (vec![(end - 1) * 100], vec![0]), "the tail is full");
        stage(&q, 1);
        let (read, on_disk) = read_back(&q, end - 2, 4);
        assert_eq!(read, vec![(end - 2) * 100, (end - 1) * 100, end * 100]);
        assert_eq!(on_disk, vec![(end - 2) * 100, (end - 1) * 100, 0, 0]);
    }

    /// Units read from the file's mapping are those the engine reads, in front of the tail's;
    /// once the file is cut under the mapping (a read error to the mapping) the read goes
    /// through the engine, which reports it, and the mapping is not used again.
    #[test]
    fn units_copied_from_the_mapping_are_those_the_engine_reads() {
        let (_tmp, root, log) = queue_root();
        let q = ConsumeQueue::new(&root, "T", 0, 1000, log);
        stage(&q, 300);
        q.write_tail().unwrap();
        stage(&q, 5);
        let io = IoEngine::new_pread();
        let read = |how: UnitRead, from: i64, count: usize| {
            let mut out = Vec::new();
            q.read_units(&io, from, count, how, &mut out)
                .map(|_| out.iter().map(|u| u.phy_offset).collect::<Vec<_>>())
        };
        for (from, count) in [(0, 32), (17, 33), (280, 25), (299, 6), (303, 2)] {
            let mapped = read(UnitRead::Mapped, from, count).unwrap();
            assert_eq!(mapped, read(UnitRead::Engine, from, count).unwrap());
            let expected: Vec<i64> = (from..from + count as i64).map(|o| o * 100).collect();
            assert_eq!(mapped, expected, "from {from}");
        }
        let seg = q.segments().find(0).unwrap();
        assert_eq!(seg.mapping_in_use(), Some(true));
        std::fs::OpenOptions::new()
            .write(true)
            .open(&seg.path)
            .unwrap()
            .set_len(0)
            .unwrap();
        assert!(read(UnitRead::Mapped, 0, 32).is_err(), "the engine's error");
        assert_eq!(seg.mapping_in_use(), Some(false), "poisoned");
    }

    /// The tail holds units of one file: the next file's first unit writes it first, and units
    /// that span two files are written at once.
    #[test]
    fn the_tail_never_spans_two_files() {
        let (_tmp, root, log) = queue_root();
        let q = ConsumeQueue::new(&root, "T", 0, 8, log);
        stage(&q, 7);
        stage(&q, 1);
        assert_eq!(
            read_back(&q, 0, 8).1,
            vec![0; 8],
            "up to the file's end: staged"
        );
        stage(&q, 1);
        assert_eq!(
            read_back(&q, 0, 8).1,
            (0..8).map(|o| o * 100).collect::<Vec<_>>()
        );
        assert_eq!(read_back(&q, 8, 1), (vec![800], vec![0]));
        stage(&q, 9);
        assert_eq!(
            read_back(&q, 8, 8).1,
            (8..16).map(|o| o * 100).collect::<Vec<_>>()
        );
        assert_eq!(read_back(&q, 16, 2), (vec![1600, 1700], vec![1600, 1700]));
    }

    /// A deleted queue's waiting units are never written (a flush holding it writes nothing),
    /// and pulls still reading it find them.
    #[test]
    fn a_discarded_tail_is_never_written() {
        let (_tmp, root, log) = queue_root();
        let q = ConsumeQueue::new(&root, "T", 0, 1000, log);
        stage(&q, 2);
        q.discard_tail();
        q.write_tail().unwrap();
        assert_eq!(
            read_back(&q, 0, 2),
            (vec![0, 100], vec![0, 0]),
            "still read, not written"
        );
    }

    /// A write of the waiting units that fails fails the append that needed it, with nothing
    /// staged; the units stay readable and are written by a later call.
    #[test]
    fn a_failed_tail_write_keeps_the_units() {
        use crate::store::fs::fault::{Failpoint, FaultFs};
        let (_tmp, root, _log) = queue_root();
        let fault = Arc::new(FaultFs::new());
        let q = ConsumeQueue::new(&root, "T", 0, 1000, Arc::clone(&fault) as _);
        stage(&q, CQ_TAIL_UNITS_MAX as i64);
        fault.arm(Failpoint::ShortWrite, "consumequeue", 1);
        let at = q.max_offset_in_queue();
        let err = q.stage_units(at, &unit(at * 100)).unwrap_err();
        assert!(
            matches!(err, StoreError::Io { op: "pwrite", .. }),
            "{err:?}"
        );
        let (read, _) = read_back(&q, 0, CQ_TAIL_UNITS_MAX);
        assert_eq!(read.len(), CQ_TAIL_UNITS_MAX);
        assert_eq!(read[CQ_TAIL_UNITS_MAX - 1], (at - 1) * 100);
        stage(&q, 1);
        let (read, on_disk) = read_back(&q, 0, CQ_TAIL_UNITS_MAX + 1);
        assert_eq!(
            read,
            on_disk[..CQ_TAIL_UNITS_MAX]
                .iter()
                .copied()
                .chain([at * 100])
                .collect::<Vec<_>>()
        );
    }

    #[test]
    fn a_new_queue_file_is_made_durable_by_the_flush_with_its_directories_not_by_the_append() {
        let (_tmp, root, log) = queue_root();
        let q0 = ConsumeQueue::new(&root, "T", 0, 100, log.clone());
        let q1 = ConsumeQueue::new(&root, "T", 1, 100, log.clone());
        append(&q0);
        append(&q1);
        assert_eq!(
            log.take(),
            vec![],
            "creating and writing a queue file makes no fsync"
        );

        let file = |q: i32| {
            root.join("T")
                .join(q.to_string())
                .join("00000000000000000000")
        };
        let mut synced_dirs = HashSet::new();
        q0.sync_dirty(0, &mut synced_dirs).unwrap();
        q1.sync_dirty(0, &mut synced_dirs).unwrap();
        assert_eq!(
            log.take(),
            vec![
                (file(0), SyncKind::All),
                (root.join("T/0"), SyncKind::All),
                (root.join("T"), SyncKind::All),
                (root.clone(), SyncKind::All),
                // The topic's directory and the root were synced once in this flush.
                (file(1), SyncKind::All),
                (root.join("T/1"), SyncKind::All),
            ]
        );

        // Later units: the file's data only, and nothing for a queue without new units.
        append(&q0);
        let mut synced_dirs = HashSet::new();
        q0.sync_dirty(0, &mut synced_dirs).unwrap();
        q1.sync_dirty(0, &mut synced_dirs).unwrap();
        assert_eq!(log.take(), vec![(file(0), SyncKind::Data)]);

        // The queue's next file is new again: fsynced with its directories at the flush.
        for _ in 0..100 {
            append(&q1);
        }
        assert_eq!(q1.segments().len(), 2);
        assert_eq!(log.take(), vec![]);
        let next = root
            .join("T/1")
            .join(format!("{:020}", 100 * CQ_UNIT_SIZE_BYTES));
        q1.sync_dirty(0, &mut HashSet::new()).unwrap();
        assert_eq!(
            log.take(),
            vec![
                (file(1), SyncKind::Data),
                (next, SyncKind::All),
                (root.join("T/1"), SyncKind::All),
                (root.join("T"), SyncKind::All),
                (root.clone(), SyncKind::All),
            ]
        );
    }
}
