//! Cluster and broker verbs (mqadmin's `ClusterListSubCommand`, `BrokerStatusSubCommand`,
//! `GetBrokerConfigCommand`, `UpdateBrokerConfigSubCommand`).
//!
//! The runtime figures come from GET_BROKER_RUNTIME_INFO (28) as the broker sends them:
//! `brokerStatus` prints every key it returns, and `clusterList` computes its columns from
//! Java's keys, showing an empty cell for a key the broker does not send.

use std::collections::BTreeMap;

use bytes::Bytes;
use clap::Args;
use serde_json::json;

use super::client::{AdminClient, BrokerTarget};
use super::error::AdminError;
use super::output::{Report, Table};
use crate::common::now_ms;
use crate::remoting::body::admin::KvTable;
use crate::remoting::codes::request_code as req;
use crate::remoting::command::RemotingCommand;

fn runtime_info(admin: &AdminClient, addr: &str) -> Result<BTreeMap<String, String>, AdminError> {
    let r = admin.invoke_ok(addr, RemotingCommand::request(req::GET_BROKER_RUNTIME_INFO))?;
    Ok(AdminClient::body::<KvTable>(&r, addr, "KVTable")?.table)
}

#[derive(Args, Debug)]
pub struct ClusterListArgs {
    /// Only this cluster.
    #[arg(short = 'c', long = "clusterName")]
    pub cluster: Option<String>,
}

/// The first number of a "tps tps tps" value (Java splits on spaces).
fn first_number(value: Option<&String>) -> f64 {
    value
        .and_then(|v| v.split(' ').next())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0.0)
}

fn cluster_row(
    cluster: &str,
    name: &str,
    id: i64,
    addr: &str,
    kv: &BTreeMap<String, String>,
) -> Vec<String> {
    let get = |k: &str| kv.get(k).cloned().unwrap_or_default();
    let num = |k: &str| kv.get(k).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    let hour = kv
        .get("earliestMessageTimeStamp")
        .and_then(|v| v.parse::<i64>().ok())
        .map_or(0.0, |t| (now_ms() - t) as f64 / 3_600_000.0);
    vec![
        cluster.to_string(),
        name.to_string(),
        id.to_string(),
        addr.to_string(),
        get("brokerVersionDesc"),
        format!(
            "{:9.2}({},{}ms)",
            first_number(kv.get("putTps")),
            get("sendThreadPoolQueueSize"),
            get("sendThreadPoolQueueHeadWaitTimeMills")
        ),
        format!(
            "{:9.2}({},{}ms|{},{}ms)",
            first_number(kv.get("getTransferredTps")),
            get("pullThreadPoolQueueSize"),
            get("pullThreadPoolQueueHeadWaitTimeMills"),
            kv.get("ackThreadPoolQueueSize").map_or("N", String::as_str),
            kv.get("ackThreadPoolQueueHeadWaitTimeMills")
                .map_or("N", String::as_str)
        ),
        format!(
            "{}-{}({:.1}w, {:.1}, {:.1})",
            num("timerReadBehind"),
            num("timerOffsetBehind"),
            num("timerCongestNum") / 10000.0,
            num("timerEnqueueTps"),
            num("timerDequeueTps")
        ),
        get("pageCacheLockTimeMills"),
        format!("{hour:2.2}"),
        format!("{:.4}", num("commitLogDiskRatio")),
        get("brokerActive"),
    ]
}

pub fn cluster_list(admin: &AdminClient, a: &ClusterListArgs) -> Result<Report, AdminError> {
    let mut t = Table::new(&[
        "#Cluster Name",
        "#Broker Name",
        "#BID",
        "#Addr",
        "#Version",
        "#InTPS(LOAD)",
        "#OutTPS(LOAD)",
        "#Timer(Progress)",
        "#PCWait(ms)",
        "#Hour",
        "#SPACE",
        "#ACTIVATED",
    ]);
    let mut brokers = Vec::new();
    for ((cluster, name, id), addr) in admin.all_brokers()? {
        if a.cluster.as_deref().is_some_and(|c| c != cluster) {
            continue;
        }
        // An unreachable broker still gets its row, as in mqadmin.
        let kv = match runtime_info(admin, &addr) {
            Ok(kv) => kv,
            Err(e) => {
                eprintln!("ringmq admin: {e}");
                BTreeMap::new()
            }
        };
        t.row(cluster_row(&cluster, &name, id, &addr, &kv));
        brokers.push(json!({
            "clusterName": cluster, "brokerName": name, "brokerId": id, "addr": addr,
            "runtimeInfo": kv,
        }));
    }
    Ok(Report {
        text: t.render(),
        json: json!({ "brokers": brokers }),
    })
}

