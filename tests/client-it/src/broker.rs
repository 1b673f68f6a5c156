//! A ringmq broker process under test: binary lookup, free ports, start, kill, stop, restart.
//!
//! The broker is a real child process started as `ringmq broker` with a temporary data dir and
//! free loopback ports. Its stdout and stderr go to `broker.log` in the temporary dir; the log
//! tail is printed when a test panics while the broker is alive, and the dir is then kept.

use std::fs::{File, OpenOptions};
use std::io::{self, Read, Seek, SeekFrom};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use tempfile::TempDir;

/// Text the broker prints to stderr once its listeners are up.
pub const BROKER_READY_MARKER: &str = "ringmq broker listening";
/// How long a broker may take from spawn to ready (marker seen and ports accepting).
pub const BROKER_READY_TIMEOUT: Duration = Duration::from_secs(30);
/// How long a broker may take to exit after SIGTERM before it is killed.
pub const BROKER_STOP_TIMEOUT: Duration = Duration::from_secs(15);
/// How long a SIGKILLed broker may take to be reaped.
pub const BROKER_KILL_TIMEOUT: Duration = Duration::from_secs(10);
/// Poll interval while waiting for readiness or exit.
pub const POLL_INTERVAL: Duration = Duration::from_millis(20);
/// Timeout of one TCP connect probe.
pub const CONNECT_PROBE_TIMEOUT: Duration = Duration::from_millis(500);
/// Port picking tries this many candidates before giving up.
pub const PORT_PICK_ATTEMPTS: usize = 64;
/// A start whose ports were taken in between picking and binding is retried this often.
pub const START_ATTEMPTS: usize = 3;
/// Lines of broker log shown in errors and on test failure.
pub const LOG_TAIL_LINES: usize = 200;
/// The fast (VIP) port is the main port minus this, as in RocketMQ.
pub const FAST_PORT_OFFSET: u16 = 2;
/// Building the broker binary must finish within this (a cold build on 2 cores is slow).
pub const BUILD_TIMEOUT: Duration = Duration::from_secs(1200);

/// Env var: path of a prebuilt `ringmq` binary (skips the lookup and the build).
pub const ENV_BIN: &str = "RINGMQ_BIN";
/// Env var: name server address of an already running broker; the harness then starts nothing.
pub const ENV_EXTERNAL_NAMESRV: &str = "RINGMQ_IT_EXTERNAL_NAMESRV";
/// Env var passed to the broker: tracing filter. Taken from the test's environment if set.
pub const ENV_LOG: &str = "RINGMQ_LOG_LEVEL";
/// `RINGMQ_STORE_MAX_HASH_SLOT_NUM` of the brokers the harness starts.
pub const INDEX_HASH_SLOTS_IN_TESTS: &str = "4096";
/// `RINGMQ_STORE_MAX_INDEX_NUM` of the brokers the harness starts.
pub const INDEX_ENTRIES_IN_TESTS: &str = "16384";
/// Default tracing filter for the broker under test.
pub const BROKER_LOG_FILTER_DEFAULT: &str = "info";

/// Errors of the broker harness. `Debug` shows the `Display` text so that `expect()` in tests
/// prints the broker log tail readably.
#[derive(thiserror::Error)]
pub enum HarnessError {
    #[error("i/o error while {context}: {source}")]
    Io {
        context: String,
        #[source]
        source: io::Error,
    },
    /// A helper command (cargo build, external kill/restart) failed.
    #[error("`{command}` failed: {status}")]
    Build { command: String, status: String },
    #[error("no free port pair (p, p-{FAST_PORT_OFFSET}) after {attempts} attempts")]
    NoFreePorts { attempts: usize },
    #[error("broker exited before it was ready ({status}); log {log_path}:\n{log_tail}")]
    ExitedEarly {
        status: String,
        log_path: String,
        log_tail: String,
    },
    #[error(
        "broker not ready within {timeout_ms} ms ({waiting_for}); log {log_path}:\n{log_tail}"
    )]
    NotReady {
        timeout_ms: u128,
        waiting_for: String,
        log_path: String,
        log_tail: String,
    },
    #[error("broker did not exit within {timeout_ms} ms of SIGTERM; killed it")]
    StopTimeout { timeout_ms: u128 },
    #[error("the broker process is not running (or cannot be controlled)")]
    NotRunning,
}

