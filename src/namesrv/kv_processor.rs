//! The KV-config request codes of Java's `DefaultRequestProcessor`: PUT_KV_CONFIG (100),
//! GET_KV_CONFIG (101), DELETE_KV_CONFIG (102) and GET_KVLIST_BY_NAMESPACE (219).

use bytes::Bytes;

use super::kv_config_manager::KvConfigManager;
use crate::remoting::body::admin::KvTable;
use crate::remoting::headers::{
    GetKvConfigResponseHeader, GetKvListByNamespaceRequestHeader, KvConfigKeyRequestHeader,
    PutKvConfigRequestHeader,
};
use crate::remoting::{request_code, response_code, HeaderError, RemotingCommand};

/// The response to a KV-config request, `None` for any other code.
pub fn process(
    kv: &KvConfigManager,
    req: &RemotingCommand,
) -> Option<Result<RemotingCommand, HeaderError>> {
    Some(match req.code {
        request_code::PUT_KV_CONFIG => put(kv, req),
        request_code::GET_KV_CONFIG => get(kv, req),
        request_code::DELETE_KV_CONFIG => delete(kv, req),
        request_code::GET_KVLIST_BY_NAMESPACE => list(kv, req),
        _ => return None,
    })
}

fn system_error(req: &RemotingCommand, remark: String) -> RemotingCommand {
    RemotingCommand::response_to(req, response_code::SYSTEM_ERROR, Some(remark))
}

fn put(kv: &KvConfigManager, req: &RemotingCommand) -> Result<RemotingCommand, HeaderError> {
    let h = PutKvConfigRequestHeader::decode(req)?;
    Ok(match kv.put(&h.namespace, &h.key, &h.value) {
        Ok(()) => {
            tracing::info!(namespace = h.namespace, key = h.key, "put KV config");
            RemotingCommand::response_to(req, response_code::SUCCESS, None)
        }
        Err(e) => system_error(req, e.to_string()),
    })
}

fn get(kv: &KvConfigManager, req: &RemotingCommand) -> Result<RemotingCommand, HeaderError> {
    let h = KvConfigKeyRequestHeader::decode(req)?;
    Ok(match kv.get(&h.namespace, &h.key) {
        Some(value) => {
            let mut resp = RemotingCommand::response_to(req, response_code::SUCCESS, None);
            GetKvConfigResponseHeader { value: Some(value) }.encode(&mut resp);
            resp
        }
        None => RemotingCommand::response_to(
            req,
            response_code::QUERY_NOT_FOUND,
            Some(format!(
                "No config item, Namespace: {} Key: {}",
                h.namespace, h.key
            )),
        ),
    })
}

fn delete(kv: &KvConfigManager, req: &RemotingCommand) -> Result<RemotingCommand, HeaderError> {
    let h = KvConfigKeyRequestHeader::decode(req)?;
    Ok(match kv.delete(&h.namespace, &h.key) {
        Ok(()) => RemotingCommand::response_to(req, response_code::SUCCESS, None),
        Err(e) => system_error(req, e.to_string()),
    })
}

fn list(kv: &KvConfigManager, req: &RemotingCommand) -> Result<RemotingCommand, HeaderError> {
    let namespace = GetKvListByNamespaceRequestHeader::decode(req)?.namespace;
    let Some(table) = kv.namespace(&namespace) else {
        return Ok(RemotingCommand::response_to(
            req,
            response_code::QUERY_NOT_FOUND,
            Some(format!("No config item, Namespace: {namespace}")),
        ));
    };
    Ok(match serde_json::to_vec(&KvTable { table }) {
        Ok(body) => RemotingCommand::response_to(req, response_code::SUCCESS, None)
            .with_body(Bytes::from(body)),
        Err(e) => system_error(req, format!("cannot encode KVTable: {e}")),
    })
}
