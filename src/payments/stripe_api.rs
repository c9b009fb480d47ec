//! The few Stripe API calls the gateway makes (create a Checkout Session, read its line items,
//! create a Billing Portal session), over Pingora's pooled connector like every other upstream:
//! form-encoded bodies, the secret key as a Bearer token, an `Idempotency-Key` on creations.
//! Any failure (refused, timed out, non-2xx, not JSON) is a [`StripeError`] in words; the
//! handlers answer it with 502 and store nothing as paid.

use std::time::Duration;

use pingora::upstreams::peer::HttpPeer;
use serde_json::Value;

use crate::config::{Billing, EndpointUrl};
use crate::runtime::Shared;
use crate::upstream::head::Request;
use crate::upstream::wire::{self, BodyError};

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
    match tokio::time::timeout(
        billing.api_timeout,
        exchange(shared, billing, method, path, form, idempotency_key, &key),
    )
    .await
    {
        Ok(r) => r,
        Err(_) => Err(fail("Stripe did not answer in time")),
    }
}

async fn exchange(
    shared: &Shared,
    billing: &Billing,
    method: &str,
    path: &str,
    form: Option<&str>,
    idempotency_key: Option<&str>,
    key: &str,
) -> Result<Value, StripeError> {
    let url = EndpointUrl::parse(&billing.stripe_api_base)
        .map_err(|e| fail(format!("billing.stripe_api_base {e}")))?;
    let addr = tokio::net::lookup_host((url.host.as_str(), url.port))
        .await
        .ok()
        .and_then(|mut a| a.next())
        .ok_or_else(|| fail(format!("cannot resolve {}", url.host)))?;
    let sni = if url.tls {
        url.host.clone()
    } else {
        String::new()
    };
    let mut peer = HttpPeer::new(addr, url.tls, sni);
    peer.options.connection_timeout = Some(billing.api_timeout);
    peer.options.read_timeout = Some(billing.api_timeout);
    let full_path = format!("{}{path}", url.base_path);
    let body = form.unwrap_or("").as_bytes().to_vec();
    let request = (|| -> pingora::Result<Vec<u8>> {
        let mut r = Request::new(method, &full_path)?
            .header("Host", &url.authority())?
            .header("Authorization", &format!("Bearer {key}"))?
            .header("Content-Type", "application/x-www-form-urlencoded")?;
        if let Some(k) = idempotency_key {
            r = r.header("Idempotency-Key", k)?;
        }
        Ok(r.body(&body))
    })()
    .map_err(|e| fail(format!("could not build the request ({e})")))?;
    let mut up = wire::exchange(&shared.connector, &peer, &request)
        .await
        .map_err(|e| match e {
            wire::Failure::Connect(_) => fail("could not connect to Stripe"),
            wire::Failure::Exchange(_) => fail("Stripe dropped the connection"),
        })?;
    let status = up.status();
    let buf = up.read_to_end(MAX_REPLY).await.map_err(|e| match e {
        BodyError::TooLarge => fail("Stripe's reply was too long"),
        BodyError::Read(_) => fail("Stripe dropped the connection mid-reply"),
    })?;
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
    let v = json.ok_or_else(|| fail("Stripe's reply was not JSON"))?;
    up.release(&shared.connector, &peer, Some(Duration::from_secs(30)));
    Ok(v)
}
