//! PULL_MESSAGE (11) and LITE_PULL_MESSAGE (361): Java `PullMessageProcessor` with
//! `DefaultPullMessageResultHandler`.
//!
//! Order of work, as in Java: broker permission → subscription group → topic → queue id →
//! subscription (from the header or the heartbeat) → filter → store lookup → status to response
//! code → long polling (park on PULL_NOT_FOUND) → commit of the consumer offset (first
//! execution only, master only). A parked pull is re-executed by the pull-wake service with
//! `broker_allow_suspend = false`: no second park and no second commit, exactly as Java's
//! `executeRequestWhenWakeup`.

use std::net::SocketAddr;
use std::sync::Arc;

use bytes::{Bytes, BytesMut};

use crate::broker::controller::BrokerController;
use crate::broker::longpoll::pull_request::{ParkedPullRequest, RequestEnvelope};
use crate::broker::longpoll::pull_request_hold_service::{
    PullRequestHoldService, PullWakeHost, Suspension,
};
use crate::broker::topic_config_manager::OFFSET_MOVED_EVENT;
use crate::config::{TransferMode, TransferSection};
use crate::filter::{ExpressionMessageFilter, SubscriptionExpression};
use crate::net::{ConnectionSender, FileFrame, FileRange, Outbound, SendError};
use crate::remoting::body::perm;
use crate::remoting::codes::response_code as rc;
use crate::remoting::command::RemotingCommand;
use crate::remoting::frame::encode_frame_header;
use crate::remoting::headers::{PullMessageRequestHeader, PullMessageResponseHeader};
use crate::store::{FileRegion, GetMessageResult, GetMessageStatus, MessageToStore, RegionShape};

use crate::broker::error::{Access, BrokerError};
use crate::common::now_ms;

/// PullSysFlag bits (Java `PullSysFlag`).
pub mod pull_sys_flag {
    pub const COMMIT_OFFSET: i32 = 0x1;
    pub const SUSPEND: i32 = 0x2;
    pub const SUBSCRIPTION: i32 = 0x4;
    pub const CLASS_FILTER: i32 = 0x8;
    pub const LITE_PULL_MESSAGE: i32 = 0x10;
}

/// Java `MixAll.MASTER_ID`.
pub const MASTER_ID: i64 = 0;

/// What a pull led to.
#[derive(Debug)]
pub enum PullOutcome {
    /// Answer now.
    Respond(RemotingCommand),
    /// Nothing to answer now: the pull is parked in the hold table (answered later through the
    /// connection's sender), or its zero-copy response is already queued on the connection.
    Parked,
}

/// What the pull proper led to, before the response leaves: a zero-copy response carries the
/// file regions of its body besides the (bodiless) command.
enum Answer {
    Respond(RemotingCommand, Option<Vec<FileRegion>>),
    Parked,
}

/// Handles a PULL_MESSAGE / LITE_PULL_MESSAGE request as it arrives.
pub fn process_request(
    ctrl: &BrokerController,
    request: &RemotingCommand,
    remote_addr: SocketAddr,
    sender: &ConnectionSender,
) -> PullOutcome {
    let envelope = RequestEnvelope::of(request, remote_addr);
    let header = match PullMessageRequestHeader::decode(request) {
        Ok(h) => h,
        Err(e) => return PullOutcome::Respond(BrokerError::from(e).into_response(request)),
    };
    // A zero-copy response is queued on the connection here, so only requests that are
    // answered (not oneway) can have one.
    let zero_copy = !request.is_oneway();
    match process_inner(ctrl, header, envelope, Some(sender), true, zero_copy) {
        Answer::Parked => PullOutcome::Parked,
        Answer::Respond(response, None) => PullOutcome::Respond(response),
        Answer::Respond(response, Some(regions)) => send_zero_copy(ctrl, response, regions, sender),
    }
}

/// The pull proper. `sender` is None when the pull cannot be parked; with `zero_copy_allowed`
/// the transfer mode may answer with the body's file regions instead of its bytes.
fn process_inner(
    ctrl: &BrokerController,
    header: PullMessageRequestHeader,
    envelope: RequestEnvelope,
    sender: Option<&ConnectionSender>,
    broker_allow_suspend: bool,
    zero_copy_allowed: bool,
) -> Answer {
    match pull(ctrl, &header, &envelope, zero_copy_allowed) {
        Err(e) => Answer::Respond(
            envelope.response(e.response_code(), Some(e.to_string())),
            None,
        ),
        Ok(done) => finish(ctrl, header, envelope, sender, broker_allow_suspend, done),
    }
}

