//! The route table: which brokers are alive, which broker groups serve which topics
//! (Java `namesrv/routeinfo/RouteInfoManager.java`).
//!
//! Transport-independent: callers pass the current time (`now_ms`) and tell us when a broker's
//! connection closes. Differences from Java, all deliberate:
//! - unregistration runs synchronously (Java queues it to `BatchUnregistrationService`);
//! - no NOTIFY_MIN_BROKER_ID_CHANGE (Java's `notifyMinBrokerIdChanged` defaults to false);
//! - no acting-master route rewrite (Java's `supportActingMaster` defaults to false) and no
//!   `deleteTopicWithBrokerRegistration` (defaults to false);
//! - static topics (`topicQueueMappingInfoMap`) are not tracked;
//! - `register_topic` checks every queue's broker before changing anything (Java may apply
//!   a prefix of the list and then give up).

use crate::remoting::body::{
    perm, BrokerData, ClusterInfo, QueueData, TopicConfig, TopicList, TopicRouteData,
};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::net::SocketAddr;
use std::sync::{RwLock, RwLockReadGuard, RwLockWriteGuard};

use super::broker_registration::BrokerLiveInfo;
pub use super::broker_registration::{
    BrokerAddrInfo, BrokerRegistration, RegisterBrokerError, RegisterBrokerResult,
    RegistrationOrigin,
};

/// `MixAll.MASTER_ID`.
pub const MASTER_ID: i64 = 0;

/// A broker silent for longer than this is dropped, unless it registered with its own
/// `heartbeatTimeoutMillis` (`DEFAULT_BROKER_CHANNEL_EXPIRED_TIME`, 2 minutes).
pub const BROKER_CHANNEL_EXPIRED_TIMEOUT_DEFAULT_MS: i64 = 120_000;

/// How often the name server should call [`RouteInfoManager::scan_not_active_broker`]
/// (`NamesrvConfig.scanNotActiveBrokerInterval`, 5 s).
pub const SCAN_NOT_ACTIVE_BROKER_INTERVAL_MS: i64 = 5_000;

/// The tables of Java's RouteInfoManager, guarded together by one lock.
#[derive(Debug, Default)]
struct Tables {
    /// topic → brokerName → queues.
    topic_queue_table: BTreeMap<String, BTreeMap<String, QueueData>>,
    /// brokerName → addresses.
    broker_addr_table: BTreeMap<String, BrokerData>,
    /// clusterName → brokerNames.
    cluster_addr_table: BTreeMap<String, BTreeSet<String>>,
    broker_live_table: HashMap<BrokerAddrInfo, BrokerLiveInfo>,
    filter_server_table: HashMap<BrokerAddrInfo, Vec<String>>,
}

/// One broker address to remove (`UnRegisterBrokerRequestHeader`).
#[derive(Debug, Clone)]
struct Unregistration {
    cluster_name: String,
    broker_addr: String,
    broker_name: String,
}

/// The name server's route table. All methods take `&self`; one reader-writer lock guards the
/// tables (as in Java), so route lookups run in parallel and registrations are serialized.
#[derive(Debug)]
pub struct RouteInfoManager {
    tables: RwLock<Tables>,
    /// How long a broker that sent no `heartbeatTimeoutMillis` may stay silent.
    broker_channel_expired_timeout_ms: i64,
}

impl Default for RouteInfoManager {
    fn default() -> Self {
        Self::with_broker_channel_expired_timeout_ms(BROKER_CHANNEL_EXPIRED_TIMEOUT_DEFAULT_MS)
    }
}

impl RouteInfoManager {
    pub fn new() -> Self {
        Self::default()
    }

    /// A route table whose brokers, unless their registration says otherwise, expire after
    /// `timeout_ms` of silence (`RINGMQ_NAMESRV_BROKER_CHANNEL_EXPIRED_TIMEOUT_MS`).
    pub fn with_broker_channel_expired_timeout_ms(timeout_ms: i64) -> Self {
        RouteInfoManager {
            tables: RwLock::default(),
            broker_channel_expired_timeout_ms: timeout_ms,
        }
    }

    // A panic while holding the lock (a bug) poisons it. Every mutation below leaves the maps
    // structurally valid after each single map operation, so reading on is safe and keeps the
    // name server answering instead of failing every later request.
    fn read(&self) -> RwLockReadGuard<'_, Tables> {
        self.tables
            .read()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn write(&self) -> RwLockWriteGuard<'_, Tables> {
        self.tables
            .write()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// REGISTER_BROKER: records the broker as alive until `now_ms + timeout`, adds it to its
    /// cluster and broker group, and — for a master only, and only on its first registration or
    /// when its `dataVersion` changed (or a topic lacks this broker's queues) — replaces the
    /// queue data of every topic in its config table.
    pub fn register_broker(
        &self,
        reg: &BrokerRegistration,
        now_ms: i64,
    ) -> Result<RegisterBrokerResult, RegisterBrokerError> {
        self.register_broker_from(reg, now_ms, None)
    }

