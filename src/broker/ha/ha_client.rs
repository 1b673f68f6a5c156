//! The slave's connection to its master (Java `HAClient`): connect to the master's HA port,
//! report the slave's CommitLog max offset, append every frame the master sends through the
//! store's own path, and report again after each read that appended bytes and every heartbeat
//! interval. A frame whose offset is not the slave's end (a gap), a frame larger than the read
//! buffer, a failed append, or a master silent for the housekeeping interval closes the
//! connection; the client connects again after [`RECONNECT_INTERVAL`], as it does when the
//! master address changes.

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::frame::{
    decode_frame_header, encode_offset_report, FRAME_HEADER_BYTES, SLAVE_READ_BUFFER_BYTES,
};
use super::ha_connection::is_timeout;
use crate::common::StopFlag;
use crate::store::{MessageStore, StoreError};

/// Wait between connection attempts (Java `HAClient` waits 5 s).
pub const RECONNECT_INTERVAL: Duration = Duration::from_secs(5);
/// How often a slave that does not know its master yet looks again.
const ADDRESS_POLL_INTERVAL: Duration = Duration::from_millis(100);
/// Longest a connect to the master's HA port may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);
/// Longest a blocked read waits before the client checks the stop flag, its heartbeat and the
/// housekeeping interval.
const READ_POLL_INTERVAL: Duration = Duration::from_millis(200);

/// Why the client closed a connection to its master.
#[derive(Debug, thiserror::Error)]
pub enum HaClientError {
    #[error("HA connection I/O failed: {0}")]
    Io(#[from] io::Error),
    #[error("master closed the HA connection")]
    Closed,
    #[error("master sent nothing for the housekeeping interval ({0:?})")]
    Silent(Duration),
    #[error(
        "master frame at offset {master} does not continue this slave's CommitLog end {slave}"
    )]
    Gap { master: i64, slave: i64 },
    #[error(
        "master frame of {0} bytes does not fit the {SLAVE_READ_BUFFER_BYTES}-byte read buffer"
    )]
    FrameTooLarge(i64),
    #[error("appending the master's bytes failed: {0}")]
    Append(#[from] StoreError),
}

/// Where the slave's master is: a fixed `RINGMQ_HA_MASTER_ADDRESS`, or the `haServerAddr` the
/// name server answered to the last registration.
#[derive(Debug, Default)]
pub struct MasterAddress {
    addr: Mutex<Option<String>>,
    /// The client follows the master now.
    connected: AtomicBool,
}

impl MasterAddress {
    pub fn new(fixed: Option<String>) -> Self {
        MasterAddress {
            addr: Mutex::new(fixed),
            connected: AtomicBool::new(false),
        }
    }

    /// Whether the slave's client is connected to its master.
    pub fn is_connected(&self) -> bool {
        self.connected.load(Ordering::Acquire)
    }

    pub fn get(&self) -> Option<String> {
        self.addr.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Sets the address; `true` when it changed.
    pub fn set(&self, addr: Option<String>) -> bool {
        let mut guard = self.addr.lock().unwrap_or_else(|e| e.into_inner());
        if *guard == addr {
            return false;
        }
        *guard = addr;
        true
    }
}

/// The settings of the slave's client.
#[derive(Debug, Clone, Copy)]
pub struct ClientParams {
    pub heartbeat_interval: Duration,
    pub housekeeping_interval: Duration,
}

/// Runs the client until `stop` is raised: connect, follow, reconnect.
pub fn run(
    store: &MessageStore,
    master: &Arc<MasterAddress>,
    params: ClientParams,
    stop: &StopFlag,
) {
    while !stop.is_raised() {
        let Some(addr) = master.get() else {
            // Not known yet: the first registration answer brings it.
            if stop.wait_timeout(ADDRESS_POLL_INTERVAL) {
                return;
            }
            continue;
        };
        match connect(&addr) {
            Ok(stream) => {
                tracing::info!(master = %addr, offset = store.max_phy_offset(), "HA connected to master");
                master.connected.store(true, Ordering::Release);
                let followed = follow(stream, store, master, &addr, params, stop);
                master.connected.store(false, Ordering::Release);
                match followed {
                    Ok(()) => tracing::info!(master = %addr, "HA connection to master closed"),
                    Err(e) => {
                        tracing::warn!(master = %addr, error = %e, "HA connection to master closed")
                    }
                }
            }
            Err(e) => tracing::debug!(master = %addr, error = %e, "HA connect to master failed"),
        }
        if stop.wait_timeout(RECONNECT_INTERVAL) {
            return;
        }
    }
}

fn connect(addr: &str) -> io::Result<TcpStream> {
    let socket_addr: SocketAddr = addr.trim().parse().map_err(|_| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("master HA address {addr:?} is not ip:port"),
        )
    })?;
    TcpStream::connect_timeout(&socket_addr, CONNECT_TIMEOUT)
}

