//! Worker threads, startup and shutdown.

use super::config::ServerConfig;
use super::error::ServerError;
use super::handler::RequestHandler;
use super::listener::{accept_loop, bind_socket, listen, receive_handoffs, stop_listening};
use super::shutdown::{ShutdownSignal, StopSignals};
use super::worker::{Handoff, LiveConnections, Shared, Worker};
use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::{mpsc as std_mpsc, Arc};
use std::thread::JoinHandle;

/// The running server. Dropping it shuts the server down and waits for its threads.
#[derive(Debug)]
pub struct ServerHandle {
    local_addrs: Vec<SocketAddr>,
    /// This server's own stop signal: stopping one server must not trigger the caller's signal,
    /// which other components may watch.
    stop: ShutdownSignal,
    threads: Vec<JoinHandle<()>>,
    connections: LiveConnections,
}

impl ServerHandle {
    /// The open connections of this server, over all its listeners and workers.
    pub fn live_connections(&self) -> LiveConnections {
        self.connections.clone()
    }

    /// The bound addresses, in config order (`listen_addr` first), with real ports when port 0
    /// was asked for.
    pub fn local_addrs(&self) -> &[SocketAddr] {
        &self.local_addrs
    }

    /// Starts shutting down: listeners stop accepting, connections stop reading and finish their
    /// running requests within `shutdown_grace_ms`. Returns at once; see [`ServerHandle::join`].
    pub fn shutdown(&self) {
        self.stop.trigger();
    }

    /// Waits for every worker thread to end (after a shutdown from this handle or the signal).
    pub fn join(mut self) -> Result<(), ServerError> {
        join_all(std::mem::take(&mut self.threads))
    }
}

impl Drop for ServerHandle {
    fn drop(&mut self) {
        if self.threads.is_empty() {
            return;
        }
        self.stop.trigger();
        if let Err(e) = join_all(std::mem::take(&mut self.threads)) {
            tracing::error!(error = %e, "network worker failed during shutdown");
        }
    }
}

/// Listening sockets bound by [`bind`] and not served yet. A caller binds first so that an
/// address in use fails its start before it has touched anything else (a broker's data dir);
/// dropping it closes the sockets.
#[derive(Debug)]
pub struct BoundServer {
    config: ServerConfig,
    local_addrs: Vec<SocketAddr>,
    listeners: Vec<WorkerListeners>,
}

impl BoundServer {
    /// The bound addresses, in config order, with real ports when port 0 was asked for.
    pub fn local_addrs(&self) -> &[SocketAddr] {
        &self.local_addrs
    }

    /// Starts the workers on these sockets; see [`serve`].
    pub fn serve<H: RequestHandler>(
        self,
        handler: Arc<H>,
        shutdown: ShutdownSignal,
    ) -> Result<ServerHandle, ServerError> {
        start_workers(self, handler, shutdown)
    }
}

/// Checks `config` and binds every listen address, one socket each (to be shared by the
/// workers), without listening yet: until [`BoundServer::serve`], connections are refused. An
/// address another socket already listens on fails with [`ServerError::AddrInUse`].
pub fn bind(config: ServerConfig) -> Result<BoundServer, ServerError> {
    config.validate()?;
    let (local_addrs, listeners) = bind_all(&config)?;
    Ok(BoundServer {
        config,
        local_addrs,
        listeners,
    })
}

/// Binds every listen address (one socket each, shared by the workers), starts the workers, and
/// returns once all of them accept connections. An address another socket already listens on
/// fails with [`ServerError::AddrInUse`] before any thread starts. Stops when `shutdown` is
/// triggered (or through the handle).
pub fn serve<H: RequestHandler>(
    config: ServerConfig,
    handler: Arc<H>,
    shutdown: ShutdownSignal,
) -> Result<ServerHandle, ServerError> {
    bind(config)?.serve(handler, shutdown)
}

fn start_workers<H: RequestHandler>(
    bound: BoundServer,
    handler: Arc<H>,
    shutdown: ShutdownSignal,
) -> Result<ServerHandle, ServerError> {
    let BoundServer {
        config,
        local_addrs,
        mut listeners,
    } = bound;
    // Every worker holds a duplicate of the same sockets: listening on the first worker's
    // makes all of them listen.
    for (listener_index, socket) in &listeners[0] {
        listen(socket, local_addrs[*listener_index], config.listen_backlog)?;
    }
    let worker_threads = config.worker_threads;
    let stop = ShutdownSignal::new();
    let signals = StopSignals {
        external: shutdown,
        own: stop.clone(),
    };
    let (shared, handoff_receivers) = Shared::new(config, handler, signals);
    let shared = Arc::new(shared);
    let (ready_tx, ready_rx) = std_mpsc::channel();
    let mut handle = ServerHandle {
        local_addrs,
        stop,
        threads: Vec::new(),
        connections: shared.live_connections(),
    };
    let workers = listeners.drain(..).zip(handoff_receivers).enumerate();
    for (worker_index, (worker_listeners, handoffs)) in workers {
        let shared = shared.clone();
        let ready = ready_tx.clone();
        let spawned = std::thread::Builder::new()
            .name(format!("ringmq-net-{worker_index}"))
            .spawn(move || run_worker(worker_index, worker_listeners, handoffs, shared, ready));
        match spawned {
            Ok(thread) => handle.threads.push(thread),
            // Dropping `handle` stops and joins the workers already started.
            Err(source) => {
                return Err(ServerError::SpawnThread {
                    worker_index,
                    source,
                })
            }
        }
    }
    drop(ready_tx);
    for _ in 0..worker_threads {
        match ready_rx.recv() {
            Ok(Ok(())) => {}
            Ok(Err(e)) => return Err(e),
            // Every sender is gone before all reported: a worker panicked during startup.
            Err(_) => {
                return Err(ServerError::WorkerDied {
                    worker_index: first_dead(&handle),
                })
            }
        }
    }
    tracing::info!(addrs = ?handle.local_addrs, worker_threads, "network runtime listening");
    Ok(handle)
}

