//! LOCK_BATCH_MQ (41) and UNLOCK_BATCH_MQ (42): the queue locks of orderly consumers (Java
//! `AdminBrokerProcessor.lockBatchMQ` / `unlockBatchMQ` over `RebalanceLockManager`).
//!
//! A `MessageListenerOrderly` consumer locks the queues its rebalance gave it and consumes only
//! those the broker granted; it renews them every 20 s and unlocks queues it gives up. Java's
//! strict lock mode (also locking on the replicas of a broker group) does not apply: ringmq has
//! no replicas, so every lock is local, whatever `onlyThisBroker` says.

use bytes::Bytes;

use crate::broker::controller::BrokerController;
use crate::broker::error::BrokerError;
use crate::common::now_ms;
use crate::remoting::body::lock_batch::{
    LockBatchRequestBody, LockBatchResponseBody, MessageQueue, UnlockBatchRequestBody,
};
use crate::remoting::codes::response_code as rc;
use crate::remoting::command::RemotingCommand;

use super::{respond, ProcessResult, RequestContext};

pub async fn lock_batch_mq(cx: &RequestContext<'_>, request: &RemotingCommand) -> ProcessResult {
    let ctrl = cx.ctrl;
    let body = LockBatchRequestBody::parse(&request.body).map_err(BrokerError::LockBatchBody)?;
    let lockable = lockable_queues(ctrl, &body);
    let lock_ok_mq_set = if lockable.is_empty() {
        Vec::new()
    } else {
        ctrl.rebalance_locks.try_lock_batch(
            &body.consumer_group,
            &lockable,
            &body.client_id,
            now_ms(),
        )
    };
    if !lock_ok_mq_set.is_empty() {
        ctrl.rebalance_locks
            .note_connection(cx.conn.id, &body.consumer_group, &body.client_id);
    }
    let encoded = serde_json::to_vec(&LockBatchResponseBody { lock_ok_mq_set })
        .map_err(BrokerError::LockBatchEncode)?;
    respond(
        RemotingCommand::response_to(request, rc::SUCCESS, None).with_body(Bytes::from(encoded)),
    )
}

pub async fn unlock_batch_mq(cx: &RequestContext<'_>, request: &RemotingCommand) -> ProcessResult {
    let body: UnlockBatchRequestBody =
        LockBatchRequestBody::parse(&request.body).map_err(BrokerError::LockBatchBody)?;
    cx.ctrl
        .rebalance_locks
        .unlock_batch(&body.consumer_group, &body.mq_set, &body.client_id);
    // Java answers SUCCESS; the client sends it oneway at shutdown, and dispatch then sends
    // nothing back.
    respond(RemotingCommand::response_to(request, rc::SUCCESS, None))
}

/// The queues of the request that may be locked at all: those of an existing group and an
/// existing topic, with a queue id below the topic's queue count, from a client that names
/// itself. This is what keeps the lock table bounded by queues × groups; a queue outside it is
/// simply not granted, as Java would not grant a queue locked by nobody it knows.
fn lockable_queues(ctrl: &BrokerController, body: &LockBatchRequestBody) -> Vec<MessageQueue> {
    if body.client_id.is_empty() || ctrl.groups.find(&body.consumer_group).is_none() {
        return Vec::new();
    }
    body.mq_set
        .iter()
        .filter(|mq| {
            ctrl.topics.select(&mq.topic).is_some_and(|tc| {
                let queues = tc.read_queue_nums.max(tc.write_queue_nums);
                (0..queues).contains(&mq.queue_id)
            })
        })
        .cloned()
        .collect()
}

/// Drops the locks of the clients a closed connection carried, unless the client is still a
/// member of the group through another connection (a client may lock on its VIP channel and
/// heartbeat on the main one). `heartbeat_clients` are the (group, client id) pairs that
/// heartbeated on the connection, read before the consumer table forgot it; the consumer table
/// must have dropped the connection already.
pub fn release_connection_locks(
    ctrl: &BrokerController,
    connection_id: u64,
    heartbeat_clients: Vec<(String, String)>,
) {
    let mut clients = ctrl.rebalance_locks.take_connection(connection_id);
    clients.extend(heartbeat_clients);
    clients.sort_unstable();
    clients.dedup();
    for (group, client_id) in clients {
        let still_member = ctrl.consumers.with_group(&group, |info| {
            info.is_some_and(|g| g.channels.values().any(|c| c.client_id == client_id))
        });
        if still_member {
            continue;
        }
        let released = ctrl.rebalance_locks.unlock_client(&group, &client_id);
        if released > 0 {
            tracing::debug!(
                group,
                client_id,
                released,
                "connection closed: queue locks released"
            );
        }
    }
}
