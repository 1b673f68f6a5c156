//! Why an admin verb failed. The message is what `ringmq admin` prints before exiting non-zero;
//! a broker's refusal carries the broker's own remark.

use crate::net::remoting_client::ClientError;
use crate::remoting::body::json::JsonBodyError;
use crate::remoting::codes::response_code;

#[derive(Debug, thiserror::Error)]
pub enum AdminError {
    #[error("{0}")]
    Client(#[from] ClientError),
    /// The server answered with an error code.
    #[error("{addr} answered {} ({code}): {remark}", response_code::name(*code).unwrap_or("UNKNOWN"))]
    Refused {
        addr: String,
        code: i32,
        remark: String,
    },
    #[error("{what} from {addr} is not readable: {source}")]
    Body {
        what: &'static str,
        addr: String,
        #[source]
        source: JsonBodyError,
    },
    #[error("{what} from {addr} is not readable: {reason}")]
    Record {
        what: &'static str,
        addr: String,
        reason: String,
    },
    /// Arguments that cannot work together, or name nothing.
    #[error("{0}")]
    Usage(String),
    #[error("no name server address: pass -n ADDR[;ADDR] or set NAMESRV_ADDR")]
    NoNamesrv,
}

impl AdminError {
    /// The response code when a server refused the request.
    pub fn refused_code(&self) -> Option<i32> {
        match self {
            AdminError::Refused { code, .. } => Some(*code),
            _ => None,
        }
    }
}
