//! One message index file (Java `IndexFile` + `IndexHeader`): a hash table from
//! `topic#key` to CommitLog offsets, under `<root>/index/`, named by its creation time.
//!
//! Layout (big-endian, see `docs/FORMAT.md`): a 40-byte header, `hash_slot_num` slots of 4
//! bytes (the newest entry of the slot, 0 = empty), then `index_num` entries of 20 bytes
//! (keyHash i32, phyOffset i64, timeDiff i32 seconds since the header's beginTimestamp,
//! prevIndex i32 = the slot's previous newest entry). Entry 0 is never written: entries are
//! numbered from 1 and `indexCount` is the next one to write.
//!
//! The file is sparse; the header and the slots get their blocks when the file is created, the
//! entries [`ENTRY_RESERVE_STEP_BYTES`] ahead of the writes. Reads and writes are positional
//! (`pread`/`pwrite`). The file being written keeps its slot table in memory, and its newest
//! entries until [`IndexFile::publish`] writes them in one `pwrite`; a flush writes them, then
//! the slot pages that changed, then the header, and fsyncs. Readers copy the header, then
//! follow a slot's chain, through the memory copies where they are newer than the file. A
//! crash loses what was not flushed; the header on disk counts only what was, and recovery
//! indexes the rest again ([`IndexFile::repair_tail`]). Every operation on the file (create,
//! allocate, read, write, fsync, remove) goes through the store's [`FileSystem`].
//!
//! A failed write or flush (an entry or slot write, the header's, or the fsync) is never
//! retried as such: a failed fsync may have dropped the dirty pages, and a second one would
//! then report them durable. The file is in doubt until [`IndexFile::rewind_to_durable`] sets
//! it back to its last durable header; the keys after it are indexed (written) again, and the
//! next flush fsyncs them.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use crate::store::error::StoreError;
use crate::store::format::java_string_hash_code;
use crate::store::fs::{self, FileSystem};
pub use crate::store::index_header::{
    decode_index_header, encode_index_header, IndexHeader, INDEX_HEADER_SIZE_BYTES,
};

/// `IndexFile.hashSlotSize`.
pub const HASH_SLOT_SIZE_BYTES: usize = 4;
/// `IndexFile.indexSize`.
pub const INDEX_ENTRY_SIZE_BYTES: usize = 20;
/// `IndexFile.invalidIndex`: a slot or prevIndex of 0 means "none".
pub const INVALID_INDEX: i32 = 0;
/// Width of an index file name (`UtilAll.timeMillisToHumanString`: yyyyMMddHHmmssSSS).
pub const INDEX_FILE_NAME_DIGITS: usize = 17;
/// Most entries one query visits in one file (a hot key's chain, or a time window far behind
/// the newest entries, can be millions long; each visit is a 20-byte read). Java walks the whole
/// chain; past this bound the query answers what it found.
pub const INDEX_CHAIN_VISITS_MAX: i32 = 100_000;
/// Entry blocks are allocated this far ahead of the entry being written (3,276 entries).
const ENTRY_RESERVE_STEP_BYTES: u64 = 64 * 1024;
/// Slots per page of the slot table whose changes are tracked (4 KiB of slots).
const SLOTS_PER_PAGE: usize = 1024;
/// Most slot pages written by one `pwrite` at a flush (1 MiB).
const SLOT_WRITE_PAGES_MAX: usize = 256;
/// Pending entries written by a put before it returns, once this many bytes wait (3,276
/// entries): bounds the memory of one step of the index thread, or of a recovery's rebuild.
const PENDING_ENTRIES_MAX_BYTES: usize = 64 * 1024;

/// One 20-byte entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct IndexEntry {
    pub key_hash: i32,
    pub phy_offset: i64,
    /// Seconds between the header's beginTimestamp and the message's store time.
    pub time_diff_s: i32,
    pub prev_index: i32,
}

pub fn encode_index_entry(e: &IndexEntry) -> [u8; INDEX_ENTRY_SIZE_BYTES] {
    let mut out = [0u8; INDEX_ENTRY_SIZE_BYTES];
    out[0..4].copy_from_slice(&e.key_hash.to_be_bytes());
    out[4..12].copy_from_slice(&e.phy_offset.to_be_bytes());
    out[12..16].copy_from_slice(&e.time_diff_s.to_be_bytes());
    out[16..20].copy_from_slice(&e.prev_index.to_be_bytes());
    out
}

pub fn decode_index_entry(b: &[u8; INDEX_ENTRY_SIZE_BYTES]) -> IndexEntry {
    let i32_at = |at: usize| i32::from_be_bytes(b[at..at + 4].try_into().unwrap_or_default());
    IndexEntry {
        key_hash: i32_at(0),
        phy_offset: i64::from_be_bytes(b[4..12].try_into().unwrap_or_default()),
        time_diff_s: i32_at(12),
        prev_index: i32_at(16),
    }
}

/// Java `IndexFile.indexKeyHashMethod`: `abs(key.hashCode())`, and 0 for `Integer.MIN_VALUE`.
pub fn index_key_hash(key: &str) -> i32 {
    java_string_hash_code(key).checked_abs().unwrap_or(0)
}

/// [`index_key_hash`] of [`build_index_key`]`(topic, key)`, without building the string: the
/// index thread hashes every key of every message.
pub fn index_key_hash_of(topic: &str, key: &str) -> i32 {
    [topic, "#", key]
        .iter()
        .flat_map(|part| part.encode_utf16())
        .fold(0i32, |h, unit| {
            h.wrapping_mul(31).wrapping_add(i32::from(unit))
        })
        .checked_abs()
        .unwrap_or(0)
}

