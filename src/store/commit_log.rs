//! The CommitLog: one log for all topics, fixed-size segment files under `<root>/commitlog/`
//! named by their 20-digit start offset (Java `CommitLog` + `MappedFileQueue`). Appends are
//! done by the store's single writer; readers use the published `max_phy_offset`.

use std::path::Path;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;

use crate::store::fs::{FileSystem, Prealloc};
use crate::store::segment::SegmentList;

#[derive(Debug)]
pub struct CommitLog {
    segs: SegmentList,
    file_size_bytes: i64,
    /// Write position: every byte below it is a complete record or BLANK filler. Published with
    /// Release after the bytes are written.
    max_phy_offset: AtomicI64,
}

impl CommitLog {
    pub fn new(root: &Path, file_size_bytes: u64, fs: Arc<dyn FileSystem>) -> Self {
        CommitLog {
            segs: SegmentList::new(
                root.join("commitlog"),
                file_size_bytes,
                Prealloc::Blocks,
                fs,
            ),
            file_size_bytes: file_size_bytes as i64,
            max_phy_offset: AtomicI64::new(0),
        }
    }

    pub fn segments(&self) -> &SegmentList {
        &self.segs
    }

    pub fn file_size_bytes(&self) -> i64 {
        self.file_size_bytes
    }

    pub fn max_phy_offset(&self) -> i64 {
        self.max_phy_offset.load(Ordering::Acquire)
    }

    pub(crate) fn set_max_phy_offset(&self, phy_offset: i64) {
        self.max_phy_offset.store(phy_offset, Ordering::Release);
    }

    /// Start of the first live file, or the write position when there is none
    /// (Java `CommitLog.getMinOffset`).
    pub fn min_phy_offset(&self) -> i64 {
        match self.segs.first() {
            Some(seg) => seg.start_offset,
            None => self.max_phy_offset(),
        }
    }

    /// Start of the file after the one holding `phy_offset` (Java `CommitLog.rollNextFile`).
    pub fn roll_next_file(&self, phy_offset: i64) -> i64 {
        phy_offset + self.file_size_bytes - phy_offset % self.file_size_bytes
    }
}
