//! The webhook: every bad signature refused (the previous secret still good during a rotation),
//! 503 without a signing secret, and an event applied exactly once, even delivered 20 times at
//! once over two instances.

use serde_json::json;
use tollgate_testkit::stripe::{now_secs, sign};
use tollgate_testkit::*;

use crate::common::{
    applied, completed, config, deliver, deliver_raw, gateway, plans, PACK_GRANT, PRO_GRANT,
};

#[tokio::test]
async fn the_webhook_refuses_every_bad_signature_and_grants_nothing() {
    let stripe = FakeStripe::start().await;
    let gw = gateway(&stripe).await;
    let (uid, key) = gw.signup(&unique_email()).await;
    let ev = completed(
        "cs_sig",
        json!({"client_reference_id": uid, "metadata": {"plan": "pro"}}),
    );
    let payload = serde_json::to_vec(&ev).unwrap();
    let now = now_secs();
    let good = sign(&payload, WEBHOOK_SECRET, now);
    let mut altered = payload.clone();
    let at = altered.len() - 2;
    altered[at] = b' ';
    let cases: Vec<(&str, Vec<u8>, Option<String>)> = vec![
        (
            "wrong secret",
            payload.clone(),
            Some(sign(&payload, "whsec_wrong", now)),
        ),
        ("altered body", altered, Some(good.clone())),
        ("missing header", payload.clone(), None),
        (
            "malformed header",
            payload.clone(),
            Some("v1=deadbeef,t=".into()),
        ),
        ("garbage header", payload.clone(), Some("nonsense".into())),
        (
            "6 minutes old",
            payload.clone(),
            Some(sign(&payload, WEBHOOK_SECRET, now - 360)),
        ),
        (
            "6 minutes ahead",
            payload.clone(),
            Some(sign(&payload, WEBHOOK_SECRET, now + 360)),
        ),
    ];
    for (what, body, sig) in cases {
        let r = deliver_raw(&gw, &body, sig).await;
        let e = r.error(400, "invalid_request");
        assert!(
            e["error"]["message"]
                .as_str()
                .unwrap()
                .contains("Stripe-Signature"),
            "{what}: {e}"
        );
    }
    let me = gw.me(&key).await;
    assert_eq!(
        (me["plan"].as_str(), micros(&me["credits"])),
        (Some("free"), 100_000_000)
    );
    // The previous secret still verifies during a rotation; the event then applies once.
    let r = deliver_raw(&gw, &payload, Some(sign(&payload, WEBHOOK_SECRET_OLD, now))).await;
    assert_eq!(r.status, 200, "{}", r.text());
    let me = gw.me(&key).await;
    assert_eq!(me["plan"], "pro");
    assert_eq!(micros(&me["credits"]), 100_000_000 + PRO_GRANT);
}

#[tokio::test]
async fn without_a_signing_secret_the_webhook_answers_503_and_applies_nothing() {
    let stripe = FakeStripe::start().await;
    let fake = FakeOpenAi::start("p").await;
    let cfg = format!(
        "{}[billing]\nstripe_api_base = \"{}\"\nwebhook_secret_env = \"TOLLGATE_TEST_NO_SUCH_SECRET\"\n",
        one_model_config(&fake, "m-2024-01-01"),
        stripe.base()
    );
    let gw = Gateway::start_opts(
        tollgate_bin!(),
        &cfg,
        Opts {
            plans: Some(plans()),
            ..Opts::default()
        },
    )
    .await;
    let (uid, key) = gw.signup(&unique_email()).await;
    let ev = completed(
        "cs_nosecret",
        json!({"client_reference_id": uid, "metadata": {"plan": "pro"}}),
    );
    let r = deliver(&gw, &ev).await;
    r.error(503, "service_unavailable");
    assert_eq!(gw.me(&key).await["plan"], "free");
}

#[tokio::test]
async fn a_redelivered_event_grants_once_even_twenty_times_at_once_on_two_instances() {
    let stripe = FakeStripe::start().await;
    let one = gateway(&stripe).await;
    let two = one.second(tollgate_bin!(), &config(&stripe).await).await;
    let (uid, key) = one.signup(&unique_email()).await;
    let ev = completed(
        "cs_twice",
        json!({"client_reference_id": uid, "metadata": {"credits_pack": "small"}}),
    );
    applied(&one, &ev).await;
    let r = deliver(&one, &ev).await;
    assert_eq!(
        (r.status, r.json()["duplicate"].as_bool()),
        (200, Some(true))
    );
    assert_eq!(one.balance(&key).await, 100_000_000 + PACK_GRANT);
    // Another event about the same session grants nothing either.
    let again = completed(
        "cs_twice",
        json!({"client_reference_id": uid, "metadata": {"credits_pack": "small"}}),
    );
    let out = applied(&one, &again).await;
    assert!(out.contains("already applied"), "{out}");
    // 20 deliveries of one new event at once, spread over both instances.
    let ev = completed(
        "cs_storm",
        json!({"client_reference_id": uid, "metadata": {"plan": "pro"}}),
    );
    let payload = serde_json::to_vec(&ev).unwrap();
    let sig = sign(&payload, WEBHOOK_SECRET, now_secs());
    let mut tasks = Vec::new();
    for i in 0..20 {
        let addr = if i % 2 == 0 { one.addr } else { two.addr };
        let (payload, sig) = (payload.clone(), sig.clone());
        tasks.push(tokio::spawn(async move {
            let h = [
                ("Stripe-Signature", sig.as_str()),
                ("Content-Type", "application/json"),
            ];
            request(addr, "POST", "/api/v1/billing/webhook", &h, &payload).await
        }));
    }
    let mut fresh = 0;
    for t in tasks {
        let r = t.await.unwrap();
        assert_eq!(r.status, 200, "{}", r.text());
        if r.json()["duplicate"] == false {
            fresh += 1;
        }
    }
    assert_eq!(fresh, 1, "exactly one delivery applied the event");
    let me = one.me(&key).await;
    assert_eq!(me["plan"], "pro");
    assert_eq!(micros(&me["credits"]), 100_000_000 + PACK_GRANT + PRO_GRANT);
    assert_eq!(
        two.balance(&key).await,
        100_000_000 + PACK_GRANT + PRO_GRANT
    );
}
