//! GET_BROKER_RUNTIME_INFO (28): Java `AdminBrokerProcessor.prepareRuntimeInfo` over
//! `DefaultMessageStore.getRuntimeInfo` and `StoreStatsService.getRuntimeInfo`, with Java
//! 5.3's keys and value formats. The body is a `KVTable` (`{"table":{...}}`).
//!
//! Every value is measured, or is the value Java itself reports for a feature ringmq does not
//! have (the timer wheel off: `timerReadBehind` 0 ...; no transient store pool:
//! `remainTransientStoreBufferNumbs` is `Integer.MAX_VALUE`). Where Java reports the depth of
//! a processor thread pool's queue, ringmq has none: requests run on the connection's runtime
//! thread as they are read, so nothing waits in such a queue and its size and head wait are 0;
//! the capacities reported are Java's defaults, as a Java broker with default settings would
//! report them, since no queue of ringmq can fill up first.

use std::collections::BTreeMap;
use std::path::Path;

use bytes::Bytes;

use crate::broker::controller::BrokerController;
use crate::broker::topic_config_manager::SCHEDULE_TOPIC;
use crate::common::now_ms;
use crate::remoting::codes::response_code as rc;
use crate::remoting::command::RemotingCommand;
use crate::store::format;

use super::{respond, ProcessResult, RequestContext};

/// Java `MQVersion.CURRENT_VERSION` name, reported as brokerVersionDesc.
pub const BROKER_VERSION_DESC: &str = "V5_3_3";

/// Java `BrokerConfig`'s default queue capacities (see the module text).
const JAVA_POOL_QUEUE_CAPACITIES: [(&str, &str, u32); 5] = [
    (
        "sendThreadPoolQueueSize",
        "sendThreadPoolQueueCapacity",
        10_000,
    ),
    (
        "pullThreadPoolQueueSize",
        "pullThreadPoolQueueCapacity",
        100_000,
    ),
    (
        "litePullThreadPoolQueueSize",
        "litePullThreadPoolQueueCapacity",
        100_000,
    ),
    (
        "queryThreadPoolQueueSize",
        "queryThreadPoolQueueCapacity",
        20_000,
    ),
    (
        "ackThreadPoolQueueSize",
        "ackThreadPoolQueueCapacity",
        100_000,
    ),
];
/// Java's `*ThreadPoolQueueHeadWaitTimeMills` keys.
const POOL_HEAD_WAIT_KEYS: [&str; 5] = [
    "sendThreadPoolQueueHeadWaitTimeMills",
    "pullThreadPoolQueueHeadWaitTimeMills",
    "queryThreadPoolQueueHeadWaitTimeMills",
    "litePullThreadPoolQueueHeadWaitTimeMills",
    "ackThreadPoolQueueHeadWaitTimeMills",
];
/// Java `BrokerConfig.endTransactionPoolQueueCapacity`.
const END_TRANSACTION_QUEUE_CAPACITY: u32 = 100_000;

pub async fn get_broker_runtime_info(
    cx: &RequestContext<'_>,
    request: &RemotingCommand,
) -> ProcessResult {
    let table = prepare_runtime_info(cx.ctrl);
    let body = serde_json::json!({ "table": table });
    respond(
        RemotingCommand::response_to(request, rc::SUCCESS, None)
            .with_body(Bytes::from(body.to_string())),
    )
}

/// Java `prepareRuntimeInfo`: every key, as text.
pub fn prepare_runtime_info(ctrl: &BrokerController) -> BTreeMap<String, String> {
    let now = now_ms();
    let mut table: BTreeMap<String, String> = BTreeMap::new();
    store_runtime_info(ctrl, now, &mut table);
    schedule_running_stats(ctrl, &mut table);
    broker_runtime_info(ctrl, &mut table);
    ha_runtime_info(ctrl, &mut table);
    table
}