    /// [`Self::register_broker`] of a request that came over a connection: refused when it
    /// would replace the address of a live broker of the same (cluster, brokerName, brokerId)
    /// that registered over another connection, unless `origin.acl_admin` says ACL allows it.
    /// `None` is a trusted caller.
    pub fn register_broker_from(
        &self,
        reg: &BrokerRegistration,
        now_ms: i64,
        origin: Option<&RegistrationOrigin<'_>>,
    ) -> Result<RegisterBrokerResult, RegisterBrokerError> {
        let mut guard = self.write();
        let tables = &mut *guard;
        if let Some(origin) = origin {
            check_replaces_no_live_broker(tables, reg, now_ms, origin)?;
        }
        let channel = origin.map(|o| o.remote_addr);
        let addr_info = BrokerAddrInfo {
            cluster_name: reg.cluster_name.clone(),
            broker_addr: reg.broker_addr.clone(),
        };
        tables
            .cluster_addr_table
            .entry(reg.cluster_name.clone())
            .or_default()
            .insert(reg.broker_name.clone());
        let Some(group) = update_broker_group(tables, reg, &addr_info)? else {
            return Ok(RegisterBrokerResult::default());
        };
        if group.serves_routes {
            update_topic_routes(tables, reg, &addr_info, &group);
        }
        let timeout_ms = reg
            .heartbeat_timeout_ms
            .unwrap_or(self.broker_channel_expired_timeout_ms);
        record_alive(tables, reg, &addr_info, now_ms, timeout_ms, channel);
        update_filter_servers(tables, reg, &addr_info);
        Ok(master_of_group(tables, reg))
    }

    /// UNREGISTER_BROKER: forgets `broker_addr` in `cluster_name`. A broker group left without
    /// addresses disappears from its cluster and from every topic's route. Returns whether the
    /// address was registered as alive.
    pub fn unregister_broker(
        &self,
        cluster_name: &str,
        broker_addr: &str,
        broker_name: &str,
        broker_id: i64,
    ) -> bool {
        let _ = broker_id;
        let mut tables = self.write();
        unregister_locked(&mut tables, cluster_name, broker_addr, broker_name)
    }

    /// [`Self::unregister_broker`] of a request that came over a connection: refused when the
    /// address is a live broker registered over another connection, unless
    /// `origin.acl_admin` says ACL allows it.
    pub fn unregister_broker_from(
        &self,
        cluster_name: &str,
        broker_addr: &str,
        broker_name: &str,
        broker_id: i64,
        now_ms: i64,
        origin: &RegistrationOrigin<'_>,
    ) -> Result<bool, RegisterBrokerError> {
        let mut tables = self.write();
        // Whatever cluster the request names: the broker group forgets the address either way.
        let held = tables.broker_live_table.iter().find(|(key, live)| {
            key.broker_addr == broker_addr && held_elsewhere(live, now_ms, origin)
        });
        if let Some((key, _)) = held {
            return Err(RegisterBrokerError::LiveBrokerHeldElsewhere {
                cluster_name: key.cluster_name.clone(),
                broker_name: broker_name.to_owned(),
                broker_id,
                live_addr: broker_addr.to_owned(),
                new_addr: broker_addr.to_owned(),
                action: "unregistering",
            });
        }
        Ok(unregister_locked(
            &mut tables,
            cluster_name,
            broker_addr,
            broker_name,
        ))
    }

    /// Drops every broker whose last registration is older than its timeout
    /// (`last_update + timeout < now_ms`). Returns the dropped addresses, so the caller can
    /// close their connections as Java does.
    pub fn scan_not_active_broker(&self, now_ms: i64) -> Vec<BrokerAddrInfo> {
        let mut tables = self.write();
        let mut expired: Vec<BrokerAddrInfo> = tables
            .broker_live_table
            .iter()
            .filter(|(_, live)| {
                live.last_update_ms
                    .saturating_add(live.heartbeat_timeout_ms)
                    < now_ms
            })
            .map(|(key, _)| key.clone())
            .collect();
        expired.sort();
        for key in &expired {
            tracing::warn!(cluster = %key.cluster_name, addr = %key.broker_addr, "broker registration expired");
        }
        let requests = unregistrations_for(&tables, &expired);
        // An expired address with no broker group still leaves the live table.
        for key in &expired {
            tables.broker_live_table.remove(key);
            tables.filter_server_table.remove(key);
        }
        unregister_all(&mut tables, &requests);
        expired
    }

    /// The connection a broker registered over closed: forget `broker_addr` in every cluster
    /// (Java `onChannelDestroy`). Returns the addresses removed.
    ///
    /// The runtime passes the `brokerAddr` of the REGISTER_BROKER requests it answered with
    /// SUCCESS on that connection (see `NamesrvProcessor::registered_broker_addr`).
    pub fn on_channel_closed(&self, broker_addr: &str) -> Vec<BrokerAddrInfo> {
        self.close_channel(broker_addr, None)
    }

    /// [`Self::on_channel_closed`] for the connection from `remote_addr`: a live address that
    /// another connection registered stays (closing a connection that re-registered a live
    /// broker's address does not take that broker down).
    pub fn on_channel_closed_from(
        &self,
        broker_addr: &str,
        remote_addr: SocketAddr,
    ) -> Vec<BrokerAddrInfo> {
        self.close_channel(broker_addr, Some(remote_addr))
    }

    fn close_channel(
        &self,
        broker_addr: &str,
        remote_addr: Option<SocketAddr>,
    ) -> Vec<BrokerAddrInfo> {
        let mut tables = self.write();
        let mut keys: BTreeSet<BrokerAddrInfo> = tables
            .broker_live_table
            .keys()
            .filter(|key| key.broker_addr == broker_addr)
            .cloned()
            .collect();
        for broker_data in tables.broker_addr_table.values() {
            if broker_data
                .broker_addrs
                .values()
                .any(|addr| addr == broker_addr)
            {
                keys.insert(BrokerAddrInfo {
                    cluster_name: broker_data.cluster.clone(),
                    broker_addr: broker_addr.to_owned(),
                });
            }
        }
        let owned_by_another = |key: &BrokerAddrInfo| {
            remote_addr.is_some_and(|remote| {
                tables
                    .broker_live_table
                    .get(key)
                    .and_then(|live| live.channel)
                    .is_some_and(|channel| channel != remote)
            })
        };
        let keys: Vec<BrokerAddrInfo> = keys.into_iter().filter(|k| !owned_by_another(k)).collect();
        let requests = unregistrations_for(&tables, &keys);
        for key in &keys {
            tables.broker_live_table.remove(key);
            tables.filter_server_table.remove(key);
        }
        unregister_all(&mut tables, &requests);
        keys
    }

