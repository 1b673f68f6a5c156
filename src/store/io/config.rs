//! The engine's configuration: the read mode and the io_uring sizing, with its bounds.

/// How the engine reads files.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IoMode {
    /// io_uring with registered (fixed) buffers.
    Uring,
    /// Plain pread(2).
    Pread,
}

/// Sizing of the io_uring engine.
///
/// One pull in RocketMQ reads at most `maxTransferCountOnMessageInMemory` = 32 messages and
/// `maxTransferBytesOnMessageInMemory` = 256 KiB (Java `MessageStoreConfig`). One read op is
/// usually one message, so:
/// - [`FIXED_BUFFER_COUNT_DEFAULT`] = 32 lets a whole pull batch go to the kernel in one
///   `io_uring_enter` as long as each message fits one buffer;
/// - [`FIXED_BUFFER_SIZE_DEFAULT_BYTES`] = 32 KiB covers typical messages in one SQE; a bigger
///   op is split over consecutive buffers (the buffers are adjacent in memory, so the op's bytes
///   stay contiguous), and a 256 KiB pull of small messages fits in one round;
/// - total registered memory per ring = 32 x 32 KiB = 1 MiB. The kernel counts registered
///   buffers of *all* rings of a user against that user's `RLIMIT_MEMLOCK` (unless the process
///   has `CAP_IPC_LOCK`), and the default limit is often 8 MiB: with one ring per reading thread
///   1 MiB leaves room for several threads (and for tests running many engines) where 4 MiB would
///   allow two. The buffer sizing sweep in `docs/ARCHITECTURE.md` (section "Store file reads")
///   shows 32 KiB buffers lose nothing against bigger ones on a hot page cache.
/// - [`RING_ENTRIES_DEFAULT`]: a round never has more SQEs in flight than there are buffers
///   (each SQE fills its own buffer), so the ring needs `fixed_buffer_count` entries; the
///   completion queue is twice that (kernel default), so it cannot overflow.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IoConfig {
    pub mode: IoMode,
    /// When io_uring cannot be set up, read with pread(2) instead of failing.
    /// Operators set it with [`super::diagnostics::PREAD_FALLBACK_ENV_VAR`].
    pub allow_pread_fallback: bool,
    /// Submission queue entries of each per-thread ring (the kernel rounds up to a power of 2).
    pub ring_entries: u32,
    /// Registered buffers per ring.
    pub fixed_buffer_count: usize,
    /// Size of each registered buffer; a multiple of [`FIXED_BUFFER_ALIGN_BYTES`].
    pub fixed_buffer_size_bytes: usize,
    /// Most rings (threads) one engine keeps at once. A thread beyond this reads with pread if
    /// the fallback is allowed, else its reads fail. Bounds fds and registered memory when reads
    /// come from a pool with many threads.
    pub thread_rings_max: usize,
}

pub const RING_ENTRIES_DEFAULT: u32 = 32;
pub const FIXED_BUFFER_COUNT_DEFAULT: usize = 32;
pub const FIXED_BUFFER_SIZE_DEFAULT_BYTES: usize = 32 * 1024;
/// Enough for one ring per core of a typical broker host plus a few helper threads; at the
/// default 1 MiB per ring that is 16 MiB of locked memory at most.
pub const THREAD_RINGS_MAX_DEFAULT: usize = 16;

/// Registered buffers start on page boundaries, so `O_DIRECT` reads into them are aligned too.
pub const FIXED_BUFFER_ALIGN_BYTES: usize = 4096;
/// Kernel limit on registered buffers per ring (`IORING_MAX_REG_BUFFERS`).
pub const FIXED_BUFFER_COUNT_MAX: usize = 1 << 14;
/// Kernel limit on one registered buffer (1 GiB); also keeps one SQE's length within `u32`.
pub const FIXED_BUFFER_SIZE_MAX_BYTES: usize = 1 << 30;
/// Our own bound on registered memory per ring, far above any sane setting.
pub const FIXED_BUFFER_TOTAL_MAX_BYTES: usize = 1 << 30;
/// Kernel limit on submission queue entries (`IORING_MAX_ENTRIES`).
pub const RING_ENTRIES_MAX: u32 = 32 * 1024;

