//! Topic verbs (mqadmin's `UpdateTopicSubCommand`, `DeleteTopicSubCommand`,
//! `TopicListSubCommand`, `TopicRouteSubCommand`, `TopicStatusSubCommand`).

use clap::Args;
use serde_json::json;

use super::client::AdminClient;
use super::error::AdminError;
use super::output::{format_time_ms, Report, Table};
use crate::remoting::body::admin::TopicStatsTable;
use crate::remoting::body::{TopicList, TopicRouteData};
use crate::remoting::codes::request_code as req;
use crate::remoting::command::RemotingCommand;

/// Java `NamesrvUtil.NAMESPACE_ORDER_TOPIC_CONFIG`.
pub const ORDER_TOPIC_CONFIG_NAMESPACE: &str = "ORDER_TOPIC_CONFIG";

#[derive(Args, Debug)]
pub struct UpdateTopicArgs {
    /// Create the topic on this broker (ip:port).
    #[arg(short = 'b', long = "brokerAddr")]
    pub broker_addr: Option<String>,
    /// Create the topic on every master of this cluster.
    #[arg(short = 'c', long = "clusterName")]
    pub cluster: Option<String>,
    #[arg(short = 't', long = "topic")]
    pub topic: String,
    #[arg(short = 'r', long = "readQueueNums", default_value_t = 8)]
    pub read_queue_nums: i32,
    #[arg(short = 'w', long = "writeQueueNums", default_value_t = 8)]
    pub write_queue_nums: i32,
    /// Permission bits: 2 write, 4 read, 6 both.
    #[arg(short = 'p', long = "perm", default_value_t = 6)]
    pub perm: i32,
    /// An ordered topic (with -c, its queue layout is stored in the name servers' KV config).
    #[arg(short = 'o', long = "order", default_value_t = false, action = clap::ArgAction::Set)]
    pub order: bool,
}

pub fn update_topic(admin: &AdminClient, a: &UpdateTopicArgs) -> Result<Report, AdminError> {
    let targets = admin.brokers(a.broker_addr.as_deref(), a.cluster.as_deref())?;
    let mut text = String::new();
    let mut created = Vec::new();
    for target in &targets {
        let request = RemotingCommand::request(req::UPDATE_AND_CREATE_TOPIC)
            .with_ext("topic", &a.topic)
            .with_ext("defaultTopic", "TBW102")
            .with_ext("readQueueNums", a.read_queue_nums)
            .with_ext("writeQueueNums", a.write_queue_nums)
            .with_ext("perm", a.perm)
            .with_ext("topicFilterType", "SINGLE_TAG")
            .with_ext("topicSysFlag", 0)
            .with_ext("order", a.order);
        admin.invoke_ok(&target.addr, request)?;
        text.push_str(&format!("create topic to {} success.\n", target.addr));
        created.push(target.addr.clone());
    }
    let config = json!({
        "topicName": a.topic, "readQueueNums": a.read_queue_nums,
        "writeQueueNums": a.write_queue_nums, "perm": a.perm, "order": a.order,
    });
    text.push_str(&format!("{config}\n"));
    let mut order_conf = None;
    if a.order && a.cluster.is_some() {
        let conf = targets
            .iter()
            .map(|t| format!("{}:{}", t.name, a.write_queue_nums))
            .collect::<Vec<_>>()
            .join(";");
        for addr in admin.namesrv_addrs()? {
            admin.invoke_ok(
                addr,
                RemotingCommand::request(req::PUT_KV_CONFIG)
                    .with_ext("namespace", ORDER_TOPIC_CONFIG_NAMESPACE)
                    .with_ext("key", &a.topic)
                    .with_ext("value", &conf),
            )?;
        }
        text.push_str(&format!(
            "set cluster orderConf. isOrder=true, orderConf=[{conf}]\n"
        ));
        order_conf = Some(conf);
    }
    Ok(Report {
        text,
        json: json!({ "brokers": created, "topicConfig": config, "orderConf": order_conf }),
    })
}

#[derive(Args, Debug)]
pub struct DeleteTopicArgs {
    #[arg(short = 't', long = "topic")]
    pub topic: String,
    /// Delete the topic from every master of this cluster and from the name servers.
    #[arg(short = 'c', long = "clusterName")]
    pub cluster: String,
}