/// One worker's listen sockets: `(listener_index, socket)`, in config order.
type WorkerListeners = Vec<(usize, std::net::TcpListener)>;

/// Binds one socket per address ([`bind_socket`]; it listens once served) and gives every
/// worker its own duplicate of each, so all workers accept from the same queue. A port-0 address gets a real
/// port here, which every worker then shares, since it is one socket.
fn bind_all(config: &ServerConfig) -> Result<(Vec<SocketAddr>, Vec<WorkerListeners>), ServerError> {
    let mut per_worker: Vec<WorkerListeners> =
        (0..config.worker_threads).map(|_| Vec::new()).collect();
    let mut local_addrs = Vec::new();
    for (listener_index, requested) in config.all_listen_addrs().into_iter().enumerate() {
        let listener = bind_socket(requested)?;
        let socket_err = |op| {
            move |source| ServerError::Socket {
                op,
                addr: requested,
                source,
            }
        };
        local_addrs.push(
            listener
                .local_addr()
                .map_err(socket_err("read the address of"))?,
        );
        for worker in per_worker.iter_mut().skip(1) {
            // F_DUPFD_CLOEXEC: each worker's tokio-uring listener owns (and closes) its own fd;
            // the socket closes with the last one.
            let duplicate = listener.try_clone().map_err(socket_err("duplicate"))?;
            worker.push((listener_index, duplicate));
        }
        per_worker[0].push((listener_index, listener));
    }
    Ok((local_addrs, per_worker))
}

fn run_worker<H: RequestHandler>(
    index: usize,
    listeners: WorkerListeners,
    handoffs: tokio::sync::mpsc::UnboundedReceiver<Handoff<H>>,
    shared: Arc<Shared<H>>,
    ready: std_mpsc::Sender<Result<(), ServerError>>,
) {
    let mut builder = tokio_uring::builder();
    builder.entries(shared.config.ring_entries);
    let runtime = match tokio_uring::Runtime::new(&builder) {
        Ok(runtime) => runtime,
        Err(source) => {
            // serve() may have returned already on another worker's error; nothing to tell then.
            let _unheard = ready.send(Err(ServerError::RuntimeStart {
                worker_index: index,
                source,
            }));
            return;
        }
    };
    let worker = Rc::new(Worker::new(index, shared));
    runtime.block_on(async move {
        let receiving = tokio_uring::spawn(receive_handoffs(handoffs, worker.clone()));
        let mut accepting = Vec::with_capacity(listeners.len());
        for (listener_index, listener) in listeners {
            let listener = Rc::new(tokio_uring::net::TcpListener::from_std(listener));
            let task = accept_loop(listener.clone(), listener_index, worker.clone());
            accepting.push((listener, tokio_uring::spawn(task)));
        }
        if ready.send(Ok(())).is_err() {
            // serve() gave up on startup and is shutting down; the signal ends this worker.
            tracing::debug!(worker = index, "server startup abandoned");
        }
        drop(ready);
        worker.shared.shutdown.triggered().await;
        for (listener, _) in &accepting {
            stop_listening(listener);
        }
        for (_, task) in accepting {
            if let Err(e) = task.await {
                tracing::error!(worker = index, error = %e, "accept loop failed");
            }
        }
        if let Err(e) = receiving.await {
            tracing::error!(worker = index, error = %e, "hand-off receiver failed");
        }
        worker.wait_connections_closed().await;
    });
    // Dropping the runtime drops any connection task still running after the grace period.
    tracing::debug!(worker = index, "network worker stopped");
}

fn join_all(threads: Vec<JoinHandle<()>>) -> Result<(), ServerError> {
    let mut result = Ok(());
    for (worker_index, thread) in threads.into_iter().enumerate() {
        if thread.join().is_err() && result.is_ok() {
            result = Err(ServerError::WorkerPanicked { worker_index });
        }
    }
    result
}

fn first_dead(handle: &ServerHandle) -> usize {
    handle
        .threads
        .iter()
        .position(JoinHandle::is_finished)
        .unwrap_or(0)
}