/// Follows the master on `stream` until it closes, fails, goes silent, the master address
/// changes (`Ok`) or the broker stops (`Ok`).
pub fn follow(
    mut stream: TcpStream,
    store: &MessageStore,
    master: &MasterAddress,
    addr: &str,
    params: ClientParams,
    stop: &StopFlag,
) -> Result<(), HaClientError> {
    stream.set_nodelay(true)?;
    stream.set_read_timeout(Some(READ_POLL_INTERVAL.min(params.heartbeat_interval)))?;
    stream.set_write_timeout(Some(params.housekeeping_interval))?;
    let mut reported = store.max_phy_offset();
    stream.write_all(&encode_offset_report(reported))?;
    let mut last_write = Instant::now();
    let mut last_read = Instant::now();
    let mut buf = vec![0u8; SLAVE_READ_BUFFER_BYTES];
    let mut filled = 0usize;
    while !stop.is_raised() {
        if master.get().as_deref() != Some(addr) {
            return Ok(());
        }
        match stream.read(&mut buf[filled..]) {
            Ok(0) => return Err(HaClientError::Closed),
            Ok(n) => {
                last_read = Instant::now();
                filled += n;
                let consumed = dispatch_frames(store, &buf[..filled])?;
                buf.copy_within(consumed..filled, 0);
                filled -= consumed;
            }
            Err(e) if is_timeout(&e) || e.kind() == io::ErrorKind::Interrupted => {
                if last_read.elapsed() > params.housekeeping_interval {
                    return Err(HaClientError::Silent(params.housekeeping_interval));
                }
            }
            Err(e) => return Err(e.into()),
        }
        let max = store.max_phy_offset();
        if max > reported || last_write.elapsed() >= params.heartbeat_interval {
            stream.write_all(&encode_offset_report(max))?;
            reported = max;
            last_write = Instant::now();
        }
    }
    Ok(())
}

/// Appends every complete frame at the start of `buf`; returns the bytes they took.
pub fn dispatch_frames(store: &MessageStore, buf: &[u8]) -> Result<usize, HaClientError> {
    let mut pos = 0usize;
    while let Some(header) = decode_frame_header(&buf[pos..]) {
        let body = header.body_bytes as i64;
        if body < 0 || body as usize > SLAVE_READ_BUFFER_BYTES - FRAME_HEADER_BYTES {
            return Err(HaClientError::FrameTooLarge(body));
        }
        // Java `HAClient.dispatchReadRequest`: a slave with data checks the offset as soon as
        // the header is in; an empty slave takes the master's start.
        let slave = store.max_phy_offset();
        if slave != 0 && header.phy_offset != slave {
            return Err(HaClientError::Gap {
                master: header.phy_offset,
                slave,
            });
        }
        let end = pos + FRAME_HEADER_BYTES + body as usize;
        if buf.len() < end {
            break;
        }
        store.append_to_commit_log(header.phy_offset, &buf[pos + FRAME_HEADER_BYTES..end])?;
        pos = end;
    }
    Ok(pos)
}
