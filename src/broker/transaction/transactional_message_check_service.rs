//! The `ringmq-transaction-check` thread (Java `TransactionalMessageCheckService`): every
//! `transaction_check_interval_ms` it runs one check-back pass
//! ([`super::transactional_message_service::check`]). A slave does not check (Java runs the
//! service on the master only).

use std::sync::Arc;
use std::time::Duration;

use crate::broker::controller::BrokerController;
use crate::common::StopFlag;

use super::transactional_message_service::{self as service, CheckSettings};

/// The settings of a pass, from the broker config.
pub fn check_settings(ctrl: &BrokerController) -> CheckSettings {
    let b = &ctrl.config.broker;
    CheckSettings {
        transaction_timeout_ms: i64::try_from(b.transaction_timeout_ms).unwrap_or(i64::MAX),
        transaction_check_max: i32::try_from(b.transaction_check_max).unwrap_or(i32::MAX),
        file_reserved_time_ms: i64::try_from(ctrl.config.store.file_reserved_time_hours)
            .unwrap_or(i64::MAX)
            .saturating_mul(3_600_000),
    }
}

/// The thread's loop; returns when `stop` is raised.
pub fn run(ctrl: &Arc<BrokerController>, stop: &StopFlag) {
    let interval = Duration::from_millis(ctrl.config.broker.transaction_check_interval_ms);
    while !stop.wait_timeout(interval) {
        if ctrl.is_slave() {
            continue;
        }
        let begin_ms = crate::common::now_ms();
        match service::check(ctrl, check_settings(ctrl), stop) {
            Ok(report) => tracing::debug!(
                ?report,
                took_ms = crate::common::now_ms() - begin_ms,
                "transaction check pass"
            ),
            Err(e) => {
                tracing::error!(error = %e, "transaction check pass failed in the store; the next pass goes on from where it stopped")
            }
        }
    }
}
