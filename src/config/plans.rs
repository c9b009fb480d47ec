//! `[plans.*]`: the one place that knows plan names, their default limits (SPEC.md, Limits),
//! the credits each grants and the Stripe price it is sold at.

use std::collections::BTreeMap;

use serde::Deserialize;
use tollgate_filters::credits::from_credits;
use tollgate_filters::ratelimit::PlanLimits;

use super::error::{err, ConfigError};

#[derive(Debug, Clone, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct PlanSection {
    pub requests_per_hour: Option<u64>,
    pub requests_per_day: Option<u64>,
    /// Prompt and completion tokens per minute, per account.
    pub tokens_per_minute: Option<u64>,
    /// Requests in flight at once, per account.
    pub concurrent_requests: Option<u64>,
    pub grant_credits: Option<f64>,
    pub stripe_price: Option<String>,
    /// Sold as a subscription (default) or as a one-off payment.
    pub recurring: Option<bool>,
    /// The price as the pricing page shows it (e.g. `$20 / month`); Stripe holds the amount.
    pub price_label: Option<String>,
}

/// The plan of callers without a key (limited per client IP).
pub const GUEST: &str = "guest";
/// The plan of a new account.
pub const FREE: &str = "free";
/// Plans that exist without a `[plans.*]` section.
const BUILT_IN: [&str; 5] = [GUEST, FREE, "pro", "smb", "business"];
/// Credits a new account gets when `[plans.free] grant_credits` is not set (DESIGN.md).
const DEFAULT_SIGNUP_GRANT: i64 = 100 * 1_000_000;

#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    pub limits: PlanLimits,
    pub tokens_per_minute: Option<u64>,
    pub concurrent_requests: Option<u64>,
    /// Micro-credits granted when the plan starts (for `free`: at signup).
    pub grant: Option<i64>,
    pub stripe_price: Option<String>,
    /// Checkout mode `subscription` (true, the default) or `payment`.
    pub recurring: bool,
    pub price_label: Option<String>,
}

#[derive(Debug, Clone, Default)]
pub struct Plans {
    configured: BTreeMap<String, Plan>,
}

/// Built-in limits, used when `[plans.<name>]` sets none (SPEC.md's table; smb is our choice:
/// five times pro per hour, no daily cap).
fn default_limits(plan: &str) -> PlanLimits {
    let (per_hour, per_day) = match plan {
        GUEST => (Some(30), Some(30)),
        FREE => (Some(120), Some(500)),
        "pro" => (Some(7_200), None),
        "smb" => (Some(36_000), None),
        // Business is custom per account; without numbers it is unlimited.
        "business" => (None, None),
        // An unknown plan name gets the free limits rather than none.
        _ => (Some(120), Some(500)),
    };
    PlanLimits { per_hour, per_day }
}

impl Plans {
    /// The plan's limits: the section's numbers when it sets either (an absent one is then
    /// unlimited), else the built-in ones.
    pub fn limits(&self, plan: &str) -> PlanLimits {
        match self.configured.get(plan) {
            Some(p) if p.limits != PlanLimits::default() => p.limits,
            _ => default_limits(plan),
        }
    }

    /// The plan's tokens per minute and requests in flight per account (none unless set).
    pub fn usage_limits(&self, plan: &str) -> (Option<u64>, Option<u64>) {
        self.configured.get(plan).map_or((None, None), |p| {
            (p.tokens_per_minute, p.concurrent_requests)
        })
    }

    /// Whether an account may be put on this plan (every plan but `guest`).
    pub fn assignable(&self, plan: &str) -> bool {
        plan != GUEST && (BUILT_IN.contains(&plan) || self.configured.contains_key(plan))
    }

    /// The plans an account may be put on, built-in ones first.
    pub fn assignable_names(&self) -> Vec<&str> {
        let mut names: Vec<&str> = BUILT_IN.iter().copied().filter(|n| *n != GUEST).collect();
        for n in self.configured.keys() {
            if !names.contains(&n.as_str()) && n != GUEST {
                names.push(n);
            }
        }
        names
    }

    /// Micro-credits a new account starts with.
    pub fn signup_grant(&self) -> i64 {
        self.configured
            .get(FREE)
            .and_then(|p| p.grant)
            .unwrap_or(DEFAULT_SIGNUP_GRANT)
    }

    pub fn get(&self, plan: &str) -> Option<&Plan> {
        self.configured.get(plan)
    }

    /// The plan sold at a Stripe price.
    pub fn by_price(&self, price: &str) -> Option<&str> {
        self.configured
            .iter()
            .find(|(_, p)| p.stripe_price.as_deref() == Some(price))
            .map(|(n, _)| n.as_str())
    }