/// Queues a zero-copy response: the frame head (length, header) followed by the regions, which
/// the connection's writer splices from the CommitLog files. Falls back to reading the regions
/// into the response (copy) when the head cannot be encoded or the write queue is full.
fn send_zero_copy(
    ctrl: &BrokerController,
    response: RemotingCommand,
    regions: Vec<FileRegion>,
    sender: &ConnectionSender,
) -> PullOutcome {
    let frame = match file_frame(&response, &regions) {
        Some(frame) => frame,
        None => return copy_fallback(ctrl, response, &regions),
    };
    match sender.send(Outbound::File(frame)) {
        Ok(()) => PullOutcome::Parked,
        // The peer is gone: nothing to answer.
        Err(SendError::Closed(_)) => PullOutcome::Parked,
        // The peer reads slowly: answer through the handler's path, which waits for room.
        Err(SendError::Full(_)) => copy_fallback(ctrl, response, &regions),
    }
}

/// The zero-copy frame of a response whose body is `regions`, or None when its head cannot be
/// encoded (the copy path's writer then answers SYSTEM_ERROR, as for any unencodable frame).
fn file_frame(response: &RemotingCommand, regions: &[FileRegion]) -> Option<FileFrame> {
    let body_len_bytes: usize = regions.iter().map(|r| r.len_bytes).sum();
    let mut head = BytesMut::new();
    if let Err(e) = encode_frame_header(response, body_len_bytes, &mut head) {
        tracing::debug!(error = %e, "zero-copy response head not encodable; using copy");
        return None;
    }
    Some(FileFrame {
        head: head.freeze(),
        body: regions
            .iter()
            .map(|r| FileRange {
                file: r.file_handle(),
                offset_bytes: r.offset_bytes,
                len_bytes: r.len_bytes,
            })
            .collect(),
    })
}

/// Re-executes a pull woken from the hold table (Java `executeRequestWhenWakeup`: no second
/// park, no second offset commit) and returns what to queue on its connection: the response, or
/// a zero-copy frame when the transfer mode picks zero-copy for it, as for a pull answered at
/// once. None only if the pull parked, which a re-execution never does.
pub fn process_woken(
    ctrl: &BrokerController,
    header: PullMessageRequestHeader,
    envelope: RequestEnvelope,
) -> Option<Outbound> {
    match process_inner(ctrl, header, envelope, None, false, true) {
        Answer::Parked => None,
        Answer::Respond(response, None) => Some(Outbound::Command(response)),
        Answer::Respond(response, Some(regions)) => match file_frame(&response, &regions) {
            Some(frame) => Some(Outbound::File(frame)),
            None => match copy_fallback(ctrl, response, &regions) {
                PullOutcome::Respond(r) => Some(Outbound::Command(r)),
                PullOutcome::Parked => None,
            },
        },
    }
}

/// The response with the regions' bytes read into its body.
fn copy_fallback(
    ctrl: &BrokerController,
    mut response: RemotingCommand,
    regions: &[FileRegion],
) -> PullOutcome {
    let mut body = BytesMut::new();
    match ctrl.store.read_regions(regions, &mut body) {
        Ok(()) => {
            response.body = body.freeze();
            PullOutcome::Respond(response)
        }
        Err(e) => {
            let e = BrokerError::Store(e);
            let mut error =
                RemotingCommand::response_to(&response, e.response_code(), Some(e.to_string()));
            error.serialize_type = response.serialize_type;
            PullOutcome::Respond(error)
        }
    }
}

/// Whether a pull of this shape goes zero-copy (the store asks once it planned the records).
fn choose_zero_copy(transfer: &TransferSection, shape: RegionShape) -> bool {
    match transfer.effective_mode() {
        TransferMode::Copy => false,
        TransferMode::ZeroCopy => true,
        TransferMode::Auto => {
            let per_region = shape.bytes / shape.regions.max(1);
            let per_message = shape.bytes / shape.messages.max(1);
            per_region as u64 >= transfer.auto_zerocopy_min_range_bytes
                && per_message as u64 >= transfer.auto_zerocopy_min_message_bytes
        }
    }
}

/// Layer two of the filter needs the record bytes unless it is a TAG `*` subscription; such
/// pulls are answered by copy (see docs/ARCHITECTURE.md, "Pull response transfer").
fn filter_reads_records(filter: &ExpressionMessageFilter) -> bool {
    !matches!(filter.expression(), SubscriptionExpression::Tag(tags) if tags.is_sub_all())
}

