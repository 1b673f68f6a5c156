//! Store errors. Expected outcomes (nothing found, offset moved, ...) are values in
//! [`crate::store::GetMessageStatus`] / [`crate::store::PutMessageStatus`], not errors.
//!
//! Each kind a broker answers differently is its own variant, so callers match on the variant
//! (the mapping to Java's `PutMessageStatus` is [`StoreError::put_status`], beside that type).

use std::io;
use std::path::{Path, PathBuf};

use crate::store::format::FormatError;

/// A failure of the message store. I/O errors keep their source.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// A file operation failed; `source` is the OS error.
    #[error("{op} failed on {path}: {source}")]
    Io {
        op: &'static str,
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    /// Bytes on disk are not what the format says they must be.
    #[error("corrupted store file {path} at byte {offset}: {reason}")]
    Corrupted {
        path: PathBuf,
        offset: i64,
        reason: String,
    },
    /// Not writable: an fsync or write failed earlier, so the store refuses appends (and
    /// acknowledges nothing it cannot prove durable) until it is reopened.
    #[error("store is read-only after a failed fsync: {reason}")]
    Poisoned { reason: String },
    /// The body, or a record or batch, is larger than the store accepts.
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
    /// A message the store refuses for another reason (an empty batch, a batch to a retry topic).
    #[error("illegal message: {reason}")]
    MessageIllegal { reason: String },
    /// The batch body does not decode; `source` says where.
    #[error("malformed batch body: {source}")]
    BatchMalformed {
        #[source]
        source: FormatError,
    },
    /// A sync-flush wait ran past `sync_flush_timeout_ms`; the record is written, not yet
    /// known durable.
    #[error("flush did not complete within the sync flush timeout")]
    FlushTimeout,
    /// The group-commit fsync that was to cover this record failed: the record is written, not
    /// durable, and the store turned read-only. The fsync is never retried as if it had
    /// succeeded. Java answers such a send FLUSH_DISK_TIMEOUT (its flush never reaches the
    /// record's offset); `source` is the fsync's error, shared by every waiter of the batch.
    #[error("group commit fsync failed: {source}")]
    FlushFailed {
        #[source]
        source: std::sync::Arc<StoreError>,
    },
    /// Not writable: the disk holding the CommitLog or the ConsumeQueues is fuller than
    /// `disk_space_warning_level_ratio_percent` (Java `RunningFlags.DISK_FULL_BIT`). Writes
    /// come back by themselves once a retention pass measures less than
    /// `disk_space_clean_forcibly_ratio_percent`. The text is Java's remark for the
    /// `SERVICE_NOT_AVAILABLE` a send then gets; `disk_util` is Java's `diskUtil()`
    /// (`CL: 0.91 CQ: 0.91 INDEX: -1.00`, used ratios, -1 for a path that does not exist).
    #[error(
        "service not available now. It may be caused by one of the following reasons: the \
         broker's disk is full [{disk_util}], messages are put to the slave, message store has \
         been shut down, etc."
    )]
    DiskFull { disk_util: String },
    /// Not writable: the store is shut down.
    #[error("store is shut down")]
    ShutDown,
    #[error("invalid store config {key}: {reason}")]
    Config { key: &'static str, reason: String },
    /// Not writable by producers: the store of an HA slave takes only its master's bytes
    /// (Java `DefaultMessageStore.putMessage` refuses puts on a SLAVE).
    #[error("the store of a SLAVE broker takes no messages; send them to the master")]
    SlaveReadOnly,
    /// Replicated bytes do not continue the CommitLog: they start at `got`, the log ends at
    /// `expected` (an HA slave closes the connection and reports its offset again).
    #[error("replicated bytes start at CommitLog offset {got}, the log ends at {expected}")]
    ReplicaOffsetMismatch { expected: i64, got: i64 },
    /// Not writable: another process has the store directory open.
    #[error("store directory {path} is locked by another process")]
    Locked { path: PathBuf },
}

impl StoreError {
    /// This error's text with every file it names reduced to the file's name: what a remote
    /// client may be shown. The directories say how the host is laid out, so they belong in
    /// the broker's log only. The wording is the `Display` one (a test holds them equal).
    pub fn text_without_paths(&self) -> String {
        match self {
            StoreError::Io { op, path, source } => {
                format!("{op} failed on {}: {source}", file_name(path))
            }
            StoreError::Corrupted {
                path,
                offset,
                reason,
            } => format!(
                "corrupted store file {} at byte {offset}: {reason}",
                file_name(path)
            ),
            StoreError::Locked { path } => format!(
                "store directory {} is locked by another process",
                file_name(path)
            ),
            other => other.to_string(),
        }
    }

    pub(crate) fn io(op: &'static str, path: impl Into<PathBuf>, source: io::Error) -> Self {
        StoreError::Io {
            op,
            path: path.into(),
            source,
        }
    }
}

/// The last component of `path` (the whole of it when it has none, like `/`).
fn file_name(path: &Path) -> std::borrow::Cow<'_, str> {
    match path.file_name() {
        Some(name) => name.to_string_lossy(),
        None => path.to_string_lossy(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_without_paths_is_the_display_text_with_file_names_only() {
        let errors = |path: &str| {
            [
                StoreError::io("read", path, io::Error::other("disk")),
                StoreError::Corrupted {
                    path: path.into(),
                    offset: 3,
                    reason: "bad".into(),
                },
                StoreError::Locked { path: path.into() },
                StoreError::ShutDown,
            ]
        };
        let deep = errors("/srv/store/commitlog/00000000000000000000");
        let shallow = errors("00000000000000000000");
        for (deep, shallow) in deep.iter().zip(&shallow) {
            assert_eq!(deep.text_without_paths(), shallow.to_string());
            assert!(!deep.text_without_paths().contains("/srv"));
        }
    }
}
