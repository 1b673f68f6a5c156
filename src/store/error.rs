//! Store errors. Expected outcomes (nothing found, offset moved, ...) are values in
//! [`crate::store::GetMessageStatus`] / [`crate::store::PutMessageStatus`], not errors.

use std::io;
use std::path::PathBuf;

use crate::store::format::FormatError;

/// A failure of the message store. I/O errors keep their source.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    #[error("{op} failed on {path}: {source}")]
    Io {
        op: &'static str,
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("corrupted store file {path} at byte {offset}: {reason}")]
    Corrupted {
        path: PathBuf,
        offset: i64,
        reason: String,
    },
    #[error("store is read-only after a failed fsync: {reason}")]
    Poisoned { reason: String },
    #[error("message body of {size_bytes} bytes exceeds the limit of {max_bytes} bytes")]
    MessageTooLarge { size_bytes: usize, max_bytes: usize },
    #[error("illegal topic {topic:?}: {reason}")]
    TopicIllegal {
        topic: String,
        #[source]
        reason: crate::common::topic_validator::TopicNameError,
    },
    #[error("properties of {size_bytes} bytes exceed the limit of {max_bytes} bytes")]
    PropertiesTooLarge { size_bytes: usize, max_bytes: usize },
    #[error("illegal queue id {queue_id}")]
    QueueIdIllegal { queue_id: i32 },
    #[error("illegal message: {reason}")]
    MessageIllegal { reason: String },
    #[error("malformed batch body: {source}")]
    BatchMalformed {
        #[source]
        source: FormatError,
    },
    #[error("flush did not complete within the sync flush timeout")]
    FlushTimeout,
    #[error("store is shut down")]
    ShutDown,
    #[error("invalid store config {key}: {reason}")]
    Config { key: &'static str, reason: String },
    #[error("store directory {path} is locked by another process")]
    Locked { path: PathBuf },
}

impl StoreError {
    pub(crate) fn io(op: &'static str, path: impl Into<PathBuf>, source: io::Error) -> Self {
        StoreError::Io {
            op,
            path: path.into(),
            source,
        }
    }
}