impl std::fmt::Debug for HarnessError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Display::fmt(self, f)
    }
}

fn io_err(context: impl Into<String>) -> impl FnOnce(io::Error) -> HarnessError {
    let context = context.into();
    move |source| HarnessError::Io { context, source }
}

/// The loopback ports one broker uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BrokerPorts {
    /// Main remoting port (RINGMQ_BROKER_LISTEN_PORT).
    pub broker_port: u16,
    /// Fast port, `broker_port - 2`, which the broker also binds.
    pub fast_port: u16,
    /// Embedded name server port (RINGMQ_NAMESRV_LISTEN_PORT).
    pub namesrv_port: u16,
}

fn bind_loopback(port: u16) -> io::Result<TcpListener> {
    TcpListener::bind(SocketAddr::from((Ipv4Addr::LOCALHOST, port)))
}

/// Picks free loopback ports: `p`, `p-2` and `p+1` (HA) for the broker and another for the
/// name server.
///
/// All three are bound at once while picking so they are distinct and free at that moment;
/// another process may still take one before the broker binds it, so [`BrokerProcess::start`]
/// retries with new ports when the broker cannot bind.
pub fn pick_ports() -> Result<BrokerPorts, HarnessError> {
    for _ in 0..PORT_PICK_ATTEMPTS {
        let main = bind_loopback(0).map_err(io_err("binding 127.0.0.1:0"))?;
        let broker_port = main
            .local_addr()
            .map_err(io_err("reading a bound port"))?
            .port();
        let Some(fast_port) = broker_port.checked_sub(FAST_PORT_OFFSET) else {
            continue;
        };
        if fast_port < 1024 {
            continue;
        }
        let Ok(fast) = bind_loopback(fast_port) else {
            continue;
        };
        // A master's HA port is its listen port + 1 (Java's default).
        let Some(ha_port) = broker_port.checked_add(1) else {
            continue;
        };
        let Ok(ha) = bind_loopback(ha_port) else {
            continue;
        };
        let namesrv = bind_loopback(0).map_err(io_err("binding 127.0.0.1:0"))?;
        let namesrv_port = namesrv
            .local_addr()
            .map_err(io_err("reading a bound port"))?
            .port();
        // The listeners are held together, so namesrv_port differs from the others.
        drop((main, fast, ha, namesrv));
        return Ok(BrokerPorts {
            broker_port,
            fast_port,
            namesrv_port,
        });
    }
    Err(HarnessError::NoFreePorts {
        attempts: PORT_PICK_ATTEMPTS,
    })
}

