//! Request handling of the name server (Java `DefaultRequestProcessor` and
//! `ClientRequestProcessor`), independent of the transport: one request in, one response out.

use super::route_info::{BrokerRegistration, RegistrationOrigin, RouteInfoManager};
use crate::remoting::body::json::parse_lenient;
use crate::remoting::body::register_broker::{body_crc32, decode_register_broker_body};
use crate::remoting::body::TopicRouteData;
use crate::remoting::headers::{
    GetRouteInfoRequestHeader, RegisterBrokerRequestHeader, RegisterBrokerResponseHeader,
    UnregisterBrokerRequestHeader,
};
use crate::remoting::{request_code, response_code, HeaderError, RemotingCommand};
use bytes::Bytes;
use serde::Serialize;
use std::sync::Arc;

/// `FAQUrl.suggestTodo(FAQUrl.APPLY_TOPIC_URL)`, appended to TOPIC_NOT_EXIST remarks.
const APPLY_TOPIC_FAQ_SUFFIX: &str =
    "\nSee https://rocketmq.apache.org/docs/bestPractice/06FAQ for further details.";

/// Answers name server requests against a shared [`RouteInfoManager`].
#[derive(Debug, Clone, Default)]
pub struct NamesrvProcessor {
    route_info: Arc<RouteInfoManager>,
}

impl NamesrvProcessor {
    pub fn new(route_info: Arc<RouteInfoManager>) -> Self {
        Self { route_info }
    }

    /// The route table (for the expiry timer and connection-close hook).
    pub fn route_info(&self) -> &Arc<RouteInfoManager> {
        &self.route_info
    }

    /// Handles one request and returns its response (same opaque, response flag set). Never
    /// panics; bad input gets an error response. The caller must not send the response when
    /// `req.is_oneway()`.
    ///
    /// Header problems are answered like Java's `decodeCommandCustomHeader` failure:
    /// SYSTEM_ERROR with a remark naming the field.
    pub fn process(&self, req: &RemotingCommand, now_ms: i64) -> RemotingCommand {
        self.process_from(req, now_ms, None)
    }

    /// [`Self::process`] of a request that came over a connection: REGISTER_BROKER and
    /// UNREGISTER_BROKER may not change a live broker registered over another connection,
    /// unless `origin.acl_admin` allows it (answered NO_PERMISSION). `None` is a trusted
    /// caller.
    pub fn process_from(
        &self,
        req: &RemotingCommand,
        now_ms: i64,
        origin: Option<&RegistrationOrigin<'_>>,
    ) -> RemotingCommand {
        let result = match req.code {
            request_code::REGISTER_BROKER => self.register_broker(req, now_ms, origin),
            request_code::UNREGISTER_BROKER => self.unregister_broker(req, now_ms, origin),
            request_code::GET_ROUTEINFO_BY_TOPIC => self.get_route_info_by_topic(req),
            // Java writes this body in fastjson's legacy form (unquoted brokerId keys); we write
            // standard JSON, which fastjson (the admin tools' parser) reads as well.
            request_code::GET_BROKER_CLUSTER_INFO => {
                Ok(json_response(req, &self.route_info.get_all_cluster_info()))
            }
            request_code::REGISTER_TOPIC_IN_NAMESRV => self.register_topic(req),
            request_code::GET_ALL_TOPIC_LIST_FROM_NAMESERVER => {
                Ok(json_response(req, &self.route_info.get_all_topic_list()))
            }
            code => Ok(RemotingCommand::response_to(
                req,
                response_code::REQUEST_CODE_NOT_SUPPORTED,
                Some(format!(" request type {code} not supported")),
            )),
        };
        result.unwrap_or_else(|err| {
            RemotingCommand::response_to(req, response_code::SYSTEM_ERROR, Some(err.to_string()))
        })
    }

