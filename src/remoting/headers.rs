//! Typed custom headers: the extFields of each request/response, decoded the way Java's
//! `RemotingCommand.decodeCommandCustomHeader` does (`Integer.parseInt`, `Long.parseLong`,
//! lenient booleans; a missing `@CFNotNull` field is an error naming the field).
//!
//! Every header has `decode(&RemotingCommand) -> Result<Self, HeaderError>` and
//! `encode(&self, &mut RemotingCommand)` (writes the ext fields; optional fields only when
//! `Some`). Field names are Java's, in snake case; the wire keys are Java's exactly.
//!
//! Field conventions:
//! - `String`, `i32`, `i64`: required (`@CFNotNull`). An empty numeric value counts as missing.
//! - `bool`: absent means false (Java `Boolean.parseBoolean(null)`); always written.
//! - `Option<_>`: optional (`@CFNullable` or no annotation); written only when `Some`.
//! - Fields with a non-false Java default (e.g. `committed = true`) are plain values that take
//!   that default when absent.
//!
//! Java source: `remoting/.../protocol/header/*.java`, `.../header/namesrv/*.java`.

use super::codes::request_code;
use super::command::RemotingCommand;
use super::error::HeaderError;

/// A type that can be read from / written to one ext field.
pub trait HeaderField: Sized {
    /// Reads the field `key` from `cmd`.
    fn read(cmd: &RemotingCommand, key: &'static str) -> Result<Self, HeaderError>;
    /// Writes the field `key` into `cmd` (nothing for an absent optional).
    fn write(&self, cmd: &mut RemotingCommand, key: &'static str);
}

impl HeaderField for String {
    fn read(cmd: &RemotingCommand, key: &'static str) -> Result<Self, HeaderError> {
        cmd.ext_str(key).map(str::to_owned)
    }
    fn write(&self, cmd: &mut RemotingCommand, key: &'static str) {
        cmd.set_ext(key, self);
    }
}

impl HeaderField for i32 {
    fn read(cmd: &RemotingCommand, key: &'static str) -> Result<Self, HeaderError> {
        cmd.ext_i32(key)
    }
    fn write(&self, cmd: &mut RemotingCommand, key: &'static str) {
        cmd.set_ext(key, self);
    }
}

impl HeaderField for i64 {
    fn read(cmd: &RemotingCommand, key: &'static str) -> Result<Self, HeaderError> {
        cmd.ext_i64(key)
    }
    fn write(&self, cmd: &mut RemotingCommand, key: &'static str) {
        cmd.set_ext(key, self);
    }
}

impl HeaderField for bool {
    fn read(cmd: &RemotingCommand, key: &'static str) -> Result<Self, HeaderError> {
        Ok(cmd.ext_bool(key))
    }
    fn write(&self, cmd: &mut RemotingCommand, key: &'static str) {
        cmd.set_ext(key, self);
    }
}

impl HeaderField for Option<String> {
    fn read(cmd: &RemotingCommand, key: &'static str) -> Result<Self, HeaderError> {
        Ok(cmd.ext_opt_str(key).map(str::to_owned))
    }
    fn write(&self, cmd: &mut RemotingCommand, key: &'static str) {
        if let Some(value) = self {
            cmd.set_ext(key, value);
        }
    }
}

impl HeaderField for Option<i32> {
    fn read(cmd: &RemotingCommand, key: &'static str) -> Result<Self, HeaderError> {
        cmd.ext_opt_i32(key)
    }
    fn write(&self, cmd: &mut RemotingCommand, key: &'static str) {
        if let Some(value) = self {
            cmd.set_ext(key, value);
        }
    }
}

impl HeaderField for Option<i64> {
    fn read(cmd: &RemotingCommand, key: &'static str) -> Result<Self, HeaderError> {
        cmd.ext_opt_i64(key)
    }
    fn write(&self, cmd: &mut RemotingCommand, key: &'static str) {
        if let Some(value) = self {
            cmd.set_ext(key, value);
        }
    }
}

impl HeaderField for Option<bool> {
    fn read(cmd: &RemotingCommand, key: &'static str) -> Result<Self, HeaderError> {
        Ok(cmd.ext_opt_bool(key))
    }
    fn write(&self, cmd: &mut RemotingCommand, key: &'static str) {
        if let Some(value) = self {
            cmd.set_ext(key, value);
        }
    }
}

/// Decode/encode shared by every header, for generic code.
pub trait CustomHeader: Sized {
    fn decode(cmd: &RemotingCommand) -> Result<Self, HeaderError>;
    fn encode(&self, cmd: &mut RemotingCommand);
}

/// Reads one field, applying its Java default when one is given and the field is absent.
macro_rules! read_field {
    ($cmd:expr, $ty:ty, $key:literal) => {
        <$ty as HeaderField>::read($cmd, $key)?
    };
    ($cmd:expr, $ty:ty, $key:literal, $default:expr) => {
        <Option<$ty> as HeaderField>::read($cmd, $key)?.unwrap_or($default)
    };
}

/// Declares a header struct whose fields map 1:1 to ext keys, with `decode`/`encode`.
macro_rules! header {
    (
        $(#[$meta:meta])*
        pub struct $name:ident {
            $(
                $(#[$field_meta:meta])*
                $field:ident : $ty:ty = $key:literal $(, default $default:expr)?;
            )*
        }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, PartialEq, Eq)]
        pub struct $name {
            $($(#[$field_meta])* pub $field: $ty,)*
        }

        impl $name {
            /// Decodes from `cmd.ext_fields`; errors name the first bad field.
            pub fn decode(cmd: &RemotingCommand) -> Result<Self, HeaderError> {
                Ok(Self { $($field: read_field!(cmd, $ty, $key $(, $default)?),)* })
            }

            /// Writes every field into `cmd.ext_fields` (optional fields only when `Some`).
            pub fn encode(&self, cmd: &mut RemotingCommand) {
                $(HeaderField::write(&self.$field, cmd, $key);)*
            }
        }

        impl CustomHeader for $name {
            fn decode(cmd: &RemotingCommand) -> Result<Self, HeaderError> {
                $name::decode(cmd)
            }
            fn encode(&self, cmd: &mut RemotingCommand) {
                $name::encode(self, cmd)
            }
        }
    };
}

// ---------------------------------------------------------------------------------------------
// Send (Java `SendMessageRequestHeader`, `SendMessageRequestHeaderV2`, `SendMessageResponseHeader`)

/// `SendMessageRequestHeader` (code 10, full key names) and `SendMessageRequestHeaderV2`
/// (codes 310/320/325, single-letter keys `a`..`n`), as one struct with Java's V1 field names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SendMessageRequestHeader {
    pub producer_group: String,
    pub topic: String,
    /// Key topic for auto-creation, normally `TBW102`.
    pub default_topic: String,
    pub default_topic_queue_nums: i32,
    /// Negative: the broker picks a queue.
    pub queue_id: i32,
    /// `MessageSysFlag` bits.
    pub sys_flag: i32,
    pub born_timestamp: i64,
    /// User flag, stored verbatim.
    pub flag: i32,
    /// Message properties in the `name\u0001value\u0002` encoding.
    pub properties: Option<String>,
    pub reconsume_times: Option<i32>,
    pub unit_mode: bool,
    /// The Java broker picks the batch path from this flag, not from the request code.
    pub batch: bool,
    pub max_reconsume_times: Option<i32>,
    /// V2 `n`; V1 carries it as the RPC header field `bname`.
    pub broker_name: Option<String>,
}

/// Wire keys of the send request: (V1 key, V2 key).
mod send_keys {
    pub const PRODUCER_GROUP: (&str, &str) = ("producerGroup", "a");
    pub const TOPIC: (&str, &str) = ("topic", "b");
    pub const DEFAULT_TOPIC: (&str, &str) = ("defaultTopic", "c");
    pub const DEFAULT_TOPIC_QUEUE_NUMS: (&str, &str) = ("defaultTopicQueueNums", "d");
    pub const QUEUE_ID: (&str, &str) = ("queueId", "e");
    pub const SYS_FLAG: (&str, &str) = ("sysFlag", "f");
    pub const BORN_TIMESTAMP: (&str, &str) = ("bornTimestamp", "g");
    pub const FLAG: (&str, &str) = ("flag", "h");
    pub const PROPERTIES: (&str, &str) = ("properties", "i");
    pub const RECONSUME_TIMES: (&str, &str) = ("reconsumeTimes", "j");
    pub const UNIT_MODE: (&str, &str) = ("unitMode", "k");
    pub const MAX_RECONSUME_TIMES: (&str, &str) = ("maxReconsumeTimes", "l");
    pub const BATCH: (&str, &str) = ("batch", "m");
    pub const BROKER_NAME: (&str, &str) = ("bname", "n");
}

impl SendMessageRequestHeader {
    /// True for the codes whose header uses the V2 single-letter keys.
    pub fn is_v2_code(code: i32) -> bool {
        matches!(
            code,
            request_code::SEND_MESSAGE_V2
                | request_code::SEND_BATCH_MESSAGE
                | request_code::SEND_REPLY_MESSAGE_V2
        )
    }

    /// Decodes V2 keys for SEND_MESSAGE_V2 / SEND_BATCH_MESSAGE / SEND_REPLY_MESSAGE_V2 and V1
    /// keys for anything else (Java `SendMessageRequestHeader.parseRequestHeader`).
    pub fn decode(cmd: &RemotingCommand) -> Result<Self, HeaderError> {
        if Self::is_v2_code(cmd.code) {
            Self::decode_v2(cmd)
        } else {
            Self::decode_v1(cmd)
        }
    }

    /// Decodes the full V1 key names.
    pub fn decode_v1(cmd: &RemotingCommand) -> Result<Self, HeaderError> {
        Self::decode_with(cmd, |keys| keys.0)
    }

    /// Decodes the V2 single-letter keys. Errors name the Java field, not the letter.
    pub fn decode_v2(cmd: &RemotingCommand) -> Result<Self, HeaderError> {
        // Read with the letter, then report the V1 name (what a human looks for).
        Self::decode_with(cmd, |keys| keys.1)
    }

    fn decode_with(
        cmd: &RemotingCommand,
        pick: fn((&'static str, &'static str)) -> &'static str,
    ) -> Result<Self, HeaderError> {
        use send_keys::*;
        // Reads `keys` with the picked wire key; errors name the V1 (Java field) name.
        fn named<T>(
            result: Result<T, HeaderError>,
            v1_name: &'static str,
        ) -> Result<T, HeaderError> {
            result.map_err(|error| match error {
                HeaderError::Missing { .. } => HeaderError::Missing { field: v1_name },
                HeaderError::Invalid { value, reason, .. } => HeaderError::Invalid {
                    field: v1_name,
                    value,
                    reason,
                },
            })
        }
        macro_rules! get {
            ($ty:ty, $keys:expr) => {
                named(<$ty as HeaderField>::read(cmd, pick($keys)), $keys.0)?
            };
        }
        Ok(Self {
            producer_group: get!(String, PRODUCER_GROUP),
            topic: get!(String, TOPIC),
            default_topic: get!(String, DEFAULT_TOPIC),
            default_topic_queue_nums: get!(i32, DEFAULT_TOPIC_QUEUE_NUMS),
            queue_id: get!(i32, QUEUE_ID),
            sys_flag: get!(i32, SYS_FLAG),
            born_timestamp: get!(i64, BORN_TIMESTAMP),
            flag: get!(i32, FLAG),
            properties: get!(Option<String>, PROPERTIES),
            reconsume_times: get!(Option<i32>, RECONSUME_TIMES),
            unit_mode: get!(bool, UNIT_MODE),
            batch: get!(bool, BATCH),
            max_reconsume_times: get!(Option<i32>, MAX_RECONSUME_TIMES),
            broker_name: get!(Option<String>, BROKER_NAME),
        })
    }

    /// Writes the V1 keys (for SEND_MESSAGE).
    pub fn encode_v1(&self, cmd: &mut RemotingCommand) {
        self.encode_with(cmd, |keys| keys.0);
    }

    /// Writes the V2 keys (for SEND_MESSAGE_V2 / SEND_BATCH_MESSAGE).
    pub fn encode_v2(&self, cmd: &mut RemotingCommand) {
        self.encode_with(cmd, |keys| keys.1);
    }

    /// Writes V2 keys if `cmd.code` is a V2 code, else V1 keys.
    pub fn encode(&self, cmd: &mut RemotingCommand) {
        if Self::is_v2_code(cmd.code) {
            self.encode_v2(cmd);
        } else {
            self.encode_v1(cmd);
        }
    }

    fn encode_with(
        &self,
        cmd: &mut RemotingCommand,
        pick: fn((&'static str, &'static str)) -> &'static str,
    ) {
        use send_keys::*;
        self.producer_group.write(cmd, pick(PRODUCER_GROUP));
        self.topic.write(cmd, pick(TOPIC));
        self.default_topic.write(cmd, pick(DEFAULT_TOPIC));
        self.default_topic_queue_nums
            .write(cmd, pick(DEFAULT_TOPIC_QUEUE_NUMS));
        self.queue_id.write(cmd, pick(QUEUE_ID));
        self.sys_flag.write(cmd, pick(SYS_FLAG));
        self.born_timestamp.write(cmd, pick(BORN_TIMESTAMP));
        self.flag.write(cmd, pick(FLAG));
        self.properties.write(cmd, pick(PROPERTIES));
        self.reconsume_times.write(cmd, pick(RECONSUME_TIMES));
        self.unit_mode.write(cmd, pick(UNIT_MODE));
        self.batch.write(cmd, pick(BATCH));
        self.max_reconsume_times
            .write(cmd, pick(MAX_RECONSUME_TIMES));
        self.broker_name.write(cmd, pick(BROKER_NAME));
    }
}

impl CustomHeader for SendMessageRequestHeader {
    fn decode(cmd: &RemotingCommand) -> Result<Self, HeaderError> {
        SendMessageRequestHeader::decode(cmd)
    }
    fn encode(&self, cmd: &mut RemotingCommand) {
        SendMessageRequestHeader::encode(self, cmd)
    }
}

/// Ext key the Java broker adds to every send response (`MessageConst.PROPERTY_MSG_REGION`).
pub const MSG_REGION_KEY: &str = "MSG_REGION";
/// Java `BrokerConfig.regionId` default.
pub const DEFAULT_REGION: &str = "DefaultRegion";
/// Ext key the Java broker adds to every send response (`MessageConst.PROPERTY_TRACE_SWITCH`).
pub const TRACE_ON_KEY: &str = "TRACE_ON";

/// Adds `MSG_REGION=DefaultRegion` and `TRACE_ON=true` like the Java broker. Every send
/// response needs ext fields: the Java client dereferences them unconditionally, so error
/// responses to sends get these too.
pub fn add_region_and_trace(cmd: &mut RemotingCommand) {
    cmd.set_ext(MSG_REGION_KEY, DEFAULT_REGION);
    cmd.set_ext(TRACE_ON_KEY, "true");
}

header! {
    /// `SendMessageResponseHeader`.
    pub struct SendMessageResponseHeader {
        /// Offset msgId(s); comma-joined for batches.
        msg_id: String = "msgId";
        queue_id: i32 = "queueId";
        /// Logical offset of the (first) message.
        queue_offset: i64 = "queueOffset";
        /// The message's UNIQ_KEY.
        transaction_id: Option<String> = "transactionId";
        batch_uniq_id: Option<String> = "batchUniqId";
        recall_handle: Option<String> = "recallHandle";
    }
}

impl SendMessageResponseHeader {
    /// [`SendMessageResponseHeader::encode`] plus [`add_region_and_trace`].
    pub fn encode_with_region_and_trace(&self, cmd: &mut RemotingCommand) {
        self.encode(cmd);
        add_region_and_trace(cmd);
    }
}

// ---------------------------------------------------------------------------------------------
// Pull (Java `PullMessageRequestHeader`, `PullMessageResponseHeader`)

header! {
    /// `PullMessageRequestHeader` (PULL_MESSAGE 11, LITE_PULL_MESSAGE 361).
    pub struct PullMessageRequestHeader {
        consumer_group: String = "consumerGroup";
        topic: String = "topic";
        queue_id: i32 = "queueId";
        /// Logical offset to start from.
        queue_offset: i64 = "queueOffset";
        max_msg_nums: i32 = "maxMsgNums";
        /// `PullSysFlag` bits.
        sys_flag: i32 = "sysFlag";
        /// Meaningful only with the commit-offset sys flag.
        commit_offset: i64 = "commitOffset";
        /// Long-poll hold time in milliseconds (Java name kept).
        suspend_timeout_millis: i64 = "suspendTimeoutMillis";
        subscription: Option<String> = "subscription";
        sub_version: i64 = "subVersion";
        /// `TAG` or `SQL92`.
        expression_type: Option<String> = "expressionType";
        max_msg_bytes: Option<i32> = "maxMsgBytes";
        request_source: Option<i32> = "requestSource";
        /// Java spelling kept ("Froward").
        proxy_froward_client_id: Option<String> = "proxyFrowardClientId";
    }
}

header! {
    /// `PullMessageResponseHeader`. The first four fields must always be present.
    pub struct PullMessageResponseHeader {
        suggest_which_broker_id: i64 = "suggestWhichBrokerId";
        next_begin_offset: i64 = "nextBeginOffset";
        min_offset: i64 = "minOffset";
        max_offset: i64 = "maxOffset";
        offset_delta: Option<i64> = "offsetDelta";
        topic_sys_flag: Option<i32> = "topicSysFlag";
        group_sys_flag: Option<i32> = "groupSysFlag";
        forbidden_type: Option<i32> = "forbiddenType";
    }
}

// ---------------------------------------------------------------------------------------------
// Offsets (Java `QueryConsumerOffsetRequestHeader`, `UpdateConsumerOffsetRequestHeader` and the max/min/time lookups)

header! {
    /// `QueryConsumerOffsetRequestHeader` (14).
    pub struct QueryConsumerOffsetRequestHeader {
        consumer_group: String = "consumerGroup";
        topic: String = "topic";
        queue_id: i32 = "queueId";
        /// `None` behaves as true in the Java broker (only an explicit false disables it).
        set_zero_if_not_found: Option<bool> = "setZeroIfNotFound";
    }
}

header! {
    /// `QueryConsumerOffsetResponseHeader`.
    pub struct QueryConsumerOffsetResponseHeader {
        offset: i64 = "offset";
    }
}

header! {
    /// `UpdateConsumerOffsetRequestHeader` (15).
    pub struct UpdateConsumerOffsetRequestHeader {
        consumer_group: String = "consumerGroup";
        topic: String = "topic";
        queue_id: i32 = "queueId";
        commit_offset: i64 = "commitOffset";
    }
}

header! {
    /// `GetMaxOffsetRequestHeader` (30).
    pub struct GetMaxOffsetRequestHeader {
        topic: String = "topic";
        queue_id: i32 = "queueId";
        /// Java default true (5.x field; 4.x clients omit it).
        committed: bool = "committed", default true;
    }
}

header! {
    /// `GetMaxOffsetResponseHeader`.
    pub struct GetMaxOffsetResponseHeader {
        offset: i64 = "offset";
    }
}

header! {
    /// `GetMinOffsetRequestHeader` (31).
    pub struct GetMinOffsetRequestHeader {
        topic: String = "topic";
        queue_id: i32 = "queueId";
    }
}

header! {
    /// `GetMinOffsetResponseHeader`.
    pub struct GetMinOffsetResponseHeader {
        offset: i64 = "offset";
    }
}

/// `BoundaryType` of SEARCH_OFFSET_BY_TIMESTAMP: which offset to return when several messages
/// share the timestamp.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum BoundaryType {
    #[default]
    Lower,
    Upper,
}

impl BoundaryType {
    /// The wire name (Java `BoundaryType.getName`).
    pub fn name(self) -> &'static str {
        match self {
            Self::Lower => "lower",
            Self::Upper => "upper",
        }
    }

    /// Java `BoundaryType.getType`: "upper" in any case is Upper, anything else Lower.
    pub fn from_name(name: &str) -> Self {
        if name.eq_ignore_ascii_case("upper") {
            Self::Upper
        } else {
            Self::Lower
        }
    }
}

impl HeaderField for BoundaryType {
    fn read(cmd: &RemotingCommand, key: &'static str) -> Result<Self, HeaderError> {
        Ok(cmd
            .ext_opt_str(key)
            .map_or(Self::Lower, BoundaryType::from_name))
    }
    fn write(&self, cmd: &mut RemotingCommand, key: &'static str) {
        cmd.set_ext(key, self.name());
    }
}

header! {
    /// `SearchOffsetRequestHeader` (29).
    pub struct SearchOffsetRequestHeader {
        topic: String = "topic";
        queue_id: i32 = "queueId";
        /// Store timestamp in ms.
        timestamp: i64 = "timestamp";
        /// 5.x; absent means Lower.
        boundary_type: BoundaryType = "boundaryType";
    }
}

header! {
    /// `SearchOffsetResponseHeader`.
    pub struct SearchOffsetResponseHeader {
        offset: i64 = "offset";
    }
}

header! {
    /// `GetEarliestMsgStoretimeRequestHeader` (32).
    pub struct GetEarliestMsgStoretimeRequestHeader {
        topic: String = "topic";
        queue_id: i32 = "queueId";
    }
}

header! {
    /// `GetEarliestMsgStoretimeResponseHeader`.
    pub struct GetEarliestMsgStoretimeResponseHeader {
        /// Store timestamp in ms.
        timestamp: i64 = "timestamp";
    }
}

// ---------------------------------------------------------------------------------------------
// Message query (Java `ViewMessageRequestHeader`)

header! {
    /// `ViewMessageRequestHeader` (33).
    pub struct ViewMessageRequestHeader {
        topic: Option<String> = "topic";
        /// CommitLog physical offset.
        offset: i64 = "offset";
    }
}

// ---------------------------------------------------------------------------------------------
// Client management (Java `ClientManageProcessor`'s headers)

header! {
    /// `ConsumerSendMsgBackRequestHeader` (36).
    pub struct ConsumerSendMsgBackRequestHeader {
        /// CommitLog physical offset of the failed message.
        offset: i64 = "offset";
        group: String = "group";
        delay_level: i32 = "delayLevel";
        origin_msg_id: Option<String> = "originMsgId";
        origin_topic: Option<String> = "originTopic";
        unit_mode: bool = "unitMode";
        max_reconsume_times: Option<i32> = "maxReconsumeTimes";
    }
}

header! {
    /// `UnregisterClientRequestHeader` (35).
    pub struct UnregisterClientRequestHeader {
        client_id: String = "clientID";
        producer_group: Option<String> = "producerGroup";
        consumer_group: Option<String> = "consumerGroup";
    }
}

header! {
    /// `GetConsumerListByGroupRequestHeader` (38).
    pub struct GetConsumerListByGroupRequestHeader {
        consumer_group: String = "consumerGroup";
    }
}

header! {
    /// `NotifyConsumerIdsChangedRequestHeader` (40, broker to client, oneway).
    pub struct NotifyConsumerIdsChangedRequestHeader {
        consumer_group: String = "consumerGroup";
    }
}

// ---------------------------------------------------------------------------------------------
// Admin

header! {
    /// `CreateTopicRequestHeader` (UPDATE_AND_CREATE_TOPIC 17).
    pub struct CreateTopicRequestHeader {
        topic: String = "topic";
        default_topic: String = "defaultTopic";
        read_queue_nums: i32 = "readQueueNums";
        write_queue_nums: i32 = "writeQueueNums";
        /// `PermName` bits.
        perm: i32 = "perm";
        /// `SINGLE_TAG` or `MULTI_TAG`.
        topic_filter_type: String = "topicFilterType";
        topic_sys_flag: Option<i32> = "topicSysFlag";
        order: bool = "order";
        /// 5.x topic attributes, `+key=value,...`.
        attributes: Option<String> = "attributes";
        force: bool = "force";
    }
}

// ---------------------------------------------------------------------------------------------
// Name server (Java `RegisterBrokerRequestHeader`, `GetRouteInfoRequestHeader` and friends)

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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::remoting::command::RemotingCommand;

