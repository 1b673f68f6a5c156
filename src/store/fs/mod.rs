//! The store's only file-system primitives: full-size segment files (preallocated or sparse),
//! positional writes, renames and the one audited fsync path, all behind the [`FileSystem`]
//! seam (the way redb's `StorageBackend` and raft-engine's `FileSystem` work).
//!
//! [`RealFs`] is the implementation the store runs on; tests swap in
//! [`fault::FaultFs`](crate::store::fs::fault), which fails named operations on demand (short
//! write, fsync error, ENOSPC on create or allocate, rename error) and reports any disk usage.
//! Only the operations a failure must be handled for go through the trait: creating,
//! allocating, writing, fsyncing and renaming files, reading the message index files, and
//! measuring the disk. CommitLog and ConsumeQueue reads go through the I/O engine
//! ([`crate::store::io`]) and are untouched: the io_uring read path has no indirection.
//!
//! A failed fsync is returned as an error. The caller poisons the store when the fsync was
//! for written data the store vouches for (CommitLog, ConsumeQueue, checkpoint); the message
//! index, derived data, writes its bytes again before its next fsync
//! ([`crate::store::index_file::IndexFile::rewind_to_durable`]). Nothing here retries a sync.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::store::error::StoreError;

#[cfg(test)]
pub mod fault;

/// Space of the file system holding a path (`statvfs`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DiskUsage {
    pub total_bytes: u64,
    /// Bytes not allocated to any file (Java `File.getFreeSpace`, reserved blocks included).
    pub free_bytes: u64,
    /// Bytes an unprivileged process may still allocate (Java `File.getUsableSpace`).
    pub available_bytes: u64,
}

impl DiskUsage {
    /// Used share as a ratio with two decimals, rounded up, as Java's
    /// `UtilAll.getDiskPartitionSpaceUsedPercent`: used = total − free, over used + usable
    /// (what `df` shows: blocks reserved for root count as neither); -1 for a file system
    /// reporting no size.
    pub fn used_ratio(&self) -> f64 {
        if self.total_bytes == 0 {
            return -1.0;
        }
        let used = u128::from(self.total_bytes.saturating_sub(self.free_bytes));
        let entire = used + u128::from(self.available_bytes);
        if entire == 0 {
            return -1.0;
        }
        let percent = (used * 100).div_ceil(entire);
        percent as f64 / 100.0
    }
}

/// The operations of the store that can fail for reasons outside the store (a full disk, a
/// failing device) and must be handled: see the module docs.
pub trait FileSystem: Send + Sync + std::fmt::Debug {
    /// Creates `path` (truncating an existing file), open for reading and writing.
    fn create(&self, path: &Path) -> Result<File, StoreError>;
    /// Allocates the blocks of `len_bytes` at `offset_bytes` (`fallocate`). `keep_size`: the
    /// file's length stays (`FALLOC_FL_KEEP_SIZE`). A file system without fallocate keeps its
    /// holes.
    fn allocate(
        &self,
        file: &File,
        path: &Path,
        offset_bytes: u64,
        len_bytes: u64,
        keep_size: bool,
    ) -> Result<(), StoreError>;
    /// Writes all of `buf` at `offset_bytes` (pwrite).
    fn write_at(
        &self,
        file: &File,
        path: &Path,
        buf: &[u8],
        offset_bytes: u64,
    ) -> Result<(), StoreError>;
    /// Fills all of `buf` from `offset_bytes` (pread; a file ending first is an error). Only
    /// the message index files read through here.
    fn read_at(
        &self,
        file: &File,
        path: &Path,
        buf: &mut [u8],
        offset_bytes: u64,
    ) -> Result<(), StoreError>;
    /// fsyncs a file or a directory handle.
    fn sync(&self, file: &File, path: &Path, kind: SyncKind) -> Result<(), StoreError>;
    /// Starts writing back the dirty pages of `len_bytes` at `offset_bytes` and returns
    /// without waiting (`sync_file_range` with `SYNC_FILE_RANGE_WRITE` only). It makes
    /// nothing durable and, unlike the wait flags, does not consume a writeback error the next
    /// fsync of the file must report. No test file system fails it, so every one shares this.
    fn start_writeback(
        &self,
        file: &File,
        path: &Path,
        offset_bytes: u64,
        len_bytes: u64,
    ) -> Result<(), StoreError> {
        use std::os::fd::AsRawFd;
        let (offset, len) = range_args("sync_file_range", path, offset_bytes, len_bytes)?;
        // SAFETY: the descriptor is open for the duration of the call (borrowed from `file`);
        // the call reads no memory of this process.
        let rc = unsafe {
            libc::sync_file_range(file.as_raw_fd(), offset, len, libc::SYNC_FILE_RANGE_WRITE)
        };
        if rc == 0 {
            Ok(())
        } else {
            let e = io::Error::last_os_error();
            Err(StoreError::io("sync_file_range", path, e))
        }
    }
    /// Renames `from` to `to` (the caller fsyncs the directory).
    fn rename(&self, from: &Path, to: &Path) -> Result<(), StoreError>;
    /// Total and free bytes of the file system holding `path`.
    fn disk_usage(&self, path: &Path) -> Result<DiskUsage, StoreError>;
}