    /// Every plan's grant (µcr), for renewals.
    pub fn grants(&self) -> BTreeMap<String, i64> {
        self.configured
            .iter()
            .filter_map(|(n, p)| Some((n.clone(), p.grant?)))
            .collect()
    }
}

pub(super) fn validate(
    sections: &BTreeMap<String, PlanSection>,
    errs: &mut Vec<ConfigError>,
) -> Plans {
    let mut configured = BTreeMap::new();
    for (name, plan) in sections {
        for (k, v) in [
            ("requests_per_hour", plan.requests_per_hour),
            ("requests_per_day", plan.requests_per_day),
            ("tokens_per_minute", plan.tokens_per_minute),
            ("concurrent_requests", plan.concurrent_requests),
        ] {
            if v == Some(0) {
                errs.push(err(
                    format!("plans.{name}.{k}"),
                    "must be at least 1 (omit for no limit)",
                ));
            }
        }
        let grant = plan.grant_credits.and_then(|c| {
            let m = from_credits(c).filter(|m| *m >= 0);
            if m.is_none() {
                errs.push(err(
                    format!("plans.{name}.grant_credits"),
                    "must be a number of credits from 0",
                ));
            }
            m
        });
        configured.insert(
            name.clone(),
            Plan {
                limits: PlanLimits {
                    per_hour: plan.requests_per_hour,
                    per_day: plan.requests_per_day,
                },
                tokens_per_minute: plan.tokens_per_minute,
                concurrent_requests: plan.concurrent_requests,
                grant,
                stripe_price: plan.stripe_price.clone().filter(|p| !p.is_empty()),
                recurring: plan.recurring.unwrap_or(true),
                price_label: plan.price_label.clone(),
            },
        );
    }
    Plans { configured }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plans(text: &str) -> Plans {
        let sections: BTreeMap<String, PlanSection> = toml::from_str(text).unwrap();
        let mut errs = Vec::new();
        let p = validate(&sections, &mut errs);
        assert!(errs.is_empty(), "{errs:?}");
        p
    }

    #[test]
    fn built_in_limits_apply_until_a_section_sets_numbers() {
        let p = plans("");
        assert_eq!(
            p.limits("free"),
            PlanLimits {
                per_hour: Some(120),
                per_day: Some(500)
            }
        );
        assert_eq!(
            p.limits("pro"),
            PlanLimits {
                per_hour: Some(7200),
                per_day: None
            }
        );
        assert_eq!(p.limits("business"), PlanLimits::default());
        assert_eq!(p.limits("no-such-plan"), p.limits("free"));
        let p = plans("[free]\nrequests_per_hour = 3\n[pro]\ngrant_credits = 10000\n");
        assert_eq!(
            p.limits("free"),
            PlanLimits {
                per_hour: Some(3),
                per_day: None
            }
        );
        // A section with only a grant keeps the built-in limits.
        assert_eq!(
            p.limits("pro"),
            PlanLimits {
                per_hour: Some(7200),
                per_day: None
            }
        );
    }

    #[test]
    fn the_signup_grant_is_the_free_plans_grant() {
        assert_eq!(plans("").signup_grant(), 100_000_000);
        assert_eq!(
            plans("[free]\ngrant_credits = 25\n").signup_grant(),
            25_000_000
        );
    }

    #[test]
    fn every_plan_but_guest_is_assignable() {
        let p = plans("[team]\nrequests_per_hour = 10\n");
        for n in ["free", "pro", "smb", "business", "team"] {
            assert!(p.assignable(n), "{n}");
        }
        assert!(!p.assignable("guest"));
        assert!(!p.assignable("gold"));
        assert_eq!(
            p.assignable_names(),
            ["free", "pro", "smb", "business", "team"]
        );
    }

    #[test]
    fn bad_values_are_reported_with_their_path() {
        let sections: BTreeMap<String, PlanSection> =
            toml::from_str("[free]\nrequests_per_day = 0\ngrant_credits = -5\ntokens_per_minute = 0\nconcurrent_requests = 0\n").unwrap();
        let mut errs = Vec::new();
        validate(&sections, &mut errs);
        let paths: Vec<_> = errs.iter().map(|e| e.path.as_str()).collect();
        assert_eq!(
            paths,
            [
                "plans.free.requests_per_day",
                "plans.free.tokens_per_minute",
                "plans.free.concurrent_requests",
                "plans.free.grant_credits"
            ]
        );
        // A negative number is no number of tokens: refused by the parser.
        assert!(toml::from_str::<BTreeMap<String, PlanSection>>(
            "[free]\ntokens_per_minute = -1\n"
        )
        .is_err());
    }
}
