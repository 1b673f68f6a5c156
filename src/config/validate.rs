//! Ranges and relations between fields that parsing a single value cannot check.

use std::net::IpAddr;

use super::error::ConfigError;
use super::sections::{
    BrokerRole, BrokerSection, Config, HaSection, LongpollSection, NamesrvSection, ServerSection,
    StoreIoMode, StoreSection, TransferMode, TransferSection, WAKE_INLINE_PARKED_MAX_LIMIT,
    WAKE_THREADS_MAX,
};
use super::value::ConfigValue;
use super::MetricsSection;
use crate::store::format::CQ_UNIT_SIZE_BYTES;
use crate::store::io::{IoConfig, IoConfigError, IoMode};

/// Most 20-byte units in one ConsumeQueue file: its size must fit in an i32.
const CONSUME_QUEUE_FILE_UNITS_MAX: u64 = i32::MAX as u64 / CQ_UNIT_SIZE_BYTES as u64;

/// Every failed check, so an operator fixes all problems in one go.
#[derive(Default)]
struct Checks(Vec<ConfigError>);

impl Checks {
    /// Records a problem with `var` (set to `value`) unless `ok`.
    fn check(&mut self, ok: bool, var: &str, value: String, reason: &str) {
        if !ok {
            self.0.push(ConfigError {
                var: var.into(),
                value,
                reason: reason.into(),
                at: None,
            });
        }
    }

    fn check_ip(&mut self, text: &str, var: &str) {
        self.check(
            text.parse::<IpAddr>().is_ok(),
            var,
            text.to_owned(),
            "not an IP address",
        );
    }
}

impl Config {
    /// Checks relations between fields. Each problem names the variable, value and reason.
    pub fn validate(&self) -> Vec<ConfigError> {
        let mut checks = Checks::default();
        check_store(&self.store, &mut checks);
        check_broker(&self.broker, &mut checks);
        check_namesrv(&self.namesrv, &mut checks);
        check_longpoll(&self.longpoll, &mut checks);
        check_server(&self.server, &mut checks);
        check_transfer(&self.transfer, &mut checks);
        check_ha(&self.ha, &self.broker, &mut checks);
        check_metrics(&self.metrics, &mut checks);
        checks.0
    }
}

