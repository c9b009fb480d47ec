//! `[billing]`: Stripe Checkout and the webhook (DESIGN.md, Rules: Payments). The secrets are
//! read from the environment variables named here when they are used, never stored in the
//! file. Empty `success_url` / `cancel_url` default to the dashboard under `server.public_url`.

use std::collections::BTreeMap;

use serde::Deserialize;

use super::error::{err, ConfigError};

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct BillingSection {
    pub stripe_api_base: String,
    pub secret_key_env: String,
    /// May hold several secrets, comma-separated (rotation).
    pub webhook_secret_env: String,
    pub success_url: String,
    pub cancel_url: String,
    /// Seconds a Stripe API call may take before the checkout answers 502.
    pub api_timeout: u64,
    pub credit_packs: BTreeMap<String, CreditPackSection>,
}

impl Default for BillingSection {
    fn default() -> Self {
        BillingSection {
            stripe_api_base: "https://api.stripe.com".into(),
            secret_key_env: "STRIPE_SECRET_KEY".into(),
            webhook_secret_env: "STRIPE_WEBHOOK_SECRET".into(),
            success_url: String::new(),
            cancel_url: String::new(),
            api_timeout: 10,
            credit_packs: BTreeMap::new(),
        }
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CreditPackSection {
    pub credits: f64,
    pub stripe_price: String,
    /// The price as the pricing page shows it (e.g. `$10`).
    #[serde(default)]
    pub price_label: Option<String>,
}

#[derive(Debug, Clone)]
pub struct CreditPack {
    pub credits: i64,
    pub stripe_price: String,
    pub price_label: Option<String>,
}

#[derive(Debug, Clone)]
pub struct Billing {
    pub stripe_api_base: String,
    pub secret_key_env: String,
    pub webhook_secret_env: String,
    pub success_url: String,
    pub cancel_url: String,
    pub api_timeout: std::time::Duration,
    pub credit_packs: BTreeMap<String, CreditPack>,
}

impl Billing {
    /// The pack sold at a Stripe price.
    pub fn pack_by_price(&self, price: &str) -> Option<(&str, &CreditPack)> {
        self.credit_packs
            .iter()
            .find(|(_, p)| p.stripe_price == price)
            .map(|(n, p)| (n.as_str(), p))
    }

    /// The webhook signing secrets (several during a rotation), from the environment.
    pub fn webhook_secrets(&self) -> String {
        std::env::var(&self.webhook_secret_env).unwrap_or_default()
    }
}

impl BillingSection {
    pub(super) fn validate(&self, public_url: &str, errs: &mut Vec<ConfigError>) -> Billing {
        let mut credit_packs = BTreeMap::new();
        for (name, p) in &self.credit_packs {
            if p.stripe_price.trim().is_empty() {
                errs.push(err(
                    format!("billing.credit_packs.{name}.stripe_price"),
                    "must name the Stripe price the pack is sold at",
                ));
            }
            let credits = tollgate_filters::credits::from_credits(p.credits).filter(|c| *c > 0);
            if credits.is_none() {
                errs.push(err(
                    format!("billing.credit_packs.{name}.credits"),
                    "must be a positive number of credits",
                ));
            }
            credit_packs.insert(
                name.clone(),
                CreditPack {
                    credits: credits.unwrap_or(0),
                    stripe_price: p.stripe_price.clone(),
                    price_label: p.price_label.clone(),
                },
            );
        }
        if super::providers::EndpointUrl::parse(&self.stripe_api_base).is_err() {
            errs.push(err(
                "billing.stripe_api_base",
                "must be an http(s) URL such as https://api.stripe.com",
            ));
        }
        if self.api_timeout == 0 {
            errs.push(err("billing.api_timeout", "must be at least 1 second"));
        }
        let public = public_url.trim_end_matches('/');
        let or_default = |u: &str, d: &str| {
            if u.is_empty() {
                format!("{public}{d}")
            } else {
                u.to_owned()
            }
        };
        Billing {
            stripe_api_base: self.stripe_api_base.trim_end_matches('/').to_string(),
            secret_key_env: self.secret_key_env.clone(),
            webhook_secret_env: self.webhook_secret_env.clone(),
            success_url: or_default(&self.success_url, "/dashboard/billing?paid=1"),
            cancel_url: or_default(&self.cancel_url, "/dashboard/billing"),
            api_timeout: std::time::Duration::from_secs(self.api_timeout),
            credit_packs,
        }
    }
}
