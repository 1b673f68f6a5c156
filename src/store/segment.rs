//! Fixed-size segment files named by their 20-digit zero-padded start offset (Java
//! `MappedFileQueue`), shared by the CommitLog and every ConsumeQueue.
//!
//! Readers take a snapshot of the segment list (an `Arc<Vec<..>>` behind a short read lock) and
//! never wait for the appender. A segment removed by retention stays readable through the
//! `Arc` a reader holds: the file is unlinked but open.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock, RwLock};

use crate::store::error::StoreError;
use crate::store::fs::{self, Durability, FileSystem};
use crate::store::mapped_file::MappedFile;

/// Width of a segment file name (`UtilAll.offset2FileName`).
pub const SEGMENT_NAME_DIGITS: usize = 20;

/// One pre-sized file.
#[derive(Debug)]
pub struct Segment {
    pub start_offset: i64,
    pub file: File,
    pub path: PathBuf,
    /// Written since the last fsync.
    dirty: AtomicBool,
    /// Created with [`Durability::AtFlush`] and not fsynced since: the file's size and the
    /// directory entries of it and of the directories created with it may not be durable.
    entry_unsynced: AtomicBool,
    /// The file mapped read-only for pulls, made on the first [`Segment::mapped`] (`None`
    /// inside when mapping failed: reads go through the io engine).
    mapping: OnceLock<Option<MappedFile>>,
}

impl Segment {
    pub fn mark_dirty(&self) {
        self.dirty.store(true, Ordering::Release);
    }

    /// Clears the dirty flag and says whether it was set.
    pub fn take_dirty(&self) -> bool {
        self.dirty.swap(false, Ordering::AcqRel)
    }

    /// Clears the flag of a creation whose fsyncs were left to the flush, and says whether it
    /// was set: the flush that takes it fsyncs the file with its metadata and its directories.
    pub fn take_entry_unsynced(&self) -> bool {
        self.entry_unsynced.swap(false, Ordering::AcqRel)
    }

    /// The whole file mapped read-only (Java `MappedFile`), mapped on the first call; `None`
    /// when it cannot be mapped (logged once) or a read from the mapping faulted: the caller
    /// reads through the io engine then.
    pub fn mapped(&self) -> Option<&MappedFile> {
        let mapping = self.mapping.get_or_init(|| {
            let mapped = self
                .file
                .metadata()
                .and_then(|m| MappedFile::map(&self.file, m.len()));
            mapped
                .inspect_err(|e| {
                    // Once per process: past MAPPED_FILES_MAX every further file would say so.
                    static LOGGED: AtomicBool = AtomicBool::new(false);
                    if !LOGGED.swap(true, Ordering::Relaxed) {
                        tracing::warn!(path = %self.path.display(), error = %e,
                            "cannot map the file for reads; reading it through the io engine \
                             (further files that cannot be mapped are not logged)");
                    }
                })
                .ok()
        });
        mapping.as_ref().filter(|m| !m.is_poisoned())
    }

    /// Whether reads use the mapping: `None` before the first [`Segment::mapped`], `Some(false)`
    /// when it could not be mapped or is poisoned.
    pub fn mapping_in_use(&self) -> Option<bool> {
        self.mapping
            .get()
            .map(|m| m.as_ref().is_some_and(|m| !m.is_poisoned()))
    }
}

/// The file descriptor of the segment file (lets a `FileRegion` hand out the file without the
/// store type).
impl std::os::fd::AsFd for Segment {
    fn as_fd(&self) -> std::os::fd::BorrowedFd<'_> {
        self.file.as_fd()
    }
}

pub fn segment_file_name(start_offset: i64) -> String {
    format!("{start_offset:0width$}", width = SEGMENT_NAME_DIGITS)
}