fn check_store(s: &StoreSection, checks: &mut Checks) {
    let size_check = crate::store::config::check_commit_log_file_size(s.commit_log_file_size_bytes);
    checks.check(
        size_check.is_ok(),
        "RINGMQ_STORE_COMMIT_LOG_FILE_SIZE_BYTES",
        s.commit_log_file_size_bytes.to_string(),
        size_check.as_ref().err().map_or("", String::as_str),
    );
    checks.check(
        s.commit_log_file_size_bytes > s.max_message_size_bytes + 64 * 1024,
        "RINGMQ_STORE_COMMIT_LOG_FILE_SIZE_BYTES",
        s.commit_log_file_size_bytes.to_string(),
        "must exceed RINGMQ_STORE_MAX_MESSAGE_SIZE_BYTES + 64 KiB so the largest record fits",
    );
    checks.check(
        s.consume_queue_file_units >= 1,
        "RINGMQ_STORE_CONSUME_QUEUE_FILE_UNITS",
        s.consume_queue_file_units.to_string(),
        "must be at least 1",
    );
    // `StoreConfig::validate` refuses larger files at startup: a ConsumeQueue file's size is
    // an i32, as in Java.
    checks.check(
        s.consume_queue_file_units <= CONSUME_QUEUE_FILE_UNITS_MAX,
        "RINGMQ_STORE_CONSUME_QUEUE_FILE_UNITS",
        s.consume_queue_file_units.to_string(),
        &format!(
            "must be at most {CONSUME_QUEUE_FILE_UNITS_MAX} (20-byte units; a ConsumeQueue file \
             holds at most 2^31-1 bytes)"
        ),
    );
    checks.check(
        s.max_message_size_bytes >= 1 && s.max_message_size_bytes <= 64 * 1024 * 1024,
        "RINGMQ_STORE_MAX_MESSAGE_SIZE_BYTES",
        s.max_message_size_bytes.to_string(),
        "must be between 1 and 67108864",
    );
    checks.check(
        (1..=100).contains(&s.access_message_in_memory_max_ratio_percent),
        "RINGMQ_STORE_ACCESS_MESSAGE_IN_MEMORY_MAX_RATIO_PERCENT",
        s.access_message_in_memory_max_ratio_percent.to_string(),
        "must be a percentage from 1 to 100",
    );
    checks.check(
        s.flush_interval_ms >= 1,
        "RINGMQ_STORE_FLUSH_INTERVAL_MS",
        s.flush_interval_ms.to_string(),
        "must be at least 1",
    );
    // `StoreConfig::validate` refuses 0 at startup (the flush loop would spin).
    checks.check(
        s.flush_consume_queue_interval_ms >= 1,
        "RINGMQ_STORE_FLUSH_CONSUME_QUEUE_INTERVAL_MS",
        s.flush_consume_queue_interval_ms.to_string(),
        "must be at least 1",
    );
    // `StoreConfig::validate` refuses 0 at startup (the retention loop would spin).
    checks.check(
        s.delete_check_interval_ms >= 1,
        "RINGMQ_STORE_DELETE_CHECK_INTERVAL_MS",
        s.delete_check_interval_ms.to_string(),
        "must be at least 1",
    );
    let index = crate::store::config::check_index_dimensions(
        u32::try_from(s.max_hash_slot_num).unwrap_or(u32::MAX),
        u32::try_from(s.max_index_num).unwrap_or(u32::MAX),
    );
    checks.check(
        index.is_ok(),
        "RINGMQ_STORE_MAX_INDEX_NUM",
        format!(
            "{} (RINGMQ_STORE_MAX_HASH_SLOT_NUM {})",
            s.max_index_num, s.max_hash_slot_num
        ),
        index.as_ref().err().map_or("", String::as_str),
    );
    check_store_io(s, checks);
    check_store_disk(s, checks);
}

/// The disk guard's ratios, within Java's bounds (`CleanCommitLogService` clamps them there;
/// ringmq refuses a value outside instead of changing it).
fn check_store_disk(s: &StoreSection, checks: &mut Checks) {
    use crate::store::config::{
        DISK_MAX_USED_SPACE_RATIO_PERCENT_RANGE as MAX_USED,
        DISK_SPACE_CLEAN_FORCIBLY_RATIO_PERCENT_RANGE as FORCIBLY,
        DISK_SPACE_WARNING_LEVEL_RATIO_PERCENT_RANGE as WARNING,
    };
    for (var, value, range) in [
        (
            "RINGMQ_STORE_DISK_MAX_USED_SPACE_RATIO_PERCENT",
            s.disk_max_used_space_ratio_percent,
            MAX_USED,
        ),
        (
            "RINGMQ_STORE_DISK_SPACE_CLEAN_FORCIBLY_RATIO_PERCENT",
            s.disk_space_clean_forcibly_ratio_percent,
            FORCIBLY,
        ),
        (
            "RINGMQ_STORE_DISK_SPACE_WARNING_LEVEL_RATIO_PERCENT",
            s.disk_space_warning_level_ratio_percent,
            WARNING,
        ),
    ] {
        checks.check(
            range.contains(&value),
            var,
            value.to_string(),
            &format!(
                "must be a percentage from {} to {} (RocketMQ's bounds)",
                range.start(),
                range.end()
            ),
        );
    }
}