fn workspace_root() -> PathBuf {
    // tests/client-it -> repository root
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The profile dir (`<target>/debug`) of the running test binary (`<target>/debug/deps/x`).
fn profile_dir() -> Option<PathBuf> {
    let exe = std::env::current_exe().ok()?;
    let deps = exe.parent()?;
    Some(deps.parent()?.to_path_buf())
}

/// Finds the `ringmq` binary: `$RINGMQ_BIN`, else `<target>/<profile>/ringmq`, built with
/// `cargo build -p ringmq --bin ringmq` when it is missing. Done once per process.
pub fn ringmq_binary() -> Result<PathBuf, HarnessError> {
    static BINARY: OnceLock<Mutex<Option<PathBuf>>> = OnceLock::new();
    let cell = BINARY.get_or_init(|| Mutex::new(None));
    // A panic while holding the lock leaves no partial state behind, so a poisoned lock is
    // still usable.
    let mut found = cell.lock().unwrap_or_else(|poison| poison.into_inner());
    if let Some(path) = found.as_ref() {
        return Ok(path.clone());
    }
    let path = locate_or_build_binary()?;
    *found = Some(path.clone());
    Ok(path)
}

fn locate_or_build_binary() -> Result<PathBuf, HarnessError> {
    if let Some(path) = std::env::var_os(ENV_BIN) {
        return Ok(PathBuf::from(path));
    }
    let profile = profile_dir().ok_or_else(|| HarnessError::Io {
        context: "locating the test binary's target dir".into(),
        source: io::Error::new(io::ErrorKind::NotFound, "current_exe has no grandparent"),
    })?;
    let binary = profile.join("ringmq");
    if binary.is_file() {
        return Ok(binary);
    }
    let release = profile.file_name().is_some_and(|name| name == "release");
    let target_dir = profile
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_else(|| workspace_root().join("target"));
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut command = Command::new(cargo);
    command
        .current_dir(workspace_root())
        .env("CARGO_TARGET_DIR", &target_dir)
        .args(["build", "--workspace", "--bin", "ringmq"]);
    if release {
        command.arg("--release");
    }
    let command_text = format!("{command:?}");
    eprintln!("[client-it] {binary:?} is missing; running {command_text}");
    let mut child = command
        .spawn()
        .map_err(io_err(format!("spawning {command_text}")))?;
    let status =
        wait_with_timeout(&mut child, BUILD_TIMEOUT).map_err(io_err("waiting for cargo build"))?;
    match status {
        Some(status) if status.success() && binary.is_file() => Ok(binary),
        Some(status) => Err(HarnessError::Build {
            command: command_text,
            status: status.to_string(),
        }),
        None => {
            // Best effort: the build is abandoned either way.
            let _ = child.kill();
            let _ = child.wait();
            Err(HarnessError::Build {
                command: command_text,
                status: format!("timed out after {} s", BUILD_TIMEOUT.as_secs()),
            })
        }
    }
}

fn wait_with_timeout(child: &mut Child, timeout: Duration) -> io::Result<Option<ExitStatus>> {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(status) = child.try_wait()? {
            return Ok(Some(status));
        }
        if Instant::now() >= deadline {
            return Ok(None);
        }
        std::thread::sleep(POLL_INTERVAL);
    }
}

fn send_signal(child: &Child, signal: libc::c_int) -> io::Result<()> {
    let pid = libc::pid_t::try_from(child.id())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "pid out of range"))?;
    // SAFETY: kill(2) has no memory-safety preconditions; the pid is our own unreaped child,
    // so it cannot have been recycled for another process.
    let rc = unsafe { libc::kill(pid, signal) };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Last `max_lines` lines of a log file (lossy UTF-8); a read error is reported inline.
pub fn read_log_tail(path: &Path, max_lines: usize) -> String {
    match std::fs::read(path) {
        Ok(bytes) => {
            let text = String::from_utf8_lossy(&bytes);
            let lines: Vec<&str> = text.lines().collect();
            let start = lines.len().saturating_sub(max_lines);
            lines[start..].join("\n")
        }
        Err(error) => format!("<cannot read {}: {error}>", path.display()),
    }
}

/// A `ringmq broker` child process with its own data dir and ports.
pub struct BrokerProcess {
    binary: PathBuf,
    /// `None` only after the dir was kept for inspection in `Drop`.
    temp_dir: Option<TempDir>,
    temp_path: PathBuf,
    store_root: PathBuf,
    log_path: PathBuf,
    ports: BrokerPorts,
    env_overrides: Vec<(String, String)>,
    child: Option<Child>,
    start_count: u32,
}