/// The indexed key of a message key (Java `IndexService.buildKey`).
pub fn build_index_key(topic: &str, key: &str) -> String {
    format!("{topic}#{key}")
}

/// Total bytes of an index file with these dimensions.
pub fn index_file_size_bytes(hash_slot_num: i32, index_num: i32) -> u64 {
    INDEX_HEADER_SIZE_BYTES as u64
        + hash_slot_num as u64 * HASH_SLOT_SIZE_BYTES as u64
        + index_num as u64 * INDEX_ENTRY_SIZE_BYTES as u64
}

/// The name of a file created at `time_ms` (UTC; Java uses the local time zone. Only the
/// order of the names matters when the files are loaded).
pub fn index_file_name(time_ms: i64) -> String {
    let ms = time_ms.rem_euclid(1000);
    let secs = time_ms.div_euclid(1000);
    let (days, sod) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    let (y, m, d) = civil_from_days(days);
    format!(
        "{y:04}{m:02}{d:02}{:02}{:02}{:02}{ms:03}",
        sod / 3600,
        sod % 3600 / 60,
        sod % 60
    )
}

/// Days since 1970-01-01 → (year, month, day) in the proleptic Gregorian calendar.
fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

/// A name [`index_file_name`] could have made.
pub fn is_index_file_name(name: &str) -> bool {
    name.len() == INDEX_FILE_NAME_DIGITS && name.bytes().all(|b| b.is_ascii_digit())
}

/// What the writer keeps beside the header.
#[derive(Debug, Default)]
struct WriteState {
    header: IndexHeader,
    /// The header of the last flush that succeeded (or as read at open).
    durable: IndexHeader,
    /// A write or flush failed since: see the module docs.
    in_doubt: bool,
    /// The slot values as the writer left them, so a put reads no slot from the file: loaded
    /// at the first put (zeros for a new file), dropped once a full file is flushed.
    /// `maxHashSlotNum` × 4 bytes (20 MB with Java's default, in zeroed pages the OS commits
    /// as they are touched), for the one file being written. While it is loaded it is the
    /// truth for queries: the file's slots are written at [`IndexFile::flush`] only.
    slots: Option<Vec<i32>>,
    /// One bit per [`SLOTS_PER_PAGE`] slots changed since they were last written.
    slot_pages_dirty: Vec<u64>,
    /// Encoded entries counted in `header` but not yet written, from entry `pending_from` on
    /// (queries read them from here); written by [`IndexFile::publish`].
    pending: Vec<u8>,
    pending_from: i32,
    /// File position below which the entry blocks are allocated.
    reserved_end_bytes: u64,
    /// Header changed since the last [`IndexFile::flush`].
    dirty: bool,
}

impl WriteState {
    fn mark_slot_dirty(&mut self, slot: usize) {
        let page = slot / SLOTS_PER_PAGE;
        let word = page / 64;
        if self.slot_pages_dirty.len() <= word {
            self.slot_pages_dirty.resize(word + 1, 0);
        }
        self.slot_pages_dirty[word] |= 1 << (page % 64);
    }

    /// The runs of dirty slot pages, as `[first, end)` page numbers, at most
    /// [`SLOT_WRITE_PAGES_MAX`] pages each.
    fn dirty_slot_runs(&self) -> Vec<(usize, usize)> {
        let is_dirty = |page: usize| {
            self.slot_pages_dirty
                .get(page / 64)
                .is_some_and(|w| w & (1 << (page % 64)) != 0)
        };
        let pages = self.slot_pages_dirty.len() * 64;
        let mut runs = Vec::new();
        let mut page = 0;
        while page < pages {
            if !is_dirty(page) {
                page += 1;
                continue;
            }
            let first = page;
            while page < pages && is_dirty(page) && page - first < SLOT_WRITE_PAGES_MAX {
                page += 1;
            }
            runs.push((first, page));
        }
        runs
    }

    /// The entry `index` if it is pending (not yet written).
    fn pending_entry(&self, index: i32) -> Option<IndexEntry> {
        let at = usize::try_from(index.checked_sub(self.pending_from)?).ok()?;
        let raw = self
            .pending
            .get(at * INDEX_ENTRY_SIZE_BYTES..(at + 1) * INDEX_ENTRY_SIZE_BYTES)?;
        Some(decode_index_entry(raw.try_into().ok()?))
    }
}

/// One open index file.
#[derive(Debug)]
pub struct IndexFile {
    pub path: PathBuf,
    file: File,
    fs: Arc<dyn FileSystem>,
    hash_slot_num: i32,
    index_num: i32,
    state: Mutex<WriteState>,
}

impl IndexFile {
    /// Creates a file whose header starts at the previous file's end (Java's constructor with
    /// `endPhyOffset` / `endTimestamp`), 0 for the first one, and flushes it. On a failure the
    /// file is removed again: a half-made file left in the directory would be loaded as the
    /// newest one by the next open.
    pub fn create(
        fs: Arc<dyn FileSystem>,
        path: PathBuf,
        (hash_slot_num, index_num): (i32, i32),
        prev_end_phy_offset: i64,
        prev_end_timestamp_ms: i64,
    ) -> Result<IndexFile, StoreError> {
        let size = index_file_size_bytes(hash_slot_num, index_num);
        let made =
            fs::create_presized(fs.as_ref(), &path, size, fs::Prealloc::Sparse).and_then(|file| {
                IndexFile::init_created(
                    Arc::clone(&fs),
                    file,
                    path.clone(),
                    (hash_slot_num, index_num),
                    (prev_end_phy_offset, prev_end_timestamp_ms),
                )
            });
        // A failure inside create_presized may come after the file got its name (the
        // directory's fsync).
        if made.is_err() && path.exists() {
            if let Err(e) = fs::remove_file(fs.as_ref(), &path) {
                tracing::warn!(error = %e, "removing a half-made index file failed");
            }
        }
        made
    }

