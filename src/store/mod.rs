//! The message store: CommitLog + ConsumeQueue in RocketMQ's exact on-disk format.
//!
//! - [`format`](mod@format): every byte layout (records, ConsumeQueue units, msg ids, checkpoint).
//! - [`MessageStore`]: append, dispatch, pull, offsets, durability, retention, recovery.
//! - [`index_service`]: the message index (`<root>/index/`, Java `IndexService`), built as
//!   messages are dispatched.
//! - [`io`]: the read engine; every CommitLog and ConsumeQueue read goes through
//!   [`io::IoEngine::read_batch`].
//!
//! See `docs/FORMAT.md` for the layouts and the recovery cases.

pub mod commit_log;
pub mod config;
pub mod consume_queue;
pub mod error;
pub mod filter;
pub mod format;
pub mod fs;
pub mod index_file;
pub mod index_header;
pub mod index_service;
pub mod io;
pub mod mapped_file;
pub mod message_store;
pub mod region;
pub mod segment;
pub mod store_stats_service;
pub mod types;

pub use config::{CorruptionPolicy, FlushPolicy, StoreConfig};
pub use error::StoreError;
pub use filter::{AcceptAll, MessageFilter};
pub use format::{DecodedRecord, FormatError};
pub use message_store::{
    FlushStats, MessageStore, QueryMessageResult, PULL_MSG_SIZE_MAX_BYTES, QUERY_MESSAGES_MAX,
};
pub use region::{FileRegion, GetMessageRegions, RegionShape};
pub use types::{
    ArrivalListener, BatchToStore, BoundaryType, GetMessageRequest, GetMessageResult,
    GetMessageStatus, MessageToStore, PutMessageResult, PutMessageStatus, RecoveryReport,
};
