//! The one configuration struct of ringmq.
//!
//! Every field is settable by an environment variable `RINGMQ_<SECTION>_<FIELD>` whose name ends
//! with the unit. Defaults equal Apache RocketMQ's where it has one. The table [`fields`] is the
//! single source of truth: it parses the env vars, prints the effective config, and is checked
//! against docs/CONFIG.md by a unit test so the docs cannot drift from the code.

use std::collections::BTreeMap;
use std::fmt;
use std::path::PathBuf;

/// How the CommitLog is made durable.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FlushPolicy {
    /// fsync every `flush_interval_ms` (RocketMQ ASYNC_FLUSH, the default).
    Async,
    /// Group commit: a send is acknowledged only after the fsync that covers it (SYNC_FLUSH).
    Sync,
}

/// The broker's role (RocketMQ `brokerRole`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BrokerRole {
    AsyncMaster,
    SyncMaster,
    Slave,
}

/// How file reads are done by the store.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StoreIoMode {
    /// io_uring with registered buffers (the default).
    Uring,
    /// plain pread(2).
    Pread,
}

#[derive(Debug, Clone, PartialEq)]
pub struct BrokerSection {
    /// Address the broker binds (RocketMQ binds all addresses; ringmq binds loopback by default).
    pub bind_ip: String,
    /// Address advertised to the name server and written as STOREHOST (brokerIP1).
    pub advertised_ip: String,
    pub listen_port: u16,
    /// Also listen on `listen_port - 2`, the "fast"/VIP port older clients use.
    pub fast_port_enabled: bool,
    pub name: String,
    pub cluster_name: String,
    pub id: u64,
    pub role: BrokerRole,
    /// PermName bits: 2 write, 4 read (brokerPermission, default 6).
    pub permission: u32,
    pub auto_create_topic_enabled: bool,
    pub default_topic_queue_nums: u32,
    pub auto_create_subscription_group_enabled: bool,
    pub slave_read_enabled: bool,
    pub property_filter_enabled: bool,
    pub register_name_server_period_ms: u64,
    pub channel_expired_timeout_ms: u64,
    pub flush_consumer_offset_interval_ms: u64,
    pub message_delay_level: String,
    pub region_id: String,
    pub trace_on: bool,
    pub offset_check_in_slave: bool,
}

#[derive(Debug, Clone, PartialEq)]
pub struct NamesrvSection {
    /// `ip:port[;ip:port]` of external name servers. Empty: start an embedded one.
    pub addr: String,
    pub bind_ip: String,
    pub listen_port: u16,
    pub scan_not_active_broker_interval_ms: u64,
    pub broker_channel_expired_timeout_ms: u64,
}

#[derive(Debug, Clone, PartialEq)]
pub struct StoreSection {
    pub root_dir: PathBuf,
    pub commit_log_file_size_bytes: u64,
    pub consume_queue_file_units: u64,
    pub flush_policy: FlushPolicy,
    pub flush_interval_ms: u64,
    pub sync_flush_timeout_ms: u64,
    pub max_message_size_bytes: u64,
    pub file_reserved_time_hours: u64,
    pub delete_check_interval_ms: u64,
    pub access_message_in_memory_max_ratio_percent: u64,
    pub max_transfer_bytes_on_message_in_memory: u64,
    pub max_transfer_count_on_message_in_memory: u64,
    pub max_transfer_bytes_on_message_in_disk: u64,
    pub max_transfer_count_on_message_in_disk: u64,
    /// 0 = detect from /proc/meminfo.
    pub total_physical_memory_bytes: u64,
    pub io_mode: StoreIoMode,
    pub io_pread_fallback_allowed: bool,
    pub io_ring_entries: u64,
    pub io_fixed_buffer_count: u64,
    pub io_fixed_buffer_size_bytes: u64,
    pub io_thread_rings_max: u64,
}

/// Most pull-wake threads (`RINGMQ_LONGPOLL_WAKE_THREADS`).
pub const WAKE_THREADS_MAX: u64 = 64;

