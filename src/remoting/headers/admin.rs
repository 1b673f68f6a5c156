//! Admin and message query (Java `CreateTopicRequestHeader`, `ViewMessageRequestHeader`).

header! {
    /// `ViewMessageRequestHeader` (33).
    pub struct ViewMessageRequestHeader {
        topic: Option<String> = "topic";
        /// CommitLog physical offset.
        offset: i64 = "offset";
    }
}

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

header! {
    /// `QueryMessageRequestHeader` (QUERY_MESSAGE 12). A query by unique key also carries the
    /// ext field [`UNIQUE_MSG_QUERY_FLAG`] = "true".
    pub struct QueryMessageRequestHeader {
        topic: String = "topic";
        /// A KEYS token or the UNIQ_KEY.
        key: String = "key";
        max_num: i32 = "maxNum";
        /// Store time window, ms.
        begin_timestamp: i64 = "beginTimestamp";
        end_timestamp: i64 = "endTimestamp";
    }
}

/// Java `MixAll.UNIQUE_MSG_QUERY_FLAG`: the ext field of a QUERY_MESSAGE by unique key.
pub const UNIQUE_MSG_QUERY_FLAG: &str = "_UNIQUE_KEY_QUERY";

header! {
    /// `QueryMessageResponseHeader`.
    pub struct QueryMessageResponseHeader {
        /// Store time of the last indexed message.
        index_last_update_timestamp: i64 = "indexLastUpdateTimestamp";
        /// CommitLog offset of the last indexed message.
        index_last_update_phyoffset: i64 = "indexLastUpdatePhyoffset";
    }
}

header! {
    /// `ResetOffsetRequestHeader` (INVOKE_BROKER_TO_RESET_OFFSET 222, and the broker's
    /// RESET_CONSUMER_CLIENT_OFFSET 220 to clients).
    pub struct ResetOffsetRequestHeader {
        topic: String = "topic";
        group: String = "group";
        /// Store time in ms; -1 means the queue's max offset.
        timestamp: i64 = "timestamp";
        is_force: bool = "isForce";
        /// 5.x: one queue only; Java's default -1 means every queue.
        queue_id: i32 = "queueId", default -1;
        /// 5.x: with `queue_id`, the offset to reset to (-1 or absent: by `timestamp`).
        offset: Option<i64> = "offset";
    }
}

header! {
    /// `GetConsumerRunningInfoRequestHeader` (GET_CONSUMER_RUNNING_INFO 307), relayed by the
    /// broker to the client as is.
    pub struct GetConsumerRunningInfoRequestHeader {
        consumer_group: String = "consumerGroup";
        client_id: String = "clientId";
        jstack_enable: bool = "jstackEnable";
    }
}
