//! Message verbs (mqadmin's `PrintMessageSubCommand`, `QueryMsgByIdSubCommand`,
//! `QueryMsgByKeySubCommand`): records are read with PULL_MESSAGE (11), VIEW_MESSAGE_BY_ID (33)
//! and QUERY_MESSAGE (12), and decoded from the CommitLog record format the broker sends.

use std::fmt::Write as _;

use clap::Args;
use serde_json::json;

use super::client::AdminClient;
use super::error::AdminError;
use super::output::{format_time_ms, Report, Table};
use crate::remoting::codes::{request_code as req, response_code as rc};
use crate::remoting::command::RemotingCommand;
use crate::store::format::{self, DecodedRecord};

/// Java `MixAll.TOOLS_CONSUMER_GROUP`, the group printMsg pulls as (it commits nothing).
const TOOLS_CONSUMER_GROUP: &str = "TOOLS_CONSUMER";
/// Messages asked for per pull.
const PRINT_PULL_BATCH: i32 = 32;
/// PullSysFlag FLAG_SUBSCRIPTION: the subscription travels in the header.
const PULL_FLAG_SUBSCRIPTION: i32 = 0x4;
/// Property separators of the record format (Java `MessageDecoder`).
const PROPERTY_UNIQ_KEY: &[u8] = b"UNIQ_KEY";

/// The records of a pull or query body, in order.
pub fn decode_records<'a>(
    body: &'a [u8],
    addr: &str,
) -> Result<Vec<DecodedRecord<'a>>, AdminError> {
    let mut out = Vec::new();
    let mut at = 0;
    while at < body.len() {
        let record = format::decode_record(&body[at..]).map_err(|e| AdminError::Record {
            what: "message",
            addr: addr.to_string(),
            reason: e.to_string(),
        })?;
        let size = usize::try_from(record.total_size).unwrap_or(0);
        if size == 0 {
            break;
        }
        at += size;
        out.push(record);
    }
    Ok(out)
}

fn property(r: &DecodedRecord<'_>, name: &[u8]) -> String {
    format::property_value(r.properties, name)
        .map(|v| String::from_utf8_lossy(v).into_owned())
        .unwrap_or_default()
}

/// Java `MessageClientExt.getMsgId`: the producer's UNIQ_KEY, else the offset msgId.
pub fn msg_id(r: &DecodedRecord<'_>) -> String {
    let uniq = property(r, PROPERTY_UNIQ_KEY);
    if uniq.is_empty() {
        offset_msg_id(r)
    } else {
        uniq
    }
}

fn offset_msg_id(r: &DecodedRecord<'_>) -> String {
    format::encode_offset_msg_id(&r.store_host, r.phy_offset)
}

fn properties_json(r: &DecodedRecord<'_>) -> serde_json::Map<String, serde_json::Value> {
    format::properties_iter(r.properties)
        .map(|(k, v)| {
            (
                String::from_utf8_lossy(k).into_owned(),
                json!(String::from_utf8_lossy(v)),
            )
        })
        .collect()
}

fn record_json(r: &DecodedRecord<'_>) -> serde_json::Value {
    json!({
        "msgId": msg_id(r), "offsetMsgId": offset_msg_id(r), "topic": r.topic,
        "queueId": r.queue_id, "queueOffset": r.queue_offset, "commitLogOffset": r.phy_offset,
        "reconsumeTimes": r.reconsume_times, "bornTimestamp": r.born_timestamp_ms,
        "storeTimestamp": r.store_timestamp_ms, "bornHost": r.born_host.to_string(),
        "storeHost": r.store_host.to_string(), "sysFlag": r.sys_flag, "flag": r.flag,
        "properties": properties_json(r), "body": String::from_utf8_lossy(r.body),
    })
}

#[derive(Args, Debug)]
pub struct PrintMsgArgs {
    #[arg(short = 't', long = "topic")]
    pub topic: String,
    /// Tag expression (`TagA || TagB`).
    #[arg(short = 's', long = "subExpression", default_value = "*")]
    pub sub_expression: String,
    /// Start at the first message stored at or after this time (ms, or yyyy-MM-dd#HH:mm:ss:SSS).
    #[arg(short = 'b', long = "beginTimestamp")]
    pub begin: Option<String>,
    /// Stop at the last message stored at or before this time.
    #[arg(short = 'e', long = "endTimestamp")]
    pub end: Option<String>,
    /// Print bodies (true) or not.
    #[arg(short = 'd', long = "printBody", default_value_t = true, action = clap::ArgAction::Set)]
    pub print_body: bool,
}

