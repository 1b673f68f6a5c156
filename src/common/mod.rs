//! Small pieces every room uses (Java `common`): the clock, the stop flag of background
//! threads and the topic name rules. Imports nothing of the crate.

pub mod stop_flag;
pub mod time;
pub mod topic_validator;

pub use stop_flag::StopFlag;
pub use time::now_ms;
