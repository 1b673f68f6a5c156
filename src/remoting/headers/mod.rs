//! Typed custom headers: the extFields of each request/response, decoded the way Java's
//! `RemotingCommand.decodeCommandCustomHeader` does (`Integer.parseInt`, `Long.parseLong`,
//! lenient booleans; a missing `@CFNotNull` field is an error naming the field).
//!
//! Every header has `decode(&RemotingCommand) -> Result<Self, HeaderError>` and
//! `encode(&self, &mut RemotingCommand)` (writes the ext fields; optional fields only when
//! `Some`). Field names are Java's, in snake case; the wire keys are Java's exactly.
//!
//! Field conventions:
//! - `String`, `i32`, `i64`: required (`@CFNotNull`). An empty numeric value counts as missing.
//! - `bool`: absent means false (Java `Boolean.parseBoolean(null)`); always written.
//! - `Option<_>`: optional (`@CFNullable` or no annotation); written only when `Some`.
//! - Fields with a non-false Java default (e.g. `committed = true`) are plain values that take
//!   that default when absent.
//!
//! Java source: `remoting/.../protocol/header/*.java`, `.../header/namesrv/*.java`.
//!
//! Files: `field` (the [`HeaderField`] value types and [`CustomHeader`]), then one file per
//! request family: `send`, `pull`, `offsets`, `client`, `admin`, `namesrv`, `transaction`. The `header!`
//! macro below declares a header whose fields map 1:1 to ext keys.

/// Reads one field, applying its Java default when one is given and the field is absent.
macro_rules! read_field {
    ($cmd:expr, $ty:ty, $key:literal) => {
        <$ty as $crate::remoting::headers::field::HeaderField>::read($cmd, $key)?
    };
    ($cmd:expr, $ty:ty, $key:literal, $default:expr) => {
        <Option<$ty> as $crate::remoting::headers::field::HeaderField>::read($cmd, $key)?
            .unwrap_or($default)
    };
}

/// Declares a header struct whose fields map 1:1 to ext keys, with `decode`/`encode`.
macro_rules! header {
    (
        $(#[$meta:meta])*
        pub struct $name:ident {
            $(
                $(#[$field_meta:meta])*
                $field:ident : $ty:ty = $key:literal $(, default $default:expr)?;
            )*
        }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, PartialEq, Eq)]
        pub struct $name {
            $($(#[$field_meta])* pub $field: $ty,)*
        }

        impl $name {
            /// Decodes from `cmd.ext_fields`; errors name the first bad field.
            pub fn decode(cmd: &$crate::remoting::command::RemotingCommand,
            ) -> Result<Self, $crate::remoting::error::HeaderError> {
                Ok(Self { $($field: read_field!(cmd, $ty, $key $(, $default)?),)* })
            }

            /// Writes every field into `cmd.ext_fields` (optional fields only when `Some`).
            pub fn encode(&self, cmd: &mut $crate::remoting::command::RemotingCommand) {
                // Room for every field at once: the map grows once, not at each power of two.
                cmd.ext_fields.reserve([$($key),*].len());
                $($crate::remoting::headers::field::HeaderField::write(&self.$field, cmd, $key);)*
            }
        }

        impl $crate::remoting::headers::field::CustomHeader for $name {
            fn decode(cmd: &$crate::remoting::command::RemotingCommand,
            ) -> Result<Self, $crate::remoting::error::HeaderError> {
                $name::decode(cmd)
            }
            fn encode(&self, cmd: &mut $crate::remoting::command::RemotingCommand) {
                $name::encode(self, cmd)
            }
        }
    };
}

mod admin;
mod client;
mod field;
mod namesrv;
mod offsets;
mod pull;
mod send;
mod transaction;

pub use admin::{
    CreateTopicRequestHeader, DeleteSubscriptionGroupRequestHeader, DeleteTopicRequestHeader,
    GetBrokerConfigResponseHeader, GetConsumeStatsRequestHeader,
    GetConsumerConnectionListRequestHeader, GetConsumerRunningInfoRequestHeader,
    GetProducerConnectionListRequestHeader, GetTopicConfigRequestHeader,
    GetTopicStatsInfoRequestHeader, QueryMessageRequestHeader, QueryMessageResponseHeader,
    ResetOffsetRequestHeader, ViewMessageRequestHeader, UNIQUE_MSG_QUERY_FLAG,
};
pub use client::{
    ConsumerSendMsgBackRequestHeader, GetConsumerListByGroupRequestHeader,
    NotifyConsumerIdsChangedRequestHeader, UnregisterClientRequestHeader,
};
pub use field::{CustomHeader, HeaderField};
pub use namesrv::{
    DeleteTopicFromNamesrvRequestHeader, GetKvConfigResponseHeader,
    GetKvListByNamespaceRequestHeader, GetRouteInfoRequestHeader, KvConfigKeyRequestHeader,
    PutKvConfigRequestHeader, RegisterBrokerRequestHeader, RegisterBrokerResponseHeader,
    UnregisterBrokerRequestHeader,
};
pub use offsets::{
    BoundaryType, GetEarliestMsgStoretimeRequestHeader, GetEarliestMsgStoretimeResponseHeader,
    GetMaxOffsetRequestHeader, GetMaxOffsetResponseHeader, GetMinOffsetRequestHeader,
    GetMinOffsetResponseHeader, QueryConsumerOffsetRequestHeader,
    QueryConsumerOffsetResponseHeader, SearchOffsetRequestHeader, SearchOffsetResponseHeader,
    UpdateConsumerOffsetRequestHeader,
};
pub use pull::{PullMessageRequestHeader, PullMessageResponseHeader};
pub use send::{
    add_region_and_trace, SendMessageRequestHeader, SendMessageResponseHeader, MSG_REGION_KEY,
    REGION_ID_DEFAULT, TRACE_ON_KEY,
};
pub use transaction::{CheckTransactionStateRequestHeader, EndTransactionRequestHeader};

#[cfg(test)]
mod tests;
