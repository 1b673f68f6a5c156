//! The store's only file-system primitives: full-size segment files (preallocated or sparse), positional writes, and the
//! one audited fsync path. A failed fsync is returned as an error and the caller poisons the
//! store; nothing here retries a sync.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;
use std::path::Path;

use crate::store::error::StoreError;

/// What an fsync must make durable.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SyncKind {
    /// `fdatasync`: the data (files are pre-sized, so no size change needs syncing).
    Data,
    /// `fsync`: data and metadata (after creating or resizing a file).
    All,
}

/// The single fsync entry point of the store. Every durability claim goes through here.
pub fn sync_file(file: &File, path: &Path, kind: SyncKind) -> Result<(), StoreError> {
    FSYNCS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let result = match kind {
        SyncKind::Data => file.sync_data(),
        SyncKind::All => file.sync_all(),
    };
    result.map_err(|e| StoreError::io("fsync", path, e))
}

/// fsync calls made through [`sync_file`] (and so [`sync_dir`]) by this process, failed ones
/// included: the store's every fsync goes through here.
static FSYNCS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// The number of fsyncs so far (metrics).
pub fn fsync_count() -> u64 {
    FSYNCS.load(std::sync::atomic::Ordering::Relaxed)
}

/// fsyncs a directory so a created, renamed or removed entry is durable.
pub fn sync_dir(dir: &Path) -> Result<(), StoreError> {
    let handle = File::open(dir).map_err(|e| StoreError::io("open dir", dir, e))?;
    sync_file(&handle, dir, SyncKind::All)
}

/// Creates the directory (and parents) and fsyncs its parent when it was new.
pub fn ensure_dir(dir: &Path) -> Result<(), StoreError> {
    if dir.is_dir() {
        return Ok(());
    }
    std::fs::create_dir_all(dir).map_err(|e| StoreError::io("create dir", dir, e))?;
    if let Some(parent) = dir.parent() {
        sync_dir(parent)?;
    }
    Ok(())
}

/// Opens an existing segment for reading and writing.
pub fn open_rw(path: &Path) -> Result<File, StoreError> {
    OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)
        .map_err(|e| StoreError::io("open", path, e))
}

/// How a segment file gets its bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Prealloc {
    /// `set_len` + `fallocate`: writes into the file cannot fail for lack of space later
    /// (CommitLog segments, where a failed write poisons the store).
    Blocks,
    /// `set_len` only: a sparse file whose blocks the file system allocates as they are written
    /// (ConsumeQueue segments: 6 MB per queue adds up on a broker with many queues; Java's
    /// `MappedFile` maps the full size without writing it, which is sparse too).
    Sparse,
}

/// Gives `file` its full length the way `prealloc` says.
pub fn size_file(
    file: &File,
    path: &Path,
    size_bytes: u64,
    prealloc: Prealloc,
) -> Result<(), StoreError> {
    match prealloc {
        Prealloc::Blocks => allocate(file, path, size_bytes),
        Prealloc::Sparse => file
            .set_len(size_bytes)
            .map_err(|e| StoreError::io("set_len", path, e)),
    }
}

/// The name a segment is built under before it is renamed into place. Not 20 digits, so
/// `SegmentList::scan_dir` never takes it for a segment.
pub fn temp_path(path: &Path) -> std::path::PathBuf {
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
    path: &Path,
    size_bytes: u64,
    prealloc: Prealloc,
) -> Result<File, StoreError> {
    let file = match OpenOptions::new().read(true).write(true).open(path) {
        Ok(file) => {
            resize_existing(&file, path, size_bytes, prealloc)?;
            file
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            let tmp = temp_path(path);
            build_and_rename(&tmp, path, size_bytes, prealloc).inspect_err(|_| {
                // Best effort: the error being returned is the one that matters, and a temp
                // file that stays is truncated and reused by the next try.
                let _ = std::fs::remove_file(&tmp);
            })?
        }
        Err(e) => return Err(StoreError::io("open", path, e)),
    };
    if let Some(dir) = path.parent() {
        sync_dir(dir)?;
    }
    Ok(file)
}

fn resize_existing(
    file: &File,
    path: &Path,
    size_bytes: u64,
    prealloc: Prealloc,
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
    size_file(file, path, size_bytes, prealloc)?;
    sync_file(file, path, SyncKind::All)
}