/// A byte range as the signed offset and length the system calls take; `op` fails with
/// `InvalidInput` for one past `i64::MAX`.
fn range_args(
    op: &'static str,
    path: &Path,
    offset_bytes: u64,
    len_bytes: u64,
) -> Result<(i64, i64), StoreError> {
    let invalid = |_| StoreError::io(op, path, io::Error::from(io::ErrorKind::InvalidInput));
    Ok((
        i64::try_from(offset_bytes).map_err(invalid)?,
        i64::try_from(len_bytes).map_err(invalid)?,
    ))
}

/// The real file system.
#[derive(Debug, Default, Clone, Copy)]
pub struct RealFs;

impl RealFs {
    /// The real file system, shared.
    pub fn shared() -> Arc<dyn FileSystem> {
        Arc::new(RealFs)
    }
}

impl FileSystem for RealFs {
    fn create(&self, path: &Path) -> Result<File, StoreError> {
        OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(path)
            .map_err(|e| StoreError::io("create", path, e))
    }

    fn allocate(
        &self,
        file: &File,
        path: &Path,
        offset_bytes: u64,
        len_bytes: u64,
        keep_size: bool,
    ) -> Result<(), StoreError> {
        let (offset, len) = range_args("fallocate", path, offset_bytes, len_bytes)?;
        let flags = if keep_size {
            nix::fcntl::FallocateFlags::FALLOC_FL_KEEP_SIZE
        } else {
            nix::fcntl::FallocateFlags::empty()
        };
        match nix::fcntl::fallocate(file, flags, offset, len) {
            Ok(()) | Err(nix::errno::Errno::EOPNOTSUPP) => Ok(()),
            Err(errno) => Err(StoreError::io("fallocate", path, io::Error::from(errno))),
        }
    }

    fn write_at(
        &self,
        file: &File,
        path: &Path,
        buf: &[u8],
        offset_bytes: u64,
    ) -> Result<(), StoreError> {
        file.write_all_at(buf, offset_bytes)
            .map_err(|e| StoreError::io("pwrite", path, e))
    }

    fn read_at(
        &self,
        file: &File,
        path: &Path,
        buf: &mut [u8],
        offset_bytes: u64,
    ) -> Result<(), StoreError> {
        file.read_exact_at(buf, offset_bytes)
            .map_err(|e| StoreError::io("pread", path, e))
    }

    fn sync(&self, file: &File, path: &Path, kind: SyncKind) -> Result<(), StoreError> {
        FSYNCS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let result = match kind {
            SyncKind::Data => file.sync_data(),
            SyncKind::All => file.sync_all(),
        };
        result.map_err(|e| StoreError::io("fsync", path, e))
    }

    fn rename(&self, from: &Path, to: &Path) -> Result<(), StoreError> {
        std::fs::rename(from, to).map_err(|e| StoreError::io("rename", to, e))
    }

    fn disk_usage(&self, path: &Path) -> Result<DiskUsage, StoreError> {
        let stat = nix::sys::statvfs::statvfs(path)
            .map_err(|e| StoreError::io("statvfs", path, io::Error::from(e)))?;
        let block = stat.fragment_size() as u64;
        Ok(DiskUsage {
            total_bytes: (stat.blocks() as u64).saturating_mul(block),
            free_bytes: (stat.blocks_free() as u64).saturating_mul(block),
            available_bytes: (stat.blocks_available() as u64).saturating_mul(block),
        })
    }
}

