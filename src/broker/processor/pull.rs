//! PULL_MESSAGE (11) and LITE_PULL_MESSAGE (361): Java `PullMessageProcessor` with
//! `DefaultPullMessageResultHandler`.
//!
//! Order of work, as in Java: broker permission → subscription group → topic → queue id →
//! subscription (from the header or the heartbeat) → filter → store lookup → status to response
//! code → commit of the consumer offset (first execution only, master only) → long polling
//! (park on PULL_NOT_FOUND). [`execute`] runs it, for a request as it arrives
//! ([`PullExecution::FirstTime`], from [`pull_message`]) and for a parked pull the pull-wake
//! service re-executes ([`PullExecution::Woken`]: no second park and no second commit, exactly
//! as Java's `executeRequestWhenWakeup` with `brokerAllowSuspend = false`).
//!
//! Transfer: whether a body goes by copy or zero-copy is decided in one place,
//! `look_up_messages` (the store asks `choose_zero_copy` once it planned the records); a
//! zero-copy answer is a [`PullOutcome::RespondFile`] value, which the caller queues on the
//! connection.

use std::sync::Arc;

use bytes::{Bytes, BytesMut};

use crate::broker::controller::BrokerController;
use crate::broker::error::{Access, BrokerError};
use crate::broker::longpoll::pull_request::{ParkedPullRequest, RequestEnvelope};
use crate::broker::longpoll::pull_request_hold_service::Suspension;
use crate::broker::subscription_group_manager::SubscriptionGroupConfig;
use crate::broker::topic_config_manager::OFFSET_MOVED_EVENT;
use crate::common::now_ms;
use crate::config::{TransferMode, TransferSection};
use crate::filter::{ExpressionMessageFilter, SubscriptionExpression};
use crate::net::{ConnectionSender, FileFrame, FileRange, Outbound, SendError};
use crate::remoting::body::perm;
use crate::remoting::codes::response_code as rc;
use crate::remoting::command::RemotingCommand;
use crate::remoting::frame::encode_frame_header;
use crate::remoting::headers::{PullMessageRequestHeader, PullMessageResponseHeader};
use crate::store::{
    FileRegion, GetMessageRequest, GetMessageResult, GetMessageStatus, MessageStore,
    MessageToStore, RegionShape,
};

use super::{respond, Handled, ProcessResult, RequestContext};

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

/// How a pull is executed.
#[derive(Debug, Clone, Copy)]
pub enum PullExecution<'a> {
    /// As the request arrives (Java `brokerAllowSuspend = true`): it may park, to be answered
    /// later through `sender`, and it commits the consumer offset it carries.
    FirstTime {
        sender: &'a ConnectionSender,
        /// False for a oneway request: its response is dropped, so its body is not located for
        /// a frame that is never sent.
        zero_copy_allowed: bool,
    },
    /// Re-executed after a wake-up: never parks, never commits again.
    Woken,
}

impl PullExecution<'_> {
    fn zero_copy_allowed(&self) -> bool {
        match self {
            PullExecution::FirstTime {
                zero_copy_allowed, ..
            } => *zero_copy_allowed,
            PullExecution::Woken => true,
        }
    }
}

/// What a pull led to.
#[derive(Debug)]
pub enum PullOutcome {
    /// Answer with this command; its body, if any, is in memory.
    Respond(RemotingCommand),
    /// Answer with a frame whose body the connection's writer splices from the CommitLog files.
    RespondFile(FileResponse),
    /// Parked in the hold table: answered later, through the connection's sender.
    Parked,
}

/// A response whose body is CommitLog file regions: the frame to queue, plus the bodiless
/// command and the regions it was made of, so it can still go by copy ([`read_body`]).
#[derive(Debug)]
pub struct FileResponse {
    pub frame: FileFrame,
    pub command: RemotingCommand,
    pub regions: Vec<FileRegion>,
}