    fn register_broker(
        &self,
        req: &RemotingCommand,
        now_ms: i64,
        origin: Option<&RegistrationOrigin<'_>>,
    ) -> Result<RemotingCommand, HeaderError> {
        let header = RegisterBrokerRequestHeader::decode(req)?;
        if header.body_crc32 != 0 && header.body_crc32 != body_crc32(&req.body) {
            tracing::warn!(
                broker_addr = %header.broker_addr,
                "register broker: crc32 of the body does not match"
            );
            return Ok(error_response(req, "crc32 not match"));
        }
        let body = match decode_register_broker_body(&req.body, header.compressed, req.version) {
            Ok(body) => body,
            Err(err) => {
                return Ok(error_response(
                    req,
                    &format!("Failed to decode RegisterBrokerBody: {err}"),
                ))
            }
        };
        let registration = BrokerRegistration {
            cluster_name: header.cluster_name,
            broker_name: header.broker_name,
            broker_addr: header.broker_addr,
            broker_id: header.broker_id,
            ha_server_addr: header.ha_server_addr,
            zone_name: header.zone_name,
            heartbeat_timeout_ms: header.heartbeat_timeout_millis,
            enable_acting_master: header.enable_acting_master,
            topic_config_wrapper: body.topic_config_serialize_wrapper,
            filter_server_list: Some(body.filter_server_list),
        };
        match self
            .route_info
            .register_broker_from(&registration, now_ms, origin)
        {
            Ok(result) => {
                let mut resp = RemotingCommand::response_to(req, response_code::SUCCESS, None);
                RegisterBrokerResponseHeader {
                    ha_server_addr: result.ha_server_addr,
                    master_addr: result.master_addr,
                }
                .encode(&mut resp);
                Ok(resp)
            }
            Err(err) => Ok(RemotingCommand::response_to(
                req,
                err.response_code(),
                Some(err.to_string()),
            )),
        }
    }

    fn unregister_broker(
        &self,
        req: &RemotingCommand,
        now_ms: i64,
        origin: Option<&RegistrationOrigin<'_>>,
    ) -> Result<RemotingCommand, HeaderError> {
        let header = UnregisterBrokerRequestHeader::decode(req)?;
        let (cluster, addr, name, id) = (
            &header.cluster_name,
            &header.broker_addr,
            &header.broker_name,
            header.broker_id,
        );
        let refused = match origin {
            None => {
                self.route_info.unregister_broker(cluster, addr, name, id);
                None
            }
            Some(origin) => self
                .route_info
                .unregister_broker_from(cluster, addr, name, id, now_ms, origin)
                .err(),
        };
        Ok(match refused {
            None => RemotingCommand::response_to(req, response_code::SUCCESS, None),
            Some(err) => {
                RemotingCommand::response_to(req, err.response_code(), Some(err.to_string()))
            }
        })
    }

    fn get_route_info_by_topic(
        &self,
        req: &RemotingCommand,
    ) -> Result<RemotingCommand, HeaderError> {
        // acceptStandardJsonOnly does not matter: we always write standard JSON (below).
        let topic = GetRouteInfoRequestHeader::decode(req)?.topic;
        match self.route_info.pickup_topic_route_data(&topic) {
            // Java writes standard JSON (quoted brokerId keys) only for clients of version
            // >= V4_9_4 (401) or with acceptStandardJsonOnly, and fastjson's legacy unquoted
            // keys otherwise, for Go clients older than mid-2022 that split the text by hand
            // (apache/rocketmq #4471). We always write standard JSON: every maintained client
            // (Java, C++, Go, rocketmq-rust) parses it.
            Some(route) => Ok(json_response(req, &route)),
            None => Ok(RemotingCommand::response_to(
                req,
                response_code::TOPIC_NOT_EXIST,
                Some(format!(
                    "No topic route info in name server for the topic: {topic}{APPLY_TOPIC_FAQ_SUFFIX}"
                )),
            )),
        }
    }

    fn register_topic(&self, req: &RemotingCommand) -> Result<RemotingCommand, HeaderError> {
        let topic = req.ext_str("topic")?;
        // An absent body is a no-op in Java (decode(null) is null).
        if !req.body.is_empty() {
            let route: TopicRouteData = match parse_lenient(&req.body, "TopicRouteData") {
                Ok(route) => route,
                Err(err) => return Ok(error_response(req, &err.to_string())),
            };
            // Java answers SUCCESS even when a queue names an unknown broker (it only logs).
            self.route_info.register_topic(topic, &route.queue_datas);
        }
        Ok(RemotingCommand::response_to(
            req,
            response_code::SUCCESS,
            None,
        ))
    }

    /// For the network runtime: the broker address a SUCCESSful REGISTER_BROKER registered,
    /// to remember per connection and pass to [`RouteInfoManager::on_channel_closed`] when the
    /// connection closes.
    pub fn registered_broker_addr<'a>(
        req: &'a RemotingCommand,
        resp: &RemotingCommand,
    ) -> Option<&'a str> {
        (req.code == request_code::REGISTER_BROKER && resp.code == response_code::SUCCESS)
            .then(|| req.ext_opt_str("brokerAddr"))
            .flatten()
    }
}

