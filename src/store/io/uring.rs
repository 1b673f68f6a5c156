//! The io_uring read path: one ring per thread, `ReadFixed` into registered buffers.
//!
//! A batch is cut into *rounds*. A round takes ops in order while their buffers fit in the
//! registered set: an op of `n` bytes takes `ceil(n / buffer_size)` consecutive buffers, one SQE
//! each. The buffers are slices of one page-aligned allocation, so consecutive buffers are
//! adjacent and the op's bytes end up contiguous. All SQEs of a round go to the kernel in one
//! `io_uring_enter` that also waits for all of them. Short reads resubmit the remainder, `EINTR`
//! and `EAGAIN` completions resubmit the same SQE (at most [`CQE_RETRY_MAX`] times). When the
//! round is complete its ops are handed to the sink in order, straight from the registered
//! buffers. An op bigger than the whole registered set is read in rounds of the whole set and
//! copied into a scratch buffer kept by the thread.
//!
//! Nothing is allocated per op: the SQE bookkeeping vectors are kept in the thread state and
//! reused; they never grow beyond `fixed_buffer_count` entries.

use std::alloc::{self, Layout};
use std::io;
use std::os::fd::AsRawFd;
use std::ptr::NonNull;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};

use io_uring::{opcode, types, IoUring};

use super::config::FIXED_BUFFER_ALIGN_BYTES;
use super::diagnostics::SetupStage;
use super::op::{ReadOp, ReadOpError};
use super::shared::EngineShared;

/// How often one SQE may complete with `EINTR`/`EAGAIN` and be resubmitted before the op fails.
/// Regular files do not return these in practice; the bound keeps a misbehaving kernel or
/// device from spinning a reader forever.
pub const CQE_RETRY_MAX: u32 = 16;

/// How often `io_uring_enter` may fail with `EAGAIN`/`EBUSY` (kernel short of memory) in a row
/// before the round fails. `EINTR` (a signal) does not count: it makes no progress to bound.
pub const ENTER_RETRY_MAX: u32 = 16;

/// The scratch buffer for ops bigger than the registered set keeps at most this much capacity
/// between batches; RocketMQ's default `maxMessageSize` is 4 MiB, so one max-size message fits.
pub const LARGE_OP_RETAINED_MAX_BYTES: usize = 4 * 1024 * 1024;

/// Why creating a thread's ring failed.
#[derive(Debug)]
pub struct UringSetupFailure {
    pub stage: SetupStage,
    pub source: io::Error,
}

/// Page-aligned memory registered with one ring.
struct FixedRegion {
    ptr: NonNull<u8>,
    layout: Layout,
}

impl FixedRegion {
    fn new(len_bytes: usize) -> io::Result<FixedRegion> {
        let layout = Layout::from_size_align(len_bytes, FIXED_BUFFER_ALIGN_BYTES)
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
        assert!(
            layout.size() > 0,
            "validated config has at least one buffer"
        );
        // SAFETY: the layout has a non-zero size.
        let raw = unsafe { alloc::alloc_zeroed(layout) };
        let ptr = NonNull::new(raw).ok_or_else(|| io::Error::from(io::ErrorKind::OutOfMemory))?;
        Ok(FixedRegion { ptr, layout })
    }

    fn len_bytes(&self) -> usize {
        self.layout.size()
    }

    /// The bytes `[start, start + len)`. Only called when no SQE is in flight, so the kernel
    /// is not writing to the region.
    fn slice(&self, start: usize, len: usize) -> &[u8] {
        assert!(start + len <= self.len_bytes());
        // SAFETY: in bounds (checked above), initialised (zeroed at allocation, then written
        // only by the kernel), and no write is in flight while the shared borrow lives because
        // the ring is only driven through `&mut UringThread`.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr().add(start), len) }
    }
}

impl Drop for FixedRegion {
    fn drop(&mut self) {
        // SAFETY: allocated in `new` with this layout.
        unsafe { alloc::dealloc(self.ptr.as_ptr(), self.layout) }
    }
}