/// PULL_MESSAGE / LITE_PULL_MESSAGE as it arrives. Never waits: the future is ready at its
/// first poll.
pub fn pull_message(cx: &RequestContext<'_>, request: &RemotingCommand) -> ProcessResult {
    let header = PullMessageRequestHeader::decode(request)?;
    let envelope = RequestEnvelope::of(request, cx.conn);
    let sender = cx.conn.sender();
    let execution = PullExecution::FirstTime {
        sender,
        zero_copy_allowed: !request.is_oneway(),
    };
    match execute(cx.ctrl, header, envelope, execution)? {
        PullOutcome::Respond(response) => respond(response),
        PullOutcome::RespondFile(file) => queue_file_response(&cx.ctrl.store, file, sender),
        PullOutcome::Parked => Ok(Handled::Parked),
    }
}

/// Queues a zero-copy response on the connection: the frame head (length, header), then the
/// regions, which the connection's writer splices from the CommitLog files. When the write
/// queue is full the response goes by copy instead, through the handler's path, which waits
/// for room.
fn queue_file_response(
    store: &MessageStore,
    file: FileResponse,
    sender: &ConnectionSender,
) -> ProcessResult {
    let FileResponse {
        frame,
        command,
        regions,
    } = file;
    match sender.send(Outbound::File(frame)) {
        Ok(()) => Ok(Handled::Queued),
        // The peer is gone: nothing to answer.
        Err(SendError::Closed(_)) => Ok(Handled::Queued),
        Err(SendError::Full(_)) => respond(read_body(store, command, &regions)?),
    }
}

/// The one pull entry: checks, store lookup, offset commit, long polling.
pub fn execute(
    ctrl: &BrokerController,
    header: PullMessageRequestHeader,
    envelope: RequestEnvelope,
    execution: PullExecution<'_>,
) -> Result<PullOutcome, BrokerError> {
    let looked = look_up(ctrl, &header, &envelope, execution.zero_copy_allowed())?;
    if let PullExecution::FirstTime { .. } = execution {
        // Java stores the offset whatever the pull found.
        commit_offset(ctrl, &header);
    }
    if looked.response.code == rc::PULL_OFFSET_MOVED && !ctrl.is_slave() {
        store_offset_moved_event(ctrl, &header, looked.next_begin_offset);
    }
    if looked.response.code == rc::SUCCESS {
        ctrl.stats
            .inc_get(&header.topic, looked.message_count as u64);
    }
    let Looked {
        response,
        filter,
        regions,
        ..
    } = looked;
    if let PullExecution::FirstTime { sender, .. } = execution {
        if response.code == rc::PULL_NOT_FOUND && header.sys_flag & pull_sys_flag::SUSPEND != 0 {
            let deadline_ms = now_ms() + hold_time_ms(ctrl, &header) as i64;
            let parked = ParkedPullRequest {
                header,
                envelope,
                filter,
                sender: sender.clone(),
                deadline_ms,
                permit: None,
            };
            match ctrl.pull_hold.suspend(parked) {
                Suspension::Parked => return Ok(PullOutcome::Parked),
                // Answered now rather than grow memory.
                Suspension::TableFull | Suspension::ConnectionFull => {}
            }
        }
    }
    answer(&ctrl.store, response, regions)
}

/// How long a pull may stay parked: its suspend timeout, capped, with long polling on; the
/// short-polling time with it off.
fn hold_time_ms(ctrl: &BrokerController, header: &PullMessageRequestHeader) -> u64 {
    let lp = &ctrl.config.longpoll;
    if lp.enabled {
        (header.suspend_timeout_millis.max(0) as u64).min(lp.suspend_timeout_max_ms)
    } else {
        lp.short_polling_time_ms
    }
}

/// Commits the offset the pull carries, when it asks to and this broker is the master.
fn commit_offset(ctrl: &BrokerController, header: &PullMessageRequestHeader) {
    if header.sys_flag & pull_sys_flag::COMMIT_OFFSET != 0 && !ctrl.is_slave() {
        ctrl.offsets.commit_offset(
            &header.consumer_group,
            &header.topic,
            header.queue_id,
            header.commit_offset,
        );
    }
}

