//! Server settings and their defaults. Every bound of the network runtime lives here.

use super::error::ServerError;
use crate::config::Config;
use crate::remoting::frame::FRAME_SIZE_MAX_BYTES;
use std::net::SocketAddr;

/// Requests of one connection being handled at once. When reached, the reader stops reading that
/// connection (TCP backpressure) until one finishes. Java has no per-connection cap (its executor
/// queues are global, e.g. `sendThreadPoolQueueCapacity` 10000); 256 keeps a pipelining client
/// busy while bounding the memory one connection can pin (256 x frame size in the worst case).
pub const REQUESTS_IN_FLIGHT_MAX_PER_CONNECTION: usize = 256;

/// Frames queued for one connection's writer. Responses (at most one per in-flight request) wait
/// for space; [`super::ConnectionSender::send`] fails with `Full` instead. Sized above
/// [`REQUESTS_IN_FLIGHT_MAX_PER_CONNECTION`] so that held responses and broker-to-client
/// notifications still fit when every in-flight request answers at once.
pub const WRITE_QUEUE_MAX_PER_CONNECTION: usize = 1024;

/// Bytes queued for one connection's writer, counted as each frame's encoded size (a command's
/// header estimate plus body, a file frame's head plus ranges). The frame bound alone let a
/// reader that stalls pin 1024 pull responses, up to several GiB; 64 MiB still holds dozens of
/// full pull batches (32 messages of 4 MiB at most, usually far less), so a consumer that reads
/// at all never meets it, while 1000 stalled connections cannot pin more than 64 GiB together
/// with the socket buffers. One frame larger than the bound is still queued when the queue is
/// empty, so no response is too large to send.
pub const WRITE_QUEUE_MAX_BYTES_PER_CONNECTION: usize = 64 * 1024 * 1024;

/// Requests the broker sent to one client connection and still waits on (GET_CONSUMER_RUNNING_INFO
/// relayed to a consumer). Java has no cap (a semaphore bounds only async calls); each waiter
/// holds an admin request, so a few dozen is plenty and a stuck client cannot pile up more.
pub const PENDING_CALLS_MAX_PER_CONNECTION: usize = 64;

/// A connection on which nothing was read and nothing written for this long is closed, as Java's
/// `NettyRemotingServer` does with Netty's `IdleStateHandler` (all idle) and
/// `serverChannelMaxIdleTimeSeconds` (120 s). RocketMQ clients heartbeat every 30 s, so a live
/// client (even one whose pulls are all parked) is never idle that long. 0 turns it off.
pub const CHANNEL_MAX_IDLE_TIME_MS: u64 = 120_000;

/// A frame whose first bytes arrived but which is not complete this long after is given up and
/// the connection closed: without it a peer can pin a read buffer of up to one frame
/// (`frame_size_max_bytes`, 16 MiB) per connection forever. 30 s is ten times the 3 s default
/// send timeout of Java clients, far beyond any frame a live client sends. 0 turns it off.
pub const FRAME_READ_TIMEOUT_MS: u64 = 30_000;

/// Bytes the writer gathers from the queue into one `write`. Larger pre-encoded frames are written
/// on their own without copying. 256 KiB is a few TCP send windows: enough to batch many small
/// responses into one syscall without delaying the first byte of a burst by much.
pub const WRITE_COALESCE_MAX_BYTES: usize = 256 * 1024;

/// Initial read buffer of a connection. It grows up to one frame (capped by
/// `frame_size_max_bytes`) plus one read, and shrinks back when it empties.
pub const READ_BUFFER_INITIAL_BYTES: usize = 16 * 1024;

/// Live connections over the whole server. Java sets no limit; the limit here keeps a connection
/// flood from exhausting file descriptors the store needs. Connections over it are closed at once.
/// At start it is lowered to the open-file soft limit less [`CONNECTIONS_FD_HEADROOM`]
/// ([`effective_connections_max`]).
pub const CONNECTIONS_MAX: usize = 65_536;

