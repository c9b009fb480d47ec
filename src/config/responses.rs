//! `[responses]`: how long stored responses (`POST /v1/responses` with `store`) are kept.

use serde::Deserialize;

use super::error::{err, ConfigError};

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ResponsesSection {
    /// Days a stored response and its input items are kept for `previous_response_id` and
    /// `GET /v1/responses/{id}` (OpenAI keeps them 30 days). `retention` is read too.
    #[serde(alias = "retention")]
    pub retention_days: u64,
}

impl Default for ResponsesSection {
    fn default() -> Self {
        ResponsesSection { retention_days: 30 }
    }
}

#[derive(Debug, Clone, Copy)]
pub struct Responses {
    /// Seconds a stored response is kept.
    pub retention_secs: i64,
}

impl ResponsesSection {
    pub(super) fn validate(&self, errs: &mut Vec<ConfigError>) -> Responses {
        if !(1..=3650).contains(&self.retention_days) {
            errs.push(err(
                "responses.retention_days",
                "must be from 1 to 3650 days",
            ));
        }
        Responses {
            retention_secs: self.retention_days.clamp(1, 3650) as i64 * 86_400,
        }
    }
}
