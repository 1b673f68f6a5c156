//! Store configuration. Defaults equal RocketMQ's `MessageStoreConfig`.

use std::net::{Ipv4Addr, SocketAddr};
use std::path::PathBuf;

use crate::store::error::StoreError;
use crate::store::format::{CQ_UNIT_SIZE_BYTES, END_FILE_BLANK_SIZE_MIN_BYTES};

/// `mappedFileSizeCommitLog`.
pub const COMMIT_LOG_FILE_SIZE_DEFAULT_BYTES: u64 = 1024 * 1024 * 1024;
/// `mappedFileSizeConsumeQueue` / 20.
pub const CONSUME_QUEUE_FILE_UNITS_DEFAULT: u64 = 300_000;
/// `maxMessageSize` (applies to the body).
pub const MESSAGE_SIZE_MAX_DEFAULT_BYTES: usize = 4 * 1024 * 1024;
/// `maxHashSlotNum`.
pub const MAX_HASH_SLOT_NUM_DEFAULT: u32 = 5_000_000;
/// `maxIndexNum`.
pub const MAX_INDEX_NUM_DEFAULT: u32 = 5_000_000 * 4;
/// `StoreUtil.TOTAL_PHYSICAL_MEMORY_SIZE` fallback when the OS does not say.
pub const FALLBACK_TOTAL_PHYSICAL_MEMORY_BYTES: u64 = 24 * 1024 * 1024 * 1024;
/// Smallest CommitLog file we accept: room for a few records and the BLANK filler.
pub const COMMIT_LOG_FILE_SIZE_MIN_BYTES: u64 = 4096;
/// A BLANK filler's TOTALSIZE is an i32, so a file can hold at most i32::MAX bytes.
pub const COMMIT_LOG_FILE_SIZE_MAX_BYTES: u64 = i32::MAX as u64;

/// The one rule for a CommitLog file's size, used by [`StoreConfig::validate`] and by the
/// broker's configuration check: within the bounds above and a whole number of 4 KiB pages
/// (files are preallocated and read with O_DIRECT-sized buffers).
pub fn check_commit_log_file_size(size_bytes: u64) -> Result<(), String> {
    let bounds = COMMIT_LOG_FILE_SIZE_MIN_BYTES..=COMMIT_LOG_FILE_SIZE_MAX_BYTES;
    if !bounds.contains(&size_bytes) || !size_bytes.is_multiple_of(COMMIT_LOG_FILE_SIZE_MIN_BYTES) {
        return Err(format!(
            "{size_bytes} must be a multiple of {COMMIT_LOG_FILE_SIZE_MIN_BYTES} within \
             {COMMIT_LOG_FILE_SIZE_MIN_BYTES}..={COMMIT_LOG_FILE_SIZE_MAX_BYTES}"
        ));
    }
    Ok(())
}

/// The one rule for the index files' dimensions (store and broker configuration): at least 1
/// slot and 2 entries (entry 0 is never used), and a file size that fits Java's `int`.
pub fn check_index_dimensions(hash_slot_num: u32, index_num: u32) -> Result<(), String> {
    let size = crate::store::index_file::index_file_size_bytes(
        i32::try_from(hash_slot_num).unwrap_or(i32::MAX),
        i32::try_from(index_num).unwrap_or(i32::MAX),
    );
    if hash_slot_num == 0 || index_num < 2 || size > i32::MAX as u64 {
        return Err(format!(
            "maxHashSlotNum {hash_slot_num} and maxIndexNum {index_num} must be at least 1 and 2, \
             and make an index file of at most {} bytes (40 + 4 per slot + 20 per entry = {size})",
            i32::MAX
        ));
    }
    Ok(())
}

/// `flushDiskType`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FlushPolicy {
    /// `ASYNC_FLUSH`: fsync every `flush_interval_ms`; puts return after the write.
    #[default]
    Async,
    /// `SYNC_FLUSH`: group commit; [`crate::store::MessageStore::wait_flushed`] resolves after
    /// the fsync that covers the record.
    Sync,
}

/// What recovery does with an invalid record that has valid CommitLog data after it (one found
/// before the last file that holds data). A torn tail in the last file is always truncated:
/// that is what a crash leaves behind, not corruption.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum CorruptionPolicy {
    /// Refuse to open, naming the file and the byte offset (the safe default: nothing is
    /// deleted, an operator decides).
    #[default]
    Refuse,
    /// Move the bad tail aside and open: the bytes from the invalid record to the end of its
    /// file are copied into `<commitlog>/<20-digit offset>.corrupt-<ms>` and every later file is
    /// renamed to `<name>.corrupt-<ms>`; the log then ends at the invalid record.
    Quarantine,
}