fn error_response(req: &RemotingCommand, remark: &str) -> RemotingCommand {
    RemotingCommand::response_to(req, response_code::SYSTEM_ERROR, Some(remark.to_owned()))
}

/// SUCCESS with `value` as the JSON body.
fn json_response<T: Serialize>(req: &RemotingCommand, value: &T) -> RemotingCommand {
    match serde_json::to_vec(value) {
        Ok(body) => RemotingCommand::response_to(req, response_code::SUCCESS, None)
            .with_body(Bytes::from(body)),
        // Our bodies have string or integer map keys only; kept as an answer, not a panic.
        Err(err) => error_response(req, &format!("cannot encode the response body: {err}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::remoting::body::register_broker::{
        build_register_broker_request, encode_compressed_for_test,
    };
    use crate::remoting::body::{DataVersion, TopicConfig};
    use serde_json::Value;
    use std::collections::BTreeSet;

    const MASTER: &str = "127.0.0.1:10911";

    fn register_request() -> RemotingCommand {
        let topics = [
            TopicConfig::new("T", 4, 4, 6),
            TopicConfig::new("TBW102", 8, 8, 7),
        ];
        let dv = DataVersion {
            counter: 1,
            state_version: 0,
            timestamp: 1,
        };
        build_register_broker_request(
            "DefaultCluster",
            "broker-a",
            MASTER,
            0,
            "127.0.0.1:10912",
            &topics,
            &dv,
        )
        .with_opaque(7)
    }

    fn route_request(topic: &str) -> RemotingCommand {
        RemotingCommand::request(request_code::GET_ROUTEINFO_BY_TOPIC)
            .with_ext("topic", topic)
            .with_opaque(8)
    }

    fn keys(value: &Value) -> BTreeSet<&str> {
        value
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect()
    }

    #[test]
    fn register_then_route_lookup_has_the_exact_json_shape() {
        let p = NamesrvProcessor::default();
        let resp = p.process(&register_request(), 0);
        assert_eq!(resp.code, response_code::SUCCESS, "{:?}", resp.remark);
        assert_eq!(resp.opaque, 7);
        assert!(resp.is_response());
        assert!(resp.ext_fields.is_empty(), "a master gets no masterAddr");

        let resp = p.process(&route_request("T"), 0);
        assert_eq!(resp.code, response_code::SUCCESS);
        assert_eq!(resp.opaque, 8);
        let json: Value = serde_json::from_slice(&resp.body).unwrap();
        assert_eq!(
            keys(&json),
            BTreeSet::from(["brokerDatas", "filterServerTable", "queueDatas"])
        );
        assert_eq!(json["filterServerTable"], serde_json::json!({}));
        let broker = &json["brokerDatas"][0];
        assert_eq!(
            keys(broker),
            BTreeSet::from(["brokerAddrs", "brokerName", "cluster", "enableActingMaster"])
        );
        assert_eq!(broker["brokerAddrs"], serde_json::json!({ "0": MASTER }));
        assert_eq!(broker["enableActingMaster"], false);
        let queue = &json["queueDatas"][0];
        assert_eq!(
            keys(queue),
            BTreeSet::from([
                "brokerName",
                "perm",
                "readQueueNums",
                "topicSysFlag",
                "writeQueueNums"
            ])
        );
        assert_eq!(queue["readQueueNums"], 4);
        // Quoted brokerId keys: the raw text is standard JSON.
        let text = std::str::from_utf8(&resp.body).unwrap();
        assert!(
            text.contains(r#""brokerAddrs":{"0":"127.0.0.1:10911"}"#),
            "{text}"
        );
    }

    #[test]
    fn missing_topic_is_topic_not_exist() {
        let p = NamesrvProcessor::default();
        let resp = p.process(&route_request("nope"), 0);
        assert_eq!(resp.code, response_code::TOPIC_NOT_EXIST);
        let remark = resp.remark.unwrap();
        assert!(
            remark.starts_with("No topic route info in name server for the topic: nope"),
            "{remark}"
        );
    }

    #[test]
    fn slave_registration_returns_the_master() {
        let p = NamesrvProcessor::default();
        p.process(&register_request(), 0);
        let topics = [
            TopicConfig::new("T", 4, 4, 6),
            TopicConfig::new("TBW102", 8, 8, 7),
        ];
        let req = build_register_broker_request(
            "DefaultCluster",
            "broker-a",
            "127.0.0.1:20911",
            1,
            "127.0.0.1:20912",
            &topics,
            &DataVersion::default(),
        );
        let resp = p.process(&req, 0);
        assert_eq!(resp.code, response_code::SUCCESS);
        assert_eq!(resp.ext_fields["masterAddr"], MASTER);
        assert_eq!(resp.ext_fields["haServerAddr"], "127.0.0.1:10912");
        assert_eq!(
            NamesrvProcessor::registered_broker_addr(&req, &resp),
            Some("127.0.0.1:20911")
        );
    }

    #[test]
    fn unregister_and_cluster_info_and_topic_list() {
        let p = NamesrvProcessor::default();
        p.process(&register_request(), 0);
        let resp = p.process(
            &RemotingCommand::request(request_code::GET_BROKER_CLUSTER_INFO),
            0,
        );
        let json: Value = serde_json::from_slice(&resp.body).unwrap();
        assert_eq!(
            json["clusterAddrTable"],
            serde_json::json!({ "DefaultCluster": ["broker-a"] })
        );
        assert_eq!(
            json["brokerAddrTable"]["broker-a"]["brokerAddrs"]["0"],
            MASTER
        );
        let resp = p.process(
            &RemotingCommand::request(request_code::GET_ALL_TOPIC_LIST_FROM_NAMESERVER),
            0,
        );
        assert_eq!(resp.body.as_ref(), br#"{"topicList":["T","TBW102"]}"#);

        let unregister = RemotingCommand::request(request_code::UNREGISTER_BROKER)
            .with_ext("brokerName", "broker-a")
            .with_ext("brokerAddr", MASTER)
            .with_ext("clusterName", "DefaultCluster")
            .with_ext("brokerId", 0);
        assert_eq!(p.process(&unregister, 0).code, response_code::SUCCESS);
        assert_eq!(
            p.process(&route_request("T"), 0).code,
            response_code::TOPIC_NOT_EXIST
        );
    }

    #[test]
    fn zone_name_and_acting_master_flag_reach_the_route() {
        let p = NamesrvProcessor::default();
        let mut req = register_request();
        req.set_ext("__ZONE_NAME", "zone-1");
        req.set_ext("enableActingMaster", true);
        assert_eq!(p.process(&req, 0).code, response_code::SUCCESS);
        let json: Value = serde_json::from_slice(&p.process(&route_request("T"), 0).body).unwrap();
        assert_eq!(json["brokerDatas"][0]["zoneName"], "zone-1");
        assert_eq!(json["brokerDatas"][0]["enableActingMaster"], true);
    }

    #[test]
    fn unknown_code_is_not_supported() {
        let p = NamesrvProcessor::default();
        let resp = p.process(&RemotingCommand::request(12345).with_opaque(3), 0);
        assert_eq!(resp.code, response_code::REQUEST_CODE_NOT_SUPPORTED);
        assert_eq!(
            resp.remark.as_deref(),
            Some(" request type 12345 not supported")
        );
        assert_eq!(resp.opaque, 3);
    }

    #[test]
    fn bad_register_body_is_a_system_error() {
        let p = NamesrvProcessor::default();
        let mut req = register_request();
        req.body = Bytes::from_static(b"{\"topicConfigSerializeWrapper\":");
        req.set_ext("bodyCrc32", 0);
        let resp = p.process(&req, 0);
        assert_eq!(resp.code, response_code::SYSTEM_ERROR);
        assert!(resp
            .remark
            .unwrap()
            .starts_with("Failed to decode RegisterBrokerBody"));
        // Wrong JSON types are errors too, not panics.
        req.body =
            Bytes::from_static(br#"{"topicConfigSerializeWrapper":{"topicConfigTable":[1]}}"#);
        assert_eq!(p.process(&req, 0).code, response_code::SYSTEM_ERROR);
        // Compressed flag with garbage.
        req.set_ext("compressed", true);
        assert_eq!(p.process(&req, 0).code, response_code::SYSTEM_ERROR);
        assert!(p
            .route_info()
            .get_all_cluster_info()
            .broker_addr_table
            .is_empty());
    }

    #[test]
    fn body_crc_mismatch_is_refused() {
        let p = NamesrvProcessor::default();
        let mut req = register_request();
        let crc: i32 = req.ext_fields["bodyCrc32"].parse().unwrap();
        req.set_ext("bodyCrc32", crc ^ 1);
        let resp = p.process(&req, 0);
        assert_eq!(resp.code, response_code::SYSTEM_ERROR);
        assert_eq!(resp.remark.as_deref(), Some("crc32 not match"));
        assert_eq!(NamesrvProcessor::registered_broker_addr(&req, &resp), None);
        assert!(p.route_info().pickup_topic_route_data("T").is_none());
        // bodyCrc32 = 0 disables the check.
        req.set_ext("bodyCrc32", 0);
        assert_eq!(p.process(&req, 0).code, response_code::SUCCESS);
    }

    #[test]
    fn missing_or_bad_header_fields_name_the_field() {
        let p = NamesrvProcessor::default();
        let mut req = register_request();
        req.ext_fields.remove("haServerAddr");
        let resp = p.process(&req, 0);
        assert_eq!(resp.code, response_code::SYSTEM_ERROR);
        assert!(resp.remark.unwrap().contains("haServerAddr"));

        let mut req = register_request();
        req.set_ext("brokerId", "zero");
        let remark = p.process(&req, 0).remark.unwrap();
        assert!(remark.contains("brokerId"), "{remark}");

        let resp = p.process(
            &RemotingCommand::request(request_code::GET_ROUTEINFO_BY_TOPIC),
            0,
        );
        assert_eq!(resp.code, response_code::SYSTEM_ERROR);
        assert!(resp.remark.unwrap().contains("topic"));
    }

    #[test]
    fn compressed_registration_is_accepted() {
        let p = NamesrvProcessor::default();
        let dv = DataVersion {
            counter: 2,
            state_version: 0,
            timestamp: 3,
        };
        let body = encode_compressed_for_test(
            &dv,
            &[
                TopicConfig::new("Z", 2, 2, 6),
                TopicConfig::new("TBW102", 8, 8, 7),
            ],
            &[],
        );
        let mut req = register_request();
        req.set_ext("compressed", true);
        req.set_ext("bodyCrc32", body_crc32(&body));
        req.body = Bytes::from(body);
        assert_eq!(p.process(&req, 0).code, response_code::SUCCESS);
        let route = p.route_info().pickup_topic_route_data("Z").unwrap();
        assert_eq!(route.queue_datas[0].write_queue_nums, 2);
    }

    #[test]
    fn register_topic_reads_legacy_json() {
        let p = NamesrvProcessor::default();
        p.process(&register_request(), 0);
        // fastjson legacy form with unquoted brokerId keys.
        let body = r#"{"brokerDatas":[{"brokerAddrs":{0:"127.0.0.1:10911"},"brokerName":"broker-a","cluster":"DefaultCluster"}],
            "queueDatas":[{"brokerName":"broker-a","perm":6,"readQueueNums":3,"topicSysFlag":0,"writeQueueNums":3}],"extra":1}"#;
        let req = RemotingCommand::request(request_code::REGISTER_TOPIC_IN_NAMESRV)
            .with_ext("topic", "AUTO")
            .with_body(Bytes::from(body));
        assert_eq!(p.process(&req, 0).code, response_code::SUCCESS);
        let route = p.route_info().pickup_topic_route_data("AUTO").unwrap();
        assert_eq!(route.queue_datas[0].read_queue_nums, 3);

        let bad = req.clone().with_body(Bytes::from_static(b"[not json"));
        assert_eq!(p.process(&bad, 0).code, response_code::SYSTEM_ERROR);
        let empty = req.with_body(Bytes::new());
        assert_eq!(p.process(&empty, 0).code, response_code::SUCCESS);
    }

    #[test]
    fn empty_register_body_registers_the_broker_without_topics() {
        let p = NamesrvProcessor::default();
        let mut req = register_request();
        req.body = Bytes::new();
        req.set_ext("bodyCrc32", 0);
        assert_eq!(p.process(&req, 0).code, response_code::SUCCESS);
        let info = p.route_info().get_all_cluster_info();
        assert_eq!(info.broker_addr_table["broker-a"].broker_addrs[&0], MASTER);
        assert!(p.route_info().get_all_topic_list().topic_list.is_empty());
    }
}