#[derive(Debug, Clone, PartialEq)]
pub struct LongpollSection {
    pub enabled: bool,
    pub suspend_timeout_max_ms: u64,
    pub check_interval_ms: u64,
    pub short_polling_time_ms: u64,
    pub parked_pulls_max: u64,
    /// Threads re-executing woken pulls; 0 = one per core. Default 1 (measured).
    pub wake_threads: u64,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ServerSection {
    /// 0 = one per core.
    pub worker_threads: u64,
    pub frame_size_max_bytes: u64,
    pub requests_in_flight_max: u64,
    pub write_queue_max: u64,
}

/// How PULL_MESSAGE / LITE_PULL_MESSAGE response bodies reach the socket.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TransferMode {
    /// Records are read into memory (registered-buffer io_uring reads) and written with the
    /// response (RocketMQ `transferMsgByHeap=true`).
    Copy,
    /// The response header is written, then each record range goes from the CommitLog file to
    /// the socket by splice (RocketMQ `transferMsgByHeap=false`, Netty `FileRegion`).
    ZeroCopy,
    /// Zero-copy only for pulls whose measured break-even says it wins (see the thresholds),
    /// copy otherwise.
    Auto,
}

/// Pull response transfer (docs/ARCHITECTURE.md, "Pull response transfer").
#[derive(Debug, Clone, PartialEq)]
pub struct TransferSection {
    pub mode: TransferMode,
    /// RocketMQ's `transferMsgByHeap` alias: `true` = copy, `false` = zero-copy. Unset: `mode`
    /// decides. Set together with an explicit `copy`/`zerocopy` mode it must agree with it.
    pub msg_by_heap: Option<bool>,
    /// Auto: a pull goes zero-copy only if its average contiguous CommitLog range is at least
    /// this long (one file -> pipe splice per range: short ranges make zero-copy lose) ...
    pub auto_zerocopy_min_range_bytes: u64,
    /// ... and its average record is at least this long (one head read per record).
    pub auto_zerocopy_min_message_bytes: u64,
}