/// Replication, which Java reports through GET_BROKER_HA_STATUS (`HARuntimeInfo`) rather than
/// here; ringmq adds it under `ha*` keys named after that body's fields. A master: the slaves
/// connected to its HA port, the highest offset one acknowledged, and how far the best slave is
/// behind (Java `slaveFallBehindMuch`). A slave: its master's addresses.
fn ha_runtime_info(ctrl: &BrokerController, table: &mut BTreeMap<String, String>) {
    if ctrl.is_slave() {
        let master = ctrl.slave_sync.master_addr().unwrap_or_default();
        table.insert("haMasterAddr".into(), master);
        let master_ha = ctrl.ha.master_ha_addr().unwrap_or_default();
        table.insert("haMasterHaAddr".into(), master_ha);
        return;
    }
    let state = ctrl.ha.runtime_state(ctrl.store.max_phy_offset());
    table.insert("haConnectionNums".into(), state.slave_count.to_string());
    table.insert(
        "haSlaveAckOffset".into(),
        state.max_replicated_offset.to_string(),
    );
    table.insert("haSlaveFallBehindBytes".into(), state.lag_bytes.to_string());
}

/// Java `DefaultMessageStore.getRuntimeInfo`: the store's counters, disk ratios and offsets.
fn store_runtime_info(ctrl: &BrokerController, now: i64, table: &mut BTreeMap<String, String>) {
    let store = &ctrl.store;
    for (k, v) in store.stats().runtime_info(now) {
        table.insert(k.to_string(), v);
    }
    let root = &ctrl.config.store.root_dir;
    let commit_log_dir = root.join("commitlog");
    let commit_log_ratio = disk_partition_space_used_percent(&commit_log_dir);
    table.insert(
        format!("commitLogDiskRatio_{}", commit_log_dir.display()),
        java_ratio(commit_log_ratio),
    );
    table.insert("commitLogDiskRatio".into(), java_ratio(commit_log_ratio));
    table.insert(
        "consumeQueueDiskRatio".into(),
        java_ratio(disk_partition_space_used_percent(
            &root.join("consumequeue"),
        )),
    );
    table.insert(
        "commitLogMinOffset".into(),
        store.min_phy_offset().to_string(),
    );
    table.insert(
        "commitLogMaxOffset".into(),
        store.max_phy_offset().to_string(),
    );
    // The ConsumeQueue is written inside the append; the index thread is what trails.
    table.insert(
        "dispatchBehindBytes".into(),
        store.dispatch_behind_bytes().to_string(),
    );
    table.insert(
        "pageCacheLockTimeMills".into(),
        store.stats().lock_time_ms(now).to_string(),
    );
    table.insert(
        "earliestMessageTimeStamp".into(),
        earliest_message_time_ms(ctrl).to_string(),
    );
    // No transient store pool: Java's `Integer.MAX_VALUE`.
    table.insert(
        "remainTransientStoreBufferNumbs".into(),
        i32::MAX.to_string(),
    );
    let to_flush = (store.max_phy_offset() - store.flushed_phy_offset()).max(0);
    table.insert(
        "remainHowManyDataToFlush".into(),
        human_readable_byte_count(to_flush as u64),
    );
    if let Some((total, free)) = disk_space_bytes(root) {
        table.insert(
            "commitLogDirCapacity".into(),
            format!(
                "Total : {}, Free : {}.",
                human_readable_byte_count(total),
                human_readable_byte_count(free)
            ),
        );
    }
}

/// Java `ScheduleMessageService.buildRunningStats`: `scheduleMessageOffset_<level>` =
/// "delivered offset,queue max offset".
fn schedule_running_stats(ctrl: &BrokerController, table: &mut BTreeMap<String, String>) {
    let offsets = ctrl
        .schedule_offsets
        .read()
        .unwrap_or_else(|p| p.into_inner())
        .clone();
    for (level, offset) in offsets {
        let max = ctrl.store.max_offset_in_queue(SCHEDULE_TOPIC, level - 1);
        table.insert(
            format!("scheduleMessageOffset_{level}"),
            format!("{offset},{max}"),
        );
    }
}