    /// GET_ROUTEINFO_BY_TOPIC: the topic's queues and the broker groups serving them, or `None`
    /// when no live broker group reported the topic. Queue and broker lists are sorted by
    /// broker name.
    pub fn pickup_topic_route_data(&self, topic: &str) -> Option<TopicRouteData> {
        let tables = self.read();
        let queues = tables.topic_queue_table.get(topic)?;
        let mut route = TopicRouteData {
            queue_datas: queues.values().cloned().collect(),
            ..TopicRouteData::default()
        };
        for broker_name in queues.keys() {
            let Some(broker_data) = tables.broker_addr_table.get(broker_name) else {
                continue;
            };
            route.broker_datas.push(broker_data.clone());
            if tables.filter_server_table.is_empty() {
                continue;
            }
            for addr in broker_data.broker_addrs.values() {
                let key = BrokerAddrInfo {
                    cluster_name: broker_data.cluster.clone(),
                    broker_addr: addr.clone(),
                };
                // Java puts a null list for brokers without filter servers; an empty list is the
                // JSON-safe equivalent.
                let servers = tables
                    .filter_server_table
                    .get(&key)
                    .cloned()
                    .unwrap_or_default();
                route.filter_server_table.insert(addr.clone(), servers);
            }
        }
        if route.queue_datas.is_empty() || route.broker_datas.is_empty() {
            return None;
        }
        Some(route)
    }

    /// GET_BROKER_CLUSTER_INFO.
    pub fn get_all_cluster_info(&self) -> ClusterInfo {
        let tables = self.read();
        ClusterInfo {
            broker_addr_table: tables.broker_addr_table.clone(),
            cluster_addr_table: tables.cluster_addr_table.clone(),
        }
    }

    /// GET_ALL_TOPIC_LIST_FROM_NAMESERVER: every topic with a route, sorted.
    pub fn get_all_topic_list(&self) -> TopicList {
        let tables = self.read();
        TopicList {
            broker_addr: None,
            topic_list: tables.topic_queue_table.keys().cloned().collect(),
        }
    }

    /// DELETE_TOPIC_IN_NAMESRV (Java `deleteTopic`): forgets the topic's route, or with a
    /// cluster only that cluster's brokers' queues of it (the topic goes when none is left).
    pub fn delete_topic(&self, topic: &str, cluster_name: Option<&str>) {
        let mut tables = self.write();
        let Some(cluster) = cluster_name else {
            tables.topic_queue_table.remove(topic);
            return;
        };
        let brokers = tables
            .cluster_addr_table
            .get(cluster)
            .cloned()
            .unwrap_or_default();
        if let Some(queues) = tables.topic_queue_table.get_mut(topic) {
            queues.retain(|broker_name, _| !brokers.contains(broker_name));
            if queues.is_empty() {
                tables.topic_queue_table.remove(topic);
            }
        }
    }

    /// REGISTER_TOPIC_IN_NAMESRV: sets the queues of `topic` on the named broker groups (other
    /// groups' queues of the topic stay). Refused (returns false, nothing changed) when a queue
    /// names a broker group that is not registered, or when `queue_datas` is empty.
    pub fn register_topic(&self, topic: &str, queue_datas: &[QueueData]) -> bool {
        if queue_datas.is_empty() {
            return false;
        }
        let mut tables = self.write();
        if let Some(unknown) = queue_datas
            .iter()
            .find(|qd| !tables.broker_addr_table.contains_key(&qd.broker_name))
        {
            tracing::warn!(topic, broker = %unknown.broker_name, "register topic names an unknown broker");
            return false;
        }
        let queues = tables
            .topic_queue_table
            .entry(topic.to_owned())
            .or_default();
        for qd in queue_datas {
            queues.insert(qd.broker_name.clone(), qd.clone());
        }
        true
    }
}

/// What [`update_broker_group`] learned, for the steps of a registration after it.
struct GroupUpdate {
    /// The group or this address under its id is new (Java `registerFirst`).
    register_first: bool,
    /// The master, or a 5.x group's lowest-id slave: its topic config feeds the routes.
    serves_routes: bool,
    /// In acting-master mode the surviving slave serves reads only.
    wipe_write_perm: bool,
}

/// Whether a live broker registered over a connection from another host than `origin`'s, and
/// ACL does not let `origin` change it (the same host on a new port is the broker reconnected).
fn held_elsewhere(live: &BrokerLiveInfo, now_ms: i64, origin: &RegistrationOrigin<'_>) -> bool {
    live.is_alive(now_ms)
        && live
            .channel
            .is_some_and(|c| c.ip() != origin.remote_addr.ip())
        && !(origin.acl_admin)()
}