impl BrokerProcess {
    /// Starts a broker on free ports with a new temporary data dir and waits until it is ready.
    ///
    /// `env_overrides` are applied after the harness's own variables, so they can replace them
    /// (e.g. `("RINGMQ_STORE_FLUSH_POLICY", "sync")`). Must be called from the thread that
    /// owns the broker for its lifetime (the broker gets SIGKILL when that thread exits).
    pub fn start(env_overrides: &[(&str, &str)]) -> Result<Self, HarnessError> {
        Self::start_with_binary(ringmq_binary()?, env_overrides)
    }

    /// [`start`](Self::start) with an explicit broker binary (the harness's own tests use a
    /// fake one).
    pub fn start_with_binary(
        binary: PathBuf,
        env_overrides: &[(&str, &str)],
    ) -> Result<Self, HarnessError> {
        let temp_dir = tempfile::Builder::new()
            .prefix("ringmq-it-")
            .tempdir()
            .map_err(io_err("creating the broker temp dir"))?;
        let temp_path = temp_dir.path().to_path_buf();
        let store_root = temp_path.join("store");
        std::fs::create_dir_all(&store_root).map_err(io_err("creating the store root dir"))?;
        let log_path = temp_path.join("broker.log");
        let mut broker = BrokerProcess {
            binary,
            temp_dir: Some(temp_dir),
            temp_path,
            store_root,
            log_path,
            ports: pick_ports()?,
            env_overrides: env_overrides
                .iter()
                .map(|(key, value)| (key.to_string(), value.to_string()))
                .collect(),
            child: None,
            start_count: 0,
        };
        let mut attempt = 1;
        loop {
            match broker.spawn_and_wait_ready() {
                Ok(()) => return Ok(broker),
                Err(error) if attempt < START_ATTEMPTS && broker.log_shows_bind_conflict() => {
                    eprintln!("[client-it] broker could not bind its ports, retrying: {error}");
                    broker.kill_quietly();
                    broker.ports = pick_ports()?;
                    attempt += 1;
                }
                // The error carries the log tail; the temp dir goes with `broker`.
                Err(error) => return Err(error),
            }
        }
    }

    /// `127.0.0.1:<namesrv port>`, the address clients are given.
    pub fn namesrv_addr(&self) -> String {
        format!("127.0.0.1:{}", self.ports.namesrv_port)
    }

    /// `127.0.0.1:<broker port>`.
    pub fn broker_addr(&self) -> String {
        format!("127.0.0.1:{}", self.ports.broker_port)
    }

    pub fn ports(&self) -> BrokerPorts {
        self.ports
    }

    /// RINGMQ_STORE_ROOT_DIR of this broker; kept across restarts.
    pub fn store_root(&self) -> &Path {
        &self.store_root
    }

    /// File receiving the broker's stdout and stderr (appended across restarts).
    pub fn log_path(&self) -> &Path {
        &self.log_path
    }

    pub fn log_tail(&self, max_lines: usize) -> String {
        read_log_tail(&self.log_path, max_lines)
    }

    /// Pid of the running child, if any.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// How many times a broker process was spawned for this data dir.
    pub fn start_count(&self) -> u32 {
        self.start_count
    }

    /// Whether the child is still running (reaps it if it has exited).
    pub fn is_running(&mut self) -> bool {
        match self.child.as_mut().map(Child::try_wait) {
            Some(Ok(None)) => true,
            Some(Ok(Some(_)) | Err(_)) => {
                self.child = None;
                false
            }
            None => false,
        }
    }

    /// SIGKILL: the broker gets no chance to flush. Returns its exit status.
    pub fn kill_hard(&mut self) -> Result<ExitStatus, HarnessError> {
        let mut child = self.child.take().ok_or(HarnessError::NotRunning)?;
        send_signal(&child, libc::SIGKILL).map_err(io_err("sending SIGKILL"))?;
        match wait_with_timeout(&mut child, BROKER_KILL_TIMEOUT)
            .map_err(io_err("waiting for the killed broker"))?
        {
            Some(status) => Ok(status),
            None => Err(HarnessError::Io {
                context: "waiting for the killed broker".into(),
                source: io::Error::new(io::ErrorKind::TimedOut, "not reaped after SIGKILL"),
            }),
        }
    }

