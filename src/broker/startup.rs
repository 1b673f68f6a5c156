//! Starting and stopping a broker and a name server (Java `BrokerStartup`, `NamesrvStartup`).

use crate::acl::PlainAccessValidator;
use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::AtomicI32;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use crate::broker::broker_metrics_manager;
use crate::broker::broker_outer_api::{register_all, unregister_all};
use crate::broker::broker_stats::BrokerStats;
use crate::broker::client::{ConsumerManager, ProducerManager, RebalanceLockManager};
use crate::broker::consumer_filter_manager::FilterCache;
use crate::broker::consumer_offset_manager::ConsumerOffsetManager;
use crate::broker::controller::BrokerController;
use crate::broker::dispatch::BrokerRequestHandler;
use crate::broker::ha::ha_service::{self, HaService};
use crate::broker::longpoll::pull_request_hold_service::{
    ArrivalNotifier, PullRequestHoldService, WakeItem, WakeService,
};
use crate::broker::schedule_message_service as schedule;
use crate::broker::slave_sync_state::SlaveSyncState;
use crate::broker::subscription_group_manager::SubscriptionGroupManager;
use crate::broker::topic_config_manager::{TopicConfigManager, TopicDefaults};
use crate::broker::transaction::transactional_message_check_service as transaction_check;
use crate::common::now_ms;
pub use crate::common::StopFlag;
use crate::config::{Config, FlushPolicy, StoreIoMode};
use crate::metrics::BrokerMetrics;
use crate::namesrv::{start_namesrv, NamesrvHandle, NamesrvStartError};
use crate::net::remoting_client::BlockingClient;
use crate::net::{self as server, ServerConfig, ServerHandle, ShutdownSignal};
use crate::remoting::body::DataVersion;
use crate::store::fs::{FileSystem, RealFs};
use crate::store::io::{IoConfig, IoEngine, IoMode};
use crate::store::{self, MessageStore, StoreConfig};

