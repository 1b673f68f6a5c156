//! A stop flag for the broker's background threads: they sleep on it between rounds of work
//! and wake at once when it is raised, so shutdown never waits out a period.

use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

#[derive(Clone, Default)]
pub struct StopFlag {
    inner: Arc<(Mutex<bool>, Condvar)>,
}

impl StopFlag {
    pub fn new() -> Self {
        Self::default()
    }

    /// Raises the flag and wakes every waiter.
    pub fn raise(&self) {
        let (lock, cvar) = &*self.inner;
        *lock.lock().unwrap_or_else(|p| p.into_inner()) = true;
        cvar.notify_all();
    }

    pub fn is_raised(&self) -> bool {
        *self.inner.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Sleeps up to `timeout`; returns true if the flag is (or becomes) raised.
    pub fn wait_timeout(&self, timeout: Duration) -> bool {
        let (lock, cvar) = &*self.inner;
        let guard = lock.lock().unwrap_or_else(|p| p.into_inner());
        let (guard, _) = cvar
            .wait_timeout_while(guard, timeout, |raised| !*raised)
            .unwrap_or_else(|p| p.into_inner());
        *guard
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    #[test]
    fn raise_wakes_a_waiter_early() {
        let flag = StopFlag::new();
        let f2 = flag.clone();
        let t = std::thread::spawn(move || {
            let start = Instant::now();
            assert!(f2.wait_timeout(Duration::from_secs(30)));
            start.elapsed()
        });
        std::thread::sleep(Duration::from_millis(20));
        flag.raise();
        assert!(t.join().unwrap() < Duration::from_secs(10));
        assert!(flag.wait_timeout(Duration::from_secs(1)), "stays raised");
    }

    #[test]
    fn timeout_without_raise_returns_false() {
        assert!(!StopFlag::new().wait_timeout(Duration::from_millis(5)));
    }
}
