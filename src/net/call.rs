//! Requests the server sends to a client and whose response it awaits (Java
//! `NettyRemotingAbstract.invokeSync` on a server channel): each connection has a table of
//! pending calls keyed by opaque. The connection's read path hands a response frame to the
//! call with its opaque; a call ends with that response, its timeout, or the connection's
//! close. At most [`PENDING_CALLS_MAX_PER_CONNECTION`] calls wait on one connection.

use std::collections::HashMap;
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::Mutex;

use tokio::sync::oneshot;

use super::config::PENDING_CALLS_MAX_PER_CONNECTION;
use super::error::ClientCallError;
use crate::remoting::command::RemotingCommand;

#[derive(Debug, Default)]
struct Table {
    waiting: HashMap<i32, oneshot::Sender<RemotingCommand>>,
    /// Set when the connection closed: no new call starts.
    closed: bool,
}

/// The pending calls of one connection.
#[derive(Debug, Default)]
pub(crate) struct PendingCalls {
    table: Mutex<Table>,
    next_opaque: AtomicI32,
}

impl PendingCalls {
    fn lock(&self) -> std::sync::MutexGuard<'_, Table> {
        // Plain map updates; a panic elsewhere cannot leave it half-changed.
        self.table.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Registers a call: its opaque and the receiver of its response.
    pub(crate) fn register(
        &self,
    ) -> Result<(i32, oneshot::Receiver<RemotingCommand>), ClientCallError> {
        let mut table = self.lock();
        if table.closed {
            return Err(ClientCallError::Closed);
        }
        if table.waiting.len() >= PENDING_CALLS_MAX_PER_CONNECTION {
            return Err(ClientCallError::TooManyPending {
                max: PENDING_CALLS_MAX_PER_CONNECTION,
            });
        }
        let (tx, rx) = oneshot::channel();
        loop {
            let opaque = self.next_opaque.fetch_add(1, Ordering::Relaxed);
            if let std::collections::hash_map::Entry::Vacant(slot) = table.waiting.entry(opaque) {
                slot.insert(tx);
                return Ok((opaque, rx));
            }
        }
    }

    /// Forgets a call (timed out, not sent, or its waiter went away).
    pub(crate) fn cancel(&self, opaque: i32) {
        self.lock().waiting.remove(&opaque);
    }

    /// Delivers a response frame to its call. `false` when no call waits for its opaque
    /// (it timed out, or the peer answered something never asked).
    pub(crate) fn complete(&self, response: RemotingCommand) -> bool {
        let waiter = self.lock().waiting.remove(&response.opaque);
        match waiter {
            // A waiter that already gave up dropped its receiver; nothing to do.
            Some(tx) => tx.send(response).is_ok(),
            None => false,
        }
    }

    /// The connection closed: every waiting call ends with [`ClientCallError::Closed`].
    pub(crate) fn close(&self) {
        let mut table = self.lock();
        table.closed = true;
        table.waiting.clear();
    }

    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.lock().waiting.len()
    }
}

/// Removes the call from the table when its waiter stops waiting, however it stops.
pub(crate) struct CallGuard<'a> {
    pub(crate) calls: &'a PendingCalls,
    pub(crate) opaque: i32,
}

impl Drop for CallGuard<'_> {
    fn drop(&mut self) {
        self.calls.cancel(self.opaque);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn responses_reach_their_call_by_opaque_and_the_table_is_bounded() {
        let calls = PendingCalls::default();
        let (a, mut rx_a) = calls.register().unwrap();
        let (b, mut rx_b) = calls.register().unwrap();
        assert_ne!(a, b);
        let response = RemotingCommand::request(0).with_opaque(b);
        assert!(calls.complete(response));
        assert_eq!(rx_b.try_recv().unwrap().opaque, b);
        assert!(rx_a.try_recv().is_err());
        assert!(!calls.complete(RemotingCommand::request(0).with_opaque(999)));
        for _ in 1..PENDING_CALLS_MAX_PER_CONNECTION {
            calls.register().unwrap();
        }
        assert!(matches!(
            calls.register(),
            Err(ClientCallError::TooManyPending { .. })
        ));
        calls.cancel(a);
        assert_eq!(calls.len(), PENDING_CALLS_MAX_PER_CONNECTION - 1);
        calls.close();
        assert!(matches!(calls.register(), Err(ClientCallError::Closed)));
        assert_eq!(calls.len(), 0);
        // The waiter of a call dropped by the close sees its sender gone.
        assert!(rx_a.try_recv().is_err());
    }
}