/// Why the broker or name server could not start. Each names what to change.
#[derive(Debug, thiserror::Error)]
pub enum StartupError {
    #[error("store: {0}")]
    Store(#[from] store::StoreError),
    #[error("io_uring read engine: {0}")]
    Io(#[from] store::io::IoSetupError),
    #[error("server: {0}")]
    Server(#[from] server::ServerError),
    /// Another process already listens on one of the broker's addresses; `setting` names the
    /// settings that chose it.
    #[error("{source}; {setting}")]
    ListenAddrInUse {
        setting: String,
        #[source]
        source: server::ServerError,
    },
    #[error("{0}")]
    Acl(#[from] crate::acl::AclConfigError),
    /// The metrics listener could not bind.
    #[error(
        "metrics listener: cannot listen on RINGMQ_METRICS_LISTEN={addr}: {source}; set it to a \
         free ip:port, or to an empty value to turn metrics and the dashboard off"
    )]
    MetricsListen {
        addr: String,
        #[source]
        source: std::io::Error,
    },
    #[error("embedded name server: {0}")]
    Namesrv(#[from] NamesrvStartError),
    #[error("broker metadata: {0}")]
    Persist(#[from] crate::broker::config_manager::PersistError),
    #[error("configuration: {0}")]
    Config(crate::config::ConfigError),
    #[error("configuration: {var}={text:?} is not an IP address")]
    IpAddress { var: &'static str, text: String },
    #[error("{0}")]
    HaListen(#[from] crate::broker::ha::ha_service::HaBindError),
    #[error("cannot start thread {name}: {source}")]
    Thread {
        name: String,
        #[source]
        source: std::io::Error,
    },
}

fn spawn(
    name: impl Into<String>,
    f: impl FnOnce() + Send + 'static,
) -> Result<JoinHandle<()>, StartupError> {
    let name = name.into();
    std::thread::Builder::new()
        .name(name.clone())
        .spawn(f)
        .map_err(|source| StartupError::Thread { name, source })
}

fn ip(text: &str, var: &'static str) -> Result<IpAddr, StartupError> {
    text.parse().map_err(|_| StartupError::IpAddress {
        var,
        text: text.to_string(),
    })
}

// ---------------------------------------------------------------------------------------------
// Broker

/// A running broker.
pub struct BrokerHandle {
    pub ctrl: Arc<BrokerController>,
    pub server: ServerHandle,
    pub namesrv: Option<NamesrvHandle>,
    threads: Vec<JoinHandle<()>>,
    shutdown: ShutdownSignal,
    stop: StopFlag,
}

pub fn store_config(config: &Config) -> Result<StoreConfig, StartupError> {
    let s = &config.store;
    let store_host = SocketAddr::new(
        ip(&config.broker.advertised_ip, "RINGMQ_BROKER_ADVERTISED_IP")?,
        config.broker.listen_port,
    );
    let mut sc = StoreConfig::with_root(&s.root_dir);
    sc.commit_log_file_size_bytes = s.commit_log_file_size_bytes;
    sc.consume_queue_file_units = s.consume_queue_file_units;
    sc.flush_policy = match s.flush_policy {
        FlushPolicy::Async => store::FlushPolicy::Async,
        FlushPolicy::Sync => store::FlushPolicy::Sync,
    };
    sc.flush_interval_ms = s.flush_interval_ms;
    sc.flush_consume_queue_interval_ms = s.flush_consume_queue_interval_ms;
    sc.flush_consume_queue_least_pages = s.flush_consume_queue_least_pages;
    sc.flush_consume_queue_thorough_interval_ms = s.flush_consume_queue_thorough_interval_ms;
    sc.sync_flush_timeout_ms = s.sync_flush_timeout_ms;
    sc.max_message_size_bytes = s.max_message_size_bytes as usize;
    sc.file_reserved_time_hours = s.file_reserved_time_hours;
    sc.delete_check_interval_ms = s.delete_check_interval_ms;
    sc.access_message_in_memory_max_ratio_percent = s.access_message_in_memory_max_ratio_percent;
    sc.max_transfer_bytes_on_message_in_memory = s.max_transfer_bytes_on_message_in_memory as usize;
    sc.max_transfer_count_on_message_in_memory = s.max_transfer_count_on_message_in_memory as usize;
    sc.max_transfer_bytes_on_message_in_disk = s.max_transfer_bytes_on_message_in_disk as usize;
    sc.max_transfer_count_on_message_in_disk = s.max_transfer_count_on_message_in_disk as usize;
    if s.total_physical_memory_bytes > 0 {
        sc.total_physical_memory_bytes = s.total_physical_memory_bytes;
    }
    sc.message_index_enable = s.message_index_enable;
    // Validation bounded both so the index file fits Java's int.
    sc.max_hash_slot_num = u32::try_from(s.max_hash_slot_num).unwrap_or(u32::MAX);
    sc.max_index_num = u32::try_from(s.max_index_num).unwrap_or(u32::MAX);
    sc.store_host = store_host;
    sc.broker_role_slave = config.broker.role == crate::config::BrokerRole::Slave;
    sc.offset_check_in_slave = config.broker.offset_check_in_slave;
    sc.corruption_policy = s.corruption_policy;
    sc.disk_max_used_space_ratio_percent = s.disk_max_used_space_ratio_percent;
    sc.disk_space_clean_forcibly_ratio_percent = s.disk_space_clean_forcibly_ratio_percent;
    sc.disk_space_warning_level_ratio_percent = s.disk_space_warning_level_ratio_percent;
    sc.clean_file_forcibly_enabled = s.clean_file_forcibly_enabled;
    sc.zero_ahead_bytes = s.zero_ahead_bytes;
    sc.read_mapped = s.read_mapped;
    sc.recent_records_bytes = s.recent_records_bytes;
    Ok(sc)
}

pub fn io_engine(config: &Config) -> Result<IoEngine, StartupError> {
    let s = &config.store;
    let io = IoConfig {
        mode: match s.io_mode {
            StoreIoMode::Uring => IoMode::Uring,
            StoreIoMode::Pread => IoMode::Pread,
        },
        allow_pread_fallback: s.io_pread_fallback_allowed,
        ring_entries: s.io_ring_entries as u32,
        fixed_buffer_count: s.io_fixed_buffer_count as usize,
        fixed_buffer_size_bytes: s.io_fixed_buffer_size_bytes as usize,
        thread_rings_max: s.io_thread_rings_max as usize,
    };
    Ok(IoEngine::new(io)?)
}

/// A broker controller over a configuration, with its store open (recovered) and the arrival
/// listener installed, but no thread started and no socket bound.
pub struct ControllerParts {
    pub ctrl: Arc<BrokerController>,
    /// Pulls woken by arrivals, for the wake threads ([`start_pull_wake`]).
    pub wake_rx: crossbeam::channel::Receiver<WakeItem>,
    /// Topic-table change notifications, for the name server registration thread.
    pub topic_changes_rx: crossbeam::channel::Receiver<()>,
}

/// Builds the controller [`start_broker`] runs: opens the store, loads topics, groups and
/// offsets, and connects store arrivals to the hold table. Starts no thread and binds no
/// socket, so benches and tests can drive the processors and long polling directly (start the
/// wake threads with [`start_pull_wake`]).
pub fn build_controller(config: Config) -> Result<ControllerParts, StartupError> {
    build_controller_on(config, RealFs::shared())
}

/// [`build_controller`] with the store on the given file system (tests pass one with
/// failpoints or a simulated disk usage).
pub fn build_controller_on(
    config: Config,
    fs: Arc<dyn FileSystem>,
) -> Result<ControllerParts, StartupError> {
    let delay_levels_ms = config.delay_levels_ms().map_err(StartupError::Config)?;
    let io = Arc::new(io_engine(&config)?);
    tracing::info!(mode = ?io.mode(), "store read engine ready");
    let store_cfg = store_config(&config)?;
    let store = MessageStore::open_on(store_cfg.clone(), io, Arc::clone(&fs))?;
    let root = config.store.root_dir.clone();
    let topics = TopicConfigManager::new(
        &root,
        &TopicDefaults {
            cluster_name: config.broker.cluster_name.clone(),
            broker_name: config.broker.name.clone(),
            auto_create_topic_enabled: config.broker.auto_create_topic_enabled,
            default_topic_queue_nums: config.broker.default_topic_queue_nums as i32,
        },
    );
    let groups =
        SubscriptionGroupManager::new(&root, config.broker.auto_create_subscription_group_enabled);
    let offsets = ConsumerOffsetManager::new(&root);
    // The metadata files go through the store's file system too.
    topics.fs.set(Arc::clone(&fs));
    groups.fs.set(Arc::clone(&fs));
    offsets.fs.set(fs);
    for (what, backup_used) in [
        ("topics", topics.load()?),
        ("groups", groups.load()?),
        ("offsets", offsets.load()?),
    ] {
        if let Some(w) = backup_used {
            tracing::error!(what, "{w}");
            eprintln!("ringmq: WARNING: {w}");
        }
    }
    let (pull_hold, wake_rx) = PullRequestHoldService::new(
        store.clone(),
        config.longpoll.parked_pulls_max as usize,
        config.longpoll.parked_pulls_max_per_connection as usize,
        config.longpoll.wake_inline_parked_max as usize,
    );
    let (topic_changes_tx, topic_changes_rx) = crossbeam::channel::bounded(1);
    let broker_addr = format!(
        "{}:{}",
        config.broker.advertised_ip, config.broker.listen_port
    );
    let acl = start_acl(&config)?;
    let ctrl = Arc::new(BrokerController {
        acl,
        store_host: store_cfg.store_host,
        pull_hold,
        permission: AtomicI32::new(config.broker.permission as i32),
        store,
        topics,
        groups,
        offsets,
        consumers: ConsumerManager::new(),
        rebalance_locks: RebalanceLockManager::new(config.broker.rebalance_lock_max_live_time_ms),
        producers: ProducerManager::new(),
        filters: FilterCache::new(),
        broker_addr,
        topic_changes_tx,
        delay_levels_ms,
        config_version: Mutex::new(DataVersion {
            timestamp: now_ms(),
            ..DataVersion::default()
        }),
        boot_timestamp_ms: now_ms(),
        stats: BrokerStats::new(now_ms()),
        slave_sync: SlaveSyncState::new(),
        schedule_offsets: std::sync::RwLock::new(std::collections::BTreeMap::new()),
        ha: HaService::new(&config),
        metrics: (!config.metrics.listen.trim().is_empty()).then(|| Arc::new(BrokerMetrics::new())),
        config,
    });
    let notifier = ArrivalNotifier::new(Arc::downgrade(&ctrl));
    ctrl.store.set_arrival_listener(Arc::new(notifier));
    Ok(ControllerParts {
        ctrl,
        wake_rx,
        topic_changes_rx,
    })
}

/// With `RINGMQ_ACL_ENABLED`, loads the `plain_acl.yml` (refusing the start if it does not
/// load) and starts the thread that reloads it when it changes.
pub fn start_acl(config: &Config) -> Result<Option<Arc<PlainAccessValidator>>, StartupError> {
    if !config.acl.enabled {
        return Ok(None);
    }
    let validator = PlainAccessValidator::load(&config.acl_file_path())?;
    // The thread ends by itself once the validator is dropped.
    validator.watch().map_err(|source| StartupError::Thread {
        name: "ringmq-acl-watch".into(),
        source,
    })?;
    Ok(Some(validator))
}

/// The number of pull-wake threads `RINGMQ_LONGPOLL_WAKE_THREADS` asks for (0 = one per core).
pub fn wake_threads(config: &Config) -> usize {
    match config.longpoll.wake_threads {
        0 => std::thread::available_parallelism()
            .map_or(1, |n| n.get())
            .min(crate::config::WAKE_THREADS_MAX as usize),
        n => n as usize,
    }
}

/// Starts the pull-wake threads (`ringmq-wake-<i>`): they share the wake channel and re-execute
/// woken pulls; the first also runs the hold table's periodic check (every `check_interval_ms`,
/// or `short_polling_time_ms` with long polling off).
pub fn start_pull_wake(
    ctrl: &Arc<BrokerController>,
    wake_rx: crossbeam::channel::Receiver<WakeItem>,
    stop: &StopFlag,
) -> Result<Vec<JoinHandle<()>>, StartupError> {
    let check_ms = if ctrl.config.longpoll.enabled {
        ctrl.config.longpoll.check_interval_ms
    } else {
        ctrl.config.longpoll.short_polling_time_ms
    };
    let threads = wake_threads(&ctrl.config);
    (0..threads)
        .map(|i| {
            let service = WakeService {
                host: Arc::downgrade(ctrl),
                wake_rx: wake_rx.clone(),
                check_interval_ms: (i == 0).then_some(check_ms),
                share_fan_out: threads > 1,
                stop: stop.clone(),
            };
            spawn(format!("ringmq-wake-{i}"), move || service.run())
        })
        .collect()
}

/// The embedded name server's configuration: the broker's, with the KV config kept in the
/// broker's store unless RINGMQ_NAMESRV_KV_CONFIG_PATH says otherwise.
fn embedded_namesrv_config(config: &Config) -> Config {
    let mut namesrv_config = config.clone();
    if namesrv_config.namesrv.kv_config_path.is_empty() {
        namesrv_config.namesrv.kv_config_path = config
            .store
            .root_dir
            .join("namesrv")
            .join("kvConfig.json")
            .display()
            .to_string();
    }
    namesrv_config
}

/// Starts the broker (and, without RINGMQ_NAMESRV_ADDR, an embedded name server first).
pub fn start_broker(config: Config) -> Result<BrokerHandle, StartupError> {
    // Checked before anything starts; `build_controller` computes the levels again.
    config.delay_levels_ms().map_err(StartupError::Config)?;
    // Before any file opens: no thread serving requests waits for the fd table to grow.
    match crate::net::presize_fd_table(crate::net::FD_TABLE_PRESIZE_FDS) {
        Ok(fds) => tracing::debug!(fds, "fd table sized"),
        // Only a latency saving: the table still grows on demand.
        Err(e) => tracing::warn!(error = %e, "could not size the fd table up front"),
    }
    let namesrv = if config.namesrv.addr.trim().is_empty() {
        Some(start_namesrv(&embedded_namesrv_config(&config))?)
    } else {
        None
    };
    let namesrv_addrs = namesrv_addrs(&config, namesrv.as_ref());
    // Bound before the store opens: a broker refused for its port leaves its data dir alone.
    // The port asked for, before binding fills in the one a request for any port (0) got: the
    // HA port follows the request, so any port asks for any HA port, not the bound one + 1.
    let requested_listen_port = config.broker.listen_port;
    let (config, listeners) = bind_broker_listeners(config)?;
    let (config, ha_listener) = bind_ha_listener(config, requested_listen_port)?;
    let metrics_listener = bind_metrics_listener(&config)?;
    let ControllerParts {
        ctrl,
        wake_rx,
        topic_changes_rx,
    } = build_controller(config)?;
    // Before any thread starts: an unusable delayOffset.json refuses the start (Java's
    // `ScheduleMessageService.load` failing fails the broker's initialize).
    let delay_offsets = schedule::load_offsets(&ctrl.config.store.root_dir)?;
    let shutdown = ShutdownSignal::new();
    let stop = StopFlag::new();
    let mut threads = start_pull_wake(&ctrl, wake_rx, &stop)?;
    *ctrl
        .schedule_offsets
        .write()
        .unwrap_or_else(|p| p.into_inner()) = delay_offsets.clone();
    threads.extend([
        start_offset_flusher(&ctrl, &stop)?,
        start_config_persister(&ctrl, &stop)?,
        start_housekeeping(&ctrl, &stop)?,
        start_schedule(&ctrl, &stop, delay_offsets)?,
        start_stats_sampling(&ctrl, &stop)?,
        ctrl.ha
            .start(ctrl.store.clone(), &ctrl.config, ha_listener, &stop)
            .map_err(|source| StartupError::Thread {
                name: "ringmq-ha".into(),
                source,
            })?,
        start_transaction_check(&ctrl, &stop)?,
    ]);
    let handler = Arc::new(BrokerRequestHandler { ctrl: ctrl.clone() });
    let server = listeners.serve(handler, shutdown.clone())?;
    threads.extend(start_metrics(&ctrl, metrics_listener, &server, &stop)?);
    threads.push(start_registration(
        &ctrl,
        namesrv_addrs,
        topic_changes_rx,
        &stop,
    )?);
    if ctrl.is_slave() {
        // After the first registration, which told the slave its master.
        threads.push(start_slave_sync(&ctrl, &stop)?);
    }
    let addrs: Vec<String> = server
        .local_addrs()
        .iter()
        .map(ToString::to_string)
        .collect();
    tracing::info!(addrs = ?addrs, "ringmq broker listening");
    eprintln!("ringmq broker listening on {}", addrs.join(", "));
    Ok(BrokerHandle {
        ctrl,
        server,
        namesrv,
        threads,
        shutdown,
        stop,
    })
}

/// The name servers the broker registers with: the embedded one, or RINGMQ_NAMESRV_ADDR's.
fn namesrv_addrs(config: &Config, embedded: Option<&NamesrvHandle>) -> Vec<String> {
    match embedded {
        Some(n) => vec![n.server.local_addrs()[0].to_string()],
        None => config
            .namesrv
            .addr
            .split(';')
            .map(str::trim)
            .filter(|a| !a.is_empty())
            .map(String::from)
            .collect(),
    }
}

/// Binds a master's HA port (a slave has none); the port bound goes into the configuration, so
/// the registration advertises the real one.
fn bind_ha_listener(
    mut config: Config,
    requested_listen_port: u16,
) -> Result<(Config, Option<std::net::TcpListener>), StartupError> {
    let listener = match ha_service::bind(&config, requested_listen_port)? {
        Some((listener, port)) => {
            config.ha.listen_port = port;
            Some(listener)
        }
        None => None,
    };
    Ok((config, listener))
}

/// The `/metrics` and dashboard exporter on its bound listener, when metrics are on.
fn start_metrics(
    ctrl: &Arc<BrokerController>,
    listener: Option<std::net::TcpListener>,
    server: &ServerHandle,
    stop: &StopFlag,
) -> Result<Option<JoinHandle<()>>, StartupError> {
    let (Some(listener), Some(metrics)) = (listener, ctrl.metrics.clone()) else {
        return Ok(None);
    };
    let addr = listener
        .local_addr()
        .map_err(|source| StartupError::MetricsListen {
            addr: ctrl.config.metrics.listen.clone(),
            source,
        })?;
    let connections = server.live_connections();
    let thread = broker_metrics_manager::start_exporter(ctrl, metrics, listener, connections, stop)
        .map_err(|source| StartupError::Thread {
            name: "ringmq-metrics".into(),
            source,
        })?;
    tracing::info!(%addr, "ringmq metrics listening");
    eprintln!("ringmq metrics and dashboard on http://{addr}/");
    Ok(Some(thread))
}

/// Binds the main port and, when enabled, the fast port (listen port - 2, as Java's
/// `BrokerController`). A listen port of 0 becomes the port the kernel chose, so the broker
/// registers the address it really listens on.
fn bind_broker_listeners(
    mut config: Config,
) -> Result<(Config, server::BoundServer), StartupError> {
    let main_addr = SocketAddr::new(
        ip(&config.broker.bind_ip, "RINGMQ_BROKER_BIND_IP")?,
        config.broker.listen_port,
    );
    let mut sc = ServerConfig::from_config(&config, main_addr);
    if config.broker.fast_port_enabled {
        sc = sc.with_fast_listen_port()?;
    }
    let bound = server::bind(sc).map_err(|e| listen_error(e, &config))?;
    config.broker.listen_port = bound.local_addrs()[0].port();
    Ok((config, bound))
}

/// Binds `RINGMQ_METRICS_LISTEN`, or nothing when it is empty.
fn bind_metrics_listener(config: &Config) -> Result<Option<std::net::TcpListener>, StartupError> {
    let listen = config.metrics.listen.trim();
    if listen.is_empty() {
        return Ok(None);
    }
    let error = |source| StartupError::MetricsListen {
        addr: listen.to_string(),
        source,
    };
    let addr: SocketAddr = listen.parse().map_err(|_| {
        error(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "not an ip:port",
        ))
    })?;
    crate::metrics::exporter::bind(addr)
        .map(Some)
        .map_err(error)
}

/// Names the settings behind an address in use: the main port, or the fast port derived from it.
fn listen_error(e: server::ServerError, config: &Config) -> StartupError {
    let Some(addr) = e.addr_in_use() else {
        return StartupError::Server(e);
    };
    let b = &config.broker;
    let setting = if addr.port() == b.listen_port {
        format!(
            "it comes from RINGMQ_BROKER_BIND_IP={} and RINGMQ_BROKER_LISTEN_PORT={}: stop the \
             process that holds it or set RINGMQ_BROKER_LISTEN_PORT to a free port",
            b.bind_ip, b.listen_port
        )
    } else {
        format!(
            "it is the fast port, derived from the listen port (RINGMQ_BROKER_LISTEN_PORT={} \
             minus 2) on RINGMQ_BROKER_BIND_IP={}: stop the process that holds it, choose a \
             RINGMQ_BROKER_LISTEN_PORT whose port - 2 is free too, or set \
             RINGMQ_BROKER_FAST_PORT_ENABLED=false",
            b.listen_port, b.bind_ip
        )
    };
    StartupError::ListenAddrInUse { setting, source: e }
}

impl BrokerHandle {
    /// Graceful stop: close listeners, flush offsets and metadata, shut the store down cleanly
    /// (checkpoint + removal of the abort marker), unregister from the name servers.
    pub fn stop(mut self) -> Result<(), StartupError> {
        self.stop.raise();
        // Wake the registration thread so it unregisters and exits now, and the metadata
        // persister so it exits (the tables are written below).
        self.ctrl.notify_topics_changed();
        self.ctrl.topics.gate.dirty.wake();
        self.shutdown.trigger();
        self.server.shutdown();
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
        if let Err(e) = self.server.join() {
            tracing::warn!(error = %e, "broker server stopped with an error");
        }
        self.ctrl.offsets.persist()?;
        self.ctrl.topics.persist()?;
        self.ctrl.groups.persist()?;
        self.ctrl.store.shutdown()?;
        if let Some(n) = self.namesrv.take() {
            n.stop();
        }
        Ok(())
    }
}

fn start_offset_flusher(
    ctrl: &Arc<BrokerController>,
    stop: &StopFlag,
) -> Result<JoinHandle<()>, StartupError> {
    let ctrl = ctrl.clone();
    let stop = stop.clone();
    let interval = Duration::from_millis(ctrl.config.broker.flush_consumer_offset_interval_ms);
    spawn("ringmq-offset-flush", move || {
        while !stop.wait_timeout(interval) {
            if let Err(e) = ctrl.offsets.persist() {
                tracing::error!(error = %e, "flushing consumer offsets failed; will retry next period");
            }
        }
    })
}

/// How long the metadata persister waits before it tries a failed write again.
const CONFIG_PERSIST_RETRY_INTERVAL_MS: u64 = 1_000;

/// The metadata persister (`ringmq-config-persist`): writes `topics.json` and
/// `subscriptionGroup.json` when a request created an entry (see
/// [`crate::broker::config_manager::DirtyFlag`]), off the worker threads, one write per table
/// for any number of changes that came during the previous one. A failed write is logged and
/// tried again every [`CONFIG_PERSIST_RETRY_INTERVAL_MS`]; the stop writes both tables.
/// Without it (a controller driven by tests) the tables are written when a request waits for
/// its change ([`crate::broker::config_manager::PersistGate::wait_written`]) or by `persist`.
pub fn start_config_persister(
    ctrl: &Arc<BrokerController>,
    stop: &StopFlag,
) -> Result<JoinHandle<()>, StartupError> {
    let (persist_tx, persist_rx) = crossbeam::channel::bounded(1);
    ctrl.topics.gate.dirty.connect(persist_tx.clone());
    ctrl.groups.gate.dirty.connect(persist_tx);
    // Changes made before the connection.
    ctrl.topics.gate.dirty.mark();
    let ctrl = ctrl.clone();
    let stop = stop.clone();
    let retry = Duration::from_millis(CONFIG_PERSIST_RETRY_INTERVAL_MS);
    spawn("ringmq-config-persist", move || loop {
        match persist_rx.recv_timeout(retry) {
            Ok(()) | Err(crossbeam::channel::RecvTimeoutError::Timeout) => {}
            Err(crossbeam::channel::RecvTimeoutError::Disconnected) => return,
        }
        if stop.is_raised() {
            return;
        }
        if let Err(e) = ctrl.topics.persist_if_dirty() {
            tracing::error!(error = %e, "writing topics.json failed; will retry");
        }
        if let Err(e) = ctrl.groups.persist_if_dirty() {
            tracing::error!(error = %e, "writing subscriptionGroup.json failed; will retry");
        }
    })
}

/// Delayed delivery ([`schedule::run_from`]) from the loaded progress.
fn start_schedule(
    ctrl: &Arc<BrokerController>,
    stop: &StopFlag,
    offsets: std::collections::BTreeMap<i32, i64>,
) -> Result<JoinHandle<()>, StartupError> {
    let ctrl = ctrl.clone();
    let stop = stop.clone();
    spawn("ringmq-schedule", move || {
        schedule::run_from(&ctrl, &stop, offsets)
    })
}

/// Samples the store's counters once a second (Java `StoreStatsService.run`) and takes the
/// midnight snapshot of the message totals (Java's daily `BrokerStats.record`).
fn start_stats_sampling(
    ctrl: &Arc<BrokerController>,
    stop: &StopFlag,
) -> Result<JoinHandle<()>, StartupError> {
    let ctrl = ctrl.clone();
    let stop = stop.clone();
    let interval = Duration::from_millis(store::store_stats_service::SAMPLING_INTERVAL_MS);
    spawn("ringmq-store-stats", move || loop {
        let now = now_ms();
        ctrl.store.stats().sample(now);
        ctrl.stats.record_if_new_day(now);
        if stop.wait_timeout(interval) {
            return;
        }
    })
}

/// A slave's copy of its master's metadata every RINGMQ_BROKER_SLAVE_SYNC_INTERVAL_MS (Java
/// `BrokerController`'s `slaveSynchronize.syncAll` task).
fn start_slave_sync(
    ctrl: &Arc<BrokerController>,
    stop: &StopFlag,
) -> Result<JoinHandle<()>, StartupError> {
    let ctrl = ctrl.clone();
    let stop = stop.clone();
    let interval = Duration::from_millis(ctrl.config.broker.slave_sync_interval_ms);
    spawn("ringmq-slave-sync", move || {
        crate::broker::slave_synchronize::run(&ctrl, &stop, interval)
    })
}

/// Expires silent client channels (Java `ClientHousekeepingService`, every 10 s).
fn start_transaction_check(
    ctrl: &Arc<BrokerController>,
    stop: &StopFlag,
) -> Result<JoinHandle<()>, StartupError> {
    let ctrl = ctrl.clone();
    let stop = stop.clone();
    spawn("ringmq-transaction-check", move || {
        transaction_check::run(&ctrl, &stop)
    })
}

fn start_housekeeping(
    ctrl: &Arc<BrokerController>,
    stop: &StopFlag,
) -> Result<JoinHandle<()>, StartupError> {
    let ctrl = ctrl.clone();
    let stop = stop.clone();
    spawn("ringmq-client-housekeeping", move || {
        let timeout_ms = ctrl.config.broker.channel_expired_timeout_ms as i64;
        while !stop.wait_timeout(Duration::from_secs(10)) {
            let now = now_ms();
            let expired = ctrl.consumers.scan_not_active_channels(now, timeout_ms);
            let mut groups: Vec<String> = expired.into_iter().map(|(g, _)| g).collect();
            groups.dedup();
            for g in groups {
                crate::broker::processor::client_manage::notify_consumer_ids_changed(&ctrl, &g);
            }
            ctrl.producers.scan_not_active_channels(now, timeout_ms);
        }
    })
}

/// Registers with every name server every `register_name_server_period_ms` and whenever the
/// topic table changes (Java `registerBrokerAll`).
fn start_registration(
    ctrl: &Arc<BrokerController>,
    namesrv_addrs: Vec<String>,
    topic_changes_rx: crossbeam::channel::Receiver<()>,
    stop: &StopFlag,
) -> Result<JoinHandle<()>, StartupError> {
    let ctrl = ctrl.clone();
    let stop = stop.clone();
    let period = Duration::from_millis(ctrl.config.broker.register_name_server_period_ms);
    // Register once before returning so clients see the routes as soon as the broker is up.
    // The connections stay open: a name server drops a broker whose connection closes.
    let mut connections: HashMap<String, BlockingClient> = HashMap::new();
    register_all(&ctrl, &namesrv_addrs, &mut connections);
    spawn("ringmq-namesrv-register", move || loop {
        match topic_changes_rx.recv_timeout(period) {
            Ok(()) | Err(crossbeam::channel::RecvTimeoutError::Timeout) => {}
            Err(crossbeam::channel::RecvTimeoutError::Disconnected) => return,
        }
        if stop.is_raised() {
            unregister_all(&ctrl, &namesrv_addrs, &mut connections);
            return;
        }
        register_all(&ctrl, &namesrv_addrs, &mut connections);
    })
}
