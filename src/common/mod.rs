//! Small pieces every room uses (Java `common`): the clock and the stop flag of background
//! threads. Imports nothing of the crate.

pub mod stop_flag;
pub mod time;

pub use stop_flag::StopFlag;
pub use time::now_ms;
