//! Long polling (Java `broker.longpolling`): the hold table of parked pulls
//! ([`hold_table`], Java `ManyPullRequest` per queue) and the service that re-executes woken
//! pulls ([`pull_request_hold_service`], Java `PullRequestHoldService` and
//! `NotifyMessageArrivingListener`).

pub mod hold_table;
pub mod pull_request_hold_service;
