//! Garbage and unknown events never get a 5xx and write nothing; an unpaid session waits for its
//! payment, and Stripe down when it must be asked answers 503 so that Stripe delivers again.

use std::time::Duration;

use serde_json::json;
use tollgate_testkit::stripe::{event, event_id, now_secs, sign};
use tollgate_testkit::*;

use crate::common::{applied, completed, deliver, deliver_raw, gateway, PACK_GRANT, PRO_GRANT};

#[tokio::test]
async fn garbage_and_unknown_events_never_get_a_5xx_and_write_nothing() {
    let stripe = FakeStripe::start().await;
    let gw = gateway(&stripe).await;
    let email = unique_email();
    let (_uid, key) = gw.signup(&email).await;
    let signed = |body: &[u8]| sign(body, WEBHOOK_SECRET, now_secs());
    for body in [
        &b"{nope"[..],
        b"[]",
        b"{}",
        br#"{"id":"evt_x"}"#,
        br#"{"id":"evt_y","type":"checkout.session.completed","data":{"object":"str"}}"#,
    ] {
        let r = deliver_raw(&gw, body, Some(signed(body))).await;
        r.error(400, "invalid_request");
    }
    // Unknown types are recorded, once.
    let unknown = event(&event_id(), "customer.created", json!({"id": "cus_x"}));
    assert!(applied(&gw, &unknown).await.contains("not a type"));
    assert_eq!(deliver(&gw, &unknown).await.json()["duplicate"], true);
    // A session that is not ours and names nothing we sell (Stripe does not know it either).
    let out = applied(
        &gw,
        &completed("cs_unknown", json!({"customer_details": {"email": email}})),
    )
    .await;
    assert!(out.contains("nothing granted"), "{out}");
    // Events for unknown subscriptions, invoices and charges.
    for ev in [
        event(
            &event_id(),
            "invoice.paid",
            json!({"id": "in_x", "billing_reason": "subscription_cycle", "subscription": "sub_x"}),
        ),
        event(
            &event_id(),
            "customer.subscription.updated",
            json!({"id": "sub_x", "status": "active"}),
        ),
        event(
            &event_id(),
            "charge.refunded",
            json!({"id": "ch_x", "payment_intent": "pi_x", "amount": 1, "amount_refunded": 1}),
        ),
        event(&event_id(), "charge.dispute.created", json!({"id": "dp_x"})),
        event(
            &event_id(),
            "invoice.paid",
            json!({"billing_reason": "subscription_cycle"}),
        ),
    ] {
        let r = deliver(&gw, &ev).await;
        assert_eq!(r.status, 200, "{}", r.text());
        assert_eq!(r.json()["duplicate"], false);
    }
    // None of it changed the account.
    let me = gw.me(&key).await;
    assert_eq!(
        (me["plan"].as_str(), micros(&me["credits"])),
        (Some("free"), 100_000_000)
    );
    // An unpaid session waits for its async payment; then the payment link's line items name pro.
    stripe.add_session("cs_link", "price_pro");
    let wait = completed(
        "cs_link",
        json!({"payment_status": "unpaid", "customer_details": {"email": email}}),
    );
    assert!(applied(&gw, &wait).await.contains("unpaid"));
    assert_eq!(gw.me(&key).await["plan"], "free");
    let mut paid = completed("cs_link", json!({"customer_details": {"email": email}}));
    paid["type"] = "checkout.session.async_payment_succeeded".into();
    let out = applied(&gw, &paid).await;
    assert!(
        out.contains("plan pro") && out.contains("matched by email"),
        "{out}"
    );
    let me = gw.me(&key).await;
    assert_eq!(
        (me["plan"].as_str(), micros(&me["credits"])),
        (Some("pro"), 100_000_000 + PRO_GRANT)
    );
    // Stripe down while the plan must be read from it: 503, so Stripe delivers again; not recorded.
    stripe.set_mode(StripeMode::Fail);
    let later = completed("cs_later", json!({"customer_details": {"email": email}}));
    let r = deliver(&gw, &later).await;
    assert_eq!(r.status, 503, "{}", r.text());
    stripe.set_mode(StripeMode::Ok);
    stripe.add_session("cs_later", "price_small");
    applied(&gw, &later).await;
    assert_eq!(gw.balance(&key).await, 100_000_000 + PRO_GRANT + PACK_GRANT);
    assert!(gw.is_healthy().await);
    tokio::time::sleep(Duration::from_millis(10)).await;
}
