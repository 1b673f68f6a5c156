//! Client management (Java `ClientManageProcessor`, `ConsumerManageProcessor`), a consumer's
//! send-back of a failed message, and the broker-to-client notification.

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
