//! Master and slave under test: a standalone `ringmq namesrv` process (it must outlive a
//! SIGKILLed master), a master and a slave of one broker name registering with it, and raw
//! remoting calls to one broker (GET_BROKER_RUNTIME_INFO, QUERY_CONSUMER_OFFSET) to see what
//! each served and stored.

use std::collections::BTreeMap;
use std::io::{self, Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use tempfile::TempDir;

use crate::broker::{
    die_with_spawning_thread, ringmq_binary, BrokerProcess, HarnessError, POLL_INTERVAL,
};

/// Text `ringmq namesrv` prints once it listens.
pub const NAMESRV_READY_MARKER: &str = "ringmq name server listening";
/// How long one raw call may take.
pub const RAW_CALL_TIMEOUT: Duration = Duration::from_secs(5);
/// Largest response frame a raw call reads.
pub const RAW_FRAME_MAX_BYTES: usize = 16 * 1024 * 1024;

/// True (after saying so on stderr) when `RINGMQ_IT_EXTERNAL_NAMESRV` is set: test `test`
/// starts its own name server, master and slave, and the external name server names one
/// broker, so it is skipped.
pub fn skip_with_external_namesrv(test: &str) -> bool {
    let Some(external) = crate::broker::external_namesrv_addr() else {
        return false;
    };
    eprintln!(
        "[client-it] SKIPPED {test}: it starts its own name server, master and slave, and \
         {external} names one broker"
    );
    true
}

/// A standalone name server process on a free loopback port.
pub struct NamesrvProcess {
    child: Option<Child>,
    port: u16,
    _dir: TempDir,
}

impl NamesrvProcess {
    pub fn start() -> Result<Self, HarnessError> {
        let dir = tempfile::tempdir().map_err(|source| HarnessError::Io {
            context: "creating the name server temp dir".into(),
            source,
        })?;
        let port = TcpListener::bind(SocketAddr::from((Ipv4Addr::LOCALHOST, 0)))
            .and_then(|l| l.local_addr())
            .map_err(|source| HarnessError::Io {
                context: "picking a name server port".into(),
                source,
            })?
            .port();
        let log_path = dir.path().join("namesrv.log");
        let log = std::fs::File::create(&log_path).map_err(|source| HarnessError::Io {
            context: "creating the name server log".into(),
            source,
        })?;
        let log_err = log.try_clone().map_err(|source| HarnessError::Io {
            context: "duplicating the name server log".into(),
            source,
        })?;
        let mut command = Command::new(ringmq_binary()?);
        command
            .arg("namesrv")
            .env("RINGMQ_NAMESRV_LISTEN_PORT", port.to_string())
            .stdin(Stdio::null())
            .stdout(Stdio::from(log))
            .stderr(Stdio::from(log_err));
        // The name server dies with the thread that started it.
        die_with_spawning_thread(&mut command);
        let child = command.spawn().map_err(|source| HarnessError::Io {
            context: "spawning ringmq namesrv".into(),
            source,
        })?;
        let namesrv = NamesrvProcess {
            child: Some(child),
            port,
            _dir: dir,
        };
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let text = std::fs::read_to_string(&log_path).unwrap_or_default();
            if text.contains(NAMESRV_READY_MARKER) {
                return Ok(namesrv);
            }
            if Instant::now() >= deadline {
                return Err(HarnessError::NotReady {
                    timeout_ms: 30_000,
                    waiting_for: NAMESRV_READY_MARKER.into(),
                    log_path: log_path.display().to_string(),
                    log_tail: text,
                });
            }
            std::thread::sleep(POLL_INTERVAL);
        }
    }

    pub fn addr(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }
}

