//! The broker's reads of messages from the store, in one place: pulls, the delay-level scan and
//! the consumer-offset check all read through a [`MessageQuery`].

use crate::remoting::headers::PullMessageRequestHeader;
use crate::store::{
    GetMessageRegions, GetMessageResult, MessageFilter, MessageStore, RegionShape, StoreError,
    MAX_PULL_MSG_SIZE_BYTES,
};

/// Which messages to read: up to `max_msg_nums` of (topic, queue) from `offset`, for `group`.
#[derive(Debug, Clone, Copy)]
pub struct MessageQuery<'a> {
    pub group: &'a str,
    pub topic: &'a str,
    pub queue_id: i32,
    pub offset: i64,
    pub max_msg_nums: i32,
}

impl<'a> MessageQuery<'a> {
    /// What a pull asks for (at least one message, as Java reads a non-positive count).
    pub fn of_pull(header: &'a PullMessageRequestHeader) -> Self {
        MessageQuery {
            group: &header.consumer_group,
            topic: &header.topic,
            queue_id: header.queue_id,
            offset: header.queue_offset,
            max_msg_nums: header.max_msg_nums.max(1),
        }
    }

    /// The messages `filter` accepts, read into memory.
    pub fn read(
        &self,
        store: &MessageStore,
        filter: &dyn MessageFilter,
    ) -> Result<GetMessageResult, StoreError> {
        store.get_message(
            self.group,
            self.topic,
            self.queue_id,
            self.offset,
            self.max_msg_nums,
            filter,
        )
    }

    /// The messages `filter` accepts, read into memory or located as file regions, as `choose`
    /// decides on their planned shape.
    pub fn locate(
        &self,
        store: &MessageStore,
        filter: &dyn MessageFilter,
        choose: &dyn Fn(RegionShape) -> bool,
    ) -> Result<GetMessageRegions, StoreError> {
        store.get_message_regions(
            self.group,
            self.topic,
            self.queue_id,
            self.offset,
            self.max_msg_nums,
            MAX_PULL_MSG_SIZE_BYTES,
            filter,
            choose,
        )
    }
}
