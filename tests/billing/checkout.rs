//! Checkout: a Stripe Checkout session bound to the caller (reference, session key, a fresh
//! idempotency key), and what is not sold, or not sold online, refused; Stripe failing: 502,
//! nothing stored.

use serde_json::json;
use tollgate_testkit::*;

use crate::common::{call, checkout, field, gateway};

#[tokio::test]
async fn checkout_creates_a_session_bound_to_the_caller_and_refuses_what_is_not_sold() {
    let stripe = FakeStripe::start().await;
    let gw = gateway(&stripe).await;
    let email = unique_email();
    let (uid, key) = gw.signup(&email).await;
    // No credentials: 401.
    let r = request(
        gw.addr,
        "POST",
        "/api/v1/billing/checkout",
        &[],
        br#"{"plan":"pro"}"#,
    )
    .await;
    r.error(401, "authentication_error");
    let v = checkout(&gw, &key, json!({"plan": "pro"})).await;
    assert_eq!(v["plan"], "pro");
    assert_eq!(v["mode"], "subscription");
    let sid = v["session_id"].as_str().unwrap().to_string();
    assert!(v["checkout_url"].as_str().unwrap().ends_with(&sid));
    let req = stripe
        .requests()
        .into_iter()
        .rev()
        .find(|r| r.path == "/v1/checkout/sessions")
        .unwrap();
    assert_eq!(
        req.header("authorization"),
        Some(format!("Bearer {FAKE_STRIPE_KEY}").as_str())
    );
    let idem = req.header("idempotency-key").unwrap().to_string();
    let f = stripe.last_checkout();
    assert_eq!(field(&f, "client_reference_id"), Some(uid.clone()));
    assert_eq!(field(&f, "customer_email"), Some(email.clone()));
    assert_eq!(field(&f, "metadata[plan]").as_deref(), Some("pro"));
    assert_eq!(
        field(&f, "line_items[0][price]").as_deref(),
        Some("price_pro")
    );
    assert_eq!(field(&f, "line_items[0][quantity]").as_deref(), Some("1"));
    assert_eq!(field(&f, "mode").as_deref(), Some("subscription"));
    assert!(field(&f, "success_url").unwrap().starts_with("http"));
    assert!(field(&f, "cancel_url").unwrap().starts_with("http"));
    assert!(f.iter().all(|(k, _)| !k.contains("user_id")), "{f:?}");
    let key1 = field(&f, "metadata[session_key]").unwrap();
    assert!(key1.len() >= 16);
    // Each checkout has its own session key and idempotency key.
    let v2 = checkout(&gw, &key, json!({"plan": "smb"})).await;
    assert_eq!(
        v2["mode"], "payment",
        "smb is sold as a one-off payment here"
    );
    let f2 = stripe.last_checkout();
    assert_ne!(field(&f2, "metadata[session_key]").unwrap(), key1);
    let last = stripe.requests().pop().unwrap();
    assert_ne!(last.header("idempotency-key").unwrap(), idem);
    // A credit pack: mode payment, the plan unchanged.
    let v3 = checkout(&gw, &key, json!({"credits_pack": "small"})).await;
    assert_eq!(
        (v3["mode"].as_str(), v3["plan"].as_str()),
        (Some("payment"), Some("free"))
    );
    assert_eq!(
        field(&stripe.last_checkout(), "metadata[credits_pack]").as_deref(),
        Some("small")
    );
    // What is not sold, or not sold online.
    for (body, needle) in [
        (json!({"plan": "gold"}), "unknown plan"),
        (json!({"plan": "free"}), "not sold"),
        (json!({"plan": "guest"}), "not sold"),
        (json!({"plan": "business"}), "contract"),
        (json!({"credits_pack": "huge"}), "unknown pack"),
        (json!({"plan": "pro", "credits_pack": "small"}), "not both"),
        (json!({}), "plan: is required"),
        (json!({"plan": 5}), "must be a string"),
    ] {
        let r = call(&gw, "POST", "/api/v1/billing/checkout", &key, &body).await;
        let e = r.error(400, "invalid_request");
        assert!(
            e["error"]["message"].as_str().unwrap().contains(needle),
            "{body}: {e}"
        );
    }
    let r = gw
        .with_auth(
            "POST",
            "/api/v1/billing/checkout",
            &format!("Bearer {key}"),
            b"{nope",
        )
        .await;
    r.error(400, "invalid_request");
    // Stripe failing or hanging: 502, nothing stored, nothing granted.
    let before = stripe.requests().len();
    for mode in [StripeMode::Fail, StripeMode::Hang] {
        stripe.set_mode(mode);
        let r = call(
            &gw,
            "POST",
            "/api/v1/billing/checkout",
            &key,
            &json!({"plan": "pro"}),
        )
        .await;
        r.error(502, "upstream_error");
    }
    assert_eq!(stripe.requests().len(), before + 2);
    stripe.set_mode(StripeMode::Ok);
    let me = gw.me(&key).await;
    assert_eq!(
        (me["plan"].as_str(), micros(&me["credits"])),
        (Some("free"), 100_000_000)
    );
    let hist = call(&gw, "GET", "/api/v1/billing", &key, &json!(null))
        .await
        .json();
    assert_eq!(hist["payments"], json!([]));
    assert!(gw.is_healthy().await);
}