impl Drop for NamesrvProcess {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// A name server, a master (brokerId 0) and a slave (brokerId 1) of one broker name.
pub struct HaGroup {
    pub namesrv: NamesrvProcess,
    pub master: BrokerProcess,
    pub slave: BrokerProcess,
}

impl HaGroup {
    /// Starts the three; `common` goes to both brokers (after the group's own settings),
    /// `master_env` / `slave_env` to one each.
    pub fn start(
        broker_name: &str,
        common: &[(&str, &str)],
        master_env: &[(&str, &str)],
        slave_env: &[(&str, &str)],
    ) -> Result<Self, HarnessError> {
        let namesrv = NamesrvProcess::start()?;
        let addr = namesrv.addr();
        let mut base: Vec<(&str, &str)> = vec![
            ("RINGMQ_NAMESRV_ADDR", addr.as_str()),
            ("RINGMQ_BROKER_NAME", broker_name),
            ("RINGMQ_BROKER_REGISTER_NAME_SERVER_PERIOD_MS", "1000"),
        ];
        base.extend_from_slice(common);
        let mut m = base.clone();
        m.extend_from_slice(master_env);
        let master = BrokerProcess::start(&m)?;
        let mut s = base;
        s.extend_from_slice(&[
            ("RINGMQ_BROKER_ROLE", "SLAVE"),
            ("RINGMQ_BROKER_ID", "1"),
            ("RINGMQ_BROKER_SLAVE_SYNC_INTERVAL_MS", "500"),
        ]);
        s.extend_from_slice(slave_env);
        let slave = BrokerProcess::start(&s)?;
        Ok(HaGroup {
            namesrv,
            master,
            slave,
        })
    }
}

/// A RocketMQ remoting call with a JSON header: `code` with `ext` fields, no body. Returns
/// the response's code, its extFields and body.
pub fn raw_call(
    addr: &str,
    code: i32,
    ext: &[(&str, String)],
) -> io::Result<(i32, BTreeMap<String, String>, Vec<u8>)> {
    let sock: SocketAddr = addr
        .parse()
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, format!("{addr}: {e}")))?;
    let mut stream = TcpStream::connect_timeout(&sock, RAW_CALL_TIMEOUT)?;
    stream.set_read_timeout(Some(RAW_CALL_TIMEOUT))?;
    stream.set_write_timeout(Some(RAW_CALL_TIMEOUT))?;
    let ext: serde_json::Map<String, serde_json::Value> = ext
        .iter()
        .map(|(k, v)| (k.to_string(), serde_json::Value::String(v.clone())))
        .collect();
    let header = serde_json::json!({
        "code": code, "flag": 0, "language": "JAVA", "opaque": 1, "version": 479,
        "serializeTypeCurrentRPC": "JSON", "extFields": ext,
    })
    .to_string();
    let mut frame = Vec::with_capacity(8 + header.len());
    frame.extend_from_slice(&(4 + header.len() as u32).to_be_bytes());
    frame.extend_from_slice(&(header.len() as u32).to_be_bytes());
    frame.extend_from_slice(header.as_bytes());
    stream.write_all(&frame)?;
    let mut len = [0u8; 4];
    stream.read_exact(&mut len)?;
    let total = u32::from_be_bytes(len) as usize;
    if !(4..=RAW_FRAME_MAX_BYTES).contains(&total) {
        return Err(io::Error::new(io::ErrorKind::InvalidData, "frame length"));
    }
    let mut rest = vec![0u8; total];
    stream.read_exact(&mut rest)?;
    let header_len =
        (u32::from_be_bytes([rest[0], rest[1], rest[2], rest[3]]) & 0x00FF_FFFF) as usize;
    let header_end = 4usize
        .checked_add(header_len)
        .filter(|end| *end <= rest.len())
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "header length"))?;
    let header: serde_json::Value = serde_json::from_slice(&rest[4..header_end])
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
    let code = header["code"].as_i64().unwrap_or(-1) as i32;
    let ext = header["extFields"]
        .as_object()
        .map(|m| {
            m.iter()
                .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_string()))
                .collect()
        })
        .unwrap_or_default();
    Ok((code, ext, rest[header_end..].to_vec()))
}

/// GET_BROKER_RUNTIME_INFO (28) of the broker at `addr`: its KVTable.
pub fn runtime_info(addr: &str) -> io::Result<BTreeMap<String, String>> {
    let (code, _, body) = raw_call(addr, 28, &[])?;
    if code != 0 {
        return Err(io::Error::other(format!(
            "runtime info answered code {code}"
        )));
    }
    let body: serde_json::Value =
        serde_json::from_slice(&body).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
    Ok(body["table"]
        .as_object()
        .map(|m| {
            m.iter()
                .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_string()))
                .collect()
        })
        .unwrap_or_default())
}

/// One integer value of the broker's runtime info (`msgGetTotalTodayNow`, ...).
pub fn runtime_number(addr: &str, key: &str) -> io::Result<i64> {
    let info = runtime_info(addr)?;
    info.get(key)
        .and_then(|v| v.parse().ok())
        .ok_or_else(|| io::Error::other(format!("no integer {key} in the runtime info")))
}

/// QUERY_CONSUMER_OFFSET (14): the group's committed offset of a queue on the broker at
/// `addr`, `None` when it has none.
pub fn consumer_offset(
    addr: &str,
    group: &str,
    topic: &str,
    queue_id: i32,
) -> io::Result<Option<i64>> {
    let (code, ext, _) = raw_call(
        addr,
        14,
        &[
            ("consumerGroup", group.to_string()),
            ("topic", topic.to_string()),
            ("queueId", queue_id.to_string()),
        ],
    )?;
    Ok((code == 0)
        .then(|| ext.get("offset").and_then(|o| o.parse().ok()))
        .flatten())
}