    fn cmd_with(code: i32, fields: &[(&str, &str)]) -> RemotingCommand {
        fields
            .iter()
            .fold(RemotingCommand::request(code), |cmd, (key, value)| {
                cmd.with_ext(key, value)
            })
    }

    fn round_trip<T: CustomHeader + PartialEq + std::fmt::Debug>(header: &T, code: i32) {
        let mut cmd = RemotingCommand::request(code);
        header.encode(&mut cmd);
        assert_eq!(&T::decode(&cmd).expect("decodes"), header);
    }

    fn sample_send() -> SendMessageRequestHeader {
        SendMessageRequestHeader {
            producer_group: "pg".into(),
            topic: "T".into(),
            default_topic: "TBW102".into(),
            default_topic_queue_nums: 4,
            queue_id: 2,
            sys_flag: 0,
            born_timestamp: 1_700_000_000_000,
            flag: 0,
            properties: Some("KEYS\u{1}k\u{2}".into()),
            reconsume_times: Some(0),
            unit_mode: false,
            batch: true,
            max_reconsume_times: None,
            broker_name: Some("broker-a".into()),
        }
    }

    #[test]
    fn send_v1_and_v2_keys() {
        let header = sample_send();
        let mut v1 = RemotingCommand::request(request_code::SEND_MESSAGE);
        header.encode(&mut v1);
        assert_eq!(v1.ext_fields["producerGroup"], "pg");
        assert_eq!(v1.ext_fields["batch"], "true");
        assert_eq!(v1.ext_fields["bname"], "broker-a");
        assert!(!v1.ext_fields.contains_key("maxReconsumeTimes"));
        assert_eq!(SendMessageRequestHeader::decode(&v1).expect("v1"), header);

        for code in [
            request_code::SEND_MESSAGE_V2,
            request_code::SEND_BATCH_MESSAGE,
        ] {
            let mut v2 = RemotingCommand::request(code);
            header.encode(&mut v2);
            assert_eq!(v2.ext_fields["a"], "pg");
            assert_eq!(v2.ext_fields["g"], "1700000000000");
            assert_eq!(v2.ext_fields["m"], "true");
            assert_eq!(v2.ext_fields["n"], "broker-a");
            assert!(!v2.ext_fields.contains_key("producerGroup"));
            assert_eq!(SendMessageRequestHeader::decode(&v2).expect("v2"), header);
        }
    }

