//! A subscription over time: renewals grant again, refunds and disputes take back (clamped at
//! the balance), cancellation returns to free, an update follows the plan, and the Billing
//! Portal needs a customer.

use serde_json::json;
use tollgate_testkit::stripe::{event, event_id, now_secs};
use tollgate_testkit::*;

use crate::common::{applied, call, checkout, completed, deliver, field, gateway, PRO_GRANT};

#[tokio::test]
async fn renewals_grant_again_cancellation_returns_to_free_and_refunds_take_back_clamped() {
    let stripe = FakeStripe::start().await;
    let gw = gateway(&stripe).await;
    let (uid, key) = gw.signup(&unique_email()).await;
    let sid = checkout(&gw, &key, json!({"plan": "pro"})).await["session_id"]
        .as_str()
        .unwrap()
        .to_string();
    applied(
        &gw,
        &completed(
            &sid,
            json!({"client_reference_id": uid, "customer": "cus_r",
        "subscription": "sub_r", "invoice": "in_first", "amount_total": 2000}),
        ),
    )
    .await;
    let me = gw.me(&key).await;
    assert_eq!(
        (me["plan"].as_str(), micros(&me["credits"])),
        (Some("pro"), 100_000_000 + PRO_GRANT)
    );
    // Rate limits follow the plan at once on this instance.
    let r = gw
        .chat_as(
            Some(&key),
            &json!({"model": "m-2024-01-01", "messages": user("hi")}),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.header("x-ratelimit-limit-requests"), Some("7200"));
    let spent = 100_000_000 + PRO_GRANT - gw.balance(&key).await;
    let invoice = |id: &str, reason: &str| {
        event(
            &event_id(),
            "invoice.paid",
            json!({"id": id, "object": "invoice", "customer": "cus_r",
            "subscription": "sub_r", "billing_reason": reason, "amount_paid": 2000, "currency": "usd",
            "payment_intent": format!("pi_{id}"),
            "lines": {"data": [{"price": {"id": "price_pro"}, "period": {"end": now_secs() + 30 * 86400}}]}}),
        )
    };
    // The first invoice is the checkout's: nothing more.
    applied(&gw, &invoice("in_first", "subscription_create")).await;
    assert_eq!(gw.balance(&key).await, 100_000_000 + PRO_GRANT - spent);
    // A renewal grants again, once.
    let renewal = invoice("in_second", "subscription_cycle");
    let out = applied(&gw, &renewal).await;
    assert!(out.contains("renewal"), "{out}");
    assert_eq!(deliver(&gw, &renewal).await.json()["duplicate"], true);
    let after_renewal = 100_000_000 + 2 * PRO_GRANT - spent;
    assert_eq!(gw.balance(&key).await, after_renewal);
    let hist = call(&gw, "GET", "/api/v1/billing", &key, &json!(null))
        .await
        .json();
    assert_eq!(hist["subscription"]["status"], "active");
    assert!(hist["subscription"]["renews_at"].as_i64().unwrap() > now_secs());
    assert_eq!(hist["payments"].as_array().unwrap().len(), 2);
    // A partial refund of the renewal takes back that share; a full one the rest, once.
    let charge = |refunded: i64| {
        event(
            &event_id(),
            "charge.refunded",
            json!({"id": "ch_2", "object": "charge", "amount": 2000,
            "amount_refunded": refunded, "payment_intent": "pi_in_second", "currency": "usd"}),
        )
    };
    // Two partial refunds delivered at once (cumulative 500, then 1500 of 2000): 3/4 in all,
    // whichever lands first.
    let (first, second) = (charge(500), charge(1500));
    let (one, two) = tokio::join!(deliver(&gw, &first), deliver(&gw, &second));
    assert_eq!((one.status, two.status), (200, 200));
    assert_eq!(gw.balance(&key).await, after_renewal - PRO_GRANT * 3 / 4);
    applied(&gw, &charge(2000)).await;
    assert_eq!(gw.balance(&key).await, after_renewal - PRO_GRANT);
    let out = applied(&gw, &charge(2000)).await;
    assert!(out.contains("nothing more"), "{out}");
    // A dispute of the first payment after the credits were spent: clamped at the balance.
    gw.admin_credits(&uid, -((gw.balance(&key).await - 3_000_000) as f64 / 1e6))
        .await;
    let dispute = event(
        &event_id(),
        "charge.dispute.created",
        json!({"id": "dp_1", "object": "dispute",
        "charge": "ch_1", "amount": 2000, "payment_intent": "pi_in_first"}),
    );
    // The first invoice's PaymentIntent was recorded on the checkout's payment: the dispute
    // (which names only the charge and its PaymentIntent) finds it.
    applied(&gw, &dispute).await;
    assert_eq!(gw.balance(&key).await, 0);
    // Cancellation: back to free, the key works under free limits, credits stay.
    gw.admin_credits(&uid, 5.0).await;
    let gone = event(
        &event_id(),
        "customer.subscription.deleted",
        json!({"id": "sub_r",
        "object": "subscription", "customer": "cus_r", "status": "canceled"}),
    );
    let out = applied(&gw, &gone).await;
    assert!(out.contains("plan free"), "{out}");
    let me = gw.me(&key).await;
    assert_eq!(
        (me["plan"].as_str(), micros(&me["credits"])),
        (Some("free"), 5_000_000)
    );
    let r = gw
        .chat_as(
            Some(&key),
            &json!({"model": "m-2024-01-01", "messages": user("hi")}),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.header("x-ratelimit-limit-requests"), Some("120"));
    // An update that arrives after the end brings nothing back.
    let late = event(
        &event_id(),
        "customer.subscription.updated",
        json!({"id": "sub_r", "customer": "cus_r", "status": "active",
               "items": {"data": [{"price": {"id": "price_pro"}}]}}),
    );
    assert!(applied(&gw, &late).await.contains("ended"));
    assert_eq!(gw.me(&key).await["plan"], "free");
    // The end of a subscription the account no longer has changes nothing.
    let old = event(
        &event_id(),
        "customer.subscription.deleted",
        json!({"id": "sub_old", "customer": "cus_r"}),
    );
    assert!(applied(&gw, &old).await.contains("no account"));
}

