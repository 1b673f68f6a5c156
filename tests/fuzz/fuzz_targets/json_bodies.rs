//! Every JSON request body the broker and the name server read, through the same lenient
//! parser (`parse_lenient`: fastjson's unquoted integer keys, numbers as strings, enums as
//! ordinals or names, unknown members), and the admin bodies with fastjson's object keys
//! (`{{"brokerName":..}:5}`, read by `parse_with_object_keys`).
#![no_main]

use libfuzzer_sys::fuzz_target;
use ringmq::broker::slave_synchronize::SubscriptionGroupWrapper;
use ringmq::broker::subscription_group_manager::SubscriptionGroupConfig;
use ringmq::remoting::body::admin::{
    ConsumeStats, ConsumerConnection, KvTable, ProducerConnection, TopicStatsTable,
};
use ringmq::remoting::body::heartbeat::CheckClientRequestBody;
use ringmq::remoting::body::heartbeat::HeartbeatData;
use ringmq::remoting::body::json::parse_lenient;
use ringmq::remoting::body::lock_batch::{LockBatchRequestBody, LockBatchResponseBody};
use ringmq::remoting::body::object_keys::quote_object_keys;
use ringmq::remoting::body::register_broker::decode_register_broker_body;
use ringmq::remoting::body::reset_offset::ResetOffsetBody;
use ringmq::remoting::body::route::{ClusterInfo, TopicList, TopicRouteData};
use ringmq::remoting::body::topic_config::{DataVersion, TopicConfig, TopicConfigSerializeWrapper};

fuzz_target!(|data: &[u8]| {
    let _ = parse_lenient::<HeartbeatData>(data, "HeartbeatData");
    let _ = LockBatchRequestBody::parse(data);
    let _ = parse_lenient::<LockBatchResponseBody>(data, "LockBatchResponseBody");
    let _ = parse_lenient::<TopicRouteData>(data, "TopicRouteData");
    let _ = parse_lenient::<ClusterInfo>(data, "ClusterInfo");
    let _ = parse_lenient::<TopicList>(data, "TopicList");
    let _ = parse_lenient::<TopicConfig>(data, "TopicConfig");
    let _ = parse_lenient::<DataVersion>(data, "DataVersion");
    let _ = parse_lenient::<TopicConfigSerializeWrapper>(data, "TopicConfigSerializeWrapper");
    // REGISTER_BROKER: JSON (old brokers) and the 4.x compressed binary layout.
    let _ = decode_register_broker_body(data, false, 0);
    let _ = decode_register_broker_body(data, true, 1000);
    let _ = parse_lenient::<CheckClientRequestBody>(data, "CheckClientRequestBody");
    // Admin bodies: UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, the slave's sync answers, and the
    // answers `ringmq admin` reads back.
    let _ = parse_lenient::<SubscriptionGroupConfig>(data, "SubscriptionGroupConfig");
    let _ = parse_lenient::<SubscriptionGroupWrapper>(data, "SubscriptionGroupWrapper");
    let _ = parse_lenient::<ConsumerConnection>(data, "ConsumerConnection");
    let _ = parse_lenient::<ProducerConnection>(data, "ProducerConnection");
    let _ = parse_lenient::<KvTable>(data, "KVTable");
    let _ = quote_object_keys(data);
    let _ = TopicStatsTable::parse(data);
    let _ = ConsumeStats::parse(data);
    let _ = ResetOffsetBody::parse(data);
});
