//! The events and what sends them: a Stripe payment applied to the wallet
//! (`payment.received`), the operator approving a developer's tool server
//! (`tool_server.status_changed`), a key about to expire and expired (`key.expiring`,
//! `key.expired`), and a balance falling below an endpoint's threshold (`balance.low`, once
//! per crossing, again after it was back above).

use std::time::Duration;

use serde_json::json;
use tollgate_testkit::stripe::{event, event_id, now_secs, sign};
use tollgate_testkit::*;

use super::{ask, config, endpoint, gateway, WAIT};

#[tokio::test]
async fn a_stripe_payment_sends_payment_received() {
    let stripe = FakeStripe::start().await;
    let billing = format!(
        "[billing]\nstripe_api_base = \"{}\"\nsecret_key_env = \"TOLLGATE_TEST_STRIPE_KEY\"\nwebhook_secret_env = \"TOLLGATE_TEST_STRIPE_WEBHOOK_SECRET\"\napi_timeout = 1\n[billing.credit_packs.small]\ncredits = 1000\nstripe_price = \"price_small\"\n",
        stripe.base()
    );
    let (_f, cfg) = config(&billing).await;
    let gw = Gateway::start(tollgate_bin!(), &cfg).await;
    let (uid, key) = gw.signup(&unique_email()).await;
    let rx = Receiver::start().await;
    endpoint(&gw, &key, &rx.url("/pay"), &["payment.received"]).await;
    let session = format!("cs_{}", event_id());
    let ev = event(
        &event_id(),
        "checkout.session.completed",
        json!({"id": session, "object": "checkout.session", "payment_status": "paid",
               "status": "complete", "amount_total": 900, "currency": "usd",
               "client_reference_id": uid, "metadata": {"credits_pack": "small"}}),
    );
    let payload = serde_json::to_vec(&ev).unwrap();
    let sig = sign(&payload, WEBHOOK_SECRET, now_secs());
    let headers = [
        ("Content-Type", "application/json"),
        ("Stripe-Signature", sig.as_str()),
    ];
    let r = request(
        gw.addr,
        "POST",
        "/api/v1/billing/webhook",
        &headers,
        &payload,
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text());
    // Stripe delivering it again changes nothing and sends nothing more.
    let r = request(
        gw.addr,
        "POST",
        "/api/v1/billing/webhook",
        &headers,
        &payload,
    )
    .await;
    assert_eq!(r.json()["duplicate"], true);
    let d = rx.wait_for("payment.received", WAIT).await;
    let v = d.json();
    assert_eq!(v["account_id"], uid.as_str());
    assert_eq!(v["data"]["credits"], json!(1000.0));
    assert_eq!(v["data"]["credits_pack"], "small");
    assert_eq!(v["data"]["kind"], "checkout");
    assert_eq!(v["data"]["amount"], 900);
    assert_eq!(v["data"]["stripe_event_id"], ev["id"]);
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(rx.of_type("payment.received").len(), 1);
}

#[tokio::test]
async fn approving_a_tool_server_tells_its_developer() {
    let (_f, cfg) = config("[mcp]\nallow_private_upstreams = true\ncall_timeout = 2\n").await;
    let gw = Gateway::start(tollgate_bin!(), &cfg).await;
    let tools = FakeToolServer::start().await;
    let (_dev, dev_key) = gw.signup(&unique_email()).await;
    let rx = Receiver::start().await;
    endpoint(
        &gw,
        &dev_key,
        &rx.url("/t"),
        &["tool_server.status_changed"],
    )
    .await;
    let slug = format!("wh-{}", event_id().to_lowercase().replace('_', "-"));
    let slug: String = slug.chars().take(40).collect();
    let r = gw
        .api_as(
            &dev_key,
            "POST",
            "/api/v1/mcp/services",
            &json!({"slug": slug, "upstream_url": tools.url(), "default_credits": 1}),
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.text());
    tokio::time::sleep(Duration::from_millis(300)).await;
    let approve = gw
        .with_auth(
            "POST",
            &format!("/api/v1/admin/mcp/services/{slug}/approve"),
            &format!("Bearer {ADMIN_TOKEN}"),
            b"{}",
        )
        .await;
    assert_eq!(approve.status, 200, "{}", approve.text());
    let d = rx.wait_for("tool_server.status_changed", WAIT).await;
    let data = &d.json()["data"];
    assert_eq!(
        (
            data["slug"].as_str(),
            data["from"].as_str(),
            data["to"].as_str()
        ),
        (Some(slug.as_str()), Some("pending"), Some("live")),
        "{data}"
    );
}

