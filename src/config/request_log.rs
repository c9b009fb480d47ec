//! `[telemetry.request_log]`: every metered request's record, and the payloads of those whose
//! account, organization or key turned payload logging on.

use serde::Deserialize;

use super::error::{err, ConfigError};

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RequestLogSection {
    /// Records are written (batched, off the request path); `false`: none.
    pub enabled: bool,
    /// Days a record is kept.
    pub retention_days: u64,
    /// Days a record's payloads are kept (then nulled, the record kept).
    pub payload_retention_days: u64,
    /// The most bytes of one direction's payload stored (the rest cut, the record says so).
    pub max_payload_bytes: u64,
    /// Records waiting for the writer; past it a record is dropped and counted.
    pub queue: u64,
    /// The most records one insert writes.
    pub batch: u64,
}

impl Default for RequestLogSection {
    fn default() -> Self {
        RequestLogSection {
            enabled: true,
            retention_days: 30,
            payload_retention_days: 7,
            max_payload_bytes: 65_536,
            queue: 10_000,
            batch: 200,
        }
    }
}

/// The validated `[telemetry.request_log]`.
#[derive(Debug, Clone)]
pub struct RequestLog {
    pub enabled: bool,
    pub retention_secs: i64,
    pub payload_retention_secs: i64,
    pub max_payload_bytes: usize,
    pub queue: usize,
    pub batch: usize,
}

/// The largest batch: a record binds 21 values, and Postgres takes at most 65,535 per
/// statement.
const MAX_BATCH: u64 = 1000;

impl RequestLogSection {
    pub(super) fn validate(&self, errs: &mut Vec<ConfigError>) -> RequestLog {
        let mut within = |key: &str, v: u64, range: std::ops::RangeInclusive<u64>, what: &str| {
            if !range.contains(&v) {
                errs.push(err(format!("telemetry.request_log.{key}"), what));
            }
            v.clamp(*range.start(), *range.end())
        };
        let days = within(
            "retention_days",
            self.retention_days,
            1..=3650,
            "must be from 1 to 3650 days",
        );
        let payload_days = within(
            "payload_retention_days",
            self.payload_retention_days,
            1..=3650,
            "must be from 1 to 3650 days",
        );
        let max_payload = within(
            "max_payload_bytes",
            self.max_payload_bytes,
            1024..=4_194_304,
            "must be from 1024 to 4194304 bytes",
        );
        let queue = within(
            "queue",
            self.queue,
            1..=1_000_000,
            "must be from 1 to 1000000 records",
        );
        let batch = within(
            "batch",
            self.batch,
            1..=MAX_BATCH,
            "must be from 1 to 1000 records",
        );
        if payload_days > days {
            errs.push(err(
                "telemetry.request_log.payload_retention_days",
                "must be at most retention_days (a payload is kept with its record)",
            ));
        }
        RequestLog {
            enabled: self.enabled,
            retention_secs: days as i64 * 86_400,
            payload_retention_secs: payload_days.min(days) as i64 * 86_400,
            max_payload_bytes: max_payload as usize,
            queue: queue as usize,
            batch: batch as usize,
        }
    }
}
