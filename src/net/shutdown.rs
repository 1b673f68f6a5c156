//! Stop signals: the caller's process-wide one and the server's own.

use std::sync::Arc;
use tokio::sync::watch;

/// A one-way, process-wide stop flag. Clone it freely; `trigger` from any thread.
#[derive(Debug, Clone)]
pub struct ShutdownSignal {
    flag: Arc<watch::Sender<bool>>,
}

impl Default for ShutdownSignal {
    fn default() -> Self {
        Self::new()
    }
}

impl ShutdownSignal {
    pub fn new() -> Self {
        ShutdownSignal {
            flag: Arc::new(watch::Sender::new(false)),
        }
    }

    /// Asks everything watching this signal to stop. Idempotent.
    pub fn trigger(&self) {
        self.flag.send_replace(true);
    }

    pub fn is_triggered(&self) -> bool {
        *self.flag.borrow()
    }

    /// Completes once [`ShutdownSignal::trigger`] has been called (at once if it already was).
    pub async fn triggered(&self) {
        let mut receiver = self.flag.subscribe();
        // wait_for errs only when the sender is dropped, and `self` holds it.
        if receiver.wait_for(|triggered| *triggered).await.is_err() {
            tracing::error!("shutdown signal sender dropped while watched");
        }
    }
}

/// The caller's signal or the server's own (handle, startup failure): either stops the server.
pub(crate) struct StopSignals {
    pub external: ShutdownSignal,
    pub own: ShutdownSignal,
}

impl StopSignals {
    pub fn is_triggered(&self) -> bool {
        self.external.is_triggered() || self.own.is_triggered()
    }

    /// Completes once either signal is triggered.
    pub async fn triggered(&self) {
        tokio::select! {
            () = self.external.triggered() => {}
            () = self.own.triggered() => {}
        }
    }
}
