//! The embedded name server core: route table and request handling, no sockets.
//!
//! - [`route_info::RouteInfoManager`]: live brokers, broker groups, clusters, topic queues
//!   (Java `RouteInfoManager`); time is passed in (`now_ms`).
//! - [`processor::NamesrvProcessor`]: REGISTER_BROKER (103), UNREGISTER_BROKER (104),
//!   GET_ROUTEINFO_BY_TOPIC (105), GET_BROKER_CLUSTER_INFO (106),
//!   GET_ALL_TOPIC_LIST_FROM_NAMESERVER (206), REGISTER_TOPIC_IN_NAMESRV (217); everything else
//!   is REQUEST_CODE_NOT_SUPPORTED.
//! - [`register_body`]: REGISTER_BROKER bodies (JSON and zlib forms) and the broker-side
//!   request builder.
//! - [`types`]: serde mirrors of the Java bodies (`TopicConfig` is shared with the broker's
//!   topic manager); [`json`]: lenient reading of fastjson output.
//!
//! The runtime's duties: call [`RouteInfoManager::scan_not_active_broker`] every
//! [`route_info::SCAN_NOT_ACTIVE_BROKER_INTERVAL_MS`], call
//! [`RouteInfoManager::on_channel_closed`] for the broker address registered over a closed
//! connection ([`NamesrvProcessor::registered_broker_addr`]), and drop responses to oneway
//! requests.

pub mod json;
pub mod processor;
pub mod register_body;
pub mod route_info;
pub mod types;

pub use processor::NamesrvProcessor;
pub use register_body::build_register_broker_request;
pub use route_info::{
    BrokerAddrInfo, BrokerRegistration, RegisterBrokerError, RegisterBrokerResult, RouteInfoManager,
};
pub use types::{
    BrokerData, ClusterInfo, DataVersion, QueueData, TopicConfig, TopicConfigSerializeWrapper,
    TopicList, TopicRouteData,
};
