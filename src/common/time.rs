//! The wall clock, in the units RocketMQ's files and headers carry.

use std::time::{SystemTime, UNIX_EPOCH};

/// Milliseconds since the Unix epoch (Java `System.currentTimeMillis()`). A clock set before
/// 1970 reads as 0 rather than failing: timestamps are data here, not control flow.
pub fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}