fn queue_offset(
    admin: &AdminClient,
    addr: &str,
    topic: &str,
    queue_id: i32,
    code: i32,
    timestamp: Option<i64>,
) -> Result<i64, AdminError> {
    let mut request = RemotingCommand::request(code)
        .with_ext("topic", topic)
        .with_ext("queueId", queue_id);
    if let Some(t) = timestamp {
        request.set_ext("timestamp", t);
    }
    let r = admin.invoke_ok(addr, request)?;
    r.ext_i64("offset").map_err(|e| AdminError::Record {
        what: "offset",
        addr: addr.to_string(),
        reason: e.to_string(),
    })
}

/// Pulls `[from, to)` of one queue, calling `each` for every record.
fn pull_range(
    admin: &AdminClient,
    addr: &str,
    a: &PrintMsgArgs,
    queue_id: i32,
    (mut from, to): (i64, i64),
    each: &mut dyn FnMut(&DecodedRecord<'_>),
) -> Result<(), AdminError> {
    while from < to {
        let request = RemotingCommand::request(req::PULL_MESSAGE)
            .with_ext("consumerGroup", TOOLS_CONSUMER_GROUP)
            .with_ext("topic", &a.topic)
            .with_ext("queueId", queue_id)
            .with_ext("queueOffset", from)
            .with_ext("maxMsgNums", PRINT_PULL_BATCH)
            .with_ext("sysFlag", PULL_FLAG_SUBSCRIPTION)
            .with_ext("commitOffset", 0)
            .with_ext("suspendTimeoutMillis", 0)
            .with_ext("subscription", &a.sub_expression)
            .with_ext("subVersion", 0)
            .with_ext("expressionType", "TAG");
        let r = admin.invoke(addr, request)?;
        let next = r.ext_i64("nextBeginOffset").unwrap_or(to);
        match r.code {
            rc::SUCCESS => {
                for record in decode_records(&r.body, addr)? {
                    if record.queue_offset < to {
                        each(&record);
                    }
                }
            }
            rc::PULL_NOT_FOUND | rc::PULL_RETRY_IMMEDIATELY | rc::PULL_OFFSET_MOVED => {}
            code => {
                return Err(AdminError::Refused {
                    addr: addr.to_string(),
                    code,
                    remark: r.remark.unwrap_or_default(),
                })
            }
        }
        if next <= from {
            break;
        }
        from = next;
    }
    Ok(())
}

pub fn print_msg(admin: &AdminClient, a: &PrintMsgArgs) -> Result<Report, AdminError> {
    let now = crate::common::now_ms();
    let parse = |t: &Option<String>| {
        t.as_deref()
            .map(|t| super::output::parse_time_ms(t, now).map_err(AdminError::Usage))
            .transpose()
    };
    let (begin, end) = (parse(&a.begin)?, parse(&a.end)?);
    let route = admin.route(&a.topic)?;
    let mut text = String::new();
    let mut messages = Vec::new();
    for target in super::client::masters_of_route(&route) {
        let queues = route
            .queue_datas
            .iter()
            .find(|q| q.broker_name == target.name)
            .map_or(0, |q| q.read_queue_nums);
        for queue_id in 0..queues {
            let (min_code, max_code) = (req::GET_MIN_OFFSET, req::GET_MAX_OFFSET);
            let search = req::SEARCH_OFFSET_BY_TIMESTAMP;
            let from = match begin {
                Some(t) => queue_offset(admin, &target.addr, &a.topic, queue_id, search, Some(t))?,
                None => queue_offset(admin, &target.addr, &a.topic, queue_id, min_code, None)?,
            };
            let to = match end {
                Some(t) => {
                    queue_offset(admin, &target.addr, &a.topic, queue_id, search, Some(t))? + 1
                }
                None => queue_offset(admin, &target.addr, &a.topic, queue_id, max_code, None)?,
            };
            let mut each = |r: &DecodedRecord<'_>| {
                if end.is_some_and(|e| r.store_timestamp_ms > e) {
                    return;
                }
                let body = if a.print_body {
                    String::from_utf8_lossy(r.body).into_owned()
                } else {
                    "NOT PRINT BODY".into()
                };
                let _ = writeln!(
                    text,
                    "MSGID: {} Message [topic={}, queueId={}, queueOffset={}, tags={}, keys={}, storeTimestamp={}] BODY: {body}",
                    msg_id(r), r.topic, r.queue_id, r.queue_offset, property(r, b"TAGS"),
                    property(r, b"KEYS"), r.store_timestamp_ms
                );
                messages.push(record_json(r));
            };
            pull_range(admin, &target.addr, a, queue_id, (from, to), &mut each)?;
        }
    }
    Ok(Report {
        text,
        json: json!({ "topic": a.topic, "messages": messages }),
    })
}