impl TransferSection {
    /// The mode in effect: the `transferMsgByHeap` alias wins over the default `auto`.
    pub fn effective_mode(&self) -> TransferMode {
        match self.msg_by_heap {
            Some(true) => TransferMode::Copy,
            Some(false) => TransferMode::ZeroCopy,
            None => self.mode,
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct LogSection {
    /// A `tracing` filter, e.g. `info` or `ringmq=debug`.
    pub level: String,
}

/// The whole configuration.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    pub broker: BrokerSection,
    pub namesrv: NamesrvSection,
    pub store: StoreSection,
    pub longpoll: LongpollSection,
    pub server: ServerSection,
    pub transfer: TransferSection,
    pub log: LogSection,
}

/// RocketMQ's default store root is `${user.home}/store`.
fn default_store_root() -> PathBuf {
    let home = std::env::var_os("HOME").map_or_else(|| PathBuf::from("."), PathBuf::from);
    home.join("store")
}

impl Default for Config {
    fn default() -> Self {
        Config {
            broker: BrokerSection {
                bind_ip: "127.0.0.1".into(),
                advertised_ip: "127.0.0.1".into(),
                listen_port: 10911,
                fast_port_enabled: true,
                name: "broker-a".into(),
                cluster_name: "DefaultCluster".into(),
                id: 0,
                role: BrokerRole::AsyncMaster,
                permission: 6,
                auto_create_topic_enabled: true,
                default_topic_queue_nums: 8,
                auto_create_subscription_group_enabled: true,
                slave_read_enabled: false,
                // RocketMQ defaults to false; the ringmq design turns SQL92 filtering on.
                property_filter_enabled: true,
                register_name_server_period_ms: 30_000,
                channel_expired_timeout_ms: 120_000,
                flush_consumer_offset_interval_ms: 5_000,
                message_delay_level: "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h"
                    .into(),
                region_id: "DefaultRegion".into(),
                trace_on: true,
                offset_check_in_slave: false,
            },
            namesrv: NamesrvSection {
                addr: String::new(),
                bind_ip: "127.0.0.1".into(),
                listen_port: 9876,
                scan_not_active_broker_interval_ms: 5_000,
                broker_channel_expired_timeout_ms: 120_000,
            },
            store: StoreSection {
                root_dir: default_store_root(),
                commit_log_file_size_bytes: 1024 * 1024 * 1024,
                consume_queue_file_units: 300_000,
                flush_policy: FlushPolicy::Async,
                flush_interval_ms: 500,
                sync_flush_timeout_ms: 5_000,
                max_message_size_bytes: 4 * 1024 * 1024,
                file_reserved_time_hours: 72,
                delete_check_interval_ms: 10_000,
                access_message_in_memory_max_ratio_percent: 40,
                max_transfer_bytes_on_message_in_memory: 256 * 1024,
                max_transfer_count_on_message_in_memory: 32,
                max_transfer_bytes_on_message_in_disk: 64 * 1024,
                max_transfer_count_on_message_in_disk: 8,
                total_physical_memory_bytes: 0,
                io_mode: StoreIoMode::Uring,
                io_pread_fallback_allowed: false,
                io_ring_entries: 32,
                io_fixed_buffer_count: 32,
                io_fixed_buffer_size_bytes: 32 * 1024,
                io_thread_rings_max: 16,
            },
            longpoll: LongpollSection {
                enabled: true,
                suspend_timeout_max_ms: 30_000,
                check_interval_ms: 5_000,
                short_polling_time_ms: 1_000,
                parked_pulls_max: 200_000,
                // Measured (docs/BENCHMARKS.md): on 2 cores a second wake thread made the
                // common one-waiter wake-up slower and did not speed up wide fan-outs.
                wake_threads: 1,
            },
            server: ServerSection {
                worker_threads: 0,
                frame_size_max_bytes: 16 * 1024 * 1024,
                requests_in_flight_max: 256,
                write_queue_max: 1024,
            },
            transfer: TransferSection {
                mode: TransferMode::Auto,
                msg_by_heap: None,
                // Break-evens measured with `ringmq-bench catchup` (docs/BENCHMARKS.md, "Pull
                // response transfer"): interleaved records, copy won at 16 KiB and zero-copy at
                // 32 KiB; contiguous records, copy tied or won at 4 KiB, zero-copy won at 8 KiB.
                auto_zerocopy_min_range_bytes: 24 * 1024,
                auto_zerocopy_min_message_bytes: 6 * 1024,
            },
            log: LogSection {
                level: "info".into(),
            },
        }
    }
}

/// One configuration problem: the variable, the value and why it is rejected.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    pub var: String,
    pub value: String,
    pub reason: String,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}={:?} is invalid: {}",
            self.var, self.value, self.reason
        )
    }
}

/// All problems found, so an operator fixes them in one go.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct ConfigErrors(pub Vec<ConfigError>);

impl fmt::Display for ConfigErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, e) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str("; ")?;
            }
            write!(f, "{e}")?;
        }
        Ok(())
    }
}

/// A value type a config field can hold.
trait ConfigValue: Sized {
    fn parse_value(text: &str) -> Result<Self, String>;
    fn show(&self) -> String;
}

macro_rules! int_value {
    ($($t:ty),*) => {$(
        impl ConfigValue for $t {
            fn parse_value(text: &str) -> Result<Self, String> {
                text.trim().parse::<$t>().map_err(|e| format!("not a whole number of this range ({e})"))
            }
            fn show(&self) -> String {
                self.to_string()
            }
        }
    )*};
}
int_value!(u16, u32, u64);

impl ConfigValue for bool {
    fn parse_value(text: &str) -> Result<Self, String> {
        match text.trim().to_ascii_lowercase().as_str() {
            "true" | "1" | "yes" | "on" => Ok(true),
            "false" | "0" | "no" | "off" => Ok(false),
            _ => Err("expected true or false".into()),
        }
    }
    fn show(&self) -> String {
        self.to_string()
    }
}

impl ConfigValue for String {
    fn parse_value(text: &str) -> Result<Self, String> {
        Ok(text.to_string())
    }
    fn show(&self) -> String {
        self.clone()
    }
}

