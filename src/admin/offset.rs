//! `resetOffsetByTime` (mqadmin's `ResetOffsetByTimeCommand`): INVOKE_BROKER_TO_RESET_OFFSET
//! (222) to every master of the topic, each answering the offsets it reset its queues to. When
//! a broker says the group is not online, the offsets are rolled back the old way, as Java's
//! `ResetOffsetByTimeOldCommand` does: the group's consume stats, the offset of the time in each
//! queue (SEARCH_OFFSET_BY_TIMESTAMP), and UPDATE_CONSUMER_OFFSET.

use clap::Args;
use serde_json::json;

use super::client::{AdminClient, BrokerTarget};
use super::error::AdminError;
use super::output::{parse_time_ms, Report, Table};
use crate::remoting::body::admin::ConsumeStats;
use crate::remoting::body::reset_offset::ResetOffsetBody;
use crate::remoting::codes::{request_code as req, response_code as rc};
use crate::remoting::command::RemotingCommand;

#[derive(Args, Debug)]
pub struct ResetOffsetArgs {
    #[arg(short = 'g', long = "group")]
    pub group: String,
    #[arg(short = 't', long = "topic")]
    pub topic: String,
    /// now, milliseconds since the epoch, or yyyy-MM-dd#HH:mm:ss:SSS (UTC).
    #[arg(short = 's', long = "timestamp")]
    pub timestamp: String,
    /// Also move offsets forward (Java's default; false only rolls back).
    #[arg(short = 'f', long = "force", default_value_t = true, action = clap::ArgAction::Set)]
    pub force: bool,
}

/// One queue's reset: (broker name, queue id, offset).
type ResetRow = (String, i32, i64);

fn invoke_reset(
    admin: &AdminClient,
    target: &BrokerTarget,
    a: &ResetOffsetArgs,
    timestamp: i64,
) -> Result<Vec<ResetRow>, AdminError> {
    let request = RemotingCommand::request(req::INVOKE_BROKER_TO_RESET_OFFSET)
        .with_ext("topic", &a.topic)
        .with_ext("group", &a.group)
        .with_ext("timestamp", timestamp)
        .with_ext("isForce", a.force)
        .with_ext("queueId", -1);
    let r = admin.invoke_ok(&target.addr, request)?;
    let body = AdminClient::body_with(&r, &target.addr, "ResetOffsetBody", ResetOffsetBody::parse)?;
    Ok(body
        .offset_table
        .into_iter()
        .map(|(mq, offset)| (mq.broker_name, mq.queue_id, offset))
        .collect())
}

/// Java `resetOffsetByTimestampOld` on one broker.
fn reset_old_way(
    admin: &AdminClient,
    target: &BrokerTarget,
    a: &ResetOffsetArgs,
    timestamp: i64,
) -> Result<Vec<ResetRow>, AdminError> {
    let r = admin.invoke_ok(
        &target.addr,
        RemotingCommand::request(req::GET_CONSUME_STATS)
            .with_ext("consumerGroup", &a.group)
            .with_ext("topic", &a.topic),
    )?;
    let stats = AdminClient::body_with(&r, &target.addr, "ConsumeStats", ConsumeStats::parse)?;
    let mut rows = Vec::new();
    for (mq, w) in stats.offset_table {
        let r = admin.invoke_ok(
            &target.addr,
            RemotingCommand::request(req::SEARCH_OFFSET_BY_TIMESTAMP)
                .with_ext("topic", &mq.topic)
                .with_ext("queueId", mq.queue_id)
                .with_ext("timestamp", timestamp),
        )?;
        let at_time = r.ext_i64("offset").map_err(|e| AdminError::Record {
            what: "offset",
            addr: target.addr.clone(),
            reason: e.to_string(),
        })?;
        let offset = if a.force || at_time < w.consumer_offset {
            at_time
        } else {
            w.consumer_offset
        };
        admin.invoke_ok(
            &target.addr,
            RemotingCommand::request(req::UPDATE_CONSUMER_OFFSET)
                .with_ext("consumerGroup", &a.group)
                .with_ext("topic", &mq.topic)
                .with_ext("queueId", mq.queue_id)
                .with_ext("commitOffset", offset),
        )?;
        rows.push((mq.broker_name, mq.queue_id, offset));
    }
    Ok(rows)
}

pub fn reset_offset_by_time(
    admin: &AdminClient,
    a: &ResetOffsetArgs,
) -> Result<Report, AdminError> {
    let timestamp =
        parse_time_ms(&a.timestamp, crate::common::now_ms()).map_err(AdminError::Usage)?;
    let mut rows = Vec::new();
    for target in admin.topic_masters(&a.topic)? {
        match invoke_reset(admin, &target, a, timestamp) {
            Ok(r) => rows.extend(r),
            Err(e) if e.refused_code() == Some(rc::CONSUMER_NOT_ONLINE) => {
                rows.extend(reset_old_way(admin, &target, a, timestamp)?);
            }
            Err(e) => return Err(e),
        }
    }
    rows.sort();
    let mut t = Table::new(&["#brokerName", "#queueId", "#offset"]);
    for (name, queue_id, offset) in &rows {
        t.row(vec![name.clone(), queue_id.to_string(), offset.to_string()]);
    }
    let text = format!(
        "start reset consumer offset by specified, group[{}], topic[{}], force[{}], timestamp(string)[{}], timestamp(long)[{timestamp}]\n{}",
        a.group,
        a.topic,
        a.force,
        a.timestamp,
        t.render()
    );
    let json_rows: Vec<_> = rows
        .iter()
        .map(|(n, q, o)| json!({"brokerName": n, "queueId": q, "offset": o}))
        .collect();
    Ok(Report {
        text,
        json: json!({ "group": a.group, "topic": a.topic, "timestamp": timestamp, "offsets": json_rows }),
    })
}
