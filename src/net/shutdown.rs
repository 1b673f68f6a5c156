//! Stop signals: the caller's process-wide one and the server's own.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
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
    /// Cheap to poll again and again from one task ([`RegisteredOnce`]).
    pub fn triggered(&self) -> impl Future<Output = ()> + '_ {
        RegisteredOnce::new(self.wait_triggered(), move || self.is_triggered())
    }

    async fn wait_triggered(&self) {
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

    /// Completes once either signal is triggered. Cheap to poll again and again from one task
    /// ([`RegisteredOnce`]).
    pub fn triggered(&self) -> impl Future<Output = ()> + '_ {
        let either = async move {
            tokio::select! {
                () = self.external.wait_triggered() => {}
                () = self.own.wait_triggered() => {}
            }
        };
        RegisteredOnce::new(either, move || self.is_triggered())
    }
}

/// Whether `a` and `b` wake the same task. `will_wake` alone is not enough: tokio hands a
/// runtime's `block_on` future a borrowed waker whose vtable differs from the one its clones
/// carry, so a registered clone never `will_wake` the next poll's waker; both point at the same
/// object (the task, or the runtime's handle), which is what wakes. A null data pointer (a
/// no-op waker) says nothing of the task and is not compared.
fn same_task(a: &Waker, b: &Waker) -> bool {
    a.will_wake(b) || (!a.data().is_null() && a.data() == b.data())
}

/// A wait that is polled to register its task's waker, and then answered by a flag: later
/// polls with the same waker call `is_done` instead of polling `wait` again.
///
/// The stop waits (the signals above, a connection's writer stopping) sit in selects that are
/// polled on every wake-up of their task: the read loop's once per read, a network thread's
/// main future whenever any of its tasks wakes. Polling a `tokio::sync::Notify` waiter that is
/// already registered (what a `watch` or an mpsc `closed()` wait is underneath) takes the
/// waiter list's lock each time: 0.97 % of the broker's samples under W3 (docs/BENCHMARKS.md).
/// The registered waker still wakes the task when the wait completes, and `is_done` (a load)
/// then sees why. A poll with another waker (the future moved to another task) polls `wait`
/// again, so that waker is the one registered.
pub(crate) struct RegisteredOnce<F, C> {
    /// Boxed once per wait, so that this type is `Unpin` and needs no pin projection.
    wait: Pin<Box<F>>,
    registered: Option<Waker>,
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
            registered: None,
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
        if self
            .registered
            .as_ref()
            .is_some_and(|registered| same_task(registered, cx.waker()))
        {
            return Poll::Pending;
        }
        let poll = self.wait.as_mut().poll(cx);
        self.registered = poll.is_pending().then(|| cx.waker().clone());
        poll
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;
    use std::time::Duration;

    /// `signal`'s wait, counting in `polls` how often it is polled.
    fn counted_wait<'a>(
        signal: &'a ShutdownSignal,
        polls: &'a Cell<u32>,
    ) -> impl Future<Output = ()> + 'a {
        let mut triggered = Box::pin(signal.wait_triggered());
        std::future::poll_fn(move |cx| {
            polls.set(polls.get() + 1);
            triggered.as_mut().poll(cx)
        })
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_registered_wait_is_not_polled_again_and_still_ends_on_its_trigger() {
        let signal = ShutdownSignal::new();
        let polls = Cell::new(0_u32);
        let mut stop = RegisteredOnce::new(counted_wait(&signal, &polls), || signal.is_triggered());
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

    /// A waker that counts its wake-ups.
    struct Counting(std::sync::atomic::AtomicU32);

    impl std::task::Wake for Counting {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        }
    }

    #[test]
    fn a_poll_with_another_waker_registers_that_one() {
        let signal = ShutdownSignal::new();
        let polls = Cell::new(0_u32);
        let mut stop = std::pin::pin!(RegisteredOnce::new(counted_wait(&signal, &polls), || {
            signal.is_triggered()
        }));
        let first = Waker::noop();
        assert!(stop
            .as_mut()
            .poll(&mut Context::from_waker(first))
            .is_pending());
        let counting = Arc::new(Counting(std::sync::atomic::AtomicU32::new(0)));
        let second = Waker::from(Arc::clone(&counting));
        assert!(stop
            .as_mut()
            .poll(&mut Context::from_waker(&second))
            .is_pending());
        assert!(stop
            .as_mut()
            .poll(&mut Context::from_waker(&second))
            .is_pending());
        assert_eq!(
            polls.get(),
            2,
            "the new waker was not registered, or registered twice"
        );
        signal.trigger();
        assert_eq!(counting.0.load(std::sync::atomic::Ordering::SeqCst), 1);
        assert!(stop
            .as_mut()
            .poll(&mut Context::from_waker(&second))
            .is_ready());
    }

    #[tokio::test(flavor = "current_thread")]
    async fn an_already_triggered_signal_ends_the_wait_at_once() {
        let signal = ShutdownSignal::new();
        signal.trigger();
        tokio::time::timeout(Duration::from_secs(10), signal.triggered())
            .await
            .expect("ends at once");
    }
}