/// Java `DeleteTopicSubCommand.deleteTopic`: the masters first, then the name servers (and
/// the topic's ordered-queue entry in their KV config).
pub fn delete_topic_in_cluster(
    admin: &AdminClient,
    topic: &str,
    cluster: &str,
    text: &mut String,
) -> Result<(), AdminError> {
    for target in admin.cluster_masters(cluster)? {
        admin.invoke_ok(
            &target.addr,
            RemotingCommand::request(req::DELETE_TOPIC_IN_BROKER).with_ext("topic", topic),
        )?;
    }
    text.push_str(&format!(
        "delete topic [{topic}] from cluster [{cluster}] success.\n"
    ));
    for addr in admin.namesrv_addrs()? {
        admin.invoke_ok(
            addr,
            RemotingCommand::request(req::DELETE_TOPIC_IN_NAMESRV)
                .with_ext("topic", topic)
                .with_ext("clusterName", cluster),
        )?;
        // Absent for most topics: the name server answers SUCCESS either way.
        admin.invoke_ok(
            addr,
            RemotingCommand::request(req::DELETE_KV_CONFIG)
                .with_ext("namespace", ORDER_TOPIC_CONFIG_NAMESPACE)
                .with_ext("key", topic),
        )?;
    }
    text.push_str(&format!(
        "delete topic [{topic}] from NameServer success.\n"
    ));
    Ok(())
}

pub fn delete_topic(admin: &AdminClient, a: &DeleteTopicArgs) -> Result<Report, AdminError> {
    let mut text = String::new();
    delete_topic_in_cluster(admin, &a.topic, &a.cluster, &mut text)?;
    Ok(Report {
        text,
        json: json!({ "topic": a.topic, "cluster": a.cluster, "deleted": true }),
    })
}

pub fn topic_list(admin: &AdminClient) -> Result<Report, AdminError> {
    let r = admin.namesrv_ok(RemotingCommand::request(
        req::GET_ALL_TOPIC_LIST_FROM_NAMESERVER,
    ))?;
    let list: TopicList = AdminClient::body(&r, "name server", "TopicList")?;
    let mut text = String::new();
    for topic in &list.topic_list {
        text.push_str(topic);
        text.push('\n');
    }
    Ok(Report {
        text,
        json: json!({ "topicList": list.topic_list }),
    })
}

#[derive(Args, Debug)]
pub struct TopicArg {
    #[arg(short = 't', long = "topic")]
    pub topic: String,
}

pub fn topic_route(admin: &AdminClient, a: &TopicArg) -> Result<Report, AdminError> {
    let route: TopicRouteData = admin.route(&a.topic)?;
    let json = serde_json::to_value(&route).unwrap_or_default();
    Ok(Report {
        text: format!(
            "{}\n",
            serde_json::to_string_pretty(&json).unwrap_or_default()
        ),
        json,
    })
}

pub fn topic_status(admin: &AdminClient, a: &TopicArg) -> Result<Report, AdminError> {
    let mut merged = TopicStatsTable::default();
    for target in admin.topic_masters(&a.topic)? {
        let r = admin.invoke_ok(
            &target.addr,
            RemotingCommand::request(req::GET_TOPIC_STATS_INFO).with_ext("topic", &a.topic),
        )?;
        let table =
            AdminClient::body_with(&r, &target.addr, "TopicStatsTable", TopicStatsTable::parse)?;
        merged.topic_put_tps += table.topic_put_tps;
        merged.offset_table.extend(table.offset_table);
    }
    let mut t = Table::new(&[
        "#Broker Name",
        "#QID",
        "#Min Offset",
        "#Max Offset",
        "#Last Updated",
    ]);
    let mut rows = Vec::new();
    for (mq, o) in &merged.offset_table {
        let updated = if o.last_update_timestamp > 0 {
            format_time_ms(o.last_update_timestamp)
        } else {
            String::new()
        };
        t.row(vec![
            mq.broker_name.clone(),
            mq.queue_id.to_string(),
            o.min_offset.to_string(),
            o.max_offset.to_string(),
            updated,
        ]);
        rows.push(json!({
            "brokerName": mq.broker_name, "queueId": mq.queue_id, "minOffset": o.min_offset,
            "maxOffset": o.max_offset, "lastUpdateTimestamp": o.last_update_timestamp,
        }));
    }
    Ok(Report {
        text: format!(
            "{}\nTopic Put TPS: {:?}\n",
            t.render(),
            merged.topic_put_tps
        ),
        json: json!({ "topic": a.topic, "queues": rows, "topicPutTps": merged.topic_put_tps }),
    })
}
