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
//! (`pread`/`pwrite`): readers copy the header, then follow a slot's chain.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};

use crate::store::error::StoreError;
use crate::store::format::java_string_hash_code;
use crate::store::fs::{self, FileSystem, RealFs};

/// `IndexHeader.INDEX_HEADER_SIZE`.
pub const INDEX_HEADER_SIZE_BYTES: usize = 40;
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

/// The 40-byte header (Java `IndexHeader`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IndexHeader {
    /// @0: store time of the first entry.
    pub begin_timestamp_ms: i64,
    /// @8: store time of the last entry.
    pub end_timestamp_ms: i64,
    /// @16: CommitLog offset of the first entry's message.
    pub begin_phy_offset: i64,
    /// @24: CommitLog offset of the last entry's message.
    pub end_phy_offset: i64,
    /// @32: slots in use.
    pub hash_slot_count: i32,
    /// @36: the next entry number (entries are 1..indexCount-1); 1 in an empty file.
    pub index_count: i32,
}

impl Default for IndexHeader {
    fn default() -> Self {
        IndexHeader {
            begin_timestamp_ms: 0,
            end_timestamp_ms: 0,
            begin_phy_offset: 0,
            end_phy_offset: 0,
            hash_slot_count: 0,
            index_count: 1,
        }
    }
}

pub fn encode_index_header(h: &IndexHeader) -> [u8; INDEX_HEADER_SIZE_BYTES] {
    let mut out = [0u8; INDEX_HEADER_SIZE_BYTES];
    out[0..8].copy_from_slice(&h.begin_timestamp_ms.to_be_bytes());
    out[8..16].copy_from_slice(&h.end_timestamp_ms.to_be_bytes());
    out[16..24].copy_from_slice(&h.begin_phy_offset.to_be_bytes());
    out[24..32].copy_from_slice(&h.end_phy_offset.to_be_bytes());
    out[32..36].copy_from_slice(&h.hash_slot_count.to_be_bytes());
    out[36..40].copy_from_slice(&h.index_count.to_be_bytes());
    out
}

/// Decodes a header; an `indexCount` of 0 or less reads as 1 (Java `IndexHeader.load`).
pub fn decode_index_header(b: &[u8; INDEX_HEADER_SIZE_BYTES]) -> IndexHeader {
    let i64_at = |at: usize| i64::from_be_bytes(b[at..at + 8].try_into().unwrap_or_default());
    let i32_at = |at: usize| i32::from_be_bytes(b[at..at + 4].try_into().unwrap_or_default());
    IndexHeader {
        begin_timestamp_ms: i64_at(0),
        end_timestamp_ms: i64_at(8),
        begin_phy_offset: i64_at(16),
        end_phy_offset: i64_at(24),
        hash_slot_count: i32_at(32),
        index_count: i32_at(36).max(1),
    }
}

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
    /// The slot values as written, so a put reads no slot from the file: loaded at the first
    /// put (zeros for a new file), dropped when the file is full. `maxHashSlotNum` × 4 bytes
    /// (20 MB with Java's default, in zeroed pages the OS commits as they are touched), for
    /// the one file being written.
    slots: Option<Vec<i32>>,
    /// File position below which the entry blocks are allocated.
    reserved_end_bytes: u64,
    /// Header changed since the last [`IndexFile::flush`].
    dirty: bool,
}

/// One open index file.
#[derive(Debug)]
pub struct IndexFile {
    pub path: PathBuf,
    file: File,
    hash_slot_num: i32,
    index_num: i32,
    state: Mutex<WriteState>,
}