/// Refuses `reg` if another address holds its (cluster, brokerName, brokerId) and is alive on
/// another connection. The cluster is the broker group's, so naming another cluster does not
/// get around it.
fn check_replaces_no_live_broker(
    tables: &Tables,
    reg: &BrokerRegistration,
    now_ms: i64,
    origin: &RegistrationOrigin<'_>,
) -> Result<(), RegisterBrokerError> {
    let Some(group) = tables.broker_addr_table.get(&reg.broker_name) else {
        return Ok(());
    };
    let Some(live_addr) = group.broker_addrs.get(&reg.broker_id) else {
        return Ok(());
    };
    if *live_addr == reg.broker_addr {
        return Ok(());
    }
    let key = BrokerAddrInfo {
        cluster_name: group.cluster.clone(),
        broker_addr: live_addr.clone(),
    };
    match tables.broker_live_table.get(&key) {
        Some(live) if held_elsewhere(live, now_ms, origin) => {
            tracing::warn!(
                cluster = %group.cluster, broker = %reg.broker_name, broker_id = reg.broker_id,
                live_addr = %live_addr, new_addr = %reg.broker_addr, from = %origin.remote_addr,
                "registration would replace a live broker registered over another connection; refused"
            );
            Err(RegisterBrokerError::LiveBrokerHeldElsewhere {
                cluster_name: group.cluster.clone(),
                broker_name: reg.broker_name.clone(),
                broker_id: reg.broker_id,
                live_addr: live_addr.clone(),
                new_addr: reg.broker_addr.clone(),
                action: "registering",
            })
        }
        _ => Ok(()),
    }
}

/// Adds `reg`'s address to its broker group. `Ok(None)`: another address holds the same id
/// with a higher stateVersion, so `reg` is ignored (and dropped from the live table).
fn update_broker_group(
    tables: &mut Tables,
    reg: &BrokerRegistration,
    addr_info: &BrokerAddrInfo,
) -> Result<Option<GroupUpdate>, RegisterBrokerError> {
    let mut register_first = false;
    let broker_data = tables
        .broker_addr_table
        .entry(reg.broker_name.clone())
        .or_insert_with(|| {
            register_first = true;
            BrokerData {
                cluster: reg.cluster_name.clone(),
                broker_name: reg.broker_name.clone(),
                ..BrokerData::default()
            }
        });
    let is_old_version_broker = reg.enable_acting_master.is_none();
    broker_data.enable_acting_master = reg.enable_acting_master.unwrap_or(false);
    broker_data.zone_name = reg.zone_name.clone();

    // A slave switched to master (or the reverse) re-registers its address under the new
    // id: one address has one id.
    broker_data
        .broker_addrs
        .retain(|id, addr| *addr != reg.broker_addr || *id == reg.broker_id);

    if id_held_by_newer_broker(&tables.broker_live_table, broker_data, reg) {
        tables.broker_live_table.remove(addr_info);
        return Ok(None);
    }

    if !broker_data.broker_addrs.contains_key(&reg.broker_id)
        && reg.topic_config_wrapper.topic_config_table.len() == 1
    {
        return Err(RegisterBrokerError::SingleTopicBeforeFirstRegistration {
            broker_name: reg.broker_name.clone(),
            broker_id: reg.broker_id,
            broker_addr: reg.broker_addr.clone(),
        });
    }

    let old_addr = broker_data
        .broker_addrs
        .insert(reg.broker_id, reg.broker_addr.clone());
    register_first |= old_addr.is_none_or(|addr| addr.is_empty());

    let is_master = reg.broker_id == MASTER_ID;
    let is_prime_slave = !is_old_version_broker
        && !is_master
        && broker_data.broker_addrs.keys().next() == Some(&reg.broker_id);
    Ok(Some(GroupUpdate {
        register_first,
        serves_routes: is_master || is_prime_slave,
        wipe_write_perm: is_prime_slave && broker_data.enable_acting_master,
    }))
}

/// Another address already holds `reg`'s id: the one with the higher stateVersion wins.
fn id_held_by_newer_broker(
    live_table: &HashMap<BrokerAddrInfo, BrokerLiveInfo>,
    broker_data: &BrokerData,
    reg: &BrokerRegistration,
) -> bool {
    let Some(old_addr) = broker_data.broker_addrs.get(&reg.broker_id) else {
        return false;
    };
    if *old_addr == reg.broker_addr {
        return false;
    }
    let old_key = BrokerAddrInfo {
        cluster_name: reg.cluster_name.clone(),
        broker_addr: old_addr.clone(),
    };
    let Some(old_live) = live_table.get(&old_key) else {
        return false;
    };
    if old_live.data_version.state_version <= reg.topic_config_wrapper.data_version.state_version {
        return false;
    }
    tracing::warn!(
        cluster = %reg.cluster_name, broker = %reg.broker_name,
        broker_id = reg.broker_id, old_addr = %old_addr,
        new_addr = %reg.broker_addr,
        "registering broker conflicts with a newer one; ignored"
    );
    true
}

/// Replaces the queue data of each topic in `reg`'s config table that may have changed: all
/// of them on a first registration or a new `dataVersion`, else those lacking this group.
fn update_topic_routes(
    tables: &mut Tables,
    reg: &BrokerRegistration,
    addr_info: &BrokerAddrInfo,
    group: &GroupUpdate,
) {
    let new_version = &reg.topic_config_wrapper.data_version;
    let broker_version_changed = tables
        .broker_live_table
        .get(addr_info)
        .is_none_or(|live| live.data_version != *new_version);
    for topic_config in reg.topic_config_wrapper.topic_config_table.values() {
        let needs_update = group.register_first
            || broker_version_changed
            || !tables
                .topic_queue_table
                .get(&topic_config.topic_name)
                .is_some_and(|queues| queues.contains_key(&reg.broker_name));
        if needs_update {
            let mut topic_config = topic_config.clone();
            if group.wipe_write_perm {
                topic_config.perm &= !perm::PERM_WRITE;
            }
            create_and_update_queue_data(tables, &reg.broker_name, &topic_config);
        }
    }
}

