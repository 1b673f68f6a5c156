//! The configuration struct, its sections and their defaults.

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
    /// An orderly consumer's queue lock not renewed this long may be taken by another client.
    pub rebalance_lock_max_live_time_ms: u64,
    pub flush_consumer_offset_interval_ms: u64,
    pub message_delay_level: String,
    pub region_id: String,
    pub trace_on: bool,
    pub offset_check_in_slave: bool,
    /// A slave fetches topics, offsets and groups from its master this often (Java's
    /// `BrokerController` runs `SlaveSynchronize.syncAll` every 10 s).
    pub slave_sync_interval_ms: u64,
    /// Refuse half (prepared) messages with NO_PERMISSION (rejectTransactionMessage).
    pub reject_transaction_message: bool,
    /// A half message younger than this is not checked back (transactionTimeOut).
    pub transaction_timeout_ms: u64,
    /// A half message checked back this many times goes to TRANS_CHECK_MAX_TIME_TOPIC.
    pub transaction_check_max: u32,
    /// Period of the transaction check-back scan (transactionCheckInterval).
    pub transaction_check_interval_ms: u64,
}

#[derive(Debug, Clone, PartialEq)]
pub struct NamesrvSection {
    /// `ip:port[;ip:port]` of external name servers. Empty: start an embedded one.
    pub addr: String,
    pub bind_ip: String,
    pub listen_port: u16,
    pub scan_not_active_broker_interval_ms: u64,
    pub broker_channel_expired_timeout_ms: u64,
    /// Where the KV config is persisted (Java `kvConfigPath`). Empty: Java's
    /// `$HOME/namesrv/kvConfig.json` for a standalone name server, and
    /// `<root_dir>/namesrv/kvConfig.json` for the one embedded in a broker.
    pub kv_config_path: String,
}

#[derive(Debug, Clone, PartialEq)]
pub struct StoreSection {
    pub root_dir: PathBuf,
    pub commit_log_file_size_bytes: u64,
    pub consume_queue_file_units: u64,
    pub flush_policy: FlushPolicy,
    pub flush_interval_ms: u64,
    pub flush_consume_queue_interval_ms: u64,
    pub flush_consume_queue_least_pages: u64,
    pub flush_consume_queue_thorough_interval_ms: u64,
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
    pub message_index_enable: bool,
    pub max_hash_slot_num: u64,
    pub max_index_num: u64,
    pub corruption_policy: crate::store::CorruptionPolicy,
    pub disk_max_used_space_ratio_percent: u64,
    pub disk_space_clean_forcibly_ratio_percent: u64,
    pub disk_space_warning_level_ratio_percent: u64,
    pub clean_file_forcibly_enabled: bool,
    pub zero_ahead_bytes: u64,
    pub read_mapped: bool,
    pub recent_records_bytes: u64,
}

impl Default for StoreSection {
    fn default() -> Self {
        StoreSection {
            root_dir: default_store_root(),
            commit_log_file_size_bytes: 1024 * 1024 * 1024,
            consume_queue_file_units: 300_000,
            flush_policy: FlushPolicy::Async,
            flush_interval_ms: 500,
            flush_consume_queue_interval_ms: 1_000,
            flush_consume_queue_least_pages: 2,
            flush_consume_queue_thorough_interval_ms: 60_000,
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
            message_index_enable: true,
            max_hash_slot_num: 5_000_000,
            max_index_num: 5_000_000 * 4,
            corruption_policy: crate::store::CorruptionPolicy::Refuse,
            disk_max_used_space_ratio_percent: 75,
            disk_space_clean_forcibly_ratio_percent: 85,
            disk_space_warning_level_ratio_percent: 90,
            clean_file_forcibly_enabled: true,
            zero_ahead_bytes: crate::store::config::ZERO_AHEAD_DEFAULT_BYTES,
            read_mapped: true,
            recent_records_bytes: crate::store::config::RECENT_RECORDS_DEFAULT_BYTES,
        }
    }
}

/// Most pull-wake threads (`RINGMQ_LONGPOLL_WAKE_THREADS`).
pub const WAKE_THREADS_MAX: u64 = 64;

/// Most parked pulls an append may answer itself
/// (`RINGMQ_LONGPOLL_WAKE_INLINE_PARKED_MAX`), so a send's long-polling work stays small.
pub const WAKE_INLINE_PARKED_MAX_LIMIT: u64 = 64;

/// The default of `RINGMQ_LONGPOLL_PARKED_PULLS_MAX_PER_CONNECTION` (see
/// `LongpollSection::default`).
pub const PARKED_PULLS_MAX_PER_CONNECTION_DEFAULT: u64 = 65_536;

