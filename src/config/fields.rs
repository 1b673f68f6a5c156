//! The table of settings: every field's env var, RocketMQ name, description and accessors.
//! It is the single source of truth: [`Config::from_vars`] parses through it, and
//! [`Config::describe`] and [`super::markdown_table`] print from it.

use super::sections::Config;
use super::value::ConfigValue;

/// One settable field: its env var, RocketMQ's name for it (if any), a description, and how to
/// read and write it.
pub struct FieldSpec {
    pub env: &'static str,
    pub rocketmq_name: &'static str,
    pub doc: &'static str,
    get: fn(&Config) -> String,
    set: fn(&mut Config, &str) -> Result<(), String>,
}

impl FieldSpec {
    /// The field's value in `config`, as text.
    pub fn value(&self, config: &Config) -> String {
        (self.get)(config)
    }

    /// Parses `text` into the field of `config`; the error says why `text` is rejected.
    pub(super) fn assign(&self, config: &mut Config, text: &str) -> Result<(), String> {
        (self.set)(config, text)
    }
}

macro_rules! field {
    ($env:literal, $java:literal, $($path:ident).+, $doc:literal) => {
        FieldSpec {
            env: $env,
            rocketmq_name: $java,
            doc: $doc,
            get: |c| ConfigValue::show(&c.$($path).+),
            set: |c, v| {
                c.$($path).+ = ConfigValue::parse_value(v)?;
                Ok(())
            },
        }
    };
}

/// Every configuration field, in documentation order.
pub fn fields() -> &'static [FieldSpec] {
    FIELDS
}

