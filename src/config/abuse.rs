//! `[abuse]`: how often one client address may sign up and log in. Counted in the shared
//! limiter (Redis when configured), so the bound holds across instances; an account's e-mail
//! has its own login throttle on top.

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
}

impl Default for AbuseSection {
    fn default() -> Self {
        AbuseSection {
            signups_per_hour: 5,
            signups_per_day: 20,
            logins_per_hour: 60,
            logins_per_day: 300,
        }
    }
}

/// Per client address (IPv4, or IPv6 /64).
#[derive(Debug, Clone, Copy)]
pub struct Abuse {
    pub signups: PlanLimits,
    pub logins: PlanLimits,
}

impl AbuseSection {
    pub(super) fn validate(&self, errs: &mut Vec<ConfigError>) -> Abuse {
        for (k, v) in [
            ("signups_per_hour", self.signups_per_hour),
            ("signups_per_day", self.signups_per_day),
            ("logins_per_hour", self.logins_per_hour),
            ("logins_per_day", self.logins_per_day),
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
        }
    }
}
