//! Subscription group administration: Java `AdminBrokerProcessor.updateAndCreateSubscriptionGroup`
//! (UPDATE_AND_CREATE_SUBSCRIPTIONGROUP 200) and `deleteSubscriptionGroup`
//! (DELETE_SUBSCRIPTIONGROUP 207).

use super::{respond, ProcessResult, RequestContext};
use crate::broker::error::BrokerError;
use crate::broker::subscription_group_manager::SubscriptionGroupConfig;
use crate::common::topic_validator::validate_group;
use crate::remoting::body::json::parse_lenient;
use crate::remoting::codes::response_code as rc;
use crate::remoting::command::RemotingCommand;
use crate::remoting::headers::DeleteSubscriptionGroupRequestHeader;

/// The body is a `SubscriptionGroupConfig`, read as fastjson reads it. Like Java, a request
/// without a body changes nothing and succeeds.
pub async fn update_and_create_subscription_group(
    cx: &RequestContext<'_>,
    request: &RemotingCommand,
) -> ProcessResult {
    if !request.body.is_empty() {
        let config: SubscriptionGroupConfig =
            parse_lenient(&request.body, "SubscriptionGroupConfig")
                .map_err(BrokerError::SubscriptionGroupBody)?;
        validate_group(&config.group_name)?;
        tracing::info!(
            group = config.group_name,
            caller = %cx.conn.remote_addr,
            "update subscription group"
        );
        cx.ctrl.groups.update(config)?;
    }
    respond(RemotingCommand::response_to(request, rc::SUCCESS, None))
}

/// Removes the group (and, with `cleanOffset`, its committed offsets). An unknown group is no
/// error, as in Java.
pub async fn delete_subscription_group(
    cx: &RequestContext<'_>,
    request: &RemotingCommand,
) -> ProcessResult {
    let ctrl = cx.ctrl;
    let header = DeleteSubscriptionGroupRequestHeader::decode(request)?;
    tracing::info!(group = header.group_name, caller = %cx.conn.remote_addr, "delete subscription group");
    ctrl.groups.delete(&header.group_name)?;
    if header.clean_offset {
        ctrl.offsets.remove_offset(&header.group_name);
        ctrl.offsets.persist()?;
    }
    respond(RemotingCommand::response_to(request, rc::SUCCESS, None))
}
