//! Request code → processor, in one `match` (Java registers processors per code in
//! `BrokerController.registerProcessor`).

use std::sync::Arc;

use crate::broker::controller::BrokerController;
use crate::broker::error::BrokerError;
use crate::broker::processor::{
    admin, client_manage, consumer_manage, pull, query, send, ProcessResult,
};
use crate::net::{ConnectionContext, RequestHandler};
use crate::remoting::codes::request_code as code;
use crate::remoting::command::RemotingCommand;

/// Listener index of the fast/VIP port (`listen_port - 2`) in the server config.
pub const FAST_LISTENER_INDEX: usize = 1;

/// The broker's [`RequestHandler`].
pub struct BrokerRequestHandler {
    pub ctrl: Arc<BrokerController>,
}

impl BrokerRequestHandler {
    async fn dispatch(
        &self,
        conn: &ConnectionContext,
        request: &RemotingCommand,
    ) -> Option<ProcessResult> {
        let ctrl = &self.ctrl;
        let fast_port = conn.listener_index == FAST_LISTENER_INDEX;
        let result = match request.code {
            code::SEND_MESSAGE | code::SEND_MESSAGE_V2 | code::SEND_BATCH_MESSAGE => {
                send::process_send(ctrl, request, conn.remote_addr).await
            }
            code::CONSUMER_SEND_MSG_BACK => {
                send::process_send_msg_back(ctrl, request, conn.remote_addr).await
            }
            // Java's fast port serves everything but pulls.
            code::PULL_MESSAGE | code::LITE_PULL_MESSAGE if !fast_port => {
                return match pull::process_request(ctrl, request, conn.remote_addr, conn.sender()) {
                    pull::PullOutcome::Respond(r) => Some(Ok(r)),
                    pull::PullOutcome::Parked => None,
                };
            }
            code::HEART_BEAT => client_manage::heart_beat(ctrl, conn, request),
            code::UNREGISTER_CLIENT => client_manage::unregister_client(ctrl, conn, request),
            code::CHECK_CLIENT_CONFIG => client_manage::check_client_config(ctrl, request),
            code::GET_CONSUMER_LIST_BY_GROUP => {
                consumer_manage::get_consumer_list_by_group(ctrl, request)
            }
            code::QUERY_CONSUMER_OFFSET => consumer_manage::query_consumer_offset(ctrl, request),
            code::UPDATE_CONSUMER_OFFSET => consumer_manage::update_consumer_offset(ctrl, request),
            code::UPDATE_AND_CREATE_TOPIC => admin::update_and_create_topic(ctrl, request),
            code::GET_ALL_TOPIC_CONFIG => admin::get_all_topic_config(ctrl, request),
            code::GET_BROKER_RUNTIME_INFO => admin::get_broker_runtime_info(ctrl, request),
            code::GET_ALL_CONSUMER_OFFSET => admin::get_all_consumer_offset(ctrl, request),
            code::GET_ALL_SUBSCRIPTIONGROUP_CONFIG => {
                admin::get_all_subscription_group_config(ctrl, request)
            }
            code::SEARCH_OFFSET_BY_TIMESTAMP => admin::search_offset_by_timestamp(ctrl, request),
            code::GET_MAX_OFFSET => admin::get_max_offset(ctrl, request),
            code::GET_MIN_OFFSET => admin::get_min_offset(ctrl, request),
            code::GET_EARLIEST_MSG_STORETIME => admin::get_earliest_msg_storetime(ctrl, request),
            code::VIEW_MESSAGE_BY_ID => query::view_message_by_id(ctrl, request),
            code => Err(BrokerError::RequestCodeNotSupported { code }),
        };
        Some(result)
    }
}

impl RequestHandler for BrokerRequestHandler {
    async fn handle(
        &self,
        conn: ConnectionContext,
        request: RemotingCommand,
    ) -> Option<RemotingCommand> {
        if request.is_response() {
            // Answers to broker-initiated requests (none expect one today).
            return None;
        }
        let result = self.dispatch(&conn, &request).await?;
        let response = match result {
            Ok(r) => r,
            Err(e) => {
                tracing::debug!(
                    code = request.code,
                    response = e.response_code(),
                    error = %e,
                    "request refused"
                );
                e.into_response(&request)
            }
        };
        (!request.is_oneway()).then_some(response)
    }

    fn on_connection_closed(&self, conn: &ConnectionContext) {
        let groups = self.ctrl.consumers.remove_connection(conn.id);
        self.ctrl.producers.remove_connection(conn.id);
        for group in groups {
            let notify = self
                .ctrl
                .groups
                .find(&group)
                .is_none_or(|g| g.notify_consumer_ids_changed_enable);
            if notify {
                client_manage::notify_consumer_ids_changed(&self.ctrl, &group);
            }
        }
    }
}
