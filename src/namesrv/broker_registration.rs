//! What a REGISTER_BROKER carries and what the name server answers (Java
//! `RouteInfoManager.registerBroker`'s arguments and `RegisterBrokerResult`), the refusals, and
//! the liveness kept per broker address. The route table itself is in `route_info.rs`.

use std::net::SocketAddr;

use crate::remoting::body::{DataVersion, TopicConfigSerializeWrapper};

/// The key of the live-broker table: a broker address within a cluster (`BrokerAddrInfo`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct BrokerAddrInfo {
    pub cluster_name: String,
    pub broker_addr: String,
}

/// One REGISTER_BROKER, already decoded (header + body).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct BrokerRegistration {
    pub cluster_name: String,
    pub broker_name: String,
    /// "ip:port" of the broker's main listen port.
    pub broker_addr: String,
    /// 0 = master.
    pub broker_id: i64,
    /// "ip:haPort"; returned to this group's slaves as the master's HA address.
    pub ha_server_addr: String,
    /// ExtField `__ZONE_NAME`.
    pub zone_name: Option<String>,
    /// Header `heartbeatTimeoutMillis`; `None` = the name server's default expiry (2 minutes).
    pub heartbeat_timeout_ms: Option<i64>,
    /// Header `enableActingMaster`; `None` marks a broker older than 5.0.
    pub enable_acting_master: Option<bool>,
    pub topic_config_wrapper: TopicConfigSerializeWrapper,
    /// `None` leaves the broker's filter servers as they were; `Some(empty)` clears them.
    pub filter_server_list: Option<Vec<String>>,
}

/// What a registering broker learns (`RegisterBrokerResult`): for a slave, its live master's
/// address and HA address.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RegisterBrokerResult {
    pub ha_server_addr: Option<String>,
    pub master_addr: Option<String>,
}

/// A registration the name server refuses.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RegisterBrokerError {
    /// Java treats a body with exactly one topic from a broker id not yet registered as a
    /// single-topic update arriving before the broker's first full registration, and refuses
    /// it (`RouteInfoManager.registerBroker` returns null → "register broker failed").
    #[error(
        "register broker failed: broker {broker_name}[{broker_id}] {broker_addr} is not registered yet and sent a single-topic update"
    )]
    SingleTopicBeforeFirstRegistration {
        broker_name: String,
        broker_id: i64,
        broker_addr: String,
    },
    /// The registration would replace (or the unregistration remove) the address of a live
    /// broker, and it neither comes from the connection that broker registered on nor is
    /// signed by an ACL admin account. Java has no such check; see docs/PROTOCOL.md.
    #[error(
        "broker {broker_name}[{broker_id}] of cluster {cluster_name} is alive at {live_addr} and \
         registered over another connection: {action} {new_addr} is refused until it \
         unregisters or expires, unless the request is signed by an ACL admin account"
    )]
    LiveBrokerHeldElsewhere {
        cluster_name: String,
        broker_name: String,
        broker_id: i64,
        live_addr: String,
        new_addr: String,
        action: &'static str,
    },
}

impl RegisterBrokerError {
    /// The response code of the refusal: NO_PERMISSION for a live broker held by another
    /// connection (the sender may not change it), SYSTEM_ERROR otherwise (as Java's "register
    /// broker failed").
    pub fn response_code(&self) -> i32 {
        match self {
            Self::LiveBrokerHeldElsewhere { .. } => crate::remoting::response_code::NO_PERMISSION,
            Self::SingleTopicBeforeFirstRegistration { .. } => {
                crate::remoting::response_code::SYSTEM_ERROR
            }
        }
    }
}

/// Who sent a REGISTER_BROKER or UNREGISTER_BROKER: the connection's remote address, and
/// whether ACL lets it change a broker that lives on another connection (asked only when it
/// would, since it checks a signature over the whole body).
pub struct RegistrationOrigin<'a> {
    pub remote_addr: SocketAddr,
    pub acl_admin: &'a dyn Fn() -> bool,
}

impl std::fmt::Debug for RegistrationOrigin<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RegistrationOrigin")
            .field("remote_addr", &self.remote_addr)
            .finish_non_exhaustive()
    }
}

/// Liveness of one registered broker address.
#[derive(Debug, Clone)]
pub(crate) struct BrokerLiveInfo {
    pub(crate) last_update_ms: i64,
    pub(crate) heartbeat_timeout_ms: i64,
    pub(crate) data_version: DataVersion,
    pub(crate) ha_server_addr: String,
    /// Remote address of the connection that first registered this address (Java keeps the
    /// channel); `None` for registrations made without one (embedded tests).
    pub(crate) channel: Option<SocketAddr>,
}

impl BrokerLiveInfo {
    pub(crate) fn is_alive(&self, now_ms: i64) -> bool {
        self.last_update_ms
            .saturating_add(self.heartbeat_timeout_ms)
            >= now_ms
    }
}
