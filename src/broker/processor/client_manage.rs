//! HEART_BEAT (34), UNREGISTER_CLIENT (35), CHECK_CLIENT_CONFIG (46): Java
//! `ClientManageProcessor`, plus NOTIFY_CONSUMER_IDS_CHANGED (40) sent to a group's members.

use crate::broker::client::ClientChannelInfo;
use crate::broker::controller::BrokerController;
use crate::broker::topic_config_manager::retry_topic;
use crate::common::topic_validator::validate_group;
use crate::net::{ConnectionContext, Outbound};
use crate::remoting::body::heartbeat::{CheckClientRequestBody, HeartbeatData};
use crate::remoting::body::json::parse_lenient;
use crate::remoting::body::perm;
use crate::remoting::codes::{request_code, response_code as rc};
use crate::remoting::command::RemotingCommand;
use crate::remoting::headers::{
    NotifyConsumerIdsChangedRequestHeader, UnregisterClientRequestHeader,
};

use super::{respond, ProcessResult, RequestContext};
use crate::broker::error::BrokerError;
use crate::common::now_ms;

fn channel_info(
    conn: &ConnectionContext,
    client_id: &str,
    request: &RemotingCommand,
) -> ClientChannelInfo {
    ClientChannelInfo {
        client_id: client_id.to_string(),
        connection_id: conn.id,
        remote_addr: conn.remote_addr,
        sender: conn.sender().clone(),
        language: request.language.name().to_string(),
        version: request.version,
        last_update_ms: now_ms(),
    }
}

pub async fn heart_beat(cx: &RequestContext<'_>, request: &RemotingCommand) -> ProcessResult {
    let (ctrl, conn) = (cx.ctrl, cx.conn);
    // Read as fastjson reads it: the C++ cores write enums as ordinals and some numbers as
    // strings, and refusing those leaves their groups without members.
    let data: HeartbeatData =
        parse_lenient(&request.body, "HeartbeatData").map_err(BrokerError::HeartbeatBody)?;
    for consumer in &data.consumer_data_set {
        if let Err(e) = validate_group(&consumer.group_name) {
            // A group loaded from an old metadata file can carry a name that is not legal; its
            // consumer is skipped, as Java skips a group it does not know, and the client's
            // other groups still register.
            tracing::warn!(group = consumer.group_name, error = %e, "heartbeat of an illegal group name; consumer skipped");
            continue;
        }
        let Some(group) = ctrl.groups.find_or_auto_create(&consumer.group_name)? else {
            // Java skips unknown groups when auto-creation is off.
            continue;
        };
        // Push consumers in clustering mode consume their retry topic too.
        if group.retry_queue_nums > 0 {
            let (_, created) = ctrl.topics.create_topic_if_absent(
                &retry_topic(&consumer.group_name)?,
                group.retry_queue_nums,
                perm::PERM_READ | perm::PERM_WRITE,
                0,
            )?;
            if created {
                ctrl.notify_topics_changed();
            }
        }
        let outcome = ctrl
            .consumers
            .register_consumer(consumer, channel_info(conn, &data.client_id, request));
        if outcome.channels_changed && group.notify_consumer_ids_changed_enable {
            notify_consumer_ids_changed(ctrl, &consumer.group_name);
        }
    }
    for producer in &data.producer_data_set {
        ctrl.producers.register_producer(
            &producer.group_name,
            channel_info(conn, &data.client_id, request),
        );
    }
    let mut response = RemotingCommand::response_to(request, rc::SUCCESS, None);
    // 5.x extras; older clients ignore them.
    response.set_ext("IS_SUPPORT_HEART_BEAT_V2", "true");
    response.set_ext("IS_SUB_CHANGE", "true");
    respond(response)
}

pub async fn unregister_client(
    cx: &RequestContext<'_>,
    request: &RemotingCommand,
) -> ProcessResult {
    let (ctrl, conn) = (cx.ctrl, cx.conn);
    let header = UnregisterClientRequestHeader::decode(request)?;
    if let Some(group) = header.producer_group.as_deref().filter(|g| !g.is_empty()) {
        ctrl.producers.unregister_producer(group, conn.id);
    }
    if let Some(group) = header.consumer_group.as_deref().filter(|g| !g.is_empty()) {
        if ctrl.consumers.unregister_consumer(group, conn.id) {
            let notify = ctrl
                .groups
                .find(group)
                .is_none_or(|g| g.notify_consumer_ids_changed_enable);
            if notify {
                notify_consumer_ids_changed(ctrl, group);
            }
        }
    }
    respond(RemotingCommand::response_to(request, rc::SUCCESS, None))
}

/// CHECK_CLIENT_CONFIG: a Java consumer with an SQL92 subscription asks whether the broker can
/// serve it before it starts.
pub async fn check_client_config(
    cx: &RequestContext<'_>,
    request: &RemotingCommand,
) -> ProcessResult {
    let ctrl = cx.ctrl;
    let body: CheckClientRequestBody = parse_lenient(&request.body, "CheckClientRequestBody")
        .map_err(BrokerError::ClientConfigBody)?;
    let Some(sub) = body.subscription_data else {
        return respond(RemotingCommand::response_to(request, rc::SUCCESS, None));
    };
    if sub.expression_type().eq_ignore_ascii_case("TAG") {
        return respond(RemotingCommand::response_to(request, rc::SUCCESS, None));
    }
    if !ctrl.config.broker.property_filter_enabled {
        return Err(BrokerError::ExpressionTypeUnsupported {
            expression_type: sub.expression_type().to_string(),
        });
    }
    if let Err(source) =
        crate::filter::ExpressionMessageFilter::new(sub.expression_type(), &sub.sub_string)
    {
        return Err(BrokerError::ClientSubscriptionParse {
            subscription: sub.sub_string,
            group: body.group,
            source,
        });
    }
    respond(RemotingCommand::response_to(request, rc::SUCCESS, None))
}

/// Sends NOTIFY_CONSUMER_IDS_CHANGED (oneway) to every member of `group`, on each member's own
/// connection, so they rebalance at once.
pub fn notify_consumer_ids_changed(ctrl: &BrokerController, group: &str) {
    let Some(info) = ctrl.consumers.group(group) else {
        return;
    };
    for channel in info.channels.values() {
        let mut cmd = RemotingCommand::request(request_code::NOTIFY_CONSUMER_IDS_CHANGED).oneway();
        NotifyConsumerIdsChangedRequestHeader {
            consumer_group: group.to_string(),
        }
        .encode(&mut cmd);
        if let Err(e) = channel.sender.send(Outbound::Command(cmd)) {
            tracing::debug!(group, client = channel.client_id, error = %e, "could not notify consumer");
        }
    }
}