fn message_detail(r: &DecodedRecord<'_>) -> String {
    let mut out = String::new();
    let mut line = |k: &str, v: String| {
        let _ = writeln!(out, "{k:<20} {v}");
    };
    line("OffsetID:", offset_msg_id(r));
    line("Topic:", r.topic.to_string());
    line("Tags:", format!("[{}]", property(r, b"TAGS")));
    line("Keys:", format!("[{}]", property(r, b"KEYS")));
    line("Queue ID:", r.queue_id.to_string());
    line("Queue Offset:", r.queue_offset.to_string());
    line("CommitLog Offset:", r.phy_offset.to_string());
    line("Reconsume Times:", r.reconsume_times.to_string());
    line("Born Timestamp:", format_time_ms(r.born_timestamp_ms));
    line("Store Timestamp:", format_time_ms(r.store_timestamp_ms));
    line("Born Host:", r.born_host.to_string());
    line("Store Host:", r.store_host.to_string());
    line("System Flag:", r.sys_flag.to_string());
    line(
        "Properties:",
        serde_json::Value::Object(properties_json(r)).to_string(),
    );
    line(
        "Message Body:",
        String::from_utf8_lossy(r.body).into_owned(),
    );
    out
}

#[derive(Args, Debug)]
pub struct QueryMsgByIdArgs {
    /// Offset message ids (the broker address and CommitLog offset), comma separated.
    #[arg(short = 'i', long = "msgId")]
    pub msg_ids: String,
}

pub fn query_msg_by_id(admin: &AdminClient, a: &QueryMsgByIdArgs) -> Result<Report, AdminError> {
    let mut text = String::new();
    let mut messages = Vec::new();
    for id in a
        .msg_ids
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
    {
        let (store_host, offset) = format::decode_offset_msg_id(id)
            .map_err(|e| AdminError::Usage(format!("{id} is not an offset message id: {e}")))?;
        let addr = store_host.to_string();
        let r = admin.invoke_ok(
            &addr,
            RemotingCommand::request(req::VIEW_MESSAGE_BY_ID).with_ext("offset", offset),
        )?;
        for record in decode_records(&r.body, &addr)? {
            text.push_str(&message_detail(&record));
            text.push('\n');
            messages.push(record_json(&record));
        }
    }
    Ok(Report {
        text,
        json: json!({ "messages": messages }),
    })
}

#[derive(Args, Debug)]
pub struct QueryMsgByKeyArgs {
    #[arg(short = 't', long = "topic")]
    pub topic: String,
    #[arg(short = 'k', long = "msgKey")]
    pub key: String,
    #[arg(short = 'b', long = "beginTimestamp", default_value_t = 0)]
    pub begin: i64,
    #[arg(short = 'e', long = "endTimestamp", default_value_t = i64::MAX)]
    pub end: i64,
    #[arg(short = 'm', long = "maxNum", default_value_t = 64)]
    pub max_num: i32,
}

/// QUERY_MESSAGE to every master of the topic; a broker with no match answers QUERY_NOT_FOUND.
pub fn query_msg_by_key(admin: &AdminClient, a: &QueryMsgByKeyArgs) -> Result<Report, AdminError> {
    let mut t = Table::new(&["#Message ID", "#QID", "#Offset"]);
    let mut messages = Vec::new();
    for target in admin.topic_masters(&a.topic)? {
        let request = RemotingCommand::request(req::QUERY_MESSAGE)
            .with_ext("topic", &a.topic)
            .with_ext("key", &a.key)
            .with_ext("maxNum", a.max_num)
            .with_ext("beginTimestamp", a.begin)
            .with_ext("endTimestamp", a.end)
            .with_ext("_UNIQUE_KEY_QUERY", false);
        let r = match admin.invoke_ok(&target.addr, request) {
            Ok(r) => r,
            Err(e) if e.refused_code() == Some(rc::QUERY_NOT_FOUND) => continue,
            Err(e) => return Err(e),
        };
        for record in decode_records(&r.body, &target.addr)? {
            t.row(vec![
                msg_id(&record),
                record.queue_id.to_string(),
                record.queue_offset.to_string(),
            ]);
            messages.push(record_json(&record));
        }
    }
    Ok(Report {
        text: t.render(),
        json: json!({ "topic": a.topic, "key": a.key, "messages": messages }),
    })
}
