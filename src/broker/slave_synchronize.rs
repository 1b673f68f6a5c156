//! A slave's copy of its master's metadata (Java `SlaveSynchronize`): every sync interval the
//! slave asks its master for the topics (GET_ALL_TOPIC_CONFIG 21), the consumer offsets
//! (GET_ALL_CONSUMER_OFFSET 43), the delayed-delivery progress (GET_ALL_DELAY_OFFSET 45) and the
//! subscription groups (GET_ALL_SUBSCRIPTIONGROUP_CONFIG 201), installs them and persists them,
//! so that a consumer sent to the slave, or a slave started as the next master, finds what the
//! master had.
//!
//! The master's address comes from the name server's answer to REGISTER_BROKER (`masterAddr`),
//! as in Java; it also tells the pull processor whether the master is online.
//!
//! **Offsets and a master outage.** While the master is away, consumers commit their progress
//! to the slave (UPDATE_CONSUMER_OFFSET). When the master returns, its table still holds the
//! offsets from before the outage, and Java's `syncConsumerOffset` copies them over the
//! slave's (`putAll`), moving every queue back to where it was and making the consumers consume
//! again whatever they consumed from the slave (Java issue #1094). ringmq keeps, per queue, the
//! last offset a consumer committed to this slave; a synced offset below it does not replace
//! it. Once the master's offset has reached the slave's commit (the consumer went back and
//! committed there), the slave forgets its own commit and follows the master again, resets
//! included (`merge_offset` in `slave_sync_state.rs`).

use std::collections::BTreeMap;
use std::time::Duration;

use bytes::Bytes;

use crate::broker::config_manager::{self as persist, PersistError};
use crate::broker::controller::BrokerController;
use crate::broker::slave_sync_state::{merge_offset, SlaveSyncState};
use crate::broker::subscription_group_manager::SubscriptionGroupConfig;
use crate::common::StopFlag;
use crate::net::remoting_client::{BlockingClient, ClientError};
use crate::remoting::body::json::{parse_lenient, JsonBodyError};
use crate::remoting::body::TopicConfigSerializeWrapper;
use crate::remoting::codes::{request_code, response_code as rc};
use crate::remoting::command::RemotingCommand;

/// How long one sync request may take (connect, send, answer), as Java's `syncAll` calls
/// (`BrokerOuterAPI`'s 3 s).
pub const SYNC_REQUEST_TIMEOUT_MS: u64 = 3_000;