/// File descriptors kept for everything but client connections (CommitLog and ConsumeQueue
/// files, index files, pipes of the zero-copy path, listen sockets, the rings), when the
/// open-file limit caps `connections_max`. Capped at half the soft limit, so that a low limit
/// (1024 is a common default) still leaves room for connections.
pub const CONNECTIONS_FD_HEADROOM: u64 = 1024;

/// Live connections from one IP address. Java has no such cap; it keeps one host (a client
/// that leaks connections, a flood) from taking every slot of `connections_max`. Generous,
/// because tests and co-located clients open many connections over loopback. 0 turns it off.
pub const CONNECTIONS_MAX_PER_IP: usize = 4096;

/// `listen(2)` backlog, as Java `NettyServerConfig.serverSocketBacklog` (1024).
pub const LISTEN_BACKLOG: u32 = 1024;

/// Submission queue entries of each worker's io_uring (tokio-uring's default). A full queue is
/// submitted early, so this bounds batching, not concurrency; it also bounds locked memory.
pub const RING_ENTRIES: u32 = 256;

/// On shutdown, how long connections may take to finish in-flight requests and flush responses.
pub const SHUTDOWN_GRACE_MS: u64 = 3_000;

/// Java `BrokerController`: the "fast"/VIP port is `listenPort - 2` (10909 for 10911).
pub const FAST_LISTEN_PORT_OFFSET: u16 = 2;

/// The network runtime's configuration. Build with [`ServerConfig::new`] and change fields.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerConfig {
    /// Main listen address (Java `listenPort`, default 10911). Port 0 picks a free port
    /// (see [`super::ServerHandle::local_addrs`]).
    pub listen_addr: SocketAddr,
    /// More addresses served by the same handler, e.g. the fast/VIP port
    /// ([`ServerConfig::with_fast_listen_port`]). [`super::ConnectionContext::listener_index`] is
    /// 0 for `listen_addr` and `1 + i` for `additional_listen_addrs[i]`.
    pub additional_listen_addrs: Vec<SocketAddr>,
    /// OS threads, each with its own io_uring, accepting on the shared listen sockets.
    /// Default: the number of available cores.
    pub worker_threads: usize,
    /// Largest frame accepted, counting its 4-byte length prefix (Java `NettyDecoder`).
    pub frame_size_max_bytes: usize,
    pub requests_in_flight_max_per_connection: usize,
    pub write_queue_max_per_connection: usize,
    /// See [`WRITE_QUEUE_MAX_BYTES_PER_CONNECTION`].
    pub write_queue_max_bytes_per_connection: usize,
    pub write_coalesce_max_bytes: usize,
    pub read_buffer_initial_bytes: usize,
    /// See [`CONNECTIONS_MAX`]; the open-file limit may lower it at start.
    pub connections_max: usize,
    /// See [`CONNECTIONS_MAX_PER_IP`]; 0 = no cap.
    pub connections_max_per_ip: usize,
    /// See [`CHANNEL_MAX_IDLE_TIME_MS`]; 0 = never closed for idleness.
    pub channel_max_idle_time_ms: u64,
    /// See [`FRAME_READ_TIMEOUT_MS`]; 0 = no timeout.
    pub frame_read_timeout_ms: u64,
    pub listen_backlog: u32,
    pub ring_entries: u32,
    pub shutdown_grace_ms: u64,
}

impl ServerConfig {
    /// Defaults (RocketMQ's where it has one) listening on `listen_addr` only.
    pub fn new(listen_addr: SocketAddr) -> Self {
        ServerConfig {
            listen_addr,
            additional_listen_addrs: Vec::new(),
            worker_threads: default_worker_threads(),
            frame_size_max_bytes: FRAME_SIZE_MAX_BYTES,
            requests_in_flight_max_per_connection: REQUESTS_IN_FLIGHT_MAX_PER_CONNECTION,
            write_queue_max_per_connection: WRITE_QUEUE_MAX_PER_CONNECTION,
            write_queue_max_bytes_per_connection: WRITE_QUEUE_MAX_BYTES_PER_CONNECTION,
            write_coalesce_max_bytes: WRITE_COALESCE_MAX_BYTES,
            read_buffer_initial_bytes: READ_BUFFER_INITIAL_BYTES,
            connections_max: CONNECTIONS_MAX,
            connections_max_per_ip: CONNECTIONS_MAX_PER_IP,
            channel_max_idle_time_ms: CHANNEL_MAX_IDLE_TIME_MS,
            frame_read_timeout_ms: FRAME_READ_TIMEOUT_MS,
            listen_backlog: LISTEN_BACKLOG,
            ring_entries: RING_ENTRIES,
            shutdown_grace_ms: SHUTDOWN_GRACE_MS,
        }
    }

