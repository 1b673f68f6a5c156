//! Why ACL refuses a request ([`AclError`], Java's `AclException` messages) and why a
//! `plain_acl.yml` cannot be loaded ([`AclConfigError`]).

use std::path::PathBuf;

/// A request ACL refuses. The text is the message of Java's `AclException`, which Java puts in
/// the remark; the broker answers NO_PERMISSION (see `broker/error.rs`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AclError {
    /// No `AccessKey` ext field, and the address is not globally whitelisted.
    #[error("No accessKey is configured")]
    NoAccessKey,
    #[error("No acl config for {access_key}")]
    UnknownAccessKey { access_key: String },
    /// The `Signature` is absent or is not the HmacSHA1 of the request under the secret key.
    #[error("Check signature failed for accessKey={access_key}")]
    SignatureMismatch { access_key: String },
    #[error("Need admin permission for request code={code}, but accessKey={access_key} is not")]
    NeedAdmin { code: i32, access_key: String },
    /// The account names no permission for the resource, and its default refuses.
    /// `resource` reads `topic:T` or `group:G`.
    #[error("No default permission for {resource}")]
    NoDefaultPermission { resource: String },
    #[error("No permission for {resource}")]
    NoPermission { resource: String },
    /// The request could not be read for its resources (a missing header field, a heartbeat
    /// body that is not JSON): Java wraps the decode exception's message.
    #[error("{0}")]
    BadRequest(String),
}

/// A `plain_acl.yml` that cannot be loaded. Each names the file and what to change.
#[derive(Debug, thiserror::Error)]
pub enum AclConfigError {
    #[error(
        "ACL is enabled (RINGMQ_ACL_ENABLED) but {path} cannot be read: {source}; create it \
         (RocketMQ's conf/plain_acl.yml format) or set RINGMQ_ACL_FILE_PATH"
    )]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path} is {size_bytes} bytes, more than the {max_bytes} an ACL file may have")]
    TooLarge {
        path: PathBuf,
        size_bytes: u64,
        max_bytes: u64,
    },
    #[error("{path}: {message}")]
    Invalid { path: PathBuf, message: String },
}