/// fsync calls made through [`RealFs`] (every fsync of the store, file or directory) by this
/// process, failed ones included.
static FSYNCS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// The number of fsyncs so far (metrics).
pub fn fsync_count() -> u64 {
    FSYNCS.load(std::sync::atomic::Ordering::Relaxed)
}

/// What an fsync must make durable.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SyncKind {
    /// `fdatasync`: the data (files are pre-sized, so no size change needs syncing).
    Data,
    /// `fsync`: data and metadata (after creating or resizing a file).
    All,
}

/// fsyncs a directory so a created, renamed or removed entry is durable.
pub fn sync_dir(fs: &dyn FileSystem, dir: &Path) -> Result<(), StoreError> {
    let handle = File::open(dir).map_err(|e| StoreError::io("open dir", dir, e))?;
    fs.sync(&handle, dir, SyncKind::All)
}

/// Creates the directory (and parents) and fsyncs its parent when it was new.
pub fn ensure_dir(fs: &dyn FileSystem, dir: &Path) -> Result<(), StoreError> {
    if !create_dir_unsynced(dir)? {
        return Ok(());
    }
    if let Some(parent) = dir.parent() {
        sync_dir(fs, parent)?;
    }
    Ok(())
}

/// Creates the directory (and parents) without any fsync; says whether it was new. The caller
/// fsyncs the parents before it counts on the entries (see [`Durability::AtFlush`]).
pub fn create_dir_unsynced(dir: &Path) -> Result<bool, StoreError> {
    if dir.is_dir() {
        return Ok(false);
    }
    std::fs::create_dir_all(dir).map_err(|e| StoreError::io("create dir", dir, e))?;
    Ok(true)
}

/// When a created segment file becomes durable.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Durability {
    /// Before it is used: the file and its directory entry are fsynced at creation (CommitLog
    /// segments: the checkpoint and the sync-flush answers vouch for their bytes).
    AtCreate,
    /// At the next flush of the data written into it: creation makes no fsync, and the flush
    /// that fsyncs the file's first written bytes fsyncs the file (`fsync`, so its size too)
    /// and its directories before the checkpoint counts those bytes (ConsumeQueue segments:
    /// derived data, rebuilt from the CommitLog after the checkpoint; Java's `MappedFile`
    /// creation makes no fsync either).
    AtFlush,
}

/// Opens an existing segment for reading and writing.
pub fn open_rw(path: &Path) -> Result<File, StoreError> {
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)
        .map_err(|e| StoreError::io("open", path, e))?;
    skip_atime(&file, path);
    Ok(file)
}

/// Asks the kernel not to update the file's access time on reads through `file` (`O_NOATIME`).
///
/// Under `relatime`, the default mount option, a read updates the access time whenever it is
/// older than the modification time, and a segment being appended to is modified all the
/// time: every read of the live tail (each woken pull) dirtied the inode in ext4
/// (`touch_atime` and `ext4_mark_iloc_dirty` were a tenth of the wake thread's samples under
/// W5; docs/BENCHMARKS.md, "Reads that no longer write the inode"). The store never looks at
/// access times. The flag needs the file's owner (or `CAP_FOWNER`); where it is refused the
/// reads are correct as they were, only slower, so that is logged, not returned.
fn skip_atime(file: &File, path: &Path) {
    use nix::fcntl::{fcntl, FcntlArg, OFlag};
    let set = fcntl(file, FcntlArg::F_GETFL).and_then(|bits| {
        let flags = OFlag::from_bits_truncate(bits) | OFlag::O_NOATIME;
        fcntl(file, FcntlArg::F_SETFL(flags))
    });
    if let Err(errno) = set {
        tracing::debug!(path = %path.display(), %errno, "O_NOATIME refused; reads update the access time");
    }
}

/// How a segment file gets its bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Prealloc {
    /// `set_len` + `fallocate`: writes into the file cannot fail for lack of space later
    /// (CommitLog segments).
    Blocks,
    /// `set_len` only: a sparse file whose blocks the file system allocates as they are written
    /// (ConsumeQueue segments: 6 MB per queue adds up on a broker with many queues; Java's
    /// `MappedFile` maps the full size without writing it, which is sparse too).
    Sparse,
}