/// Marks `reg`'s address alive as of `now_ms`, for `heartbeat_timeout_ms`.
fn record_alive(
    tables: &mut Tables,
    reg: &BrokerRegistration,
    addr_info: &BrokerAddrInfo,
    now_ms: i64,
    heartbeat_timeout_ms: i64,
    channel: Option<SocketAddr>,
) {
    // The connection that registered the address stays its owner while it lives, unless the
    // broker reconnected from the same host (a new port) before the old connection was seen
    // closed: the new connection becomes the owner. Another host only refreshes the address.
    let owner = tables
        .broker_live_table
        .get(addr_info)
        .and_then(|live| live.channel);
    let channel = match (owner, channel) {
        (Some(owner), Some(new)) if owner.ip() != new.ip() => Some(owner),
        (owner, new) => new.or(owner),
    };
    let previous = tables.broker_live_table.insert(
        addr_info.clone(),
        BrokerLiveInfo {
            last_update_ms: now_ms,
            heartbeat_timeout_ms,
            data_version: reg.topic_config_wrapper.data_version,
            ha_server_addr: reg.ha_server_addr.clone(),
            channel,
        },
    );
    if previous.is_none() {
        tracing::info!(
            cluster = %reg.cluster_name, broker = %reg.broker_name,
            broker_id = reg.broker_id, addr = %reg.broker_addr,
            ha_addr = %reg.ha_server_addr, "new broker registered"
        );
    }
}

/// `None` leaves the filter servers as they were; an empty list clears them.
fn update_filter_servers(
    tables: &mut Tables,
    reg: &BrokerRegistration,
    addr_info: &BrokerAddrInfo,
) {
    if let Some(list) = &reg.filter_server_list {
        if list.is_empty() {
            tables.filter_server_table.remove(addr_info);
        } else {
            tables
                .filter_server_table
                .insert(addr_info.clone(), list.clone());
        }
    }
}

/// For a slave: its group's live master address and HA address; nothing for a master.
fn master_of_group(tables: &Tables, reg: &BrokerRegistration) -> RegisterBrokerResult {
    let mut result = RegisterBrokerResult::default();
    if reg.broker_id == MASTER_ID {
        return result;
    }
    let master_addr = tables
        .broker_addr_table
        .get(&reg.broker_name)
        .and_then(|bd| bd.broker_addrs.get(&MASTER_ID));
    if let Some(master_addr) = master_addr {
        let master_key = BrokerAddrInfo {
            cluster_name: reg.cluster_name.clone(),
            broker_addr: master_addr.clone(),
        };
        if let Some(master_live) = tables.broker_live_table.get(&master_key) {
            result.ha_server_addr = Some(master_live.ha_server_addr.clone());
            result.master_addr = Some(master_addr.clone());
        }
    }
    result
}

/// `createAndUpdateQueueData`: the broker's queues of one topic, from its topic config.
fn create_and_update_queue_data(tables: &mut Tables, broker_name: &str, tc: &TopicConfig) {
    let queue_data = QueueData {
        broker_name: broker_name.to_owned(),
        perm: tc.perm,
        read_queue_nums: tc.read_queue_nums,
        topic_sys_flag: tc.topic_sys_flag,
        write_queue_nums: tc.write_queue_nums,
    };
    let queues = tables
        .topic_queue_table
        .entry(tc.topic_name.clone())
        .or_default();
    if queues.get(broker_name) != Some(&queue_data) {
        tracing::debug!(topic = %tc.topic_name, broker = broker_name, "topic queue data updated");
        queues.insert(broker_name.to_owned(), queue_data);
    }
}

/// `setupUnRegisterRequest`: finds the broker group holding each address in its cluster.
fn unregistrations_for(tables: &Tables, keys: &[BrokerAddrInfo]) -> Vec<Unregistration> {
    keys.iter()
        .filter_map(|key| {
            tables
                .broker_addr_table
                .values()
                .find(|bd| {
                    bd.cluster == key.cluster_name
                        && bd
                            .broker_addrs
                            .values()
                            .any(|addr| *addr == key.broker_addr)
                })
                .map(|bd| Unregistration {
                    cluster_name: key.cluster_name.clone(),
                    broker_addr: key.broker_addr.clone(),
                    broker_name: bd.broker_name.clone(),
                })
        })
        .collect()
}

// Java removes the address under every id, so the id only matters for its (disabled)
// min-broker-id notification.
fn unregister_locked(
    tables: &mut Tables,
    cluster_name: &str,
    broker_addr: &str,
    broker_name: &str,
) -> bool {
    let removed = unregister_all(
        tables,
        &[Unregistration {
            cluster_name: cluster_name.to_owned(),
            broker_addr: broker_addr.to_owned(),
            broker_name: broker_name.to_owned(),
        }],
    );
    removed == 1
}

