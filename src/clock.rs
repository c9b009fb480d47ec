//! The one clock: Unix time from the system clock. The ledger keeps milliseconds; model dates,
//! HTTP dates and the `created` field of model lists use seconds.

use std::time::{SystemTime, UNIX_EPOCH};

/// Unix time in milliseconds.
pub fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// Unix time in whole seconds.
pub fn now_secs() -> i64 {
    now_ms().div_euclid(1000)
}