/// Gives `file` its full length the way `prealloc` says.
pub fn size_file(
    fs: &dyn FileSystem,
    file: &File,
    path: &Path,
    size_bytes: u64,
    prealloc: Prealloc,
) -> Result<(), StoreError> {
    file.set_len(size_bytes)
        .map_err(|e| StoreError::io("set_len", path, e))?;
    match prealloc {
        Prealloc::Blocks => fs.allocate(file, path, 0, size_bytes, false),
        Prealloc::Sparse => Ok(()),
    }
}

/// The name a segment is built under before it is renamed into place. Not 20 digits, so
/// `SegmentList::scan_dir` never takes it for a segment.
pub fn temp_path(path: &Path) -> PathBuf {
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(".tmp");
    path.with_file_name(name)
}

/// Makes `path` a file of exactly `size_bytes` bytes (zeros when new), durable (file and
/// directory entry) before it is used.
///
/// A new file is built under [`temp_path`] and renamed into place only once it has its full
/// size and blocks, so a failed `fallocate` (ENOSPC) never leaves a half-made segment under
/// the real name; the half-made temp file is removed. A file already under the real name (left
/// by an older build, or by a crash between rename and directory fsync) is opened and brought
/// to its size instead of failing with EEXIST, so the next append after a failure simply tries
/// again.
pub fn create_presized(
    fs: &dyn FileSystem,
    path: &Path,
    size_bytes: u64,
    prealloc: Prealloc,
) -> Result<File, StoreError> {
    create_presized_with(fs, path, size_bytes, prealloc, Durability::AtCreate)
}

/// [`create_presized`], with the fsyncs of the file and its directory left to the caller when
/// `durability` is [`Durability::AtFlush`] (the temp file and the rename stay, so a failed
/// creation still leaves no half-made file under the segment's name).
pub fn create_presized_with(
    fs: &dyn FileSystem,
    path: &Path,
    size_bytes: u64,
    prealloc: Prealloc,
    durability: Durability,
) -> Result<File, StoreError> {
    let file = match OpenOptions::new().read(true).write(true).open(path) {
        Ok(file) => {
            resize_existing(fs, &file, path, size_bytes, prealloc, durability)?;
            file
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            let tmp = temp_path(path);
            build_and_rename(fs, &tmp, path, size_bytes, prealloc, durability).inspect_err(
                |_| {
                    // Best effort: the error being returned is the one that matters, and a
                    // temp file that stays is truncated and reused by the next try.
                    let _ = std::fs::remove_file(&tmp);
                },
            )?
        }
        Err(e) => return Err(StoreError::io("open", path, e)),
    };
    if durability == Durability::AtCreate {
        if let Some(dir) = path.parent() {
            sync_dir(fs, dir)?;
        }
    }
    skip_atime(&file, path);
    Ok(file)
}

fn resize_existing(
    fs: &dyn FileSystem,
    file: &File,
    path: &Path,
    size_bytes: u64,
    prealloc: Prealloc,
    durability: Durability,
) -> Result<(), StoreError> {
    let len = file
        .metadata()
        .map_err(|e| StoreError::io("stat", path, e))?
        .len();
    if len > size_bytes {
        return Err(StoreError::Corrupted {
            path: path.to_path_buf(),
            offset: 0,
            reason: format!("file is {len} bytes, the configured size is {size_bytes}"),
        });
    }
    // Also when the length is right: a failed fallocate may have left it sparse.
    size_file(fs, file, path, size_bytes, prealloc)?;
    match durability {
        Durability::AtCreate => fs.sync(file, path, SyncKind::All),
        Durability::AtFlush => Ok(()),
    }
}

fn build_and_rename(
    fs: &dyn FileSystem,
    tmp: &Path,
    path: &Path,
    size_bytes: u64,
    prealloc: Prealloc,
    durability: Durability,
) -> Result<File, StoreError> {
    let file = fs.create(tmp)?;
    size_file(fs, &file, tmp, size_bytes, prealloc)?;
    if durability == Durability::AtCreate {
        fs.sync(&file, tmp, SyncKind::All)?;
    }
    fs.rename(tmp, path)?;
    Ok(file)
}