impl ConfigValue for PathBuf {
    fn parse_value(text: &str) -> Result<Self, String> {
        if text.is_empty() {
            return Err("a path may not be empty".into());
        }
        Ok(PathBuf::from(text))
    }
    fn show(&self) -> String {
        self.display().to_string()
    }
}

impl ConfigValue for FlushPolicy {
    fn parse_value(text: &str) -> Result<Self, String> {
        // RocketMQ's flushDiskType names are accepted too.
        match text.trim().to_ascii_lowercase().as_str() {
            "async" | "async_flush" => Ok(FlushPolicy::Async),
            "sync" | "sync_flush" => Ok(FlushPolicy::Sync),
            _ => Err("expected async or sync (or ASYNC_FLUSH / SYNC_FLUSH)".into()),
        }
    }
    fn show(&self) -> String {
        match self {
            FlushPolicy::Async => "async".into(),
            FlushPolicy::Sync => "sync".into(),
        }
    }
}

impl ConfigValue for BrokerRole {
    fn parse_value(text: &str) -> Result<Self, String> {
        match text.trim().to_ascii_uppercase().as_str() {
            "ASYNC_MASTER" => Ok(BrokerRole::AsyncMaster),
            "SYNC_MASTER" => Ok(BrokerRole::SyncMaster),
            "SLAVE" => Ok(BrokerRole::Slave),
            _ => Err("expected ASYNC_MASTER, SYNC_MASTER or SLAVE".into()),
        }
    }
    fn show(&self) -> String {
        match self {
            BrokerRole::AsyncMaster => "ASYNC_MASTER".into(),
            BrokerRole::SyncMaster => "SYNC_MASTER".into(),
            BrokerRole::Slave => "SLAVE".into(),
        }
    }
}

impl ConfigValue for StoreIoMode {
    fn parse_value(text: &str) -> Result<Self, String> {
        match text.trim().to_ascii_lowercase().as_str() {
            "uring" | "io_uring" => Ok(StoreIoMode::Uring),
            "pread" => Ok(StoreIoMode::Pread),
            _ => Err("expected uring or pread".into()),
        }
    }
    fn show(&self) -> String {
        match self {
            StoreIoMode::Uring => "uring".into(),
            StoreIoMode::Pread => "pread".into(),
        }
    }
}

impl ConfigValue for TransferMode {
    fn parse_value(text: &str) -> Result<Self, String> {
        match text.trim().to_ascii_lowercase().as_str() {
            "copy" => Ok(TransferMode::Copy),
            "zerocopy" | "zero-copy" | "zero_copy" => Ok(TransferMode::ZeroCopy),
            "auto" => Ok(TransferMode::Auto),
            _ => Err("expected copy, zerocopy or auto".into()),
        }
    }
    fn show(&self) -> String {
        match self {
            TransferMode::Copy => "copy".into(),
            TransferMode::ZeroCopy => "zerocopy".into(),
            TransferMode::Auto => "auto".into(),
        }
    }
}

/// An optional bool: unset shows as the empty string.
impl ConfigValue for Option<bool> {
    fn parse_value(text: &str) -> Result<Self, String> {
        if text.trim().is_empty() {
            return Ok(None);
        }
        bool::parse_value(text).map(Some)
    }
    fn show(&self) -> String {
        self.map_or_else(String::new, |b| b.to_string())
    }
}

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
            "Let pulls be redirected to a slave when the consumer falls behind."
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
            "Apply pull offset corrections on a slave too."
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
            "RINGMQ_LONGPOLL_WAKE_THREADS",
            "",
            longpoll.wake_threads,
            "Threads re-executing woken pulls and sharing wide fan-outs; 0 = one per core."
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
            "RINGMQ_LOG_LEVEL",
            "",
            log.level,
            "tracing filter, e.g. info or ringmq=debug."
        ),
    ];
    FIELDS
}

impl Config {
    /// Reads the process environment on top of the defaults and validates the result.
    pub fn from_env() -> Result<Config, ConfigErrors> {
        Self::from_vars(std::env::vars())
    }