/// The result of the checks and the store lookup, before long polling and offset commit.
struct Looked {
    response: RemotingCommand,
    filter: Arc<ExpressionMessageFilter>,
    /// The body as file regions (zero-copy); `None`: the body is in `response`.
    regions: Option<Vec<FileRegion>>,
}

fn pull(
    ctrl: &BrokerController,
    h: &PullMessageRequestHeader,
    envelope: &RequestEnvelope,
    zero_copy_allowed: bool,
) -> Result<Looked, BrokerError> {
    if ctrl.broker_permission() & perm::PERM_READ == 0 {
        return Err(BrokerError::BrokerForbidden {
            broker_addr: ctrl.broker_addr.clone(),
            access: Access::Pull,
        });
    }
    let group = ctrl
        .groups
        .find_or_auto_create(&h.consumer_group)?
        .ok_or_else(|| BrokerError::SubscriptionGroupNotExist {
            group: h.consumer_group.clone(),
        })?;
    if !group.consume_enable {
        return Err(BrokerError::GroupConsumeDisabled {
            group: h.consumer_group.clone(),
        });
    }
    let topic = ctrl
        .topics
        .select(&h.topic)
        .ok_or_else(|| BrokerError::TopicNotExist {
            topic: h.topic.clone(),
        })?;
    if topic.perm & perm::PERM_READ == 0 {
        return Err(BrokerError::TopicForbidden {
            topic: h.topic.clone(),
            access: Access::Pull,
        });
    }
    if h.queue_id < 0 || h.queue_id >= topic.read_queue_nums {
        return Err(BrokerError::PullQueueIdIllegal {
            queue_id: h.queue_id,
            topic: h.topic.clone(),
            read_queue_nums: topic.read_queue_nums,
            consumer: envelope.remote_addr,
        });
    }
    let filter = subscription_filter(ctrl, h, group.consume_broadcast_enable)?;
    let transfer = &ctrl.config.transfer;
    let zero_copy_possible = zero_copy_allowed
        && transfer.effective_mode() != TransferMode::Copy
        && !filter_reads_records(&filter);
    if !zero_copy_possible {
        let result = ctrl.store.get_message(
            &h.consumer_group,
            &h.topic,
            h.queue_id,
            h.queue_offset,
            h.max_msg_nums.max(1),
            filter.as_ref(),
        )?;
        let response = map_result(ctrl, h, envelope, &group, result);
        return Ok(Looked {
            response,
            filter,
            regions: None,
        });
    }
    let located = ctrl.store.get_message_regions(
        &h.consumer_group,
        &h.topic,
        h.queue_id,
        h.queue_offset,
        h.max_msg_nums.max(1),
        crate::store::MAX_PULL_MSG_SIZE_BYTES,
        filter.as_ref(),
        &|shape| choose_zero_copy(transfer, shape),
    )?;
    let response = map_result(ctrl, h, envelope, &group, located.result);
    // Only a SUCCESS response carries a body.
    let regions = located
        .regions
        .filter(|regions| response.code == rc::SUCCESS && !regions.is_empty());
    Ok(Looked {
        response,
        filter,
        regions,
    })
}

/// The subscription of this pull, compiled: from the header when FLAG_SUBSCRIPTION is set,
/// else the one registered by heartbeat (Java's order of checks and codes).
fn subscription_filter(
    ctrl: &BrokerController,
    h: &PullMessageRequestHeader,
    consume_broadcast_enable: bool,
) -> Result<Arc<ExpressionMessageFilter>, BrokerError> {
    if h.sys_flag & pull_sys_flag::SUBSCRIPTION != 0 {
        let expression_type = match h.expression_type.as_deref() {
            None | Some("") => "TAG",
            Some(t) => t,
        };
        let sub_string = h.subscription.as_deref().unwrap_or_default();
        return compile_filter(ctrl, h, expression_type, sub_string, h.sub_version);
    }
    // The subscription registered by heartbeat, read in place under the consumer table's read
    // lock: the common push-consumer pull copies nothing here.
    ctrl.consumers.with_group(&h.consumer_group, |group| {
        let Some(group) = group else {
            return Err(BrokerError::ConsumerGroupInfoNotExist {
                group: h.consumer_group.clone(),
            });
        };
        if !consume_broadcast_enable && group.message_model == "BROADCASTING" {
            return Err(BrokerError::BroadcastForbidden {
                group: h.consumer_group.clone(),
            });
        }
        let sub =
            group
                .subscriptions
                .get(&h.topic)
                .ok_or_else(|| BrokerError::SubscriptionNotExist {
                    group: h.consumer_group.clone(),
                    topic: h.topic.clone(),
                })?;
        if sub.sub_version < h.sub_version {
            return Err(BrokerError::SubscriptionNotLatest {
                group: h.consumer_group.clone(),
                topic: h.topic.clone(),
            });
        }
        compile_filter(
            ctrl,
            h,
            sub.expression_type(),
            &sub.sub_string,
            sub.sub_version,
        )
    })
}

