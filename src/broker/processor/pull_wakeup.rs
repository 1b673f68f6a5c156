//! A woken pull's re-execution (Java `PullMessageProcessor.executeRequestWhenWakeup`), sharing
//! what it can with the other pulls one arrival woke: one store read and one encoded answer
//! (see [`WokenShared`]). The pull itself is [`super::pull`]'s; this file is how the wake
//! threads reach it.

use crate::broker::controller::BrokerController;
use crate::broker::error::BrokerError;
use crate::broker::longpoll::pull_request::RequestEnvelope;
use crate::broker::longpoll::pull_request_hold_service::{PullRequestHoldService, PullWakeHost};
use crate::broker::longpoll::shared_response::{FrameChunks, SharedFrame};
use crate::net::{FileFrame, FileRange, Outbound};
use crate::remoting::codes::response_code as rc;
use crate::remoting::command::RemotingCommand;
use crate::remoting::headers::PullMessageRequestHeader;
use crate::store::{FileRegion, MessageStore};

use super::pull::{
    answer, file_frame, look_up_shared, store_offset_moved_event, Looked, PullOutcome, SharedRead,
};

/// How the wake threads re-execute a woken pull on this broker.
impl PullWakeHost for BrokerController {
    type Shared = WokenShared;

    fn pull_hold(&self) -> &PullRequestHoldService {
        &self.pull_hold
    }

    fn execute_woken(
        &self,
        header: &PullMessageRequestHeader,
        envelope: RequestEnvelope,
        shared: &mut WokenShared,
    ) -> Option<Outbound> {
        match execute_woken_shared(self, header, envelope, shared) {
            Ok(outbound) => Some(outbound),
            Err(e) => {
                let response = envelope.response(e.response_code(), Some(e.remark()));
                Some(Outbound::Command(response))
            }
        }
    }

    fn observe_wake_latency(&self, elapsed: std::time::Duration) {
        if let Some(metrics) = self.metrics() {
            metrics.observe_wake(elapsed);
        }
    }
}

/// What the re-executions of one drain's woken pulls share. When one arrival wakes many pulls
/// on one queue (many consumers of one queue), most ask the same thing, and re-executing each
/// from scratch made the last of 100,000 wait seconds (docs/BENCHMARKS.md):
/// - `read`: the last store read, reused by a pull that asks the same queue, offset and
///   number of messages through a filter that agrees (the same compiled filter, or both TAG
///   `*`), after its own access checks and filter;
/// - `answer`: the last response, reused (with the pull's own opaque) by a pull whose request
///   is the same in every field the answer depends on (same group, same header but the offset
///   it commits and its hold time, same encoding), as if both had been re-executed at once.
///
/// Only the last of each is kept (woken pulls of one queue come in runs), so the sharing is
/// bounded by one read and one response. A PULL_OFFSET_MOVED answer is never shared: each one
/// stores its own OffsetMovedEvent.
#[derive(Default)]
pub struct WokenShared {
    read: Option<SharedRead>,
    answer: Option<SharedAnswer>,
    /// Where the per-pull copies of a shared frame are cut from.
    frames: FrameChunks,
}

struct SharedAnswer {
    header: PullMessageRequestHeader,
    code: i32,
    version: i32,
    serialize_type: crate::remoting::command::SerializeType,
    form: SharedForm,
    /// What the pull found, for the metrics of every pull it answers.
    messages: u64,
    bytes: u64,
    /// Messages a SUCCESS answer serves, for the broker's get totals of every pull it answers.
    served_messages: u64,
}

/// Bodies up to this size are copied into each woken pull's own encoded frame; larger ones
/// are shared by reference (a cloned command, or file ranges).
pub const SHARED_FRAME_BODY_MAX_BYTES: usize = 8 * 1024;

/// How a shared answer is handed to each pull it answers.
enum SharedForm {
    /// The whole frame, encoded once; each pull gets a copy with its opaque.
    Frame(SharedFrame),
    /// A zero-copy answer: the head encoded once, the body's file ranges shared.
    File {
        head: SharedFrame,
        body: Vec<FileRange>,
    },
    /// A command cloned per pull (a body too large to copy per pull, or a head the shared
    /// frame cannot patch).
    Command {
        response: RemotingCommand,
        regions: Option<Vec<FileRegion>>,
    },
}

impl SharedForm {
    fn new(response: RemotingCommand, regions: Option<Vec<FileRegion>>) -> SharedForm {
        match &regions {
            Some(regions) => {
                let body_len_bytes: usize = regions.iter().map(|r| r.len_bytes).sum();
                let frame = file_frame(&response, regions);
                let head = SharedFrame::new(&response, Some(body_len_bytes));
                if let (Some(frame), Some(head)) = (frame, head) {
                    return SharedForm::File {
                        head,
                        body: frame.body,
                    };
                }
            }
            None if response.body.len() <= SHARED_FRAME_BODY_MAX_BYTES => {
                if let Some(frame) = SharedFrame::new(&response, None) {
                    return SharedForm::Frame(frame);
                }
            }
            None => {}
        }
        SharedForm::Command { response, regions }
    }

