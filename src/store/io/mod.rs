//! File reads for the store. Every io_uring detail of the store lives below this module.
//!
//! The store asks for a batch of `(file, offset, len)` reads and gets each result as a byte
//! slice in a callback; the engine decides how the bytes arrive:
//! - [`IoMode::Uring`]: io_uring `ReadFixed` into registered buffers, one ring per calling
//!   thread ([`uring`]);
//! - [`IoMode::Pread`]: plain `pread(2)` ([`pread`]), used only when configured or when the
//!   operator allowed the fallback and io_uring cannot be set up ([`diagnostics`]).
//!
//! # Threads
//! An [`IoEngine`] is shared between threads (`Arc<IoEngine>`). Each thread that calls
//! [`IoEngine::read_batch`] gets its own state for that engine in a thread-local slot (a ring
//! with its registered buffers, or a pread scratch buffer), so reads never take a lock shared
//! between threads. The slot is freed when the thread exits or the engine is dropped.
//!
//! See `docs/ARCHITECTURE.md`, section "Store file reads", for the design and measurements.

pub mod bench;
pub mod diagnostics;
pub mod pread;
pub mod uring;

use std::cell::RefCell;
use std::fmt;
use std::fs::File;
use std::io;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Weak};

use self::diagnostics::{HostFacts, SetupStage};
use self::pread::PreadThread;
use self::uring::{UringSetupFailure, UringThread};

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

/// Sizing of the io_uring engine.
///
/// One pull in RocketMQ reads at most `maxTransferCountOnMessageInMemory` = 32 messages and
/// `maxTransferBytesOnMessageInMemory` = 256 KiB (Java `MessageStoreConfig`). One read op is
/// usually one message, so:
/// - [`DEFAULT_FIXED_BUFFER_COUNT`] = 32 lets a whole pull batch go to the kernel in one
///   `io_uring_enter` as long as each message fits one buffer;
/// - [`DEFAULT_FIXED_BUFFER_SIZE_BYTES`] = 32 KiB covers typical messages in one SQE; a bigger
///   op is split over consecutive buffers (the buffers are adjacent in memory, so the op's bytes
///   stay contiguous), and a 256 KiB pull of small messages fits in one round;
/// - total registered memory per ring = 32 x 32 KiB = 1 MiB. The kernel counts registered
///   buffers of *all* rings of a user against that user's `RLIMIT_MEMLOCK` (unless the process
///   has `CAP_IPC_LOCK`), and the default limit is often 8 MiB: with one ring per reading thread
///   1 MiB leaves room for several threads (and for tests running many engines) where 4 MiB would
///   allow two. The buffer sizing sweep in `docs/ARCHITECTURE.md` (section "Store file reads")
///   shows 32 KiB buffers lose nothing against bigger ones on a hot page cache.
/// - [`DEFAULT_RING_ENTRIES`]: a round never has more SQEs in flight than there are buffers
///   (each SQE fills its own buffer), so the ring needs `fixed_buffer_count` entries; the
///   completion queue is twice that (kernel default), so it cannot overflow.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IoConfig {
    pub mode: IoMode,
    /// When io_uring cannot be set up, read with pread(2) instead of failing.
    /// Operators set it with [`diagnostics::PREAD_FALLBACK_ENV_VAR`].
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

pub const DEFAULT_RING_ENTRIES: u32 = 32;
pub const DEFAULT_FIXED_BUFFER_COUNT: usize = 32;
pub const DEFAULT_FIXED_BUFFER_SIZE_BYTES: usize = 32 * 1024;
/// Enough for one ring per core of a typical broker host plus a few helper threads; at the
/// default 1 MiB per ring that is 16 MiB of locked memory at most.
pub const DEFAULT_THREAD_RINGS_MAX: usize = 16;

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

const _: () = assert!(DEFAULT_RING_ENTRIES as usize >= DEFAULT_FIXED_BUFFER_COUNT);
const _: () = assert!(DEFAULT_FIXED_BUFFER_SIZE_BYTES.is_multiple_of(FIXED_BUFFER_ALIGN_BYTES));