    #[test]
    fn send_v2_as_sent_by_java_client() {
        let cmd = cmd_with(
            request_code::SEND_MESSAGE_V2,
            &[
                ("a", "pg"),
                ("b", "T"),
                ("c", "TBW102"),
                ("d", "4"),
                ("e", "-1"),
                ("f", "0"),
                ("g", "1"),
                ("h", "0"),
                ("k", "FALSE"),
                ("m", "1"),
                ("ns", "ignored"),
            ],
        );
        let header = SendMessageRequestHeader::decode(&cmd).expect("decodes");
        assert_eq!(header.queue_id, -1);
        assert!(header.batch);
        assert!(!header.unit_mode);
        assert_eq!(header.properties, None);
    }

    #[test]
    fn send_errors_name_the_java_field() {
        let cmd = cmd_with(request_code::SEND_MESSAGE_V2, &[("a", "pg"), ("b", "T")]);
        assert_eq!(
            SendMessageRequestHeader::decode(&cmd),
            Err(HeaderError::Missing {
                field: "defaultTopic"
            })
        );
        let mut cmd = RemotingCommand::request(request_code::SEND_MESSAGE_V2);
        sample_send().encode(&mut cmd);
        cmd.set_ext("e", "one");
        assert_eq!(
            SendMessageRequestHeader::decode(&cmd),
            Err(HeaderError::Invalid {
                field: "queueId",
                value: "one".into(),
                reason: "not a 32-bit integer"
            })
        );
        // A V1 request must use V1 keys: letters are not accepted for code 10.
        let mut cmd = RemotingCommand::request(request_code::SEND_MESSAGE);
        sample_send().encode_v2(&mut cmd);
        assert_eq!(
            SendMessageRequestHeader::decode(&cmd),
            Err(HeaderError::Missing {
                field: "producerGroup"
            })
        );
    }

