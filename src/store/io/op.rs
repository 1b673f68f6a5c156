//! One read op, and the error a failed op is reported with.

use std::fs::File;
use std::io;

/// One read of `len_bytes` at `offset_bytes` of `file`.
#[derive(Debug, Clone, Copy)]
pub struct ReadOp<'a> {
    pub file: &'a File,
    pub offset_bytes: u64,
    pub len_bytes: usize,
}

/// A read op failed; wrapped in an `io::Error` of the same kind as `source`.
#[derive(Debug, thiserror::Error)]
#[error("read op {op_index} ({len_bytes} bytes at offset {offset_bytes}) failed: {source}")]
pub struct ReadOpError {
    pub op_index: usize,
    pub offset_bytes: u64,
    pub len_bytes: usize,
    #[source]
    pub source: io::Error,
}

impl ReadOpError {
    /// The `io::Error` handed to callers: same kind as the cause, with the op as context.
    pub(crate) fn into_io(op_index: usize, op: &ReadOp<'_>, source: io::Error) -> io::Error {
        let kind = source.kind();
        io::Error::new(
            kind,
            ReadOpError {
                op_index,
                offset_bytes: op.offset_bytes,
                len_bytes: op.len_bytes,
                source,
            },
        )
    }
}