/// The ordered segments of one directory.
#[derive(Debug)]
pub struct SegmentList {
    dir: PathBuf,
    file_size_bytes: u64,
    prealloc: fs::Prealloc,
    /// When a segment this list creates becomes durable.
    durability: Durability,
    fs: Arc<dyn FileSystem>,
    segments: RwLock<Arc<Vec<Arc<Segment>>>>,
}

/// A file found on disk by [`SegmentList::scan_dir`].
#[derive(Debug)]
pub struct FoundSegment {
    pub start_offset: i64,
    pub path: PathBuf,
    pub len_bytes: u64,
}

impl SegmentList {
    pub fn new(
        dir: PathBuf,
        file_size_bytes: u64,
        prealloc: fs::Prealloc,
        fs: Arc<dyn FileSystem>,
    ) -> Self {
        SegmentList {
            dir,
            file_size_bytes,
            prealloc,
            durability: Durability::AtCreate,
            fs,
            segments: RwLock::new(Arc::new(Vec::new())),
        }
    }

    /// The list, creating its segments with `durability` (by default [`Durability::AtCreate`]).
    pub fn with_durability(mut self, durability: Durability) -> Self {
        self.durability = durability;
        self
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn file_size_bytes(&self) -> u64 {
        self.file_size_bytes
    }

    /// The file system the segments are created, written and fsynced through.
    pub fn fs(&self) -> &dyn FileSystem {
        self.fs.as_ref()
    }

    /// Zeroes `seg` from byte `from_bytes` to its end (see [`fs::zero_tail`]), keeping this
    /// list's preallocation: a sparse ConsumeQueue file stays sparse.
    pub fn zero_tail(&self, seg: &Segment, from_bytes: u64) -> Result<(), StoreError> {
        fs::zero_tail(
            self.fs(),
            &seg.file,
            &seg.path,
            from_bytes,
            self.file_size_bytes,
            self.prealloc,
        )
    }

    /// Lists segment files of `dir` sorted by start offset. Names that are not 20 digits are
    /// ignored (Java ignores them too). Checks that the files are contiguous and that every file
    /// but the last has the configured size; a short last file (a torn creation or a
    /// truncation) is returned as found so recovery can re-extend it.
    pub fn scan_dir(dir: &Path, file_size_bytes: u64) -> Result<Vec<FoundSegment>, StoreError> {
        let mut found = Vec::new();
        let entries = match std::fs::read_dir(dir) {
            Ok(entries) => entries,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(found),
            Err(e) => return Err(StoreError::io("read dir", dir, e)),
        };
        for entry in entries {
            let entry = entry.map_err(|e| StoreError::io("read dir", dir, e))?;
            let name = entry.file_name();
            let Some(name) = name.to_str() else { continue };
            if name.len() != SEGMENT_NAME_DIGITS || !name.bytes().all(|b| b.is_ascii_digit()) {
                continue;
            }
            let Ok(start_offset) = name.parse::<i64>() else {
                continue;
            };
            let path = entry.path();
            let len_bytes = entry
                .metadata()
                .map_err(|e| StoreError::io("stat", &path, e))?
                .len();
            found.push(FoundSegment {
                start_offset,
                path,
                len_bytes,
            });
        }
        found.sort_by_key(|f| f.start_offset);
        for (i, seg) in found.iter().enumerate() {
            let corrupted = |reason: String| StoreError::Corrupted {
                path: seg.path.clone(),
                offset: seg.start_offset,
                reason,
            };
            if !(seg.start_offset as u64).is_multiple_of(file_size_bytes) {
                return Err(corrupted(format!(
                    "start offset is not a multiple of the file size {file_size_bytes}"
                )));
            }
            if i > 0 && found[i - 1].start_offset + file_size_bytes as i64 != seg.start_offset {
                return Err(corrupted("segment files are not contiguous".to_owned()));
            }
            let is_last = i + 1 == found.len();
            if seg.len_bytes > file_size_bytes || (!is_last && seg.len_bytes != file_size_bytes) {
                return Err(corrupted(format!(
                    "file is {} bytes, the configured size is {file_size_bytes}",
                    seg.len_bytes
                )));
            }
        }
        Ok(found)
    }

    /// Opens found files (re-extending a short last one) and installs them.
    pub fn install(&self, found: &[FoundSegment]) -> Result<(), StoreError> {
        let mut list = Vec::with_capacity(found.len());
        for seg in found {
            let file = fs::open_rw(&seg.path)?;
            if seg.len_bytes != self.file_size_bytes {
                fs::size_file(
                    self.fs(),
                    &file,
                    &seg.path,
                    self.file_size_bytes,
                    self.prealloc,
                )?;
                self.fs.sync(&file, &seg.path, fs::SyncKind::All)?;
            }
            list.push(Arc::new(Segment {
                start_offset: seg.start_offset,
                file,
                path: seg.path.clone(),
                dirty: AtomicBool::new(false),
                entry_unsynced: AtomicBool::new(false),
                mapping: OnceLock::new(),
            }));
        }
        *self.write_lock() = Arc::new(list);
        Ok(())
    }

    pub fn snapshot(&self) -> Arc<Vec<Arc<Segment>>> {
        Arc::clone(&self.read_lock())
    }

    pub fn len(&self) -> usize {
        self.read_lock().len()
    }

    pub fn is_empty(&self) -> bool {
        self.read_lock().is_empty()
    }

    pub fn first(&self) -> Option<Arc<Segment>> {
        self.read_lock().first().cloned()
    }

    pub fn last(&self) -> Option<Arc<Segment>> {
        self.read_lock().last().cloned()
    }

    /// The segment holding byte `offset`, if it exists.
    pub fn find(&self, offset: i64) -> Option<Arc<Segment>> {
        find_in(&self.read_lock(), offset, self.file_size_bytes)
    }

    /// The segment starting at `start_offset`, created (full size) when missing: durable
    /// before it is returned, or, with [`Durability::AtFlush`], marked dirty with its fsyncs
    /// left to the next flush ([`Segment::take_entry_unsynced`]). Only the single writer of
    /// this list calls it. A failed creation (ENOSPC) leaves no half-made file under the
    /// segment's name and changes nothing here, so a later call tries again (see
    /// [`fs::create_presized`]).
    pub fn get_or_create(&self, start_offset: i64) -> Result<Arc<Segment>, StoreError> {
        debug_assert_eq!(start_offset as u64 % self.file_size_bytes, 0);
        if let Some(seg) = self.find(start_offset) {
            return Ok(seg);
        }
        let deferred = self.durability == Durability::AtFlush;
        if deferred {
            fs::create_dir_unsynced(&self.dir)?;
        } else {
            fs::ensure_dir(self.fs(), &self.dir)?;
        }
        let path = self.dir.join(segment_file_name(start_offset));
        let file = fs::create_presized_with(
            self.fs(),
            &path,
            self.file_size_bytes,
            self.prealloc,
            self.durability,
        )?;
        let seg = Arc::new(Segment {
            start_offset,
            file,
            path,
            dirty: AtomicBool::new(deferred),
            entry_unsynced: AtomicBool::new(deferred),
            mapping: OnceLock::new(),
        });
        let mut guard = self.write_lock();
        let mut list: Vec<Arc<Segment>> = guard.as_ref().clone();
        if let Some(last) = list.last() {
            assert!(
                last.start_offset < start_offset,
                "segments must be created in order"
            );
        }
        list.push(Arc::clone(&seg));
        *guard = Arc::new(list);
        Ok(seg)
    }

    /// Removes the first `count` segments from the list and deletes their files.
    pub fn remove_front(&self, count: usize) -> Result<(), StoreError> {
        let removed: Vec<Arc<Segment>> = {
            let mut guard = self.write_lock();
            let mut list: Vec<Arc<Segment>> = guard.as_ref().clone();
            let count = count.min(list.len());
            let removed = list.drain(..count).collect();
            *guard = Arc::new(list);
            removed
        };
        for seg in removed {
            fs::remove_file(self.fs(), &seg.path)?;
        }
        Ok(())
    }

    /// Removes every segment starting at or after `offset` and deletes its file.
    pub fn remove_from(&self, offset: i64) -> Result<usize, StoreError> {
        let removed: Vec<Arc<Segment>> = {
            let mut guard = self.write_lock();
            let mut list: Vec<Arc<Segment>> = guard.as_ref().clone();
            let keep = list.partition_point(|s| s.start_offset < offset);
            let removed = list.drain(keep..).collect();
            *guard = Arc::new(list);
            removed
        };
        let count = removed.len();
        for seg in removed {
            fs::remove_file(self.fs(), &seg.path)?;
        }
        Ok(count)
    }

    /// Drops every segment starting at or after `offset` from the list without touching its
    /// file (recovery moved the files aside already).
    pub fn forget_from(&self, offset: i64) {
        let mut guard = self.write_lock();
        let mut list: Vec<Arc<Segment>> = guard.as_ref().clone();
        let keep = list.partition_point(|s| s.start_offset < offset);
        list.truncate(keep);
        *guard = Arc::new(list);
    }

    // A poisoned lock only means another thread panicked while swapping an Arc; the Arc it
    // guards is always whole, so recovering the guard is sound.
    fn read_lock(&self) -> std::sync::RwLockReadGuard<'_, Arc<Vec<Arc<Segment>>>> {
        self.segments.read().unwrap_or_else(|e| e.into_inner())
    }

