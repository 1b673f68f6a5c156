//! Values crossing the store API: what to store, what a put or a pull returned.

use std::fs::File;
use std::net::SocketAddr;
use std::sync::Arc;

use bytes::Bytes;

use crate::store::segment::Segment;

/// One message to append (Java `MessageExtBrokerInner`, minus what the store fills in).
#[derive(Debug, Clone)]
pub struct MessageToStore {
    pub topic: String,
    pub queue_id: i32,
    pub flag: i32,
    pub body: Bytes,
    /// Already encoded with the `\x01`/`\x02` separators (Java `MessageDecoder.messageProperties2String`).
    pub properties: String,
    pub sys_flag: i32,
    pub born_timestamp_ms: i64,
    pub born_host: SocketAddr,
    pub reconsume_times: i32,
    pub prepared_transaction_offset: i64,
}

/// A batch send (Java `MessageBatch`): many messages for one queue, consecutive queue offsets, one append.
#[derive(Debug, Clone)]
pub struct BatchToStore {
    pub topic: String,
    pub queue_id: i32,
    pub sys_flag: i32,
    pub born_timestamp_ms: i64,
    pub born_host: SocketAddr,
    pub reconsume_times: i32,
    /// Concatenated client records: TOTALSIZE, MAGIC, BODYCRC, FLAG, BODYLEN, BODY, PROPLEN,
    /// PROPERTIES (`MessageDecoder.encodeMessage`).
    pub encoded_messages: Bytes,
}

/// Java `PutMessageStatus`, same names and order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PutMessageStatus {
    PutOk,
    FlushDiskTimeout,
    FlushSlaveTimeout,
    SlaveNotAvailable,
    ServiceNotAvailable,
    CreateMappedFileFailed,
    MessageIllegal,
    PropertiesSizeExceeded,
    OsPageCacheBusy,
    UnknownError,
    InSyncReplicasNotEnough,
    PutToRemoteBrokerFailed,
    LmqConsumeQueueNumExceeded,
    WheelTimerFlowControl,
    WheelTimerMsgIllegal,
    WheelTimerNotEnable,
}

/// What a successful append wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PutMessageResult {
    pub status: PutMessageStatus,
    /// CommitLog offset of the first record.
    pub wrote_offset: i64,
    /// Bytes of all records written (not counting a BLANK filler).
    pub wrote_bytes: i32,
    /// Queue offset of the first message (0 for prepared/rollback transaction messages).
    pub logics_offset: i64,
    /// Offset msgIds (Java `MessageDecoder.createMessageId`), one per record, uppercase hex.
    pub msg_ids: Vec<String>,
    pub store_timestamp_ms: i64,
    pub message_count: i32,
}

impl PutMessageResult {
    /// CommitLog offset just past the last record: what [`crate::store::MessageStore::wait_flushed`]
    /// takes.
    pub fn end_offset(&self) -> i64 {
        self.wrote_offset + i64::from(self.wrote_bytes)
    }
}

/// Java `GetMessageStatus`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum GetMessageStatus {
    Found,
    NoMatchedMessage,
    MessageWasRemoving,
    OffsetFoundNull,
    OffsetOverflowBadly,
    OffsetOverflowOne,
    OffsetTooSmall,
    NoMatchedLogicQueue,
    NoMessageInQueue,
}

/// The outcome of one pull.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GetMessageResult {
    pub status: GetMessageStatus,
    pub next_begin_offset: i64,
    pub min_offset: i64,
    pub max_offset: i64,
    pub suggest_pulling_from_slave: bool,
    /// All found records concatenated, byte-for-byte as stored (the pull response body).
    pub buffer: Bytes,
    /// `(start, len)` of each record in `buffer`.
    pub message_ranges: Vec<(usize, usize)>,
    /// `(commit log offset, size)` of each record.
    pub message_locations: Vec<(i64, i32)>,
    /// Queue offset of each record.
    pub queue_offsets: Vec<i64>,
    pub buffer_total_size: usize,
    pub message_count: usize,
}

impl GetMessageResult {
    pub(crate) fn empty(status: GetMessageStatus, next_begin_offset: i64) -> Self {
        GetMessageResult {
            status,
            next_begin_offset,
            min_offset: 0,
            max_offset: 0,
            suggest_pulling_from_slave: false,
            buffer: Bytes::new(),
            message_ranges: Vec::new(),
            message_locations: Vec::new(),
            queue_offsets: Vec::new(),
            buffer_total_size: 0,
            message_count: 0,
        }
    }

    /// The bytes of the i-th record.
    pub fn message(&self, index: usize) -> &[u8] {
        let (start, len) = self.message_ranges[index];
        &self.buffer[start..start + len]
    }
}

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
    pub fn commit_log_offset(&self) -> i64 {
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

/// Which side of equal timestamps `offset_by_timestamp` returns (Java `BoundaryType`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum BoundaryType {
    /// The first offset whose store time is >= the timestamp.
    #[default]
    Lower,
    /// The last offset whose store time is <= the timestamp.
    Upper,
}

/// Receives one event per ConsumeQueue unit written (Java `MessageArrivingListener`), used by
/// long polling. Called on the appending thread after the unit is readable; must not call
/// `put_message` (it runs while the append is being acknowledged).
pub trait ArrivalListener: Send + Sync {
    #[allow(clippy::too_many_arguments)]
    fn arriving(
        &self,
        topic: &str,
        queue_id: i32,
        logic_offset_max_next: i64,
        tags_code: i64,
        store_timestamp_ms: i64,
        properties: &[u8],
    );
}

/// What recovery found and did at `open` (for logs, tests and benches).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RecoveryReport {
    /// The abort file was present: the previous run did not shut down cleanly.
    pub abnormal: bool,
    /// CommitLog offset where the validating scan started.
    pub scanned_from_offset: i64,
    /// CommitLog offset where valid data ends (the new max physical offset).
    pub commit_log_end_offset: i64,
    /// The scan stopped at bytes that were not the clean (zeroed) end of data: a torn,
    /// corrupted or stale record was cut off.
    pub invalid_tail_found: bool,
    /// CommitLog files after the valid end that were deleted.
    pub commit_log_files_deleted: usize,
    /// ConsumeQueue units written from CommitLog records the queue lacked.
    pub cq_units_rebuilt: u64,
    /// ConsumeQueue units dropped because they pointed past the CommitLog end or disagreed with it.
    pub cq_units_dropped: u64,
    /// A queue lacked units older than the scan window, so the whole CommitLog was re-scanned.
    pub full_rebuild: bool,
}
