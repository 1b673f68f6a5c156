//! The broker's HA service (Java `HAService`): on a master, the accept thread of the HA port
//! and its slave connections; on a slave, the client thread that follows the master. The state
//! the rest of the broker needs (the SYNC_MASTER wait, the runtime state, the master's
//! addresses a slave learned from the name server) is here.

use std::io;
use std::net::{SocketAddr, TcpListener};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use super::group_transfer_service::{GroupTransferService, HaRuntimeState, SlaveWaitError};
use super::ha_client::{self, ClientParams, MasterAddress};
use super::ha_connection::{spawn, BodyTransfer, ConnectionParams, HaConnection, TransferCounters};
use crate::common::StopFlag;
use crate::config::{BrokerRole, Config, TransferMode};
use crate::store::MessageStore;

/// How often the accept thread looks for a new slave and the stop flag.
const ACCEPT_POLL_INTERVAL: Duration = Duration::from_millis(100);
/// Most slaves one master serves at once; more are refused (closed at accept). A broker group
/// has one or two slaves; each connection has two threads, and its writer reads through the
/// store's read engine, whose per-thread rings are bounded for the whole process
/// (`io_thread_rings_max`, 16).
pub const SLAVE_CONNECTIONS_MAX: usize = 8;

/// Why the HA port could not be opened.
#[derive(Debug, thiserror::Error)]
#[error("cannot listen for HA slaves on {addr} ({setting}): {source}")]
pub struct HaBindError {
    pub addr: SocketAddr,
    pub setting: String,
    #[source]
    pub source: crate::net::ServerError,
}

/// Pending slave connections the HA port queues (a group has one or two slaves).
const HA_LISTEN_BACKLOG: u32 = 16;

/// The HA state of one broker.
pub struct HaService {
    role: BrokerRole,
    pub group: Arc<GroupTransferService>,
    /// Slave: the master's HA address.
    master_ha_addr: Arc<MasterAddress>,
    /// Slave: whether the name server may change `master_ha_addr` (no fixed address set).
    master_ha_addr_from_namesrv: bool,
    /// Slave: the master's broker address (`masterAddr` of the registration answer).
    master_addr: Mutex<Option<String>>,
    pub counters: Arc<TransferCounters>,
    connections: Mutex<Vec<Arc<HaConnection>>>,
    connection_threads: Mutex<Vec<JoinHandle<()>>>,
}

impl HaService {
    pub fn new(config: &Config) -> Arc<HaService> {
        let fixed = config.ha.master_address.trim();
        Arc::new(HaService {
            role: config.broker.role,
            group: Arc::new(GroupTransferService::new(&config.ha)),
            master_ha_addr: Arc::new(MasterAddress::new(
                (!fixed.is_empty()).then(|| fixed.to_owned()),
            )),
            master_ha_addr_from_namesrv: fixed.is_empty(),
            master_addr: Mutex::new(None),
            counters: Arc::new(TransferCounters::default()),
            connections: Mutex::new(Vec::new()),
            connection_threads: Mutex::new(Vec::new()),
        })
    }

    /// The master's replication state for GET_BROKER_RUNTIME_INFO (`master_max_phy_offset` is
    /// the store's write position).
    pub fn runtime_state(&self, master_max_phy_offset: i64) -> HaRuntimeState {
        self.group.runtime_state(master_max_phy_offset)
    }

    /// SYNC_MASTER: waits for a slave ack of `end_phy_offset` (group commit).
    pub async fn wait_for_slave(&self, end_phy_offset: i64) -> Result<(), SlaveWaitError> {
        self.group.wait_for_slave(end_phy_offset).await
    }

    /// Wakes the connections' writers after an append.
    pub fn notify_data_appended(&self) {
        self.group.notify_data_appended();
    }

    /// A slave's registration answer: the master's `haServerAddr` (taken unless
    /// `RINGMQ_HA_MASTER_ADDRESS` is set, Java `updateMasterHAServerAddrPeriodically`) and its
    /// `masterAddr`.
    pub fn update_master(&self, ha_server_addr: Option<&str>, master_addr: Option<&str>) {
        if self.role != BrokerRole::Slave {
            return;
        }
        if self.master_ha_addr_from_namesrv {
            let ha = ha_server_addr.filter(|a| !a.is_empty()).map(str::to_owned);
            if ha.is_some() && self.master_ha_addr.set(ha.clone()) {
                tracing::info!(master_ha = ?ha, "HA master address from the name server");
            }
        }
        if let Some(addr) = master_addr.filter(|a| !a.is_empty()) {
            *self.master_addr.lock().unwrap_or_else(|e| e.into_inner()) = Some(addr.to_owned());
        }
    }