    /// Applies `RINGMQ_*` variables from `vars` over the defaults. Unknown `RINGMQ_` variables
    /// are errors (a typo must not silently run with a default).
    pub fn from_vars(
        vars: impl IntoIterator<Item = (String, String)>,
    ) -> Result<Config, ConfigErrors> {
        let mut config = Config::default();
        let mut errors = Vec::new();
        let by_env: BTreeMap<&str, &FieldSpec> = fields().iter().map(|f| (f.env, f)).collect();
        for (name, value) in vars {
            if !name.starts_with("RINGMQ_") {
                continue;
            }
            match by_env.get(name.as_str()) {
                Some(spec) => {
                    if let Err(reason) = (spec.set)(&mut config, &value) {
                        errors.push(ConfigError {
                            var: name,
                            value,
                            reason,
                        });
                    }
                }
                None if RESERVED_VARS.contains(&name.as_str())
                    || RESERVED_PREFIXES.iter().any(|p| name.starts_with(p)) => {}
                None => errors.push(ConfigError {
                    var: name,
                    value,
                    reason: "unknown ringmq setting (see docs/CONFIG.md)".into(),
                }),
            }
        }
        errors.extend(config.validate());
        if errors.is_empty() {
            Ok(config)
        } else {
            Err(ConfigErrors(errors))
        }
    }

