//! How the broker's unit tests send a request: through the broker's real entry, so that the
//! ACL check, the request-code match (with its answer to a code it does not serve), the metrics
//! and the mapping of errors to responses are the ones a connection gets. Compiled for tests
//! only.

use std::future::Future;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::task::Poll;

use tempfile::TempDir;

use crate::broker::controller::BrokerController;
use crate::broker::dispatch;
use crate::broker::processor::pull::tests::woken_header;
use crate::broker::processor::ProcessResult;
use crate::broker::startup::build_controller;
use crate::config::Config;
use crate::net::{ConnectionContext, Outbound};
use crate::remoting::codes::{request_code, response_code};
use crate::remoting::command::RemotingCommand;
use crate::remoting::headers::{PullMessageRequestHeader, SendMessageRequestHeader};
use crate::store::format::encode_properties;

/// The frames a detached test connection may have queued.
const WRITE_QUEUE_MAX: usize = 64;

/// The output of a request that never waits (its future is ready at the first poll).
pub(crate) fn ready<F: Future>(future: F) -> F::Output {
    let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
    match std::pin::pin!(future).poll(&mut cx) {
        Poll::Ready(output) => output,
        Poll::Pending => panic!("the processor waited"),
    }
}

/// The address of the test broker and of its clients.
pub(crate) fn local_addr() -> SocketAddr {
    "127.0.0.1:10911".parse().unwrap()
}

/// The default config with the store in `dir`.
pub(crate) fn config_in(dir: &Path) -> Config {
    let mut config = Config::default();
    config.store.root_dir = dir.join("store");
    config
}

/// A broker without sockets or threads on the default config changed by `edit`, with its
/// store in a new directory.
pub(crate) fn broker_with(edit: impl FnOnce(&mut Config)) -> (Arc<BrokerController>, TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let mut config = config_in(dir.path());
    edit(&mut config);
    (build_controller(config).unwrap().ctrl, dir)
}

/// A connection from `remote` that no socket backs: what the broker queues on it arrives on
/// the receiver.
pub(crate) fn connection(
    id: u64,
    remote: SocketAddr,
) -> (ConnectionContext, tokio::sync::mpsc::Receiver<Outbound>) {
    ConnectionContext::detached(id, remote, local_addr(), WRITE_QUEUE_MAX)
}

/// The broker's dispatch of `request` on `conn`: the ACL check, then the processor of its code.
pub(crate) fn dispatch_on(
    ctrl: &BrokerController,
    conn: &ConnectionContext,
    request: &RemotingCommand,
) -> ProcessResult {
    ready(dispatch::dispatch(ctrl, conn, request))
}

/// The broker's answer to `request` on a fresh connection, as it would be sent back: an error
/// is answered with its response code and remark, and the metrics record it. Routed as the
/// network runtime routes it: served at once when the broker serves that request now
/// ([`dispatch::serve_now`]), else through the request's future.
pub(crate) fn answer(ctrl: &BrokerController, request: &RemotingCommand) -> RemotingCommand {
    let (conn, _queued) = connection(1, local_addr());
    dispatch::serve_now(ctrl, &conn, request)
        .unwrap_or_else(|| ready(dispatch::serve(ctrl, &conn, request)))
        .expect("expected an answer at once")
}

/// [`answer`], which must be SUCCESS.
pub(crate) fn answer_success(
    ctrl: &BrokerController,
    request: &RemotingCommand,
) -> RemotingCommand {
    let response = answer(ctrl, request);
    assert_eq!(
        response.code,
        response_code::SUCCESS,
        "request code {}: {:?}",
        request.code,
        response.remark
    );
    response
}

/// A PULL_MESSAGE of `group` for offset 0 of queue 0 of `topic`, all tags, at most 32
/// messages; long polling for `suspend_timeout_ms` when `sys_flag` has SUSPEND.
pub(crate) fn pull_request(
    group: &str,
    topic: &str,
    sys_flag: i32,
    suspend_timeout_ms: i64,
) -> RemotingCommand {
    let header = PullMessageRequestHeader {
        topic: topic.to_string(),
        sys_flag,
        suspend_timeout_millis: suspend_timeout_ms,
        ..woken_header(group, 0)
    };
    let mut request = RemotingCommand::request(request_code::PULL_MESSAGE);
    header.encode(&mut request);
    request
}

/// A SEND_MESSAGE_V2 of `body` to queue 0 of `topic` (created from TBW102 if absent), tag `a`.
pub(crate) fn send_request(topic: &str, body: &'static [u8]) -> RemotingCommand {
    let mut cmd = RemotingCommand::request(request_code::SEND_MESSAGE_V2);
    SendMessageRequestHeader {
        producer_group: "pg".into(),
        topic: topic.into(),
        default_topic: "TBW102".into(),
        default_topic_queue_nums: 4,
        queue_id: 0,
        sys_flag: 0,
        born_timestamp: 1_700_000_000_000,
        flag: 0,
        properties: Some(encode_properties([("TAGS", "a")])),
        reconsume_times: Some(0),
        unit_mode: false,
        batch: false,
        max_reconsume_times: None,
        broker_name: None,
    }
    .encode(&mut cmd);
    cmd.with_body(bytes::Bytes::from_static(body))
}
