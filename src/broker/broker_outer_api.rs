//! The broker's requests to the name servers (Java `BrokerOuterAPI`): REGISTER_BROKER with the
//! topic table, and UNREGISTER_BROKER at shutdown, over connections kept between calls (a
//! name server drops a broker whose connection closes). The periodic thread that calls them is
//! started by `startup.rs`.

use std::collections::HashMap;
use std::time::Duration;

use crate::broker::controller::BrokerController;
use crate::net::remoting_client::BlockingClient;
use crate::remoting::body::perm;
use crate::remoting::body::register_broker::build_register_broker_request;
use crate::remoting::codes::request_code;
use crate::remoting::command::RemotingCommand;

/// Sends `request` on the kept connection to `addr`, reconnecting once if it broke.
fn invoke_namesrv(
    connections: &mut HashMap<String, BlockingClient>,
    addr: &str,
    request: RemotingCommand,
) -> Result<RemotingCommand, crate::net::remoting_client::ClientError> {
    if let Some(client) = connections.get_mut(addr) {
        match client.invoke(request.clone()) {
            Ok(r) => return Ok(r),
            Err(e) => {
                tracing::debug!(namesrv = addr, error = %e, "name server connection broke; reconnecting");
                connections.remove(addr);
            }
        }
    }
    let mut client = BlockingClient::connect(addr, Duration::from_secs(3))?;
    let response = client.invoke(request)?;
    connections.insert(addr.to_string(), client);
    Ok(response)
}

/// Java `BrokerOuterAPI.registerBrokerAll`: one REGISTER_BROKER to each name server.
pub fn register_all(
    ctrl: &BrokerController,
    namesrv_addrs: &[String],
    connections: &mut HashMap<String, BlockingClient>,
) {
    let wrapper = ctrl.topics.wrapper();
    // Java `registerBrokerAll`: a broker without read or write permission registers every
    // topic with the permission it lacks taken off.
    let broker_perm = ctrl.broker_permission();
    let restricted = broker_perm & perm::PERM_READ == 0 || broker_perm & perm::PERM_WRITE == 0;
    let topics: Vec<_> = wrapper
        .topic_config_table
        .values()
        .cloned()
        .map(|mut tc| {
            if restricted {
                tc.perm &= broker_perm;
            }
            tc
        })
        .collect();
    let c = &ctrl.config.broker;
    let ha_port = ctrl.config.ha.effective_listen_port(c.listen_port);
    let ha_addr = format!("{}:{ha_port}", c.advertised_ip);
    for addr in namesrv_addrs {
        let request = build_register_broker_request(
            &c.cluster_name,
            &c.name,
            &ctrl.broker_addr,
            c.id as i64,
            &ha_addr,
            &topics,
            &wrapper.data_version,
        );
        match invoke_namesrv(connections, addr, request) {
            Ok(r) if r.code == 0 => {
                tracing::debug!(namesrv = addr, "registered with name server");
                // Java `BrokerController.registerBrokerAll`: a slave learns its master here
                // (the metadata sync and the pull's "master online" follow `masterAddr`, empty
                // while no master is registered; replication follows `haServerAddr`).
                if ctrl.is_slave() {
                    ctrl.slave_sync.set_master_addr(r.ext_opt_str("masterAddr"));
                }
                ctrl.ha.update_master(
                    r.ext_fields.get("haServerAddr").map(String::as_str),
                    r.ext_fields.get("masterAddr").map(String::as_str),
                );
            }
            Ok(r) => {
                tracing::warn!(namesrv = addr, code = r.code, remark = ?r.remark, "name server refused registration")
            }
            Err(e) => {
                tracing::warn!(namesrv = addr, error = %e, "registering with name server failed")
            }
        }
    }
}

/// Java `BrokerOuterAPI.unregisterBrokerAll`: one UNREGISTER_BROKER to each name server.
pub fn unregister_all(
    ctrl: &BrokerController,
    namesrv_addrs: &[String],
    connections: &mut HashMap<String, BlockingClient>,
) {
    let c = &ctrl.config.broker;
    for addr in namesrv_addrs {
        let request = RemotingCommand::request(request_code::UNREGISTER_BROKER)
            .with_ext("brokerName", &c.name)
            .with_ext("brokerAddr", &ctrl.broker_addr)
            .with_ext("clusterName", &c.cluster_name)
            .with_ext("brokerId", c.id);
        if let Err(e) = invoke_namesrv(connections, addr, request) {
            tracing::debug!(namesrv = addr, error = %e, "unregistering from name server failed");
        }
    }
}
