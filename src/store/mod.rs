//! The message store: CommitLog + ConsumeQueue in RocketMQ's exact on-disk format.

pub mod filter;
pub mod io;