/// Sets the length and asks the file system to allocate the blocks, so later writes do not
/// fail for lack of space.
pub fn allocate(
    fs: &dyn FileSystem,
    file: &File,
    path: &Path,
    size_bytes: u64,
) -> Result<(), StoreError> {
    size_file(fs, file, path, size_bytes, Prealloc::Blocks)
}

/// Allocates the blocks of `len_bytes` bytes at `offset` inside the file (its length stays),
/// so writes there cannot fail for lack of space.
pub fn allocate_range(
    fs: &dyn FileSystem,
    file: &File,
    path: &Path,
    offset: u64,
    len_bytes: u64,
) -> Result<(), StoreError> {
    if len_bytes == 0 {
        return Ok(());
    }
    fs.allocate(file, path, offset, len_bytes, true)
}

/// Discards everything from `from_bytes` to the end and restores the pre-sized length, so the
/// tail reads as zeros (stale bytes must never look like records after a truncation).
pub fn zero_tail(
    fs: &dyn FileSystem,
    file: &File,
    path: &Path,
    from_bytes: u64,
    size_bytes: u64,
    prealloc: Prealloc,
) -> Result<(), StoreError> {
    file.set_len(from_bytes)
        .map_err(|e| StoreError::io("truncate", path, e))?;
    size_file(fs, file, path, size_bytes, prealloc)?;
    fs.sync(file, path, SyncKind::All)
}

/// Removes a file and makes the removal durable.
pub fn remove_file(fs: &dyn FileSystem, path: &Path) -> Result<(), StoreError> {
    std::fs::remove_file(path).map_err(|e| StoreError::io("remove", path, e))?;
    if let Some(dir) = path.parent() {
        sync_dir(fs, dir)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn has_noatime(file: &File) -> bool {
        use nix::fcntl::{fcntl, FcntlArg, OFlag};
        let bits = fcntl(file, FcntlArg::F_GETFL).unwrap();
        OFlag::from_bits_truncate(bits).contains(OFlag::O_NOATIME)
    }

    /// Segments, new and reopened, are read without access-time updates (this process owns
    /// the files it creates, so the flag is granted).
    #[test]
    fn segments_created_and_reopened_skip_access_times() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("00000000000000000000");
        let created = create_presized(&RealFs, &path, 4096, Prealloc::Blocks).unwrap();
        assert!(has_noatime(&created));
        assert!(has_noatime(&open_rw(&path).unwrap()));
        let plain = OpenOptions::new().read(true).open(&path).unwrap();
        assert!(
            !has_noatime(&plain),
            "the check must see a file without the flag"
        );
    }

    /// A temp file left by a crash during an earlier creation is rebuilt, never renamed in with
    /// its old bytes; a file under the real name larger than a segment is corruption.
    #[test]
    fn used_ratio_is_javas_rounded_up_share_of_used_plus_usable() {
        let usage = |total_bytes, free_bytes, available_bytes| DiskUsage {
            total_bytes,
            free_bytes,
            available_bytes,
        };
        // 50 used of 50 + 50 usable; 5 reserved blocks count as neither.
        assert_eq!(usage(105, 55, 50).used_ratio(), 0.5);
        // 901 / 1000 rounds up to 0.91.
        assert_eq!(usage(1000, 99, 99).used_ratio(), 0.91);
        assert_eq!(usage(0, 0, 0).used_ratio(), -1.0);
        let real = RealFs.disk_usage(Path::new("/")).unwrap();
        assert!((0.0..=1.0).contains(&real.used_ratio()), "{real:?}");
    }

    #[test]
    fn create_rebuilds_a_leftover_temp_file_and_refuses_an_oversized_one() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("00000000000000000000");
        std::fs::write(temp_path(&path), b"stale bytes").unwrap();
        let file = create_presized(&RealFs, &path, 4096, Prealloc::Blocks).unwrap();
        let mut head = [1u8; 11];
        file.read_exact_at(&mut head, 0).unwrap();
        assert_eq!(head, [0u8; 11]);
        assert_eq!(file.metadata().unwrap().len(), 4096);
        assert!(!temp_path(&path).exists());
        let big = dir.path().join("00000000000000004096");
        std::fs::write(&big, vec![0u8; 5000]).unwrap();
        let err = create_presized(&RealFs, &big, 4096, Prealloc::Sparse).unwrap_err();
        assert!(matches!(err, StoreError::Corrupted { .. }), "{err:?}");
    }
}