/// The io_uring read-ring sizing (`RINGMQ_STORE_IO_*`): the ranges below, then, for the
/// io_uring engine, the store's own rule ([`IoConfig::validate`]), which also bounds the
/// registered memory per ring and needs a ring entry per buffer.
fn check_store_io(s: &StoreSection, checks: &mut Checks) {
    let problems_before = checks.0.len();
    checks.check(
        s.io_ring_entries.is_power_of_two() && s.io_ring_entries <= 32768,
        "RINGMQ_STORE_IO_RING_ENTRIES",
        s.io_ring_entries.to_string(),
        "must be a power of two up to 32768",
    );
    checks.check(
        (1..=1024).contains(&s.io_fixed_buffer_count),
        "RINGMQ_STORE_IO_FIXED_BUFFER_COUNT",
        s.io_fixed_buffer_count.to_string(),
        "must be between 1 and 1024",
    );
    checks.check(
        s.io_fixed_buffer_size_bytes >= 4096 && s.io_fixed_buffer_size_bytes.is_multiple_of(4096),
        "RINGMQ_STORE_IO_FIXED_BUFFER_SIZE_BYTES",
        s.io_fixed_buffer_size_bytes.to_string(),
        "must be a multiple of 4096",
    );
    // The pread engine ignores the ring sizing, and the store checks it only for io_uring.
    // A value already refused above is not reported twice.
    if s.io_mode == StoreIoMode::Uring && checks.0.len() == problems_before {
        check_io_config(s, checks);
    }
}

/// [`IoConfig::validate`] over the io settings; its error names the variable to change.
fn check_io_config(s: &StoreSection, checks: &mut Checks) {
    // Lossless: the ranges checked before bound every value far below these types' limits.
    let io = IoConfig {
        mode: IoMode::Uring,
        allow_pread_fallback: s.io_pread_fallback_allowed,
        ring_entries: s.io_ring_entries as u32,
        fixed_buffer_count: s.io_fixed_buffer_count as usize,
        fixed_buffer_size_bytes: s.io_fixed_buffer_size_bytes as usize,
        thread_rings_max: s.io_thread_rings_max as usize,
    };
    let Err(error) = io.validate() else {
        return;
    };
    let (var, value) = match error {
        IoConfigError::FixedBufferCount { .. } => (
            "RINGMQ_STORE_IO_FIXED_BUFFER_COUNT",
            s.io_fixed_buffer_count,
        ),
        IoConfigError::FixedBufferSize { .. } | IoConfigError::RegisteredTotal { .. } => (
            "RINGMQ_STORE_IO_FIXED_BUFFER_SIZE_BYTES",
            s.io_fixed_buffer_size_bytes,
        ),
        IoConfigError::RingEntries { .. } => ("RINGMQ_STORE_IO_RING_ENTRIES", s.io_ring_entries),
        // No variable sets it; only a Config built in code can get here.
        IoConfigError::ThreadRingsMax => ("store.io_thread_rings_max", s.io_thread_rings_max),
    };
    checks.check(false, var, value.to_string(), &error.to_string());
}

fn check_broker(b: &BrokerSection, checks: &mut Checks) {
    checks.check(
        b.listen_port > 2 || !b.fast_port_enabled,
        "RINGMQ_BROKER_LISTEN_PORT",
        b.listen_port.to_string(),
        "must be above 2 when the fast port (listen_port - 2) is enabled",
    );
    checks.check(
        b.permission & !0b1110 == 0,
        "RINGMQ_BROKER_PERMISSION",
        b.permission.to_string(),
        "only the read (4) and write (2) bits (and 8, priority) may be set",
    );
    checks.check(
        (1..=1024).contains(&b.default_topic_queue_nums),
        "RINGMQ_BROKER_DEFAULT_TOPIC_QUEUE_NUMS",
        b.default_topic_queue_nums.to_string(),
        "must be between 1 and 1024",
    );
    checks.check(
        (b.id == 0) == (b.role != BrokerRole::Slave),
        "RINGMQ_BROKER_ID",
        b.id.to_string(),
        "a master (RINGMQ_BROKER_ROLE ASYNC_MASTER/SYNC_MASTER) has id 0 and a SLAVE a non-zero id",
    );
    checks.check(
        b.slave_sync_interval_ms >= 1,
        "RINGMQ_BROKER_SLAVE_SYNC_INTERVAL_MS",
        b.slave_sync_interval_ms.to_string(),
        "must be at least 1",
    );
    checks.check_ip(&b.bind_ip, "RINGMQ_BROKER_BIND_IP");
    checks.check_ip(&b.advertised_ip, "RINGMQ_BROKER_ADVERTISED_IP");
    checks.check(
        b.flush_consumer_offset_interval_ms >= 10,
        "RINGMQ_BROKER_FLUSH_CONSUMER_OFFSET_INTERVAL_MS",
        b.flush_consumer_offset_interval_ms.to_string(),
        "must be at least 10",
    );
    checks.check(
        b.rebalance_lock_max_live_time_ms >= 1,
        "RINGMQ_BROKER_REBALANCE_LOCK_MAX_LIVE_TIME_MS",
        b.rebalance_lock_max_live_time_ms.to_string(),
        "must be at least 1",
    );
    checks.check(
        b.transaction_check_interval_ms >= 1,
        "RINGMQ_BROKER_TRANSACTION_CHECK_INTERVAL_MS",
        b.transaction_check_interval_ms.to_string(),
        "must be at least 1",
    );
    checks.check(
        (1..=i32::MAX as u32).contains(&b.transaction_check_max),
        "RINGMQ_BROKER_TRANSACTION_CHECK_MAX",
        b.transaction_check_max.to_string(),
        "must be between 1 and 2147483647 (a check count is a Java int)",
    );
    checks.check(
        b.transaction_timeout_ms <= i64::MAX as u64,
        "RINGMQ_BROKER_TRANSACTION_TIMEOUT_MS",
        b.transaction_timeout_ms.to_string(),
        "must fit a Java long",
    );
}

