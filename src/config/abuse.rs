//! `[abuse]`: how often one client address may sign up and log in, and how many wrong
//! passwords one e-mail may be tried with. Counted in the shared limiter (Redis when
//! configured), so the bounds hold across instances.

use serde::Deserialize;
use tollgate_filters::ratelimit::PlanLimits;

use super::error::{err, ConfigError};

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AbuseSection {
    pub signups_per_hour: u64,
    pub signups_per_day: u64,
    pub logins_per_hour: u64,
    pub logins_per_day: u64,
    /// Wrong passwords per e-mail address in [`LOGIN_FAILURE_WINDOW_MS`], from anywhere.
    pub login_failures_per_email: u64,
    /// Invalid API keys per client address and minute, past which a key not seen lately is
    /// refused (429) without a lookup until the minute ends; counted per instance.
    pub invalid_keys_per_minute: u64,
}

/// The window of `login_failures_per_email`: 15 minutes.
pub const LOGIN_FAILURE_WINDOW_MS: i64 = 15 * 60 * 1000;

impl Default for AbuseSection {
    fn default() -> Self {
        AbuseSection {
            signups_per_hour: 5,
            signups_per_day: 20,
            logins_per_hour: 60,
            logins_per_day: 300,
            login_failures_per_email: 5,
            invalid_keys_per_minute: 60,
        }
    }
}

/// Per client address (IPv4, or IPv6 /64).
#[derive(Debug, Clone, Copy)]
pub struct Abuse {
    pub signups: PlanLimits,
    pub logins: PlanLimits,
    /// Per e-mail address, wherever the attempts come from.
    pub login_failures_per_email: u64,
    pub invalid_keys_per_minute: u64,
}

impl AbuseSection {
    pub(super) fn validate(&self, errs: &mut Vec<ConfigError>) -> Abuse {
        for (k, v) in [
            ("signups_per_hour", self.signups_per_hour),
            ("signups_per_day", self.signups_per_day),
            ("logins_per_hour", self.logins_per_hour),
            ("logins_per_day", self.logins_per_day),
            ("login_failures_per_email", self.login_failures_per_email),
            ("invalid_keys_per_minute", self.invalid_keys_per_minute),
        ] {
            if v == 0 {
                errs.push(err(format!("abuse.{k}"), "must be at least 1"));
            }
        }
        Abuse {
            signups: PlanLimits {
                per_hour: Some(self.signups_per_hour),
                per_day: Some(self.signups_per_day),
            },
            logins: PlanLimits {
                per_hour: Some(self.logins_per_hour),
                per_day: Some(self.logins_per_day),
            },
            login_failures_per_email: self.login_failures_per_email,
            invalid_keys_per_minute: self.invalid_keys_per_minute,
        }
    }
}