fn build_and_rename(
    tmp: &Path,
    path: &Path,
    size_bytes: u64,
    prealloc: Prealloc,
) -> Result<File, StoreError> {
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(tmp)
        .map_err(|e| StoreError::io("create", tmp, e))?;
    size_file(&file, tmp, size_bytes, prealloc)?;
    sync_file(&file, tmp, SyncKind::All)?;
    std::fs::rename(tmp, path).map_err(|e| StoreError::io("rename", path, e))?;
    Ok(file)
}

/// Sets the length and asks the file system to allocate the blocks, so later writes do not
/// fail for lack of space. File systems without fallocate keep the sparse file.
pub fn allocate(file: &File, path: &Path, size_bytes: u64) -> Result<(), StoreError> {
    file.set_len(size_bytes)
        .map_err(|e| StoreError::io("set_len", path, e))?;
    let len = i64::try_from(size_bytes).map_err(|_| {
        StoreError::io(
            "fallocate",
            path,
            io::Error::from(io::ErrorKind::InvalidInput),
        )
    })?;
    match nix::fcntl::fallocate(file, nix::fcntl::FallocateFlags::empty(), 0, len) {
        Ok(()) => Ok(()),
        Err(nix::errno::Errno::EOPNOTSUPP) => Ok(()),
        Err(errno) => Err(StoreError::io("fallocate", path, io::Error::from(errno))),
    }
}

/// Allocates the blocks of `len_bytes` bytes at `offset` inside the file (its length stays),
/// so writes there cannot fail for lack of space. File systems without fallocate keep the
/// holes.
pub fn allocate_range(
    file: &File,
    path: &Path,
    offset: u64,
    len_bytes: u64,
) -> Result<(), StoreError> {
    if len_bytes == 0 {
        return Ok(());
    }
    let invalid = || {
        StoreError::io(
            "fallocate",
            path,
            io::Error::from(io::ErrorKind::InvalidInput),
        )
    };
    let offset = i64::try_from(offset).map_err(|_| invalid())?;
    let len = i64::try_from(len_bytes).map_err(|_| invalid())?;
    match nix::fcntl::fallocate(
        file,
        nix::fcntl::FallocateFlags::FALLOC_FL_KEEP_SIZE,
        offset,
        len,
    ) {
        Ok(()) => Ok(()),
        Err(nix::errno::Errno::EOPNOTSUPP) => Ok(()),
        Err(errno) => Err(StoreError::io("fallocate", path, io::Error::from(errno))),
    }
}

/// Writes all of `buf` at `offset` (pwrite).
pub fn write_at(file: &File, path: &Path, buf: &[u8], offset: u64) -> Result<(), StoreError> {
    file.write_all_at(buf, offset)
        .map_err(|e| StoreError::io("pwrite", path, e))
}

/// Discards everything from `from_bytes` to the end and restores the pre-sized length, so the
/// tail reads as zeros (stale bytes must never look like records after a truncation).
pub fn zero_tail(
    file: &File,
    path: &Path,
    from_bytes: u64,
    size_bytes: u64,
    prealloc: Prealloc,
) -> Result<(), StoreError> {
    file.set_len(from_bytes)
        .map_err(|e| StoreError::io("truncate", path, e))?;
    size_file(file, path, size_bytes, prealloc)?;
    sync_file(file, path, SyncKind::All)
}

/// Removes a file and makes the removal durable.
pub fn remove_file(path: &Path) -> Result<(), StoreError> {
    std::fs::remove_file(path).map_err(|e| StoreError::io("remove", path, e))?;
    if let Some(dir) = path.parent() {
        sync_dir(dir)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A temp file left by a crash during an earlier creation is rebuilt, never renamed in with
    /// its old bytes; a file under the real name larger than a segment is corruption.
    #[test]
    fn create_rebuilds_a_leftover_temp_file_and_refuses_an_oversized_one() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("00000000000000000000");
        std::fs::write(temp_path(&path), b"stale bytes").unwrap();
        let file = create_presized(&path, 4096, Prealloc::Blocks).unwrap();
        let mut head = [1u8; 11];
        file.read_exact_at(&mut head, 0).unwrap();
        assert_eq!(head, [0u8; 11]);
        assert_eq!(file.metadata().unwrap().len(), 4096);
        assert!(!temp_path(&path).exists());
        let big = dir.path().join("00000000000000004096");
        std::fs::write(&big, vec![0u8; 5000]).unwrap();
        let err = create_presized(&big, 4096, Prealloc::Sparse).unwrap_err();
        assert!(matches!(err, StoreError::Corrupted { .. }), "{err:?}");
    }
}
