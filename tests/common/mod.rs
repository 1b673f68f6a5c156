//! Test harness: starts the real `ringmq` binary on 127.0.0.1 with free ports and a temporary
//! data dir, and talks to it with the project's blocking remoting client.
#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use ringmq::net::remoting_client::BlockingClient;
use ringmq::remoting::command::RemotingCommand;

/// A free loopback port `p` whose `p - 2` (the broker's fast port) is free too.
pub fn free_broker_port() -> u16 {
    broker_ports().0
}

/// A broker port (with its fast port `p - 2` and its HA port `p + 1` free) and a name server
/// port, all distinct. The
/// probe sockets stay bound until all are chosen: a port dropped and picked again would hand
/// the same number to both, and a second listener on an address fails the start.
pub fn broker_ports() -> (u16, u16) {
    for _ in 0..200 {
        let broker = TcpListener::bind("127.0.0.1:0").expect("bind");
        let p = broker.local_addr().unwrap().port();
        let Ok(fast) = TcpListener::bind(("127.0.0.1", p.saturating_sub(2))) else {
            continue;
        };
        if p <= 3 || p == u16::MAX {
            continue;
        }
        let Ok(ha) = TcpListener::bind(("127.0.0.1", p + 1)) else {
            continue;
        };
        let namesrv = TcpListener::bind("127.0.0.1:0").expect("bind");
        let n = namesrv.local_addr().unwrap().port();
        drop((broker, fast, ha, namesrv));
        return (p, n);
    }
    panic!("no free port triple found");
}

/// A free port that is none of `taken` (ports chosen earlier and not bound yet).
pub fn free_port_except(taken: &[u16]) -> u16 {
    loop {
        let port = free_port();
        if !taken.contains(&port) {
            return port;
        }
    }
}

pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

pub struct Broker {
    child: Option<Child>,
    pub dir: PathBuf,
    _tmp: Option<tempfile::TempDir>,
    pub port: u16,
    pub namesrv_port: u16,
    env: Vec<(String, String)>,
    pub log_path: PathBuf,
}

impl Broker {
    pub fn start(env: &[(&str, &str)]) -> Broker {
        let tmp = tempfile::tempdir().expect("tempdir");
        let dir = tmp.path().to_path_buf();
        let (port, namesrv_port) = broker_ports();
        let mut b = Broker {
            child: None,
            log_path: dir.join("broker.log"),
            dir,
            _tmp: Some(tmp),
            port,
            namesrv_port,
            env: env
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        };
        b.spawn();
        b
    }