#[derive(Args, Debug)]
pub struct BrokerOrClusterArgs {
    #[arg(short = 'b', long = "brokerAddr")]
    pub broker_addr: Option<String>,
    #[arg(short = 'c', long = "clusterName")]
    pub cluster: Option<String>,
}

impl BrokerOrClusterArgs {
    /// The broker named by `-b`, else the masters of the cluster named by `-c`.
    pub fn targets(&self, admin: &AdminClient) -> Result<Vec<BrokerTarget>, AdminError> {
        admin.brokers(self.broker_addr.as_deref(), self.cluster.as_deref())
    }
}

pub fn broker_status(admin: &AdminClient, a: &BrokerOrClusterArgs) -> Result<Report, AdminError> {
    let targets = a.targets(admin)?;
    let several = targets.len() > 1;
    let mut text = String::new();
    let mut all = serde_json::Map::new();
    for target in targets {
        let kv = runtime_info(admin, &target.addr)?;
        for (k, v) in &kv {
            if several {
                text.push_str(&format!("{:<24} {k:<32}: {v}\n", target.addr));
            } else {
                text.push_str(&format!("{k:<32}: {v}\n"));
            }
        }
        all.insert(target.addr, json!(kv));
    }
    Ok(Report {
        text,
        json: serde_json::Value::Object(all),
    })
}

pub fn get_broker_config(
    admin: &AdminClient,
    a: &BrokerOrClusterArgs,
) -> Result<Report, AdminError> {
    let mut text = String::new();
    let mut all = serde_json::Map::new();
    for target in a.targets(admin)? {
        let r = admin.invoke_ok(
            &target.addr,
            RemotingCommand::request(req::GET_BROKER_CONFIG),
        )?;
        let body = String::from_utf8_lossy(&r.body).into_owned();
        let props = crate::config::parse_properties(&body).map_err(|e| AdminError::Record {
            what: "broker config",
            addr: target.addr.clone(),
            reason: e.to_string(),
        })?;
        let prefix = if a.broker_addr.is_some() {
            ""
        } else {
            "Master: "
        };
        text.push_str(&format!(
            "============{prefix}{}============\n",
            target.addr
        ));
        let mut map = serde_json::Map::new();
        for p in props {
            text.push_str(&format!("{:<50}=  {}\n", p.key, p.value));
            map.insert(p.key, json!(p.value));
        }
        text.push('\n');
        all.insert(target.addr, serde_json::Value::Object(map));
    }
    Ok(Report {
        text,
        json: serde_json::Value::Object(all),
    })
}

#[derive(Args, Debug)]
pub struct UpdateBrokerConfigArgs {
    #[command(flatten)]
    pub on: BrokerOrClusterArgs,
    #[arg(short = 'k', long = "key")]
    pub key: String,
    #[arg(short = 'v', long = "value")]
    pub value: String,
}

pub fn update_broker_config(
    admin: &AdminClient,
    a: &UpdateBrokerConfigArgs,
) -> Result<Report, AdminError> {
    let targets = a.on.targets(admin)?;
    let body = format!("{}={}\n", a.key, a.value);
    let mut text = String::new();
    let mut brokers = Vec::new();
    for target in targets {
        let request = RemotingCommand::request(req::UPDATE_BROKER_CONFIG)
            .with_body(Bytes::from(body.clone()));
        admin.invoke_ok(&target.addr, request)?;
        text.push_str(&format!("update broker config success, {}\n", target.addr));
        brokers.push(target.addr);
    }
    Ok(Report {
        text,
        json: json!({ "brokers": brokers, "key": a.key, "value": a.value }),
    })
}