fn check_namesrv(n: &NamesrvSection, checks: &mut Checks) {
    checks.check_ip(&n.bind_ip, "RINGMQ_NAMESRV_BIND_IP");
}

fn check_longpoll(l: &LongpollSection, checks: &mut Checks) {
    checks.check(
        l.check_interval_ms >= 1,
        "RINGMQ_LONGPOLL_CHECK_INTERVAL_MS",
        l.check_interval_ms.to_string(),
        "must be at least 1",
    );
    checks.check(
        l.parked_pulls_max >= 1,
        "RINGMQ_LONGPOLL_PARKED_PULLS_MAX",
        l.parked_pulls_max.to_string(),
        "must be at least 1",
    );
    checks.check(
        l.parked_pulls_max_per_connection >= 1,
        "RINGMQ_LONGPOLL_PARKED_PULLS_MAX_PER_CONNECTION",
        l.parked_pulls_max_per_connection.to_string(),
        "must be at least 1",
    );
    checks.check(
        l.wake_threads <= WAKE_THREADS_MAX,
        "RINGMQ_LONGPOLL_WAKE_THREADS",
        l.wake_threads.to_string(),
        "must be at most 64 (0 = one per core)",
    );
    checks.check(
        l.wake_inline_parked_max <= WAKE_INLINE_PARKED_MAX_LIMIT,
        "RINGMQ_LONGPOLL_WAKE_INLINE_PARKED_MAX",
        l.wake_inline_parked_max.to_string(),
        "must be at most 64: the appending thread answers that many pulls per send",
    );
}

fn check_server(v: &ServerSection, checks: &mut Checks) {
    checks.check(
        v.frame_size_max_bytes >= 1024 && v.frame_size_max_bytes <= 1024 * 1024 * 1024,
        "RINGMQ_SERVER_FRAME_SIZE_MAX_BYTES",
        v.frame_size_max_bytes.to_string(),
        "must be between 1024 and 1073741824",
    );
    checks.check(
        v.requests_in_flight_max >= 1,
        "RINGMQ_SERVER_REQUESTS_IN_FLIGHT_MAX",
        v.requests_in_flight_max.to_string(),
        "must be at least 1",
    );
    // `ServerConfig::validate` refuses more at startup: the connection's in-flight semaphore
    // hands out at most u32::MAX permits at once.
    checks.check(
        v.requests_in_flight_max <= u64::from(u32::MAX),
        "RINGMQ_SERVER_REQUESTS_IN_FLIGHT_MAX",
        v.requests_in_flight_max.to_string(),
        "must fit in 32 bits",
    );
    checks.check(
        v.write_queue_max >= 1,
        "RINGMQ_SERVER_WRITE_QUEUE_MAX",
        v.write_queue_max.to_string(),
        "must be at least 1",
    );
    checks.check(
        v.write_queue_max_bytes >= 1,
        "RINGMQ_SERVER_WRITE_QUEUE_MAX_BYTES",
        v.write_queue_max_bytes.to_string(),
        "must be at least 1",
    );
}