    pub fn addr(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    pub fn namesrv_addr(&self) -> String {
        format!("127.0.0.1:{}", self.namesrv_port)
    }

    /// A broker that registers with the name server at `namesrv_addr` instead of embedding one.
    pub fn start_with_namesrv(namesrv_addr: &str, env: &[(&str, &str)]) -> Broker {
        let mut all: Vec<(&str, &str)> = vec![("RINGMQ_NAMESRV_ADDR", namesrv_addr)];
        all.extend_from_slice(env);
        Broker::start(&all)
    }

    fn spawn(&mut self) {
        let store = self.dir.join("store");
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_ringmq"));
        cmd.arg("broker")
            .env("RINGMQ_STORE_ROOT_DIR", &store)
            .env("RINGMQ_BROKER_LISTEN_PORT", self.port.to_string())
            .env("RINGMQ_NAMESRV_LISTEN_PORT", self.namesrv_port.to_string())
            .env("RINGMQ_SERVER_WORKER_THREADS", "2")
            // Small index files (Java's default allocates 20 MB of slots per file).
            .env("RINGMQ_STORE_MAX_HASH_SLOT_NUM", "4096")
            .env("RINGMQ_STORE_MAX_INDEX_NUM", "16384")
            // Metrics on, on a port of the kernel's choice: tests run brokers side by side.
            .env("RINGMQ_METRICS_LISTEN", "127.0.0.1:0")
            .env("RINGMQ_LOG_LEVEL", "info")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        for (k, v) in &self.env {
            cmd.env(k, v);
        }
        let mut child = cmd.spawn().expect("spawn ringmq");
        let stderr = child.stderr.take().unwrap();
        let log_path = self.log_path.clone();
        let rx = forward_log(stderr, log_path, "ringmq broker listening");
        if rx.recv_timeout(Duration::from_secs(30)).is_err() {
            let _ = child.kill();
            panic!(
                "broker did not start; log:\n{}",
                std::fs::read_to_string(&self.log_path).unwrap_or_default()
            );
        }
        self.child = Some(child);
    }

    pub fn client(&self) -> BlockingClient {
        BlockingClient::connect(&self.addr(), Duration::from_secs(10)).expect("connect broker")
    }

    pub fn namesrv_client(&self) -> BlockingClient {
        BlockingClient::connect(&self.namesrv_addr(), Duration::from_secs(10))
            .expect("connect namesrv")
    }

    /// SIGKILL, no chance to flush.
    /// The broker process's id, while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// The TCP ports the broker process listens on (its sockets in LISTEN state, from
    /// /proc), sorted.
    pub fn listening_ports(&self) -> Vec<u16> {
        let pid = self.pid().expect("the broker runs");
        let inodes: std::collections::HashSet<String> =
            std::fs::read_dir(format!("/proc/{pid}/fd"))
                .expect("the broker's fds")
                .filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
                .filter_map(|link| {
                    let link = link.to_string_lossy().into_owned();
                    let inode = link.strip_prefix("socket:[")?.strip_suffix(']')?;
                    Some(inode.to_owned())
                })
                .collect();
        let mut ports = Vec::new();
        for table in ["/proc/net/tcp", "/proc/net/tcp6"] {
            let Ok(text) = std::fs::read_to_string(table) else {
                continue;
            };
            for line in text.lines().skip(1) {
                let cols: Vec<&str> = line.split_whitespace().collect();
                // local_address is HEX_IP:HEX_PORT, st 0A is LISTEN, inode is column 9.
                if cols.len() > 9 && cols[3] == "0A" && inodes.contains(cols[9]) {
                    let port = cols[1].rsplit(':').next().unwrap();
                    ports.push(u16::from_str_radix(port, 16).unwrap());
                }
            }
        }
        ports.sort_unstable();
        ports.dedup();
        ports
    }

    pub fn kill_hard(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// SIGTERM and wait for a clean exit.
    pub fn stop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(c.id() as i32),
                nix::sys::signal::Signal::SIGTERM,
            );
            let status = c.wait().expect("wait");
            assert!(
                status.success(),
                "broker exited with {status}; log:\n{}",
                self.log()
            );
        }
    }

    pub fn restart(&mut self) {
        self.spawn();
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log_path).unwrap_or_default()
    }

    pub fn store_dir(&self) -> PathBuf {
        self.dir.join("store")
    }
}

impl Drop for Broker {
    fn drop(&mut self) {
        self.kill_hard();
    }
}

pub fn invoke(client: &mut BlockingClient, cmd: RemotingCommand) -> RemotingCommand {
    client.invoke(cmd).expect("invoke")
}

pub fn local(addr: &str) -> SocketAddr {
    addr.parse().unwrap()
}

pub fn exists(p: &Path) -> bool {
    p.exists()
}

/// Copies a child's stderr to `log_path` and signals once a line contains `ready_marker`.
fn forward_log(
    stderr: std::process::ChildStderr,
    log_path: PathBuf,
    ready_marker: &'static str,
) -> mpsc::Receiver<()> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        use std::io::Write;
        let mut log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log_path)
            .unwrap();
        let mut tx = Some(tx);
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            let _ = writeln!(log, "{line}");
            if line.contains(ready_marker) {
                if let Some(tx) = tx.take() {
                    let _ = tx.send(());
                }
            }
        }
    });
    rx
}

/// A standalone `ringmq namesrv` process.
pub struct Namesrv {
    child: Child,
    pub port: u16,
    _tmp: tempfile::TempDir,
}

impl Namesrv {
    pub fn start() -> Namesrv {
        let tmp = tempfile::tempdir().unwrap();
        let port = free_port();
        let mut child = Command::new(env!("CARGO_BIN_EXE_ringmq"))
            .arg("namesrv")
            .env("RINGMQ_NAMESRV_LISTEN_PORT", port.to_string())
            .env(
                "RINGMQ_NAMESRV_KV_CONFIG_PATH",
                tmp.path().join("kvConfig.json"),
            )
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn ringmq namesrv");
        let rx = forward_log(
            child.stderr.take().unwrap(),
            tmp.path().join("namesrv.log"),
            "ringmq name server listening",
        );
        if rx.recv_timeout(Duration::from_secs(30)).is_err() {
            let _ = child.kill();
            panic!("name server did not start");
        }
        Namesrv {
            child,
            port,
            _tmp: tmp,
        }
    }

    pub fn addr(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }
}