    /// Checks relations between fields. Each problem names the variable, value and reason.
    pub fn validate(&self) -> Vec<ConfigError> {
        let mut errors = Vec::new();
        let mut check = |ok: bool, var: &str, value: String, reason: &str| {
            if !ok {
                errors.push(ConfigError {
                    var: var.into(),
                    value,
                    reason: reason.into(),
                });
            }
        };
        let s = &self.store;
        let size_check =
            crate::store::config::check_commit_log_file_size(s.commit_log_file_size_bytes);
        check(
            size_check.is_ok(),
            "RINGMQ_STORE_COMMIT_LOG_FILE_SIZE_BYTES",
            s.commit_log_file_size_bytes.to_string(),
            size_check.as_ref().err().map_or("", String::as_str),
        );
        check(
            s.commit_log_file_size_bytes > s.max_message_size_bytes + 64 * 1024,
            "RINGMQ_STORE_COMMIT_LOG_FILE_SIZE_BYTES",
            s.commit_log_file_size_bytes.to_string(),
            "must exceed RINGMQ_STORE_MAX_MESSAGE_SIZE_BYTES + 64 KiB so the largest record fits",
        );
        check(
            s.consume_queue_file_units >= 1,
            "RINGMQ_STORE_CONSUME_QUEUE_FILE_UNITS",
            s.consume_queue_file_units.to_string(),
            "must be at least 1",
        );
        check(
            s.max_message_size_bytes >= 1 && s.max_message_size_bytes <= 64 * 1024 * 1024,
            "RINGMQ_STORE_MAX_MESSAGE_SIZE_BYTES",
            s.max_message_size_bytes.to_string(),
            "must be between 1 and 67108864",
        );
        check(
            (1..=100).contains(&s.access_message_in_memory_max_ratio_percent),
            "RINGMQ_STORE_ACCESS_MESSAGE_IN_MEMORY_MAX_RATIO_PERCENT",
            s.access_message_in_memory_max_ratio_percent.to_string(),
            "must be a percentage from 1 to 100",
        );
        check(
            s.flush_interval_ms >= 1,
            "RINGMQ_STORE_FLUSH_INTERVAL_MS",
            s.flush_interval_ms.to_string(),
            "must be at least 1",
        );
        check(
            s.io_ring_entries.is_power_of_two() && s.io_ring_entries <= 32768,
            "RINGMQ_STORE_IO_RING_ENTRIES",
            s.io_ring_entries.to_string(),
            "must be a power of two up to 32768",
        );
        check(
            (1..=1024).contains(&s.io_fixed_buffer_count),
            "RINGMQ_STORE_IO_FIXED_BUFFER_COUNT",
            s.io_fixed_buffer_count.to_string(),
            "must be between 1 and 1024",
        );
        check(
            s.io_fixed_buffer_size_bytes >= 4096
                && s.io_fixed_buffer_size_bytes.is_multiple_of(4096),
            "RINGMQ_STORE_IO_FIXED_BUFFER_SIZE_BYTES",
            s.io_fixed_buffer_size_bytes.to_string(),
            "must be a multiple of 4096",
        );
        let b = &self.broker;
        check(
            b.listen_port > 2 || !b.fast_port_enabled,
            "RINGMQ_BROKER_LISTEN_PORT",
            b.listen_port.to_string(),
            "must be above 2 when the fast port (listen_port - 2) is enabled",
        );
        check(
            b.permission & !0b1110 == 0,
            "RINGMQ_BROKER_PERMISSION",
            b.permission.to_string(),
            "only the read (4) and write (2) bits (and 8, priority) may be set",
        );
        check(
            (1..=1024).contains(&b.default_topic_queue_nums),
            "RINGMQ_BROKER_DEFAULT_TOPIC_QUEUE_NUMS",
            b.default_topic_queue_nums.to_string(),
            "must be between 1 and 1024",
        );
        check(
            (b.id == 0) == (b.role != BrokerRole::Slave),
            "RINGMQ_BROKER_ID",
            b.id.to_string(),
            "a master (RINGMQ_BROKER_ROLE ASYNC_MASTER/SYNC_MASTER) has id 0 and a SLAVE a non-zero id",
        );
        check(
            b.bind_ip.parse::<std::net::IpAddr>().is_ok(),
            "RINGMQ_BROKER_BIND_IP",
            b.bind_ip.clone(),
            "not an IP address",
        );
        check(
            b.advertised_ip.parse::<std::net::IpAddr>().is_ok(),
            "RINGMQ_BROKER_ADVERTISED_IP",
            b.advertised_ip.clone(),
            "not an IP address",
        );
        check(
            b.flush_consumer_offset_interval_ms >= 10,
            "RINGMQ_BROKER_FLUSH_CONSUMER_OFFSET_INTERVAL_MS",
            b.flush_consumer_offset_interval_ms.to_string(),
            "must be at least 10",
        );
        check(
            self.namesrv.bind_ip.parse::<std::net::IpAddr>().is_ok(),
            "RINGMQ_NAMESRV_BIND_IP",
            self.namesrv.bind_ip.clone(),
            "not an IP address",
        );
        let l = &self.longpoll;
        check(
            l.check_interval_ms >= 1,
            "RINGMQ_LONGPOLL_CHECK_INTERVAL_MS",
            l.check_interval_ms.to_string(),
            "must be at least 1",
        );
        check(
            l.parked_pulls_max >= 1,
            "RINGMQ_LONGPOLL_PARKED_PULLS_MAX",
            l.parked_pulls_max.to_string(),
            "must be at least 1",
        );
        check(
            l.wake_threads <= WAKE_THREADS_MAX,
            "RINGMQ_LONGPOLL_WAKE_THREADS",
            l.wake_threads.to_string(),
            "must be at most 64 (0 = one per core)",
        );
        let v = &self.server;
        check(
            v.frame_size_max_bytes >= 1024 && v.frame_size_max_bytes <= 1024 * 1024 * 1024,
            "RINGMQ_SERVER_FRAME_SIZE_MAX_BYTES",
            v.frame_size_max_bytes.to_string(),
            "must be between 1024 and 1073741824",
        );
        check(
            v.requests_in_flight_max >= 1,
            "RINGMQ_SERVER_REQUESTS_IN_FLIGHT_MAX",
            v.requests_in_flight_max.to_string(),
            "must be at least 1",
        );
        check(
            v.write_queue_max >= 1,
            "RINGMQ_SERVER_WRITE_QUEUE_MAX",
            v.write_queue_max.to_string(),
            "must be at least 1",
        );
        let t = &self.transfer;
        let alias_conflict = match (t.msg_by_heap, t.mode) {
            (Some(by_heap), TransferMode::Copy) => !by_heap,
            (Some(by_heap), TransferMode::ZeroCopy) => by_heap,
            _ => false,
        };
        check(
            !alias_conflict,
            "RINGMQ_TRANSFER_MSG_BY_HEAP",
            t.msg_by_heap.show(),
            "contradicts RINGMQ_TRANSFER_MODE (true means copy, false means zerocopy)",
        );
        errors
    }

