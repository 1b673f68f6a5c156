//! Long polling (Java `broker.longpolling`): the hold table of parked pulls
//! ([`hold_table`], Java `ManyPullRequest` per queue), the parked pull itself
//! ([`pull_request`], Java `PullRequest`) and the service that parks them and re-executes the
//! woken ones ([`pull_request_hold_service`], Java `PullRequestHoldService` and
//! `NotifyMessageArrivingListener`), and the per-connection bound on parked pulls
//! ([`connection_parks`]), and the one encoded response many woken pulls that asked the same
//! thing share ([`shared_response`]).
//!
//! Long polling names no broker type: the processor that parks pulls reaches it through
//! [`pull_request_hold_service::PullRequestHoldService`], and the wake threads reach the
//! broker through [`pull_request_hold_service::PullWakeHost`].

pub mod connection_parks;
pub mod hold_table;
pub mod pull_request;
pub mod pull_request_hold_service;
pub mod shared_response;