// A static rather than a function body: the table is pure data, one entry per setting.
static FIELDS: &[FieldSpec] = &[
    field!(
        "RINGMQ_BROKER_BIND_IP",
        "",
        broker.bind_ip,
        "IP address the broker listens on."
    ),
    field!(
        "RINGMQ_BROKER_ADVERTISED_IP",
        "brokerIP1",
        broker.advertised_ip,
        "IP registered with the name server and written as STOREHOST in records."
    ),
    field!(
        "RINGMQ_BROKER_LISTEN_PORT",
        "listenPort",
        broker.listen_port,
        "Main remoting port."
    ),
    field!(
        "RINGMQ_BROKER_FAST_PORT_ENABLED",
        "",
        broker.fast_port_enabled,
        "Also listen on listen_port - 2 (the fast/VIP port older clients use)."
    ),
    field!(
        "RINGMQ_BROKER_NAME",
        "brokerName",
        broker.name,
        "Broker name."
    ),
    field!(
        "RINGMQ_BROKER_CLUSTER_NAME",
        "brokerClusterName",
        broker.cluster_name,
        "Cluster name."
    ),
    field!(
        "RINGMQ_BROKER_ID",
        "brokerId",
        broker.id,
        "0 = master, >0 = slave."
    ),
    field!(
        "RINGMQ_BROKER_ROLE",
        "brokerRole",
        broker.role,
        "ASYNC_MASTER, SYNC_MASTER or SLAVE."
    ),
    field!(
        "RINGMQ_BROKER_PERMISSION",
        "brokerPermission",
        broker.permission,
        "PermName bits: 2 write, 4 read."
    ),
    field!(
        "RINGMQ_BROKER_AUTO_CREATE_TOPIC_ENABLED",
        "autoCreateTopicEnable",
        broker.auto_create_topic_enabled,
        "Create topics on first send from the TBW102 template."
    ),
    field!(
        "RINGMQ_BROKER_DEFAULT_TOPIC_QUEUE_NUMS",
        "defaultTopicQueueNums",
        broker.default_topic_queue_nums,
        "Queues of the TBW102 template topic."
    ),
    field!(
        "RINGMQ_BROKER_AUTO_CREATE_SUBSCRIPTION_GROUP_ENABLED",
        "autoCreateSubscriptionGroup",
        broker.auto_create_subscription_group_enabled,
        "Create subscription groups on first heartbeat or pull."
    ),
    field!(
        "RINGMQ_BROKER_SLAVE_READ_ENABLED",
        "slaveReadEnable",
        broker.slave_read_enabled,
        "Master: send consumers that fell behind to the group's whichBrokerWhenConsumeSlowly. Slave: serve pulls (off: send every pull to the master)."
    ),
    field!(
        "RINGMQ_BROKER_PROPERTY_FILTER_ENABLED",
        "enablePropertyFilter",
        broker.property_filter_enabled,
        "Allow SQL92 subscriptions."
    ),
    field!(
        "RINGMQ_BROKER_REGISTER_NAME_SERVER_PERIOD_MS",
        "registerNameServerPeriod",
        broker.register_name_server_period_ms,
        "Re-registration period with the name server."
    ),
    field!(
        "RINGMQ_BROKER_CHANNEL_EXPIRED_TIMEOUT_MS",
        "channelExpiredTimeout",
        broker.channel_expired_timeout_ms,
        "Client channels silent this long are dropped."
    ),
    field!(
        "RINGMQ_BROKER_REBALANCE_LOCK_MAX_LIVE_TIME_MS",
        "rebalanceLockMaxLiveTime",
        broker.rebalance_lock_max_live_time_ms,
        "An orderly consumer's queue lock (LOCK_BATCH_MQ) not renewed this long may be taken by another member of its group."
    ),
    field!(
        "RINGMQ_BROKER_FLUSH_CONSUMER_OFFSET_INTERVAL_MS",
        "flushConsumerOffsetInterval",
        broker.flush_consumer_offset_interval_ms,
        "Period of consumerOffset.json flushes."
    ),
    field!(
        "RINGMQ_BROKER_MESSAGE_DELAY_LEVEL",
        "messageDelayLevel",
        broker.message_delay_level,
        "Delay levels used by retries (space separated)."
    ),
    field!(
        "RINGMQ_BROKER_REGION_ID",
        "regionId",
        broker.region_id,
        "MSG_REGION returned in send responses."
    ),
    field!(
        "RINGMQ_BROKER_TRACE_ON",
        "traceOn",
        broker.trace_on,
        "TRACE_ON returned in send responses."
    ),
    field!(
        "RINGMQ_BROKER_OFFSET_CHECK_IN_SLAVE",
        "offsetCheckInSlave",
        broker.offset_check_in_slave,
        "A slave answers OFFSET_MOVED itself (off: it sends the consumer to the group's broker, at its offset)."
    ),
    field!(
        "RINGMQ_BROKER_SLAVE_SYNC_INTERVAL_MS",
        "",
        broker.slave_sync_interval_ms,
        "A slave fetches topics, consumer and delay offsets and groups from its master this often."
    ),
    field!(
        "RINGMQ_BROKER_REJECT_TRANSACTION_MESSAGE",
        "rejectTransactionMessage",
        broker.reject_transaction_message,
        "Refuse half (prepared) transactional messages with NO_PERMISSION."
    ),
    field!(
        "RINGMQ_BROKER_TRANSACTION_TIMEOUT_MS",
        "transactionTimeOut",
        broker.transaction_timeout_ms,
        "A half message younger than this (or than its CHECK_IMMUNITY_TIME_IN_SECONDS) is not checked back yet."
    ),
    field!(
        "RINGMQ_BROKER_TRANSACTION_CHECK_MAX",
        "transactionCheckMax",
        broker.transaction_check_max,
        "A half message checked back this many times without an answer goes to TRANS_CHECK_MAX_TIME_TOPIC."
    ),
    field!(
        "RINGMQ_BROKER_TRANSACTION_CHECK_INTERVAL_MS",
        "transactionCheckInterval",
        broker.transaction_check_interval_ms,
        "Period of the scan that checks back unresolved half messages with their producer group."
    ),
    field!(
        "RINGMQ_NAMESRV_ADDR",
        "namesrvAddr",
        namesrv.addr,
        "External name servers (ip:port;ip:port). Empty: run an embedded name server."
    ),
    field!(
        "RINGMQ_NAMESRV_BIND_IP",
        "",
        namesrv.bind_ip,
        "IP the name server listens on."
    ),
    field!(
        "RINGMQ_NAMESRV_LISTEN_PORT",
        "listenPort",
        namesrv.listen_port,
        "Name server port."
    ),
    field!(
        "RINGMQ_NAMESRV_SCAN_NOT_ACTIVE_BROKER_INTERVAL_MS",
        "scanNotActiveBrokerInterval",
        namesrv.scan_not_active_broker_interval_ms,
        "How often silent brokers are expired."
    ),
    field!(
        "RINGMQ_NAMESRV_BROKER_CHANNEL_EXPIRED_TIMEOUT_MS",
        "",
        namesrv.broker_channel_expired_timeout_ms,
        "A broker silent this long is removed from routes."
    ),
    field!(
        "RINGMQ_NAMESRV_KV_CONFIG_PATH",
        "kvConfigPath",
        namesrv.kv_config_path,
        "File of the name server's KV config. Empty: $HOME/namesrv/kvConfig.json standalone, <store root>/namesrv/kvConfig.json embedded."
    ),
    field!(
        "RINGMQ_STORE_ROOT_DIR",
        "storePathRootDir",
        store.root_dir,
        "Data directory."
    ),
    field!(
        "RINGMQ_STORE_COMMIT_LOG_FILE_SIZE_BYTES",
        "mappedFileSizeCommitLog",
        store.commit_log_file_size_bytes,
        "Size of each CommitLog segment file."
    ),
    field!(
        "RINGMQ_STORE_CONSUME_QUEUE_FILE_UNITS",
        "mappedFileSizeConsumeQueue / 20",
        store.consume_queue_file_units,
        "20-byte units per ConsumeQueue file."
    ),
    field!(
        "RINGMQ_STORE_FLUSH_POLICY",
        "flushDiskType",
        store.flush_policy,
        "async (fsync every flush interval) or sync (group commit before the ack)."
    ),
    field!(
        "RINGMQ_STORE_FLUSH_INTERVAL_MS",
        "flushIntervalCommitLog",
        store.flush_interval_ms,
        "Async flush period."
    ),
    field!(
        "RINGMQ_STORE_FLUSH_CONSUME_QUEUE_INTERVAL_MS",
        "flushIntervalConsumeQueue",
        store.flush_consume_queue_interval_ms,
        "ConsumeQueue flush period."
    ),
    field!(
        "RINGMQ_STORE_FLUSH_CONSUME_QUEUE_LEAST_PAGES",
        "flushConsumeQueueLeastPages",
        store.flush_consume_queue_least_pages,
        "A periodic flush fsyncs a ConsumeQueue only once its end crossed this many 4 KiB pages; 0: whatever was written."
    ),
    field!(
        "RINGMQ_STORE_FLUSH_CONSUME_QUEUE_THOROUGH_INTERVAL_MS",
        "flushConsumeQueueThoroughInterval",
        store.flush_consume_queue_thorough_interval_ms,
        "This long after the last thorough flush, a flush fsyncs every written ConsumeQueue and writes the checkpoint."
    ),
    field!(
        "RINGMQ_STORE_SYNC_FLUSH_TIMEOUT_MS",
        "syncFlushTimeout",
        store.sync_flush_timeout_ms,
        "A sync-flush send waits this long, then FLUSH_DISK_TIMEOUT."
    ),
    field!(
        "RINGMQ_STORE_MAX_MESSAGE_SIZE_BYTES",
        "maxMessageSize",
        store.max_message_size_bytes,
        "Largest message body accepted."
    ),
    field!(
        "RINGMQ_STORE_FILE_RESERVED_TIME_HOURS",
        "fileReservedTime",
        store.file_reserved_time_hours,
        "CommitLog files older than this are deleted."
    ),
    field!(
        "RINGMQ_STORE_DELETE_CHECK_INTERVAL_MS",
        "deleteCommitLogFilesInterval",
        store.delete_check_interval_ms,
        "How often retention runs."
    ),
    field!(
        "RINGMQ_STORE_ACCESS_MESSAGE_IN_MEMORY_MAX_RATIO_PERCENT",
        "accessMessageInMemoryMaxRatio",
        store.access_message_in_memory_max_ratio_percent,
        "Data within this share of RAM of the head counts as in memory."
    ),
    field!(
        "RINGMQ_STORE_MAX_TRANSFER_BYTES_ON_MESSAGE_IN_MEMORY",
        "maxTransferBytesOnMessageInMemory",
        store.max_transfer_bytes_on_message_in_memory,
        "Pull batch byte limit for in-memory data."
    ),
    field!(
        "RINGMQ_STORE_MAX_TRANSFER_COUNT_ON_MESSAGE_IN_MEMORY",
        "maxTransferCountOnMessageInMemory",
        store.max_transfer_count_on_message_in_memory,
        "Pull batch count limit for in-memory data."
    ),
    field!(
        "RINGMQ_STORE_MAX_TRANSFER_BYTES_ON_MESSAGE_IN_DISK",
        "maxTransferBytesOnMessageInDisk",
        store.max_transfer_bytes_on_message_in_disk,
        "Pull batch byte limit for on-disk data."
    ),
    field!(
        "RINGMQ_STORE_MAX_TRANSFER_COUNT_ON_MESSAGE_IN_DISK",
        "maxTransferCountOnMessageInDisk",
        store.max_transfer_count_on_message_in_disk,
        "Pull batch count limit for on-disk data."
    ),
    field!(
        "RINGMQ_STORE_TOTAL_PHYSICAL_MEMORY_BYTES",
        "",
        store.total_physical_memory_bytes,
        "RAM used for the in-memory ratio; 0 = read /proc/meminfo (24 GiB if unreadable)."
    ),
    field!(
        "RINGMQ_STORE_DISK_MAX_USED_SPACE_RATIO_PERCENT",
        "diskMaxUsedSpaceRatio",
        store.disk_max_used_space_ratio_percent,
        "Java deletes expired files before deleteWhen above this disk usage; ringmq deletes them on every pass, so crossing it is only logged (10-95)."
    ),
    field!(
        "RINGMQ_STORE_DISK_SPACE_CLEAN_FORCIBLY_RATIO_PERCENT",
        "diskSpaceCleanForciblyRatio",
        store.disk_space_clean_forcibly_ratio_percent,
        "Above this disk usage each retention pass deletes the oldest CommitLog files (never the last, at most 10) even if not expired; a full disk becomes writable again at or below it (30-85)."
    ),
    field!(
        "RINGMQ_STORE_DISK_SPACE_WARNING_LEVEL_RATIO_PERCENT",
        "diskSpaceWarningLevelRatio",
        store.disk_space_warning_level_ratio_percent,
        "Above this disk usage the disk is full: sends get SERVICE_NOT_AVAILABLE (\"the broker's disk is full\"), pulls go on (35-90)."
    ),
    field!(
        "RINGMQ_STORE_CLEAN_FILE_FORCIBLY_ENABLED",
        "cleanFileForciblyEnable",
        store.clean_file_forcibly_enabled,
        "Delete unexpired files when the disk is above the clean-forcibly ratio."
    ),
    field!(
        "RINGMQ_STORE_ZERO_AHEAD_BYTES",
        "",
        store.zero_ahead_bytes,
        "With sync flush: bytes past the CommitLog write position kept written with zeros, so a group commit's fsync writes data, not the block map (16777216 cut W2's mean fsync by a third, at twice the disk writes). 0: off."
    ),
    field!(
        "RINGMQ_STORE_READ_MAPPED",
        "",
        store.read_mapped,
        "A pull at least 1 MiB of CommitLog behind its end copies the records (and one at least 4,096 units behind its queue's end the ConsumeQueue units) from the files' read-only mappings, as Java reads its MappedFiles, instead of reading each through io_uring: about a third less broker CPU per GiB in a catch-up. A page the kernel cannot supply (a disk read error) makes that read go through io_uring, which reports the error. At most 8,192 files are mapped at once. false: always io_uring."
    ),
    field!(
        "RINGMQ_STORE_RECENT_RECORDS_BYTES",
        "",
        store.recent_records_bytes,
        "Bytes of the newest appended records also kept in memory (in 256 KiB chunks), so a pull that keeps up with the appends copies its records from there instead of reading them back through io_uring (that read was 4 to 7 % of the broker's CPU samples in W3 and W5). The message index thread reads them from there too. Rounded down to whole chunks, two at least. Records older than the window, in a batch larger than 256 KiB, or answered by zero-copy (RINGMQ_TRANSFER_MODE), are read from the files as before. 0: off."
    ),
    field!(
        "RINGMQ_STORE_CORRUPTION_POLICY",
        "",
        store.corruption_policy,
        "An invalid record with CommitLog data after it: refuse (do not start; name the file and offset) or quarantine (keep the bad tail and later files aside as .corrupt-<ms>, start). A torn tail in the last file is always truncated."
    ),
    field!(
        "RINGMQ_STORE_MESSAGE_INDEX_ENABLE",
        "messageIndexEnable",
        store.message_index_enable,
        "Build the message index in index/ of the store root (QUERY_MESSAGE by key and by unique key)."
    ),
    field!(
        "RINGMQ_STORE_MAX_HASH_SLOT_NUM",
        "maxHashSlotNum",
        store.max_hash_slot_num,
        "Hash slots per index file (4 bytes each)."
    ),
    field!(
        "RINGMQ_STORE_MAX_INDEX_NUM",
        "maxIndexNum",
        store.max_index_num,
        "Entries per index file (20 bytes each); a full file rolls to a new one."
    ),
    field!(
        "RINGMQ_STORE_IO_MODE",
        "",
        store.io_mode,
        "uring (registered-buffer io_uring reads) or pread."
    ),
    field!(
        "RINGMQ_STORE_IO_PREAD_FALLBACK_ALLOWED",
        "",
        store.io_pread_fallback_allowed,
        "If io_uring cannot be set up, fall back to pread instead of refusing to start."
    ),
    field!(
        "RINGMQ_STORE_IO_RING_ENTRIES",
        "",
        store.io_ring_entries,
        "Submission queue entries per read ring."
    ),
    field!(
        "RINGMQ_STORE_IO_FIXED_BUFFER_COUNT",
        "",
        store.io_fixed_buffer_count,
        "Registered buffers per read ring."
    ),
    field!(
        "RINGMQ_STORE_IO_FIXED_BUFFER_SIZE_BYTES",
        "",
        store.io_fixed_buffer_size_bytes,
        "Size of each registered buffer."
    ),
    field!(
        "RINGMQ_LONGPOLL_ENABLED",
        "longPollingEnable",
        longpoll.enabled,
        "Hold pulls that find nothing until a message arrives; off = short polling."
    ),
    field!(
        "RINGMQ_LONGPOLL_SUSPEND_TIMEOUT_MAX_MS",
        "",
        longpoll.suspend_timeout_max_ms,
        "Cap on a pull's suspendTimeoutMillis."
    ),
    field!(
        "RINGMQ_LONGPOLL_CHECK_INTERVAL_MS",
        "",
        longpoll.check_interval_ms,
        "Period of the hold-table sweep (PullRequestHoldService)."
    ),
    field!(
        "RINGMQ_LONGPOLL_SHORT_POLLING_TIME_MS",
        "shortPollingTimeMills",
        longpoll.short_polling_time_ms,
        "Hold time when long polling is off."
    ),
    field!(
        "RINGMQ_LONGPOLL_PARKED_PULLS_MAX",
        "",
        longpoll.parked_pulls_max,
        "Most pulls parked at once; beyond it pulls are answered at once."
    ),
    field!(
        "RINGMQ_LONGPOLL_PARKED_PULLS_MAX_PER_CONNECTION",
        "",
        longpoll.parked_pulls_max_per_connection,
        "Most pulls one connection may park; beyond it its pulls are answered at once."
    ),
    field!(
        "RINGMQ_LONGPOLL_WAKE_THREADS",
        "",
        longpoll.wake_threads,
        "Threads re-executing woken pulls and sharing wide fan-outs; 0 = one per core."
    ),
    field!(
        "RINGMQ_LONGPOLL_WAKE_INLINE_PARKED_MAX",
        "",
        longpoll.wake_inline_parked_max,
        "Arrivals on a queue with at most this many parked pulls are answered by the appending thread; 0 = never (up to 4 are handed to their connections' threads, more to the wake threads)."
    ),
    field!(
        "RINGMQ_SERVER_WORKER_THREADS",
        "",
        server.worker_threads,
        "io_uring runtime threads; 0 = one per core."
    ),
    field!(
        "RINGMQ_SERVER_FRAME_SIZE_MAX_BYTES",
        "com.rocketmq.remoting.frameMaxLength",
        server.frame_size_max_bytes,
        "Largest frame accepted; larger closes the connection."
    ),
    field!(
        "RINGMQ_SERVER_REQUESTS_IN_FLIGHT_MAX",
        "",
        server.requests_in_flight_max,
        "Requests processed at once per connection."
    ),
    field!(
        "RINGMQ_SERVER_WRITE_QUEUE_MAX",
        "",
        server.write_queue_max,
        "Frames queued for writing per connection."
    ),
    field!(
        "RINGMQ_SERVER_WRITE_QUEUE_MAX_BYTES",
        "",
        server.write_queue_max_bytes,
        "Bytes queued for writing per connection (one larger frame still goes when the queue is empty)."
    ),
    field!(
        "RINGMQ_SERVER_CHANNEL_MAX_IDLE_TIME_MS",
        "",
        server.channel_max_idle_time_ms,
        "A connection with nothing read or written for this long is closed (Java serverChannelMaxIdleTimeSeconds, in seconds); 0 = never."
    ),
    field!(
        "RINGMQ_SERVER_FRAME_READ_TIMEOUT_MS",
        "",
        server.frame_read_timeout_ms,
        "A frame begun but not complete within this closes the connection; 0 = no timeout."
    ),
    field!(
        "RINGMQ_SERVER_CONNECTIONS_MAX_PER_IP",
        "",
        server.connections_max_per_ip,
        "Connections from one IP address; more are closed at once. 0 = no cap."
    ),
    field!(
        "RINGMQ_TRANSFER_MODE",
        "",
        transfer.mode,
        "Pull response bodies: copy (read, then write), zerocopy (splice from the CommitLog file) or auto (zerocopy above the thresholds below)."
    ),
    field!(
        "RINGMQ_TRANSFER_MSG_BY_HEAP",
        "transferMsgByHeap",
        transfer.msg_by_heap,
        "RocketMQ alias: true = copy, false = zerocopy; empty = use RINGMQ_TRANSFER_MODE."
    ),
    field!(
        "RINGMQ_TRANSFER_AUTO_ZEROCOPY_MIN_RANGE_BYTES",
        "",
        transfer.auto_zerocopy_min_range_bytes,
        "auto: zerocopy only if a pull's average contiguous CommitLog range is at least this long."
    ),
    field!(
        "RINGMQ_TRANSFER_AUTO_ZEROCOPY_MIN_MESSAGE_BYTES",
        "",
        transfer.auto_zerocopy_min_message_bytes,
        "auto: and only if its average record is at least this long."
    ),
    field!(
        "RINGMQ_HA_LISTEN_PORT",
        "haListenPort",
        ha.listen_port,
        "HA port a master accepts slaves on; 0 = RINGMQ_BROKER_LISTEN_PORT + 1 (any free port when that is 0)."
    ),
    field!(
        "RINGMQ_HA_MASTER_ADDRESS",
        "haMasterAddress",
        ha.master_address,
        "ip:port of the master's HA port for a slave; empty = the name server's haServerAddr."
    ),
    field!(
        "RINGMQ_HA_TRANSFER_BATCH_BYTES",
        "haTransferBatchSize",
        ha.transfer_batch_bytes,
        "Most CommitLog bytes in one HA frame."
    ),
    field!(
        "RINGMQ_HA_SEND_HEARTBEAT_INTERVAL_MS",
        "haSendHeartbeatInterval",
        ha.send_heartbeat_interval_ms,
        "Idle HA side sends a heartbeat (master: empty frame, slave: its offset) this often."
    ),
    field!(
        "RINGMQ_HA_HOUSEKEEPING_INTERVAL_MS",
        "haHousekeepingInterval",
        ha.housekeeping_interval_ms,
        "An HA connection silent this long is closed (both sides)."
    ),
    field!(
        "RINGMQ_HA_SLAVE_TIMEOUT_MS",
        "slaveTimeout",
        ha.slave_timeout_ms,
        "SYNC_MASTER: a send waits this long for a slave ack, then answers FLUSH_SLAVE_TIMEOUT."
    ),
    field!(
        "RINGMQ_HA_MAX_GAP_NOT_IN_SYNC_BYTES",
        "haMaxGapNotInSync",
        ha.max_gap_not_in_sync_bytes,
        "SYNC_MASTER: with no slave this close, a send answers SLAVE_NOT_AVAILABLE."
    ),
    field!(
        "RINGMQ_ACL_ENABLED",
        "aclEnable",
        acl.enabled,
        "Check every request against RocketMQ's ACL 1.0 rules: accounts, signatures, topic and group permissions (docs/ARCHITECTURE.md, ACL)."
    ),
    field!(
        "RINGMQ_ACL_FILE_PATH",
        "rocketmq.acl.plain.file",
        acl.file_path,
        "The plain_acl.yml of the ACL rules; empty = plain_acl.yml in RINGMQ_STORE_ROOT_DIR. Reloaded when it changes."
    ),
    field!(
        "RINGMQ_METRICS_LISTEN",
        "",
        metrics.listen,
        "ip:port serving Prometheus text on GET /metrics and the dashboard on GET /; empty turns both off."
    ),
    field!(
        "RINGMQ_LOG_LEVEL",
        "",
        log.level,
        "tracing filter, e.g. info or ringmq=debug."
    ),
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_env_var_is_unique_and_well_named() {
        let mut seen = std::collections::HashSet::new();
        for f in fields() {
            assert!(seen.insert(f.env), "duplicate {}", f.env);
            assert!(f.env.starts_with("RINGMQ_"), "{}", f.env);
            assert_eq!(f.env, f.env.to_ascii_uppercase());
        }
    }
}
