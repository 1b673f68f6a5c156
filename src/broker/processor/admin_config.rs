//! The broker's configuration at run time: Java `AdminBrokerProcessor.getBrokerConfig`
//! (GET_BROKER_CONFIG 26) and `updateBrokerConfig` (UPDATE_BROKER_CONFIG 25).
//!
//! GET answers every setting that has a Java key, as `key=value` lines with Java's units and
//! value names, and the configuration's data version (JSON) in the `version` header field.
//!
//! UPDATE takes a properties text. ringmq reads its configuration once at start, into one
//! immutable struct; the only setting the broker reads live is [`LIVE_KEYS`]. Any other key is
//! refused by name with NO_PERMISSION (Java's code for a key it will not change) and nothing in
//! the request is applied.

use std::collections::BTreeSet;
use std::sync::atomic::Ordering;

use bytes::Bytes;

use super::{respond, ProcessResult, RequestContext};
use crate::broker::controller::BrokerController;
use crate::broker::error::BrokerError;
use crate::common::now_ms;
use crate::config::{fields, java_key, parse_properties, to_java_value};
use crate::remoting::codes::response_code as rc;
use crate::remoting::command::RemotingCommand;
use crate::remoting::headers::GetBrokerConfigResponseHeader;

/// Keys UPDATE_BROKER_CONFIG changes while the broker runs.
pub const LIVE_KEYS: &[&str] = &[BROKER_PERMISSION_KEY];

const BROKER_PERMISSION_KEY: &str = "brokerPermission";

/// PermName bits a broker permission may hold (write 2, read 4, inherit 8), as the config's
/// validation allows.
const BROKER_PERMISSION_BITS: i32 = 0b1110;

/// The lines of GET_BROKER_CONFIG: one per Java key, first field wins (the name server's
/// `listenPort` is not the broker's), the live permission in place of the start value.
fn config_text(ctrl: &BrokerController) -> String {
    let mut seen = BTreeSet::new();
    let mut out = String::new();
    for spec in fields() {
        let Some(key) = java_key(spec) else { continue };
        if spec.env.starts_with("RINGMQ_NAMESRV_") && spec.env != "RINGMQ_NAMESRV_ADDR" {
            continue;
        }
        if !seen.insert(key) {
            continue;
        }
        let value = if key == BROKER_PERMISSION_KEY {
            ctrl.broker_permission().to_string()
        } else {
            to_java_value(spec, &ctrl.config)
        };
        out.push_str(key);
        out.push('=');
        out.push_str(&value);
        out.push('\n');
    }
    out
}

pub async fn get_broker_config(
    cx: &RequestContext<'_>,
    request: &RemotingCommand,
) -> ProcessResult {
    let ctrl = cx.ctrl;
    let version = *ctrl
        .config_version
        .lock()
        .unwrap_or_else(|p| p.into_inner());
    let version =
        serde_json::to_string(&version).map_err(|source| BrokerError::AdminBodyEncode {
            what: "DataVersion",
            source,
        })?;
    let mut response = RemotingCommand::response_to(request, rc::SUCCESS, None)
        .with_body(Bytes::from(config_text(ctrl)));
    GetBrokerConfigResponseHeader { version }.encode(&mut response);
    respond(response)
}

/// What an accepted update changes.
enum Change {
    BrokerPermission(i32),
}

fn parse_change(key: &str, value: &str) -> Result<Change, BrokerError> {
    if key == BROKER_PERMISSION_KEY {
        let bad = |why: &str| BrokerError::BrokerConfigValue {
            key: key.to_string(),
            value: value.to_string(),
            why: why.to_string(),
        };
        let bits: i32 = value
            .trim()
            .parse()
            .map_err(|_| bad("not a whole number"))?;
        if bits & !BROKER_PERMISSION_BITS != 0 {
            return Err(bad(
                "only the PermName bits 2 (write), 4 (read) and 8 (inherit)",
            ));
        }
        return Ok(Change::BrokerPermission(bits));
    }
    let known = fields().iter().any(|f| java_key(f) == Some(key));
    Err(BrokerError::BrokerConfigNotUpdatable {
        key: key.to_string(),
        why: if known {
            "ringmq reads it at start only; set it in broker.conf or its RINGMQ_ variable and restart"
        } else {
            "it is not a ringmq setting"
        },
    })
}

pub async fn update_broker_config(
    cx: &RequestContext<'_>,
    request: &RemotingCommand,
) -> ProcessResult {
    let ctrl = cx.ctrl;
    if request.body.is_empty() {
        return respond(RemotingCommand::response_to(request, rc::SUCCESS, None));
    }
    let text = std::str::from_utf8(&request.body).map_err(|e| BrokerError::BrokerConfigBody {
        reason: format!("the body is not UTF-8 ({e})"),
    })?;
    let properties = parse_properties(text).map_err(|e| BrokerError::BrokerConfigBody {
        reason: e.to_string(),
    })?;
    // Every key is checked before anything changes.
    let changes = properties
        .iter()
        .map(|p| parse_change(&p.key, &p.value))
        .collect::<Result<Vec<_>, _>>()?;
    tracing::info!(caller = %cx.conn.remote_addr, config = text.trim(), "update broker config");
    let mut permission_changed = false;
    for change in changes {
        match change {
            Change::BrokerPermission(bits) => {
                ctrl.permission.store(bits, Ordering::Relaxed);
                permission_changed = true;
            }
        }
    }
    {
        let mut version = ctrl
            .config_version
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        version.counter += 1;
        version.timestamp = now_ms();
    }
    if permission_changed {
        // Java bumps the topic table's version and registers again at once.
        ctrl.topics.bump_version();
        ctrl.notify_topics_changed();
    }
    respond(RemotingCommand::response_to(request, rc::SUCCESS, None))
}