#[derive(Debug, Clone)]
pub struct StoreConfig {
    /// `storePathRootDir`.
    pub root_dir: PathBuf,
    /// `mappedFileSizeCommitLog`.
    pub commit_log_file_size_bytes: u64,
    /// `mappedFileSizeConsumeQueue / 20`.
    pub consume_queue_file_units: u64,
    /// `flushDiskType`.
    pub flush_policy: FlushPolicy,
    /// `flushIntervalCommitLog` (async flush period).
    pub flush_interval_ms: u64,
    /// `flushIntervalConsumeQueue`: period of the ConsumeQueue fsync.
    pub flush_consume_queue_interval_ms: u64,
    /// `flushConsumeQueueLeastPages`: a periodic flush fsyncs a ConsumeQueue only when its end
    /// crossed this many 4 KiB pages since its last fsync.
    pub flush_consume_queue_least_pages: u64,
    /// `flushConsumeQueueThoroughInterval`: at least this long after the last thorough flush,
    /// a flush fsyncs every dirty ConsumeQueue (no least pages) and writes the checkpoint.
    pub flush_consume_queue_thorough_interval_ms: u64,
    /// `syncFlushTimeout`.
    pub sync_flush_timeout_ms: u64,
    /// `maxMessageSize` (body bytes).
    pub max_message_size_bytes: usize,
    /// `fileReservedTime`.
    pub file_reserved_time_hours: u64,
    /// `cleanResourceInterval`.
    pub delete_check_interval_ms: u64,
    /// `deleteCommitLogFilesInterval`-free batch cap: files deleted per retention pass
    /// (`deleteFileBatchMax`).
    pub delete_files_batch_max: usize,
    /// `accessMessageInMemoryMaxRatio`.
    pub access_message_in_memory_max_ratio_percent: u64,
    /// `maxTransferBytesOnMessageInMemory`.
    pub max_transfer_bytes_on_message_in_memory: usize,
    /// `maxTransferCountOnMessageInMemory`.
    pub max_transfer_count_on_message_in_memory: usize,
    /// `maxTransferBytesOnMessageInDisk`.
    pub max_transfer_bytes_on_message_in_disk: usize,
    /// `maxTransferCountOnMessageInDisk`.
    pub max_transfer_count_on_message_in_disk: usize,
    /// `maxFilterMessageSize`: bytes of ConsumeQueue one pull may scan (at least maxMsgNums units).
    pub max_filter_message_size_bytes: usize,
    /// `StoreUtil.TOTAL_PHYSICAL_MEMORY_SIZE`; settable so tests can force the on-disk regime.
    pub total_physical_memory_bytes: u64,
    /// Broker ip + main listen port, written into STOREHOST and the offset msgId.
    pub store_host: SocketAddr,
    /// `brokerRole == SLAVE`: offset corrections are not applied (`nextOffsetCorrection`).
    pub broker_role_slave: bool,
    /// `offsetCheckInSlave`.
    pub offset_check_in_slave: bool,
    /// `checkCRCOnRecover`.
    pub check_crc_on_recover: bool,
    /// What to do with corruption found before the end of the CommitLog.
    pub corruption_policy: CorruptionPolicy,
    /// `diskMaxUsedSpaceRatio`: above this used share of the disk Java deletes expired files
    /// before `deleteWhen`. ringmq has no `deleteWhen` (expired files go on every pass), so
    /// crossing it is only logged.
    pub disk_max_used_space_ratio_percent: u64,
    /// `diskSpaceCleanForciblyRatio`: above it a retention pass deletes the oldest CommitLog
    /// files whether they expired or not (with `clean_file_forcibly_enabled`).
    pub disk_space_clean_forcibly_ratio_percent: u64,
    /// `diskSpaceWarningLevelRatio`: above it the disk is full and the store refuses writes
    /// ([`StoreError::DiskFull`]) until a pass measures at most the clean-forcibly ratio.
    pub disk_space_warning_level_ratio_percent: u64,
    /// `cleanFileForciblyEnable`.
    pub clean_file_forcibly_enabled: bool,
    /// `messageIndexEnable`: build the message index (QUERY_MESSAGE by key).
    pub message_index_enable: bool,
    /// `maxHashSlotNum`: hash slots per index file.
    pub max_hash_slot_num: u32,
    /// `maxIndexNum`: entries per index file.
    pub max_index_num: u32,
    /// With `sync` flush: bytes past the CommitLog write position kept written with zeros, so
    /// a group commit's fsync does not also write the block map (0: off). ringmq's own; see
    /// `message_store::zero_ahead`.
    pub zero_ahead_bytes: u64,
    /// Pulls far enough behind the end copy CommitLog records and ConsumeQueue units from the
    /// files' read-only mappings (Java reads its `MappedFile`s the same way) instead of reading
    /// them through the io engine; a file that cannot be mapped, or a copy that faults, falls
    /// back to the io engine. ringmq's own; see `store::mapped_file`.
    pub read_mapped: bool,
    /// Bytes of the newest appended records kept in memory, so pulls that keep up with the
    /// appends copy them from there instead of reading the file (0: off). ringmq's own; see
    /// `message_store::recent_records`.
    pub recent_records_bytes: u64,
}

