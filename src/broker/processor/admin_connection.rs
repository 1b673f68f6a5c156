//! Who is connected: Java `AdminBrokerProcessor.getConsumerConnectionList`
//! (GET_CONSUMER_CONNECTION_LIST 203) and `getProducerConnectionList`
//! (GET_PRODUCER_CONNECTION_LIST 204).

use bytes::Bytes;

use super::{respond, ProcessResult, RequestContext};
use crate::broker::client::ClientChannelInfo;
use crate::broker::error::BrokerError;
use crate::remoting::body::admin::{Connection, ConsumerConnection, ProducerConnection};
use crate::remoting::codes::response_code as rc;
use crate::remoting::command::RemotingCommand;
use crate::remoting::headers::{
    GetConsumerConnectionListRequestHeader, GetProducerConnectionListRequestHeader,
};

fn connection(info: &ClientChannelInfo) -> Connection {
    Connection {
        client_addr: info.remote_addr.to_string(),
        client_id: info.client_id.clone(),
        language: info.language.clone(),
        version: info.version,
    }
}

fn sorted_connections<'a>(
    infos: impl IntoIterator<Item = &'a ClientChannelInfo>,
) -> Vec<Connection> {
    let mut set: Vec<Connection> = infos.into_iter().map(connection).collect();
    // Java's is a HashSet of equal-by-value connections.
    set.sort();
    set.dedup();
    set
}

fn json_response(
    request: &RemotingCommand,
    body: &impl serde::Serialize,
    what: &'static str,
) -> ProcessResult {
    let body =
        serde_json::to_vec(body).map_err(|source| BrokerError::AdminBodyEncode { what, source })?;
    respond(RemotingCommand::response_to(request, rc::SUCCESS, None).with_body(Bytes::from(body)))
}

pub async fn get_consumer_connection_list(
    cx: &RequestContext<'_>,
    request: &RemotingCommand,
) -> ProcessResult {
    let header = GetConsumerConnectionListRequestHeader::decode(request)?;
    let Some(info) = cx.ctrl.consumers.group(&header.consumer_group) else {
        return Err(BrokerError::ConsumerGroupNotOnline {
            group: header.consumer_group,
        });
    };
    let body = ConsumerConnection {
        connection_set: sorted_connections(info.channels.values()),
        consume_from_where: info.consume_from_where,
        consume_type: info.consume_type,
        message_model: info.message_model,
        subscription_table: info.subscriptions.into_iter().collect(),
    };
    json_response(request, &body, "ConsumerConnection")
}

pub async fn get_producer_connection_list(
    cx: &RequestContext<'_>,
    request: &RemotingCommand,
) -> ProcessResult {
    let header = GetProducerConnectionListRequestHeader::decode(request)?;
    let Some(channels) = cx.ctrl.producers.group(&header.producer_group) else {
        return Err(BrokerError::ProducerGroupNotExist {
            group: header.producer_group,
        });
    };
    let body = ProducerConnection {
        connection_set: sorted_connections(&channels),
    };
    json_response(request, &body, "ProducerConnection")
}
