//! What the broker (or name server) plugs into the runtime: [`RequestHandler`], and what it is
//! told about the connection a request came on: [`ConnectionContext`].

use super::writer::{ConnectionSender, Outbound, QueuedBytes};
use crate::remoting::command::RemotingCommand;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use tokio::sync::mpsc;

/// What the broker (or name server) plugs into the runtime.
///
/// One handler instance is shared by every worker thread, hence `Send + Sync`. The futures it
/// returns run on the runtime thread of the connection and need not be `Send`.
pub trait RequestHandler: Send + Sync + 'static {
    /// Handles one request.
    ///
    /// `Some(response)` is sent back with the request's opaque (the runtime sets opaque and the
    /// response flag, so a handler cannot mis-correlate). `None` means no response now: the
    /// request is oneway, or the response is held and will be sent later through
    /// `conn.sender()` (long polling). A response returned for a oneway request is dropped.
    /// A panic inside the future is caught and answered with `SYSTEM_ERROR` (unless oneway).
    fn handle(
        &self,
        conn: ConnectionContext,
        request: RemotingCommand,
    ) -> impl Future<Output = Option<RemotingCommand>>;

    /// Serves `request` on the reading task itself, when the handler can do so without waiting:
    /// `Ok` carries what [`RequestHandler::handle`] would have returned, `Err` hands the request
    /// back to run in a task of its own. Nothing may block here. The default serves nothing now.
    ///
    /// A request served now costs no task: a spawned handler future is its own heap allocation
    /// (a large one, aligned to a cache line), a schedule and a poll through the task machinery.
    /// Requests that cannot wait (a pull parks or answers at once) gain all of that back.
    fn handle_now(
        &self,
        conn: &ConnectionContext,
        request: RemotingCommand,
    ) -> Result<Option<RemotingCommand>, RemotingCommand> {
        let _ = conn;
        Err(request)
    }

    /// Called once, on the connection's thread, after the connection is closed and its writer has
    /// stopped (so `conn.sender().is_closed()` is true).
    fn on_connection_closed(&self, conn: &ConnectionContext) {
        let _ = conn;
    }
}

/// What a handler knows about the connection a request came on.
#[derive(Debug, Clone)]
pub struct ConnectionContext {
    /// Unique for the life of the process.
    pub id: u64,
    pub remote_addr: SocketAddr,
    pub local_addr: SocketAddr,
    /// Which listen address accepted it: 0 = `listen_addr`, `1 + i` = `additional_listen_addrs[i]`
    /// (the fast/VIP port serves fewer request codes in Java).
    pub listener_index: usize,
    /// The worker thread (and io_uring) the connection lives on, `0..worker_threads`.
    pub worker_index: usize,
    pub(crate) sender: ConnectionSender,
}

impl ConnectionContext {
    /// Queues frames on this connection from any thread.
    pub fn sender(&self) -> &ConnectionSender {
        &self.sender
    }

    /// A context not attached to any socket: what would be written to the connection arrives on
    /// the returned receiver instead. For testing handlers and processors without a network.
    pub fn detached(
        id: u64,
        remote_addr: SocketAddr,
        local_addr: SocketAddr,
        write_queue_max: usize,
    ) -> (ConnectionContext, mpsc::Receiver<Outbound>) {
        let (queue_tx, queue_rx) = mpsc::channel(write_queue_max);
        let ctx = ConnectionContext {
            id,
            remote_addr,
            local_addr,
            listener_index: 0,
            worker_index: 0,
            // Nobody gives bytes back on a detached queue: bound it in frames only.
            sender: ConnectionSender::new(queue_tx, Arc::new(QueuedBytes::new(usize::MAX))),
        };
        (ctx, queue_rx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::remoting::codes::response_code;

    #[test]
    fn detached_context_delivers_frames_to_its_receiver() {
        let addr: SocketAddr = "127.0.0.1:1".parse().unwrap();
        let (ctx, mut frames) = ConnectionContext::detached(9, addr, addr, 2);
        let request = RemotingCommand::request(34).with_opaque(5);
        let response = RemotingCommand::response_to(&request, response_code::SUCCESS, None);
        ctx.sender().send(Outbound::Command(response)).unwrap();
        match frames.try_recv().unwrap() {
            Outbound::Command(cmd) => assert_eq!(cmd.opaque, 5),
            other => panic!("unexpected frame {other:?}"),
        }
        drop(frames);
        assert!(ctx.sender().is_closed());
    }

    fn next_request(frames: &mut mpsc::Receiver<Outbound>) -> RemotingCommand {
        match frames.try_recv().expect("a queued frame") {
            Outbound::Command(cmd) => cmd,
            other => panic!("unexpected frame {other:?}"),
        }
    }

    #[test]
    fn calls_end_with_their_response_a_timeout_or_the_close() {
        use crate::net::error::ClientCallError;
        use std::time::Duration;
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap();
        let addr: SocketAddr = "127.0.0.1:1".parse().unwrap();
        let (ctx, mut frames) = ConnectionContext::detached(9, addr, addr, 8);
        let sender = ctx.sender().clone();
        runtime.block_on(async {
            let long = Duration::from_secs(30);
            let call = sender.call(RemotingCommand::request(307), long);
            let answer = async {
                tokio::task::yield_now().await;
                let request = next_request(&mut frames);
                assert!(!request.is_response());
                let response = RemotingCommand::response_to(&request, response_code::SUCCESS, None)
                    .with_remark("from the client");
                assert!(sender.complete_call(response));
                request.opaque
            };
            let (response, opaque) = tokio::join!(call, answer);
            let response = response.unwrap();
            assert_eq!(
                (response.opaque, response.remark.as_deref()),
                (opaque, Some("from the client"))
            );

            let timed_out = sender
                .call(RemotingCommand::request(307), Duration::from_millis(10))
                .await;
            assert!(matches!(
                timed_out,
                Err(ClientCallError::Timeout { timeout_ms: 10 })
            ));
            // Its late answer finds no waiter.
            let late = next_request(&mut frames);
            assert!(!sender.complete_call(RemotingCommand::response_to(&late, 0, None)));

            let call = sender.call(RemotingCommand::request(307), long);
            let close = async {
                tokio::task::yield_now().await;
                sender.close_calls();
            };
            let (closed, ()) = tokio::join!(call, close);
            assert!(matches!(closed, Err(ClientCallError::Closed)), "{closed:?}");
            let refused = sender.call(RemotingCommand::request(307), long).await;
            assert!(matches!(refused, Err(ClientCallError::Closed)));
        });
    }
}
