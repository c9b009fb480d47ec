//! `[telemetry]`: traces exported over OTLP (`[telemetry]` keys) and the request log
//! (`[telemetry.request_log]`, its own file: `request_log.rs`).

use serde::Deserialize;

use super::error::ConfigError;
use super::request_log::{RequestLog, RequestLogSection};

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TelemetrySection {
    /// The OTLP/HTTP traces endpoint (`http://collector:4318/v1/traces`); empty: no traces.
    pub otlp_endpoint: String,
    pub request_log: RequestLogSection,
}

/// The validated `[telemetry]`.
#[derive(Debug, Clone)]
pub struct Telemetry {
    /// `None`: traces are off.
    pub otlp_endpoint: Option<String>,
    pub request_log: RequestLog,
}

impl TelemetrySection {
    pub(super) fn validate(&self, errs: &mut Vec<ConfigError>) -> Telemetry {
        let endpoint = self.otlp_endpoint.trim();
        Telemetry {
            otlp_endpoint: (!endpoint.is_empty()).then(|| endpoint.to_string()),
            request_log: self.request_log.validate(errs),
        }
    }
}
