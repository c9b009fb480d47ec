//! Whose payment it is: identity steps a–d in order (client reference, session key, the payer's
//! e-mail, else a new anonymous account), and the operator assigning an anonymous payment.

use serde_json::json;
use tollgate_testkit::stripe::{event, event_id};
use tollgate_testkit::*;

use crate::common::{applied, call, checkout, completed, field, gateway, PACK_GRANT, PRO_GRANT};

#[tokio::test]
async fn each_identity_step_matches_in_order_and_the_operator_assigns_anonymous_payments() {
    let stripe = FakeStripe::start().await;
    let gw = gateway(&stripe).await;
    let (a_uid, a_key) = gw.signup(&unique_email()).await;
    let c_email = unique_email();
    let (_c_uid, c_key) = gw.signup(&c_email).await;
    // (a) client_reference_id, even when the payer's e-mail names another account.
    let out = applied(
        &gw,
        &completed(
            "cs_a",
            json!({"client_reference_id": a_uid,
        "customer_details": {"email": c_email}, "metadata": {"credits_pack": "small"}}),
        ),
    )
    .await;
    assert!(out.contains("matched by client_reference_id"), "{out}");
    assert_eq!(gw.balance(&a_key).await, 100_000_000 + PACK_GRANT);
    assert_eq!(gw.balance(&c_key).await, 100_000_000);
    // (b) the session key of a checkout we created (no client reference on the event).
    let (b_uid, b_key) = gw.signup(&unique_email()).await;
    checkout(&gw, &b_key, json!({"plan": "pro"})).await;
    let skey = field(&stripe.last_checkout(), "metadata[session_key]").unwrap();
    let out = applied(
        &gw,
        &completed(
            "cs_b_from_elsewhere",
            json!({"metadata": {"session_key": skey},
        "customer": "cus_b", "subscription": "sub_b"}),
        ),
    )
    .await;
    assert!(
        out.contains("matched by session_key") && out.contains(&b_uid),
        "{out}"
    );
    let me = gw.me(&b_key).await;
    assert_eq!(
        (me["plan"].as_str(), micros(&me["credits"])),
        (Some("pro"), 100_000_000 + PRO_GRANT)
    );
    // (c) the payer's e-mail, exactly (sign-up stores e-mails lower-cased).
    let out = applied(
        &gw,
        &completed(
            "cs_c",
            json!({"customer_details": {"email": c_email.to_uppercase()},
        "metadata": {"credits_pack": "small"}}),
        ),
    )
    .await;
    assert!(out.contains("matched by email"), "{out}");
    assert_eq!(gw.balance(&c_key).await, 100_000_000 + PACK_GRANT);
    // A user id in metadata names nobody.
    let stranger = format!("stranger-{}", unique_email());
    let out = applied(
        &gw,
        &completed(
            "cs_meta",
            json!({"metadata": {"plan": "pro", "user_id": a_uid},
        "customer_details": {"email": stranger}, "customer": "cus_anon", "subscription": "sub_anon"}),
        ),
    )
    .await;
    assert!(out.contains("matched by anonymous"), "{out}");
    assert_eq!(
        gw.balance(&a_key).await,
        100_000_000 + PACK_GRANT,
        "a is untouched"
    );
    // (d) nobody: a new anonymous account holds the plan and credits, for the operator.
    let r = call(
        &gw,
        "GET",
        "/api/v1/admin/billing/unclaimed",
        ADMIN_TOKEN,
        &json!(null),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text());
    let list = r.json()["data"].as_array().unwrap().clone();
    let anon = list
        .iter()
        .find(|u| u["payer_email"] == stranger.as_str())
        .unwrap()
        .clone();
    assert_eq!(
        (anon["plan"].as_str(), micros(&anon["credits"])),
        (Some("pro"), PRO_GRANT)
    );
    let id = anon["id"].as_str().unwrap();
    // Users cannot see or assign it.
    call(
        &gw,
        "GET",
        "/api/v1/admin/billing/unclaimed",
        &a_key,
        &json!(null),
    )
    .await
    .error(401, "authentication_error");
    let path = format!("/api/v1/admin/billing/unclaimed/{id}/assign");
    call(&gw, "POST", &path, &a_key, &json!({"user_id": a_uid}))
        .await
        .error(401, "authentication_error");
    // Bad targets move nothing.
    call(
        &gw,
        "POST",
        &path,
        ADMIN_TOKEN,
        &json!({"user_id": "usr_nobody"}),
    )
    .await
    .error(404, "not_found");
    call(&gw, "POST", &path, ADMIN_TOKEN, &json!({}))
        .await
        .error(400, "invalid_request");
    call(
        &gw,
        "POST",
        "/api/v1/admin/billing/unclaimed/usr_nobody/assign",
        ADMIN_TOKEN,
        &json!({"user_id": a_uid}),
    )
    .await
    .error(404, "not_found");
    let (t_uid, t_key) = gw.signup(&unique_email()).await;
    let r = call(&gw, "POST", &path, ADMIN_TOKEN, &json!({"user_id": t_uid})).await;
    assert_eq!(r.status, 200, "{}", r.text());
    let me = gw.me(&t_key).await;
    assert_eq!(
        (me["plan"].as_str(), micros(&me["credits"])),
        (Some("pro"), 100_000_000 + PRO_GRANT)
    );
    // Assigned once: gone from the list, a second assignment finds nothing.
    call(&gw, "POST", &path, ADMIN_TOKEN, &json!({"user_id": a_uid}))
        .await
        .error(404, "not_found");
    let list = call(
        &gw,
        "GET",
        "/api/v1/admin/billing/unclaimed",
        ADMIN_TOKEN,
        &json!(null),
    )
    .await
    .json();
    assert!(list["data"]
        .as_array()
        .unwrap()
        .iter()
        .all(|u| u["id"] != id));
    assert_eq!(gw.balance(&a_key).await, 100_000_000 + PACK_GRANT);
    // The payment moved with it.
    let hist = call(&gw, "GET", "/api/v1/billing", &t_key, &json!(null))
        .await
        .json();
    assert_eq!(hist["payments"][0]["reference"], "cs_meta");
    // Its subscription moved too: the next renewal credits the account it was assigned to.
    let renewal = event(
        &event_id(),
        "invoice.paid",
        json!({"id": "in_anon_2", "object": "invoice", "customer": "cus_anon", "subscription": "sub_anon",
               "billing_reason": "subscription_cycle", "amount_paid": 2000, "currency": "usd",
               "lines": {"data": [{"price": {"id": "price_pro"}}]}}),
    );
    applied(&gw, &renewal).await;
    assert_eq!(gw.balance(&t_key).await, 100_000_000 + 2 * PRO_GRANT);
}