    fn write_lock(&self) -> std::sync::RwLockWriteGuard<'_, Arc<Vec<Arc<Segment>>>> {
        self.segments.write().unwrap_or_else(|e| e.into_inner())
    }
}

/// Binary search for the segment containing `offset`.
pub fn find_in(list: &[Arc<Segment>], offset: i64, file_size_bytes: u64) -> Option<Arc<Segment>> {
    index_in(list, offset, file_size_bytes).map(|idx| Arc::clone(&list[idx]))
}

/// Binary search for the position in `list` of the segment containing `offset`.
pub fn index_in(list: &[Arc<Segment>], offset: i64, file_size_bytes: u64) -> Option<usize> {
    let idx = list
        .partition_point(|s| s.start_offset <= offset)
        .checked_sub(1)?;
    (offset < list[idx].start_offset + file_size_bytes as i64).then_some(idx)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_twenty_digits() {
        assert_eq!(segment_file_name(0), "00000000000000000000");
        assert_eq!(segment_file_name(1_073_741_824), "00000000001073741824");
    }

    #[test]
    fn create_find_remove() {
        let dir = tempfile::tempdir().unwrap();
        let list = SegmentList::new(
            dir.path().join("cl"),
            4096,
            fs::Prealloc::Blocks,
            fs::RealFs::shared(),
        );
        let a = list.get_or_create(0).unwrap();
        let b = list.get_or_create(4096).unwrap();
        assert_eq!(a.file.metadata().unwrap().len(), 4096);
        assert_eq!(list.find(4095).unwrap().start_offset, 0);
        assert_eq!(list.find(4096).unwrap().start_offset, b.start_offset);
        assert!(list.find(8192).is_none());
        let found = SegmentList::scan_dir(list.dir(), 4096).unwrap();
        assert_eq!(found.len(), 2);
        list.remove_front(1).unwrap();
        assert!(list.find(0).is_none());
        assert_eq!(list.len(), 1);
        // A gap between files is corruption.
        std::fs::write(
            list.dir().join(segment_file_name(3 * 4096)),
            vec![0u8; 4096],
        )
        .unwrap();
        assert!(SegmentList::scan_dir(list.dir(), 4096).is_err());
    }
}
