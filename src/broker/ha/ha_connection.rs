//! One slave connection on the master (Java `HAConnection`): a read thread takes the slave's
//! offset reports (acks), a write thread sends the CommitLog from the slave's offset in frames
//! of at most the transfer batch, and an empty frame after each heartbeat interval without
//! data. Either thread closes the connection for both: on an I/O error, on end of stream, and
//! when the slave was silent for the housekeeping interval.

use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use bytes::BytesMut;

use super::frame::{self, encode_frame_header, FRAME_HEADER_BYTES, OFFSET_REPORT_BYTES};
use super::group_transfer_service::GroupTransferService;
use crate::common::StopFlag;
use crate::store::{FileRegion, MessageStore};

/// Longest a blocked read waits before the thread checks the stop flag and the housekeeping
/// interval.
const READ_POLL_INTERVAL: Duration = Duration::from_millis(500);
/// Longest an idle writer sleeps before it looks for new CommitLog bytes again (Java's
/// `WriteSocketService` waits 100 ms), unless an append wakes it first.
const WRITE_IDLE_WAIT: Duration = Duration::from_millis(100);
/// Longest the writer waits for the slave's first offset report, in steps of this.
const FIRST_REPORT_POLL: Duration = Duration::from_millis(10);

/// How the master puts a frame's body on the socket.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BodyTransfer {
    /// Read the bytes (through the store's read engine) and write them with the header.
    Copy,
    /// Write the header, then `sendfile` the bytes from the CommitLog file.
    ZeroCopy,
    /// Zero-copy for bodies of at least `min_bytes`, copy below.
    Auto { min_bytes: usize },
}

/// The settings of every connection of one master.
#[derive(Debug, Clone, Copy)]
pub struct ConnectionParams {
    pub transfer_batch_bytes: usize,
    pub heartbeat_interval: Duration,
    pub housekeeping_interval: Duration,
    pub commit_log_file_size_bytes: i64,
    pub body_transfer: BodyTransfer,
}

/// Byte counters of a master's HA sending (for the bench and the logs).
#[derive(Debug, Default)]
pub struct TransferCounters {
    pub frames: AtomicU64,
    pub body_bytes: AtomicU64,
    pub zero_copy_bytes: AtomicU64,
}

/// One slave's connection.
pub struct HaConnection {
    stream: TcpStream,
    pub peer: SocketAddr,
    closed: AtomicBool,
    /// The slave's first report (-1 until it arrived): where sending starts.
    slave_request_offset: AtomicI64,
    /// The slave's latest report.
    slave_ack_offset: AtomicI64,
    group: Arc<GroupTransferService>,
}

impl HaConnection {
    /// Starts the read and write threads of a slave that connected.
    pub fn start(
        stream: TcpStream,
        store: Arc<MessageStore>,
        group: Arc<GroupTransferService>,
        params: ConnectionParams,
        counters: Arc<TransferCounters>,
        stop: &StopFlag,
    ) -> io::Result<(Arc<HaConnection>, Vec<JoinHandle<()>>)> {
        let peer = stream.peer_addr()?;
        stream.set_nodelay(true)?;
        stream.set_read_timeout(Some(READ_POLL_INTERVAL))?;
        stream.set_write_timeout(Some(params.housekeeping_interval))?;
        let conn = Arc::new(HaConnection {
            stream: stream.try_clone()?,
            peer,
            closed: AtomicBool::new(false),
            slave_request_offset: AtomicI64::new(-1),
            slave_ack_offset: AtomicI64::new(-1),
            group,
        });
        conn.group.connection_opened();
        tracing::info!(slave = %peer, "HA slave connected");
        let reader = {
            let (c, stop) = (conn.clone(), stop.clone());
            let mut read_stream = stream
                .try_clone()
                .inspect_err(|_| conn.close("no socket"))?;
            spawn("ringmq-ha-read", move || {
                c.read_acks(&mut read_stream, &params, &stop);
                c.close("read side ended");
            })
            .inspect_err(|_| conn.close("no read thread"))?
        };
        let writer = {
            let (c, stop) = (conn.clone(), stop.clone());
            let mut stream = stream;
            spawn("ringmq-ha-write", move || {
                let why = match c.write_frames(&mut stream, &store, &params, &counters, &stop) {
                    Ok(()) => "stopped".to_owned(),
                    Err(e) => format!("write failed: {e}"),
                };
                c.close(&why);
            })
            // The reader ends on the closed socket.
            .inspect_err(|_| conn.close("no write thread"))?
        };
        Ok((conn, vec![reader, writer]))
    }

