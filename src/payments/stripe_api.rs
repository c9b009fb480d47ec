//! The few Stripe API calls the gateway makes (create a Checkout Session, read its line items,
//! create a Billing Portal session), over Pingora's pooled connector (`upstream/outbound.rs`):
//! form-encoded bodies, the secret key as a Bearer token, an `Idempotency-Key` on creations.
//! Any failure (refused, timed out, non-2xx, not JSON) is a [`StripeError`] in words; the
//! handlers answer it with 502 and store nothing as paid.

use serde_json::Value;

use crate::config::Billing;
use crate::runtime::Shared;
use crate::upstream::outbound;

/// Stripe's answers are small; a longer one is not Stripe.
const MAX_REPLY: usize = 1 << 20;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StripeError {
    /// Stripe's HTTP status when it answered one (a 404 is an answer, not an outage).
    pub status: Option<u16>,
    pub message: String,
}

impl std::fmt::Display for StripeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

fn fail(s: impl Into<String>) -> StripeError {
    StripeError {
        status: None,
        message: s.into(),
    }
}

/// The secret key from the environment variable the config names.
pub fn secret_key(billing: &Billing) -> Result<String, StripeError> {
    std::env::var(&billing.secret_key_env)
        .ok()
        .filter(|k| !k.trim().is_empty())
        .ok_or_else(|| {
            fail(format!(
                "the Stripe secret key is not set (environment variable {})",
                billing.secret_key_env
            ))
        })
}

/// One call: `method path` with an optional form body; the reply's JSON when it is 2xx.
pub async fn call(
    shared: &Shared,
    billing: &Billing,
    method: &str,
    path: &str,
    form: Option<&str>,
    idempotency_key: Option<&str>,
) -> Result<Value, StripeError> {
    let key = secret_key(billing)?;
    let url = format!("{}{path}", billing.stripe_api_base.trim_end_matches('/'));
    let auth = format!("Bearer {key}");
    let mut headers = vec![
        ("Authorization", auth.as_str()),
        ("Content-Type", "application/x-www-form-urlencoded"),
    ];
    if let Some(k) = idempotency_key {
        headers.push(("Idempotency-Key", k));
    }
    let body = form.unwrap_or("").as_bytes();
    let limits = (billing.api_timeout, MAX_REPLY);
    let reply = outbound::call(shared, "Stripe", (method, &url), &headers, body, limits)
        .await
        .map_err(fail)?;
    let (status, buf) = (reply.status, reply.body);
    let json: Option<Value> = serde_json::from_slice(&buf).ok();
    if !(200..300).contains(&status) {
        let why = json
            .as_ref()
            .and_then(|v| v["error"]["message"].as_str())
            .unwrap_or("no message");
        return Err(StripeError {
            status: Some(status),
            message: format!("Stripe answered HTTP {status}: {why}"),
        });
    }
    json.ok_or_else(|| fail("Stripe's reply was not JSON"))
}