#[derive(Debug, Clone, PartialEq)]
pub struct LongpollSection {
    pub enabled: bool,
    pub suspend_timeout_max_ms: u64,
    pub check_interval_ms: u64,
    pub short_polling_time_ms: u64,
    pub parked_pulls_max: u64,
    pub parked_pulls_max_per_connection: u64,
    /// Threads re-executing woken pulls; 0 = one per core. Default 1 (measured).
    pub wake_threads: u64,
    /// A queue with at most this many parked pulls has its arrivals answered by the appending
    /// thread. Default 0 = never: the appending thread hands up to four woken pulls to their
    /// connections' threads and more go to the wake threads (measured, docs/BENCHMARKS.md "W3:
    /// the e2e tail": 4 took the wake step from 0.5 ms to 30 µs but did not shorten the e2e
    /// tail, and it slows the producers).
    pub wake_inline_parked_max: u64,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ServerSection {
    /// 0 = one per core.
    pub worker_threads: u64,
    pub frame_size_max_bytes: u64,
    pub requests_in_flight_max: u64,
    pub write_queue_max: u64,
    pub write_queue_max_bytes: u64,
    /// 0 = off.
    pub channel_max_idle_time_ms: u64,
    /// 0 = off.
    pub frame_read_timeout_ms: u64,
    /// 0 = off.
    pub connections_max_per_ip: u64,
}

impl Default for ServerSection {
    fn default() -> Self {
        ServerSection {
            worker_threads: 0,
            frame_size_max_bytes: 16 * 1024 * 1024,
            requests_in_flight_max: 256,
            write_queue_max: 1024,
            write_queue_max_bytes: 64 * 1024 * 1024,
            channel_max_idle_time_ms: 120_000,
            frame_read_timeout_ms: 30_000,
            connections_max_per_ip: 4096,
        }
    }
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

/// Master/slave replication (Java `DefaultHAService`), docs/ARCHITECTURE.md "HA replication".
#[derive(Debug, Clone, PartialEq)]
pub struct HaSection {
    /// Port of the HA stream a master accepts slaves on; 0 = the broker listen port + 1, as
    /// Java's `BrokerStartup` sets `haListenPort`.
    pub listen_port: u16,
    /// `ip:port` of the master's HA port a slave connects to. Empty: the `haServerAddr` the name
    /// server answers to the slave's registration.
    pub master_address: String,
    /// Most CommitLog bytes in one HA frame (`haTransferBatchSize`).
    pub transfer_batch_bytes: u64,
    /// A master sends an empty frame, a slave its offset, after this long without writing.
    pub send_heartbeat_interval_ms: u64,
    /// Either side closes an HA connection it read nothing from for this long.
    pub housekeeping_interval_ms: u64,
    /// A SYNC_MASTER send waits this long for a slave's ack (`slaveTimeout`).
    pub slave_timeout_ms: u64,
    /// A slave further behind than this is not in sync (`haMaxGapNotInSync`).
    pub max_gap_not_in_sync_bytes: u64,
}

impl Default for HaSection {
    fn default() -> Self {
        HaSection {
            listen_port: 0,
            master_address: String::new(),
            transfer_batch_bytes: 32 * 1024,
            send_heartbeat_interval_ms: 5_000,
            housekeeping_interval_ms: 20_000,
            slave_timeout_ms: 3_000,
            max_gap_not_in_sync_bytes: 256 * 1024 * 1024,
        }
    }
}

impl HaSection {
    /// The HA port a broker listening on `broker_listen_port` accepts slaves on.
    /// A broker that asks for any free port (0) gets any free HA port too, not port 1.
    pub fn effective_listen_port(&self, broker_listen_port: u16) -> u16 {
        match (self.listen_port, broker_listen_port) {
            (0, 0) => 0,
            (0, listen_port) => listen_port.wrapping_add(1),
            (port, _) => port,
        }
    }
}

#[cfg(test)]
mod ha_section_tests {
    use super::HaSection;