/// Default of [`StoreConfig::zero_ahead_bytes`]: off, as Java's `warmMapedFileEnable`. It
/// doubles the bytes the disk writes, which halves what a disk-bound broker can take, and W2's
/// 64 producers showed no end-to-end gain on the 2-core host it was measured on (one producer
/// did: docs/BENCHMARKS.md, "CommitLog zero-ahead"); 16 MiB (about half a second of W2's
/// appends) is the value measured.
pub const ZERO_AHEAD_DEFAULT_BYTES: u64 = 0;

/// Default of [`StoreConfig::recent_records_bytes`]: 16 MiB, what W5's consumers (2,048 queues
/// at full rate) run behind the appends; each append copies its records once more, and the
/// window costs this much memory.
pub const RECENT_RECORDS_DEFAULT_BYTES: u64 = 16 * 1024 * 1024;

/// Java's bounds for `diskMaxUsedSpaceRatio` (`MessageStoreConfig.getDiskMaxUsedSpaceRatio`).
pub const DISK_MAX_USED_SPACE_RATIO_PERCENT_RANGE: std::ops::RangeInclusive<u64> = 10..=95;
/// Java's bounds for `diskSpaceCleanForciblyRatio` (`CleanCommitLogService`).
pub const DISK_SPACE_CLEAN_FORCIBLY_RATIO_PERCENT_RANGE: std::ops::RangeInclusive<u64> = 30..=85;
/// Java's bounds for `diskSpaceWarningLevelRatio` (`CleanCommitLogService`).
pub const DISK_SPACE_WARNING_LEVEL_RATIO_PERCENT_RANGE: std::ops::RangeInclusive<u64> = 35..=90;

impl Default for StoreConfig {
    fn default() -> Self {
        StoreConfig {
            root_dir: PathBuf::from("store"),
            commit_log_file_size_bytes: COMMIT_LOG_FILE_SIZE_DEFAULT_BYTES,
            consume_queue_file_units: CONSUME_QUEUE_FILE_UNITS_DEFAULT,
            flush_policy: FlushPolicy::Async,
            flush_interval_ms: 500,
            flush_consume_queue_interval_ms: 1000,
            flush_consume_queue_least_pages: 2,
            flush_consume_queue_thorough_interval_ms: 60_000,
            sync_flush_timeout_ms: 5000,
            max_message_size_bytes: MESSAGE_SIZE_MAX_DEFAULT_BYTES,
            file_reserved_time_hours: 72,
            delete_check_interval_ms: 10_000,
            delete_files_batch_max: 10,
            access_message_in_memory_max_ratio_percent: 40,
            max_transfer_bytes_on_message_in_memory: 256 * 1024,
            max_transfer_count_on_message_in_memory: 32,
            max_transfer_bytes_on_message_in_disk: 64 * 1024,
            max_transfer_count_on_message_in_disk: 8,
            max_filter_message_size_bytes: 16_000,
            total_physical_memory_bytes: detect_total_physical_memory_bytes(),
            store_host: SocketAddr::new(Ipv4Addr::LOCALHOST.into(), 10911),
            broker_role_slave: false,
            offset_check_in_slave: false,
            check_crc_on_recover: true,
            corruption_policy: CorruptionPolicy::Refuse,
            disk_max_used_space_ratio_percent: 75,
            disk_space_clean_forcibly_ratio_percent: 85,
            disk_space_warning_level_ratio_percent: 90,
            clean_file_forcibly_enabled: true,
            message_index_enable: true,
            max_hash_slot_num: MAX_HASH_SLOT_NUM_DEFAULT,
            max_index_num: MAX_INDEX_NUM_DEFAULT,
            zero_ahead_bytes: ZERO_AHEAD_DEFAULT_BYTES,
            read_mapped: true,
            recent_records_bytes: RECENT_RECORDS_DEFAULT_BYTES,
        }
    }
}

impl StoreConfig {
    /// Defaults with the given root directory.
    pub fn with_root(root_dir: impl Into<PathBuf>) -> Self {
        StoreConfig {
            root_dir: root_dir.into(),
            ..StoreConfig::default()
        }
    }

    pub fn consume_queue_file_size_bytes(&self) -> u64 {
        self.consume_queue_file_units * CQ_UNIT_SIZE_BYTES as u64
    }

