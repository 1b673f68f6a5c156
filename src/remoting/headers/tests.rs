//! Header decode/encode tests against the ext fields Java clients and brokers send.

use super::*;
use crate::remoting::codes::request_code;
use crate::remoting::command::RemotingCommand;
use crate::remoting::error::HeaderError;

fn cmd_with(code: i32, fields: &[(&'static str, &str)]) -> RemotingCommand {
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
fn offset_headers_round_trip() {
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
}

#[test]
fn client_headers_round_trip() {
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
}

#[test]
fn admin_headers_round_trip() {
    round_trip(
        &ViewMessageRequestHeader {
            topic: None,
            offset: 4096,
        },
        33,
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
}

#[test]
fn namesrv_headers_round_trip() {
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

/// END_TRANSACTION as a Java client's `endTransactionOneway` writes it; keys it does not name
/// (`namespaced`) are ignored.
#[test]
fn end_transaction_as_sent_by_java_client() {
    let cmd = cmd_with(
        request_code::END_TRANSACTION,
        &[
            ("topic", "TopicA"),
            ("producerGroup", "pg"),
            ("tranStateTableOffset", "3"),
            ("commitLogOffset", "4096"),
            ("commitOrRollback", "8"),
            ("fromTransactionCheck", "false"),
            ("msgId", "7F00000100002A9F0000000000001000"),
            ("transactionId", "U1"),
            ("bname", "broker-a"),
            ("namespaced", "false"),
        ],
    );
    let header = EndTransactionRequestHeader::decode(&cmd).expect("decodes");
    assert_eq!(
        header,
        EndTransactionRequestHeader {
            topic: Some("TopicA".into()),
            producer_group: "pg".into(),
            tran_state_table_offset: 3,
            commit_log_offset: 4096,
            commit_or_rollback: 8,
            from_transaction_check: false,
            msg_id: "7F00000100002A9F0000000000001000".into(),
            transaction_id: Some("U1".into()),
            broker_name: Some("broker-a".into()),
        }
    );
    round_trip(&header, request_code::END_TRANSACTION);
    let missing = cmd_with(request_code::END_TRANSACTION, &[("producerGroup", "pg")]);
    assert_eq!(
        EndTransactionRequestHeader::decode(&missing),
        Err(HeaderError::Missing {
            field: "tranStateTableOffset"
        })
    );
}

/// CHECK_TRANSACTION_STATE as Java's `Broker2Client` writes it: every key the clients read.
#[test]
fn check_transaction_state_keys_are_javas() {
    let header = CheckTransactionStateRequestHeader {
        topic: Some("RMQ_SYS_TRANS_HALF_TOPIC".into()),
        tran_state_table_offset: 5,
        commit_log_offset: 8192,
        msg_id: Some("U1".into()),
        transaction_id: Some("U1".into()),
        offset_msg_id: Some("7F00000100002A9F0000000000002000".into()),
        broker_name: Some("broker-a".into()),
    };
    let mut cmd = RemotingCommand::request(request_code::CHECK_TRANSACTION_STATE);
    header.encode(&mut cmd);
    let keys: Vec<&str> = cmd.ext_fields.keys().collect();
    let mut keys = keys;
    keys.sort_unstable();
    assert_eq!(
        keys,
        [
            "bname",
            "commitLogOffset",
            "msgId",
            "offsetMsgId",
            "topic",
            "tranStateTableOffset",
            "transactionId"
        ]
    );
    assert_eq!(cmd.ext_fields["tranStateTableOffset"], "5");
    assert_eq!(cmd.ext_fields["commitLogOffset"], "8192");
    round_trip(&header, request_code::CHECK_TRANSACTION_STATE);
}
