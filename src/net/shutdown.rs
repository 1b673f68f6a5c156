//! Stop signals: the caller's process-wide one and the server's own.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
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

/// A wait that is polled once, to register its waker, and then answered by a flag: later polls
/// call `is_done` instead of polling `wait` again.
///
/// The read loop's select polls its stop waits on every wake-up of the connection's task, once
/// per read. Polling a `tokio::sync::Notify` waiter that is already registered (what a `watch`
/// or an mpsc `closed()` wait is underneath) takes the waiter list's lock each time: 0.97 % of
/// the broker's samples under W3 (docs/BENCHMARKS.md). The registered waker still wakes the
/// task when the wait completes, and `is_done` (a load) then sees why.
pub(crate) struct RegisteredOnce<F, C> {
    /// Boxed once per connection, so that this type is `Unpin` and needs no pin projection.
    wait: Pin<Box<F>>,
    registered: bool,
    is_done: C,
}

impl<F, C> RegisteredOnce<F, C>
where
    F: Future<Output = ()>,
    C: Fn() -> bool + Unpin,
{
    /// `is_done` must turn true before `wait` wakes its waker (both stop waits set their flag,
    /// then notify).
    pub(crate) fn new(wait: F, is_done: C) -> Self {
        RegisteredOnce {
            wait: Box::pin(wait),
            registered: false,
            is_done,
        }
    }
}

impl<F, C> Future for RegisteredOnce<F, C>
where
    F: Future<Output = ()>,
    C: Fn() -> bool + Unpin,
{
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if (self.is_done)() {
            return Poll::Ready(());
        }
        if self.registered {
            return Poll::Pending;
        }
        let poll = self.wait.as_mut().poll(cx);
        self.registered = poll.is_pending();
        poll
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;
    use std::time::Duration;

    #[tokio::test(flavor = "current_thread")]
    async fn a_registered_wait_is_not_polled_again_and_still_ends_on_its_trigger() {
        let signal = ShutdownSignal::new();
        let polls = Cell::new(0_u32);
        let mut triggered = Box::pin(signal.triggered());
        let wait = std::future::poll_fn(|cx| {
            polls.set(polls.get() + 1);
            triggered.as_mut().poll(cx)
        });
        let mut stop = RegisteredOnce::new(wait, || signal.is_triggered());
        for _ in 0..3 {
            let timed_out = tokio::time::timeout(Duration::from_millis(5), &mut stop).await;
            assert!(timed_out.is_err(), "ends before its trigger");
        }
        assert_eq!(
            polls.get(),
            1,
            "the wait was polled again after it registered"
        );
        let trigger = signal.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(5)).await;
            trigger.trigger();
        });
        tokio::time::timeout(Duration::from_secs(10), &mut stop)
            .await
            .expect("the trigger wakes the registered wait");
    }

    #[tokio::test(flavor = "current_thread")]
    async fn an_already_triggered_signal_ends_the_wait_at_once() {
        let signal = ShutdownSignal::new();
        signal.trigger();
        let stop = RegisteredOnce::new(signal.triggered(), || signal.is_triggered());
        tokio::time::timeout(Duration::from_secs(10), stop)
            .await
            .expect("ends at once");
    }
}