impl IndexFile {
    /// Creates a file whose header starts at the previous file's end (Java's constructor with
    /// `endPhyOffset` / `endTimestamp`), 0 for the first one.
    pub fn create(
        path: PathBuf,
        hash_slot_num: i32,
        index_num: i32,
        prev_end_phy_offset: i64,
        prev_end_timestamp_ms: i64,
    ) -> Result<IndexFile, StoreError> {
        let size = index_file_size_bytes(hash_slot_num, index_num);
        let file = fs::create_presized(&RealFs, &path, size, fs::Prealloc::Sparse)?;
        let slots_end =
            INDEX_HEADER_SIZE_BYTES as u64 + hash_slot_num as u64 * HASH_SLOT_SIZE_BYTES as u64;
        fs::allocate_range(&RealFs, &file, &path, 0, slots_end)?;
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
            hash_slot_num,
            index_num,
            state: Mutex::new(WriteState {
                header,
                slots: Some(vec![0; hash_slot_num as usize]),
                reserved_end_bytes: slots_end,
                dirty: true,
            }),
        };
        index_file.flush()?;
        Ok(index_file)
    }

    /// Opens an existing file and reads its header. A file of another size was made with other
    /// dimensions and cannot be read with these: an error naming both.
    pub fn open(path: &Path, hash_slot_num: i32, index_num: i32) -> Result<IndexFile, StoreError> {
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
        read_exact_at(&file, path, &mut raw, 0)?;
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
            hash_slot_num,
            index_num,
            state: Mutex::new(WriteState {
                header,
                slots: None,
                reserved_end_bytes: 0,
                dirty: false,
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

    fn read_slot(&self, key_hash: i32) -> Result<i32, StoreError> {
        let mut raw = [0u8; HASH_SLOT_SIZE_BYTES];
        read_exact_at(&self.file, &self.path, &mut raw, self.slot_pos(key_hash))?;
        Ok(i32::from_be_bytes(raw))
    }

    fn read_entry(&self, index: i32) -> Result<IndexEntry, StoreError> {
        let mut raw = [0u8; INDEX_ENTRY_SIZE_BYTES];
        read_exact_at(&self.file, &self.path, &mut raw, self.entry_pos(index))?;
        Ok(decode_index_entry(&raw))
    }

    /// Java `IndexFile.putKey`: `Ok(false)` when the file is full. The entry is written before
    /// the slot that points at it, and the header (in memory; on disk at [`IndexFile::flush`])
    /// counts it last.
    pub fn put_key(
        &self,
        key: &str,
        phy_offset: i64,
        store_timestamp_ms: i64,
    ) -> Result<bool, StoreError> {
        let mut state = self.lock();
        let count = state.header.index_count;
        if count >= self.index_num {
            return Ok(false);
        }
        let key_hash = index_key_hash(key);
        let slot_pos = self.slot_pos(key_hash);
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
        let entry_pos = self.entry_pos(count);
        self.reserve_entry_blocks(&mut state, entry_pos + INDEX_ENTRY_SIZE_BYTES as u64)?;
        RealFs.write_at(
            &self.file,
            &self.path,
            &encode_index_entry(&entry),
            entry_pos,
        )?;
        RealFs.write_at(&self.file, &self.path, &count.to_be_bytes(), slot_pos)?;
        if let Some(slots) = state.slots.as_mut() {
            slots[slot] = count;
        }
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
        if h.index_count >= self.index_num {
            state.slots = None;
        }
        state.dirty = true;
        Ok(true)
    }

    /// The whole slot area, in one read.
    fn read_all_slots(&self) -> Result<Vec<i32>, StoreError> {
        let mut raw = vec![0u8; self.hash_slot_num as usize * HASH_SLOT_SIZE_BYTES];
        read_exact_at(
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
        fs::allocate_range(&RealFs, &self.file, &self.path, from, to - from)?;
        state.reserved_end_bytes = to;
        Ok(())
    }

    /// Writes the header if it changed and fsyncs the file (Java `IndexFile.flush`).
    pub fn flush(&self) -> Result<(), StoreError> {
        let header = {
            let mut state = self.lock();
            if !state.dirty {
                return Ok(());
            }
            state.dirty = false;
            state.header
        };
        let written = RealFs
            .write_at(&self.file, &self.path, &encode_index_header(&header), 0)
            .and_then(|()| RealFs.sync(&self.file, &self.path, fs::SyncKind::Data));
        if written.is_err() {
            self.lock().dirty = true;
        }
        written
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
        let slot_value = self.read_slot(key_hash)?;
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
            let entry = self.read_entry(next)?;
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
                RealFs.write_at(&self.file, &self.path, &restored.to_be_bytes(), pos)?;
            }
            index += 1;
        }
        // Slots changed on disk: the next put reads them again.
        self.lock().slots = None;
        if found > 0 {
            // The stale entries are rewritten as recovery re-indexes; zero them meanwhile.
            let from = self.entry_pos(count);
            let zeros = vec![0u8; found as usize * INDEX_ENTRY_SIZE_BYTES];
            RealFs.write_at(&self.file, &self.path, &zeros, from)?;
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

fn read_exact_at(file: &File, path: &Path, buf: &mut [u8], pos: u64) -> Result<(), StoreError> {
    file.read_exact_at(buf, pos)
        .map_err(|e| StoreError::io("pread", path, e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn open_refuses_a_header_counting_outside_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("20260101000000000");
        for (index_count, hash_slot_count) in [(i32::MAX, 0), (33, 0), (1, i32::MAX), (1, -5)] {
            let mut image = vec![0u8; index_file_size_bytes(8, 32) as usize];
            image[32..36].copy_from_slice(&hash_slot_count.to_be_bytes());
            image[36..40].copy_from_slice(&index_count.to_be_bytes());
            std::fs::write(&path, &image).unwrap();
            let err = IndexFile::open(&path, 8, 32).unwrap_err();
            assert!(matches!(err, StoreError::Corrupted { .. }), "{err}");
        }
        let mut image = vec![0u8; index_file_size_bytes(8, 32) as usize];
        image[36..40].copy_from_slice(&32i32.to_be_bytes());
        std::fs::write(&path, &image).unwrap();
        let file = IndexFile::open(&path, 8, 32).unwrap();
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
        assert_eq!(index_key_hash("a"), 97);
        assert_eq!(java_string_hash_code("polygenelubricants"), i32::MIN);
        assert_eq!(index_key_hash("polygenelubricants"), 0);
        assert_eq!(
            index_key_hash("TopicTest#key"),
            java_string_hash_code("TopicTest#key").abs()
        );
    }

    #[test]
    fn header_round_trip_and_java_load_rule() {
        let h = IndexHeader {
            begin_timestamp_ms: 1,
            end_timestamp_ms: 2,
            begin_phy_offset: 3,
            end_phy_offset: 4,
            hash_slot_count: 5,
            index_count: 6,
        };
        assert_eq!(decode_index_header(&encode_index_header(&h)), h);
        let zero = decode_index_header(&[0u8; INDEX_HEADER_SIZE_BYTES]);
        assert_eq!(zero.index_count, 1);
    }

    fn small(dir: &Path, name: &str) -> IndexFile {
        IndexFile::create(dir.join(name), 8, 16, 0, 0).unwrap()
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
        let again = IndexFile::open(&f.path, 8, 16).unwrap();
        assert_eq!(again.header(), f.header());
        assert!(IndexFile::open(&f.path, 8, 17).is_err());
    }

    #[test]
    fn repair_tail_restores_slots_past_a_stale_header() {
        let dir = tempfile::tempdir().unwrap();
        let f = small(dir.path(), "20240101000000000");
        f.put_key("T#a", 100, 1000).unwrap();
        f.flush().unwrap();
        // Written after the last header write: lost to a crash.
        f.put_key("T#a", 200, 2000).unwrap();
        f.put_key("T#b", 300, 3000).unwrap();
        let again = IndexFile::open(&f.path, 8, 16).unwrap();
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
