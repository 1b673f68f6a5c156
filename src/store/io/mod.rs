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
mod config;
pub mod diagnostics;
mod op;
pub mod pread;
mod shared;
pub mod uring;

use std::cell::RefCell;
use std::io;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Weak};

pub use self::config::{
    IoConfig, IoConfigError, IoMode, FIXED_BUFFER_ALIGN_BYTES, FIXED_BUFFER_COUNT_DEFAULT,
    FIXED_BUFFER_COUNT_MAX, FIXED_BUFFER_SIZE_DEFAULT_BYTES, FIXED_BUFFER_SIZE_MAX_BYTES,
    FIXED_BUFFER_TOTAL_MAX_BYTES, RING_ENTRIES_DEFAULT, RING_ENTRIES_MAX, THREAD_RINGS_MAX_DEFAULT,
};
use self::diagnostics::{HostFacts, SetupStage};
pub use self::op::{ReadOp, ReadOpError};
use self::pread::PreadThread;
use self::shared::EngineShared;
use self::uring::{UringSetupFailure, UringThread};

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