    fn init_created(
        fs: Arc<dyn FileSystem>,
        file: File,
        path: PathBuf,
        (hash_slot_num, index_num): (i32, i32),
        (prev_end_phy_offset, prev_end_timestamp_ms): (i64, i64),
    ) -> Result<IndexFile, StoreError> {
        let slots_end =
            INDEX_HEADER_SIZE_BYTES as u64 + hash_slot_num as u64 * HASH_SLOT_SIZE_BYTES as u64;
        fs::allocate_range(fs.as_ref(), &file, &path, 0, slots_end)?;
        let mut header = IndexHeader::default();
        if prev_end_phy_offset > 0 {
            header.begin_phy_offset = prev_end_phy_offset;
            header.end_phy_offset = prev_end_phy_offset;
        }
        if prev_end_timestamp_ms > 0 {
            header.begin_timestamp_ms = prev_end_timestamp_ms;
            header.end_timestamp_ms = prev_end_timestamp_ms;
        }
        let index_file = IndexFile {
            path,
            file,
            fs,
            hash_slot_num,
            index_num,
            state: Mutex::new(WriteState {
                header,
                durable: header,
                in_doubt: false,
                slots: Some(vec![0; hash_slot_num as usize]),
                reserved_end_bytes: slots_end,
                dirty: true,
                ..WriteState::default()
            }),
        };
        index_file.flush()?;
        Ok(index_file)
    }

    /// Opens an existing file and reads its header. A file of another size was made with other
    /// dimensions and cannot be read with these: an error naming both.
    pub fn open(
        fs: Arc<dyn FileSystem>,
        path: &Path,
        hash_slot_num: i32,
        index_num: i32,
    ) -> Result<IndexFile, StoreError> {
        let file = fs::open_rw(path)?;
        let want = index_file_size_bytes(hash_slot_num, index_num);
        let len = file
            .metadata()
            .map_err(|e| StoreError::io("stat", path, e))?
            .len();
        if len != want {
            return Err(StoreError::Corrupted {
                path: path.to_path_buf(),
                offset: 0,
                reason: format!(
                    "index file is {len} bytes; maxHashSlotNum {hash_slot_num} and maxIndexNum \
                     {index_num} make {want}"
                ),
            });
        }
        let mut raw = [0u8; INDEX_HEADER_SIZE_BYTES];
        fs.read_at(&file, path, &mut raw, 0)?;
        let header = decode_index_header(&raw);
        // Entries are written at indexCount: a count outside the file would write outside it.
        let counts = 0..=index_num;
        if !counts.contains(&header.index_count) || !counts.contains(&header.hash_slot_count) {
            return Err(StoreError::Corrupted {
                path: path.to_path_buf(),
                offset: 0,
                reason: format!(
                    "index header counts {} entries and {} slots; maxIndexNum is {index_num}",
                    header.index_count, header.hash_slot_count
                ),
            });
        }
        Ok(IndexFile {
            path: path.to_path_buf(),
            file,
            fs,
            hash_slot_num,
            index_num,
            state: Mutex::new(WriteState {
                header,
                durable: header,
                in_doubt: false,
                slots: None,
                reserved_end_bytes: 0,
                dirty: false,
                ..WriteState::default()
            }),
        })
    }

    /// A copy of the header as the writer last left it.
    pub fn header(&self) -> IndexHeader {
        self.lock().header
    }

    /// Java `IndexFile.isWriteFull`.
    pub fn is_write_full(&self) -> bool {
        self.lock().header.index_count >= self.index_num
    }

