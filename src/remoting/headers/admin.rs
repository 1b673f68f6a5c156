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
