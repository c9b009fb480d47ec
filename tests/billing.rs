//! Plans and credits sold through Stripe Checkout, against a fake Stripe API: checkout bound to
//! the caller, the webhook's signature, identity steps a–d, exactly-once delivery (twice, and 20
//! times at once over two instances), renewals, cancellation, refunds and disputes, anonymous
//! accounts assigned by the operator, garbage that never gets a 5xx. SQLite, and Postgres +
//! Redis when set.

use std::time::Duration;

use serde_json::{json, Value};
use tollgate_testkit::stripe::{event, event_id, now_secs, sign};
use tollgate_testkit::*;

const PRO_GRANT: i64 = 10_000 * 1_000_000;
const PACK_GRANT: i64 = 1_000 * 1_000_000;

fn plans() -> String {
    "[plans.guest]\nrequests_per_hour = 100000\nrequests_per_day = 100000\n\
     [plans.pro]\ngrant_credits = 10000\nstripe_price = \"price_pro\"\n\
     [plans.smb]\ngrant_credits = 50000\nstripe_price = \"price_smb\"\nrecurring = false\n"
        .into()
}

fn billing(stripe: &FakeStripe) -> String {
    format!(
        "[billing]\nstripe_api_base = \"{}\"\nsecret_key_env = \"TOLLGATE_TEST_STRIPE_KEY\"\n\
         webhook_secret_env = \"TOLLGATE_TEST_STRIPE_WEBHOOK_SECRET\"\napi_timeout = 1\n\
         [billing.credit_packs.small]\ncredits = 1000\nstripe_price = \"price_small\"\n",
        stripe.base()
    )
}

async fn gateway_on(stripe: &FakeStripe, opts: Opts) -> Gateway {
    let fake = FakeOpenAi::start("p").await;
    let cfg = format!(
        "{FAST_TIMEOUTS}{}{}{}",
        provider("p", &[&fake], ""),
        model("m-2024-01-01", "p", "economy", ""),
        billing(stripe)
    );
    Gateway::start_opts(
        tollgate_bin!(),
        &cfg,
        Opts {
            plans: Some(plans()),
            ..opts
        },
    )
    .await
}

async fn gateway(stripe: &FakeStripe) -> Gateway {
    gateway_on(stripe, Opts::default()).await
}

async fn call(gw: &Gateway, method: &str, path: &str, key: &str, body: &Value) -> Response {
    let b = if body.is_null() {
        Vec::new()
    } else {
        serde_json::to_vec(body).unwrap()
    };
    gw.with_auth(method, path, &format!("Bearer {key}"), &b)
        .await
}

/// Delivers `payload` signed with `secret` at `t`.
async fn deliver_raw(gw: &Gateway, payload: &[u8], sig: Option<String>) -> Response {
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

async fn deliver(gw: &Gateway, ev: &Value) -> Response {
    let payload = serde_json::to_vec(ev).unwrap();
    deliver_raw(
        gw,
        &payload,
        Some(sign(&payload, WEBHOOK_SECRET, now_secs())),
    )
    .await
}

/// Delivers and expects it applied (200, not a duplicate); returns the outcome.
async fn applied(gw: &Gateway, ev: &Value) -> String {
    let r = deliver(gw, ev).await;
    assert_eq!(r.status, 200, "{}", r.text());
    let v = r.json();
    assert_eq!(v["duplicate"], false, "{v}");
    v["outcome"].as_str().unwrap().to_string()
}

fn completed(session: &str, extra: Value) -> Value {
    let mut obj = json!({"id": session, "object": "checkout.session", "payment_status": "paid",
                         "status": "complete", "amount_total": 2000, "currency": "usd"});
    for (k, v) in extra.as_object().unwrap() {
        obj[k] = v.clone();
    }
    event(&event_id(), "checkout.session.completed", obj)
}

async fn checkout(gw: &Gateway, key: &str, body: Value) -> Value {
    let r = call(gw, "POST", "/api/v1/billing/checkout", key, &body).await;
    assert_eq!(r.status, 200, "{}", r.text());
    r.json()
}

fn field(pairs: &[(String, String)], k: &str) -> Option<String> {
    pairs.iter().find(|(a, _)| a == k).map(|(_, v)| v.clone())
}

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

#[tokio::test]
async fn a_redelivered_event_grants_once_even_twenty_times_at_once_on_two_instances() {
    let stripe = FakeStripe::start().await;
    let one = gateway(&stripe).await;
    let two = gateway_on(
        &stripe,
        Opts {
            database_url: Some(one.config_db()),
            redis_prefix: one.redis_prefix(),
            no_account: true,
            ..Opts::default()
        },
    )
    .await;
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

#[tokio::test]
async fn without_a_signing_secret_the_webhook_answers_503_and_applies_nothing() {
    let stripe = FakeStripe::start().await;
    let fake = FakeOpenAi::start("p").await;
    let cfg = format!(
        "{FAST_TIMEOUTS}{}{}[billing]\nstripe_api_base = \"{}\"\nwebhook_secret_env = \"TOLLGATE_TEST_NO_SUCH_SECRET\"\n",
        provider("p", &[&fake], ""),
        model("m-2024-01-01", "p", "economy", ""),
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