/// One SQE of the current round: fills part of one registered buffer.
#[derive(Debug, Clone, Copy)]
struct Chunk {
    /// Index into the caller's ops (for error context).
    op_index: usize,
    fd: i32,
    buf_index: u16,
    /// Where the next byte goes, as an offset into the region.
    region_offset_bytes: usize,
    file_offset_bytes: u64,
    remaining_bytes: u32,
    retries: u32,
}

/// An op of the current round and where its bytes land in the region.
#[derive(Debug, Clone, Copy)]
struct RoundOp {
    op_index: usize,
    region_offset_bytes: usize,
    len_bytes: usize,
}

/// Counts this ring in the engine's `live_rings` while it lives.
struct RingCount {
    engine: Weak<EngineShared>,
}

impl Drop for RingCount {
    fn drop(&mut self) {
        if let Some(engine) = self.engine.upgrade() {
            engine.live_rings.fetch_sub(1, Ordering::AcqRel);
        }
    }
}

/// One thread's ring for one engine.
pub struct UringThread {
    // Field order matters: the ring is closed before the region is freed.
    ring: IoUring,
    region: Option<FixedRegion>,
    buffer_count: usize,
    buffer_size_bytes: usize,
    chunks: Vec<Chunk>,
    round_ops: Vec<RoundOp>,
    large_op: Vec<u8>,
    /// SQEs submitted (or queued) whose completion we have not consumed.
    in_flight: usize,
    _count: RingCount,
}

impl UringThread {
    /// Creates a ring and registers its buffers, counting it against `thread_rings_max`.
    pub(super) fn new(engine: &Arc<EngineShared>) -> Result<UringThread, UringSetupFailure> {
        let config = engine.config;
        let previous = engine.live_rings.fetch_add(1, Ordering::AcqRel);
        let count = RingCount {
            engine: Arc::downgrade(engine),
        };
        if previous >= config.thread_rings_max {
            return Err(UringSetupFailure {
                stage: SetupStage::ThreadRingLimit,
                source: io::Error::new(
                    io::ErrorKind::ResourceBusy,
                    format!(
                        "{previous} threads already hold a ring (thread_rings_max {})",
                        config.thread_rings_max
                    ),
                ),
            });
        }
        let ring = IoUring::new(config.ring_entries).map_err(|source| UringSetupFailure {
            stage: SetupStage::CreateRing,
            source,
        })?;
        let region = FixedRegion::new(config.registered_bytes_per_ring()).map_err(|source| {
            UringSetupFailure {
                stage: SetupStage::RegisterBuffers,
                source,
            }
        })?;
        let iovecs: Vec<libc::iovec> = (0..config.fixed_buffer_count)
            .map(|i| libc::iovec {
                // SAFETY: `i * size` is within the region (count * size bytes).
                iov_base: unsafe { region.ptr.as_ptr().add(i * config.fixed_buffer_size_bytes) }
                    .cast(),
                iov_len: config.fixed_buffer_size_bytes,
            })
            .collect();
        // SAFETY: the iovecs point into `region`, which lives in the same struct as the ring and
        // is freed only after the ring is closed (field order, and `Drop` leaks it while SQEs
        // are in flight).
        unsafe { ring.submitter().register_buffers(&iovecs) }.map_err(|source| {
            UringSetupFailure {
                stage: SetupStage::RegisterBuffers,
                source,
            }
        })?;
        Ok(UringThread {
            ring,
            region: Some(region),
            buffer_count: config.fixed_buffer_count,
            buffer_size_bytes: config.fixed_buffer_size_bytes,
            chunks: Vec::with_capacity(config.fixed_buffer_count),
            round_ops: Vec::with_capacity(config.fixed_buffer_count),
            large_op: Vec::new(),
            in_flight: 0,
            _count: count,
        })
    }

    /// False after an unwind or a failed `io_uring_enter` left SQEs in flight.
    pub(super) fn is_reusable(&self) -> bool {
        self.in_flight == 0
    }

    fn region(&self) -> &FixedRegion {
        // Only `Drop` takes the region.
        self.region.as_ref().expect("region lives until drop")
    }