/// `transferMsgByHeap` is an alias of the mode, so the two may not contradict each other.
fn check_transfer(t: &TransferSection, checks: &mut Checks) {
    let alias_conflict = match (t.msg_by_heap, t.mode) {
        (Some(by_heap), TransferMode::Copy) => !by_heap,
        (Some(by_heap), TransferMode::ZeroCopy) => by_heap,
        _ => false,
    };
    checks.check(
        !alias_conflict,
        "RINGMQ_TRANSFER_MSG_BY_HEAP",
        t.msg_by_heap.show(),
        "contradicts RINGMQ_TRANSFER_MODE (true means copy, false means zerocopy)",
    );
}

/// Most bytes in one HA frame: a frame's size field is an i32, and the slave's read buffer
/// (Java `HAClient.READ_MAX_BUFFER_SIZE`, 4 MiB) must hold a whole frame.
pub const HA_TRANSFER_BATCH_MAX_BYTES: u64 = 4 * 1024 * 1024 - 12;

fn check_ha(h: &HaSection, b: &BrokerSection, checks: &mut Checks) {
    checks.check(
        h.listen_port == 0 || h.listen_port != b.listen_port,
        "RINGMQ_HA_LISTEN_PORT",
        h.listen_port.to_string(),
        "must differ from RINGMQ_BROKER_LISTEN_PORT",
    );
    checks.check(
        h.listen_port != 0 || b.listen_port < u16::MAX,
        "RINGMQ_HA_LISTEN_PORT",
        h.listen_port.to_string(),
        "0 means RINGMQ_BROKER_LISTEN_PORT + 1, which is not a port when the listen port is 65535",
    );
    let addr = h.master_address.trim();
    checks.check(
        addr.is_empty() || addr.parse::<std::net::SocketAddr>().is_ok(),
        "RINGMQ_HA_MASTER_ADDRESS",
        h.master_address.clone(),
        "must be empty or ip:port",
    );
    checks.check(
        (1..=HA_TRANSFER_BATCH_MAX_BYTES).contains(&h.transfer_batch_bytes),
        "RINGMQ_HA_TRANSFER_BATCH_BYTES",
        h.transfer_batch_bytes.to_string(),
        &format!("must be between 1 and {HA_TRANSFER_BATCH_MAX_BYTES}"),
    );
    for (var, value) in [
        (
            "RINGMQ_HA_SEND_HEARTBEAT_INTERVAL_MS",
            h.send_heartbeat_interval_ms,
        ),
        ("RINGMQ_HA_SLAVE_TIMEOUT_MS", h.slave_timeout_ms),
    ] {
        checks.check(value >= 1, var, value.to_string(), "must be at least 1");
    }
    checks.check(
        h.housekeeping_interval_ms > h.send_heartbeat_interval_ms,
        "RINGMQ_HA_HOUSEKEEPING_INTERVAL_MS",
        h.housekeeping_interval_ms.to_string(),
        "must exceed RINGMQ_HA_SEND_HEARTBEAT_INTERVAL_MS, or idle connections are closed \
         between heartbeats",
    );
    checks.check(
        h.max_gap_not_in_sync_bytes >= 1,
        "RINGMQ_HA_MAX_GAP_NOT_IN_SYNC_BYTES",
        h.max_gap_not_in_sync_bytes.to_string(),
        "must be at least 1",
    );
}

