//! The admin tool's side of the wire: one blocking request per call over `net`'s client, JSON
//! headers (every RocketMQ broker and name server accepts them), and the look-ups most verbs
//! start with (cluster info, topic routes, the master of each broker group).

use std::collections::BTreeMap;
use std::time::Duration;

use serde::de::DeserializeOwned;

use super::error::AdminError;
use crate::net::remoting_client::BlockingClient;
use crate::remoting::body::json::{parse_lenient, JsonBodyError};
use crate::remoting::body::{ClusterInfo, TopicRouteData};
use crate::remoting::codes::{request_code as req, response_code as rc};
use crate::remoting::command::RemotingCommand;

/// Java `MixAll.MASTER_ID`.
pub const MASTER_ID: i64 = 0;

/// A broker to send a request to: its group name (when known) and address.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BrokerTarget {
    pub name: String,
    pub addr: String,
}

/// Connections are made per request: the tool sends a handful of requests and exits.
pub struct AdminClient {
    namesrv_addrs: Vec<String>,
    timeout: Duration,
}

impl AdminClient {
    /// `namesrv` is `ip:port[;ip:port]`, as `-n` takes it.
    pub fn new(namesrv: Option<&str>, timeout: Duration) -> Self {
        let namesrv_addrs = namesrv
            .unwrap_or_default()
            .split(';')
            .map(str::trim)
            .filter(|a| !a.is_empty())
            .map(str::to_string)
            .collect();
        AdminClient {
            namesrv_addrs,
            timeout,
        }
    }

    pub fn namesrv_addrs(&self) -> Result<&[String], AdminError> {
        if self.namesrv_addrs.is_empty() {
            return Err(AdminError::NoNamesrv);
        }
        Ok(&self.namesrv_addrs)
    }

    /// Sends `request` to `addr` and returns the response whatever its code.
    pub fn invoke(
        &self,
        addr: &str,
        request: RemotingCommand,
    ) -> Result<RemotingCommand, AdminError> {
        let mut client = BlockingClient::connect(addr, self.timeout)?;
        Ok(client.invoke(request)?)
    }

    /// Sends `request` to `addr`; any code but SUCCESS is an error with the server's remark.
    pub fn invoke_ok(
        &self,
        addr: &str,
        request: RemotingCommand,
    ) -> Result<RemotingCommand, AdminError> {
        let response = self.invoke(addr, request)?;
        if response.code != rc::SUCCESS {
            return Err(AdminError::Refused {
                addr: addr.to_string(),
                code: response.code,
                remark: response.remark.unwrap_or_default(),
            });
        }
        Ok(response)
    }

    /// Sends `request` to the name servers in turn until one answers (a refusal is an answer).
    pub fn namesrv_ok(&self, request: RemotingCommand) -> Result<RemotingCommand, AdminError> {
        let mut last = AdminError::NoNamesrv;
        for addr in self.namesrv_addrs()? {
            match self.invoke_ok(addr, request.clone()) {
                Err(AdminError::Client(e)) => last = AdminError::Client(e),
                other => return other,
            }
        }
        Err(last)
    }

    /// Reads `response`'s body as `T`, leniently.
    pub fn body<T: DeserializeOwned>(
        response: &RemotingCommand,
        addr: &str,
        what: &'static str,
    ) -> Result<T, AdminError> {
        Self::body_with(response, addr, what, |bytes| parse_lenient(bytes, what))
    }

    /// Reads `response`'s body with `parse` (a body type's own parser), naming `what` and the
    /// broker `addr` when it fails.
    pub fn body_with<T>(
        response: &RemotingCommand,
        addr: &str,
        what: &'static str,
        parse: impl FnOnce(&[u8]) -> Result<T, JsonBodyError>,
    ) -> Result<T, AdminError> {
        parse(&response.body).map_err(|source| AdminError::Body {
            what,
            addr: addr.to_string(),
            source,
        })
    }

    pub fn cluster_info(&self) -> Result<ClusterInfo, AdminError> {
        let r = self.namesrv_ok(RemotingCommand::request(req::GET_BROKER_CLUSTER_INFO))?;
        Self::body(&r, "name server", "ClusterInfo")
    }

    pub fn route(&self, topic: &str) -> Result<TopicRouteData, AdminError> {
        let r = self.namesrv_ok(
            RemotingCommand::request(req::GET_ROUTEINFO_BY_TOPIC).with_ext("topic", topic),
        )?;
        Self::body(&r, "name server", "TopicRouteData")
    }

    /// The master of every broker group of `cluster` (Java `CommandUtil.fetchMasterAddrByClusterName`).
    pub fn cluster_masters(&self, cluster: &str) -> Result<Vec<BrokerTarget>, AdminError> {
        let info = self.cluster_info()?;
        let Some(names) = info.cluster_addr_table.get(cluster) else {
            return Err(AdminError::Usage(format!(
                "cluster [{cluster}] is not known to the name server"
            )));
        };
        Ok(names
            .iter()
            .filter_map(|name| {
                let addr = info
                    .broker_addr_table
                    .get(name)?
                    .broker_addrs
                    .get(&MASTER_ID)?;
                Some(BrokerTarget {
                    name: name.clone(),
                    addr: addr.clone(),
                })
            })
            .collect())
    }

    /// `-b ADDR` or the masters of `-c CLUSTER` (mqadmin's usual pair of options).
    pub fn brokers(
        &self,
        broker_addr: Option<&str>,
        cluster: Option<&str>,
    ) -> Result<Vec<BrokerTarget>, AdminError> {
        match (broker_addr, cluster) {
            (Some(addr), _) => Ok(vec![BrokerTarget {
                name: String::new(),
                addr: addr.to_string(),
            }]),
            (None, Some(cluster)) => self.cluster_masters(cluster),
            (None, None) => Err(AdminError::Usage(
                "give a broker (-b ADDR) or a cluster (-c NAME)".into(),
            )),
        }
    }

    /// The master of each broker group serving `topic`.
    pub fn topic_masters(&self, topic: &str) -> Result<Vec<BrokerTarget>, AdminError> {
        Ok(masters_of_route(&self.route(topic)?))
    }

    /// Every broker address of every cluster (masters and slaves), by group name and id.
    pub fn all_brokers(&self) -> Result<BTreeMap<(String, String, i64), String>, AdminError> {
        let info = self.cluster_info()?;
        let mut out = BTreeMap::new();
        for (cluster, names) in &info.cluster_addr_table {
            for name in names {
                let Some(data) = info.broker_addr_table.get(name) else {
                    continue;
                };
                for (id, addr) in &data.broker_addrs {
                    out.insert((cluster.clone(), name.clone(), *id), addr.clone());
                }
            }
        }
        Ok(out)
    }
}

/// The master of each broker group of a route.
pub fn masters_of_route(route: &TopicRouteData) -> Vec<BrokerTarget> {
    route
        .broker_datas
        .iter()
        .filter_map(|bd| {
            Some(BrokerTarget {
                name: bd.broker_name.clone(),
                addr: bd.broker_addrs.get(&MASTER_ID)?.clone(),
            })
        })
        .collect()
}
