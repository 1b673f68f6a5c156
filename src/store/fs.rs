//! The store's only file-system primitives: pre-sized segment files, positional writes, and the
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
    let result = match kind {
        SyncKind::Data => file.sync_data(),
        SyncKind::All => file.sync_all(),
    };
    result.map_err(|e| StoreError::io("fsync", path, e))
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

/// Creates a new file of exactly `size_bytes` zero bytes with its blocks allocated, durable
/// (file and directory entry) before it is used.
pub fn create_presized(path: &Path, size_bytes: u64) -> Result<File, StoreError> {
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .open(path)
        .map_err(|e| StoreError::io("create", path, e))?;
    allocate(&file, path, size_bytes)?;
    sync_file(&file, path, SyncKind::All)?;
    if let Some(dir) = path.parent() {
        sync_dir(dir)?;
    }
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
) -> Result<(), StoreError> {
    file.set_len(from_bytes)
        .map_err(|e| StoreError::io("truncate", path, e))?;
    allocate(file, path, size_bytes)?;
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
