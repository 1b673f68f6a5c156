//! Request and response bodies shared by the broker, the name server and the clients (Java
//! `remoting.protocol.body` and `common`): serde mirrors of fastjson's JSON, read leniently.
//!
//! - [`topic_config`]: `TopicConfig`, the permission bits, `TopicConfigSerializeWrapper`.
//! - [`route`]: `QueueData`, `BrokerData`, `TopicRouteData`, `ClusterInfo`, `TopicList`.
//! - [`register_broker`]: the REGISTER_BROKER body (JSON and zlib forms) and its request.
//! - [`heartbeat`]: the HEART_BEAT body.
//! - [`lock_batch`]: the LOCK_BATCH_MQ / UNLOCK_BATCH_MQ bodies.
//! - [`reset_offset`]: `ResetOffsetBody` (INVOKE_BROKER_TO_RESET_OFFSET, RESET_CONSUMER_CLIENT_OFFSET).
//! - [`json`]: lenient reading of fastjson output (legacy map keys, member types, Java enums).

pub mod heartbeat;
pub mod json;
pub mod lock_batch;
pub mod register_broker;
pub mod reset_offset;
pub mod route;
pub mod topic_config;

pub use route::{BrokerData, ClusterInfo, QueueData, TopicList, TopicRouteData};
pub use topic_config::{
    perm, DataVersion, TopicConfig, TopicConfigSerializeWrapper, TopicFilterType,
    TOPIC_QUEUE_NUMS_DEFAULT,
};
