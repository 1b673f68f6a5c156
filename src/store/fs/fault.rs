//! A [`FileSystem`] for tests: the real file system, with named failpoints that make chosen
//! operations fail, and a disk usage that can be set instead of measured.
//!
//! A failpoint is armed for paths containing a substring (`"commitlog"`, `"consumequeue"`,
//! `"checkpoint"`, `"index/"`, or `""` for every path) and fires for the next `times` matching calls.

use std::fs::File;
use std::io;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use super::{DiskUsage, FileSystem, RealFs, SyncKind};
use crate::store::error::StoreError;

/// A named failure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Failpoint {
    /// `write_at` writes the first half of the buffer, then fails (EIO).
    ShortWrite,
    /// `sync` fails with EIO.
    FsyncError,
    /// `sync` takes [`SLOW_FSYNC`], then fails with EIO (lets waiters gather on a failing
    /// fsync).
    SlowFsyncError,
    /// `sync` takes [`SLOW_FSYNC`], then does the real fsync (lets a test see what runs
    /// beside a long fsync).
    SlowFsync,
    /// `create` fails with ENOSPC.
    CreateEnospc,
    /// `allocate` fails with ENOSPC (and allocates nothing).
    AllocateEnospc,
    /// `rename` fails with EIO.
    RenameError,
    /// `write_at` fails with ENOSPC and writes nothing (a write into a sparse file's hole on a
    /// full disk).
    WriteEnospc,
    /// `read_at` fails with EIO.
    ReadError,
}

#[derive(Debug)]
struct Armed {
    point: Failpoint,
    path_contains: String,
    times_left: usize,
}

/// The real file system with failpoints; see the module docs.
#[derive(Debug, Default)]
pub struct FaultFs {
    armed: Mutex<Vec<Armed>>,
    fired: Mutex<Vec<(Failpoint, String)>>,
    disk_used_percent: Mutex<Option<f64>>,
    /// [`Failpoint::SlowFsync`] fsyncs running now, and the most that ever ran at once.
    syncs_running: AtomicUsize,
    max_syncs_running: AtomicUsize,
}

/// How long a [`Failpoint::SlowFsyncError`] fsync takes before it fails.
pub const SLOW_FSYNC: std::time::Duration = std::time::Duration::from_millis(300);

/// Size of the disk [`FaultFs::set_disk_used_percent`] reports.
const SIMULATED_DISK_BYTES: u64 = 100 * 1024 * 1024 * 1024;

impl FaultFs {
    pub fn new() -> Self {
        FaultFs::default()
    }

    /// Makes the next `times` calls of `point` on a path containing `path_contains` fail.
    pub fn arm(&self, point: Failpoint, path_contains: &str, times: usize) {
        self.armed.lock().unwrap().push(Armed {
            point,
            path_contains: path_contains.to_owned(),
            times_left: times,
        });
    }

    /// Disarms every failpoint.
    pub fn disarm_all(&self) {
        self.armed.lock().unwrap().clear();
    }

    /// The failures that fired, with the path each hit.
    pub fn fired(&self) -> Vec<(Failpoint, String)> {
        self.fired.lock().unwrap().clone()
    }

    /// The most [`Failpoint::SlowFsync`] fsyncs that ran at the same time.
    pub fn max_slow_fsyncs_at_once(&self) -> usize {
        self.max_syncs_running.load(Ordering::Acquire)
    }

    /// Reports this used share of a simulated disk instead of measuring; `None` measures
    /// again.
    pub fn set_disk_used_percent(&self, percent: Option<f64>) {
        *self.disk_used_percent.lock().unwrap() = percent;
    }

    fn fires(&self, point: Failpoint, path: &Path) -> bool {
        let text = path.to_string_lossy();
        let mut armed = self.armed.lock().unwrap();
        let hit = armed.iter_mut().find(|a| {
            a.point == point && a.times_left > 0 && text.contains(a.path_contains.as_str())
        });
        let Some(hit) = hit else { return false };
        hit.times_left -= 1;
        self.fired.lock().unwrap().push((point, text.into_owned()));
        true
    }
}

fn failed(op: &'static str, path: &Path, errno: nix::errno::Errno) -> StoreError {
    StoreError::io(op, path, io::Error::from(errno))
}

impl FileSystem for FaultFs {
    fn create(&self, path: &Path) -> Result<File, StoreError> {
        if self.fires(Failpoint::CreateEnospc, path) {
            return Err(failed("create", path, nix::errno::Errno::ENOSPC));
        }
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
        if self.fires(Failpoint::AllocateEnospc, path) {
            return Err(failed("fallocate", path, nix::errno::Errno::ENOSPC));
        }
        RealFs.allocate(file, path, offset_bytes, len_bytes, keep_size)
    }

    fn write_at(
        &self,
        file: &File,
        path: &Path,
        buf: &[u8],
        offset_bytes: u64,
    ) -> Result<(), StoreError> {
        if self.fires(Failpoint::ShortWrite, path) {
            RealFs.write_at(file, path, &buf[..buf.len() / 2], offset_bytes)?;
            return Err(failed("pwrite", path, nix::errno::Errno::EIO));
        }
        if self.fires(Failpoint::WriteEnospc, path) {
            return Err(failed("pwrite", path, nix::errno::Errno::ENOSPC));
        }
        RealFs.write_at(file, path, buf, offset_bytes)
    }

    fn read_at(
        &self,
        file: &File,
        path: &Path,
        buf: &mut [u8],
        offset_bytes: u64,
    ) -> Result<(), StoreError> {
        if self.fires(Failpoint::ReadError, path) {
            return Err(failed("pread", path, nix::errno::Errno::EIO));
        }
        RealFs.read_at(file, path, buf, offset_bytes)
    }

    fn sync(&self, file: &File, path: &Path, kind: SyncKind) -> Result<(), StoreError> {
        if self.fires(Failpoint::FsyncError, path) {
            return Err(failed("fsync", path, nix::errno::Errno::EIO));
        }
        if self.fires(Failpoint::SlowFsyncError, path) {
            std::thread::sleep(SLOW_FSYNC);
            return Err(failed("fsync", path, nix::errno::Errno::EIO));
        }
        if self.fires(Failpoint::SlowFsync, path) {
            let running = self.syncs_running.fetch_add(1, Ordering::AcqRel) + 1;
            self.max_syncs_running.fetch_max(running, Ordering::AcqRel);
            std::thread::sleep(SLOW_FSYNC);
            let synced = RealFs.sync(file, path, kind);
            self.syncs_running.fetch_sub(1, Ordering::AcqRel);
            return synced;
        }
        RealFs.sync(file, path, kind)
    }

    fn rename(&self, from: &Path, to: &Path) -> Result<(), StoreError> {
        if self.fires(Failpoint::RenameError, to) {
            return Err(failed("rename", to, nix::errno::Errno::EIO));
        }
        RealFs.rename(from, to)
    }

    fn disk_usage(&self, path: &Path) -> Result<DiskUsage, StoreError> {
        match *self.disk_used_percent.lock().unwrap() {
            Some(percent) => {
                let used = (SIMULATED_DISK_BYTES as f64 * percent / 100.0) as u64;
                let free_bytes = SIMULATED_DISK_BYTES.saturating_sub(used);
                Ok(DiskUsage {
                    total_bytes: SIMULATED_DISK_BYTES,
                    free_bytes,
                    available_bytes: free_bytes,
                })
            }
            None => RealFs.disk_usage(path),
        }
    }
}
