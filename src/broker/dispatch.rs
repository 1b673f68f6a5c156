//! Request code → processor, in one `match` of uniform calls: every processor is an
//! `async fn(&RequestContext, &RemotingCommand) -> ProcessResult` (Java registers processors
//! per code in `BrokerController.registerProcessor`).

use std::sync::Arc;

use crate::broker::controller::BrokerController;
use crate::broker::error::BrokerError;
use crate::broker::processor::{
    admin, admin_config, admin_connection, admin_group, admin_stats, admin_topic, client_manage,
    consumer_manage, end_transaction, lock, pull, query, runtime_info, send, Handled,
    ProcessResult, RequestContext,
};
use crate::metrics::BrokerMetrics;
use crate::net::{ConnectionContext, RequestHandler};
use crate::remoting::codes::request_code as code;
use crate::remoting::codes::response_code::SUCCESS;
use crate::remoting::command::RemotingCommand;

/// Listener index of the fast/VIP port (`listen_port - 2`) in the server config.
pub const FAST_LISTENER_INDEX: usize = 1;

/// The broker's [`RequestHandler`].
pub struct BrokerRequestHandler {
    pub ctrl: Arc<BrokerController>,
}

/// Runs `request` through the ACL check (when on) and the processor of its code. The one entry
/// to the processors: the connection's [`RequestHandler`] and the broker's unit tests call it.
pub(crate) async fn dispatch(
    ctrl: &BrokerController,
    conn: &ConnectionContext,
    request: &RemotingCommand,
) -> ProcessResult {
    let cx = RequestContext { ctrl, conn };
    check_acl(ctrl, conn, request)?;
    let fast_port = conn.listener_index == FAST_LISTENER_INDEX;
    match request.code {
        code::SEND_MESSAGE | code::SEND_MESSAGE_V2 | code::SEND_BATCH_MESSAGE => {
            send::send_message(&cx, request).await
        }
        code::CONSUMER_SEND_MSG_BACK => send::consumer_send_msg_back(&cx, request).await,
        code::END_TRANSACTION => end_transaction::end_transaction(&cx, request).await,
        // Java's fast port serves everything but pulls.
        code::PULL_MESSAGE | code::LITE_PULL_MESSAGE if !fast_port => {
            pull::pull_message(&cx, request)
        }
        code::HEART_BEAT => client_manage::heart_beat(&cx, request).await,
        code::UNREGISTER_CLIENT => client_manage::unregister_client(&cx, request).await,
        code::CHECK_CLIENT_CONFIG => client_manage::check_client_config(&cx, request).await,
        code::GET_CONSUMER_LIST_BY_GROUP => {
            consumer_manage::get_consumer_list_by_group(&cx, request).await
        }
        code::QUERY_CONSUMER_OFFSET => consumer_manage::query_consumer_offset(&cx, request).await,
        code::UPDATE_CONSUMER_OFFSET => consumer_manage::update_consumer_offset(&cx, request).await,
        code::UPDATE_AND_CREATE_TOPIC => admin::update_and_create_topic(&cx, request).await,
        code::GET_ALL_TOPIC_CONFIG => admin::get_all_topic_config(&cx, request).await,
        code::GET_BROKER_RUNTIME_INFO => runtime_info::get_broker_runtime_info(&cx, request).await,
        code::GET_ALL_CONSUMER_OFFSET => admin::get_all_consumer_offset(&cx, request).await,
        code::GET_ALL_DELAY_OFFSET => admin::get_all_delay_offset(&cx, request).await,
        code::GET_ALL_SUBSCRIPTIONGROUP_CONFIG => {
            admin::get_all_subscription_group_config(&cx, request).await
        }
        code::SEARCH_OFFSET_BY_TIMESTAMP => admin::search_offset_by_timestamp(&cx, request).await,
        code::GET_MAX_OFFSET => admin::get_max_offset(&cx, request).await,
        code::GET_MIN_OFFSET => admin::get_min_offset(&cx, request).await,
        code::GET_EARLIEST_MSG_STORETIME => admin::get_earliest_msg_storetime(&cx, request).await,
        code::UPDATE_AND_CREATE_SUBSCRIPTIONGROUP => {
            admin_group::update_and_create_subscription_group(&cx, request).await
        }
        code::DELETE_SUBSCRIPTIONGROUP => {
            admin_group::delete_subscription_group(&cx, request).await
        }
        code::GET_TOPIC_STATS_INFO => admin_stats::get_topic_stats_info(&cx, request).await,
        code::GET_CONSUME_STATS => admin_stats::get_consume_stats(&cx, request).await,
        code::GET_CONSUMER_CONNECTION_LIST => {
            admin_connection::get_consumer_connection_list(&cx, request).await
        }
        code::GET_PRODUCER_CONNECTION_LIST => {
            admin_connection::get_producer_connection_list(&cx, request).await
        }
        code::DELETE_TOPIC_IN_BROKER => admin_topic::delete_topic(&cx, request).await,
        code::GET_TOPIC_CONFIG => admin_topic::get_topic_config(&cx, request).await,
        code::UPDATE_BROKER_CONFIG => admin_config::update_broker_config(&cx, request).await,
        code::GET_BROKER_CONFIG => admin_config::get_broker_config(&cx, request).await,
        code::INVOKE_BROKER_TO_RESET_OFFSET => {
            admin::invoke_broker_to_reset_offset(&cx, request).await
        }
        code::GET_CONSUMER_RUNNING_INFO => admin::get_consumer_running_info(&cx, request).await,
        code::LOCK_BATCH_MQ => lock::lock_batch_mq(&cx, request).await,
        code::UNLOCK_BATCH_MQ => lock::unlock_batch_mq(&cx, request).await,
        code::QUERY_MESSAGE => query::query_message(&cx, request).await,
        code::VIEW_MESSAGE_BY_ID => query::view_message_by_id(&cx, request).await,
        code => Err(BrokerError::RequestCodeNotSupported { code }),
    }
}

