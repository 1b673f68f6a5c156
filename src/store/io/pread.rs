//! The pread(2) read path: used when configured, or when io_uring cannot be set up and the
//! operator allowed the fallback.

use std::io;
use std::os::unix::fs::FileExt;

use super::op::{ReadOp, ReadOpError};

/// The scratch buffer keeps at most this much capacity between batches; RocketMQ's default
/// `maxMessageSize` is 4 MiB, so one max-size message fits without reallocating.
pub const PREAD_SCRATCH_RETAINED_MAX_BYTES: usize = 4 * 1024 * 1024;

/// One thread's pread state: a reused scratch buffer.
#[derive(Debug, Default)]
pub struct PreadThread {
    scratch: Vec<u8>,
}

impl PreadThread {
    pub fn new() -> PreadThread {
        PreadThread::default()
    }

    /// Reads every op fully into the scratch buffer and hands it to `sink` in op order.
    pub fn read_batch(
        &mut self,
        ops: &[ReadOp<'_>],
        sink: &mut dyn FnMut(usize, &[u8]),
    ) -> io::Result<()> {
        for (op_index, op) in ops.iter().enumerate() {
            // Growing zero-fills only the new tail; shrinking is free.
            self.scratch.resize(op.len_bytes, 0);
            // `read_exact_at` retries EINTR and reports a file that ends early as UnexpectedEof.
            op.file
                .read_exact_at(&mut self.scratch, op.offset_bytes)
                .map_err(|source| ReadOpError::into_io(op_index, op, source))?;
            sink(op_index, &self.scratch);
        }
        if self.scratch.capacity() > PREAD_SCRATCH_RETAINED_MAX_BYTES {
            self.scratch = Vec::new();
        }
        Ok(())
    }
}