impl Default for IoConfig {
    fn default() -> Self {
        IoConfig {
            mode: IoMode::Uring,
            allow_pread_fallback: false,
            ring_entries: DEFAULT_RING_ENTRIES,
            fixed_buffer_count: DEFAULT_FIXED_BUFFER_COUNT,
            fixed_buffer_size_bytes: DEFAULT_FIXED_BUFFER_SIZE_BYTES,
            thread_rings_max: DEFAULT_THREAD_RINGS_MAX,
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

/// Why [`IoEngine::new`] failed.
#[derive(Debug, thiserror::Error)]
pub enum IoSetupError {
    #[error("invalid store io config: {0}")]
    InvalidConfig(#[from] IoConfigError),
    /// io_uring could not be set up and the pread fallback is not allowed. `diagnosis` is the
    /// one-line explanation for the operator (cause, the setting to change, the fallback env var).
    #[error("{diagnosis}")]
    Uring {
        stage: SetupStage,
        diagnosis: String,
        #[source]
        source: io::Error,
    },
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

/// State shared by all clones of an engine and referenced (weakly) by the per-thread slots.
struct EngineShared {
    id: u64,
    mode: IoMode,
    config: IoConfig,
    /// Rings alive for this engine across all threads (bounded by `config.thread_rings_max`).
    live_rings: AtomicUsize,
}

impl fmt::Debug for EngineShared {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EngineShared")
            .field("id", &self.id)
            .field("mode", &self.mode)
            .field("config", &self.config)
            .field("live_rings", &self.live_rings.load(Ordering::Relaxed))
            .finish()
    }
}

static NEXT_ENGINE_ID: AtomicU64 = AtomicU64::new(1);

/// Reads batches of file ranges. Share it between threads with `Arc`.
#[derive(Debug)]
pub struct IoEngine {
    shared: Arc<EngineShared>,
}

/// What one thread holds for one engine.
enum ThreadState {
    Uring(Box<UringThread>),
    Pread(PreadThread),
}

struct ThreadSlot {
    engine_id: u64,
    engine: Weak<EngineShared>,
    /// `None` while a `read_batch` on this thread is using the state.
    state: Option<ThreadState>,
}

thread_local! {
    static THREAD_SLOTS: RefCell<Vec<ThreadSlot>> = const { RefCell::new(Vec::new()) };
}

enum SlotLookup {
    Ready(ThreadState),
    /// A `read_batch` of this engine is already running on this thread (the sink called back).
    Busy,
    /// First use on this thread; a slot marked busy was added.
    New,
}

fn take_thread_state(engine_id: u64, engine: &Arc<EngineShared>) -> SlotLookup {
    THREAD_SLOTS.with(|cell| {
        let mut slots = cell.borrow_mut();
        // Drop the state of engines that no longer exist (closes their rings).
        slots.retain(|slot| slot.engine.strong_count() > 0);
        match slots.iter_mut().find(|slot| slot.engine_id == engine_id) {
            Some(slot) => match slot.state.take() {
                Some(state) => SlotLookup::Ready(state),
                None => SlotLookup::Busy,
            },
            None => {
                slots.push(ThreadSlot {
                    engine_id,
                    engine: Arc::downgrade(engine),
                    state: None,
                });
                SlotLookup::New
            }
        }
    })
}

/// Puts the state back into this thread's slot when the read ends (also on unwind).
struct SlotGuard {
    engine_id: u64,
    state: Option<ThreadState>,
}

impl Drop for SlotGuard {
    fn drop(&mut self) {
        let mut state = self.state.take();
        if let Some(ThreadState::Uring(ring)) = &state {
            if !ring.is_reusable() {
                // Only after an unwind or a failed io_uring_enter: do not reuse a ring whose
                // in-flight state is unknown; the next call creates a fresh one.
                state = None;
            }
        }
        // `try_with` fails only while the thread is exiting; the state is then dropped here.
        let _ = THREAD_SLOTS.try_with(|cell| {
            let mut slots = cell.borrow_mut();
            if let Some(index) = slots.iter().position(|s| s.engine_id == self.engine_id) {
                match state.take() {
                    Some(state) => slots[index].state = Some(state),
                    None => {
                        slots.swap_remove(index);
                    }
                }
            }
        });
    }
}

impl IoEngine {
    fn from_parts(mode: IoMode, config: IoConfig) -> IoEngine {
        IoEngine {
            shared: Arc::new(EngineShared {
                id: NEXT_ENGINE_ID.fetch_add(1, Ordering::Relaxed),
                mode,
                config,
                live_rings: AtomicUsize::new(0),
            }),
        }
    }

    /// A pread(2) engine (no io_uring at all).
    pub fn new_pread() -> Self {
        IoEngine::from_parts(
            IoMode::Pread,
            IoConfig {
                mode: IoMode::Pread,
                ..IoConfig::default()
            },
        )
    }

    /// Builds the engine `config` asks for.
    ///
    /// For [`IoMode::Uring`] this creates the calling thread's ring and registers its buffers
    /// now, so a host that cannot run io_uring is reported at startup. On failure it returns
    /// [`IoSetupError::Uring`] with a one-line diagnosis, or, when `allow_pread_fallback`, logs
    /// that diagnosis as a warning and returns a pread engine.
    pub fn new(config: IoConfig) -> Result<IoEngine, IoSetupError> {
        if config.mode == IoMode::Pread {
            return Ok(IoEngine::from_parts(IoMode::Pread, config));
        }
        config.validate()?;
        let engine = IoEngine::from_parts(IoMode::Uring, config);
        let probe = match take_thread_state(engine.shared.id, &engine.shared) {
            SlotLookup::New => UringThread::new(&engine.shared),
            // The engine was just created, so no thread has a slot for it yet.
            SlotLookup::Ready(_) | SlotLookup::Busy => unreachable!("fresh engine id in use"),
        };
        let mut guard = SlotGuard {
            engine_id: engine.shared.id,
            state: None,
        };
        match probe {
            Ok(ring) => {
                guard.state = Some(ThreadState::Uring(Box::new(ring)));
                drop(guard);
                tracing::debug!(
                    ring_entries = config.ring_entries,
                    fixed_buffer_count = config.fixed_buffer_count,
                    fixed_buffer_size_bytes = config.fixed_buffer_size_bytes,
                    "store io: io_uring ready"
                );
                Ok(engine)
            }
            Err(failure) => {
                drop(guard);
                let diagnosis = describe_failure(&failure, &config);
                if config.allow_pread_fallback {
                    tracing::warn!(
                        "{diagnosis}; reading with pread(2) because the fallback is allowed"
                    );
                    Ok(IoEngine::from_parts(IoMode::Pread, config))
                } else {
                    Err(IoSetupError::Uring {
                        stage: failure.stage,
                        diagnosis,
                        source: failure.source,
                    })
                }
            }
        }
    }

    /// The mode in effect (`Pread` after a fallback).
    pub fn mode(&self) -> IoMode {
        self.shared.mode
    }

    /// The configuration the engine was built with.
    pub fn config(&self) -> IoConfig {
        self.shared.config
    }

    /// Reads every op fully and hands its bytes to `sink(index, bytes)` in op order.
    /// A short read (the file ends early) is an `UnexpectedEof` error. Errors name the op
    /// (index, offset, length) and keep the cause as their source. Ops before the failing one
    /// may already have been handed to `sink`.
    ///
    /// `sink` should not call `read_batch` of the same engine; if it does, the nested call is
    /// served with pread(2) (correct, but without this thread's ring, which is in use).
    pub fn read_batch(
        &self,
        ops: &[ReadOp<'_>],
        sink: &mut dyn FnMut(usize, &[u8]),
    ) -> io::Result<()> {
        let shared = &self.shared;
        let state = match take_thread_state(shared.id, shared) {
            SlotLookup::Ready(state) => state,
            SlotLookup::Busy => return PreadThread::new().read_batch(ops, sink),
            SlotLookup::New => match self.new_thread_state() {
                Ok(state) => state,
                Err(error) => {
                    // Remove the busy slot so the next call tries again.
                    drop(SlotGuard {
                        engine_id: shared.id,
                        state: None,
                    });
                    return Err(error);
                }
            },
        };
        let mut guard = SlotGuard {
            engine_id: shared.id,
            state: Some(state),
        };
        match guard.state.as_mut() {
            Some(ThreadState::Uring(ring)) => ring.read_batch(ops, sink),
            Some(ThreadState::Pread(pread)) => pread.read_batch(ops, sink),
            // Set just above.
            None => unreachable!("slot guard without state"),
        }
    }

    /// State for a thread that has not read with this engine before.
    fn new_thread_state(&self) -> io::Result<ThreadState> {
        let shared = &self.shared;
        if shared.mode == IoMode::Pread {
            return Ok(ThreadState::Pread(PreadThread::new()));
        }
        match UringThread::new(shared) {
            Ok(ring) => Ok(ThreadState::Uring(Box::new(ring))),
            Err(failure) => {
                let diagnosis = describe_failure(&failure, &shared.config);
                if shared.config.allow_pread_fallback {
                    tracing::warn!(
                        "{diagnosis}; this thread reads with pread(2) because the fallback is \
                         allowed"
                    );
                    Ok(ThreadState::Pread(PreadThread::new()))
                } else {
                    Err(io::Error::new(
                        failure.source.kind(),
                        IoSetupError::Uring {
                            stage: failure.stage,
                            diagnosis,
                            source: failure.source,
                        },
                    ))
                }
            }
        }
    }
}

fn describe_failure(failure: &UringSetupFailure, config: &IoConfig) -> String {
    diagnostics::describe_setup_failure(failure.stage, &failure.source, &HostFacts::read(), config)
}

#[cfg(test)]
mod tests;