/// Latency of sends and pulls, and refusals by response code.
fn record(
    metrics: &BrokerMetrics,
    request_code: i32,
    elapsed: std::time::Duration,
    result: &ProcessResult,
) {
    let send = matches!(
        request_code,
        code::SEND_MESSAGE | code::SEND_MESSAGE_V2 | code::SEND_BATCH_MESSAGE
    );
    if send {
        metrics.observe_send(elapsed);
    } else if matches!(request_code, code::PULL_MESSAGE | code::LITE_PULL_MESSAGE) {
        metrics.observe_pull(elapsed);
    }
    match result {
        Err(e) => metrics.record_error(e.response_code()),
        // A stored message whose flush or replication wait failed (FLUSH_DISK_TIMEOUT, …) is
        // answered, not refused, and is a failure to its producer all the same. (A pull's
        // PULL_NOT_FOUND and friends are normal answers, not errors.)
        Ok(Handled::Response(r)) if send && r.code != SUCCESS => metrics.record_error(r.code),
        Ok(_) => {}
    }
}

/// Java's ACL runs as an RPC hook before any processor.
fn check_acl(
    ctrl: &BrokerController,
    conn: &ConnectionContext,
    request: &RemotingCommand,
) -> Result<(), BrokerError> {
    match &ctrl.acl {
        Some(acl) => Ok(acl.validate(request, conn.remote_addr.ip())?),
        None => Ok(()),
    }
}

/// Whether `request` is one [`serve_now`] serves: a pull (it parks or answers at once, never
/// waits), on a port that serves pulls. Everything else may wait (a send for its flush or its
/// slave, a relayed call for the client) and runs in a task of its own.
fn serves_now(conn: &ConnectionContext, request: &RemotingCommand) -> bool {
    matches!(request.code, code::PULL_MESSAGE | code::LITE_PULL_MESSAGE)
        && conn.listener_index != FAST_LISTENER_INDEX
}

/// [`serve`] for the requests that never wait, on the caller's thread and without a future;
/// `None` for the others. Same ACL check, processor, metrics and error answers as [`serve`].
pub(crate) fn serve_now(
    ctrl: &BrokerController,
    conn: &ConnectionContext,
    request: &RemotingCommand,
) -> Option<Option<RemotingCommand>> {
    if !serves_now(conn, request) {
        return None;
    }
    let started = std::time::Instant::now();
    let result = check_acl(ctrl, conn, request)
        .and_then(|()| pull::pull_message(&RequestContext { ctrl, conn }, request));
    Some(finish(ctrl, conn, request, started, result))
}

/// Serves `request` as it came on `conn`: [`dispatch`], then the metrics, then the answer to
/// send back (an error's answer says it; nothing for a oneway request, a parked pull or a
/// response already queued on the connection).
pub(crate) async fn serve(
    ctrl: &BrokerController,
    conn: &ConnectionContext,
    request: &RemotingCommand,
) -> Option<RemotingCommand> {
    let started = std::time::Instant::now();
    let result = dispatch(ctrl, conn, request).await;
    finish(ctrl, conn, request, started, result)
}

/// What [`serve`] and [`serve_now`] do after the processor: the metrics, then the answer.
fn finish(
    ctrl: &BrokerController,
    conn: &ConnectionContext,
    request: &RemotingCommand,
    started: std::time::Instant,
    result: ProcessResult,
) -> Option<RemotingCommand> {
    if let Some(metrics) = ctrl.metrics() {
        record(metrics, request.code, started.elapsed(), &result);
    }
    let response = match result {
        Ok(Handled::Response(response)) => response,
        Ok(Handled::Queued | Handled::Parked | Handled::NoAnswer) => return None,
        Err(e) => {
            if request.is_oneway() {
                // No response will say it: the log must.
                tracing::warn!(
                    code = request.code,
                    remote = %conn.remote_addr,
                    response = e.response_code(),
                    error = %e,
                    "oneway request refused"
                );
            } else {
                tracing::debug!(
                    code = request.code,
                    remote = %conn.remote_addr,
                    response = e.response_code(),
                    error = %e,
                    "request refused"
                );
            }
            e.into_response(request)
        }
    };
    (!request.is_oneway()).then_some(response)
}

impl RequestHandler for BrokerRequestHandler {
    async fn handle(
        &self,
        conn: ConnectionContext,
        request: RemotingCommand,
    ) -> Option<RemotingCommand> {
        if request.is_response() {
            // The runtime hands responses to the broker's pending calls and never here.
            return None;
        }
        serve(&self.ctrl, &conn, &request).await
    }

    fn handle_now(
        &self,
        conn: &ConnectionContext,
        request: RemotingCommand,
    ) -> Result<Option<RemotingCommand>, RemotingCommand> {
        serve_now(&self.ctrl, conn, &request).ok_or(request)
    }

    fn on_connection_closed(&self, conn: &ConnectionContext) {
        // Read before the consumer table forgets the connection.
        let heartbeat_clients = self.ctrl.consumers.clients_of_connection(conn.id);
        let groups = self.ctrl.consumers.remove_connection(conn.id);
        self.ctrl.producers.remove_connection(conn.id);
        lock::release_connection_locks(&self.ctrl, conn.id, heartbeat_clients);
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
