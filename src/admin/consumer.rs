//! Consumer and producer verbs (mqadmin's `ConsumerProgressSubCommand`,
//! `ConsumerConnectionSubCommand`, `ProducerConnectionSubCommand`).

use clap::Args;
use serde_json::json;

use super::client::{masters_of_route, AdminClient, BrokerTarget, MASTER_ID};
use super::error::AdminError;
use super::output::{format_time_ms, Report, Table};
use crate::common::topic_validator::RETRY_GROUP_TOPIC_PREFIX;
use crate::remoting::body::admin::{ConsumeStats, ConsumerConnection, ProducerConnection};
use crate::remoting::codes::{request_code as req, response_code as rc};
use crate::remoting::command::RemotingCommand;

/// The brokers that know `group`: those of its retry topic's route, as Java looks them up;
/// else those of `topic`; else every master.
fn group_brokers(
    admin: &AdminClient,
    group: &str,
    topic: Option<&str>,
) -> Result<Vec<BrokerTarget>, AdminError> {
    let not_routed = |e: &AdminError| e.refused_code() == Some(rc::TOPIC_NOT_EXIST);
    match admin.route(&format!("{RETRY_GROUP_TOPIC_PREFIX}{group}")) {
        Ok(route) => return Ok(masters_of_route(&route)),
        Err(e) if not_routed(&e) => {}
        Err(e) => return Err(e),
    }
    if let Some(topic) = topic {
        match admin.topic_masters(topic) {
            Ok(targets) => return Ok(targets),
            Err(e) if not_routed(&e) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(admin
        .all_brokers()?
        .into_iter()
        .filter(|((_, _, id), _)| *id == MASTER_ID)
        .map(|((_, name, _), addr)| BrokerTarget { name, addr })
        .collect())
}

#[derive(Args, Debug)]
pub struct ConsumerProgressArgs {
    #[arg(short = 'g', long = "groupName")]
    pub group: String,
    /// Only this topic of the group.
    #[arg(short = 't', long = "topicName")]
    pub topic: Option<String>,
}

fn consume_stats(
    admin: &AdminClient,
    a: &ConsumerProgressArgs,
) -> Result<ConsumeStats, AdminError> {
    let mut merged = ConsumeStats::default();
    for target in group_brokers(admin, &a.group, a.topic.as_deref())? {
        let mut request =
            RemotingCommand::request(req::GET_CONSUME_STATS).with_ext("consumerGroup", &a.group);
        if let Some(topic) = &a.topic {
            request.set_ext("topic", topic);
        }
        let r = admin.invoke_ok(&target.addr, request)?;
        let stats = AdminClient::body_with(&r, &target.addr, "ConsumeStats", ConsumeStats::parse)?;
        merged.consume_tps += stats.consume_tps;
        merged.offset_table.extend(stats.offset_table);
    }
    Ok(merged)
}

pub fn consumer_progress(
    admin: &AdminClient,
    a: &ConsumerProgressArgs,
) -> Result<Report, AdminError> {
    let stats = consume_stats(admin, a)?;
    let mut t = Table::new(&[
        "#Topic",
        "#Broker Name",
        "#QID",
        "#Broker Offset",
        "#Consumer Offset",
        "#Diff",
        "#Inflight",
        "#LastTime",
    ]);
    let (mut diff_total, mut inflight_total) = (0i64, 0i64);
    let mut rows = Vec::new();
    for (mq, w) in &stats.offset_table {
        let diff = w.broker_offset - w.consumer_offset;
        let inflight = w.pull_offset - w.consumer_offset;
        diff_total += diff;
        inflight_total += inflight;
        let last = if w.last_timestamp == 0 {
            "N/A".to_string()
        } else {
            format_time_ms(w.last_timestamp)
        };
        t.row(vec![
            mq.topic.clone(),
            mq.broker_name.clone(),
            mq.queue_id.to_string(),
            w.broker_offset.to_string(),
            w.consumer_offset.to_string(),
            diff.to_string(),
            inflight.to_string(),
            last,
        ]);
        rows.push(json!({
            "topic": mq.topic, "brokerName": mq.broker_name, "queueId": mq.queue_id,
            "brokerOffset": w.broker_offset, "consumerOffset": w.consumer_offset,
            "pullOffset": w.pull_offset, "diff": diff, "lastTimestamp": w.last_timestamp,
        }));
    }
    let text = format!(
        "{}\nConsume TPS: {:.2}\nConsume Diff Total: {diff_total}\nConsume Inflight Total: {inflight_total}\n",
        t.render(),
        stats.consume_tps
    );
    Ok(Report {
        text,
        json: json!({
            "group": a.group, "queues": rows, "consumeTps": stats.consume_tps,
            "diffTotal": diff_total, "inflightTotal": inflight_total,
        }),
    })
}

#[derive(Args, Debug)]
pub struct ConsumerConnectionArgs {
    #[arg(short = 'g', long = "consumerGroup")]
    pub group: String,
    /// Ask this broker instead of looking the group's brokers up.
    #[arg(short = 'b', long = "brokerAddr")]
    pub broker_addr: Option<String>,
}

/// The first broker's answer that is not CONSUMER_NOT_ONLINE, or that refusal.
fn consumer_connection(
    admin: &AdminClient,
    a: &ConsumerConnectionArgs,
) -> Result<ConsumerConnection, AdminError> {
    let targets = match &a.broker_addr {
        Some(addr) => admin.brokers(Some(addr), None)?,
        None => group_brokers(admin, &a.group, None)?,
    };
    let mut last = AdminError::Usage(format!("no broker serves group {}", a.group));
    for target in targets {
        let request = RemotingCommand::request(req::GET_CONSUMER_CONNECTION_LIST)
            .with_ext("consumerGroup", &a.group);
        match admin.invoke_ok(&target.addr, request) {
            Ok(r) => return AdminClient::body(&r, &target.addr, "ConsumerConnection"),
            Err(e) if e.refused_code() == Some(rc::CONSUMER_NOT_ONLINE) => last = e,
            Err(e) => return Err(e),
        }
    }
    Err(last)
}

pub fn consumer_connection_report(
    admin: &AdminClient,
    a: &ConsumerConnectionArgs,
) -> Result<Report, AdminError> {
    let cc = consumer_connection(admin, a)?;
    let mut t = Table::new(&["#ClientId", "#ClientAddr", "#Language", "#Version"]);
    for c in &cc.connection_set {
        t.row(vec![
            c.client_id.clone(),
            c.client_addr.clone(),
            c.language.clone(),
            c.version.to_string(),
        ]);
    }
    let mut subs = Table::new(&["#Topic", "#SubExpression"]);
    for (topic, sub) in &cc.subscription_table {
        subs.row(vec![topic.clone(), sub.sub_string.clone()]);
    }
    let text = format!(
        "{}\nBelow is subscription:\n{}\nConsumeType: {}\nMessageModel: {}\nConsumeFromWhere: {}\n",
        t.render(),
        subs.render(),
        cc.consume_type,
        cc.message_model,
        cc.consume_from_where
    );
    Ok(Report {
        text,
        json: serde_json::to_value(&cc).unwrap_or_default(),
    })
}

#[derive(Args, Debug)]
pub struct ProducerConnectionArgs {
    #[arg(short = 'g', long = "producerGroup")]
    pub group: String,
    /// A topic the group sends to: its brokers are asked.
    #[arg(short = 't', long = "topic")]
    pub topic: String,
}

pub fn producer_connection(
    admin: &AdminClient,
    a: &ProducerConnectionArgs,
) -> Result<Report, AdminError> {
    let mut last = AdminError::Usage(format!("topic {} has no master broker", a.topic));
    for target in admin.topic_masters(&a.topic)? {
        let request = RemotingCommand::request(req::GET_PRODUCER_CONNECTION_LIST)
            .with_ext("producerGroup", &a.group);
        let pc: ProducerConnection = match admin.invoke_ok(&target.addr, request) {
            Ok(r) => AdminClient::body(&r, &target.addr, "ProducerConnection")?,
            Err(e @ AdminError::Refused { .. }) => {
                last = e;
                continue;
            }
            Err(e) => return Err(e),
        };
        let mut t = Table::new(&["#ClientId", "#ClientAddr", "#Language", "#Version"]);
        for c in &pc.connection_set {
            t.row(vec![
                c.client_id.clone(),
                c.client_addr.clone(),
                c.language.clone(),
                c.version.to_string(),
            ]);
        }
        return Ok(Report {
            text: t.render(),
            json: serde_json::to_value(&pc).unwrap_or_default(),
        });
    }
    Err(last)
}
