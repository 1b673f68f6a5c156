//! Transactional messages (Java `EndTransactionProcessor`, `Broker2Client`).

header! {
    /// `EndTransactionRequestHeader` (37, producer to broker, oneway from clients).
    pub struct EndTransactionRequestHeader {
        topic: Option<String> = "topic";
        producer_group: String = "producerGroup";
        /// Queue offset of the half message in `RMQ_SYS_TRANS_HALF_TOPIC`.
        tran_state_table_offset: i64 = "tranStateTableOffset";
        /// CommitLog offset of the half message.
        commit_log_offset: i64 = "commitLogOffset";
        /// MessageSysFlag TRANSACTION_COMMIT_TYPE (8), TRANSACTION_ROLLBACK_TYPE (12) or
        /// TRANSACTION_NOT_TYPE (0, unknown).
        commit_or_rollback: i32 = "commitOrRollback";
        /// The answer to a CHECK_TRANSACTION_STATE, not the producer's own end.
        from_transaction_check: bool = "fromTransactionCheck";
        msg_id: String = "msgId";
        transaction_id: Option<String> = "transactionId";
        broker_name: Option<String> = "bname";
    }
}

header! {
    /// `CheckTransactionStateRequestHeader` (39, broker to producer, oneway).
    pub struct CheckTransactionStateRequestHeader {
        /// The half message's real topic.
        topic: Option<String> = "topic";
        tran_state_table_offset: i64 = "tranStateTableOffset";
        commit_log_offset: i64 = "commitLogOffset";
        /// The client's message id (UNIQ_KEY).
        msg_id: Option<String> = "msgId";
        transaction_id: Option<String> = "transactionId";
        /// The half message's offset msgId.
        offset_msg_id: Option<String> = "offsetMsgId";
        broker_name: Option<String> = "bname";
    }
}
