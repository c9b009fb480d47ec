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
}

impl Default for RequestLogSection {
    fn default() -> Self {
        RequestLogSection {
            enabled: true,
            retention_days: 30,
        }
    }
}

/// The validated `[telemetry.request_log]`.
#[derive(Debug, Clone)]
pub struct RequestLog {
    pub enabled: bool,
    pub retention_secs: i64,
}

impl RequestLogSection {
    pub(super) fn validate(&self, errs: &mut Vec<ConfigError>) -> RequestLog {
        if !(1..=3650).contains(&self.retention_days) {
            errs.push(err(
                "telemetry.request_log.retention_days",
                "must be from 1 to 3650 days",
            ));
        }
        RequestLog {
            enabled: self.enabled,
            retention_secs: self.retention_days.clamp(1, 3650) as i64 * 86_400,
        }
    }
}
