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
    /// `DeleteSubscriptionGroupRequestHeader` (DELETE_SUBSCRIPTIONGROUP 207).
    pub struct DeleteSubscriptionGroupRequestHeader {
        group_name: String = "groupName";
        /// Also drop the group's committed offsets.
        clean_offset: bool = "cleanOffset";
    }
}

header! {
    /// `GetTopicStatsInfoRequestHeader` (GET_TOPIC_STATS_INFO 202).
    pub struct GetTopicStatsInfoRequestHeader {
        topic: String = "topic";
    }
}

header! {
    /// `GetConsumeStatsRequestHeader` (GET_CONSUME_STATS 208).
    pub struct GetConsumeStatsRequestHeader {
        consumer_group: String = "consumerGroup";
        topic: Option<String> = "topic";
        /// Topics separated by `;`; when given, the subscription check is skipped.
        topic_list: Option<String> = "topicList";
    }
}

header! {
    /// `GetConsumerConnectionListRequestHeader` (GET_CONSUMER_CONNECTION_LIST 203).
    pub struct GetConsumerConnectionListRequestHeader {
        consumer_group: String = "consumerGroup";
    }
}

header! {
    /// `GetProducerConnectionListRequestHeader` (GET_PRODUCER_CONNECTION_LIST 204).
    pub struct GetProducerConnectionListRequestHeader {
        producer_group: String = "producerGroup";
    }
}

header! {
    /// `DeleteTopicRequestHeader` (DELETE_TOPIC_IN_BROKER 215).
    pub struct DeleteTopicRequestHeader {
        topic: String = "topic";
    }
}

header! {
    /// `GetTopicConfigRequestHeader` (GET_TOPIC_CONFIG 351). `lo` asks for the static-topic
    /// mapping, which ringmq does not have.
    pub struct GetTopicConfigRequestHeader {
        topic: String = "topic";
        lo: Option<bool> = "lo";
    }
}

header! {
    /// `GetBrokerConfigResponseHeader` (GET_BROKER_CONFIG 26): the configuration's data
    /// version as JSON.
    pub struct GetBrokerConfigResponseHeader {
        version: String = "version";
    }
}