    #[test]
    fn the_ha_port_follows_the_listen_port_and_any_free_port_stays_any() {
        let unset = HaSection::default();
        assert_eq!(unset.listen_port, 0);
        assert_eq!(unset.effective_listen_port(10911), 10912);
        // Port 0 asks the kernel for a free port; listen port + 1 would be port 1.
        assert_eq!(unset.effective_listen_port(0), 0);
        let set = HaSection {
            listen_port: 20000,
            ..HaSection::default()
        };
        assert_eq!(set.effective_listen_port(0), 20000);
        assert_eq!(set.effective_listen_port(10911), 20000);
    }
}

/// RocketMQ's ACL 1.0 (`aclEnable`, `plain_acl.yml`).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct AclSection {
    /// Check every broker request against the rules (off by default, as in RocketMQ).
    pub enabled: bool,
    /// The rules file; empty = `plain_acl.yml` in the store root ([`Config::acl_file_path`]).
    pub file_path: String,
}

/// The metrics and dashboard listener (ringmq's own; RocketMQ exports through OpenTelemetry).
#[derive(Debug, Clone, PartialEq)]
pub struct MetricsSection {
    /// `ip:port` of `GET /metrics` and the dashboard; empty turns both off.
    pub listen: String,
}

#[derive(Debug, Clone, PartialEq)]
pub struct LogSection {
    /// A `tracing` filter, e.g. `info` or `ringmq=debug`.
    pub level: String,
}

impl Default for LogSection {
    fn default() -> Self {
        LogSection {
            level: "info".into(),
        }
    }
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
    pub ha: HaSection,
    pub acl: AclSection,
    pub metrics: MetricsSection,
    pub log: LogSection,
}

/// The name of the ACL rules file, in the store root unless `RINGMQ_ACL_FILE_PATH` says
/// otherwise (RocketMQ reads `${ROCKETMQ_HOME}/conf/plain_acl.yml`; ringmq has no home
/// directory, and the store root is the one directory it owns).
pub const ACL_FILE_NAME: &str = "plain_acl.yml";

impl Config {
    /// The `plain_acl.yml` ACL reads: `RINGMQ_ACL_FILE_PATH`, or [`ACL_FILE_NAME`] in
    /// `RINGMQ_STORE_ROOT_DIR`.
    pub fn acl_file_path(&self) -> PathBuf {
        if self.acl.file_path.is_empty() {
            self.store.root_dir.join(ACL_FILE_NAME)
        } else {
            PathBuf::from(&self.acl.file_path)
        }
    }
}

/// RocketMQ's default store root is `${user.home}/store`.
fn default_store_root() -> PathBuf {
    let home = std::env::var_os("HOME").map_or_else(|| PathBuf::from("."), PathBuf::from);
    home.join("store")
}

impl Default for LongpollSection {
    fn default() -> Self {
        LongpollSection {
            enabled: true,
            suspend_timeout_max_ms: 30_000,
            check_interval_ms: 5_000,
            short_polling_time_ms: 1_000,
            parked_pulls_max: 200_000,
            // A client parks one pull per queue it consumes, and one client instance reaches a
            // broker over one connection for all its consumers and topics: 256 topics of 8
            // queues (W5) are 2,048 on one connection. Beyond the bound a pull is answered at
            // once and the client pulls again at once, a busy loop, so the bound is far above
            // any consumer's queue count, and a third of the table (`parked_pulls_max`).
            parked_pulls_max_per_connection: PARKED_PULLS_MAX_PER_CONNECTION_DEFAULT,
            // Measured (docs/BENCHMARKS.md): on 2 cores a second wake thread made the
            // common one-waiter wake-up slower and did not speed up wide fan-outs.
            wake_threads: 1,
            wake_inline_parked_max: 0,
        }
    }
}

impl Default for NamesrvSection {
    fn default() -> Self {
        NamesrvSection {
            addr: String::new(),
            bind_ip: "127.0.0.1".into(),
            listen_port: 9876,
            scan_not_active_broker_interval_ms: 5_000,
            broker_channel_expired_timeout_ms: 120_000,
            kv_config_path: String::new(),
        }
    }
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
                rebalance_lock_max_live_time_ms: 60_000,
                flush_consumer_offset_interval_ms: 5_000,
                message_delay_level: "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h"
                    .into(),
                region_id: "DefaultRegion".into(),
                trace_on: true,
                offset_check_in_slave: false,
                slave_sync_interval_ms: 10_000,
                reject_transaction_message: false,
                transaction_timeout_ms: 6_000,
                transaction_check_max: 15,
                // RocketMQ 4.x's default; 5.1 lowered it to 30 s.
                transaction_check_interval_ms: 60_000,
            },
            namesrv: NamesrvSection::default(),
            store: StoreSection::default(),
            longpoll: LongpollSection::default(),
            server: ServerSection::default(),
            transfer: TransferSection {
                mode: TransferMode::Auto,
                msg_by_heap: None,
                // Break-evens measured with `ringmq-bench catchup` (docs/BENCHMARKS.md, "Pull
                // response transfer"): interleaved records, copy won at 16 KiB and zero-copy at
                // 32 KiB; contiguous records, copy tied or won at 4 KiB, zero-copy won at 8 KiB.
                auto_zerocopy_min_range_bytes: 24 * 1024,
                auto_zerocopy_min_message_bytes: 6 * 1024,
            },
            ha: HaSection::default(),
            acl: AclSection::default(),
            metrics: MetricsSection {
                listen: "127.0.0.1:5557".into(),
            },
            log: LogSection::default(),
        }
    }
}