/// The compiled filter of a subscription (cached per subscription version).
fn compile_filter(
    ctrl: &BrokerController,
    h: &PullMessageRequestHeader,
    expression_type: &str,
    sub_string: &str,
    sub_version: i64,
) -> Result<Arc<ExpressionMessageFilter>, BrokerError> {
    if !expression_type.eq_ignore_ascii_case("TAG") && !ctrl.config.broker.property_filter_enabled {
        return Err(BrokerError::PropertyFilterDisabled);
    }
    ctrl.filters
        .get_or_compile(
            &h.consumer_group,
            &h.topic,
            expression_type,
            sub_string,
            sub_version,
        )
        .map_err(|source| BrokerError::SubscriptionParse {
            subscription: sub_string.to_string(),
            source,
        })
}

/// GetMessageStatus → response code and header (Java `DefaultPullMessageResultHandler`), and the suggested broker.
fn map_result(
    ctrl: &BrokerController,
    h: &PullMessageRequestHeader,
    envelope: &RequestEnvelope,
    group: &crate::broker::subscription_group_manager::SubscriptionGroupConfig,
    result: GetMessageResult,
) -> RemotingCommand {
    let code = status_to_code(result.status, h.queue_offset);
    let mut suggest = if ctrl.config.broker.slave_read_enabled {
        if result.suggest_pulling_from_slave {
            group.which_broker_when_consume_slowly
        } else {
            group.broker_id
        }
    } else {
        MASTER_ID
    };
    let mut code = code;
    if code == rc::PULL_OFFSET_MOVED && ctrl.is_slave() && !ctrl.config.broker.offset_check_in_slave
    {
        // A slave does not move a consumer; it sends it back to the master to decide.
        suggest = group.broker_id;
        code = rc::PULL_RETRY_IMMEDIATELY;
    }
    let mut response = envelope.response(code, Some(status_name(result.status).to_string()));
    PullMessageResponseHeader {
        suggest_which_broker_id: suggest,
        next_begin_offset: result.next_begin_offset,
        min_offset: result.min_offset,
        max_offset: result.max_offset,
        offset_delta: None,
        topic_sys_flag: None,
        group_sys_flag: None,
        forbidden_type: None,
    }
    .encode(&mut response);
    if code == rc::SUCCESS {
        response.body = result.buffer;
    }
    response
}

/// Java's status → response code mapping (`DefaultPullMessageResultHandler`).
pub fn status_to_code(status: GetMessageStatus, requested_offset: i64) -> i32 {
    use GetMessageStatus as S;
    match status {
        S::Found => rc::SUCCESS,
        S::MessageWasRemoving | S::NoMatchedMessage => rc::PULL_RETRY_IMMEDIATELY,
        S::NoMatchedLogicQueue | S::NoMessageInQueue => {
            if requested_offset != 0 {
                rc::PULL_OFFSET_MOVED
            } else {
                rc::PULL_NOT_FOUND
            }
        }
        S::OffsetFoundNull | S::OffsetOverflowOne => rc::PULL_NOT_FOUND,
        S::OffsetOverflowBadly | S::OffsetTooSmall => rc::PULL_OFFSET_MOVED,
    }
}

/// Java `GetMessageStatus.name()`, carried as the response remark.
pub fn status_name(status: GetMessageStatus) -> &'static str {
    use GetMessageStatus as S;
    match status {
        S::Found => "FOUND",
        S::NoMatchedMessage => "NO_MATCHED_MESSAGE",
        S::MessageWasRemoving => "MESSAGE_WAS_REMOVING",
        S::OffsetFoundNull => "OFFSET_FOUND_NULL",
        S::OffsetOverflowBadly => "OFFSET_OVERFLOW_BADLY",
        S::OffsetOverflowOne => "OFFSET_OVERFLOW_ONE",
        S::OffsetTooSmall => "OFFSET_TOO_SMALL",
        S::NoMatchedLogicQueue => "NO_MATCHED_LOGIC_QUEUE",
        S::NoMessageInQueue => "NO_MESSAGE_IN_QUEUE",
    }
}

