//! Values crossing the store API: what to store, what a put or a pull returned.

use std::net::SocketAddr;

use bytes::Bytes;

use crate::store::error::StoreError;
use crate::store::filter::MessageFilter;

/// One message to append (Java `MessageExtBrokerInner`, minus what the store fills in).
#[derive(Debug, Clone)]
pub struct MessageToStore {
    pub topic: String,
    pub queue_id: i32,
    pub flag: i32,
    pub body: Bytes,
    /// Already encoded with the `\x01`/`\x02` separators (Java
    /// `MessageDecoder.messageProperties2String`).
    pub properties: String,
    pub sys_flag: i32,
    pub born_timestamp_ms: i64,
    pub born_host: SocketAddr,
    pub reconsume_times: i32,
    pub prepared_transaction_offset: i64,
}

/// A batch send (Java `MessageBatch`): many messages for one queue, consecutive queue offsets,
/// one append.
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

// The mapping lives beside the status rather than in `error`, so that the error type depends on
// nothing but the byte format.
impl StoreError {
    /// The Java `PutMessageStatus` a broker answers with when a put fails with this error.
    pub fn put_status(&self) -> PutMessageStatus {
        match self {
            StoreError::MessageTooLarge { .. }
            | StoreError::TopicIllegal { .. }
            | StoreError::QueueIdIllegal { .. }
            | StoreError::MessageIllegal { .. }
            | StoreError::BatchMalformed { .. } => PutMessageStatus::MessageIllegal,
            StoreError::PropertiesTooLarge { .. } => PutMessageStatus::PropertiesSizeExceeded,
            StoreError::FlushTimeout | StoreError::FlushFailed { .. } => {
                PutMessageStatus::FlushDiskTimeout
            }
            StoreError::Poisoned { .. }
            | StoreError::DiskFull { .. }
            | StoreError::ShutDown
            | StoreError::Locked { .. }
            | StoreError::SlaveReadOnly => PutMessageStatus::ServiceNotAvailable,
            StoreError::Io { .. }
            | StoreError::Corrupted { .. }
            | StoreError::Config { .. }
            | StoreError::ReplicaOffsetMismatch { .. } => PutMessageStatus::UnknownError,
        }
    }
}

/// What a successful append wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PutMessageResult {
    pub status: PutMessageStatus,
    /// CommitLog offset of the first record.
    pub wrote_phy_offset: i64,
    /// Bytes of all records written (not counting a BLANK filler).
    pub wrote_bytes: i32,
    /// Queue offset of the first message (0 for prepared/rollback transaction messages).
    pub queue_offset: i64,
    /// Offset msgIds (Java `MessageDecoder.createMessageId`), one per record, uppercase hex.
    pub msg_ids: Vec<String>,
    pub store_timestamp_ms: i64,
    pub message_count: i32,
}

impl PutMessageResult {
    /// CommitLog offset just past the last record: what
    /// [`crate::store::MessageStore::wait_flushed`] takes.
    pub fn end_phy_offset(&self) -> i64 {
        self.wrote_phy_offset + i64::from(self.wrote_bytes)
    }
}

/// One pull (the parameters of Java `DefaultMessageStore.getMessage`).
#[derive(Clone, Copy)]
pub struct GetMessageRequest<'a> {
    /// The consumer group: Java's parameter, kept for parity; the store does not use it.
    pub group: &'a str,
    pub topic: &'a str,
    pub queue_id: i32,
    /// The first queue offset to return.
    pub queue_offset: i64,
    /// At most this many messages are returned (`maxMsgNums`).
    pub max_msg_nums: i32,
    /// Decides which messages are returned.
    pub filter: &'a dyn MessageFilter,
}

impl std::fmt::Debug for GetMessageRequest<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GetMessageRequest")
            .field("group", &self.group)
            .field("topic", &self.topic)
            .field("queue_id", &self.queue_id)
            .field("queue_offset", &self.queue_offset)
            .field("max_msg_nums", &self.max_msg_nums)
            .finish_non_exhaustive()
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
    pub min_offset_in_queue: i64,
    pub max_offset_in_queue: i64,
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
            min_offset_in_queue: 0,
            max_offset_in_queue: 0,
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
/// `put_message` (it runs while the append is being acknowledged). `max_offset_in_queue` is the
/// queue's max offset with this message's unit in it (its queue offset + 1).
pub trait ArrivalListener: Send + Sync {
    fn arriving(
        &self,
        topic: &str,
        queue_id: i32,
        max_offset_in_queue: i64,
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
    pub scanned_from_phy_offset: i64,
    /// CommitLog offset where valid data ends (the new max physical offset).
    pub end_phy_offset: i64,
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
    /// Files written or renamed aside by the quarantine corruption policy: the copy of the bad
    /// tail of the corrupt file, then every later CommitLog file.
    pub quarantined_files: Vec<std::path::PathBuf>,
    /// Records indexed again because the message index ended before the CommitLog.
    pub index_records_rebuilt: u64,
}
