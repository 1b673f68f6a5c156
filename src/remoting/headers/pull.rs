//! Pull (Java `PullMessageRequestHeader`, `PullMessageResponseHeader`).

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
