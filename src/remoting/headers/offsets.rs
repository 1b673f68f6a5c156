//! Offsets (Java `QueryConsumerOffsetRequestHeader`, `UpdateConsumerOffsetRequestHeader` and the
//! max/min/time lookups).

use super::field::HeaderField;
use crate::remoting::command::RemotingCommand;
use crate::remoting::error::HeaderError;

header! {
    /// `QueryConsumerOffsetRequestHeader` (14).
    pub struct QueryConsumerOffsetRequestHeader {
        consumer_group: String = "consumerGroup";
        topic: String = "topic";
        queue_id: i32 = "queueId";
        /// `None` behaves as true in the Java broker (only an explicit false disables it).
        set_zero_if_not_found: Option<bool> = "setZeroIfNotFound";
    }
}

header! {
    /// `QueryConsumerOffsetResponseHeader`.
    pub struct QueryConsumerOffsetResponseHeader {
        offset: i64 = "offset";
    }
}

header! {
    /// `UpdateConsumerOffsetRequestHeader` (15).
    pub struct UpdateConsumerOffsetRequestHeader {
        consumer_group: String = "consumerGroup";
        topic: String = "topic";
        queue_id: i32 = "queueId";
        commit_offset: i64 = "commitOffset";
    }
}

header! {
    /// `GetMaxOffsetRequestHeader` (30).
    pub struct GetMaxOffsetRequestHeader {
        topic: String = "topic";
        queue_id: i32 = "queueId";
        /// Java default true (5.x field; 4.x clients omit it).
        committed: bool = "committed", default true;
    }
}

header! {
    /// `GetMaxOffsetResponseHeader`.
    pub struct GetMaxOffsetResponseHeader {
        offset: i64 = "offset";
    }
}

header! {
    /// `GetMinOffsetRequestHeader` (31).
    pub struct GetMinOffsetRequestHeader {
        topic: String = "topic";
        queue_id: i32 = "queueId";
    }
}

header! {
    /// `GetMinOffsetResponseHeader`.
    pub struct GetMinOffsetResponseHeader {
        offset: i64 = "offset";
    }
}

/// `BoundaryType` of SEARCH_OFFSET_BY_TIMESTAMP: which offset to return when several messages
/// share the timestamp.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum BoundaryType {
    #[default]
    Lower,
    Upper,
}

impl BoundaryType {
    /// The wire name (Java `BoundaryType.getName`).
    pub fn name(self) -> &'static str {
        match self {
            Self::Lower => "lower",
            Self::Upper => "upper",
        }
    }

    /// Java `BoundaryType.getType`: "upper" in any case is Upper, anything else Lower.
    pub fn from_name(name: &str) -> Self {
        if name.eq_ignore_ascii_case("upper") {
            Self::Upper
        } else {
            Self::Lower
        }
    }
}

impl HeaderField for BoundaryType {
    fn read(cmd: &RemotingCommand, key: &'static str) -> Result<Self, HeaderError> {
        Ok(cmd
            .ext_opt_str(key)
            .map_or(Self::Lower, BoundaryType::from_name))
    }
    fn write(&self, cmd: &mut RemotingCommand, key: &'static str) {
        cmd.set_ext(key, self.name());
    }
}

header! {
    /// `SearchOffsetRequestHeader` (29).
    pub struct SearchOffsetRequestHeader {
        topic: String = "topic";
        queue_id: i32 = "queueId";
        /// Store timestamp in ms.
        timestamp: i64 = "timestamp";
        /// 5.x; absent means Lower.
        boundary_type: BoundaryType = "boundaryType";
    }
}

header! {
    /// `SearchOffsetResponseHeader`.
    pub struct SearchOffsetResponseHeader {
        offset: i64 = "offset";
    }
}

header! {
    /// `GetEarliestMsgStoretimeRequestHeader` (32).
    pub struct GetEarliestMsgStoretimeRequestHeader {
        topic: String = "topic";
        queue_id: i32 = "queueId";
    }
}

header! {
    /// `GetEarliestMsgStoretimeResponseHeader`.
    pub struct GetEarliestMsgStoretimeResponseHeader {
        /// Store timestamp in ms.
        timestamp: i64 = "timestamp";
    }
}