const _: () = assert!(RING_ENTRIES_DEFAULT as usize >= FIXED_BUFFER_COUNT_DEFAULT);
const _: () = assert!(FIXED_BUFFER_SIZE_DEFAULT_BYTES.is_multiple_of(FIXED_BUFFER_ALIGN_BYTES));

impl Default for IoConfig {
    fn default() -> Self {
        IoConfig {
            mode: IoMode::Uring,
            allow_pread_fallback: false,
            ring_entries: RING_ENTRIES_DEFAULT,
            fixed_buffer_count: FIXED_BUFFER_COUNT_DEFAULT,
            fixed_buffer_size_bytes: FIXED_BUFFER_SIZE_DEFAULT_BYTES,
            thread_rings_max: THREAD_RINGS_MAX_DEFAULT,
        }
    }
}

impl IoConfig {
    /// Registered memory of one ring.
    pub fn registered_bytes_per_ring(&self) -> usize {
        self.fixed_buffer_count
            .saturating_mul(self.fixed_buffer_size_bytes)
    }

    /// Checks the io_uring sizing (only meaningful for [`IoMode::Uring`]).
    pub fn validate(&self) -> Result<(), IoConfigError> {
        if self.fixed_buffer_count == 0 || self.fixed_buffer_count > FIXED_BUFFER_COUNT_MAX {
            return Err(IoConfigError::FixedBufferCount {
                count: self.fixed_buffer_count,
                max: FIXED_BUFFER_COUNT_MAX,
            });
        }
        if self.fixed_buffer_size_bytes == 0
            || self.fixed_buffer_size_bytes > FIXED_BUFFER_SIZE_MAX_BYTES
            || !self
                .fixed_buffer_size_bytes
                .is_multiple_of(FIXED_BUFFER_ALIGN_BYTES)
        {
            return Err(IoConfigError::FixedBufferSize {
                size_bytes: self.fixed_buffer_size_bytes,
                align_bytes: FIXED_BUFFER_ALIGN_BYTES,
                max_bytes: FIXED_BUFFER_SIZE_MAX_BYTES,
            });
        }
        if self.registered_bytes_per_ring() > FIXED_BUFFER_TOTAL_MAX_BYTES {
            return Err(IoConfigError::RegisteredTotal {
                total_bytes: self.registered_bytes_per_ring(),
                max_bytes: FIXED_BUFFER_TOTAL_MAX_BYTES,
            });
        }
        if (self.ring_entries as usize) < self.fixed_buffer_count
            || self.ring_entries > RING_ENTRIES_MAX
        {
            return Err(IoConfigError::RingEntries {
                entries: self.ring_entries,
                fixed_buffer_count: self.fixed_buffer_count,
                max: RING_ENTRIES_MAX,
            });
        }
        if self.thread_rings_max == 0 {
            return Err(IoConfigError::ThreadRingsMax);
        }
        Ok(())
    }
}

/// A bad io_uring sizing in [`IoConfig`].
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum IoConfigError {
    #[error("fixed_buffer_count {count} must be in 1..={max}")]
    FixedBufferCount { count: usize, max: usize },
    #[error(
        "fixed_buffer_size_bytes {size_bytes} must be a non-zero multiple of {align_bytes} \
         and at most {max_bytes}"
    )]
    FixedBufferSize {
        size_bytes: usize,
        align_bytes: usize,
        max_bytes: usize,
    },
    #[error("registered memory per ring {total_bytes} bytes exceeds {max_bytes}")]
    RegisteredTotal {
        total_bytes: usize,
        max_bytes: usize,
    },
    #[error(
        "ring_entries {entries} must be at least fixed_buffer_count {fixed_buffer_count} \
         (one SQE per buffer in flight) and at most {max}"
    )]
    RingEntries {
        entries: u32,
        fixed_buffer_count: usize,
        max: u32,
    },
    #[error("thread_rings_max must be at least 1")]
    ThreadRingsMax,
}