    /// The runtime settings of `config` (`RINGMQ_SERVER_*`), listening on `listen_addr`.
    pub fn from_config(config: &Config, listen_addr: SocketAddr) -> Self {
        let mut sc = ServerConfig::new(listen_addr);
        if config.server.worker_threads != 0 {
            sc.worker_threads = config.server.worker_threads as usize;
        }
        sc.frame_size_max_bytes = config.server.frame_size_max_bytes as usize;
        sc.requests_in_flight_max_per_connection = config.server.requests_in_flight_max as usize;
        sc.write_queue_max_per_connection = config.server.write_queue_max as usize;
        sc.write_queue_max_bytes_per_connection = config.server.write_queue_max_bytes as usize;
        sc.channel_max_idle_time_ms = config.server.channel_max_idle_time_ms;
        sc.frame_read_timeout_ms = config.server.frame_read_timeout_ms;
        sc.connections_max_per_ip = config.server.connections_max_per_ip as usize;
        sc
    }

    /// Adds the fast/VIP port, `listen_addr.port() - 2` on the same IP, as Java does.
    pub fn with_fast_listen_port(mut self) -> Result<Self, ServerError> {
        let port = self.listen_addr.port();
        let fast_port = match port.checked_sub(FAST_LISTEN_PORT_OFFSET) {
            Some(p) if port != 0 && p != 0 => p,
            _ => {
                return Err(ServerError::InvalidConfig {
                    field: "listen_addr",
                    value: self.listen_addr.to_string(),
                    reason: "the fast port is the listen port - 2, so the port must be > 2",
                })
            }
        };
        let mut fast_addr = self.listen_addr;
        fast_addr.set_port(fast_port);
        self.additional_listen_addrs.push(fast_addr);
        Ok(self)
    }

