//! What every clone of an engine and every per-thread slot refers to.

use std::fmt;
use std::sync::atomic::{AtomicUsize, Ordering};

use super::config::{IoConfig, IoMode};

/// State shared by all clones of an engine and referenced (weakly) by the per-thread slots.
pub(super) struct EngineShared {
    pub(super) id: u64,
    pub(super) mode: IoMode,
    pub(super) config: IoConfig,
    /// Rings alive for this engine across all threads (bounded by `config.thread_rings_max`).
    pub(super) live_rings: AtomicUsize,
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