/// Why one part of a sync failed; the others still run.
#[derive(Debug, thiserror::Error)]
pub enum SyncError {
    #[error("asking the master {master} for {what}: {source}")]
    Request {
        master: String,
        what: &'static str,
        #[source]
        source: ClientError,
    },
    #[error("the master {master} refused {what}: code {code}, {remark}")]
    Refused {
        master: String,
        what: &'static str,
        code: i32,
        remark: String,
    },
    #[error("the master's {0}")]
    Body(#[source] JsonBodyError),
    #[error("the master's consumer offsets: {0}")]
    ConsumerOffsets(#[source] persist::ContentError),
    #[error("the master's delay offsets: {0}")]
    DelayOffsets(#[source] persist::ContentError),
    #[error("installing the master's {what}: {source}")]
    Persist {
        what: &'static str,
        #[source]
        source: PersistError,
    },
}
/// Java `syncAll`: the four tables, each on its own (one failing does not stop the
/// others). Returns the failures.
pub fn sync_all(ctrl: &BrokerController) -> Vec<SyncError> {
    let Some(master) = ctrl.slave_sync.master_addr() else {
        return Vec::new();
    };
    if master == ctrl.broker_addr {
        return Vec::new();
    }
    [
        sync_topic_config(ctrl, &master),
        sync_consumer_offset(ctrl, &master),
        sync_delay_offset(ctrl, &master),
        sync_subscription_group_config(ctrl, &master),
    ]
    .into_iter()
    .filter_map(Result::err)
    .collect()
}

/// One request to the master on the kept connection (reconnecting once if it broke).
fn fetch(
    state: &SlaveSyncState,
    master: &str,
    code: i32,
    what: &'static str,
) -> Result<Bytes, SyncError> {
    let request_error = |source| SyncError::Request {
        master: master.to_string(),
        what,
        source,
    };
    let timeout = Duration::from_millis(SYNC_REQUEST_TIMEOUT_MS);
    let mut connection = state.connection.lock().unwrap_or_else(|p| p.into_inner());
    let request = RemotingCommand::request(code);
    let mut answer = None;
    if let Some(client) = connection.as_mut() {
        match client.invoke(request.clone()) {
            Ok(r) => answer = Some(r),
            Err(_) => *connection = None,
        }
    }
    let response = match answer {
        Some(r) => r,
        None => {
            let mut client = BlockingClient::connect(master, timeout).map_err(request_error)?;
            let r = client.invoke(request).map_err(request_error)?;
            *connection = Some(client);
            r
        }
    };
    if response.code != rc::SUCCESS {
        return Err(SyncError::Refused {
            master: master.to_string(),
            what,
            code: response.code,
            remark: response.remark.unwrap_or_default(),
        });
    }
    Ok(response.body)
}

/// Java `syncTopicConfig`: the master's table replaces the slave's when its data version
/// differs.
fn sync_topic_config(ctrl: &BrokerController, master: &str) -> Result<(), SyncError> {
    let body = fetch(
        &ctrl.slave_sync,
        master,
        request_code::GET_ALL_TOPIC_CONFIG,
        "topics",
    )?;
    let wrapper: TopicConfigSerializeWrapper =
        parse_lenient(&body, "TopicConfigSerializeWrapper").map_err(SyncError::Body)?;
    ctrl.topics
        .replace_from_master(wrapper)
        .map_err(|source| SyncError::Persist {
            what: "topics",
            source,
        })?;
    Ok(())
}

/// Java `syncConsumerOffset`, with the rule of [`merge_offset`] per queue.
fn sync_consumer_offset(ctrl: &BrokerController, master: &str) -> Result<(), SyncError> {
    let body = fetch(
        &ctrl.slave_sync,
        master,
        request_code::GET_ALL_CONSUMER_OFFSET,
        "consumer offsets",
    )?;
    let text = String::from_utf8_lossy(&body);
    let table = crate::broker::consumer_offset_manager::parse_offset_file(&text)
        .map_err(SyncError::ConsumerOffsets)?;
    let mut commits = ctrl
        .slave_sync
        .slave_commits
        .lock()
        .unwrap_or_else(|p| p.into_inner());
    for (topic, group, queue_id, master_offset) in table {
        let key = (group, topic, queue_id);
        let (offset, keep) = merge_offset(master_offset, commits.get(&key).copied());
        if !keep {
            commits.remove(&key);
        }
        let (group, topic, queue_id) = key;
        ctrl.offsets.commit_offset(&group, &topic, queue_id, offset);
    }
    drop(commits);
    ctrl.offsets
        .persist()
        .map_err(|source| SyncError::Persist {
            what: "consumer offsets",
            source,
        })?;
    Ok(())
}

/// Java `syncDelayOffset`: the master's delayOffset.json, written as the slave's.
fn sync_delay_offset(ctrl: &BrokerController, master: &str) -> Result<(), SyncError> {
    let body = fetch(
        &ctrl.slave_sync,
        master,
        request_code::GET_ALL_DELAY_OFFSET,
        "delay offsets",
    )?;
    let text = String::from_utf8_lossy(&body);
    let offsets = crate::broker::schedule_message_service::parse_delay_offsets(&text)
        .map_err(SyncError::DelayOffsets)?;
    crate::broker::schedule_message_service::install_offsets(ctrl, offsets).map_err(|source| {
        SyncError::Persist {
            what: "delay offsets",
            source,
        }
    })
}

/// Java `syncSubscriptionGroupConfig`: the master's groups replace the slave's.
fn sync_subscription_group_config(ctrl: &BrokerController, master: &str) -> Result<(), SyncError> {
    let body = fetch(
        &ctrl.slave_sync,
        master,
        request_code::GET_ALL_SUBSCRIPTIONGROUP_CONFIG,
        "subscription groups",
    )?;
    let wrapper: SubscriptionGroupWrapper =
        parse_lenient(&body, "SubscriptionGroupWrapper").map_err(SyncError::Body)?;
    ctrl.groups
        .replace_from_master(wrapper.subscription_group_table)
        .map_err(|source| SyncError::Persist {
            what: "subscription groups",
            source,
        })
}

/// Java `SubscriptionGroupWrapper`, as far as the slave reads it.
#[derive(Debug, Default, serde::Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct SubscriptionGroupWrapper {
    #[serde(deserialize_with = "crate::remoting::body::json::null_as_default")]
    pub subscription_group_table: BTreeMap<String, SubscriptionGroupConfig>,
}

/// The `ringmq-slave-sync` thread: [`sync_all`] every `interval`, from the
/// first registration on, until `stop`.
pub fn run(ctrl: &BrokerController, stop: &StopFlag, interval: Duration) {
    loop {
        for e in sync_all(ctrl) {
            tracing::warn!(error = %e, "slave sync");
        }
        if stop.wait_timeout(interval) {
            return;
        }
    }
}