    /// Checks every bound that would otherwise panic or deadlock at runtime.
    pub fn validate(&self) -> Result<(), ServerError> {
        let positive: [(&'static str, usize); 7] = [
            ("worker_threads", self.worker_threads),
            (
                "requests_in_flight_max_per_connection",
                self.requests_in_flight_max_per_connection,
            ),
            (
                "write_queue_max_per_connection",
                self.write_queue_max_per_connection,
            ),
            (
                "write_queue_max_bytes_per_connection",
                self.write_queue_max_bytes_per_connection,
            ),
            ("write_coalesce_max_bytes", self.write_coalesce_max_bytes),
            ("read_buffer_initial_bytes", self.read_buffer_initial_bytes),
            ("connections_max", self.connections_max),
        ];
        for (field, value) in positive {
            if value == 0 {
                return Err(invalid(field, value, "must be at least 1"));
            }
        }
        // The semaphore that counts in-flight requests takes at most u32::MAX permits at once
        // (shutdown acquires all of them).
        if u32::try_from(self.requests_in_flight_max_per_connection).is_err() {
            return Err(invalid(
                "requests_in_flight_max_per_connection",
                self.requests_in_flight_max_per_connection,
                "must fit in 32 bits",
            ));
        }
        if self.frame_size_max_bytes < FRAME_SIZE_MAX_FLOOR_BYTES {
            return Err(invalid(
                "frame_size_max_bytes",
                self.frame_size_max_bytes,
                "must hold at least a header word and a small header (64 bytes)",
            ));
        }
        if self.listen_backlog == 0 || i32::try_from(self.listen_backlog).is_err() {
            return Err(invalid(
                "listen_backlog",
                self.listen_backlog,
                "must be in 1..=i32::MAX",
            ));
        }
        if !self.ring_entries.is_power_of_two() {
            return Err(invalid(
                "ring_entries",
                self.ring_entries,
                "must be a power of two",
            ));
        }
        Ok(())
    }

    /// `listen_addr` first, then `additional_listen_addrs` in order.
    pub(crate) fn all_listen_addrs(&self) -> Vec<SocketAddr> {
        let mut addrs = Vec::with_capacity(1 + self.additional_listen_addrs.len());
        addrs.push(self.listen_addr);
        addrs.extend_from_slice(&self.additional_listen_addrs);
        addrs
    }
}

/// The `connections_max` a server uses: `configured`, but no more than the open-file soft limit
/// `nofile_soft` less a headroom for the store's files ([`CONNECTIONS_FD_HEADROOM`], at most half
/// the limit), and at least 1. `None` (the limit could not be read, or is unlimited) keeps
/// `configured`.
pub(crate) fn effective_connections_max(configured: usize, nofile_soft: Option<u64>) -> usize {
    let Some(soft) = nofile_soft else {
        return configured;
    };
    let headroom = CONNECTIONS_FD_HEADROOM.min(soft / 2);
    let room = usize::try_from(soft - headroom).unwrap_or(usize::MAX);
    configured.min(room).max(1)
}

/// The soft `RLIMIT_NOFILE`, or `None` when unlimited or unreadable.
pub(crate) fn nofile_soft_limit() -> Option<u64> {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes into the struct we pass and nothing else.
    let rc = unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) };
    (rc == 0 && limit.rlim_cur != libc::RLIM_INFINITY).then_some(limit.rlim_cur)
}

/// File descriptors the process's fd table is sized for at startup ([`presize_fd_table`]): a
/// broker with 2,048 queues holds a ConsumeQueue file open per queue, beside its CommitLog,
/// index and connections.
pub const FD_TABLE_PRESIZE_FDS: u64 = 8192;

/// Grows the process's fd table to hold `fds` descriptors (at most the open-file soft limit)
/// now, so it never grows while requests are served. The kernel grows the table when a new fd
/// does not fit, and in a process with more than one thread each growth waits for an RCU grace
/// period (`expand_fdtable` calls `synchronize_rcu`): milliseconds on a loaded machine, taken
/// by whichever thread opened the file. Under W5 that was a network thread appending the first
/// message of a queue, which opens the queue's ConsumeQueue file (kernel stacks of that thread:
/// `openat` → `expand_files` → `synchronize_rcu`). The table never shrinks, so one duplicate
/// at the highest fd wanted, closed again, sizes it for good. Returns the size asked for.
pub fn presize_fd_table(fds: u64) -> std::io::Result<u64> {
    let wanted = nofile_soft_limit().map_or(fds, |soft| fds.min(soft));
    let Some(highest) = wanted.checked_sub(1).and_then(|h| i32::try_from(h).ok()) else {
        return Ok(0);
    };
    let probe = std::fs::File::open("/dev/null")?;
    // SAFETY: F_DUPFD_CLOEXEC duplicates a descriptor we own onto the lowest free fd at or
    // above `highest`; it touches no memory of ours.
    let dup = unsafe {
        libc::fcntl(
            std::os::fd::AsRawFd::as_raw_fd(&probe),
            libc::F_DUPFD_CLOEXEC,
            highest,
        )
    };
    if dup < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: `dup` was just returned to us by fcntl and nothing else holds it.
    drop(unsafe { <std::fs::File as std::os::fd::FromRawFd>::from_raw_fd(dup) });
    Ok(wanted)
}

/// Below this no real request fits; it catches a unit mistake (KiB vs bytes) at startup.
const FRAME_SIZE_MAX_FLOOR_BYTES: usize = 64;