    /// The slave's latest acknowledged offset (-1 before its first report).
    pub fn slave_ack_offset(&self) -> i64 {
        self.slave_ack_offset.load(Ordering::Acquire)
    }

    pub fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }

    /// Closes the connection once: both threads see the socket shut down.
    pub fn close(&self, why: &str) {
        if self.closed.swap(true, Ordering::AcqRel) {
            return;
        }
        let _ = self.stream.shutdown(Shutdown::Both);
        self.group.connection_closed();
        tracing::info!(slave = %self.peer, why, "HA slave connection closed");
    }

    /// Reads 8-byte offset reports until the stream ends, fails, is silent for the
    /// housekeeping interval, or the broker stops.
    fn read_acks(&self, stream: &mut TcpStream, params: &ConnectionParams, stop: &StopFlag) {
        let mut buf = [0u8; OFFSET_REPORT_BYTES];
        let mut filled = 0usize;
        let mut last_read = Instant::now();
        while !stop.is_raised() && !self.is_closed() {
            match stream.read(&mut buf[filled..]) {
                Ok(0) => return,
                Ok(n) => {
                    last_read = Instant::now();
                    filled += n;
                    if filled == OFFSET_REPORT_BYTES {
                        filled = 0;
                        self.acked(frame::decode_offset_report(buf));
                    }
                }
                Err(e) if is_timeout(&e) => {
                    if last_read.elapsed() > params.housekeeping_interval {
                        tracing::warn!(slave = %self.peer, "HA slave silent past the housekeeping interval");
                        return;
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    tracing::debug!(slave = %self.peer, error = %e, "HA read failed");
                    return;
                }
            }
        }
    }

    fn acked(&self, offset: i64) {
        self.slave_ack_offset.store(offset, Ordering::Release);
        let _ = self.slave_request_offset.compare_exchange(
            -1,
            offset,
            Ordering::AcqRel,
            Ordering::Acquire,
        );
        self.group.slave_acked(offset);
    }

    /// Waits for the slave's first report, then sends frames until closed or stopped.
    fn write_frames(
        &self,
        stream: &mut TcpStream,
        store: &MessageStore,
        params: &ConnectionParams,
        counters: &TransferCounters,
        stop: &StopFlag,
    ) -> io::Result<()> {
        let requested = loop {
            if self.is_closed() || stop.wait_timeout(FIRST_REPORT_POLL) {
                return Ok(());
            }
            let offset = self.slave_request_offset.load(Ordering::Acquire);
            if offset >= 0 {
                break offset;
            }
        };
        let mut next = start_offset(requested, store.max_phy_offset(), params);
        tracing::info!(slave = %self.peer, from = next, requested, "HA transfer starts");
        let mut last_write = Instant::now();
        if next < store.min_phy_offset() {
            // Java's master waits the same way: the bytes are gone, nothing can be sent.
            tracing::warn!(slave = %self.peer, from = next, min = store.min_phy_offset(),
                "HA slave asks for CommitLog bytes retention already deleted; it gets heartbeats only");
        }
        while !stop.is_raised() && !self.is_closed() {
            let generation = self.group.data_generation();
            if let Some(region) = store.commit_log_region(next, params.transfer_batch_bytes) {
                let len = region.len_bytes;
                send_frame(stream, store, &region, params.body_transfer, counters)?;
                next += len as i64;
                last_write = Instant::now();
                continue;
            }
            if last_write.elapsed() >= params.heartbeat_interval {
                stream.write_all(&encode_frame_header(next, 0))?;
                last_write = Instant::now();
            }
            let until_heartbeat = params
                .heartbeat_interval
                .saturating_sub(last_write.elapsed());
            self.group
                .wait_for_data(generation, WRITE_IDLE_WAIT.min(until_heartbeat));
        }
        Ok(())
    }
}

