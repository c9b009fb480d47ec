//! `[billing]`: Stripe Checkout and the webhook (DESIGN.md, Rules: Payments). Typed now so
//! that a misspelt key is refused at load; the values are checked by the checkout and webhook
//! handlers' issue, which reads them (only a credit pack's amount, a number of credits, is
//! converted here).

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
            credit_packs: BTreeMap::new(),
        }
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CreditPackSection {
    pub credits: f64,
    pub stripe_price: String,
}

#[derive(Debug, Clone)]
pub struct CreditPack {
    pub credits: i64,
    pub stripe_price: String,
}

#[derive(Debug, Clone)]
pub struct Billing {
    pub stripe_api_base: String,
    pub secret_key_env: String,
    pub webhook_secret_env: String,
    pub success_url: String,
    pub cancel_url: String,
    pub credit_packs: BTreeMap<String, CreditPack>,
}

impl BillingSection {
    pub(super) fn validate(&self, errs: &mut Vec<ConfigError>) -> Billing {
        let mut credit_packs = BTreeMap::new();
        for (name, p) in &self.credit_packs {
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
                },
            );
        }
        Billing {
            stripe_api_base: self.stripe_api_base.trim_end_matches('/').to_string(),
            secret_key_env: self.secret_key_env.clone(),
            webhook_secret_env: self.webhook_secret_env.clone(),
            success_url: self.success_url.clone(),
            cancel_url: self.cancel_url.clone(),
            credit_packs,
        }
    }
}
