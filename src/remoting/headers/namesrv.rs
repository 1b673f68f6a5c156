//! Name server (Java `RegisterBrokerRequestHeader`, `GetRouteInfoRequestHeader` and friends).

header! {
    /// `RegisterBrokerRequestHeader` (103).
    pub struct RegisterBrokerRequestHeader {
        broker_name: String = "brokerName";
        /// "ip:port" of the main listen port.
        broker_addr: String = "brokerAddr";
        cluster_name: String = "clusterName";
        /// "ip:haPort".
        ha_server_addr: String = "haServerAddr";
        /// 0 = master.
        broker_id: i64 = "brokerId";
        heartbeat_timeout_millis: Option<i64> = "heartbeatTimeoutMillis";
        /// Absent means an old (pre-5.x) broker.
        enable_acting_master: Option<bool> = "enableActingMaster";
        compressed: bool = "compressed";
        /// CRC32 & 0x7FFFFFFF of the body; 0 (the Java default, also when absent) = no check.
        body_crc32: i32 = "bodyCrc32", default 0;
        zone_name: Option<String> = "__ZONE_NAME";
    }
}

header! {
    /// `RegisterBrokerResponseHeader`.
    pub struct RegisterBrokerResponseHeader {
        ha_server_addr: Option<String> = "haServerAddr";
        master_addr: Option<String> = "masterAddr";
    }
}

header! {
    /// `UnRegisterBrokerRequestHeader` (104).
    pub struct UnregisterBrokerRequestHeader {
        broker_name: String = "brokerName";
        broker_addr: String = "brokerAddr";
        cluster_name: String = "clusterName";
        broker_id: i64 = "brokerId";
    }
}

header! {
    /// `GetRouteInfoRequestHeader` (105).
    pub struct GetRouteInfoRequestHeader {
        topic: String = "topic";
        /// True: the client wants standard JSON (quoted numeric map keys) whatever its version.
        accept_standard_json_only: bool = "acceptStandardJsonOnly";
    }
}

header! {
    /// `DeleteTopicFromNamesrvRequestHeader` (DELETE_TOPIC_IN_NAMESRV 216).
    pub struct DeleteTopicFromNamesrvRequestHeader {
        topic: String = "topic";
        /// Only this cluster's brokers lose the topic (all clusters when absent).
        cluster_name: Option<String> = "clusterName";
    }
}

header! {
    /// `PutKVConfigRequestHeader` (PUT_KV_CONFIG 100).
    pub struct PutKvConfigRequestHeader {
        namespace: String = "namespace";
        key: String = "key";
        value: String = "value";
    }
}

header! {
    /// `GetKVConfigRequestHeader` (GET_KV_CONFIG 101) and `DeleteKVConfigRequestHeader`
    /// (DELETE_KV_CONFIG 102): the same two fields.
    pub struct KvConfigKeyRequestHeader {
        namespace: String = "namespace";
        key: String = "key";
    }
}

header! {
    /// `GetKVConfigResponseHeader`.
    pub struct GetKvConfigResponseHeader {
        value: Option<String> = "value";
    }
}

header! {
    /// `GetKVListByNamespaceRequestHeader` (GET_KVLIST_BY_NAMESPACE 219).
    pub struct GetKvListByNamespaceRequestHeader {
        namespace: String = "namespace";
    }
}