#[tokio::test]
async fn a_subscription_update_follows_the_plan_and_the_portal_needs_a_customer() {
    let stripe = FakeStripe::start().await;
    let gw = gateway(&stripe).await;
    let (uid, key) = gw.signup(&unique_email()).await;
    call(&gw, "POST", "/api/v1/billing/portal", &key, &json!({}))
        .await
        .error(400, "invalid_request");
    applied(
        &gw,
        &completed(
            "cs_u",
            json!({"client_reference_id": uid, "customer": "cus_u",
        "subscription": "sub_u", "metadata": {"plan": "pro"}}),
        ),
    )
    .await;
    let upd = event(
        &event_id(),
        "customer.subscription.updated",
        json!({"id": "sub_u", "object": "subscription",
        "customer": "cus_u", "status": "active", "items": {"data": [{"price": {"id": "price_smb"},
        "current_period_end": now_secs() + 86400}]}}),
    );
    assert!(applied(&gw, &upd).await.contains("plan smb"));
    assert_eq!(gw.me(&key).await["plan"], "smb");
    let r = call(&gw, "POST", "/api/v1/billing/portal", &key, &json!({})).await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert!(r.json()["portal_url"].as_str().unwrap().ends_with("cus_u"));
    let req = stripe.requests().pop().unwrap();
    assert_eq!(req.path, "/v1/billing_portal/sessions");
    stripe.set_mode(StripeMode::Fail);
    call(&gw, "POST", "/api/v1/billing/portal", &key, &json!({}))
        .await
        .error(502, "upstream_error");
    // A checkout for a known customer names the customer, not an e-mail.
    stripe.set_mode(StripeMode::Ok);
    checkout(&gw, &key, json!({"credits_pack": "small"})).await;
    let f = stripe.last_checkout();
    assert_eq!(field(&f, "customer").as_deref(), Some("cus_u"));
    assert_eq!(field(&f, "customer_email"), None);
    // A second subscription while one is active would bill twice: refused, pointing to the portal.
    let r = call(
        &gw,
        "POST",
        "/api/v1/billing/checkout",
        &key,
        &json!({"plan": "pro"}),
    )
    .await;
    let e = r.error(400, "invalid_request");
    assert!(
        e["error"]["message"].as_str().unwrap().contains("portal"),
        "{e}"
    );
}