/// Long polling, offset-moved events and the offset commit.
fn finish(
    ctrl: &BrokerController,
    header: PullMessageRequestHeader,
    envelope: RequestEnvelope,
    sender: Option<&ConnectionSender>,
    broker_allow_suspend: bool,
    looked: Looked,
) -> Answer {
    let Looked {
        response,
        filter,
        regions,
    } = looked;
    let code = response.code;
    // Commit first: Java stores the offset whatever the pull found (first execution only).
    let commit = broker_allow_suspend
        && header.sys_flag & pull_sys_flag::COMMIT_OFFSET != 0
        && !ctrl.is_slave();
    if commit {
        ctrl.offsets.commit_offset(
            &header.consumer_group,
            &header.topic,
            header.queue_id,
            header.commit_offset,
        );
    }
    if code == rc::PULL_OFFSET_MOVED && !ctrl.is_slave() {
        let next = response
            .ext_opt_str("nextBeginOffset")
            .and_then(|v| v.parse().ok())
            .unwrap_or(0);
        store_offset_moved_event(ctrl, &header, next);
    }
    if code != rc::PULL_NOT_FOUND
        || !broker_allow_suspend
        || header.sys_flag & pull_sys_flag::SUSPEND == 0
    {
        return Answer::Respond(response, regions);
    }
    let Some(sender) = sender else {
        return Answer::Respond(response, regions);
    };
    let lp = &ctrl.config.longpoll;
    let hold_ms = if lp.enabled {
        (header.suspend_timeout_millis.max(0) as u64).min(lp.suspend_timeout_max_ms)
    } else {
        lp.short_polling_time_ms
    };
    let parked = ParkedPullRequest {
        header,
        envelope,
        filter,
        sender: sender.clone(),
        deadline_ms: now_ms() + hold_ms as i64,
    };
    match ctrl.pull_hold.suspend(parked) {
        Suspension::Parked => Answer::Parked,
        Suspension::TableFull => Answer::Respond(response, regions),
    }
}

/// How the wake threads re-execute a woken pull on this broker.
impl PullWakeHost for BrokerController {
    fn pull_hold(&self) -> &PullRequestHoldService {
        &self.pull_hold
    }

    fn execute_woken(
        &self,
        header: PullMessageRequestHeader,
        envelope: RequestEnvelope,
    ) -> Option<Outbound> {
        process_woken(self, header, envelope)
    }
}

