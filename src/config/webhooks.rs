//! `[webhooks]`: events sent to customers' endpoints (signed, retried, in order per endpoint).

use std::time::Duration;

use serde::Deserialize;

use super::error::{err, ConfigError};

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct WebhooksSection {
    /// Endpoints on private, loopback or link-local addresses are allowed (server-side request
    /// forgery guard off: tests and private deployments only).
    pub allow_private_targets: bool,
    /// The first retry's wait; each later one doubles it (with jitter) up to
    /// `max_backoff_secs`.
    pub retry_base_ms: u64,
    pub max_backoff_secs: u64,
    /// A delivery still failing this long after its event is marked failed, and the
    /// endpoint's next event goes.
    pub give_up_after_hours: u64,
    /// One delivery attempt's deadline (connect, send, answer).
    pub timeout_secs: u64,
    /// The most of a receiver's answer read (the rest is not needed: only the status counts).
    pub max_response_bytes: usize,
    /// How often each instance looks for deliveries due and refreshes which wallets have
    /// endpoints.
    pub poll_interval_ms: u64,
    /// How often keys about to expire and balances below a threshold are looked for.
    pub sweep_interval_secs: u64,
    /// Events waiting to be checked off the request path; more are dropped and counted.
    pub queue_capacity: usize,
    /// Endpoints one account or organization may register.
    pub max_endpoints: usize,
}

impl Default for WebhooksSection {
    fn default() -> Self {
        WebhooksSection {
            allow_private_targets: false,
            retry_base_ms: 5_000,
            max_backoff_secs: 3_600,
            give_up_after_hours: 72,
            timeout_secs: 10,
            max_response_bytes: 65_536,
            poll_interval_ms: 1_000,
            sweep_interval_secs: 60,
            queue_capacity: 10_000,
            max_endpoints: 20,
        }
    }
}

/// The validated `[webhooks]`.
#[derive(Debug, Clone)]
pub struct Webhooks {
    pub allow_private_targets: bool,
    pub retry_base_ms: u64,
    pub max_backoff_ms: u64,
    pub give_up_after: Duration,
    pub timeout: Duration,
    pub max_response_bytes: usize,
    pub poll_interval: Duration,
    pub sweep_interval: Duration,
    pub queue_capacity: usize,
    pub max_endpoints: usize,
}

impl Default for Webhooks {
    fn default() -> Self {
        WebhooksSection::default().validate(&mut Vec::new())
    }
}

impl WebhooksSection {
    pub(super) fn validate(&self, errs: &mut Vec<ConfigError>) -> Webhooks {
        let mut range = |key: &str, v: u64, lo: u64, hi: u64, unit: &str| {
            if !(lo..=hi).contains(&v) {
                errs.push(err(
                    format!("webhooks.{key}"),
                    format!("must be from {lo} to {hi} {unit}"),
                ));
            }
            v.clamp(lo, hi)
        };
        let base = range("retry_base_ms", self.retry_base_ms, 10, 3_600_000, "ms");
        let max_backoff = range("max_backoff_secs", self.max_backoff_secs, 1, 86_400, "s");
        // The promise: retried for at least a day.
        let give_up = range(
            "give_up_after_hours",
            self.give_up_after_hours,
            24,
            720,
            "hours (retries last at least a day)",
        );
        let timeout = range("timeout_secs", self.timeout_secs, 1, 60, "s");
        let max_response = range(
            "max_response_bytes",
            self.max_response_bytes as u64,
            0,
            1 << 20,
            "bytes",
        );
        let poll = range("poll_interval_ms", self.poll_interval_ms, 50, 60_000, "ms");
        let sweep = range(
            "sweep_interval_secs",
            self.sweep_interval_secs,
            1,
            3_600,
            "s",
        );
        let queue = range(
            "queue_capacity",
            self.queue_capacity as u64,
            1,
            1_000_000,
            "events",
        );
        let most = range(
            "max_endpoints",
            self.max_endpoints as u64,
            1,
            1_000,
            "endpoints",
        );
        Webhooks {
            allow_private_targets: self.allow_private_targets,
            retry_base_ms: base,
            max_backoff_ms: max_backoff * 1000,
            give_up_after: Duration::from_secs(give_up * 3600),
            timeout: Duration::from_secs(timeout),
            max_response_bytes: max_response as usize,
            poll_interval: Duration::from_millis(poll),
            sweep_interval: Duration::from_secs(sweep),
            queue_capacity: queue as usize,
            max_endpoints: most as usize,
        }
    }
}
