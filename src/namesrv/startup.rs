//! Starting the name server: its request handler on the network runtime and the thread that
//! expires silent brokers (Java `NamesrvStartup`, `NamesrvController`,
//! `BrokerHousekeepingService`).

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use super::processor::NamesrvProcessor;
use super::route_info::{RegistrationOrigin, RouteInfoManager};
use crate::acl::PlainAccessValidator;
use crate::common::{now_ms, StopFlag};
use crate::config::Config;
use crate::net::{self, ConnectionContext, RequestHandler, ServerHandle, ShutdownSignal};
use crate::remoting::command::RemotingCommand;

/// Why the name server could not start. Each names what to change.
#[derive(Debug, thiserror::Error)]
pub enum NamesrvStartError {
    #[error("server: {0}")]
    Server(#[from] net::ServerError),
    /// Another process already listens on the name server's address.
    #[error(
        "{source}; it comes from RINGMQ_NAMESRV_BIND_IP={bind_ip} and \
         RINGMQ_NAMESRV_LISTEN_PORT={listen_port}: stop the process that holds it or set \
         RINGMQ_NAMESRV_LISTEN_PORT to a free port"
    )]
    ListenAddrInUse {
        bind_ip: String,
        listen_port: u16,
        #[source]
        source: net::ServerError,
    },
    #[error("{0}")]
    Acl(#[from] crate::acl::AclConfigError),
    #[error("configuration: RINGMQ_NAMESRV_BIND_IP={0:?} is not an IP address")]
    BindIp(String),
    #[error("cannot start thread {name}: {source}")]
    Thread {
        name: &'static str,
        #[source]
        source: std::io::Error,
    },
}

/// The name server's [`RequestHandler`]: the transport-free processor plus per-connection
/// memory of which broker registered on which connection, so a closed connection drops its
/// broker at once (Java `BrokerHousekeepingService`).
pub struct NamesrvHandler {
    processor: NamesrvProcessor,
    registered: Mutex<HashMap<u64, String>>,
    /// With `RINGMQ_ACL_ENABLED`: an admin account may replace a live broker's registration.
    acl: Option<Arc<PlainAccessValidator>>,
}

impl RequestHandler for NamesrvHandler {
    async fn handle(
        &self,
        conn: ConnectionContext,
        request: RemotingCommand,
    ) -> Option<RemotingCommand> {
        if request.is_response() {
            return None;
        }
        // Java's name server checks no ACL; ringmq asks it only for a registration that would
        // replace a live broker registered over another connection.
        let acl_admin = || {
            self.acl
                .as_ref()
                .is_some_and(|acl| acl.validate_admin(&request, conn.remote_addr.ip()).is_ok())
        };
        let origin = RegistrationOrigin {
            remote_addr: conn.remote_addr,
            acl_admin: &acl_admin,
        };
        let response = self
            .processor
            .process_from(&request, now_ms(), Some(&origin));
        if let Some(addr) = NamesrvProcessor::registered_broker_addr(&request, &response) {
            self.registered
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .insert(conn.id, addr.to_string());
        }
        (!request.is_oneway()).then_some(response)
    }

    fn on_connection_closed(&self, conn: &ConnectionContext) {
        let addr = self
            .registered
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&conn.id);
        if let Some(addr) = addr {
            self.processor
                .route_info()
                .on_channel_closed_from(&addr, conn.remote_addr);
        }
    }
}

/// A running name server.
pub struct NamesrvHandle {
    pub server: ServerHandle,
    pub route_info: Arc<RouteInfoManager>,
    scan: Option<JoinHandle<()>>,
    shutdown: ShutdownSignal,
    stop: StopFlag,
}

impl NamesrvHandle {
    pub fn stop(mut self) {
        self.stop.raise();
        self.shutdown.trigger();
        self.server.shutdown();
        if let Some(t) = self.scan.take() {
            let _ = t.join();
        }
        if let Err(e) = self.server.join() {
            tracing::warn!(error = %e, "name server stopped with an error");
        }
    }
}

/// Starts a name server on `RINGMQ_NAMESRV_BIND_IP`:`RINGMQ_NAMESRV_LISTEN_PORT`.
pub fn start_namesrv(config: &Config) -> Result<NamesrvHandle, NamesrvStartError> {
    let ip = config
        .namesrv
        .bind_ip
        .parse()
        .map_err(|_| NamesrvStartError::BindIp(config.namesrv.bind_ip.clone()))?;
    let addr = SocketAddr::new(ip, config.namesrv.listen_port);
    let route_info = Arc::new(RouteInfoManager::with_broker_channel_expired_timeout_ms(
        i64::try_from(config.namesrv.broker_channel_expired_timeout_ms).unwrap_or(i64::MAX),
    ));
    let acl = if config.acl.enabled {
        let validator = PlainAccessValidator::load(&config.acl_file_path())?;
        let name = "ringmq-namesrv-acl-watch";
        validator
            .watch()
            .map_err(|source| NamesrvStartError::Thread { name, source })?;
        Some(validator)
    } else {
        None
    };
    let handler = Arc::new(NamesrvHandler {
        processor: NamesrvProcessor::new(route_info.clone()),
        registered: Mutex::new(HashMap::new()),
        acl,
    });
    let shutdown = ShutdownSignal::new();
    let mut sc = net::ServerConfig::from_config(config, addr);
    // Name server traffic is light; one thread is plenty.
    sc.worker_threads = 1;
    let server = net::serve(sc, handler, shutdown.clone()).map_err(|e| match e.addr_in_use() {
        Some(_) => NamesrvStartError::ListenAddrInUse {
            bind_ip: config.namesrv.bind_ip.clone(),
            listen_port: config.namesrv.listen_port,
            source: e,
        },
        None => NamesrvStartError::Server(e),
    })?;
    let scan_interval = Duration::from_millis(config.namesrv.scan_not_active_broker_interval_ms);
    let scan_route = route_info.clone();
    let stop = StopFlag::new();
    let scan_stop = stop.clone();
    let name = "ringmq-namesrv-scan";
    let scan = std::thread::Builder::new()
        .name(name.to_string())
        .spawn(move || {
            while !scan_stop.wait_timeout(scan_interval) {
                for gone in scan_route.scan_not_active_broker(now_ms()) {
                    tracing::info!(broker = ?gone, "name server expired a silent broker");
                }
            }
        })
        .map_err(|source| NamesrvStartError::Thread { name, source })?;
    tracing::info!(addr = %server.local_addrs()[0], "ringmq name server listening");
    Ok(NamesrvHandle {
        server,
        route_info,
        scan: Some(scan),
        shutdown,
        stop,
    })
}