#[tokio::test]
async fn keys_about_to_expire_and_expired_are_told_once() {
    let (_f, gw) = gateway().await;
    let (_uid, key) = gw.signup(&unique_email()).await;
    let rx = Receiver::start().await;
    endpoint(&gw, &key, &rx.url("/k"), &["key.expiring", "key.expired"]).await;
    let now = now_secs();
    let mut ids = Vec::new();
    for (name, at) in [
        ("soon", now + 3),
        ("in-three-days", now + 3 * 86_400),
        ("later", now + 30 * 86_400),
    ] {
        let r = gw
            .api_as(
                &key,
                "POST",
                "/api/v1/keys",
                &json!({"name": name, "expires_at": at}),
            )
            .await;
        assert_eq!(r.status, 201, "{}", r.text());
        ids.push(r.json()["id"].as_str().unwrap().to_owned());
    }
    let got = rx
        .wait_until(WAIT, "key.expiring twice and key.expired once", |d| {
            d.iter()
                .filter(|d| d.json()["type"] == "key.expiring")
                .count()
                >= 2
                && d.iter().any(|d| d.json()["type"] == "key.expired")
        })
        .await;
    // The sweep runs every second: a few more of them send nothing again.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let of = |t: &str| -> Vec<String> {
        rx.of_type(t)
            .iter()
            .map(|d| d.json()["data"]["key_id"].as_str().unwrap().to_owned())
            .collect()
    };
    let mut expiring = of("key.expiring");
    expiring.sort();
    let mut want = vec![ids[0].clone(), ids[1].clone()];
    want.sort();
    assert_eq!(expiring, want, "the key 30 days out is not told");
    assert_eq!(of("key.expired"), vec![ids[0].clone()]);
    let expired = got
        .iter()
        .find(|d| d.json()["type"] == "key.expired")
        .unwrap()
        .json();
    assert_eq!(expired["data"]["name"], "soon");
    assert_eq!(expired["data"]["expires_at"], now + 3);
}

#[tokio::test]
async fn a_balance_below_its_threshold_is_told_once_per_crossing() {
    let (_f, gw) = gateway().await;
    // A new account has 100 credits; each request costs 0.21.
    let (uid, key) = gw.signup(&unique_email()).await;
    let rx = Receiver::start().await;
    let r = super::register(
        &gw,
        &key,
        json!({"url": rx.url("/low"), "events": ["balance.low"], "balance_threshold": 99.5}),
    )
    .await;
    assert_eq!(r.status, 201, "{}", r.text());
    assert_eq!(r.json()["balance_threshold"], json!(99.5));
    for _ in 0..2 {
        assert_eq!(ask(&gw, &key).await, 200);
    }
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert!(
        rx.of_type("balance.low").is_empty(),
        "99.58 is not below 99.5"
    );
    for _ in 0..4 {
        assert_eq!(ask(&gw, &key).await, 200);
    }
    let d = rx.wait_for("balance.low", WAIT).await;
    let v = d.json();
    assert_eq!(v["account_id"], uid.as_str());
    assert_eq!(v["data"]["threshold"], json!(99.5));
    assert!(v["data"]["balance"].as_f64().unwrap() < 99.5, "{v}");
    // Further charges below it send nothing more.
    for _ in 0..3 {
        assert_eq!(ask(&gw, &key).await, 200);
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(rx.of_type("balance.low").len(), 1);
    // Back above (credits added), then below again (taken back): a second event.
    gw.admin_credits(&uid, 5.0).await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(rx.of_type("balance.low").len(), 1);
    gw.admin_credits(&uid, -5.0).await;
    rx.wait_until(WAIT, "a second balance.low", |d| {
        d.iter()
            .filter(|d| d.json()["type"] == "balance.low")
            .count()
            == 2
    })
    .await;
}