    #[test]
    fn send_response_adds_region_and_trace() {
        let header = SendMessageResponseHeader {
            msg_id: "0A00000100002A9F0000000000000000".into(),
            queue_id: 1,
            queue_offset: 7,
            transaction_id: Some("U".into()),
            batch_uniq_id: None,
            recall_handle: None,
        };
        let req = RemotingCommand::request(request_code::SEND_MESSAGE_V2);
        let mut resp = RemotingCommand::response_to(&req, 0, None);
        header.encode_with_region_and_trace(&mut resp);
        assert_eq!(resp.ext_fields["MSG_REGION"], "DefaultRegion");
        assert_eq!(resp.ext_fields["TRACE_ON"], "true");
        assert_eq!(resp.ext_fields["queueOffset"], "7");
        assert_eq!(resp.ext_fields.len(), 6);
        assert_eq!(
            SendMessageResponseHeader::decode(&resp).expect("ok"),
            header
        );
    }

    #[test]
    fn pull_request_from_java_client() {
        let cmd = cmd_with(
            request_code::PULL_MESSAGE,
            &[
                ("consumerGroup", "cg"),
                ("topic", "T"),
                ("queueId", "3"),
                ("queueOffset", "100"),
                ("maxMsgNums", "32"),
                ("sysFlag", "3"),
                ("commitOffset", "90"),
                ("suspendTimeoutMillis", "15000"),
                ("subVersion", "1700000000000"),
                ("expressionType", "TAG"),
                ("maxMsgBytes", "2147483647"),
            ],
        );
        let header = PullMessageRequestHeader::decode(&cmd).expect("decodes");
        assert_eq!(header.queue_id, 3);
        assert_eq!(header.suspend_timeout_millis, 15000);
        assert_eq!(header.subscription, None);
        assert_eq!(header.max_msg_bytes, Some(i32::MAX));
        round_trip(&header, request_code::PULL_MESSAGE);

        let mut missing = cmd.clone();
        missing.ext_fields.remove("subVersion");
        assert_eq!(
            PullMessageRequestHeader::decode(&missing),
            Err(HeaderError::Missing {
                field: "subVersion"
            })
        );
    }