    /// The effective configuration, one `VAR=value` per line, for the startup log.
    pub fn describe(&self) -> String {
        fields()
            .iter()
            .map(|f| format!("{}={}\n", f.env, f.value(self)))
            .collect()
    }

    /// Parsed delay levels in milliseconds (RocketMQ messageDelayLevel: `1s 5s 1m 2h`).
    pub fn delay_levels_ms(&self) -> Result<Vec<u64>, ConfigError> {
        parse_delay_levels(&self.broker.message_delay_level).map_err(|reason| ConfigError {
            var: "RINGMQ_BROKER_MESSAGE_DELAY_LEVEL".into(),
            value: self.broker.message_delay_level.clone(),
            reason,
        })
    }
}

/// `RINGMQ_` variables that are not config fields but read elsewhere (bench, tests).
const RESERVED_VARS: &[&str] = &["RINGMQ_BIN"];
const RESERVED_PREFIXES: &[&str] = &["RINGMQ_IT_", "RINGMQ_BENCH_", "RINGMQ_TEST_"];

fn parse_delay_levels(text: &str) -> Result<Vec<u64>, String> {
    let mut levels = Vec::new();
    for token in text.split_whitespace() {
        let split = token.len().saturating_sub(1);
        let (number, unit) = token.split_at(split);
        let factor_ms = match unit {
            "s" => 1_000,
            "m" => 60_000,
            "h" => 3_600_000,
            "d" => 86_400_000,
            _ => return Err(format!("level `{token}` must end with s, m, h or d")),
        };
        let n: u64 = number
            .parse()
            .map_err(|_| format!("level `{token}` is not a number"))?;
        levels.push(n * factor_ms);
    }
    if levels.is_empty() {
        return Err("at least one level is needed".into());
    }
    Ok(levels)
}