    /// The answer for the pull with `opaque`.
    fn outbound(
        &self,
        store: &MessageStore,
        opaque: i32,
        frames: &mut FrameChunks,
    ) -> Result<Outbound, BrokerError> {
        match self {
            SharedForm::Frame(frame) => Ok(Outbound::Encoded(frame.for_opaque_in(opaque, frames))),
            SharedForm::File { head, body } => Ok(Outbound::File(FileFrame {
                head: head.for_opaque_in(opaque, frames),
                body: body.clone(),
            })),
            SharedForm::Command { response, regions } => {
                let mut response = response.clone();
                response.opaque = opaque;
                Ok(match answer(store, response, regions.clone())? {
                    PullOutcome::RespondFile(file) => Outbound::File(file.frame),
                    PullOutcome::Respond(response) => Outbound::Command(response),
                    PullOutcome::Parked => unreachable!("an answer never parks"),
                })
            }
        }
    }
}

impl SharedAnswer {
    /// Whether this answer is the answer to `header` from `envelope`.
    fn answers(&self, header: &PullMessageRequestHeader, envelope: &RequestEnvelope) -> bool {
        let h = &self.header;
        self.code == envelope.code
            && self.version == envelope.version
            && self.serialize_type == envelope.serialize_type
            && h.queue_id == header.queue_id
            && h.queue_offset == header.queue_offset
            && h.max_msg_nums == header.max_msg_nums
            && h.sys_flag == header.sys_flag
            && h.sub_version == header.sub_version
            && h.max_msg_bytes == header.max_msg_bytes
            && h.request_source == header.request_source
            && h.topic == header.topic
            && h.consumer_group == header.consumer_group
            && h.subscription == header.subscription
            && h.expression_type == header.expression_type
            && h.proxy_froward_client_id == header.proxy_froward_client_id
    }
}

/// A woken pull's re-execution, sharing what it can with the others of its drain
/// ([`WokenShared`]); otherwise exactly [`execute`] with [`PullExecution::Woken`].
fn execute_woken_shared(
    ctrl: &BrokerController,
    header: &PullMessageRequestHeader,
    envelope: RequestEnvelope,
    shared: &mut WokenShared,
) -> Result<Outbound, BrokerError> {
    if let Some(kept) = shared
        .answer
        .as_ref()
        .filter(|a| a.answers(header, &envelope))
    {
        if let Some(metrics) = ctrl.metrics() {
            metrics.record_pull(&header.topic, kept.messages, kept.bytes);
        }
        if kept.served_messages > 0 {
            ctrl.stats.inc_get(&header.topic, kept.served_messages);
        }
        return kept
            .form
            .outbound(&ctrl.store, envelope.opaque, &mut shared.frames);
    }
    let looked = look_up_shared(ctrl, header, &envelope, true, Some(&mut shared.read))?;
    if looked.response.code == rc::PULL_OFFSET_MOVED {
        if !ctrl.is_slave() {
            store_offset_moved_event(ctrl, header, looked.next_begin_offset);
        }
        return SharedForm::new(looked.response, looked.regions).outbound(
            &ctrl.store,
            envelope.opaque,
            &mut shared.frames,
        );
    }
    let served_messages = if looked.response.code == rc::SUCCESS {
        looked.message_count as u64
    } else {
        0
    };
    if served_messages > 0 {
        ctrl.stats.inc_get(&header.topic, served_messages);
    }
    let Looked {
        response,
        regions,
        messages,
        bytes,
        ..
    } = looked;
    let kept = shared.answer.insert(SharedAnswer {
        header: header.clone(),
        code: envelope.code,
        version: envelope.version,
        serialize_type: envelope.serialize_type,
        form: SharedForm::new(response, regions),
        messages,
        bytes,
        served_messages,
    });
    kept.form
        .outbound(&ctrl.store, envelope.opaque, &mut shared.frames)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::broker::processor::pull::tests::{woken_envelope, woken_header};

    #[test]
    fn a_shared_answer_serves_only_the_same_request() {
        let kept = SharedAnswer {
            header: woken_header("g", 5),
            code: crate::remoting::codes::request_code::PULL_MESSAGE,
            version: 479,
            serialize_type: crate::remoting::command::SerializeType::Json,
            form: SharedForm::Command {
                response: RemotingCommand::request(0),
                regions: None,
            },
            messages: 1,
            bytes: 10,
            served_messages: 1,
        };
        // Another opaque, another committed offset, another hold time: the same answer.
        let mut same = woken_header("g", 5);
        same.commit_offset = 4;
        same.suspend_timeout_millis = 20_000;
        assert!(kept.answers(&same, &woken_envelope(99)));
        // Anything the answer depends on differs: not shared.
        assert!(!kept.answers(&woken_header("other", 5), &woken_envelope(99)));
        assert!(!kept.answers(&woken_header("g", 6), &woken_envelope(99)));
        let mut tagged = woken_header("g", 5);
        tagged.subscription = Some("TagA".to_string());
        assert!(!kept.answers(&tagged, &woken_envelope(99)));
        let mut lite = woken_envelope(99);
        lite.code = crate::remoting::codes::request_code::LITE_PULL_MESSAGE;
        assert!(!kept.answers(&same, &lite));
        let mut binary = woken_envelope(99);
        binary.serialize_type = crate::remoting::command::SerializeType::RocketMq;
        assert!(!kept.answers(&same, &binary));
    }
}
