//! The one clock: Unix time from the system clock. The ledger keeps milliseconds; model dates,
//! HTTP dates and the `created` field of model lists use seconds.
//!
//! `TOLLGATE_CLOCK_OFFSET_MS` (read once, at the first reading) moves it: tests start an
//! instance just before a budget period ends and watch the period turn. Nothing else reads
//! the time of day.

use std::sync::OnceLock;
use std::time::{SystemTime, UNIX_EPOCH};

/// Unix time in milliseconds.
pub fn now_ms() -> i64 {
    static OFFSET: OnceLock<i64> = OnceLock::new();
    let offset = *OFFSET.get_or_init(|| {
        std::env::var("TOLLGATE_CLOCK_OFFSET_MS")
            .ok()
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0)
    });
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
        + offset
}

/// Unix time in whole seconds.
pub fn now_secs() -> i64 {
    now_ms().div_euclid(1000)
}