fn default_worker_threads() -> usize {
    // available_parallelism fails only where the core count is unknowable; one thread still works.
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

fn invalid(field: &'static str, value: impl ToString, reason: &'static str) -> ServerError {
    ServerError::InvalidConfig {
        field,
        value: value.to_string(),
        reason,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addr(s: &str) -> SocketAddr {
        s.parse().unwrap()
    }

    /// The fd table's size, `FDSize` in /proc/self/status.
    fn fd_table_size() -> u64 {
        let status = std::fs::read_to_string("/proc/self/status").unwrap();
        let line = status.lines().find(|l| l.starts_with("FDSize:")).unwrap();
        line["FDSize:".len()..].trim().parse().unwrap()
    }

    #[test]
    fn the_fd_table_is_sized_for_the_fds_asked_for_within_the_soft_limit() {
        let asked = 4096;
        let wanted = presize_fd_table(asked).unwrap();
        assert_eq!(wanted, nofile_soft_limit().map_or(asked, |s| s.min(asked)));
        assert!(
            fd_table_size() >= wanted,
            "FDSize {} after asking for {wanted}",
            fd_table_size()
        );
        assert_eq!(
            presize_fd_table(0).unwrap(),
            0,
            "nothing asked, nothing sized"
        );
    }

    #[test]
    fn defaults_are_valid() {
        let config = ServerConfig::new(addr("127.0.0.1:10911"));
        config.validate().unwrap();
        assert!(config.worker_threads >= 1);
        assert_eq!(config.frame_size_max_bytes, FRAME_SIZE_MAX_BYTES);
        assert_eq!(config.listen_backlog, 1024);
    }

    #[test]
    fn fast_port_is_listen_port_minus_two() {
        let config = ServerConfig::new(addr("127.0.0.1:10911"))
            .with_fast_listen_port()
            .unwrap();
        assert_eq!(
            config.additional_listen_addrs,
            vec![addr("127.0.0.1:10909")]
        );
        assert_eq!(
            config.all_listen_addrs(),
            vec![addr("127.0.0.1:10911"), addr("127.0.0.1:10909")]
        );
    }

    #[test]
    fn fast_port_needs_a_real_port() {
        for port in ["0", "1", "2"] {
            let config = ServerConfig::new(addr(&format!("127.0.0.1:{port}")));
            assert!(matches!(
                config.with_fast_listen_port(),
                Err(ServerError::InvalidConfig {
                    field: "listen_addr",
                    ..
                })
            ));
        }
    }

    #[test]
    fn connections_max_stays_under_the_open_file_limit() {
        // Room for the store's files is kept below the limit.
        assert_eq!(effective_connections_max(65_536, Some(65_536)), 64_512);
        assert_eq!(effective_connections_max(65_536, Some(1_048_576)), 65_536);
        assert_eq!(effective_connections_max(100, Some(65_536)), 100);
        // A low limit keeps half for connections, and never zero.
        assert_eq!(effective_connections_max(65_536, Some(1024)), 512);
        assert_eq!(effective_connections_max(65_536, Some(1)), 1);
        assert_eq!(effective_connections_max(65_536, None), 65_536);
        assert!(nofile_soft_limit().is_none_or(|n| n > 0));
    }

    #[test]
    fn zero_bounds_are_rejected_by_name() {
        let base = ServerConfig::new(addr("127.0.0.1:0"));
        type Mutation = fn(&mut ServerConfig);
        let cases: [(&str, Mutation); 6] = [
            ("worker_threads", |c| c.worker_threads = 0),
            ("requests_in_flight_max_per_connection", |c| {
                c.requests_in_flight_max_per_connection = 0
            }),
            ("write_queue_max_per_connection", |c| {
                c.write_queue_max_per_connection = 0
            }),
            ("frame_size_max_bytes", |c| c.frame_size_max_bytes = 16),
            ("listen_backlog", |c| c.listen_backlog = 0),
            ("ring_entries", |c| c.ring_entries = 100),
        ];
        for (name, mutate) in cases {
            let mut config = base.clone();
            mutate(&mut config);
            match config.validate() {
                Err(ServerError::InvalidConfig { field, .. }) => assert_eq!(field, name),
                other => panic!("{name}: expected InvalidConfig, got {other:?}"),
            }
        }
    }
}