fn check_metrics(m: &MetricsSection, checks: &mut Checks) {
    let listen = m.listen.trim();
    checks.check(
        listen.is_empty() || listen.parse::<std::net::SocketAddr>().is_ok(),
        "RINGMQ_METRICS_LISTEN",
        m.listen.clone(),
        "must be ip:port (e.g. 127.0.0.1:5557), or empty to turn metrics and the dashboard off",
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_metrics_listener_is_an_address_or_empty() {
        for ok in ["", "127.0.0.1:0", "[::1]:5557"] {
            assert!(
                Config::from_pairs(&[("RINGMQ_METRICS_LISTEN", ok)]).is_ok(),
                "{ok}"
            );
        }
        let err = Config::from_pairs(&[("RINGMQ_METRICS_LISTEN", "localhost")]).unwrap_err();
        assert!(err.to_string().contains("RINGMQ_METRICS_LISTEN"), "{err}");
    }

    #[test]
    fn shipped_defaults_validate() {
        assert_eq!(Config::default().validate(), vec![]);
    }

    #[test]
    fn relations_between_fields_are_checked() {
        let err = Config::from_pairs(&[("RINGMQ_STORE_COMMIT_LOG_FILE_SIZE_BYTES", "1048576")])
            .unwrap_err();
        assert!(
            err.to_string()
                .contains("RINGMQ_STORE_MAX_MESSAGE_SIZE_BYTES"),
            "{err}"
        );
        let err = Config::from_pairs(&[("RINGMQ_BROKER_ROLE", "SLAVE")]).unwrap_err();
        assert!(err.to_string().contains("RINGMQ_BROKER_ID"), "{err}");
    }

    /// Values the store or the network runtime would refuse at startup are refused here, each
    /// naming its variable.
    #[test]
    fn limits_of_the_store_and_the_server_are_checked_up_front() {
        let rejected_var = |pairs: &[(&str, &str)]| {
            let errors = Config::from_pairs(pairs).unwrap_err().0;
            assert_eq!(errors.len(), 1, "{errors:?}");
            errors[0].var.clone()
        };
        let units = CONSUME_QUEUE_FILE_UNITS_MAX.to_string();
        assert!(Config::from_pairs(&[("RINGMQ_STORE_CONSUME_QUEUE_FILE_UNITS", &units)]).is_ok());
        let units = (CONSUME_QUEUE_FILE_UNITS_MAX + 1).to_string();
        assert_eq!(
            rejected_var(&[("RINGMQ_STORE_CONSUME_QUEUE_FILE_UNITS", &units)]),
            "RINGMQ_STORE_CONSUME_QUEUE_FILE_UNITS"
        );
        let store = crate::store::StoreConfig {
            consume_queue_file_units: CONSUME_QUEUE_FILE_UNITS_MAX + 1,
            ..crate::store::StoreConfig::with_root("/nonexistent")
        };
        assert!(store.validate().is_err());
        assert_eq!(
            rejected_var(&[("RINGMQ_STORE_DELETE_CHECK_INTERVAL_MS", "0")]),
            "RINGMQ_STORE_DELETE_CHECK_INTERVAL_MS"
        );
        assert_eq!(
            rejected_var(&[("RINGMQ_SERVER_REQUESTS_IN_FLIGHT_MAX", "4294967296")]),
            "RINGMQ_SERVER_REQUESTS_IN_FLIGHT_MAX"
        );
        // io_uring needs a ring entry per registered buffer and at most 1 GiB of them per ring;
        // the pread engine ignores both.
        let few_entries = [
            ("RINGMQ_STORE_IO_RING_ENTRIES", "16"),
            ("RINGMQ_STORE_IO_FIXED_BUFFER_COUNT", "32"),
        ];
        assert_eq!(rejected_var(&few_entries), "RINGMQ_STORE_IO_RING_ENTRIES");
        let too_much = [
            ("RINGMQ_STORE_IO_FIXED_BUFFER_COUNT", "32"),
            ("RINGMQ_STORE_IO_FIXED_BUFFER_SIZE_BYTES", "67108864"),
        ];
        assert_eq!(
            rejected_var(&too_much),
            "RINGMQ_STORE_IO_FIXED_BUFFER_SIZE_BYTES"
        );
        for pairs in [&few_entries, &too_much] {
            let mut pread = pairs.to_vec();
            pread.push(("RINGMQ_STORE_IO_MODE", "pread"));
            assert!(Config::from_pairs(&pread).is_ok(), "{pread:?}");
        }
    }

    #[test]
    fn transfer_mode_and_its_rocketmq_alias() {
        let mode = |pairs: &[(&str, &str)]| {
            Config::from_pairs(pairs)
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
}