    /// Bytes of CommitLog behind the head that count as "in memory"
    /// (`accessMessageInMemoryMaxRatio`).
    pub fn memory_window_bytes(&self) -> i64 {
        let window = u128::from(self.total_physical_memory_bytes)
            * u128::from(self.access_message_in_memory_max_ratio_percent)
            / 100;
        i64::try_from(window).unwrap_or(i64::MAX)
    }

    /// Checks every field; names the first bad key.
    pub fn validate(&self) -> Result<(), StoreError> {
        let bad = |key: &'static str, reason: String| Err(StoreError::Config { key, reason });
        if let Err(reason) = check_commit_log_file_size(self.commit_log_file_size_bytes) {
            return bad("commit_log_file_size_bytes", reason);
        }
        let cq_size = self.consume_queue_file_size_bytes();
        if self.consume_queue_file_units == 0 || cq_size > i32::MAX as u64 {
            return bad(
                "consume_queue_file_units",
                format!("{} units do not fit a file", self.consume_queue_file_units),
            );
        }
        if self.max_message_size_bytes == 0
            || self.max_message_size_bytes as u64 + END_FILE_BLANK_SIZE_MIN_BYTES as u64
                >= COMMIT_LOG_FILE_SIZE_MAX_BYTES
        {
            return bad(
                "max_message_size_bytes",
                format!("{} is not a usable size", self.max_message_size_bytes),
            );
        }
        if self.flush_interval_ms == 0 || self.flush_consume_queue_interval_ms == 0 {
            return bad("flush_interval_ms", "must be > 0".to_owned());
        }
        if self.delete_check_interval_ms == 0 {
            return bad("delete_check_interval_ms", "must be > 0".to_owned());
        }
        let ratios = [
            (
                "disk_max_used_space_ratio_percent",
                self.disk_max_used_space_ratio_percent,
                DISK_MAX_USED_SPACE_RATIO_PERCENT_RANGE,
            ),
            (
                "disk_space_clean_forcibly_ratio_percent",
                self.disk_space_clean_forcibly_ratio_percent,
                DISK_SPACE_CLEAN_FORCIBLY_RATIO_PERCENT_RANGE,
            ),
            (
                "disk_space_warning_level_ratio_percent",
                self.disk_space_warning_level_ratio_percent,
                DISK_SPACE_WARNING_LEVEL_RATIO_PERCENT_RANGE,
            ),
        ];
        for (key, value, range) in ratios {
            if !range.contains(&value) {
                return bad(key, format!("{value} is outside {range:?} (Java's bounds)"));
            }
        }
        if let Err(reason) = check_index_dimensions(self.max_hash_slot_num, self.max_index_num) {
            return bad("max_index_num", reason);
        }
        if self.access_message_in_memory_max_ratio_percent > 100 {
            return bad(
                "access_message_in_memory_max_ratio_percent",
                format!("{} > 100", self.access_message_in_memory_max_ratio_percent),
            );
        }
        Ok(())
    }
}

/// Total RAM from `/proc/meminfo` (`MemTotal`), or 24 GiB like Java's fallback.
pub fn detect_total_physical_memory_bytes() -> u64 {
    std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|text| parse_mem_total_bytes(&text))
        .unwrap_or(FALLBACK_TOTAL_PHYSICAL_MEMORY_BYTES)
}

fn parse_mem_total_bytes(meminfo: &str) -> Option<u64> {
    let line = meminfo.lines().find(|l| l.starts_with("MemTotal:"))?;
    let mut parts = line.split_whitespace().skip(1);
    let value: u64 = parts.next()?.parse().ok()?;
    match parts.next() {
        Some("kB") => value.checked_mul(1024),
        None => Some(value),
        Some(_) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_rocketmq_and_valid() {
        let cfg = StoreConfig::with_root("/tmp/x");
        cfg.validate().unwrap();
        assert_eq!(cfg.consume_queue_file_size_bytes(), 6_000_000);
        assert_eq!(cfg.flush_policy, FlushPolicy::Async);
        assert!(cfg.total_physical_memory_bytes > 0);
    }

    #[test]
    fn meminfo_parsing() {
        assert_eq!(
            parse_mem_total_bytes("MemTotal:       16318412 kB\nMemFree: 1 kB\n"),
            Some(16_318_412 * 1024)
        );
        assert_eq!(parse_mem_total_bytes("nothing"), None);
        assert_eq!(parse_mem_total_bytes("MemTotal: x kB"), None);
    }

    #[test]
    fn validation_names_the_key() {
        let mut cfg = StoreConfig::with_root("/tmp/x");
        cfg.commit_log_file_size_bytes = 10;
        match cfg.validate() {
            Err(StoreError::Config { key, .. }) => assert_eq!(key, "commit_log_file_size_bytes"),
            other => panic!("unexpected {other:?}"),
        }
    }
}