/// Where sending starts for a slave that reported `requested` (Java
/// `WriteSocketService.run`): a slave with nothing gets the start of the master's last
/// CommitLog file, any other slave its own offset.
pub fn start_offset(requested: i64, master_max_phy_offset: i64, params: &ConnectionParams) -> i64 {
    if requested != 0 {
        return requested;
    }
    let file_size = params.commit_log_file_size_bytes;
    (master_max_phy_offset - master_max_phy_offset % file_size).max(0)
}

/// One frame: the header and the region's bytes, copied or sent from the file.
fn send_frame(
    stream: &mut TcpStream,
    store: &MessageStore,
    region: &FileRegion,
    transfer: BodyTransfer,
    counters: &TransferCounters,
) -> io::Result<()> {
    let len = region.len_bytes;
    // The region is at most the transfer batch, which validation keeps below i32::MAX.
    let header = encode_frame_header(region.phy_offset(), len as i32);
    let zero_copy = match transfer {
        BodyTransfer::Copy => false,
        BodyTransfer::ZeroCopy => true,
        BodyTransfer::Auto { min_bytes } => len >= min_bytes,
    };
    if zero_copy {
        stream.write_all(&header)?;
        sendfile_all(stream, region)?;
        counters
            .zero_copy_bytes
            .fetch_add(len as u64, Ordering::Relaxed);
    } else {
        let mut buf = BytesMut::with_capacity(FRAME_HEADER_BYTES + len);
        buf.extend_from_slice(&header);
        store
            .read_regions(std::slice::from_ref(region), &mut buf)
            .map_err(io::Error::other)?;
        stream.write_all(&buf)?;
    }
    counters.frames.fetch_add(1, Ordering::Relaxed);
    counters.body_bytes.fetch_add(len as u64, Ordering::Relaxed);
    Ok(())
}

/// `sendfile(2)` of the whole region, repeated over short transfers.
fn sendfile_all(stream: &TcpStream, region: &FileRegion) -> io::Result<()> {
    let mut offset = region.offset_bytes as libc::off_t;
    let end = offset + region.len_bytes as libc::off_t;
    while offset < end {
        let want = (end - offset) as usize;
        match nix::sys::sendfile::sendfile(stream, region.file(), Some(&mut offset), want) {
            Ok(0) => {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "sendfile sent nothing: the CommitLog file is shorter than the region",
                ))
            }
            Ok(_) => {}
            Err(nix::errno::Errno::EINTR) => {}
            Err(nix::errno::Errno::EAGAIN) => {
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    "slave did not read within the housekeeping interval",
                ))
            }
            Err(e) => return Err(io::Error::from(e)),
        }
    }
    Ok(())
}

pub(super) fn is_timeout(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
    )
}

pub(super) fn spawn(name: &str, f: impl FnOnce() + Send + 'static) -> io::Result<JoinHandle<()>> {
    std::thread::Builder::new().name(name.to_owned()).spawn(f)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params() -> ConnectionParams {
        ConnectionParams {
            transfer_batch_bytes: 32 * 1024,
            heartbeat_interval: Duration::from_secs(5),
            housekeeping_interval: Duration::from_secs(20),
            commit_log_file_size_bytes: 1 << 30,
            body_transfer: BodyTransfer::Copy,
        }
    }

    #[test]
    fn an_empty_slave_starts_at_the_masters_last_file() {
        assert_eq!(start_offset(0, 0, &params()), 0);
        assert_eq!(start_offset(0, (1 << 30) - 1, &params()), 0);
        assert_eq!(start_offset(0, (3 << 30) + 500, &params()), 3 << 30);
        assert_eq!(start_offset(4242, (3 << 30) + 500, &params()), 4242);
    }
}