    /// Slave: the master's broker address, once the name server told it.
    pub fn master_addr(&self) -> Option<String> {
        self.master_addr
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Master: the lowest offset a connected slave acknowledged (`None` without a slave that
    /// reported yet): what the slowest slave lacks is the write position minus this.
    pub fn slowest_slave_ack(&self) -> Option<i64> {
        self.connections
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .filter(|c| !c.is_closed())
            .map(|c| c.slave_ack_offset())
            .filter(|offset| *offset >= 0)
            .min()
    }

    /// Slave: whether it follows its master now.
    pub fn slave_connected(&self) -> bool {
        self.master_ha_addr.is_connected()
    }

    /// This broker's role.
    pub fn role(&self) -> BrokerRole {
        self.role
    }

    /// Slave: the master's HA address in use.
    pub fn master_ha_addr(&self) -> Option<String> {
        self.master_ha_addr.get()
    }

    /// Starts the HA thread: the accept thread on a master (`listener` bound by [`bind`]), the
    /// client on a slave.
    pub fn start(
        self: &Arc<Self>,
        store: Arc<MessageStore>,
        config: &Config,
        listener: Option<TcpListener>,
        stop: &StopFlag,
    ) -> io::Result<JoinHandle<()>> {
        let service = self.clone();
        let stop = stop.clone();
        match listener {
            Some(listener) => {
                let params = connection_params(config, &store);
                spawn("ringmq-ha-accept", move || {
                    service.accept_loop(&listener, &store, params, &stop);
                    service.close_all();
                })
            }
            None => {
                let params = ClientParams {
                    heartbeat_interval: Duration::from_millis(config.ha.send_heartbeat_interval_ms),
                    housekeeping_interval: Duration::from_millis(
                        config.ha.housekeeping_interval_ms,
                    ),
                };
                let master = self.master_ha_addr.clone();
                spawn("ringmq-ha-client", move || {
                    ha_client::run(&store, &master, params, &stop);
                })
            }
        }
    }

    fn accept_loop(
        &self,
        listener: &TcpListener,
        store: &Arc<MessageStore>,
        params: ConnectionParams,
        stop: &StopFlag,
    ) {
        if let Err(e) = listener.set_nonblocking(true) {
            tracing::error!(error = %e, "HA listener cannot be polled; no slave can connect");
            return;
        }
        loop {
            match listener.accept() {
                Ok((stream, peer)) => self.admit(stream, peer, store, params, stop),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    if stop.wait_timeout(ACCEPT_POLL_INTERVAL) {
                        return;
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    tracing::warn!(error = %e, "HA accept failed");
                    if stop.wait_timeout(ACCEPT_POLL_INTERVAL) {
                        return;
                    }
                }
            }
        }
    }

    fn admit(
        &self,
        stream: std::net::TcpStream,
        peer: SocketAddr,
        store: &Arc<MessageStore>,
        params: ConnectionParams,
        stop: &StopFlag,
    ) {
        let mut connections = self.connections.lock().unwrap_or_else(|e| e.into_inner());
        connections.retain(|c| !c.is_closed());
        let mut threads = self
            .connection_threads
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        threads.retain(|t| !t.is_finished());
        if connections.len() >= SLAVE_CONNECTIONS_MAX {
            tracing::warn!(slave = %peer, max = SLAVE_CONNECTIONS_MAX, "HA slave refused: too many slaves");
            return;
        }
        let started = stream.set_nonblocking(false).and_then(|()| {
            HaConnection::start(
                stream,
                store.clone(),
                self.group.clone(),
                params,
                self.counters.clone(),
                stop,
            )
        });
        match started {
            Ok((conn, handles)) => {
                connections.push(conn);
                threads.extend(handles);
            }
            Err(e) => tracing::warn!(slave = %peer, error = %e, "HA slave connection not started"),
        }
    }

    /// Closes every slave connection and waits for their threads.
    fn close_all(&self) {
        for conn in self
            .connections
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .drain(..)
        {
            conn.close("broker stopping");
        }
        let threads: Vec<_> = self
            .connection_threads
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .drain(..)
            .collect();
        for t in threads {
            let _ = t.join();
        }
    }
}

/// Binds the HA port of a master (`RINGMQ_HA_LISTEN_PORT`, default the listen port + 1) on the
/// broker's bind address; `None` for a slave. Returns the port bound. `requested_listen_port`
/// is the broker port as configured, before binding: 0 (any free port) asks for any HA port.
pub fn bind(
    config: &Config,
    requested_listen_port: u16,
) -> Result<Option<(TcpListener, u16)>, HaBindError> {
    if config.broker.role == BrokerRole::Slave {
        return Ok(None);
    }
    let port = config.ha.effective_listen_port(requested_listen_port);
    let ip = config
        .broker
        .bind_ip
        .parse()
        .unwrap_or(std::net::IpAddr::from([127, 0, 0, 1]));
    let addr = SocketAddr::new(ip, port);
    let setting = if config.ha.listen_port == 0 {
        format!(
            "RINGMQ_HA_LISTEN_PORT unset: RINGMQ_BROKER_LISTEN_PORT={} + 1",
            config.broker.listen_port
        )
    } else {
        format!("RINGMQ_HA_LISTEN_PORT={port}")
    };
    // The same bind as the main port: an address in use is retried for a moment (a killed
    // broker's socket outlives it briefly), then fails the start naming the setting.
    let listener =
        crate::net::bind_listener(addr, HA_LISTEN_BACKLOG).map_err(|source| HaBindError {
            addr,
            setting,
            source,
        })?;
    let bound = listener.local_addr().map_or(port, |a| a.port());
    Ok(Some((listener, bound)))
}

fn connection_params(config: &Config, store: &MessageStore) -> ConnectionParams {
    let t = &config.transfer;
    let body_transfer = match t.effective_mode() {
        TransferMode::Copy => BodyTransfer::Copy,
        TransferMode::ZeroCopy => BodyTransfer::ZeroCopy,
        TransferMode::Auto => BodyTransfer::Auto {
            min_bytes: t.auto_zerocopy_min_range_bytes as usize,
        },
    };
    ConnectionParams {
        transfer_batch_bytes: config.ha.transfer_batch_bytes as usize,
        heartbeat_interval: Duration::from_millis(config.ha.send_heartbeat_interval_ms),
        housekeeping_interval: Duration::from_millis(config.ha.housekeeping_interval_ms),
        commit_log_file_size_bytes: store.config().commit_log_file_size_bytes as i64,
        body_transfer,
    }
}