    pub(super) fn read_batch(
        &mut self,
        ops: &[ReadOp<'_>],
        sink: &mut dyn FnMut(usize, &[u8]),
    ) -> io::Result<()> {
        assert!(self.is_reusable(), "ring reused with SQEs in flight");
        let region_bytes = self.region().len_bytes();
        let mut next = 0;
        while next < ops.len() {
            self.chunks.clear();
            self.round_ops.clear();
            let mut used_buffers = 0;
            while let Some(op) = ops.get(next) {
                if op.len_bytes > region_bytes {
                    break;
                }
                let needed = op.len_bytes.div_ceil(self.buffer_size_bytes);
                if used_buffers + needed > self.buffer_count {
                    break;
                }
                self.round_ops.push(RoundOp {
                    op_index: next,
                    region_offset_bytes: used_buffers * self.buffer_size_bytes,
                    len_bytes: op.len_bytes,
                });
                self.push_chunks(next, op, 0, op.len_bytes, used_buffers);
                used_buffers += needed;
                next += 1;
            }
            if self.round_ops.is_empty() {
                // The next op is bigger than the whole registered set.
                self.read_large(ops, next)?;
                sink(next, &self.large_op);
                if self.large_op.capacity() > LARGE_OP_RETAINED_MAX_BYTES {
                    self.large_op = Vec::new();
                }
                next += 1;
                continue;
            }
            self.run_round(ops)?;
            let region = self.region();
            for round_op in &self.round_ops {
                sink(
                    round_op.op_index,
                    region.slice(round_op.region_offset_bytes, round_op.len_bytes),
                );
            }
        }
        Ok(())
    }

    /// Adds SQE chunks reading `[op_start, op_start + len)` of `op` into the buffers from
    /// `first_buffer` on.
    fn push_chunks(
        &mut self,
        op_index: usize,
        op: &ReadOp<'_>,
        op_start_bytes: usize,
        len_bytes: usize,
        first_buffer: usize,
    ) {
        let fd = op.file.as_raw_fd();
        let mut done = 0;
        let mut buffer = first_buffer;
        while done < len_bytes {
            let chunk_len = (len_bytes - done).min(self.buffer_size_bytes);
            assert!(buffer < self.buffer_count);
            self.chunks.push(Chunk {
                op_index,
                fd,
                // buffer < fixed_buffer_count <= FIXED_BUFFER_COUNT_MAX (2^14) fits u16.
                buf_index: buffer as u16,
                region_offset_bytes: buffer * self.buffer_size_bytes,
                file_offset_bytes: op.offset_bytes + (op_start_bytes + done) as u64,
                // chunk_len <= fixed_buffer_size_bytes <= 1 GiB fits u32.
                remaining_bytes: chunk_len as u32,
                retries: 0,
            });
            done += chunk_len;
            buffer += 1;
        }
    }

    /// Reads `ops[op_index]`, which is bigger than the registered set, one full-set round at a
    /// time, into `self.large_op`.
    fn read_large(&mut self, ops: &[ReadOp<'_>], op_index: usize) -> io::Result<()> {
        let op = &ops[op_index];
        let region_bytes = self.region().len_bytes();
        self.large_op.clear();
        self.large_op.reserve(op.len_bytes);
        let mut done = 0;
        while done < op.len_bytes {
            let len = (op.len_bytes - done).min(region_bytes);
            self.chunks.clear();
            self.push_chunks(op_index, op, done, len, 0);
            self.run_round(ops)?;
            let region = self.region.as_ref().expect("region lives until drop");
            self.large_op.extend_from_slice(region.slice(0, len));
            done += len;
        }
        Ok(())
    }

    /// Submits `self.chunks`, waits for all of them, resubmitting short reads and retriable
    /// errors. On error, waits for every SQE still in flight before returning, so the buffers
    /// are idle again (unless `io_uring_enter` itself failed, which leaves the ring unusable).
    fn run_round(&mut self, ops: &[ReadOp<'_>]) -> io::Result<()> {
        let (submitter, mut sq, mut cq) = self.ring.split();
        let region_base = self.region.as_ref().expect("region lives until drop").ptr;
        assert!(
            self.chunks.len() <= sq.capacity(),
            "validated: entries >= buffer count"
        );
        for (chunk_index, chunk) in self.chunks.iter().enumerate() {
            let entry = read_fixed_entry(region_base, chunk, chunk_index);
            // SAFETY: the entry's buffer is inside the registered region, which outlives the
            // SQE (we wait for its completion before returning or leak the region).
            unsafe { sq.push(&entry) }.expect("sq has room: one round <= ring entries");
            self.in_flight += 1;
        }
        sq.sync();
        let mut first_error: Option<io::Error> = None;
        let mut enter_retries = 0;
        while self.in_flight > 0 {
            match submitter.submit_and_wait(self.in_flight) {
                Ok(_) => enter_retries = 0,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e)
                    if matches!(e.raw_os_error(), Some(libc::EAGAIN | libc::EBUSY))
                        && enter_retries < ENTER_RETRY_MAX =>
                {
                    enter_retries += 1;
                    std::thread::yield_now();
                }
                // `in_flight` stays > 0: the guard drops this ring and `Drop` leaks the region.
                Err(e) => return Err(e),
            }
            // Learn which SQEs the kernel consumed (room for resubmits) and the new completions.
            sq.sync();
            cq.sync();
            for cqe in &mut cq {
                self.in_flight -= 1;
                let chunk_index = cqe.user_data() as usize;
                let chunk = &mut self.chunks[chunk_index];
                let result = cqe.result();
                let failure = if result < 0 {
                    let errno = -result;
                    if (errno == libc::EINTR || errno == libc::EAGAIN)
                        && chunk.retries < CQE_RETRY_MAX
                    {
                        chunk.retries += 1;
                        None
                    } else {
                        Some(io::Error::from_raw_os_error(errno))
                    }
                } else if result == 0 {
                    Some(io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        format!(
                            "file ended at offset {} with {} bytes of the op still to read",
                            chunk.file_offset_bytes, chunk.remaining_bytes
                        ),
                    ))
                } else {
                    // result > 0 and <= remaining (the kernel never returns more than asked).
                    let read = result as u32;
                    chunk.region_offset_bytes += read as usize;
                    chunk.file_offset_bytes += u64::from(read);
                    chunk.remaining_bytes -= read;
                    None
                };
                if let Some(source) = failure {
                    if first_error.is_none() {
                        let op = &ops[chunk.op_index];
                        first_error = Some(ReadOpError::into_io(chunk.op_index, op, source));
                    }
                    continue;
                }
                if chunk.remaining_bytes > 0 && first_error.is_none() {
                    let entry = read_fixed_entry(region_base, chunk, chunk_index);
                    // SAFETY: as above.
                    unsafe { sq.push(&entry) }
                        .expect("sq has room: in flight + resubmits <= chunks <= entries");
                    self.in_flight += 1;
                }
            }
            sq.sync();
        }
        match first_error {
            Some(error) => Err(error),
            None => Ok(()),
        }
    }
}

impl Drop for UringThread {
    fn drop(&mut self) {
        if self.in_flight > 0 {
            // The kernel may still write into the region after the ring fd closes: leak it
            // rather than hand pinned, in-use memory back to the allocator. Happens only after
            // an `io_uring_enter` failure or an unwind from inside a round.
            std::mem::forget(self.region.take());
        }
    }
}

fn read_fixed_entry(
    region_base: NonNull<u8>,
    chunk: &Chunk,
    chunk_index: usize,
) -> io_uring::squeue::Entry {
    // SAFETY: `region_offset_bytes` stays inside the chunk's buffer (it advances by bytes read,
    // which never exceed the chunk's remaining length).
    let buf = unsafe { region_base.as_ptr().add(chunk.region_offset_bytes) };
    opcode::ReadFixed::new(
        types::Fd(chunk.fd),
        buf,
        chunk.remaining_bytes,
        chunk.buf_index,
    )
    .offset(chunk.file_offset_bytes)
    .build()
    .user_data(chunk_index as u64)
}