    /// SIGTERM and wait for a graceful exit; after [`BROKER_STOP_TIMEOUT`] it is SIGKILLed and
    /// [`HarnessError::StopTimeout`] returned.
    pub fn stop(&mut self) -> Result<ExitStatus, HarnessError> {
        let mut child = self.child.take().ok_or(HarnessError::NotRunning)?;
        send_signal(&child, libc::SIGTERM).map_err(io_err("sending SIGTERM"))?;
        match wait_with_timeout(&mut child, BROKER_STOP_TIMEOUT)
            .map_err(io_err("waiting for the stopped broker"))?
        {
            Some(status) => Ok(status),
            None => {
                // Best effort: the error below already reports the failed stop.
                let _ = child.kill();
                let _ = child.wait();
                Err(HarnessError::StopTimeout {
                    timeout_ms: BROKER_STOP_TIMEOUT.as_millis(),
                })
            }
        }
    }

    /// Starts the broker again on the same data dir, ports and environment (after a
    /// [`stop`](Self::stop) or [`kill_hard`](Self::kill_hard); a running broker is stopped
    /// first) and waits until it is ready.
    pub fn restart(&mut self) -> Result<(), HarnessError> {
        if self.is_running() {
            self.stop()?;
        }
        self.spawn_and_wait_ready()
    }