    fn lock(&self) -> MutexGuard<'_, WriteState> {
        // The state is plain data updated field by field; a panic elsewhere leaves it whole.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn slot_pos(&self, key_hash: i32) -> u64 {
        let slot = key_hash % self.hash_slot_num;
        INDEX_HEADER_SIZE_BYTES as u64 + slot as u64 * HASH_SLOT_SIZE_BYTES as u64
    }

    fn entry_pos(&self, index: i32) -> u64 {
        INDEX_HEADER_SIZE_BYTES as u64
            + self.hash_slot_num as u64 * HASH_SLOT_SIZE_BYTES as u64
            + index as u64 * INDEX_ENTRY_SIZE_BYTES as u64
    }

    /// The slot's value on disk.
    fn read_slot(&self, key_hash: i32) -> Result<i32, StoreError> {
        let mut raw = [0u8; HASH_SLOT_SIZE_BYTES];
        self.fs
            .read_at(&self.file, &self.path, &mut raw, self.slot_pos(key_hash))?;
        Ok(i32::from_be_bytes(raw))
    }

    /// The slot's value as the writer left it: from the slot table while it is loaded (the
    /// file's copy may be older), else from the file.
    fn slot_value(&self, key_hash: i32) -> Result<i32, StoreError> {
        let slot = (key_hash % self.hash_slot_num) as usize;
        if let Some(slots) = self.lock().slots.as_ref() {
            return Ok(slots[slot]);
        }
        self.read_slot(key_hash)
    }

    /// The entry on disk.
    fn read_entry(&self, index: i32) -> Result<IndexEntry, StoreError> {
        let mut raw = [0u8; INDEX_ENTRY_SIZE_BYTES];
        self.fs
            .read_at(&self.file, &self.path, &mut raw, self.entry_pos(index))?;
        Ok(decode_index_entry(&raw))
    }

    /// The entry as the writer left it: pending ones from memory, the rest from the file.
    fn entry_at(&self, index: i32) -> Result<IndexEntry, StoreError> {
        if let Some(entry) = self.lock().pending_entry(index) {
            return Ok(entry);
        }
        self.read_entry(index)
    }

    /// Java `IndexFile.putKey`: `Ok(false)` when the file is full. The entry waits in memory
    /// (queries see it) until [`IndexFile::publish`] or [`IndexFile::flush`] writes it, or
    /// this put once [`PENDING_ENTRIES_MAX_BYTES`] wait; the slot that points at it is written
    /// at the flush, after the entries; the header (in memory; on disk at the flush) counts
    /// it. Java's file is a memory map whose pages the OS writes back; here one write carries
    /// a step's entries and one a flush's slot pages, not two `pwrite`s per key. A file in
    /// doubt after a failed write or flush takes no key.
    pub fn put_key(
        &self,
        key: &str,
        phy_offset: i64,
        store_timestamp_ms: i64,
    ) -> Result<bool, StoreError> {
        self.put_key_hash(index_key_hash(key), phy_offset, store_timestamp_ms)
    }

    /// [`IndexFile::put_key`] of a key by its [`index_key_hash`] (the file keeps no more of it).
    pub fn put_key_hash(
        &self,
        key_hash: i32,
        phy_offset: i64,
        store_timestamp_ms: i64,
    ) -> Result<bool, StoreError> {
        let mut state = self.lock();
        if state.in_doubt {
            return Err(self.in_doubt_error());
        }
        let count = state.header.index_count;
        if count >= self.index_num {
            return Ok(false);
        }
        let slot = (key_hash % self.hash_slot_num) as usize;
        if state.slots.is_none() {
            state.slots = Some(self.read_all_slots()?);
        }
        let mut slot_value = state
            .slots
            .as_ref()
            .map_or(INVALID_INDEX, |slots| slots[slot]);
        // Java takes `> indexCount` as empty; the slot's entry is always below indexCount, so
        // `>=` is the same for a whole file and also drops a slot left by a torn write.
        if slot_value <= INVALID_INDEX || slot_value >= count {
            slot_value = INVALID_INDEX;
        }
        let begin = state.header.begin_timestamp_ms;
        let time_diff_s = if begin <= 0 {
            0
        } else {
            ((store_timestamp_ms - begin) / 1000).clamp(0, i64::from(i32::MAX)) as i32
        };
        let entry = IndexEntry {
            key_hash,
            phy_offset,
            time_diff_s,
            prev_index: slot_value,
        };
        self.reserve_entry_blocks(
            &mut state,
            self.entry_pos(count) + INDEX_ENTRY_SIZE_BYTES as u64,
        )?;
        if state.pending.is_empty() {
            state.pending_from = count;
        }
        state.pending.extend_from_slice(&encode_index_entry(&entry));
        if let Some(slots) = state.slots.as_mut() {
            slots[slot] = count;
        }
        state.mark_slot_dirty(slot);
        let h = &mut state.header;
        if h.index_count <= 1 {
            h.begin_phy_offset = phy_offset;
            h.begin_timestamp_ms = store_timestamp_ms;
        }
        if slot_value == INVALID_INDEX {
            h.hash_slot_count += 1;
        }
        h.index_count += 1;
        h.end_phy_offset = phy_offset;
        h.end_timestamp_ms = store_timestamp_ms;
        state.dirty = true;
        if state.pending.len() >= PENDING_ENTRIES_MAX_BYTES {
            self.write_pending(&mut state)?;
        }
        Ok(true)
    }

    /// Writes the pending entries (one `pwrite`). A failure leaves the file in doubt, as a
    /// failed flush does: the entries' slots and the header already count them.
    pub fn publish(&self) -> Result<(), StoreError> {
        let mut state = self.lock();
        if state.in_doubt {
            return Err(self.in_doubt_error());
        }
        self.write_pending(&mut state)
    }

    fn write_pending(&self, state: &mut WriteState) -> Result<(), StoreError> {
        if state.pending.is_empty() {
            return Ok(());
        }
        let pos = self.entry_pos(state.pending_from);
        if let Err(e) = self
            .fs
            .write_at(&self.file, &self.path, &state.pending, pos)
        {
            state.in_doubt = true;
            return Err(e);
        }
        state.pending.clear();
        Ok(())
    }

    /// Writes the changed slot pages from the slot table, after the entries they point at.
    fn write_dirty_slots(&self, state: &mut WriteState) -> Result<(), StoreError> {
        let runs = state.dirty_slot_runs();
        let Some(slots) = state.slots.as_ref() else {
            debug_assert!(runs.is_empty(), "dirty slots without a slot table");
            return Ok(());
        };
        let mut raw = Vec::new();
        for (first, end) in runs {
            let from = first * SLOTS_PER_PAGE;
            let to = (end * SLOTS_PER_PAGE).min(slots.len());
            raw.clear();
            raw.extend(slots[from..to].iter().flat_map(|v| v.to_be_bytes()));
            let pos = INDEX_HEADER_SIZE_BYTES as u64 + (from * HASH_SLOT_SIZE_BYTES) as u64;
            self.fs.write_at(&self.file, &self.path, &raw, pos)?;
        }
        state.slot_pages_dirty.clear();
        Ok(())
    }

    /// The whole slot area, in one read.
    fn read_all_slots(&self) -> Result<Vec<i32>, StoreError> {
        let mut raw = vec![0u8; self.hash_slot_num as usize * HASH_SLOT_SIZE_BYTES];
        self.fs.read_at(
            &self.file,
            &self.path,
            &mut raw,
            INDEX_HEADER_SIZE_BYTES as u64,
        )?;
        Ok(raw
            .chunks_exact(HASH_SLOT_SIZE_BYTES)
            .map(|b| i32::from_be_bytes([b[0], b[1], b[2], b[3]]))
            .collect())
    }

    fn reserve_entry_blocks(&self, state: &mut WriteState, end: u64) -> Result<(), StoreError> {
        if end <= state.reserved_end_bytes {
            return Ok(());
        }
        let size = index_file_size_bytes(self.hash_slot_num, self.index_num);
        let to = end.div_ceil(ENTRY_RESERVE_STEP_BYTES) * ENTRY_RESERVE_STEP_BYTES;
        let to = to.min(size);
        let from = state.reserved_end_bytes.min(to);
        fs::allocate_range(self.fs.as_ref(), &self.file, &self.path, from, to - from)?;
        state.reserved_end_bytes = to;
        Ok(())
    }

    /// Writes the pending entries, the changed slots and the header, and fsyncs the file
    /// (Java `IndexFile.flush`), when anything changed. A failure leaves the file in doubt
    /// (see the module docs): later flushes and puts fail until
    /// [`IndexFile::rewind_to_durable`]. The caller serializes flushes with puts.
    pub fn flush(&self) -> Result<(), StoreError> {
        let mut state = self.lock();
        if state.in_doubt {
            return Err(self.in_doubt_error());
        }
        if !state.dirty {
            return Ok(());
        }
        let header = state.header;
        let written = self
            .write_pending(&mut state)
            .and_then(|()| self.write_dirty_slots(&mut state))
            .and_then(|()| {
                self.fs
                    .write_at(&self.file, &self.path, &encode_index_header(&header), 0)
            });
        // Queries read the slot table and the pending entries, both written now: the fsync
        // need not hold them off.
        drop(state);
        let written =
            written.and_then(|()| self.fs.sync(&self.file, &self.path, fs::SyncKind::Data));
        let mut state = self.lock();
        match written {
            Ok(()) => {
                state.durable = header;
                state.dirty = false;
                if header.index_count >= self.index_num {
                    // Full and on disk: the file's slots are the truth from now on.
                    state.slots = None;
                    state.pending = Vec::new();
                }
            }
            Err(_) => state.in_doubt = true,
        }
        written
    }

    /// A flush failed and [`IndexFile::rewind_to_durable`] has not run since.
    pub fn is_in_doubt(&self) -> bool {
        self.lock().in_doubt
    }

    fn in_doubt_error(&self) -> StoreError {
        StoreError::IndexFlushFailed {
            path: self.path.clone(),
        }
    }

    /// After a failed flush: sets the header back to the last durable one and repairs the
    /// slots and entries past it as after a crash ([`IndexFile::repair_tail`]), so the keys
    /// after it are written again when the caller indexes the CommitLog again from the
    /// header's end; the next flush writes the header again and fsyncs it all. Returns that
    /// header, or `None` when the file is not in doubt. A failure here leaves it in doubt, and
    /// the next call starts over.
    pub fn rewind_to_durable(&self) -> Result<Option<IndexHeader>, StoreError> {
        {
            let mut state = self.lock();
            if !state.in_doubt {
                return Ok(None);
            }
            state.header = state.durable;
            state.dirty = true;
            // What was not flushed is indexed again: the slot table is read from the file
            // (repaired below), and entries not written are dropped.
            state.slots = None;
            state.slot_pages_dirty.clear();
            state.pending.clear();
        }
        self.repair_tail()?;
        let mut state = self.lock();
        state.in_doubt = false;
        Ok(Some(state.durable))
    }

    /// Java `IndexFile.isTimeMatched`.
    pub fn is_time_matched(&self, begin_ms: i64, end_ms: i64) -> bool {
        let h = self.header();
        (begin_ms < h.begin_timestamp_ms && end_ms > h.end_timestamp_ms)
            || (begin_ms >= h.begin_timestamp_ms && begin_ms <= h.end_timestamp_ms)
            || (end_ms >= h.begin_timestamp_ms && end_ms <= h.end_timestamp_ms)
    }

    /// Java `IndexFile.selectPhyOffset`: appends to `out` (up to `max_num` in all) the CommitLog
    /// offsets of the entries of `key` stored within `begin_ms..=end_ms`, newest first.
    pub fn select_phy_offsets(
        &self,
        out: &mut Vec<i64>,
        key: &str,
        max_num: usize,
        begin_ms: i64,
        end_ms: i64,
    ) -> Result<(), StoreError> {
        let header = self.header();
        let count = header.index_count;
        let key_hash = index_key_hash(key);
        let slot_value = self.slot_value(key_hash)?;
        if slot_value <= INVALID_INDEX || slot_value >= count || count <= 1 {
            return Ok(());
        }
        let mut next = slot_value;
        // Each step moves to a strictly older entry (prevIndex < index), so the walk ends
        // within `count` steps even in a damaged file; and it visits at most
        // INDEX_CHAIN_VISITS_MAX of them.
        for visited in 0..count {
            if visited >= INDEX_CHAIN_VISITS_MAX {
                tracing::debug!(key, file = %self.path.display(), "index chain walk bound reached");
                break;
            }
            if out.len() >= max_num {
                break;
            }
            let entry = self.entry_at(next)?;
            if entry.time_diff_s < 0 {
                break;
            }
            let time_read = header.begin_timestamp_ms + i64::from(entry.time_diff_s) * 1000;
            if entry.key_hash == key_hash && time_read >= begin_ms && time_read <= end_ms {
                out.push(entry.phy_offset);
            }
            let prev = entry.prev_index;
            if prev <= INVALID_INDEX || prev >= next || time_read < begin_ms {
                break;
            }
            next = prev;
        }
        Ok(())
    }

    /// After a crash the header on disk may count fewer entries than were written: entries at
    /// and after `indexCount` belong to messages recovery indexes again, and slots may point at
    /// them. Each such slot is set back to the newest entry below `indexCount` of its chain
    /// (the entries keep their prevIndex), so re-indexing rebuilds the same chains. Returns the
    /// entries found past the header's count.
    pub fn repair_tail(&self) -> Result<u64, StoreError> {
        let count = self.header().index_count;
        let mut found = 0u64;
        let mut index = count;
        while index < self.index_num {
            let entry = self.read_entry(index)?;
            if entry == IndexEntry::default() {
                break;
            }
            found += 1;
            let slot = self.read_slot(entry.key_hash.max(0))?;
            if slot >= count {
                let restored = self.oldest_valid_before(slot, count)?;
                let pos = self.slot_pos(entry.key_hash.max(0));
                self.fs
                    .write_at(&self.file, &self.path, &restored.to_be_bytes(), pos)?;
            }
            index += 1;
        }
        // Slots changed on disk: the next put reads them again.
        self.lock().slots = None;
        if found > 0 {
            // The stale entries are rewritten as recovery re-indexes; zero them meanwhile.
            let from = self.entry_pos(count);
            let zeros = vec![0u8; found as usize * INDEX_ENTRY_SIZE_BYTES];
            self.fs.write_at(&self.file, &self.path, &zeros, from)?;
        }
        Ok(found)
    }

    /// Follows prevIndex from `index` until an entry below `count` (or none: 0).
    fn oldest_valid_before(&self, mut index: i32, count: i32) -> Result<i32, StoreError> {
        for _ in 0..self.index_num {
            if index < count || index >= self.index_num {
                break;
            }
            let prev = self.read_entry(index)?.prev_index;
            if prev >= index {
                return Ok(INVALID_INDEX);
            }
            index = prev;
        }
        if index <= INVALID_INDEX || index >= count {
            return Ok(INVALID_INDEX);
        }
        Ok(index)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::fs::RealFs;

    #[test]
    fn open_refuses_a_header_counting_outside_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("20260101000000000");
        for (index_count, hash_slot_count) in [(i32::MAX, 0), (33, 0), (1, i32::MAX), (1, -5)] {
            let mut image = vec![0u8; index_file_size_bytes(8, 32) as usize];
            image[32..36].copy_from_slice(&hash_slot_count.to_be_bytes());
            image[36..40].copy_from_slice(&index_count.to_be_bytes());
            std::fs::write(&path, &image).unwrap();
            let err = IndexFile::open(RealFs::shared(), &path, 8, 32).unwrap_err();
            assert!(matches!(err, StoreError::Corrupted { .. }), "{err}");
        }
        let mut image = vec![0u8; index_file_size_bytes(8, 32) as usize];
        image[36..40].copy_from_slice(&32i32.to_be_bytes());
        std::fs::write(&path, &image).unwrap();
        let file = IndexFile::open(RealFs::shared(), &path, 8, 32).unwrap();
        assert!(!file.put_key("T#k", 1, 2).unwrap());
    }

    #[test]
    fn file_names_are_java_human_time() {
        // 2024-02-29T13:05:09.007Z
        assert_eq!(index_file_name(1_709_211_909_007), "20240229130509007");
        assert_eq!(index_file_name(0), "19700101000000000");
        assert!(is_index_file_name("20240229130509007"));
        assert!(!is_index_file_name("00000000000000000000"));
    }

    #[test]
    fn key_hash_is_java_abs_hash_code() {
        // "a".hashCode() = 97; Integer.MIN_VALUE maps to 0 ("polygenelubricants" hashes to it).
        for (topic, key) in [("TopicTest", "key"), ("T", ""), ("主题", "clé"), ("", "😀")] {
            assert_eq!(
                index_key_hash_of(topic, key),
                index_key_hash(&build_index_key(topic, key))
            );
        }
        assert_eq!(index_key_hash("a"), 97);
        assert_eq!(java_string_hash_code("polygenelubricants"), i32::MIN);
        assert_eq!(index_key_hash("polygenelubricants"), 0);
        assert_eq!(
            index_key_hash("TopicTest#key"),
            java_string_hash_code("TopicTest#key").abs()
        );
    }

    fn small(dir: &Path, name: &str) -> IndexFile {
        IndexFile::create(RealFs::shared(), dir.join(name), (8, 16), 0, 0).unwrap()
    }

    #[test]
    fn put_and_select_follow_the_chain() {
        let dir = tempfile::tempdir().unwrap();
        let f = small(dir.path(), "20240101000000000");
        let t0 = 1_700_000_000_000;
        assert!(f.put_key("T#a", 100, t0).unwrap());
        assert!(f.put_key("T#b", 200, t0 + 1500).unwrap());
        assert!(f.put_key("T#a", 300, t0 + 3000).unwrap());
        let mut out = Vec::new();
        f.select_phy_offsets(&mut out, "T#a", 10, 0, i64::MAX)
            .unwrap();
        assert_eq!(out, vec![300, 100]);
        out.clear();
        f.select_phy_offsets(&mut out, "T#a", 10, t0 + 2000, i64::MAX)
            .unwrap();
        assert_eq!(out, vec![300]);
        let h = f.header();
        assert_eq!(
            (h.index_count, h.begin_phy_offset, h.end_phy_offset),
            (4, 100, 300)
        );
        assert_eq!((h.begin_timestamp_ms, h.end_timestamp_ms), (t0, t0 + 3000));
    }

    #[test]
    fn full_file_refuses_and_reopen_reads_the_flushed_header() {
        let dir = tempfile::tempdir().unwrap();
        let f = small(dir.path(), "20240101000000000");
        for i in 0..15 {
            assert!(f.put_key(&format!("T#{i}"), i, 1000).unwrap());
        }
        assert!(f.is_write_full());
        assert!(!f.put_key("T#x", 99, 1000).unwrap());
        f.flush().unwrap();
        let again = IndexFile::open(RealFs::shared(), &f.path, 8, 16).unwrap();
        assert_eq!(again.header(), f.header());
        assert!(IndexFile::open(RealFs::shared(), &f.path, 8, 17).is_err());
    }

    fn offsets(f: &IndexFile, key: &str) -> Vec<i64> {
        let mut out = Vec::new();
        f.select_phy_offsets(&mut out, key, 10, 0, i64::MAX)
            .unwrap();
        out
    }

    /// A failed fsync is never retried as success: the file refuses keys and flushes (no
    /// second fsync is even tried) until it is set back to its last durable header; the keys
    /// after it are then written again and only a fresh fsync of them makes them durable.
    #[test]
    fn a_failed_flush_is_never_retried_as_success() {
        use crate::store::fs::fault::{Failpoint, FaultFs};
        let dir = tempfile::tempdir().unwrap();
        let fault = Arc::new(FaultFs::new());
        let path = dir.path().join("20240101000000000");
        let f = IndexFile::create(Arc::clone(&fault) as _, path.clone(), (8, 16), 0, 0).unwrap();
        f.put_key("T#a", 100, 1000).unwrap();
        f.flush().unwrap();
        let durable = f.header();
        let rewrite = |f: &IndexFile| {
            assert!(f.put_key("T#b", 200, 2000).unwrap());
            assert!(f.put_key("T#a", 300, 3000).unwrap());
        };
        rewrite(&f);
        fault.arm(Failpoint::FsyncError, "2024", 2);
        for attempt in 0..2 {
            let err = f.flush().unwrap_err();
            assert!(matches!(err, StoreError::Io { op: "fsync", .. }), "{err:?}");
            assert_eq!(fault.fired().len(), attempt + 1);
            assert!(f.is_in_doubt());
            let again = f.flush().unwrap_err();
            assert!(
                matches!(again, StoreError::IndexFlushFailed { .. }),
                "{again:?}"
            );
            assert!(matches!(
                f.put_key("T#c", 400, 4000).unwrap_err(),
                StoreError::IndexFlushFailed { .. }
            ));
            assert_eq!(fault.fired().len(), attempt + 1, "no fsync tried in doubt");
            assert_eq!(f.rewind_to_durable().unwrap(), Some(durable));
            assert_eq!(f.rewind_to_durable().unwrap(), None);
            assert_eq!(f.header(), durable);
            assert_eq!(offsets(&f, "T#a"), vec![100]);
            assert!(offsets(&f, "T#b").is_empty());
            rewrite(&f);
        }
        f.flush().unwrap();
        let reopened = IndexFile::open(RealFs::shared(), &path, 8, 16).unwrap();
        assert_eq!(reopened.header().index_count, 4);
        assert_eq!(offsets(&reopened, "T#a"), vec![300, 100]);
        assert_eq!(offsets(&reopened, "T#b"), vec![200]);
    }

    /// Every operation of the file goes through the file system it was opened on: a failure
    /// of each is returned, and the next call succeeds.
    #[test]
    fn every_file_operation_goes_through_the_file_system() {
        use crate::store::fs::fault::{Failpoint, FaultFs};
        let dir = tempfile::tempdir().unwrap();
        let fault = Arc::new(FaultFs::new());
        let fs: Arc<dyn FileSystem> = Arc::clone(&fault) as _;
        let path = dir.path().join("20240101000000000");
        for (point, op) in [
            (Failpoint::CreateEnospc, "create"),
            (Failpoint::AllocateEnospc, "fallocate"),
            (Failpoint::RenameError, "rename"),
            (Failpoint::FsyncError, "fsync"),
        ] {
            fault.arm(point, "2024", 1);
            let err = IndexFile::create(Arc::clone(&fs), path.clone(), (8, 16), 0, 0).unwrap_err();
            assert!(
                matches!(err, StoreError::Io { op: o, .. } if o == op),
                "{err:?}"
            );
            let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
            assert!(left.is_empty(), "{point:?} left {left:?}");
        }
        let f = IndexFile::create(Arc::clone(&fs), path.clone(), (8, 16), 0, 0).unwrap();
        for point in [Failpoint::ShortWrite, Failpoint::WriteEnospc] {
            assert!(f.put_key("T#a", 100, 1000).unwrap());
            fault.arm(point, "2024", 1);
            assert!(matches!(
                f.publish().unwrap_err(),
                StoreError::Io { op: "pwrite", .. }
            ));
            assert!(f.is_in_doubt(), "{point:?}");
            assert_eq!(f.rewind_to_durable().unwrap().unwrap().index_count, 1);
            assert_eq!(f.header().index_count, 1, "{point:?}: nothing counted");
            assert!(offsets(&f, "T#a").is_empty(), "{point:?}");
        }
        assert!(f.put_key("T#a", 100, 1000).unwrap());
        f.publish().unwrap();
        fault.arm(Failpoint::ReadError, "2024", 1);
        let mut out = Vec::new();
        let err = f
            .select_phy_offsets(&mut out, "T#a", 10, 0, i64::MAX)
            .unwrap_err();
        assert!(matches!(err, StoreError::Io { op: "pread", .. }), "{err:?}");
        assert_eq!(offsets(&f, "T#a"), vec![100]);
        f.flush().unwrap();
        fault.arm(Failpoint::ReadError, "2024", 1);
        assert!(IndexFile::open(Arc::clone(&fs), &path, 8, 16).is_err());
        let reopened = IndexFile::open(fs, &path, 8, 16).unwrap();
        fault.arm(Failpoint::ReadError, "2024", 1);
        assert!(
            reopened.put_key("T#b", 200, 2000).is_err(),
            "slots read first"
        );
        assert!(reopened.put_key("T#b", 200, 2000).unwrap());
        assert_eq!(fault.fired().len(), 9);
    }

    /// Keys wait in memory and queries see them; the file gets the entries at publish and the
    /// slots and header only at the flush, which another reader of the file then finds.
    #[test]
    fn keys_are_found_before_they_are_written_and_on_disk_after_the_flush() {
        let dir = tempfile::tempdir().unwrap();
        let f = small(dir.path(), "20240101000000000");
        f.put_key("T#a", 100, 1000).unwrap();
        f.put_key("T#a", 200, 2000).unwrap();
        assert_eq!(offsets(&f, "T#a"), vec![200, 100]);
        assert_eq!(
            f.read_entry(1).unwrap(),
            IndexEntry::default(),
            "not written yet"
        );
        f.publish().unwrap();
        assert_eq!(f.read_entry(2).unwrap().phy_offset, 200);
        assert_eq!(
            f.read_slot(index_key_hash("T#a")).unwrap(),
            0,
            "slots wait for the flush"
        );
        assert_eq!(offsets(&f, "T#a"), vec![200, 100]);
        f.flush().unwrap();
        let reader = IndexFile::open(RealFs::shared(), &f.path, 8, 16).unwrap();
        assert_eq!(offsets(&reader, "T#a"), vec![200, 100]);
        assert_eq!(reader.header(), f.header());
    }

    /// A put writes the waiting entries itself once PENDING_ENTRIES_MAX_BYTES wait, so a step
    /// with many keys holds a bounded amount of memory.
    #[test]
    fn many_waiting_entries_are_written_by_the_put() {
        let dir = tempfile::tempdir().unwrap();
        let f = IndexFile::create(
            RealFs::shared(),
            dir.path().join("20240101000000000"),
            (8, 4000),
            0,
            0,
        )
        .unwrap();
        let bound = PENDING_ENTRIES_MAX_BYTES.div_ceil(INDEX_ENTRY_SIZE_BYTES) as i64;
        for i in 0..bound {
            f.put_key(&format!("T#{i}"), i, 1000).unwrap();
            assert!(f.lock().pending.len() < PENDING_ENTRIES_MAX_BYTES);
        }
        assert_eq!(
            f.lock().pending.len(),
            0,
            "the bound-th entry wrote them all"
        );
        assert_eq!(f.read_entry(bound as i32).unwrap().phy_offset, bound - 1);
    }

    /// The flush writes runs of changed slot pages, each at most SLOT_WRITE_PAGES_MAX long.
    #[test]
    fn changed_slot_pages_are_written_in_runs() {
        let mut state = WriteState::default();
        for slot in [
            0,
            SLOTS_PER_PAGE + 5,
            5 * SLOTS_PER_PAGE,
            5 * SLOTS_PER_PAGE + 1,
        ] {
            state.mark_slot_dirty(slot);
        }
        assert_eq!(state.dirty_slot_runs(), vec![(0, 2), (5, 6)]);
        let mut state = WriteState::default();
        for page in 0..SLOT_WRITE_PAGES_MAX + 3 {
            state.mark_slot_dirty(page * SLOTS_PER_PAGE);
        }
        let max = SLOT_WRITE_PAGES_MAX;
        assert_eq!(state.dirty_slot_runs(), vec![(0, max), (max, max + 3)]);
    }

    #[test]
    fn repair_tail_restores_slots_past_a_stale_header() {
        let dir = tempfile::tempdir().unwrap();
        let f = small(dir.path(), "20240101000000000");
        f.put_key("T#a", 100, 1000).unwrap();
        f.flush().unwrap();
        // Written after the last header write: a crash in the middle of the next flush, with
        // the entries and the slots written and the header not.
        f.put_key("T#a", 200, 2000).unwrap();
        f.put_key("T#b", 300, 3000).unwrap();
        f.publish().unwrap();
        let mut state = f.lock();
        f.write_dirty_slots(&mut state).unwrap();
        drop(state);
        let again = IndexFile::open(RealFs::shared(), &f.path, 8, 16).unwrap();
        assert_eq!(again.header().index_count, 2);
        assert_eq!(again.repair_tail().unwrap(), 2);
        let mut out = Vec::new();
        again
            .select_phy_offsets(&mut out, "T#a", 10, 0, i64::MAX)
            .unwrap();
        assert_eq!(out, vec![100]);
        // Re-indexing writes the same entries again.
        again.put_key("T#a", 200, 2000).unwrap();
        out.clear();
        again
            .select_phy_offsets(&mut out, "T#a", 10, 0, i64::MAX)
            .unwrap();
        assert_eq!(out, vec![200, 100]);
    }
}