/// The answer to a looked-up pull: the response as it is, or, with regions, a zero-copy
/// frame. A head that cannot be encoded goes by copy (the copy path's writer then answers
/// SYSTEM_ERROR, as for any unencodable frame).
pub(super) fn answer(
    store: &MessageStore,
    response: RemotingCommand,
    regions: Option<Vec<FileRegion>>,
) -> Result<PullOutcome, BrokerError> {
    let Some(regions) = regions else {
        return Ok(PullOutcome::Respond(response));
    };
    match file_frame(&response, &regions) {
        Some(frame) => Ok(PullOutcome::RespondFile(FileResponse {
            frame,
            command: response,
            regions,
        })),
        None => Ok(PullOutcome::Respond(read_body(store, response, &regions)?)),
    }
}

/// The zero-copy frame of a response whose body is `regions`, or None when its head cannot be
/// encoded.
pub(super) fn file_frame(response: &RemotingCommand, regions: &[FileRegion]) -> Option<FileFrame> {
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

/// The response with the regions' bytes read into its body (the copy fallback).
pub fn read_body(
    store: &MessageStore,
    mut response: RemotingCommand,
    regions: &[FileRegion],
) -> Result<RemotingCommand, BrokerError> {
    let mut body = BytesMut::new();
    store.read_regions(regions, &mut body)?;
    response.body = body.freeze();
    Ok(response)
}

pub(super) struct SharedRead {
    pub(super) topic: String,
    pub(super) queue_id: i32,
    pub(super) queue_offset: i64,
    pub(super) max_msg_nums: i32,
    pub(super) filter: Arc<ExpressionMessageFilter>,
    pub(super) result: GetMessageResult,
    pub(super) regions: Option<Vec<FileRegion>>,
}

impl SharedRead {
    pub(super) fn serves(
        &self,
        header: &PullMessageRequestHeader,
        filter: &Arc<ExpressionMessageFilter>,
    ) -> bool {
        self.queue_id == header.queue_id
            && self.queue_offset == header.queue_offset
            && self.max_msg_nums == header.max_msg_nums
            && self.topic == header.topic
            && filters_agree(&self.filter, filter)
    }
}

/// Two compiled filters that pass the same messages: the same one, or both TAG `*`.
pub(super) fn filters_agree(
    a: &Arc<ExpressionMessageFilter>,
    b: &Arc<ExpressionMessageFilter>,
) -> bool {
    let sub_all = |f: &ExpressionMessageFilter| matches!(f.expression(), SubscriptionExpression::Tag(tags) if tags.is_sub_all());
    Arc::ptr_eq(a, b) || (sub_all(a) && sub_all(b))
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

/// The result of the checks and the store lookup, before the offset commit and long polling.
pub(super) struct Looked {
    pub(super) response: RemotingCommand,
    pub(super) filter: Arc<ExpressionMessageFilter>,
    /// The body as file regions (zero-copy); `None`: the body, if any, is in `response`.
    pub(super) regions: Option<Vec<FileRegion>>,
    /// Where the consumer goes on from (also in the response header).
    pub(super) next_begin_offset: i64,
    /// Messages the answer carries (when it is SUCCESS).
    pub(super) message_count: usize,
    /// Messages and bytes found (0 unless FOUND), as the metrics count them.
    pub(super) messages: u64,
    pub(super) bytes: u64,
}

/// Java's checks in Java's order, then the store lookup.
fn look_up(
    ctrl: &BrokerController,
    header: &PullMessageRequestHeader,
    envelope: &RequestEnvelope,
    zero_copy_allowed: bool,
) -> Result<Looked, BrokerError> {
    look_up_shared(ctrl, header, envelope, zero_copy_allowed, None)
}

/// [`look_up`], reusing the store read in `shared_read` when it serves this pull (and keeping
/// this pull's read there otherwise).
pub(super) fn look_up_shared(
    ctrl: &BrokerController,
    header: &PullMessageRequestHeader,
    envelope: &RequestEnvelope,
    zero_copy_allowed: bool,
    shared_read: Option<&mut Option<SharedRead>>,
) -> Result<Looked, BrokerError> {
    let group = check_access(ctrl, header, envelope)?;
    let filter = subscription_filter(ctrl, header, group.consume_broadcast_enable)?;
    let owned;
    let (result, regions) = match shared_read {
        None => {
            owned = look_up_messages(ctrl, header, &filter, zero_copy_allowed)?;
            (&owned.0, owned.1.as_ref())
        }
        Some(slot) => {
            if !slot
                .as_ref()
                .is_some_and(|read| read.serves(header, &filter))
            {
                let (result, regions) = look_up_messages(ctrl, header, &filter, zero_copy_allowed)?;
                *slot = Some(SharedRead {
                    topic: header.topic.clone(),
                    queue_id: header.queue_id,
                    queue_offset: header.queue_offset,
                    max_msg_nums: header.max_msg_nums,
                    filter: filter.clone(),
                    result,
                    regions,
                });
            }
            let read = slot.as_ref().expect("just filled");
            (&read.result, read.regions.as_ref())
        }
    };
    let found = result.status == GetMessageStatus::Found;
    let (messages, bytes) = if found {
        (result.message_count as u64, result.buffer_total_size as u64)
    } else {
        (0, 0)
    };
    if let Some(metrics) = ctrl.metrics() {
        metrics.record_pull(&header.topic, messages, bytes);
    }
    let next_begin_offset = result.next_begin_offset;
    let message_count = result.message_count;
    let response = map_result(ctrl, header, envelope, &group, result);
    // Only a SUCCESS response carries a body.
    let regions = regions
        .filter(|regions| response.code == rc::SUCCESS && !regions.is_empty())
        .cloned();
    Ok(Looked {
        response,
        filter,
        regions,
        next_begin_offset,
        message_count,
        messages,
        bytes,
    })
}

/// Broker permission, subscription group, topic and queue id; the group's config.
fn check_access(
    ctrl: &BrokerController,
    header: &PullMessageRequestHeader,
    envelope: &RequestEnvelope,
) -> Result<Arc<SubscriptionGroupConfig>, BrokerError> {
    if ctrl.broker_permission() & perm::PERM_READ == 0 {
        return Err(BrokerError::BrokerForbidden {
            broker_addr: ctrl.broker_addr.clone(),
            access: Access::Pull,
        });
    }
    let group = ctrl
        .groups
        .find_or_auto_create(&header.consumer_group)?
        .ok_or_else(|| BrokerError::SubscriptionGroupNotExist {
            group: header.consumer_group.clone(),
        })?;
    if !group.consume_enable {
        return Err(BrokerError::GroupConsumeDisabled {
            group: header.consumer_group.clone(),
        });
    }
    let topic = ctrl
        .topics
        .select(&header.topic)
        .ok_or_else(|| BrokerError::TopicNotExist {
            topic: header.topic.clone(),
        })?;
    if topic.perm & perm::PERM_READ == 0 {
        return Err(BrokerError::TopicForbidden {
            topic: header.topic.clone(),
            access: Access::Pull,
        });
    }
    if header.queue_id < 0 || header.queue_id >= topic.read_queue_nums {
        return Err(BrokerError::PullQueueIdIllegal {
            queue_id: header.queue_id,
            topic: header.topic.clone(),
            read_queue_nums: topic.read_queue_nums,
            consumer: envelope.remote_addr,
        });
    }
    Ok(group)
}

/// The store lookup, and the one place the transfer is chosen: the body's file regions are
/// asked for only when the execution allows zero-copy, the mode is not `copy` and the filter
/// never reads records; the store then lets [`choose_zero_copy`] judge the planned shape.
/// Returns the result and, when zero-copy was chosen, the regions.
fn look_up_messages(
    ctrl: &BrokerController,
    header: &PullMessageRequestHeader,
    filter: &ExpressionMessageFilter,
    zero_copy_allowed: bool,
) -> Result<(GetMessageResult, Option<Vec<FileRegion>>), BrokerError> {
    let transfer = &ctrl.config.transfer;
    let regions_wanted = zero_copy_allowed
        && transfer.effective_mode() != TransferMode::Copy
        && !filter_reads_records(filter);
    let request = GetMessageRequest {
        group: &header.consumer_group,
        topic: &header.topic,
        queue_id: header.queue_id,
        queue_offset: header.queue_offset,
        max_msg_nums: header.max_msg_nums.max(1),
        filter,
    };
    if !regions_wanted {
        return Ok((ctrl.store.get_message(&request)?, None));
    }
    let located = ctrl.store.get_message_regions(
        &request,
        crate::store::PULL_MSG_SIZE_MAX_BYTES,
        &|shape| choose_zero_copy(transfer, shape),
    )?;
    Ok((located.result, located.regions))
}

/// The subscription of this pull, compiled: from the header when FLAG_SUBSCRIPTION is set,
/// else the one registered by heartbeat (Java's order of checks and codes).
fn subscription_filter(
    ctrl: &BrokerController,
    header: &PullMessageRequestHeader,
    consume_broadcast_enable: bool,
) -> Result<Arc<ExpressionMessageFilter>, BrokerError> {
    if header.sys_flag & pull_sys_flag::SUBSCRIPTION != 0 {
        let expression_type = match header.expression_type.as_deref() {
            None | Some("") => "TAG",
            Some(t) => t,
        };
        let sub_string = header.subscription.as_deref().unwrap_or_default();
        return compile_filter(
            ctrl,
            header,
            expression_type,
            sub_string,
            header.sub_version,
        );
    }
    // The subscription registered by heartbeat, read in place under the consumer table's read
    // lock: the common push-consumer pull copies nothing here.
    ctrl.consumers.with_group(&header.consumer_group, |group| {
        let Some(group) = group else {
            return Err(BrokerError::ConsumerGroupInfoNotExist {
                group: header.consumer_group.clone(),
            });
        };
        if !consume_broadcast_enable && group.message_model == "BROADCASTING" {
            return Err(BrokerError::BroadcastForbidden {
                group: header.consumer_group.clone(),
            });
        }
        let sub = group.subscriptions.get(&header.topic).ok_or_else(|| {
            BrokerError::SubscriptionNotExist {
                group: header.consumer_group.clone(),
                topic: header.topic.clone(),
            }
        })?;
        if sub.sub_version < header.sub_version {
            return Err(BrokerError::SubscriptionNotLatest {
                group: header.consumer_group.clone(),
                topic: header.topic.clone(),
            });
        }
        compile_filter(
            ctrl,
            header,
            sub.expression_type(),
            &sub.sub_string,
            sub.sub_version,
        )
    })
}

/// The compiled filter of a subscription (cached per subscription version).
fn compile_filter(
    ctrl: &BrokerController,
    header: &PullMessageRequestHeader,
    expression_type: &str,
    sub_string: &str,
    sub_version: i64,
) -> Result<Arc<ExpressionMessageFilter>, BrokerError> {
    if !expression_type.eq_ignore_ascii_case("TAG") && !ctrl.config.broker.property_filter_enabled {
        return Err(BrokerError::PropertyFilterDisabled);
    }
    ctrl.filters
        .get_or_compile(
            &header.consumer_group,
            &header.topic,
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
    header: &PullMessageRequestHeader,
    envelope: &RequestEnvelope,
    group: &SubscriptionGroupConfig,
    result: &GetMessageResult,
) -> RemotingCommand {
    let status = status_to_code(result.status, header.queue_offset);
    let role = RoleAnswer {
        is_slave: ctrl.is_slave(),
        slave_read_enabled: ctrl.config.broker.slave_read_enabled,
        offset_check_in_slave: ctrl.config.broker.offset_check_in_slave,
        master_online: ctrl.slave_sync.master_online(),
    }
    .decide(group, result, status);
    let next_begin_offset = if role.keep_requested_offset {
        header.queue_offset
    } else {
        result.next_begin_offset
    };
    let mut response = envelope.response(role.code, Some(status_name(result.status).to_string()));
    PullMessageResponseHeader {
        suggest_which_broker_id: role.suggest_which_broker_id,
        next_begin_offset,
        min_offset: result.min_offset_in_queue,
        max_offset: result.max_offset_in_queue,
        offset_delta: None,
        topic_sys_flag: None,
        group_sys_flag: None,
        forbidden_type: None,
    }
    .encode(&mut response);
    if role.code == rc::SUCCESS {
        response.body = result.buffer.clone();
    }
    response
}

/// What the broker's role makes of a looked-up pull (Java `PullMessageProcessor` and
/// `DefaultPullMessageResultHandler`, the role branches only).
#[derive(Debug, Clone, Copy)]
struct RoleAnswer {
    is_slave: bool,
    slave_read_enabled: bool,
    offset_check_in_slave: bool,
    /// On a slave: its master is registered (Java `minBrokerIdInGroup == MASTER_ID`).
    master_online: bool,
}

/// The response code, the broker the consumer should pull from next, and whether the
/// consumer must stay at the offset it asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct RoleDecision {
    code: i32,
    suggest_which_broker_id: i64,
    /// The answer carries no messages although the store found some: the consumer must ask
    /// again from the same offset (clients go on from `nextBeginOffset` after a retry).
    keep_requested_offset: bool,
}

impl RoleAnswer {
    fn decide(
        self,
        group: &SubscriptionGroupConfig,
        result: &GetMessageResult,
        code: i32,
    ) -> RoleDecision {
        let found = result.status == GetMessageStatus::Found;
        if self.is_slave && !self.slave_read_enabled {
            // A slave that may not serve reads (`slaveReadEnable` off) sends every consumer
            // to its master, where it asked to be.
            return RoleDecision {
                code: rc::PULL_RETRY_IMMEDIATELY,
                suggest_which_broker_id: MASTER_ID,
                keep_requested_offset: true,
            };
        }
        // Read split: a consumer whose backlog has left memory is sent to the group's
        // slow-consumer broker, any other to the group's broker.
        let mut suggest = if !self.slave_read_enabled {
            MASTER_ID
        } else if result.suggest_pulling_from_slave {
            group.which_broker_when_consume_slowly
        } else {
            group.broker_id
        };
        let mut code = code;
        // A slave's view of a queue may lag its master's: where it would move the consumer
        // or leave it waiting, it keeps the consumer where it asked to be (a filtered-out
        // range is still skipped).
        let keep = result.status != GetMessageStatus::NoMatchedMessage;
        let mut keep_requested_offset = false;
        if self.is_slave && !result.suggest_pulling_from_slave && self.master_online {
            // Caught up on a slave while the master is there: back to the master; a pull
            // with nothing to return goes there at once rather than wait here.
            suggest = MASTER_ID;
            if !found {
                code = rc::PULL_RETRY_IMMEDIATELY;
                keep_requested_offset = keep;
            }
        }
        if code == rc::PULL_OFFSET_MOVED && self.is_slave && !self.offset_check_in_slave {
            // `offsetCheckInSlave` off: a slave does not move a consumer; it sends it to the
            // group's broker to decide.
            suggest = group.broker_id;
            code = rc::PULL_RETRY_IMMEDIATELY;
            keep_requested_offset = true;
        }
        RoleDecision {
            code,
            suggest_which_broker_id: suggest,
            keep_requested_offset,
        }
    }
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

/// Java 4.9 `generateOffsetMovedEvent`: a JSON message in OFFSET_MOVED_EVENT, tags and keys =
/// the group, so operators see which consumer was moved and from where.
pub(super) fn store_offset_moved_event(
    ctrl: &BrokerController,
    header: &PullMessageRequestHeader,
    offset_new: i64,
) {
    let event = serde_json::json!({
        "consumerGroup": header.consumer_group,
        "messageQueue": {"brokerName": ctrl.config.broker.name, "queueId": header.queue_id, "topic": header.topic},
        "offsetRequest": header.queue_offset,
        "offsetNew": offset_new,
    });
    let properties = crate::store::format::encode_properties([
        ("TAGS", header.consumer_group.as_str()),
        ("KEYS", header.consumer_group.as_str()),
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
        tracing::warn!(error = %e, group = header.consumer_group, "storing the OffsetMovedEvent failed");
    }
}

#[cfg(test)]
pub(crate) mod tests {
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

    fn result(status: GetMessageStatus, from_slave: bool) -> GetMessageResult {
        let mut r = GetMessageResult::empty(status, 7);
        r.suggest_pulling_from_slave = from_slave;
        r
    }

    fn decide(role: RoleAnswer, status: GetMessageStatus, from_slave: bool) -> RoleDecision {
        let group = SubscriptionGroupConfig {
            which_broker_when_consume_slowly: 2,
            ..Default::default()
        };
        role.decide(
            &group,
            &result(status, from_slave),
            status_to_code(status, 5),
        )
    }

    const MASTER: RoleAnswer = RoleAnswer {
        is_slave: false,
        slave_read_enabled: true,
        offset_check_in_slave: false,
        master_online: false,
    };
    const SLAVE: RoleAnswer = RoleAnswer {
        is_slave: true,
        slave_read_enabled: true,
        offset_check_in_slave: false,
        master_online: true,
    };

    #[test]
    fn a_master_suggests_the_slow_consumer_broker_only_with_slave_reads_on() {
        let d = decide(MASTER, S::Found, true);
        assert_eq!((d.code, d.suggest_which_broker_id), (rc::SUCCESS, 2));
        let d = decide(MASTER, S::Found, false);
        assert_eq!(d.suggest_which_broker_id, 0, "the group's brokerId");
        let off = RoleAnswer {
            slave_read_enabled: false,
            ..MASTER
        };
        assert_eq!(
            decide(off, S::Found, true).suggest_which_broker_id,
            MASTER_ID
        );
        assert!(!decide(MASTER, S::Found, true).keep_requested_offset);
    }

    #[test]
    fn a_slave_without_slave_reads_sends_every_pull_to_the_master() {
        let off = RoleAnswer {
            slave_read_enabled: false,
            ..SLAVE
        };
        for status in [S::Found, S::OffsetFoundNull, S::OffsetOverflowBadly] {
            let d = decide(off, status, true);
            assert_eq!(d.code, rc::PULL_RETRY_IMMEDIATELY, "{status:?}");
            assert_eq!(d.suggest_which_broker_id, MASTER_ID);
            assert!(d.keep_requested_offset);
        }
    }

    pub(crate) fn woken_header(group: &str, offset: i64) -> PullMessageRequestHeader {
        PullMessageRequestHeader {
            consumer_group: group.to_string(),
            topic: "T".to_string(),
            queue_id: 0,
            queue_offset: offset,
            max_msg_nums: 32,
            sys_flag: pull_sys_flag::SUSPEND | pull_sys_flag::SUBSCRIPTION,
            commit_offset: 0,
            suspend_timeout_millis: 15_000,
            subscription: Some("*".to_string()),
            sub_version: 0,
            expression_type: Some("TAG".to_string()),
            max_msg_bytes: None,
            request_source: None,
            proxy_froward_client_id: None,
        }
    }

    pub(crate) fn woken_envelope(opaque: i32) -> RequestEnvelope {
        let addr = "127.0.0.1:1".parse().unwrap();
        RequestEnvelope {
            code: crate::remoting::codes::request_code::PULL_MESSAGE,
            opaque,
            version: 479,
            serialize_type: crate::remoting::command::SerializeType::Json,
            remote_addr: addr,
            connection_id: 1,
        }
    }

    #[test]
    fn a_slave_serves_a_slow_consumer_and_sends_a_caught_up_one_back() {
        // Behind: served here, told to stay on the slow-consumer broker.
        let d = decide(SLAVE, S::Found, true);
        assert_eq!((d.code, d.suggest_which_broker_id), (rc::SUCCESS, 2));
        // Caught up, messages found: served, told to go back to the master.
        let d = decide(SLAVE, S::Found, false);
        assert_eq!(
            (d.code, d.suggest_which_broker_id),
            (rc::SUCCESS, MASTER_ID)
        );
        // Caught up, nothing new: retry on the master at once, from the same offset.
        let d = decide(SLAVE, S::OffsetOverflowOne, false);
        assert_eq!(d.code, rc::PULL_RETRY_IMMEDIATELY);
        assert_eq!(d.suggest_which_broker_id, MASTER_ID);
        assert!(d.keep_requested_offset);
        // Master away: the slave answers as a master would (long polling included).
        let alone = RoleAnswer {
            master_online: false,
            ..SLAVE
        };
        let d = decide(alone, S::OffsetOverflowOne, false);
        assert_eq!(d.code, rc::PULL_NOT_FOUND);
        assert!(!d.keep_requested_offset);
    }

    #[test]
    fn offset_moved_on_a_slave_follows_offset_check_in_slave() {
        let alone = RoleAnswer {
            master_online: false,
            ..SLAVE
        };
        let d = decide(alone, S::OffsetTooSmall, false);
        assert_eq!(d.code, rc::PULL_RETRY_IMMEDIATELY);
        assert_eq!(d.suggest_which_broker_id, 0, "the group's brokerId");
        assert!(d.keep_requested_offset);
        let checked = RoleAnswer {
            offset_check_in_slave: true,
            ..alone
        };
        let d = decide(checked, S::OffsetTooSmall, false);
        assert_eq!(d.code, rc::PULL_OFFSET_MOVED);
        assert!(!d.keep_requested_offset);
        // On a master the flag changes nothing.
        assert_eq!(
            decide(MASTER, S::OffsetTooSmall, false).code,
            rc::PULL_OFFSET_MOVED
        );
    }

    #[test]
    fn store_reads_are_shared_only_between_filters_that_agree() {
        let all_a = Arc::new(ExpressionMessageFilter::new("TAG", "*").unwrap());
        let all_b = Arc::new(ExpressionMessageFilter::new("TAG", "*").unwrap());
        let tag_a = Arc::new(ExpressionMessageFilter::new("TAG", "TagA").unwrap());
        let tag_a2 = Arc::new(ExpressionMessageFilter::new("TAG", "TagA").unwrap());
        assert!(
            filters_agree(&all_a, &all_b),
            "two TAG * filters pass the same messages"
        );
        assert!(filters_agree(&tag_a, &tag_a), "the same compiled filter");
        assert!(!filters_agree(&all_a, &tag_a));
        assert!(
            !filters_agree(&tag_a, &tag_a2),
            "two compilations are not assumed equal"
        );
        let read = SharedRead {
            topic: "T".to_string(),
            queue_id: 0,
            queue_offset: 5,
            max_msg_nums: 32,
            filter: all_a.clone(),
            result: GetMessageResult::empty(GetMessageStatus::Found, 6),
            regions: None,
        };
        assert!(read.serves(&woken_header("other group", 5), &all_b));
        assert!(!read.serves(&woken_header("g", 6), &all_b));
        assert!(!read.serves(&woken_header("g", 5), &tag_a));
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