    #[test]
    fn pull_response_fields() {
        let header = PullMessageResponseHeader {
            suggest_which_broker_id: 0,
            next_begin_offset: 5,
            min_offset: 0,
            max_offset: 9,
            offset_delta: None,
            topic_sys_flag: None,
            group_sys_flag: None,
            forbidden_type: None,
        };
        let mut cmd = RemotingCommand::request(0);
        header.encode(&mut cmd);
        assert_eq!(cmd.ext_fields.len(), 4);
        assert_eq!(cmd.ext_fields["suggestWhichBrokerId"], "0");
        round_trip(&header, 0);
    }

    #[test]
    fn defaults_and_lenient_booleans() {
        let cmd = cmd_with(30, &[("topic", "T"), ("queueId", "0")]);
        assert!(
            GetMaxOffsetRequestHeader::decode(&cmd)
                .expect("ok")
                .committed
        );
        let cmd = cmd_with(
            30,
            &[("topic", "T"), ("queueId", "0"), ("committed", "False")],
        );
        assert!(
            !GetMaxOffsetRequestHeader::decode(&cmd)
                .expect("ok")
                .committed
        );

        let cmd = cmd_with(
            14,
            &[("consumerGroup", "g"), ("topic", "T"), ("queueId", "1")],
        );
        let header = QueryConsumerOffsetRequestHeader::decode(&cmd).expect("ok");
        assert_eq!(header.set_zero_if_not_found, None);

        let cmd = cmd_with(
            29,
            &[
                ("topic", "T"),
                ("queueId", "1"),
                ("timestamp", "5"),
                ("boundaryType", "UPPER"),
            ],
        );
        let header = SearchOffsetRequestHeader::decode(&cmd).expect("ok");
        assert_eq!(header.boundary_type, BoundaryType::Upper);
        round_trip(&header, 29);
        let cmd = cmd_with(29, &[("topic", "T"), ("queueId", "1"), ("timestamp", "5")]);
        assert_eq!(
            SearchOffsetRequestHeader::decode(&cmd)
                .expect("ok")
                .boundary_type,
            BoundaryType::Lower
        );

        let cmd = cmd_with(
            103,
            &[
                ("brokerName", "b"),
                ("brokerAddr", "127.0.0.1:10911"),
                ("clusterName", "c"),
                ("haServerAddr", "127.0.0.1:10912"),
                ("brokerId", "0"),
                ("compressed", "false"),
            ],
        );
        let header = RegisterBrokerRequestHeader::decode(&cmd).expect("ok");
        assert_eq!(header.body_crc32, 0);
        assert_eq!(header.enable_acting_master, None);
        assert!(!header.compressed);
        round_trip(&header, 103);
    }

