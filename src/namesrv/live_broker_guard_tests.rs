//! The guard on registrations that would replace a live broker
//! ([`RouteInfoManager::register_broker_from`], `unregister_broker_from`,
//! `on_channel_closed_from`).

use std::net::SocketAddr;

use super::route_info::{
    BrokerRegistration, RegisterBrokerError, RegistrationOrigin, RouteInfoManager,
};
use crate::remoting::body::{DataVersion, TopicConfig, TopicConfigSerializeWrapper};
use crate::remoting::response_code;

const CLUSTER: &str = "DefaultCluster";
const REAL: &str = "10.0.0.1:10911";
const FOREIGN: &str = "10.6.6.6:10911";
const TIMEOUT_MS: i64 = 120_000;

fn registration(cluster: &str, addr: &str) -> BrokerRegistration {
    BrokerRegistration {
        cluster_name: cluster.into(),
        broker_name: "broker-a".into(),
        broker_addr: addr.into(),
        broker_id: 0,
        ha_server_addr: addr.replace("10911", "10912"),
        enable_acting_master: Some(false),
        topic_config_wrapper: TopicConfigSerializeWrapper {
            data_version: DataVersion {
                counter: 1,
                state_version: 0,
                timestamp: 1,
            },
            topic_config_table: [("T".to_owned(), TopicConfig::new("T", 4, 4, 6))]
                .into_iter()
                .chain([("TBW102".to_owned(), TopicConfig::new("TBW102", 8, 8, 7))])
                .collect(),
        },
        ..BrokerRegistration::default()
    }
}

fn socket(text: &str) -> SocketAddr {
    text.parse().unwrap()
}

fn route_addr(rim: &RouteInfoManager) -> String {
    let route = rim.pickup_topic_route_data("T").unwrap();
    route.broker_datas[0].broker_addrs[&0].clone()
}

/// broker-a registered at REAL over the connection from 10.0.0.1:40000, at time 0.
fn live_broker() -> RouteInfoManager {
    let rim = RouteInfoManager::new();
    let no = || false;
    let real = RegistrationOrigin {
        remote_addr: socket("10.0.0.1:40000"),
        acl_admin: &no,
    };
    rim.register_broker_from(&registration(CLUSTER, REAL), 0, Some(&real))
        .unwrap();
    rim
}

#[test]
fn a_foreign_address_for_a_live_broker_is_refused_and_routes_stay() {
    let rim = live_broker();
    let no = || false;
    let attacker = RegistrationOrigin {
        remote_addr: socket("10.6.6.6:50000"),
        acl_admin: &no,
    };
    for cluster in [CLUSTER, "OtherCluster"] {
        let err = rim
            .register_broker_from(&registration(cluster, FOREIGN), 1_000, Some(&attacker))
            .unwrap_err();
        assert!(matches!(
            err,
            RegisterBrokerError::LiveBrokerHeldElsewhere { .. }
        ));
        assert_eq!(err.response_code(), response_code::NO_PERMISSION);
        assert_eq!(route_addr(&rim), REAL, "{cluster}");
    }
    assert!(!rim
        .get_all_cluster_info()
        .cluster_addr_table
        .contains_key("OtherCluster"));
    for cluster in [CLUSTER, "OtherCluster"] {
        let err = rim
            .unregister_broker_from(cluster, REAL, "broker-a", 0, 1_000, &attacker)
            .unwrap_err();
        assert!(
            err.to_string()
                .contains("unregistering 10.0.0.1:10911 is refused"),
            "{err}"
        );
        assert_eq!(route_addr(&rim), REAL, "{cluster}");
    }
}

#[test]
fn the_brokers_own_connection_an_admin_or_expiry_may_replace_it() {
    let no = || false;
    let yes = || true;
    let own = RegistrationOrigin {
        remote_addr: socket("10.0.0.1:40000"),
        acl_admin: &no,
    };
    let rim = live_broker();
    rim.register_broker_from(&registration(CLUSTER, FOREIGN), 1_000, Some(&own))
        .unwrap();
    assert_eq!(route_addr(&rim), FOREIGN, "own connection");

    let admin = RegistrationOrigin {
        remote_addr: socket("10.6.6.6:50000"),
        acl_admin: &yes,
    };
    let rim = live_broker();
    rim.register_broker_from(&registration(CLUSTER, FOREIGN), 1_000, Some(&admin))
        .unwrap();
    assert_eq!(route_addr(&rim), FOREIGN, "ACL admin");

    let stranger = RegistrationOrigin {
        remote_addr: socket("10.6.6.6:50000"),
        acl_admin: &no,
    };
    let rim = live_broker();
    assert!(
        rim.register_broker_from(&registration(CLUSTER, FOREIGN), TIMEOUT_MS, Some(&stranger))
            .is_err(),
        "alive up to the timeout"
    );
    rim.register_broker_from(
        &registration(CLUSTER, FOREIGN),
        TIMEOUT_MS + 1,
        Some(&stranger),
    )
    .unwrap();
    assert_eq!(
        route_addr(&rim),
        FOREIGN,
        "a dead broker is replaced once it expired"
    );

    let rim = live_broker();
    assert!(rim
        .unregister_broker_from(CLUSTER, REAL, "broker-a", 0, 1_000, &own)
        .unwrap());
    assert!(
        rim.pickup_topic_route_data("T").is_none(),
        "its own unregistration"
    );
}

#[test]
fn the_same_address_from_another_connection_is_a_heartbeat_that_cannot_take_it_down() {
    let rim = live_broker();
    let no = || false;
    let other = RegistrationOrigin {
        remote_addr: socket("10.0.0.1:40001"),
        acl_admin: &no,
    };
    // A reconnected broker (or anyone) may refresh the same address...
    rim.register_broker_from(&registration(CLUSTER, REAL), 1_000, Some(&other))
        .unwrap();
    // ...but that connection's close does not remove the broker registered by the first one.
    assert!(rim
        .on_channel_closed_from(REAL, socket("10.0.0.1:40001"))
        .is_empty());
    assert_eq!(route_addr(&rim), REAL);
    assert_eq!(
        rim.on_channel_closed_from(REAL, socket("10.0.0.1:40000"))
            .len(),
        1
    );
    assert!(rim.pickup_topic_route_data("T").is_none());
}

#[test]
fn trusted_callers_are_not_checked() {
    let rim = live_broker();
    rim.register_broker(&registration(CLUSTER, FOREIGN), 1_000)
        .unwrap();
    assert_eq!(route_addr(&rim), FOREIGN);
}
