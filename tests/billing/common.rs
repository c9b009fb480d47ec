//! What the billing tests share: a gateway selling the `pro` and `smb` plans and the `small`
//! credit pack through a fake Stripe, its billing API, and Stripe events signed and delivered to
//! its webhook.

use serde_json::{json, Value};
use tollgate_testkit::stripe::{event, event_id, now_secs, sign};
use tollgate_testkit::*;

pub const PRO_GRANT: i64 = 10_000 * 1_000_000;
pub const PACK_GRANT: i64 = 1_000 * 1_000_000;

pub fn plans() -> String {
    "[plans.guest]\nrequests_per_hour = 100000\nrequests_per_day = 100000\n\
     [plans.pro]\ngrant_credits = 10000\nstripe_price = \"price_pro\"\n\
     [plans.smb]\ngrant_credits = 50000\nstripe_price = \"price_smb\"\nrecurring = false\n"
        .into()
}

pub fn billing(stripe: &FakeStripe) -> String {
    format!(
        "[billing]\nstripe_api_base = \"{}\"\nsecret_key_env = \"TOLLGATE_TEST_STRIPE_KEY\"\n\
         webhook_secret_env = \"TOLLGATE_TEST_STRIPE_WEBHOOK_SECRET\"\napi_timeout = 1\n\
         [billing.credit_packs.small]\ncredits = 1000\nstripe_price = \"price_small\"\n",
        stripe.base()
    )
}

/// One model on a fake provider of its own, sold through `stripe`.
pub async fn config(stripe: &FakeStripe) -> String {
    let fake = FakeOpenAi::start("p").await;
    format!(
        "{}{}",
        one_model_config(&fake, "m-2024-01-01"),
        billing(stripe)
    )
}

pub async fn gateway(stripe: &FakeStripe) -> Gateway {
    Gateway::start_opts(
        tollgate_bin!(),
        &config(stripe).await,
        Opts {
            plans: Some(plans()),
            ..Opts::default()
        },
    )
    .await
}

pub async fn call(gw: &Gateway, method: &str, path: &str, key: &str, body: &Value) -> Response {
    let b = if body.is_null() {
        Vec::new()
    } else {
        serde_json::to_vec(body).unwrap()
    };
    gw.with_auth(method, path, &format!("Bearer {key}"), &b)
        .await
}

/// Delivers `payload` signed with `secret` at `t`.
pub async fn deliver_raw(gw: &Gateway, payload: &[u8], sig: Option<String>) -> Response {
    let mut headers = vec![("Content-Type".to_string(), "application/json".to_string())];
    if let Some(s) = sig {
        headers.push(("Stripe-Signature".into(), s));
    }
    let h: Vec<(&str, &str)> = headers
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    request(gw.addr, "POST", "/api/v1/billing/webhook", &h, payload).await
}

pub async fn deliver(gw: &Gateway, ev: &Value) -> Response {
    let payload = serde_json::to_vec(ev).unwrap();
    deliver_raw(
        gw,
        &payload,
        Some(sign(&payload, WEBHOOK_SECRET, now_secs())),
    )
    .await
}

/// Delivers and expects it applied (200, not a duplicate); returns the outcome.
pub async fn applied(gw: &Gateway, ev: &Value) -> String {
    let r = deliver(gw, ev).await;
    assert_eq!(r.status, 200, "{}", r.text());
    let v = r.json();
    assert_eq!(v["duplicate"], false, "{v}");
    v["outcome"].as_str().unwrap().to_string()
}

pub fn completed(session: &str, extra: Value) -> Value {
    let mut obj = json!({"id": session, "object": "checkout.session", "payment_status": "paid",
                         "status": "complete", "amount_total": 2000, "currency": "usd"});
    for (k, v) in extra.as_object().unwrap() {
        obj[k] = v.clone();
    }
    event(&event_id(), "checkout.session.completed", obj)
}

pub async fn checkout(gw: &Gateway, key: &str, body: Value) -> Value {
    let r = call(gw, "POST", "/api/v1/billing/checkout", key, &body).await;
    assert_eq!(r.status, 200, "{}", r.text());
    r.json()
}

pub fn field(pairs: &[(String, String)], k: &str) -> Option<String> {
    pairs.iter().find(|(a, _)| a == k).map(|(_, v)| v.clone())
}
