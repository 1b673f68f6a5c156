//! Why a request cannot be served: [`BrokerError`], and the one map from a failure to the
//! response code a Java client expects ([`BrokerError::response_code`]). The remark of an
//! error response is the error's text (`Display`); clients and tests read some of them, so each
//! text is Java's where Java has one.

use std::net::SocketAddr;

use crate::common::topic_validator::TopicNameError;
use crate::filter::FilterError;
use crate::remoting::body::json::JsonBodyError;
use crate::remoting::codes::response_code as rc;
use crate::remoting::command::{HeaderError, RemotingCommand};
use crate::store::{FormatError, PutMessageStatus, StoreError};

use super::config_manager::PersistError;

/// What a refused request wanted to do with messages (the remarks name it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    Pull,
    Send,
}

impl Access {
    fn verb(self) -> &'static str {
        match self {
            Access::Pull => "pulling",
            Access::Send => "sending",
        }
    }
}

/// A request the broker cannot serve.
#[derive(Debug, thiserror::Error)]
pub enum BrokerError {
    // ---- The request itself.
    /// Java answers a header it cannot decode (a missing or non-numeric field) with
    /// SYSTEM_ERROR and the exception text, which names the field.
    #[error("{0}")]
    Header(#[from] HeaderError),
    /// The source is the lenient reader's error, whose source is serde's.
    #[error("heartbeat body is not HeartbeatData JSON: {}", .0.source)]
    HeartbeatBody(#[source] JsonBodyError),
    #[error("CHECK_CLIENT_CONFIG body is not JSON: {}", .0.source)]
    ClientConfigBody(#[source] JsonBodyError),
    /// A LOCK_BATCH_MQ / UNLOCK_BATCH_MQ body that does not decode (Java answers its decode
    /// exception with SYSTEM_ERROR).
    #[error("{0}")]
    LockBatchBody(#[source] JsonBodyError),
    #[error(" request type {code} not supported")]
    RequestCodeNotSupported { code: i32 },

    // ---- Permissions.
    /// Refused by ACL (`RINGMQ_ACL_ENABLED`); the text is Java's `AclException` message. Java
    /// answers SYSTEM_ERROR with the exception and a stack frame in the remark; ringmq answers
    /// NO_PERMISSION, the code RocketMQ defines for it (docs/PROTOCOL.md, ACL).
    #[error("{0}")]
    Acl(#[from] crate::acl::AclError),
    #[error("the broker[{broker_addr}] {} message is forbidden", access.verb())]
    BrokerForbidden { broker_addr: String, access: Access },
    #[error("the topic[{topic}] {} message is forbidden", access.verb())]
    TopicForbidden { topic: String, access: Access },
    /// A system topic producers may not send to.
    #[error("Sending message to topic[{topic}] is forbidden.")]
    SystemTopicSendForbidden { topic: String },
    #[error("subscription group no permission, {group}")]
    GroupConsumeDisabled { group: String },
    /// A send to a slave. Java's store refuses it ("message store is slave mode, so
    /// putMessage is forbidden") and `SendMessageProcessor` answers SERVICE_NOT_AVAILABLE
    /// with "service not available now ... messages are put to the slave"; the remark says
    /// both, with the role and id.
    #[error("service not available now: message store is slave mode, so putMessage is forbidden (brokerRole SLAVE, brokerId {broker_id}); messages are put to the master")]
    SlaveSendForbidden { broker_id: u64 },
    /// A CONSUMER_SEND_MSG_BACK to a slave: Java 5's `AbstractSendMessageProcessor` finds no
    /// master beside it (`peekMasterBroker` is null off a container).
    #[error("no master available along with {broker_ip}")]
    SendBackNoMaster { broker_ip: String },
    #[error("the consumer group[{group}] can not consume by broadcast way")]
    BroadcastForbidden { group: String },

    // ---- Unknown topics, groups and subscriptions.
    #[error("topic[{topic}] not exist, apply first please!")]
    TopicNotExist { topic: String },
    #[error("subscription group [{group}] does not exist")]
    SubscriptionGroupNotExist { group: String },
    /// The group of a retry (a send to its retry topic, or a send-back) is unknown; Java's send
    /// processor words it differently from the pull processor.
    #[error("subscription group not exist, {group}")]
    RetryGroupNotExist { group: String },
    /// No member of the group sent a heartbeat.
    #[error("the consumer's group info not exist, group: {group}")]
    ConsumerGroupInfoNotExist { group: String },
    #[error("the consumer's subscription not exist, group: {group}, topic: {topic}")]
    SubscriptionNotExist { group: String, topic: String },
    #[error("the consumer's subscription not latest, group: {group} topic: {topic}")]
    SubscriptionNotLatest { group: String, topic: String },
    #[error("no consumer for this group, {group}")]
    NoConsumerInGroup { group: String },
    /// QUERY_CONSUMER_OFFSET: no committed offset, and the queue is not brand new.
    #[error("Not found, maybe this group consumer boot first")]
    ConsumerOffsetNotFound,

    // ---- Admin.
    /// GET_TOPIC_STATS_INFO of an unknown topic (Java's wording there).
    #[error("topic[{topic}] not exist")]
    StatsTopicNotExist { topic: String },
    /// GET_TOPIC_CONFIG of an unknown topic.
    #[error("No topic in this broker. topic: {topic}")]
    NoTopicInBroker { topic: String },
    /// GET_CONSUMER_CONNECTION_LIST of a group with no member.
    #[error("the consumer group[{group}] not online")]
    ConsumerGroupNotOnline { group: String },
    #[error("the producer group[{group}] not exist")]
    ProducerGroupNotExist { group: String },
    #[error("The specified topic is blank.")]
    DeleteTopicBlank,
    #[error("The topic[{topic}] is conflict with system topic.")]
    SystemTopicConflict { topic: String },
    #[error("{0}")]
    GroupName(#[from] crate::common::topic_validator::GroupNameError),
    /// An UPDATE_AND_CREATE_SUBSCRIPTIONGROUP body that does not decode (Java answers its
    /// decode exception with SYSTEM_ERROR).
    #[error("{0}")]
    SubscriptionGroupBody(#[source] JsonBodyError),
    /// UPDATE_BROKER_CONFIG with a body that is not properties text.
    #[error("string2Properties error: {reason}")]
    BrokerConfigBody { reason: String },
    /// UPDATE_BROKER_CONFIG of a key ringmq cannot change while running (Java refuses its
    /// black-listed keys with the same code).
    #[error("Can not update config {key} at run time: {why}")]
    BrokerConfigNotUpdatable { key: String, why: &'static str },
    #[error("Can not update config {key}={value}: {why}")]
    BrokerConfigValue {
        key: String,
        value: String,
        why: String,
    },
    #[error("encoding {what} failed: {source}")]
    AdminBodyEncode {
        what: &'static str,
        #[source]
        source: serde_json::Error,
    },

    // ---- Filters.
    /// A pull with a non-TAG subscription on a broker with property filtering off.
    #[error("The broker does not support consumer to filter message by SQL92 (RINGMQ_BROKER_PROPERTY_FILTER_ENABLED=false)")]
    PropertyFilterDisabled,
    /// CHECK_CLIENT_CONFIG of a non-TAG subscription on a broker with property filtering off.
    #[error("The broker does not support consumer to filter message by {expression_type}")]
    ExpressionTypeUnsupported { expression_type: String },
    #[error("parse the consumer's subscription[{subscription}] failed: {source}")]
    SubscriptionParse {
        subscription: String,
        source: FilterError,
    },
    /// CHECK_CLIENT_CONFIG's own wording of a subscription that does not compile.
    #[error("Parse the consumer's subscription[{subscription}] failed, group: {group}: {source}")]
    ClientSubscriptionParse {
        subscription: String,
        group: String,
        source: FilterError,
    },

    // ---- Parameters.
    #[error("{0}")]
    TopicName(#[from] TopicNameError),
    #[error("The specified topic[{topic}] is conflict with a cluster or broker name.")]
    TopicNameConflict { topic: String },
    #[error("{field} {value} is out of range 1..={max}")]
    QueueNumsOutOfRange {
        field: &'static str,
        value: i32,
        max: i32,
    },
    #[error("queueId[{queue_id}] is illegal, topic:[{topic}] topicConfig.readQueueNums:[{read_queue_nums}] consumer:[{consumer}]")]
    PullQueueIdIllegal {
        queue_id: i32,
        topic: String,
        read_queue_nums: i32,
        consumer: SocketAddr,
    },
    #[error("request queueId[{queue_id}] is illegal, topicConfig.writeQueueNums: {write_queue_nums} readQueueNums: {read_queue_nums} producer: {producer}")]
    SendQueueIdIllegal {
        queue_id: i32,
        write_queue_nums: i32,
        read_queue_nums: i32,
        producer: SocketAddr,
    },
    /// UPDATE_CONSUMER_OFFSET of a queue the topic does not have (worded like the pull's).
    #[error("queueId[{queue_id}] is illegal, topic:[{topic}] topicConfig.readQueueNums:[{read_queue_nums}]")]
    OffsetQueueIdIllegal {
        queue_id: i32,
        topic: String,
        read_queue_nums: i32,
    },
    #[error("batch request does not support retry group {topic}")]
    BatchToRetryTopic { topic: String },
    /// A batch send of more messages than one response can name.
    #[error("the batch holds more than {max} messages")]
    BatchTooManyMessages { max: usize },

    // ---- Offset resets and calls to clients.
    #[error("[reset-offset] reset offset failed, no topic in this broker. topic={topic}")]
    ResetOffsetTopicNotExist { topic: String },
    /// A queue of the topic has no committed offset of the group (Java's text, typo included).
    #[error("THe consumer group <{group}> not exist")]
    ResetOffsetGroupNotExist { group: String },
    #[error("Target offset {offset} not in consume queue range [{min}-{max}]")]
    ResetOffsetOutOfRange { offset: i64, min: i64, max: i64 },
    #[error("Consumer not online, so can not reset offset, Group: {group} Topic: {topic} Timestamp: {timestamp}")]
    ConsumerNotOnline {
        group: String,
        topic: String,
        timestamp: i64,
    },
    #[error("The Consumer <{group}> <{client_id}> not online")]
    ConsumerClientNotOnline { group: String, client_id: String },
    #[error("consumer <{group}> <{client_id}> Timeout: {source}")]
    ClientCallTimeout {
        group: String,
        client_id: String,
        source: crate::net::ClientCallError,
    },
    #[error("invoke consumer <{group}> <{client_id}> Exception: {source}")]
    ClientCallFailed {
        group: String,
        client_id: String,
        source: crate::net::ClientCallError,
    },

    // ---- Stored messages.
    /// VIEW_MESSAGE_BY_ID of an offset that holds no record.
    #[error("can not find message by the offset, {offset}")]
    MessageNotFound { offset: i64 },
    /// CONSUMER_SEND_MSG_BACK of an offset that holds no record.
    #[error("look message by offset failed, {offset}")]
    SendBackMessageNotFound { offset: i64 },
    #[error("stored message at {offset} is unreadable: {source}")]
    StoredMessageUnreadable { offset: i64, source: FormatError },

    // ---- Transactions.
    /// A half message on a broker with rejectTransactionMessage.
    #[error("the broker[{broker_ip}] sending transaction message is forbidden")]
    TransactionMessageRejected { broker_ip: String },
    /// A send whose sysFlag says prepared or rolled back without the TRAN_MSG property: the
    /// store would keep it without a ConsumeQueue unit and no END_TRANSACTION could find it.
    #[error("sysFlag {sys_flag} marks a prepared or rolled-back transactional message but its TRAN_MSG property is not true: it could never be delivered")]
    TransactionSysFlagWithoutHalf { sys_flag: i32 },
    /// A batch send of half messages (clients refuse to build one; it could not be ended).
    #[error("batch messages cannot be transactional (sysFlag {sys_flag})")]
    BatchTransaction { sys_flag: i32 },
    /// END_TRANSACTION on a slave.
    #[error("Message store is slave mode, so end transaction is forbidden.")]
    EndTransactionOnSlave,
    /// END_TRANSACTION's commitOrRollback is none of 0, 8, 12 (Java `checkFields`).
    #[error("commitOrRollback field wrong: {value}")]
    CommitOrRollbackWrong { value: i32 },
    /// END_TRANSACTION names no half message.
    #[error("Find prepared transaction message failed")]
    PrepareMessageNotFound { offset: i64 },
    #[error("The producer group wrong")]
    TransactionProducerGroupWrong { producer_group: String },
    #[error("The transaction state table offset wrong")]
    TransactionStateTableOffsetWrong { expected: i64, got: i64 },
    #[error("The commit log offset wrong")]
    TransactionCommitLogOffsetWrong { offset: i64 },
    /// A producer's own end (not an answer to a check) after the message's
    /// CHECK_IMMUNITY_TIME_IN_SECONDS: the check-back decides (Java `rejectCommitOrRollback`).
    #[error("the half message's check immunity time has passed; its state is decided by the transaction check")]
    TransactionImmunityPassed { offset: i64 },

    // ---- The store and the metadata files.
    /// A put the store refused: the remark is the store's own text, the code Java's for the
    /// put status this error stands for.
    #[error("{0}")]
    PutMessage(#[source] StoreError),
    /// Any other store call that failed.
    #[error("store error: {0}")]
    Store(#[from] StoreError),
    #[error("persisting broker metadata failed: {0}")]
    Persist(#[from] PersistError),
    #[error("encoding topics failed: {0}")]
    TopicTableEncode(#[source] serde_json::Error),
    #[error("encoding LockBatchResponseBody failed: {0}")]
    LockBatchEncode(#[source] serde_json::Error),
}

impl BrokerError {
    /// The response code of this error: Java's for the same case.
    pub fn response_code(&self) -> i32 {
        use BrokerError as E;
        match self {
            E::RequestCodeNotSupported { .. } => rc::REQUEST_CODE_NOT_SUPPORTED,
            E::Acl(_)
            | E::BrokerForbidden { .. }
            | E::TopicForbidden { .. }
            | E::SystemTopicSendForbidden { .. }
            | E::GroupConsumeDisabled { .. }
            | E::BroadcastForbidden { .. } => rc::NO_PERMISSION,
            E::SlaveSendForbidden { .. } => rc::SERVICE_NOT_AVAILABLE,
            E::TopicNotExist { .. } | E::StatsTopicNotExist { .. } | E::NoTopicInBroker { .. } => {
                rc::TOPIC_NOT_EXIST
            }
            E::ConsumerGroupNotOnline { .. } => rc::CONSUMER_NOT_ONLINE,
            E::BrokerConfigNotUpdatable { .. } => rc::NO_PERMISSION,
            E::DeleteTopicBlank
            | E::SystemTopicConflict { .. }
            | E::GroupName(_)
            | E::BrokerConfigValue { .. } => rc::INVALID_PARAMETER,
            E::ProducerGroupNotExist { .. }
            | E::SubscriptionGroupBody(_)
            | E::BrokerConfigBody { .. }
            | E::AdminBodyEncode { .. } => rc::SYSTEM_ERROR,
            E::SubscriptionGroupNotExist { .. } | E::RetryGroupNotExist { .. } => {
                rc::SUBSCRIPTION_GROUP_NOT_EXIST
            }
            E::ConsumerGroupInfoNotExist { .. } | E::SubscriptionNotExist { .. } => {
                rc::SUBSCRIPTION_NOT_EXIST
            }
            E::SubscriptionNotLatest { .. } => rc::SUBSCRIPTION_NOT_LATEST,
            E::ConsumerOffsetNotFound => rc::QUERY_NOT_FOUND,
            E::ResetOffsetTopicNotExist { .. } => rc::TOPIC_NOT_EXIST,
            E::ConsumerNotOnline { .. } => rc::CONSUMER_NOT_ONLINE,
            E::ClientCallTimeout { .. } => rc::CONSUME_MSG_TIMEOUT,
            E::ResetOffsetGroupNotExist { .. }
            | E::ResetOffsetOutOfRange { .. }
            | E::ConsumerClientNotOnline { .. }
            | E::ClientCallFailed { .. } => rc::SYSTEM_ERROR,
            E::SubscriptionParse { .. } | E::ClientSubscriptionParse { .. } => {
                rc::SUBSCRIPTION_PARSE_FAILED
            }
            E::TopicName(_)
            | E::TopicNameConflict { .. }
            | E::QueueNumsOutOfRange { .. }
            | E::PullQueueIdIllegal { .. }
            | E::OffsetQueueIdIllegal { .. }
            | E::SendQueueIdIllegal { .. } => rc::INVALID_PARAMETER,
            E::BatchToRetryTopic { .. }
            | E::BatchTooManyMessages { .. }
            | E::BatchTransaction { .. }
            | E::TransactionSysFlagWithoutHalf { .. } => rc::MESSAGE_ILLEGAL,
            E::TransactionMessageRejected { .. } => rc::NO_PERMISSION,
            E::EndTransactionOnSlave => rc::SLAVE_NOT_AVAILABLE,
            E::TransactionImmunityPassed { .. } => rc::ILLEGAL_OPERATION,
            E::CommitOrRollbackWrong { .. }
            | E::PrepareMessageNotFound { .. }
            | E::TransactionProducerGroupWrong { .. }
            | E::TransactionStateTableOffsetWrong { .. }
            | E::TransactionCommitLogOffsetWrong { .. } => rc::SYSTEM_ERROR,
            E::PutMessage(e) => put_status_code(e.put_status()),
            // A read that failed: Java's pull and query processors answer SYSTEM_ERROR whatever
            // the store's reason ("store getMessage return null").
            E::Store(_) => rc::SYSTEM_ERROR,
            E::Header(_)
            | E::HeartbeatBody(_)
            | E::ClientConfigBody(_)
            | E::LockBatchBody(_)
            | E::NoConsumerInGroup { .. }
            | E::PropertyFilterDisabled
            | E::ExpressionTypeUnsupported { .. }
            | E::MessageNotFound { .. }
            | E::SendBackMessageNotFound { .. }
            | E::SendBackNoMaster { .. }
            | E::StoredMessageUnreadable { .. }
            | E::Persist(_)
            | E::TopicTableEncode(_)
            | E::LockBatchEncode(_) => rc::SYSTEM_ERROR,
        }
    }

    /// The remark of this error's response: its text, except that store and metadata-file
    /// errors name a file without its directories (a client has no use for the broker's
    /// layout). Then the whole text, paths included, is logged, since the client's copy no
    /// longer says where.
    pub fn remark(&self) -> String {
        use BrokerError as E;
        // The prefixes are those of the variants' `#[error]` texts.
        let remark = match self {
            E::PutMessage(e) => e.text_without_paths(),
            E::Store(e) => format!("store error: {}", e.text_without_paths()),
            E::Persist(e) => format!(
                "persisting broker metadata failed: {}",
                e.text_without_paths()
            ),
            other => return other.to_string(),
        };
        let text = self.to_string();
        if remark != text {
            tracing::warn!(
                error = text,
                "request failed in the store or a metadata file"
            );
        }
        remark
    }

    /// The response to `request` carrying this error.
    pub fn into_response(self, request: &RemotingCommand) -> RemotingCommand {
        RemotingCommand::response_to(request, self.response_code(), Some(self.remark()))
    }
}

/// Java `handlePutMessageResult`: store status → response code. Every store failure reaches a
/// response through here, as the status it stands for ([`StoreError::put_status`]).
pub fn put_status_code(status: PutMessageStatus) -> i32 {
    use PutMessageStatus as S;
    match status {
        S::PutOk => rc::SUCCESS,
        S::FlushDiskTimeout => rc::FLUSH_DISK_TIMEOUT,
        S::FlushSlaveTimeout => rc::FLUSH_SLAVE_TIMEOUT,
        S::SlaveNotAvailable => rc::SLAVE_NOT_AVAILABLE,
        S::MessageIllegal | S::PropertiesSizeExceeded => rc::MESSAGE_ILLEGAL,
        S::ServiceNotAvailable => rc::SERVICE_NOT_AVAILABLE,
        S::OsPageCacheBusy => rc::SYSTEM_BUSY,
        _ => rc::SYSTEM_ERROR,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn put_status_maps_like_java() {
        assert_eq!(put_status_code(PutMessageStatus::PutOk), rc::SUCCESS);
        assert_eq!(
            put_status_code(PutMessageStatus::FlushDiskTimeout),
            rc::FLUSH_DISK_TIMEOUT
        );
        assert_eq!(
            put_status_code(PutMessageStatus::PropertiesSizeExceeded),
            rc::MESSAGE_ILLEGAL
        );
        assert_eq!(
            put_status_code(PutMessageStatus::OsPageCacheBusy),
            rc::SYSTEM_BUSY
        );
        assert_eq!(
            put_status_code(PutMessageStatus::UnknownError),
            rc::SYSTEM_ERROR
        );
    }

    #[test]
    fn store_errors_keep_their_kind_up_to_the_response_code() {
        let code = |e: StoreError| BrokerError::PutMessage(e).response_code();
        assert_eq!(code(StoreError::FlushTimeout), rc::FLUSH_DISK_TIMEOUT);
        // A failed group-commit fsync: FLUSH_DISK_TIMEOUT, as Java's unflushed offset.
        let fsync = StoreError::Io {
            op: "fsync",
            path: "commitlog/0".into(),
            source: std::io::Error::from_raw_os_error(5),
        };
        assert_eq!(
            code(StoreError::FlushFailed {
                source: std::sync::Arc::new(fsync)
            }),
            rc::FLUSH_DISK_TIMEOUT
        );
        assert_eq!(code(StoreError::ShutDown), rc::SERVICE_NOT_AVAILABLE);
        assert_eq!(
            code(StoreError::Poisoned {
                reason: "fsync".into()
            }),
            rc::SERVICE_NOT_AVAILABLE
        );
        assert_eq!(
            code(StoreError::MessageTooLarge {
                size_bytes: 2,
                max_bytes: 1
            }),
            rc::MESSAGE_ILLEGAL
        );
        assert_eq!(
            code(StoreError::PropertiesTooLarge {
                size_bytes: 2,
                max_bytes: 1
            }),
            rc::MESSAGE_ILLEGAL
        );
        let io = StoreError::Io {
            op: "read",
            path: "x".into(),
            source: std::io::Error::other("disk"),
        };
        assert_eq!(code(io), rc::SYSTEM_ERROR);
        let read = BrokerError::Store(StoreError::ShutDown);
        assert_eq!(read.response_code(), rc::SYSTEM_ERROR, "a failed read");
    }

    /// A client learns what failed and in which file, not where the broker keeps its files.
    #[test]
    fn remarks_name_files_without_their_directories() {
        let request = RemotingCommand::request(10);
        let commit_log = "/var/lib/ringmq/store/commitlog/00000000000000000000";
        let errors = [
            BrokerError::Store(StoreError::Io {
                op: "read",
                path: commit_log.into(),
                source: std::io::Error::other("disk"),
            }),
            BrokerError::PutMessage(StoreError::Corrupted {
                path: commit_log.into(),
                offset: 7,
                reason: "bad magic".into(),
            }),
            BrokerError::Store(StoreError::Locked {
                path: "/var/lib/ringmq/store".into(),
            }),
            BrokerError::Persist(PersistError::Io {
                op: "rename",
                path: "/var/lib/ringmq/store/config/topics.json".into(),
                source: std::io::Error::other("disk"),
            }),
        ];
        let remarks: Vec<String> = errors
            .into_iter()
            .map(|e| e.into_response(&request).remark.unwrap())
            .collect();
        assert_eq!(
            remarks,
            [
                "store error: read failed on 00000000000000000000: disk",
                "corrupted store file 00000000000000000000 at byte 7: bad magic",
                "store error: store directory store is locked by another process",
                "persisting broker metadata failed: rename topics.json: disk",
            ]
        );
    }

    #[test]
    fn remarks_are_the_texts_clients_know() {
        let e = BrokerError::BrokerForbidden {
            broker_addr: "10.0.0.1:10911".into(),
            access: Access::Pull,
        };
        assert_eq!(
            e.to_string(),
            "the broker[10.0.0.1:10911] pulling message is forbidden"
        );
        let e = BrokerError::TopicForbidden {
            topic: "T".into(),
            access: Access::Send,
        };
        assert_eq!(e.to_string(), "the topic[T] sending message is forbidden");
        let e = BrokerError::RequestCodeNotSupported { code: 9999 };
        assert_eq!(e.to_string(), " request type 9999 not supported");
        assert_eq!(e.response_code(), rc::REQUEST_CODE_NOT_SUPPORTED);
    }
}
