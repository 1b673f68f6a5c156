//! Transactional messages (Java `broker/transaction`). A producer sends a half (prepared)
//! message, runs its local transaction, then ends it with END_TRANSACTION (commit or
//! rollback); a half message left unended is checked back with a producer of its group.
//!
//! - [`transactional_message_util`]: topic, group and property names, property editing.
//! - [`transactional_message_bridge`]: the store and offset-table calls (half message storage,
//!   op messages, the scan's progress).
//! - [`transactional_message_service`]: the end's checks and op message, and the check-back
//!   scan.
//! - [`transactional_message_check_listener`]: CHECK_TRANSACTION_STATE to a producer, and
//!   TRANS_CHECK_MAX_TIME_TOPIC.
//! - [`transactional_message_check_service`]: the thread that runs the scan.
//!
//! The END_TRANSACTION processor is `processor::end_transaction`; SEND_MESSAGE stores half
//! messages through the bridge.

pub mod transactional_message_bridge;
pub mod transactional_message_check_listener;
pub mod transactional_message_check_service;
pub mod transactional_message_service;
pub mod transactional_message_util;

#[cfg(test)]
mod tests;