/// Java 4.9 `generateOffsetMovedEvent`: a JSON message in OFFSET_MOVED_EVENT, tags and keys =
/// the group, so operators see which consumer was moved and from where.
fn store_offset_moved_event(
    ctrl: &BrokerController,
    h: &PullMessageRequestHeader,
    offset_new: i64,
) {
    let event = serde_json::json!({
        "consumerGroup": h.consumer_group,
        "messageQueue": {"brokerName": ctrl.config.broker.name, "queueId": h.queue_id, "topic": h.topic},
        "offsetRequest": h.queue_offset,
        "offsetNew": offset_new,
    });
    let properties = crate::store::format::encode_properties([
        ("TAGS", h.consumer_group.as_str()),
        ("KEYS", h.consumer_group.as_str()),
    ]);
    let msg = MessageToStore {
        topic: OFFSET_MOVED_EVENT.to_string(),
        queue_id: 0,
        flag: 0,
        body: Bytes::from(event.to_string()),
        properties,
        sys_flag: 0,
        born_timestamp_ms: now_ms(),
        born_host: ctrl.store_host,
        reconsume_times: 0,
        prepared_transaction_offset: 0,
    };
    if let Err(e) = ctrl.store.put_message(&msg) {
        tracing::warn!(error = %e, group = h.consumer_group, "storing the OffsetMovedEvent failed");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use GetMessageStatus as S;

    fn transfer(mode: TransferMode) -> TransferSection {
        TransferSection {
            mode,
            msg_by_heap: None,
            auto_zerocopy_min_range_bytes: 64 * 1024,
            auto_zerocopy_min_message_bytes: 4 * 1024,
        }
    }

    fn shape(regions: usize, messages: usize, bytes: usize) -> RegionShape {
        RegionShape {
            regions,
            bytes,
            messages,
        }
    }

    #[test]
    fn auto_goes_zero_copy_only_above_both_thresholds() {
        let auto = transfer(TransferMode::Auto);
        // 32 contiguous 4 KiB records: one 128 KiB range.
        assert!(choose_zero_copy(&auto, shape(1, 32, 32 * 4200)));
        // 32 separate 4 KiB records: ranges too short.
        assert!(!choose_zero_copy(&auto, shape(32, 32, 32 * 4200)));
        // One contiguous range of small records: messages too small.
        assert!(!choose_zero_copy(&auto, shape(1, 32, 32 * 300)));
        // One big record.
        assert!(choose_zero_copy(&auto, shape(1, 1, 1 << 20)));
        assert!(choose_zero_copy(
            &transfer(TransferMode::ZeroCopy),
            shape(32, 32, 32 * 300)
        ));
        assert!(!choose_zero_copy(
            &transfer(TransferMode::Copy),
            shape(1, 1, 1 << 20)
        ));
        let mut by_heap = transfer(TransferMode::Auto);
        by_heap.msg_by_heap = Some(true);
        assert!(!choose_zero_copy(&by_heap, shape(1, 1, 1 << 20)));
    }

    /// The default thresholds pick the mode that used the less broker CPU per GiB at each
    /// measured catch-up point (docs/BENCHMARKS.md). Records are the body plus ~200 bytes of
    /// header, topic and properties; a pull holds at most 32 records and 256 KiB.
    #[test]
    fn default_auto_picks_the_measured_winner() {
        let auto = crate::config::Config::default().transfer;
        assert_eq!(auto.effective_mode(), TransferMode::Auto);
        let pull = |body: usize, contiguous: bool| {
            let record = body + 200;
            let messages = (256 * 1024 / record).clamp(1, 32);
            let regions = if contiguous { 1 } else { messages };
            choose_zero_copy(&auto, shape(regions, messages, messages * record))
        };
        for (body, contiguous, zero_copy_won) in [
            (128, true, false),
            (4096, true, false),
            (8192, true, true),
            (65536, true, true),
            (1 << 20, true, true),
            (128, false, false),
            (4096, false, false),
            (8192, false, false),
            (16384, false, false),
            (32768, false, true),
            (65536, false, true),
            (1 << 20, false, true),
        ] {
            assert_eq!(
                pull(body, contiguous),
                zero_copy_won,
                "body {body} contiguous {contiguous}"
            );
        }
    }

    #[test]
    fn only_subscriptions_that_never_read_records_can_go_zero_copy() {
        let all = ExpressionMessageFilter::new("TAG", "*").unwrap();
        let tags = ExpressionMessageFilter::new("TAG", "TagA").unwrap();
        let sql = ExpressionMessageFilter::new("SQL92", "a > 1").unwrap();
        assert!(!filter_reads_records(&all));
        assert!(filter_reads_records(&tags));
        assert!(filter_reads_records(&sql));
    }

    #[test]
    fn status_mapping_matches_java() {
        assert_eq!(status_to_code(S::Found, 5), rc::SUCCESS);
        assert_eq!(
            status_to_code(S::NoMatchedMessage, 5),
            rc::PULL_RETRY_IMMEDIATELY
        );
        assert_eq!(
            status_to_code(S::MessageWasRemoving, 5),
            rc::PULL_RETRY_IMMEDIATELY
        );
        assert_eq!(
            status_to_code(S::NoMatchedLogicQueue, 0),
            rc::PULL_NOT_FOUND
        );
        assert_eq!(
            status_to_code(S::NoMatchedLogicQueue, 3),
            rc::PULL_OFFSET_MOVED
        );
        assert_eq!(status_to_code(S::NoMessageInQueue, 0), rc::PULL_NOT_FOUND);
        assert_eq!(
            status_to_code(S::NoMessageInQueue, 1),
            rc::PULL_OFFSET_MOVED
        );
        assert_eq!(status_to_code(S::OffsetFoundNull, 1), rc::PULL_NOT_FOUND);
        assert_eq!(status_to_code(S::OffsetOverflowOne, 1), rc::PULL_NOT_FOUND);
        assert_eq!(
            status_to_code(S::OffsetOverflowBadly, 1),
            rc::PULL_OFFSET_MOVED
        );
        assert_eq!(status_to_code(S::OffsetTooSmall, 1), rc::PULL_OFFSET_MOVED);
        assert_eq!(status_name(S::OffsetOverflowOne), "OFFSET_OVERFLOW_ONE");
    }
}
