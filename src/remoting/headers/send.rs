//! Send (Java `SendMessageRequestHeader`, `SendMessageRequestHeaderV2`,
//! `SendMessageResponseHeader`).

use super::field::{CustomHeader, HeaderField};
use crate::remoting::codes::request_code;
use crate::remoting::command::RemotingCommand;
use crate::remoting::error::HeaderError;

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
pub const REGION_ID_DEFAULT: &str = "DefaultRegion";
/// Ext key the Java broker adds to every send response (`MessageConst.PROPERTY_TRACE_SWITCH`).
pub const TRACE_ON_KEY: &str = "TRACE_ON";

/// Adds `MSG_REGION=DefaultRegion` and `TRACE_ON=true` like the Java broker. Every send
/// response needs ext fields: the Java client dereferences them unconditionally, so error
/// responses to sends get these too.
pub fn add_region_and_trace(cmd: &mut RemotingCommand) {
    cmd.set_ext(MSG_REGION_KEY, REGION_ID_DEFAULT);
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
