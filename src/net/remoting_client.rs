//! A small blocking remoting client over `std::net`, for the broker's own calls to name servers
//! (REGISTER_BROKER / UNREGISTER_BROKER) and for tests. One request at a time per connection.

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::sync::atomic::{AtomicI32, Ordering};
use std::time::Duration;

use bytes::BytesMut;

use crate::remoting::command::RemotingCommand;
use crate::remoting::frame::{decode_frame, encode_frame, FRAME_SIZE_MAX_BYTES};

/// Bytes read from the socket at once, and the initial size of the frame buffer: one read
/// holds a typical response.
const READ_CHUNK_BYTES: usize = 64 * 1024;

/// Request ids of this process's outgoing requests.
static NEXT_OPAQUE: AtomicI32 = AtomicI32::new(1);

/// The next request id (used for broker-initiated requests too).
pub fn next_opaque() -> i32 {
    NEXT_OPAQUE.fetch_add(1, Ordering::Relaxed) & i32::MAX
}

#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("{op} {addr}: {source}")]
    Io {
        op: &'static str,
        addr: String,
        #[source]
        source: io::Error,
    },
    #[error("bad frame from {addr}: {source}")]
    Codec {
        addr: String,
        #[source]
        source: crate::remoting::error::CodecError,
    },
    #[error("{addr} closed the connection")]
    Closed { addr: String },
}

pub struct BlockingClient {
    stream: TcpStream,
    addr: String,
    buf: BytesMut,
}

impl BlockingClient {
    pub fn connect(addr: &str, timeout: Duration) -> Result<Self, ClientError> {
        let io_err = |op| {
            move |source| ClientError::Io {
                op,
                addr: addr.to_string(),
                source,
            }
        };
        let sock: SocketAddr = addr
            .to_socket_addrs()
            .map_err(io_err("resolve"))?
            .next()
            .ok_or_else(|| io_err("resolve")(io::Error::other("no address")))?;
        let stream = TcpStream::connect_timeout(&sock, timeout).map_err(io_err("connect"))?;
        Self::configured(stream, addr, timeout)
    }

    /// [`Self::connect`] from the local IPv4 address `local_ip` (tests on loopback use
    /// 127.0.0.2 to be another host than 127.0.0.1). The connect itself blocks.
    pub fn connect_from(
        addr: &str,
        local_ip: std::net::Ipv4Addr,
        timeout: Duration,
    ) -> Result<Self, ClientError> {
        use nix::sys::socket::{self as sock, AddressFamily, SockFlag, SockType, SockaddrIn};
        let io_err = |op| {
            move |source: io::Error| ClientError::Io {
                op,
                addr: addr.to_string(),
                source,
            }
        };
        let Some(SocketAddr::V4(remote)) =
            addr.to_socket_addrs().map_err(io_err("resolve"))?.next()
        else {
            return Err(io_err("resolve")(io::Error::other("no IPv4 address")));
        };
        let fd = sock::socket(
            AddressFamily::Inet,
            SockType::Stream,
            SockFlag::SOCK_CLOEXEC,
            None,
        )
        .map_err(|e| io_err("socket")(e.into()))?;
        let local = SockaddrIn::from(std::net::SocketAddrV4::new(local_ip, 0));
        sock::bind(std::os::fd::AsRawFd::as_raw_fd(&fd), &local)
            .map_err(|e| io_err("bind")(e.into()))?;
        sock::connect(
            std::os::fd::AsRawFd::as_raw_fd(&fd),
            &SockaddrIn::from(remote),
        )
        .map_err(|e| io_err("connect")(e.into()))?;
        Self::configured(TcpStream::from(fd), addr, timeout)
    }

    fn configured(stream: TcpStream, addr: &str, timeout: Duration) -> Result<Self, ClientError> {
        let io_err = |op| {
            move |source| ClientError::Io {
                op,
                addr: addr.to_string(),
                source,
            }
        };
        stream
            .set_read_timeout(Some(timeout))
            .map_err(io_err("configure"))?;
        stream
            .set_write_timeout(Some(timeout))
            .map_err(io_err("configure"))?;
        stream.set_nodelay(true).map_err(io_err("configure"))?;
        Ok(BlockingClient {
            stream,
            addr: addr.to_string(),
            buf: BytesMut::with_capacity(READ_CHUNK_BYTES),
        })
    }

    /// Sends `request` with a fresh opaque and waits for the response carrying it.
    pub fn invoke(&mut self, mut request: RemotingCommand) -> Result<RemotingCommand, ClientError> {
        request.opaque = next_opaque();
        self.send(&request)?;
        loop {
            let cmd = self.read_command()?;
            if cmd.is_response() && cmd.opaque == request.opaque {
                return Ok(cmd);
            }
        }
    }

    pub fn send(&mut self, request: &RemotingCommand) -> Result<(), ClientError> {
        let mut out = BytesMut::new();
        encode_frame(request, &mut out).map_err(|source| ClientError::Codec {
            addr: self.addr.clone(),
            source,
        })?;
        self.stream
            .write_all(&out)
            .map_err(|source| ClientError::Io {
                op: "write",
                addr: self.addr.clone(),
                source,
            })
    }

    /// The next whole frame from the server.
    pub fn read_command(&mut self) -> Result<RemotingCommand, ClientError> {
        loop {
            if let Some(cmd) =
                decode_frame(&mut self.buf, FRAME_SIZE_MAX_BYTES).map_err(|source| {
                    ClientError::Codec {
                        addr: self.addr.clone(),
                        source,
                    }
                })?
            {
                return Ok(cmd);
            }
            let mut chunk = [0u8; READ_CHUNK_BYTES];
            let n = self
                .stream
                .read(&mut chunk)
                .map_err(|source| ClientError::Io {
                    op: "read",
                    addr: self.addr.clone(),
                    source,
                })?;
            if n == 0 {
                return Err(ClientError::Closed {
                    addr: self.addr.clone(),
                });
            }
            self.buf.extend_from_slice(&chunk[..n]);
        }
    }
}
