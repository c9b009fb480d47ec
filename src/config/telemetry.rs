//! `[telemetry]`: traces exported over OTLP/HTTP (`[telemetry]` keys) and the request log
//! (`[telemetry.request_log]`, its own file: `request_log.rs`). Read at start: a reload does
//! not change them.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::Deserialize;

use super::error::{err, ConfigError};
use super::request_log::{RequestLog, RequestLogSection};

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TelemetrySection {
    /// The OTLP/HTTP traces endpoint (`http://collector:4318/v1/traces`); empty: no traces.
    pub otlp_endpoint: String,
    /// Share of traces kept (0 to 1), decided on the trace id; a client's sampled flag wins,
    /// and a request that failed is always kept.
    pub sample_ratio: f64,
    /// `service.name` of the exported resource.
    pub service_name: String,
    /// Extra headers of every export (a hosted collector's authorization).
    pub headers: BTreeMap<String, String>,
    /// Spans waiting for export at most; past it they are dropped and counted.
    pub queue_spans: usize,
    /// Spans in one export at most.
    pub batch_spans: usize,
    /// How often waiting spans are exported.
    pub export_interval_ms: u64,
    /// How long one export may take before it is given up (its spans dropped and counted).
    pub export_timeout_ms: u64,
    pub request_log: RequestLogSection,
}

impl Default for TelemetrySection {
    fn default() -> Self {
        TelemetrySection {
            otlp_endpoint: String::new(),
            sample_ratio: 0.1,
            service_name: "tollgate".into(),
            headers: BTreeMap::new(),
            queue_spans: 4096,
            batch_spans: 512,
            export_interval_ms: 1000,
            export_timeout_ms: 5000,
            request_log: RequestLogSection::default(),
        }
    }
}

/// The validated `[telemetry]`.
#[derive(Debug, Clone)]
pub struct Telemetry {
    /// `None`: traces are off.
    pub traces: Option<Traces>,
    pub request_log: RequestLog,
}

/// Where and how traces are exported.
#[derive(Debug, Clone)]
pub struct Traces {
    pub endpoint: String,
    pub sample_ratio: f64,
    pub service_name: String,
    pub headers: Vec<(String, String)>,
    pub queue_spans: usize,
    pub batch_spans: usize,
    pub export_interval: Duration,
    pub export_timeout: Duration,
}

impl TelemetrySection {
    pub(super) fn validate(&self, errs: &mut Vec<ConfigError>) -> Telemetry {
        let endpoint = self.otlp_endpoint.trim();
        let before = errs.len();
        let rest = endpoint
            .strip_prefix("http://")
            .or_else(|| endpoint.strip_prefix("https://"));
        if !endpoint.is_empty() && rest.is_none_or(|r| r.is_empty() || r.starts_with('/')) {
            errs.push(err(
                "telemetry.otlp_endpoint",
                "must be an http:// or https:// URL (e.g. http://collector:4318/v1/traces)",
            ));
        }
        if !(0.0..=1.0).contains(&self.sample_ratio) {
            errs.push(err("telemetry.sample_ratio", "must be from 0 to 1"));
        }
        if self.service_name.trim().is_empty() {
            errs.push(err("telemetry.service_name", "must not be empty"));
        }
        for (name, value) in &self.headers {
            let token = !name.is_empty()
                && name
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b));
            if !token {
                errs.push(err(
                    format!("telemetry.headers.{name}"),
                    "is not a valid header name",
                ));
            }
            if value.bytes().any(|b| b < 0x20 && b != b'\t' || b == 0x7f) {
                errs.push(err(
                    format!("telemetry.headers.{name}"),
                    "must not hold control characters",
                ));
            }
        }
        bounded(errs, "queue_spans", self.queue_spans as u64, 1, 1_000_000);
        bounded(errs, "batch_spans", self.batch_spans as u64, 1, 100_000);
        if self.batch_spans > self.queue_spans {
            errs.push(err(
                "telemetry.batch_spans",
                "must not be more than telemetry.queue_spans",
            ));
        }
        bounded(
            errs,
            "export_interval_ms",
            self.export_interval_ms,
            10,
            600_000,
        );
        bounded(
            errs,
            "export_timeout_ms",
            self.export_timeout_ms,
            10,
            600_000,
        );
        let ok = errs.len() == before;
        Telemetry {
            traces: (ok && !endpoint.is_empty()).then(|| Traces {
                endpoint: endpoint.to_string(),
                sample_ratio: self.sample_ratio,
                service_name: self.service_name.trim().to_string(),
                headers: self
                    .headers
                    .iter()
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect(),
                queue_spans: self.queue_spans,
                batch_spans: self.batch_spans,
                export_interval: Duration::from_millis(self.export_interval_ms),
                export_timeout: Duration::from_millis(self.export_timeout_ms),
            }),
            request_log: self.request_log.validate(errs),
        }
    }
}

fn bounded(errs: &mut Vec<ConfigError>, key: &str, v: u64, min: u64, max: u64) {
    if !(min..=max).contains(&v) {
        errs.push(err(
            format!("telemetry.{key}"),
            format!("must be from {min} to {max}"),
        ));
    }
}
