//! File reads for the store. Every io_uring detail of the store lives below this module.
//!
//! The store asks for a batch of `(file, offset, len)` reads and gets each result as a byte
//! slice in a callback; the engine decides how the bytes arrive (io_uring `ReadFixed` into
//! registered buffers, or plain `pread` when the operator allowed the fallback).
//!
//! NOTE: this first version only has the pread engine; the io_uring engine replaces the
//! internals behind the same API.

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;

/// One read of `len_bytes` at `offset_bytes` of `file`.
#[derive(Debug, Clone, Copy)]
pub struct ReadOp<'a> {
    pub file: &'a File,
    pub offset_bytes: u64,
    pub len_bytes: usize,
}

/// How the engine reads files.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IoMode {
    /// io_uring with registered (fixed) buffers.
    Uring,
    /// Plain pread(2).
    Pread,
}

/// Reads batches of file ranges. Cheap to share between threads.
#[derive(Debug)]
pub struct IoEngine {
    mode: IoMode,
}

impl IoEngine {
    pub fn new_pread() -> Self {
        IoEngine { mode: IoMode::Pread }
    }

    pub fn mode(&self) -> IoMode {
        self.mode
    }

    /// Reads every op fully and hands its bytes to `sink(index, bytes)` in op order.
    /// A short read (the file ends early) is an `UnexpectedEof` error.
    pub fn read_batch(
        &self,
        ops: &[ReadOp<'_>],
        sink: &mut dyn FnMut(usize, &[u8]),
    ) -> io::Result<()> {
        let mut buf = Vec::new();
        for (index, op) in ops.iter().enumerate() {
            buf.resize(op.len_bytes, 0);
            op.file.read_exact_at(&mut buf, op.offset_bytes)?;
            sink(index, &buf);
        }
        Ok(())
    }
}