    fn spawn_and_wait_ready(&mut self) -> Result<(), HarnessError> {
        let log_offset = std::fs::metadata(&self.log_path)
            .map(|meta| meta.len())
            .unwrap_or(0);
        let log = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log_path)
            .map_err(io_err("opening the broker log"))?;
        let log_err = log
            .try_clone()
            .map_err(io_err("duplicating the log handle"))?;
        let log_filter =
            std::env::var(ENV_LOG).unwrap_or_else(|_| BROKER_LOG_FILTER_DEFAULT.to_string());
        let mut command = Command::new(&self.binary);
        command
            .arg("broker")
            .env(
                "RINGMQ_BROKER_LISTEN_PORT",
                self.ports.broker_port.to_string(),
            )
            .env(
                "RINGMQ_NAMESRV_LISTEN_PORT",
                self.ports.namesrv_port.to_string(),
            )
            .env("RINGMQ_STORE_ROOT_DIR", &self.store_root)
            // Index files scaled down (Java's default file is 420 MB sparse with 20 MB of
            // slots allocated); overrides below may set other sizes.
            .env("RINGMQ_STORE_MAX_HASH_SLOT_NUM", INDEX_HASH_SLOTS_IN_TESTS)
            .env("RINGMQ_STORE_MAX_INDEX_NUM", INDEX_ENTRIES_IN_TESTS)
            // Brokers run side by side: metrics on a port of the kernel's choice.
            .env("RINGMQ_METRICS_LISTEN", "127.0.0.1:0")
            .env(ENV_LOG, log_filter)
            .envs(self.env_overrides.iter().map(|(k, v)| (k, v)))
            .current_dir(&self.temp_path)
            .stdin(Stdio::null())
            .stdout(Stdio::from(log))
            .stderr(Stdio::from(log_err));
        die_with_spawning_thread(&mut command);
        let child = command
            .spawn()
            .map_err(io_err(format!("spawning {}", self.binary.display())))?;
        self.child = Some(child);
        self.start_count += 1;
        self.wait_ready(log_offset)
    }

    fn wait_ready(&mut self, log_offset: u64) -> Result<(), HarnessError> {
        let deadline = Instant::now() + BROKER_READY_TIMEOUT;
        let mut marker_seen = false;
        loop {
            if let Some(child) = self.child.as_mut() {
                if let Some(status) = child.try_wait().map_err(io_err("polling the broker"))? {
                    self.child = None;
                    return Err(HarnessError::ExitedEarly {
                        status: status.to_string(),
                        log_path: self.log_path.display().to_string(),
                        log_tail: self.log_tail(LOG_TAIL_LINES),
                    });
                }
            }
            if !marker_seen {
                marker_seen = log_contains_since(&self.log_path, log_offset, BROKER_READY_MARKER)
                    .map_err(io_err("reading the broker log"))?;
            }
            let waiting_for = if !marker_seen {
                Some(format!("log line containing {BROKER_READY_MARKER:?}"))
            } else if !can_connect(self.ports.broker_port) {
                Some(format!("connect to broker port {}", self.ports.broker_port))
            } else if self.embeds_namesrv() && !can_connect(self.ports.namesrv_port) {
                Some(format!(
                    "connect to namesrv port {}",
                    self.ports.namesrv_port
                ))
            } else {
                None
            };
            let Some(waiting_for) = waiting_for else {
                return Ok(());
            };
            if Instant::now() >= deadline {
                return Err(HarnessError::NotReady {
                    timeout_ms: BROKER_READY_TIMEOUT.as_millis(),
                    waiting_for,
                    log_path: self.log_path.display().to_string(),
                    log_tail: self.log_tail(LOG_TAIL_LINES),
                });
            }
            std::thread::sleep(POLL_INTERVAL);
        }
    }

    /// Whether the broker runs its own name server (no RINGMQ_NAMESRV_ADDR given).
    fn embeds_namesrv(&self) -> bool {
        !self
            .env_overrides
            .iter()
            .any(|(k, v)| k == "RINGMQ_NAMESRV_ADDR" && !v.trim().is_empty())
    }

    fn log_shows_bind_conflict(&self) -> bool {
        let tail = self.log_tail(LOG_TAIL_LINES);
        tail.contains("Address already in use") || tail.contains("AddrInUse")
    }

    fn kill_quietly(&mut self) {
        if let Some(mut child) = self.child.take() {
            // Best effort cleanup: the process is abandoned either way.
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

fn log_contains_since(path: &Path, offset: u64, needle: &str) -> io::Result<bool> {
    let mut file = match File::open(path) {
        Ok(file) => file,
        Err(error) if error.kind() == io::ErrorKind::NotFound => return Ok(false),
        Err(error) => return Err(error),
    };
    file.seek(SeekFrom::Start(offset))?;
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes)?;
    Ok(String::from_utf8_lossy(&bytes).contains(needle))
}

fn can_connect(port: u16) -> bool {
    TcpStream::connect_timeout(
        &SocketAddr::from((Ipv4Addr::LOCALHOST, port)),
        CONNECT_PROBE_TIMEOUT,
    )
    .is_ok()
}

impl Drop for BrokerProcess {
    fn drop(&mut self) {
        let was_running = self.child.is_some();
        self.kill_quietly();
        if std::thread::panicking() {
            let kept = self.temp_dir.take().map(TempDir::keep);
            eprintln!(
                "[client-it] test failed; broker ({}running, started {} time(s)) log {} \
                 (data dir kept at {:?}), last {LOG_TAIL_LINES} lines:\n{}",
                if was_running { "" } else { "not " },
                self.start_count,
                self.log_path.display(),
                kept,
                self.log_tail(LOG_TAIL_LINES)
            );
        }
    }
}

/// Env var: shell command that SIGKILLs the external broker (enables kill/restart tests).
pub const ENV_EXTERNAL_KILL_CMD: &str = "RINGMQ_IT_EXTERNAL_KILL_CMD";
/// Env var: shell command that restarts the external broker on its data and waits until ready.
pub const ENV_EXTERNAL_RESTART_CMD: &str = "RINGMQ_IT_EXTERNAL_RESTART_CMD";
/// Bound on one external control command.
pub const EXTERNAL_CMD_TIMEOUT: Duration = Duration::from_secs(120);

/// Shell commands that kill and restart an external broker (e.g. the peer broker through
/// `scripts/peer-broker.sh kill-broker` / `restart-broker`).
#[derive(Debug, Clone)]
pub struct ExternalControl {
    pub kill_cmd: String,
    pub restart_cmd: String,
}

/// The broker a test talks to: one started by the harness, or an external one named by
/// `RINGMQ_IT_EXTERNAL_NAMESRV` (e.g. the peer broker run by `scripts/peer-broker.sh`).
pub enum TestBroker {
    Local(BrokerProcess),
    External {
        namesrv_addr: String,
        /// Present when both `RINGMQ_IT_EXTERNAL_KILL_CMD` and `..._RESTART_CMD` are set.
        control: Option<ExternalControl>,
    },
}

/// Makes the process `command` spawns die with the thread that spawned it
/// (PR_SET_PDEATHSIG), so a crashed or killed test run leaves no process behind.
pub(crate) fn die_with_spawning_thread(command: &mut Command) {
    // SAFETY: the closure runs between fork and exec and only calls prctl(2), which is
    // async-signal-safe.
    unsafe {
        command.pre_exec(|| {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                return Err(io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

/// `RINGMQ_IT_EXTERNAL_NAMESRV`, when set and not empty.
pub fn external_namesrv_addr() -> Option<String> {
    non_empty_env(ENV_EXTERNAL_NAMESRV)
}

fn non_empty_env(name: &str) -> Option<String> {
    std::env::var(name)
        .ok()
        .filter(|value| !value.trim().is_empty())
}

fn run_shell(command: &str) -> Result<(), HarnessError> {
    let mut child = Command::new("sh")
        .args(["-c", command])
        .stdin(Stdio::null())
        .spawn()
        .map_err(io_err(format!("spawning `{command}`")))?;
    match wait_with_timeout(&mut child, EXTERNAL_CMD_TIMEOUT)
        .map_err(io_err(format!("waiting for `{command}`")))?
    {
        Some(status) if status.success() => Ok(()),
        Some(status) => Err(HarnessError::Build {
            command: command.to_string(),
            status: status.to_string(),
        }),
        None => {
            // Best effort: the command is abandoned either way.
            let _ = child.kill();
            let _ = child.wait();
            Err(HarnessError::Build {
                command: command.to_string(),
                status: format!("timed out after {} s", EXTERNAL_CMD_TIMEOUT.as_secs()),
            })
        }
    }
}

impl TestBroker {
    /// Uses the external broker if `RINGMQ_IT_EXTERNAL_NAMESRV` is set, else starts ringmq
    /// with `env_overrides` (ignored for an external broker).
    pub fn start(env_overrides: &[(&str, &str)]) -> Result<Self, HarnessError> {
        match external_namesrv_addr() {
            Some(namesrv_addr) => {
                let control = match (
                    non_empty_env(ENV_EXTERNAL_KILL_CMD),
                    non_empty_env(ENV_EXTERNAL_RESTART_CMD),
                ) {
                    (Some(kill_cmd), Some(restart_cmd)) => Some(ExternalControl {
                        kill_cmd,
                        restart_cmd,
                    }),
                    _ => None,
                };
                eprintln!(
                    "[client-it] using external broker via name server {namesrv_addr} \
                     (control: {control:?}; env overrides {env_overrides:?} not applied)"
                );
                Ok(TestBroker::External {
                    namesrv_addr,
                    control,
                })
            }
            None => Ok(TestBroker::Local(BrokerProcess::start(env_overrides)?)),
        }
    }

    pub fn namesrv_addr(&self) -> String {
        match self {
            TestBroker::Local(process) => process.namesrv_addr(),
            TestBroker::External { namesrv_addr, .. } => namesrv_addr.clone(),
        }
    }

    pub fn is_external(&self) -> bool {
        matches!(self, TestBroker::External { .. })
    }

    /// The process, when the harness started it.
    pub fn local_mut(&mut self) -> Option<&mut BrokerProcess> {
        match self {
            TestBroker::Local(process) => Some(process),
            TestBroker::External { .. } => None,
        }
    }

    /// Whether [`kill_hard`](Self::kill_hard) and [`restart`](Self::restart) are available.
    pub fn can_kill_and_restart(&self) -> bool {
        match self {
            TestBroker::Local(_) => true,
            TestBroker::External { control, .. } => control.is_some(),
        }
    }

    /// SIGKILLs the broker (the local process, or through the external kill command).
    pub fn kill_hard(&mut self) -> Result<(), HarnessError> {
        match self {
            TestBroker::Local(process) => process.kill_hard().map(|_| ()),
            TestBroker::External {
                control: Some(control),
                ..
            } => run_shell(&control.kill_cmd),
            TestBroker::External { control: None, .. } => Err(HarnessError::NotRunning),
        }
    }

    /// Restarts the broker on the same data and ports and waits until it is ready.
    pub fn restart(&mut self) -> Result<(), HarnessError> {
        match self {
            TestBroker::Local(process) => process.restart(),
            TestBroker::External {
                control: Some(control),
                ..
            } => run_shell(&control.restart_cmd),
            TestBroker::External { control: None, .. } => Err(HarnessError::NotRunning),
        }
    }
}

/// For tests that kill and restart the broker: returns true (and prints why) when they have to
/// be skipped because an external broker without kill/restart commands is targeted.
pub fn skip_unless_restartable(broker: &TestBroker, test_name: &str) -> bool {
    if broker.can_kill_and_restart() {
        return false;
    }
    eprintln!(
        "[client-it] SKIPPED {test_name}: it kills and restarts the broker, but \
         {ENV_EXTERNAL_NAMESRV} targets an external broker and {ENV_EXTERNAL_KILL_CMD} / \
         {ENV_EXTERNAL_RESTART_CMD} are not both set"
    );
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Another process may take a picked port between the pick and its use (the harness
    /// retries the broker's start for that), so a pick whose ports are taken again by then is
    /// picked anew; one of a few must be free throughout.
    #[test]
    fn picked_ports_are_distinct_and_free() {
        let mut busy = Vec::new();
        for _ in 0..5 {
            let ports = pick_ports().expect("ports");
            assert_eq!(ports.fast_port + FAST_PORT_OFFSET, ports.broker_port);
            assert_ne!(ports.namesrv_port, ports.broker_port);
            assert_ne!(ports.namesrv_port, ports.fast_port);
            let ports = [ports.broker_port, ports.fast_port, ports.namesrv_port];
            let bound: Vec<_> = ports.iter().map(|&p| bind_loopback(p)).collect();
            match bound.iter().position(Result::is_err) {
                None => return,
                Some(i) => busy.push(ports[i]),
            }
        }
        panic!("every pick had a port taken before it was bound again: {busy:?}");
    }

    #[test]
    fn log_tail_keeps_last_lines() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("log");
        std::fs::write(&path, "a\nb\nc\n").expect("write");
        assert_eq!(read_log_tail(&path, 2), "b\nc");
        assert!(log_contains_since(&path, 2, "b").expect("read"));
        assert!(!log_contains_since(&path, 2, "a").expect("read"));
        assert!(!log_contains_since(&dir.path().join("none"), 0, "a").expect("missing"));
    }

    #[test]
    fn signals_reach_a_child() {
        let mut child = Command::new("sleep")
            .arg("30")
            .spawn()
            .expect("spawn sleep");
        send_signal(&child, libc::SIGTERM).expect("signal");
        let status = wait_with_timeout(&mut child, Duration::from_secs(10))
            .expect("wait")
            .expect("exited");
        assert!(!status.success());
    }
}