impl Drop for Namesrv {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// PullSysFlag FLAG_SUBSCRIPTION: the subscription travels in the request header.
pub const PULL_FLAG_SUBSCRIPTION: i32 = 0x4;

/// A SEND_MESSAGE_V2 request of producer group "pg" (topics auto-created from TBW102 with 4
/// queues).
pub fn send_v2(
    topic: &str,
    queue_id: i32,
    body: bytes::Bytes,
    properties: &[(&str, &str)],
    flag: i32,
    st: ringmq::remoting::command::SerializeType,
) -> RemotingCommand {
    let mut header = send_v2_header("pg", topic, queue_id);
    header.flag = flag;
    header.properties = Some(ringmq::store::format::encode_properties(
        properties.iter().copied(),
    ));
    send_v2_request(&header, body, st)
}

/// The header of a plain SEND_MESSAGE_V2 of `producer_group` to `topic`'s `queue_id`: no
/// flags, no properties, a fixed born timestamp, auto-creation from TBW102 with 4 queues.
pub fn send_v2_header(
    producer_group: &str,
    topic: &str,
    queue_id: i32,
) -> ringmq::remoting::headers::SendMessageRequestHeader {
    ringmq::remoting::headers::SendMessageRequestHeader {
        producer_group: producer_group.into(),
        topic: topic.into(),
        default_topic: "TBW102".into(),
        default_topic_queue_nums: 4,
        queue_id,
        sys_flag: 0,
        born_timestamp: 1_700_000_000_000,
        flag: 0,
        properties: None,
        reconsume_times: Some(0),
        unit_mode: false,
        batch: false,
        max_reconsume_times: None,
        broker_name: None,
    }
}

/// A SEND_MESSAGE_V2 request with `header` and `body`.
pub fn send_v2_request(
    header: &ringmq::remoting::headers::SendMessageRequestHeader,
    body: bytes::Bytes,
    st: ringmq::remoting::command::SerializeType,
) -> RemotingCommand {
    use ringmq::remoting::codes::request_code;
    let mut cmd = RemotingCommand::request(request_code::SEND_MESSAGE_V2).with_serialize_type(st);
    header.encode(&mut cmd);
    cmd.with_body(body)
}

/// A PULL_MESSAGE / LITE_PULL_MESSAGE request (`code`) of consumer group "cg" carrying its TAG
/// subscription in the header (FLAG_SUBSCRIPTION is added to `sys_flag`).
#[allow(clippy::too_many_arguments)]
pub fn pull(
    code: i32,
    topic: &str,
    queue_id: i32,
    offset: i64,
    max_msg_nums: i32,
    sys_flag: i32,
    sub: &str,
    suspend_timeout_ms: i64,
    st: ringmq::remoting::command::SerializeType,
) -> RemotingCommand {
    use ringmq::remoting::headers::PullMessageRequestHeader;
    let mut cmd = RemotingCommand::request(code).with_serialize_type(st);
    PullMessageRequestHeader {
        consumer_group: "cg".into(),
        topic: topic.into(),
        queue_id,
        queue_offset: offset,
        max_msg_nums,
        sys_flag: sys_flag | PULL_FLAG_SUBSCRIPTION,
        commit_offset: 0,
        suspend_timeout_millis: suspend_timeout_ms,
        subscription: Some(sub.into()),
        sub_version: 0,
        expression_type: Some("TAG".into()),
        max_msg_bytes: None,
        request_source: None,
        proxy_froward_client_id: None,
    }
    .encode(&mut cmd);
    cmd
}

/// A PULL_MESSAGE of up to 32 messages of `topic`'s queue 0 from offset 0, every tag, not
/// suspended, JSON headers.
pub fn pull_head(topic: &str) -> RemotingCommand {
    pull(
        ringmq::remoting::codes::request_code::PULL_MESSAGE,
        topic,
        0,
        0,
        32,
        0,
        "*",
        0,
        ringmq::remoting::command::SerializeType::Json,
    )
}

/// `GET path` over HTTP/1.1 from `addr`; the status code and the body.
pub fn http_get(addr: &str, path: &str) -> (u16, String) {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(addr).expect("connect metrics listener");
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut raw = String::new();
    s.read_to_string(&mut raw).expect("read HTTP response");
    let (head, body) = raw.split_once("\r\n\r\n").expect("an HTTP head");
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .expect("a status code");
    (status, body.to_string())
}

/// A broker whose metrics listener is on a free port; returns it and the listener's address.
pub fn broker_with_metrics(env: &[(&str, &str)]) -> (Broker, String) {
    let port = free_port();
    let addr = format!("127.0.0.1:{port}");
    let mut all: Vec<(&str, &str)> = vec![("RINGMQ_METRICS_LISTEN", addr.as_str())];
    all.extend_from_slice(env);
    (Broker::start(&all), addr)
}