    #[test]
    fn numeric_parse_errors_name_the_field() {
        let cmd = cmd_with(
            15,
            &[
                ("consumerGroup", "g"),
                ("topic", "T"),
                ("queueId", "1"),
                ("commitOffset", "1.5"),
            ],
        );
        assert!(matches!(
            UpdateConsumerOffsetRequestHeader::decode(&cmd),
            Err(HeaderError::Invalid {
                field: "commitOffset",
                ..
            })
        ));
    }

    #[test]
    fn other_headers_round_trip() {
        round_trip(&QueryConsumerOffsetResponseHeader { offset: -1 }, 0);
        round_trip(
            &UpdateConsumerOffsetRequestHeader {
                consumer_group: "g".into(),
                topic: "T".into(),
                queue_id: 0,
                commit_offset: 12,
            },
            15,
        );
        round_trip(
            &GetMinOffsetRequestHeader {
                topic: "T".into(),
                queue_id: 1,
            },
            31,
        );
        round_trip(&GetMinOffsetResponseHeader { offset: 0 }, 0);
        round_trip(&GetMaxOffsetResponseHeader { offset: 9 }, 0);
        round_trip(&SearchOffsetResponseHeader { offset: 9 }, 0);
        round_trip(
            &GetEarliestMsgStoretimeRequestHeader {
                topic: "T".into(),
                queue_id: 1,
            },
            32,
        );
        round_trip(&GetEarliestMsgStoretimeResponseHeader { timestamp: 3 }, 0);
        round_trip(
            &ViewMessageRequestHeader {
                topic: None,
                offset: 4096,
            },
            33,
        );
        round_trip(
            &ConsumerSendMsgBackRequestHeader {
                offset: 1,
                group: "g".into(),
                delay_level: 0,
                origin_msg_id: Some("id".into()),
                origin_topic: Some("T".into()),
                unit_mode: false,
                max_reconsume_times: Some(16),
            },
            36,
        );
        round_trip(
            &UnregisterClientRequestHeader {
                client_id: "1.2.3.4@x".into(),
                producer_group: Some("pg".into()),
                consumer_group: None,
            },
            35,
        );
        round_trip(
            &GetConsumerListByGroupRequestHeader {
                consumer_group: "g".into(),
            },
            38,
        );
        round_trip(
            &NotifyConsumerIdsChangedRequestHeader {
                consumer_group: "g".into(),
            },
            40,
        );
        round_trip(
            &CreateTopicRequestHeader {
                topic: "T".into(),
                default_topic: "TBW102".into(),
                read_queue_nums: 8,
                write_queue_nums: 8,
                perm: 6,
                topic_filter_type: "SINGLE_TAG".into(),
                topic_sys_flag: Some(0),
                order: false,
                attributes: None,
                force: false,
            },
            17,
        );
        round_trip(
            &RegisterBrokerResponseHeader {
                ha_server_addr: None,
                master_addr: Some("m".into()),
            },
            0,
        );
        round_trip(
            &UnregisterBrokerRequestHeader {
                broker_name: "b".into(),
                broker_addr: "a".into(),
                cluster_name: "c".into(),
                broker_id: 1,
            },
            104,
        );
        round_trip(
            &GetRouteInfoRequestHeader {
                topic: "T".into(),
                accept_standard_json_only: true,
            },
            105,
        );
    }

    #[test]
    fn unregister_client_uses_java_key() {
        let cmd = cmd_with(35, &[("clientID", "c")]);
        assert_eq!(
            UnregisterClientRequestHeader::decode(&cmd)
                .expect("ok")
                .client_id,
            "c"
        );
        let cmd = cmd_with(35, &[("clientId", "c")]);
        assert_eq!(
            UnregisterClientRequestHeader::decode(&cmd),
            Err(HeaderError::Missing { field: "clientID" })
        );
    }
}