/// `unRegisterBroker(Set)`: removes the addresses, then the emptied broker groups and their
/// topic routes. Returns how many of the addresses were in the live table.
fn unregister_all(tables: &mut Tables, requests: &[Unregistration]) -> usize {
    let mut live_removed = 0;
    let mut removed_brokers = BTreeSet::new();
    let mut reduced_brokers = BTreeSet::new();
    for req in requests {
        let key = BrokerAddrInfo {
            cluster_name: req.cluster_name.clone(),
            broker_addr: req.broker_addr.clone(),
        };
        if tables.broker_live_table.remove(&key).is_some() {
            live_removed += 1;
        }
        tables.filter_server_table.remove(&key);

        let mut remove_broker_name = false;
        if let Some(broker_data) = tables.broker_addr_table.get_mut(&req.broker_name) {
            broker_data
                .broker_addrs
                .retain(|_, addr| *addr != req.broker_addr);
            if broker_data.broker_addrs.is_empty() {
                tables.broker_addr_table.remove(&req.broker_name);
                remove_broker_name = true;
            }
        }
        if remove_broker_name {
            if let Some(names) = tables.cluster_addr_table.get_mut(&req.cluster_name) {
                names.remove(&req.broker_name);
                if names.is_empty() {
                    tables.cluster_addr_table.remove(&req.cluster_name);
                }
            }
            tracing::info!(cluster = %req.cluster_name, broker = %req.broker_name, "broker group removed");
            removed_brokers.insert(req.broker_name.clone());
        } else {
            reduced_brokers.insert(req.broker_name.clone());
        }
    }

    // `cleanTopicByUnRegisterRequests`.
    let Tables {
        topic_queue_table,
        broker_addr_table,
        ..
    } = tables;
    topic_queue_table.retain(|_, queues| {
        for name in &removed_brokers {
            queues.remove(name);
        }
        !queues.is_empty()
    });
    for queues in topic_queue_table.values_mut() {
        for name in &reduced_brokers {
            let (Some(queue_data), Some(broker_data)) =
                (queues.get_mut(name), broker_addr_table.get(name))
            else {
                continue;
            };
            // Acting-master mode: a group that lost its master serves reads only.
            let no_master = broker_data
                .broker_addrs
                .keys()
                .next()
                .is_none_or(|min_id| *min_id > MASTER_ID);
            if broker_data.enable_acting_master && no_master {
                queue_data.perm &= !perm::PERM_WRITE;
            }
        }
    }
    live_removed
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::remoting::body::{DataVersion, TopicConfigSerializeWrapper};

    const CLUSTER: &str = "DefaultCluster";
    const MASTER: &str = "10.0.0.1:10911";
    const SLAVE: &str = "10.0.0.2:10911";

    fn wrapper(counter: i64, topics: &[(&str, i32)]) -> TopicConfigSerializeWrapper {
        TopicConfigSerializeWrapper {
            data_version: DataVersion {
                counter,
                state_version: 0,
                timestamp: 1_000,
            },
            topic_config_table: topics
                .iter()
                .map(|(name, perm)| ((*name).to_owned(), TopicConfig::new(*name, 4, 4, *perm)))
                .collect(),
        }
    }

    fn registration(addr: &str, id: i64, w: TopicConfigSerializeWrapper) -> BrokerRegistration {
        BrokerRegistration {
            cluster_name: CLUSTER.into(),
            broker_name: "broker-a".into(),
            broker_addr: addr.into(),
            broker_id: id,
            ha_server_addr: addr.replace("10911", "10912"),
            enable_acting_master: Some(false),
            topic_config_wrapper: w,
            ..BrokerRegistration::default()
        }
    }

    fn two_topics(counter: i64) -> TopicConfigSerializeWrapper {
        wrapper(counter, &[("T", 6), ("TBW102", 7)])
    }

    #[test]
    fn master_registration_creates_the_route() {
        let rim = RouteInfoManager::new();
        let result = rim
            .register_broker(&registration(MASTER, 0, two_topics(1)), 0)
            .unwrap();
        assert_eq!(result, RegisterBrokerResult::default());
        let route = rim.pickup_topic_route_data("T").unwrap();
        assert_eq!(
            route.queue_datas,
            vec![QueueData {
                broker_name: "broker-a".into(),
                perm: 6,
                read_queue_nums: 4,
                topic_sys_flag: 0,
                write_queue_nums: 4,
            }]
        );
        assert_eq!(route.broker_datas.len(), 1);
        assert_eq!(route.broker_datas[0].cluster, CLUSTER);
        assert_eq!(
            route.broker_datas[0].broker_addrs,
            BTreeMap::from([(0, MASTER.to_owned())])
        );
        assert!(route.filter_server_table.is_empty());
        assert!(rim.pickup_topic_route_data("missing").is_none());
        assert_eq!(rim.get_all_topic_list().topic_list, vec!["T", "TBW102"]);
        let info = rim.get_all_cluster_info();
        assert_eq!(
            info.cluster_addr_table[CLUSTER],
            BTreeSet::from(["broker-a".to_owned()])
        );
        assert_eq!(info.broker_addr_table["broker-a"].broker_addrs[&0], MASTER);
    }

    #[test]
    fn slave_gets_master_address_and_does_not_change_queues() {
        let rim = RouteInfoManager::new();
        // A slave alone: no master to report.
        let early = rim
            .register_broker(&registration(SLAVE, 1, two_topics(1)), 0)
            .unwrap();
        assert_eq!(early, RegisterBrokerResult::default());
        rim.register_broker(&registration(MASTER, 0, two_topics(1)), 0)
            .unwrap();
        // The slave reports other queue counts; only the master's count.
        let slave_topics = wrapper(2, &[("T", 4), ("TBW102", 4), ("SLAVE_ONLY", 6)]);
        let result = rim
            .register_broker(&registration(SLAVE, 1, slave_topics), 10)
            .unwrap();
        assert_eq!(result.master_addr.as_deref(), Some(MASTER));
        assert_eq!(result.ha_server_addr.as_deref(), Some("10.0.0.1:10912"));
        let route = rim.pickup_topic_route_data("T").unwrap();
        assert_eq!(route.queue_datas[0].perm, 6);
        assert_eq!(route.broker_datas[0].broker_addrs.len(), 2);
        assert!(rim.pickup_topic_route_data("SLAVE_ONLY").is_none());
    }

    #[test]
    fn prime_slave_of_old_broker_registers_no_queues() {
        // enableActingMaster absent = pre-5.0 broker: a slave never becomes "prime".
        let rim = RouteInfoManager::new();
        let mut reg = registration(SLAVE, 1, two_topics(1));
        reg.enable_acting_master = None;
        rim.register_broker(&reg, 0).unwrap();
        assert!(rim.pickup_topic_route_data("T").is_none());
        // A 5.x slave with the smallest id is the prime slave and does register queues.
        rim.register_broker(&registration(SLAVE, 1, two_topics(2)), 0)
            .unwrap();
        assert!(rim.pickup_topic_route_data("T").is_some());
    }

    #[test]
    fn the_configured_timeout_applies_to_brokers_that_send_none() {
        let rim = RouteInfoManager::with_broker_channel_expired_timeout_ms(5_000);
        let mut reg = registration(MASTER, 0, two_topics(1));
        reg.heartbeat_timeout_ms = None;
        rim.register_broker(&reg, 1_000).unwrap();
        assert!(rim.scan_not_active_broker(6_000).is_empty());
        assert_eq!(rim.scan_not_active_broker(6_001).len(), 1);
    }

    #[test]
    fn registration_expires_after_the_timeout() {
        let rim = RouteInfoManager::new();
        rim.register_broker(&registration(MASTER, 0, two_topics(1)), 1_000)
            .unwrap();
        let mut short = registration(SLAVE, 1, two_topics(1));
        short.heartbeat_timeout_ms = Some(10_000);
        rim.register_broker(&short, 1_000).unwrap();

        assert!(
            rim.scan_not_active_broker(11_000).is_empty(),
            "expiry is strictly after the timeout"
        );
        let expired = rim.scan_not_active_broker(11_001);
        assert_eq!(
            expired,
            vec![BrokerAddrInfo {
                cluster_name: CLUSTER.into(),
                broker_addr: SLAVE.into()
            }]
        );
        let route = rim.pickup_topic_route_data("T").unwrap();
        assert_eq!(
            route.broker_datas[0].broker_addrs,
            BTreeMap::from([(0, MASTER.to_owned())])
        );

        // A re-registration refreshes the deadline.
        rim.register_broker(&registration(MASTER, 0, two_topics(1)), 100_000)
            .unwrap();
        assert!(rim
            .scan_not_active_broker(1_000 + BROKER_CHANNEL_EXPIRED_TIMEOUT_DEFAULT_MS + 1)
            .is_empty());
        let expired =
            rim.scan_not_active_broker(100_000 + BROKER_CHANNEL_EXPIRED_TIMEOUT_DEFAULT_MS + 1);
        assert_eq!(expired.len(), 1);
        assert!(rim.pickup_topic_route_data("T").is_none());
        assert!(rim.get_all_cluster_info().broker_addr_table.is_empty());
        assert!(rim.get_all_cluster_info().cluster_addr_table.is_empty());
        assert!(rim.get_all_topic_list().topic_list.is_empty());
    }

    #[test]
    fn unchanged_data_version_does_not_overwrite_queues() {
        let rim = RouteInfoManager::new();
        rim.register_broker(&registration(MASTER, 0, two_topics(1)), 0)
            .unwrap();
        // Same dataVersion, different perm: ignored.
        rim.register_broker(
            &registration(MASTER, 0, wrapper(1, &[("T", 2), ("TBW102", 7)])),
            1,
        )
        .unwrap();
        assert_eq!(
            rim.pickup_topic_route_data("T").unwrap().queue_datas[0].perm,
            6
        );
        // Changed dataVersion: applied.
        rim.register_broker(
            &registration(MASTER, 0, wrapper(2, &[("T", 2), ("TBW102", 7)])),
            2,
        )
        .unwrap();
        assert_eq!(
            rim.pickup_topic_route_data("T").unwrap().queue_datas[0].perm,
            2
        );
    }

    #[test]
    fn topic_missing_from_the_table_is_added_even_with_unchanged_version() {
        let rim = RouteInfoManager::new();
        rim.register_broker(&registration(MASTER, 0, two_topics(1)), 0)
            .unwrap();
        rim.register_broker(
            &registration(
                MASTER,
                0,
                wrapper(1, &[("T", 6), ("TBW102", 7), ("NEW", 6)]),
            ),
            1,
        )
        .unwrap();
        assert!(rim.pickup_topic_route_data("NEW").is_some());
    }

    #[test]
    fn unregister_removes_the_broker_and_its_routes() {
        let rim = RouteInfoManager::new();
        rim.register_broker(&registration(MASTER, 0, two_topics(1)), 0)
            .unwrap();
        rim.register_broker(&registration(SLAVE, 1, two_topics(1)), 0)
            .unwrap();
        assert!(rim.unregister_broker(CLUSTER, MASTER, "broker-a", 0));
        // The slave keeps the group (and its routes) alive.
        let route = rim.pickup_topic_route_data("T").unwrap();
        assert_eq!(
            route.broker_datas[0].broker_addrs,
            BTreeMap::from([(1, SLAVE.to_owned())])
        );
        assert!(
            !rim.unregister_broker(CLUSTER, MASTER, "broker-a", 0),
            "already gone"
        );
        assert!(rim.unregister_broker(CLUSTER, SLAVE, "broker-a", 1));
        assert!(rim.pickup_topic_route_data("T").is_none());
        assert!(rim.get_all_cluster_info().cluster_addr_table.is_empty());
    }

    #[test]
    fn acting_master_group_loses_write_perm_without_master() {
        let rim = RouteInfoManager::new();
        let mut master = registration(MASTER, 0, two_topics(1));
        master.enable_acting_master = Some(true);
        let mut slave = registration(SLAVE, 1, two_topics(1));
        slave.enable_acting_master = Some(true);
        rim.register_broker(&master, 0).unwrap();
        rim.register_broker(&slave, 0).unwrap();
        rim.unregister_broker(CLUSTER, MASTER, "broker-a", 0);
        assert_eq!(
            rim.pickup_topic_route_data("T").unwrap().queue_datas[0].perm,
            perm::PERM_READ
        );
    }

    #[test]
    fn channel_close_unregisters_the_address() {
        let rim = RouteInfoManager::new();
        rim.register_broker(&registration(MASTER, 0, two_topics(1)), 0)
            .unwrap();
        assert!(rim.on_channel_closed("10.9.9.9:1").is_empty());
        let removed = rim.on_channel_closed(MASTER);
        assert_eq!(
            removed,
            vec![BrokerAddrInfo {
                cluster_name: CLUSTER.into(),
                broker_addr: MASTER.into()
            }]
        );
        assert!(rim.pickup_topic_route_data("T").is_none());
        assert!(rim.get_all_cluster_info().broker_addr_table.is_empty());
    }

    #[test]
    fn same_address_under_a_new_id_replaces_the_old_id() {
        let rim = RouteInfoManager::new();
        rim.register_broker(&registration(MASTER, 0, two_topics(1)), 0)
            .unwrap();
        rim.register_broker(&registration(SLAVE, 1, two_topics(1)), 0)
            .unwrap();
        // The slave is promoted: it registers as id 0 after the old master left.
        rim.unregister_broker(CLUSTER, MASTER, "broker-a", 0);
        rim.register_broker(&registration(SLAVE, 0, two_topics(2)), 1)
            .unwrap();
        let route = rim.pickup_topic_route_data("T").unwrap();
        assert_eq!(
            route.broker_datas[0].broker_addrs,
            BTreeMap::from([(0, SLAVE.to_owned())])
        );
    }

    #[test]
    fn newer_state_version_keeps_its_id() {
        let rim = RouteInfoManager::new();
        let mut newer = two_topics(1);
        newer.data_version.state_version = 5;
        rim.register_broker(&registration(MASTER, 0, newer), 0)
            .unwrap();
        let result = rim
            .register_broker(&registration(SLAVE, 0, two_topics(1)), 0)
            .unwrap();
        assert_eq!(result, RegisterBrokerResult::default());
        let route = rim.pickup_topic_route_data("T").unwrap();
        assert_eq!(
            route.broker_datas[0].broker_addrs,
            BTreeMap::from([(0, MASTER.to_owned())])
        );
        assert_eq!(
            rim.scan_not_active_broker(i64::MAX).len(),
            1,
            "the rejected address is not alive"
        );
    }

    #[test]
    fn single_topic_before_first_registration_is_refused() {
        let rim = RouteInfoManager::new();
        let err = rim
            .register_broker(&registration(MASTER, 0, wrapper(1, &[("T", 6)])), 0)
            .unwrap_err();
        assert!(matches!(
            err,
            RegisterBrokerError::SingleTopicBeforeFirstRegistration { broker_id: 0, .. }
        ));
        assert!(rim.pickup_topic_route_data("T").is_none());
        // After a full registration a single-topic update is accepted.
        rim.register_broker(&registration(MASTER, 0, two_topics(1)), 0)
            .unwrap();
        rim.register_broker(&registration(MASTER, 0, wrapper(2, &[("ONE", 6)])), 0)
            .unwrap();
        assert!(rim.pickup_topic_route_data("ONE").is_some());
    }

    #[test]
    fn filter_servers_appear_in_the_route() {
        let rim = RouteInfoManager::new();
        let mut reg = registration(MASTER, 0, two_topics(1));
        reg.filter_server_list = Some(vec!["10.0.0.1:3000".into()]);
        rim.register_broker(&reg, 0).unwrap();
        let route = rim.pickup_topic_route_data("T").unwrap();
        assert_eq!(
            route.filter_server_table[MASTER],
            vec!["10.0.0.1:3000".to_owned()]
        );
        reg.filter_server_list = Some(Vec::new());
        rim.register_broker(&reg, 1).unwrap();
        assert!(rim
            .pickup_topic_route_data("T")
            .unwrap()
            .filter_server_table
            .is_empty());
    }

    #[test]
    fn register_topic_needs_known_brokers() {
        let rim = RouteInfoManager::new();
        let qd = QueueData {
            broker_name: "broker-a".into(),
            perm: 6,
            read_queue_nums: 2,
            topic_sys_flag: 0,
            write_queue_nums: 2,
        };
        assert!(
            !rim.register_topic("NEW", std::slice::from_ref(&qd)),
            "no broker yet"
        );
        assert!(!rim.register_topic("NEW", &[]));
        rim.register_broker(&registration(MASTER, 0, two_topics(1)), 0)
            .unwrap();
        let unknown = QueueData {
            broker_name: "broker-x".into(),
            ..qd.clone()
        };
        assert!(!rim.register_topic("NEW", &[qd.clone(), unknown]));
        assert!(
            rim.pickup_topic_route_data("NEW").is_none(),
            "nothing applied"
        );
        assert!(rim.register_topic("NEW", std::slice::from_ref(&qd)));
        assert_eq!(
            rim.pickup_topic_route_data("NEW").unwrap().queue_datas,
            vec![qd]
        );
    }
}
