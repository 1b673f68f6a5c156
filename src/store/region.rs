//! A pull answered with where its records are (file regions, for a zero-copy transfer) instead
//! of their bytes. Kept apart from `types` because a region holds the segment it points into.

use std::fs::File;
use std::sync::Arc;

use crate::store::segment::Segment;
use crate::store::types::GetMessageResult;

/// One byte range of a CommitLog segment file: one record, or several records that lie back to
/// back in the same file. Holding it keeps the file open, so the bytes stay readable even if
/// retention unlinks the segment meanwhile (the CommitLog is append-only: bytes below the
/// published write position never change).
#[derive(Debug, Clone)]
pub struct FileRegion {
    pub(crate) segment: Arc<Segment>,
    /// Position in the segment file.
    pub offset_bytes: u64,
    pub len_bytes: usize,
}

impl FileRegion {
    /// The open segment file.
    pub fn file(&self) -> &File {
        &self.segment.file
    }

    /// The segment file as a shared handle that keeps the file open for as long as it lives
    /// (for code that must not depend on store types, e.g. the network writer).
    pub fn file_handle(&self) -> Arc<dyn std::os::fd::AsFd + Send + Sync> {
        self.segment.clone()
    }

    /// CommitLog offset of the region's first byte.
    pub fn phy_offset(&self) -> i64 {
        self.segment.start_offset + self.offset_bytes as i64
    }
}

/// The shape of a planned pull, for the caller to choose between bytes and regions
/// ([`crate::store::MessageStore::get_message_regions`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RegionShape {
    /// Regions the records form (records back to back in one file are one region).
    pub regions: usize,
    pub bytes: usize,
    pub messages: usize,
}

/// A pull answered either with the records' bytes or with their locations
/// ([`crate::store::MessageStore::get_message_regions`]).
#[derive(Debug, Clone)]
pub struct GetMessageRegions {
    /// Status, offsets, `message_locations`, `queue_offsets`, `buffer_total_size` and
    /// `message_count` as [`crate::store::MessageStore::get_message`] would return them. With
    /// regions, `buffer` and `message_ranges` are empty.
    pub result: GetMessageResult,
    /// `Some`: the records in pull order, adjacent records of one file merged into one region;
    /// their lengths add up to `result.buffer_total_size`. `None`: the bytes are in
    /// `result.buffer`, as from `get_message`.
    pub regions: Option<Vec<FileRegion>>,
}
