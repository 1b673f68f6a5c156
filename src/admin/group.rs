//! Subscription group verbs (mqadmin's `UpdateSubGroupSubCommand`,
//! `DeleteSubscriptionGroupCommand`).

use bytes::Bytes;
use clap::Args;
use serde_json::json;

use super::client::AdminClient;
use super::cluster::BrokerOrClusterArgs;
use super::error::AdminError;
use super::output::Report;
use super::topic::delete_topic_in_cluster;
use crate::common::topic_validator::{DLQ_GROUP_TOPIC_PREFIX, RETRY_GROUP_TOPIC_PREFIX};
use crate::remoting::codes::request_code as req;
use crate::remoting::command::RemotingCommand;

/// The options of `updateSubGroup`; unset ones keep Java's `SubscriptionGroupConfig`
/// defaults.
#[derive(Args, Debug)]
pub struct UpdateSubGroupArgs {
    #[command(flatten)]
    pub on: BrokerOrClusterArgs,
    #[arg(short = 'g', long = "groupName")]
    pub group: String,
    #[arg(short = 's', long = "consumeEnable", action = clap::ArgAction::Set)]
    pub consume_enable: Option<bool>,
    #[arg(short = 'm', long = "consumeFromMinEnable", action = clap::ArgAction::Set)]
    pub consume_from_min_enable: Option<bool>,
    #[arg(short = 'd', long = "consumeBroadcastEnable", action = clap::ArgAction::Set)]
    pub consume_broadcast_enable: Option<bool>,
    #[arg(short = 'o', long = "consumeMessageOrderly", action = clap::ArgAction::Set)]
    pub consume_message_orderly: Option<bool>,
    #[arg(short = 'q', long = "retryQueueNums")]
    pub retry_queue_nums: Option<i32>,
    #[arg(short = 'r', long = "retryMaxTimes")]
    pub retry_max_times: Option<i32>,
    /// The broker id consumers of the group read from (0 = master; the slave read split).
    #[arg(short = 'i', long = "brokerId")]
    pub broker_id: Option<i64>,
    /// The broker id consumers move to when they fall behind.
    #[arg(short = 'w', long = "whichBrokerWhenConsumeSlowly")]
    pub which_broker_when_consume_slowly: Option<i64>,
    #[arg(short = 'a', long = "notifyConsumerIdsChanged", action = clap::ArgAction::Set)]
    pub notify_consumer_ids_changed: Option<bool>,
}

/// Java's `SubscriptionGroupConfig` with the options applied, members sorted as fastjson
/// writes them.
fn group_config(a: &UpdateSubGroupArgs) -> serde_json::Value {
    json!({
        "brokerId": a.broker_id.unwrap_or(0),
        "consumeBroadcastEnable": a.consume_broadcast_enable.unwrap_or(true),
        "consumeEnable": a.consume_enable.unwrap_or(true),
        "consumeFromMinEnable": a.consume_from_min_enable.unwrap_or(true),
        "consumeMessageOrderly": a.consume_message_orderly.unwrap_or(false),
        "consumeTimeoutMinute": 15,
        "groupName": a.group,
        "groupSysFlag": 0,
        "notifyConsumerIdsChangedEnable": a.notify_consumer_ids_changed.unwrap_or(true),
        "retryMaxTimes": a.retry_max_times.unwrap_or(16),
        "retryQueueNums": a.retry_queue_nums.unwrap_or(1),
        "whichBrokerWhenConsumeSlowly": a.which_broker_when_consume_slowly.unwrap_or(1),
    })
}

pub fn update_sub_group(admin: &AdminClient, a: &UpdateSubGroupArgs) -> Result<Report, AdminError> {
    let config = group_config(a);
    let targets = a.on.targets(admin)?;
    let mut text = String::new();
    let mut brokers = Vec::new();
    for target in targets {
        let request = RemotingCommand::request(req::UPDATE_AND_CREATE_SUBSCRIPTIONGROUP)
            .with_body(Bytes::from(config.to_string()));
        admin.invoke_ok(&target.addr, request)?;
        text.push_str(&format!(
            "create subscription group to {} success.\n",
            target.addr
        ));
        brokers.push(target.addr);
    }
    text.push_str(&format!("{config}\n"));
    Ok(Report {
        text,
        json: json!({ "brokers": brokers, "subscriptionGroupConfig": config }),
    })
}

#[derive(Args, Debug)]
pub struct DeleteSubGroupArgs {
    #[command(flatten)]
    pub on: BrokerOrClusterArgs,
    #[arg(short = 'g', long = "groupName")]
    pub group: String,
    /// Also drop the group's committed offsets.
    #[arg(short = 'r', long = "removeOffset", default_value_t = false, action = clap::ArgAction::Set)]
    pub remove_offset: bool,
}

/// With a cluster, the group's retry and dead-letter topics go too, as in Java.
pub fn delete_sub_group(admin: &AdminClient, a: &DeleteSubGroupArgs) -> Result<Report, AdminError> {
    let targets = a.on.targets(admin)?;
    let mut text = String::new();
    for target in &targets {
        let request = RemotingCommand::request(req::DELETE_SUBSCRIPTIONGROUP)
            .with_ext("groupName", &a.group)
            .with_ext("cleanOffset", a.remove_offset);
        admin.invoke_ok(&target.addr, request)?;
        text.push_str(&format!(
            "delete subscription group [{}] from broker [{}] success.\n",
            a.group, target.addr
        ));
    }
    if a.on.broker_addr.is_none() {
        if let Some(cluster) = &a.on.cluster {
            for prefix in [RETRY_GROUP_TOPIC_PREFIX, DLQ_GROUP_TOPIC_PREFIX] {
                let topic = format!("{prefix}{}", a.group);
                delete_topic_in_cluster(admin, &topic, cluster, &mut text)?;
            }
        }
    }
    Ok(Report {
        text,
        json: json!({
            "group": a.group,
            "brokers": targets.iter().map(|t| t.addr.clone()).collect::<Vec<_>>(),
            "removeOffset": a.remove_offset,
        }),
    })
}