/// The env var table of docs/CONFIG.md, generated from [`fields`] (`ringmq config --markdown`).
pub fn markdown_table() -> String {
    let defaults = Config::default();
    let mut out = String::from(
        "| variable | default | RocketMQ name | meaning |\n| --- | --- | --- | --- |\n",
    );
    for f in fields() {
        let default = if f.env == "RINGMQ_STORE_ROOT_DIR" {
            "`$HOME/store`".to_string()
        } else {
            format!("`{}`", f.value(&defaults))
        };
        let java = if f.rocketmq_name.is_empty() {
            "-"
        } else {
            f.rocketmq_name
        };
        out.push_str(&format!(
            "| `{}` | {} | {} | {} |\n",
            f.env, default, java, f.doc
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect()
    }

    #[test]
    fn shipped_defaults_validate() {
        assert_eq!(Config::default().validate(), vec![]);
    }

    #[test]
    fn env_vars_override_defaults() {
        let c = Config::from_vars(vars(&[
            ("RINGMQ_BROKER_LISTEN_PORT", "20911"),
            ("RINGMQ_STORE_FLUSH_POLICY", "SYNC_FLUSH"),
            ("RINGMQ_STORE_ROOT_DIR", "/tmp/x"),
            ("RINGMQ_LONGPOLL_ENABLED", "false"),
            ("PATH", "/bin"),
        ]))
        .unwrap();
        assert_eq!(c.broker.listen_port, 20911);
        assert_eq!(c.store.flush_policy, FlushPolicy::Sync);
        assert_eq!(c.store.root_dir, PathBuf::from("/tmp/x"));
        assert!(!c.longpoll.enabled);
    }

    #[test]
    fn errors_name_variable_value_and_reason() {
        let err = Config::from_vars(vars(&[
            ("RINGMQ_BROKER_LISTEN_PORT", "70000"),
            ("RINGMQ_STORE_FLUSH_POLICY", "sometimes"),
            ("RINGMQ_STORE_COMIT_LOG_FILE_SIZE_BYTES", "1"),
        ]))
        .unwrap_err();
        let text = err.to_string();
        assert_eq!(err.0.len(), 3, "{text}");
        assert!(
            text.contains("RINGMQ_BROKER_LISTEN_PORT=\"70000\" is invalid"),
            "{text}"
        );
        assert!(
            text.contains("RINGMQ_STORE_FLUSH_POLICY=\"sometimes\""),
            "{text}"
        );
        assert!(text.contains("unknown ringmq setting"), "{text}");
    }

    #[test]
    fn relations_between_fields_are_checked() {
        let err = Config::from_vars(vars(&[(
            "RINGMQ_STORE_COMMIT_LOG_FILE_SIZE_BYTES",
            "1048576",
        )]))
        .unwrap_err();
        assert!(
            err.to_string()
                .contains("RINGMQ_STORE_MAX_MESSAGE_SIZE_BYTES"),
            "{err}"
        );
        let err = Config::from_vars(vars(&[("RINGMQ_BROKER_ROLE", "SLAVE")])).unwrap_err();
        assert!(err.to_string().contains("RINGMQ_BROKER_ID"), "{err}");
    }

    #[test]
    fn every_env_var_is_unique_and_well_named() {
        let mut seen = std::collections::HashSet::new();
        for f in fields() {
            assert!(seen.insert(f.env), "duplicate {}", f.env);
            assert!(f.env.starts_with("RINGMQ_"), "{}", f.env);
            assert_eq!(f.env, f.env.to_ascii_uppercase());
        }
    }

    #[test]
    fn docs_config_md_lists_every_variable_with_its_default() {
        let doc = include_str!("../docs/CONFIG.md");
        let defaults = Config::default();
        for f in fields() {
            let row_start = format!("| `{}` |", f.env);
            let row = doc
                .lines()
                .find(|l| l.starts_with(&row_start))
                .unwrap_or_else(|| panic!("docs/CONFIG.md lacks a row for {}", f.env));
            if f.env != "RINGMQ_STORE_ROOT_DIR" {
                let want = format!("`{}`", f.value(&defaults));
                assert!(
                    row.contains(&want),
                    "{} row should show default {want}",
                    f.env
                );
            }
        }
    }

    #[test]
    fn transfer_mode_and_its_rocketmq_alias() {
        let mode = |pairs: &[(&str, &str)]| {
            Config::from_vars(vars(pairs))
                .map(|c| c.transfer.effective_mode())
                .map_err(|e| e.to_string())
        };
        assert_eq!(mode(&[]), Ok(TransferMode::Auto));
        assert_eq!(
            mode(&[("RINGMQ_TRANSFER_MODE", "zerocopy")]),
            Ok(TransferMode::ZeroCopy)
        );
        assert_eq!(
            mode(&[("RINGMQ_TRANSFER_MSG_BY_HEAP", "true")]),
            Ok(TransferMode::Copy)
        );
        assert_eq!(
            mode(&[("RINGMQ_TRANSFER_MSG_BY_HEAP", "false")]),
            Ok(TransferMode::ZeroCopy)
        );
        assert_eq!(
            mode(&[
                ("RINGMQ_TRANSFER_MSG_BY_HEAP", "true"),
                ("RINGMQ_TRANSFER_MODE", "copy")
            ]),
            Ok(TransferMode::Copy)
        );
        let err = mode(&[
            ("RINGMQ_TRANSFER_MSG_BY_HEAP", "true"),
            ("RINGMQ_TRANSFER_MODE", "zerocopy"),
        ])
        .unwrap_err();
        assert!(err.contains("RINGMQ_TRANSFER_MSG_BY_HEAP"), "{err}");
        assert!(mode(&[("RINGMQ_TRANSFER_MODE", "sendfile")]).is_err());
        assert!(mode(&[("RINGMQ_TRANSFER_MSG_BY_HEAP", "maybe")]).is_err());
    }

    #[test]
    fn delay_levels_parse_like_rocketmq() {
        let c = Config::default();
        let levels = c.delay_levels_ms().unwrap();
        assert_eq!(levels.len(), 18);
        assert_eq!(levels[0], 1_000);
        assert_eq!(levels[4], 60_000);
        assert_eq!(levels[17], 7_200_000);
        assert!(parse_delay_levels("1x").is_err());
        assert!(parse_delay_levels("").is_err());
    }
}