/// The broker's own keys of `prepareRuntimeInfo`.
fn broker_runtime_info(ctrl: &BrokerController, table: &mut BTreeMap<String, String>) {
    let mut put = |k: &str, v: String| {
        table.insert(k.to_string(), v);
    };
    // Java: the schedule and transaction-check services run, which they do on a master only.
    put("brokerActive", (!ctrl.is_slave()).to_string());
    put("brokerVersionDesc", BROKER_VERSION_DESC.to_string());
    put(
        "brokerVersion",
        crate::remoting::codes::CURRENT_VERSION.to_string(),
    );
    let t = ctrl.stats.totals();
    put(
        "msgPutTotalYesterdayMorning",
        t.put_total_yesterday_morning.to_string(),
    );
    put(
        "msgPutTotalTodayMorning",
        t.put_total_today_morning.to_string(),
    );
    put("msgPutTotalTodayNow", t.put_total_today_now.to_string());
    put(
        "msgGetTotalYesterdayMorning",
        t.get_total_yesterday_morning.to_string(),
    );
    put(
        "msgGetTotalTodayMorning",
        t.get_total_today_morning.to_string(),
    );
    put("msgGetTotalTodayNow", t.get_total_today_now.to_string());
    // ringmq accepts sends from the start (Java's default, 0).
    put("startAcceptSendRequestTimeStamp", "0".into());
    // No timer wheel: the values Java reports with timerWheelEnable off.
    for key in ["timerReadBehind", "timerOffsetBehind", "timerCongestNum"] {
        put(key, "0".into());
    }
    put("timerEnqueueTps", "0.0".into());
    put("timerDequeueTps", "0.0".into());
    for (size_key, capacity_key, capacity) in JAVA_POOL_QUEUE_CAPACITIES {
        put(size_key, "0".into());
        put(capacity_key, capacity.to_string());
    }
    for key in POOL_HEAD_WAIT_KEYS {
        put(key, "0".into());
    }
    put("EndTransactionQueueSize", "0".into());
    put(
        "EndTransactionThreadPoolQueueCapacity",
        END_TRANSACTION_QUEUE_CAPACITY.to_string(),
    );
}

/// Java `getEarliestMessageTime`: the store time of the CommitLog's first record, -1 when
/// there is none.
fn earliest_message_time_ms(ctrl: &BrokerController) -> i64 {
    match ctrl
        .store
        .look_message_by_offset(ctrl.store.min_phy_offset())
    {
        Ok(Some(record)) => format::decode_record(&record).map_or(-1, |r| r.store_timestamp_ms),
        _ => -1,
    }
}

/// (total, free) bytes of the file system holding `path` (Java `File.getTotalSpace` /
/// `getFreeSpace`).
fn disk_space_bytes(path: &Path) -> Option<(u64, u64)> {
    let st = nix::sys::statvfs::statvfs(path).ok()?;
    let unit = st.fragment_size();
    Some((st.blocks() * unit, st.blocks_free() * unit))
}

/// Java `UtilAll.getDiskPartitionSpaceUsedPercent`: the used share of the file system, in
/// hundredths rounded up, as a fraction; -1 when the path does not exist.
fn disk_partition_space_used_percent(path: &Path) -> f64 {
    let Ok(st) = nix::sys::statvfs::statvfs(path) else {
        return -1.0;
    };
    let unit = st.fragment_size();
    let total = st.blocks() * unit;
    if total == 0 {
        return -1.0;
    }
    let used = total - st.blocks_free() * unit;
    let entire = used + st.blocks_available() * unit;
    if entire == 0 {
        return -1.0;
    }
    let round = u64::from(!(used * 100).is_multiple_of(entire));
    ((used * 100) / entire + round) as f64 / 100.0
}

/// A ratio as Java's `String.valueOf(double)` prints it.
fn java_ratio(v: f64) -> String {
    crate::store::store_stats_service::java_double(v)
}

/// Java `MixAll.humanReadableByteCount(bytes, false)`: "512 B", "1.5 KiB", "2.0 GiB".
pub fn human_readable_byte_count(bytes: u64) -> String {
    const UNIT: f64 = 1024.0;
    if bytes < 1024 {
        return format!("{bytes} B");
    }
    let exp = ((bytes as f64).ln() / UNIT.ln()) as i32;
    let prefix = "KMGTPE".as_bytes()[(exp - 1) as usize] as char;
    format!("{:.1} {prefix}iB", bytes as f64 / UNIT.powi(exp))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn byte_counts_read_as_javas() {
        assert_eq!(human_readable_byte_count(0), "0 B");
        assert_eq!(human_readable_byte_count(1023), "1023 B");
        assert_eq!(human_readable_byte_count(1536), "1.5 KiB");
        assert_eq!(human_readable_byte_count(1 << 30), "1.0 GiB");
    }

    #[test]
    fn a_missing_path_has_javas_ratio() {
        let ratio = disk_partition_space_used_percent(Path::new("/nonexistent/ringmq"));
        assert_eq!(java_ratio(ratio), "-1.0");
        let here = disk_partition_space_used_percent(Path::new("/"));
        assert!((0.0..=1.0).contains(&here), "{here}");
    }
}
