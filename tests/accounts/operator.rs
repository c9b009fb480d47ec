//! What the dashboard reads and the operator does in a browser session: `/api/v1/plans`, the
//! richer `/api/v1/auth/me` (limits, requests left, this month's spend, operator), and the admin
//! API under an operator's session (`[server] admin_emails`) with the cookie rules; accounts
//! found by e-mail. SQLite, and Postgres + Redis when set.

use serde_json::{json, Value};
use tollgate_testkit::*;

const OPS: &str = "ops-team@example.com";

async fn with_cookie(
    gw: &Gateway,
    method: &str,
    path: &str,
    cookie: &str,
    body: &Value,
) -> Response {
    let b = if body.is_null() {
        Vec::new()
    } else {
        serde_json::to_vec(body).unwrap()
    };
    request(
        gw.addr,
        method,
        path,
        &[("Cookie", cookie), ("Content-Type", "application/json")],
        &b,
    )
    .await
}

#[tokio::test]
async fn an_operators_session_uses_the_admin_api_and_nobody_elses_does() {
    let fake = FakeOpenAi::start("p").await;
    let cfg = one_model_config(&fake, "m-2024-01-01");
    let gw = Gateway::start_opts(
        tollgate_bin!(),
        &cfg,
        Opts {
            server_extra: format!("admin_emails = [\"{}\"]\n", OPS.to_uppercase()),
            plans: Some("[plans.guest]\nrequests_per_hour = 100000\nrequests_per_day = 100000\n[plans.free]\nrequests_per_hour = 10\nrequests_per_day = 20\n".into()),
            ..Opts::default()
        },
    )
    .await;
    // The operator's e-mail may be taken on Postgres by an earlier run's test: sign up if free.
    let _ = post_json(
        gw.addr,
        "/api/v1/auth/signup",
        &json!({"email": OPS, "password": "correct horse battery"}),
    )
    .await;
    let ops = gw.login(OPS).await;
    let user_email = unique_email();
    let (uid, key) = gw.signup(&user_email).await;
    let user_cookie = gw.login(&user_email).await;
    // me: operator or not, the plan's limits and what is left of them, this month's spend.
    let me = with_cookie(&gw, "GET", "/api/v1/auth/me", &ops, &Value::Null)
        .await
        .json();
    assert_eq!(me["operator"], true);
    let me = gw.me(&key).await;
    assert_eq!(me["operator"], false);
    assert_eq!(
        me["limits"],
        json!({"requests_per_hour": 10, "requests_per_day": 20})
    );
    assert_eq!(me["remaining"], json!({"hour": 10, "day": 20}));
    assert_eq!(me["spent_this_month"], 0.0);
    for _ in 0..3 {
        let r = gw
            .chat_as(
                Some(&key),
                &json!({"model": "m-2024-01-01", "messages": user("hi")}),
            )
            .await;
        assert_eq!(r.status, 200, "{}", r.text());
    }
    let me = gw.me(&key).await;
    assert_eq!(me["remaining"], json!({"hour": 7, "day": 17}));
    assert!(me["spent_this_month"].as_f64().unwrap() > 0.0);
    assert_eq!(
        micros(&me["credits"]) + micros(&me["spent_this_month"]),
        100_000_000,
        "spend and balance add up to the signup grant"
    );
    // The operator's session: find by e-mail (any case) or id, adjust, set a plan.
    let q = format!(
        "/api/v1/admin/accounts?q={}",
        user_email.to_uppercase().replace('@', "%40")
    );
    let found = with_cookie(&gw, "GET", &q, &ops, &Value::Null).await;
    assert_eq!(found.status, 200, "{}", found.text());
    assert_eq!(found.json()["user_id"], uid.as_str());
    let by_id = with_cookie(
        &gw,
        "GET",
        &format!("/api/v1/admin/accounts?q={uid}"),
        &ops,
        &Value::Null,
    )
    .await;
    assert_eq!(by_id.json()["email"], user_email.as_str());
    with_cookie(
        &gw,
        "GET",
        "/api/v1/admin/accounts?q=nobody%40example.org",
        &ops,
        &Value::Null,
    )
    .await
    .error(404, "not_found");
    with_cookie(&gw, "GET", "/api/v1/admin/accounts", &ops, &Value::Null)
        .await
        .error(400, "invalid_request");
    let r = with_cookie(
        &gw,
        "POST",
        &format!("/api/v1/admin/accounts/{uid}/credits"),
        &ops,
        &json!({"delta": 5, "reason": "goodwill"}),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text());
    let r = with_cookie(
        &gw,
        "PUT",
        &format!("/api/v1/admin/accounts/{uid}/plan"),
        &ops,
        &json!({"plan": "pro"}),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(gw.me(&key).await["limits"]["requests_per_hour"], 7200);
    // The cookie rules hold for the operator too: a form post or a foreign origin is refused.
    let path = format!("/api/v1/admin/accounts/{uid}/credits");
    let r = request(
        gw.addr,
        "POST",
        &path,
        &[
            ("Cookie", &ops),
            ("Content-Type", "application/x-www-form-urlencoded"),
        ],
        b"delta=5&reason=x",
    )
    .await;
    r.error(400, "invalid_request");
    let r = request(
        gw.addr,
        "POST",
        &path,
        &[
            ("Cookie", &ops),
            ("Content-Type", "application/json"),
            ("Origin", "https://evil.example"),
        ],
        br#"{"delta":5,"reason":"x"}"#,
    )
    .await;
    r.error(401, "authentication_error");
    // Anyone else's session, or no credentials: 401, nothing revealed.
    for cookie in [user_cookie.as_str(), "tg_session=forged"] {
        let r = with_cookie(&gw, "GET", &q, cookie, &Value::Null).await;
        r.error(401, "authentication_error");
        let r = with_cookie(
            &gw,
            "POST",
            &path,
            cookie,
            &json!({"delta": 5, "reason": "x"}),
        )
        .await;
        r.error(401, "authentication_error");
    }
    get(gw.addr, "/api/v1/admin/billing/unclaimed")
        .await
        .error(401, "authentication_error");
    // The admin token keeps working.
    let r = gw
        .with_auth("GET", &q, &format!("Bearer {ADMIN_TOKEN}"), b"")
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(
        gw.balance(&key).await,
        100_000_000 - micros(&gw.me(&key).await["spent_this_month"]) + 5_000_000
    );
}

#[tokio::test]
async fn plans_list_limits_credits_prices_and_what_is_for_sale() {
    let fake = FakeOpenAi::start("p").await;
    let stripe = FakeStripe::start().await;
    let cfg = format!(
        "{}[billing]\nstripe_api_base = \"{}\"\n[billing.credit_packs.small]\ncredits = 1000\nstripe_price = \"price_small\"\nprice_label = \"$10\"\n",
        one_model_config(&fake, "m-2024-01-01"),
        stripe.base()
    );
    let gw = Gateway::start_opts(
        tollgate_bin!(),
        &cfg,
        Opts {
            plans: Some("[plans.pro]\ngrant_credits = 10000\nstripe_price = \"price_pro\"\nprice_label = \"$20 / month\"\n[plans.team]\nrequests_per_hour = 50\n".into()),
            ..Opts::default()
        },
    )
    .await;
    let v = get(gw.addr, "/api/v1/plans").await;
    assert_eq!(v.status, 200, "{}", v.text());
    let v = v.json();
    assert_eq!(v["billing"], true);
    let plan = |n: &str| {
        v["plans"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["name"] == n)
            .cloned()
            .unwrap()
    };
    let names: Vec<&str> = v["plans"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["guest", "free", "pro", "smb", "business", "team"]);
    assert_eq!(plan("free")["grant_credits"], 100.0);
    assert_eq!(
        (
            plan("free")["requests_per_hour"].as_u64(),
            plan("free")["purchasable"].as_bool()
        ),
        (Some(120), Some(false))
    );
    let pro = plan("pro");
    assert_eq!(
        (
            pro["purchasable"].as_bool(),
            pro["price_label"].as_str(),
            pro["grant_credits"].as_f64(),
            pro["recurring"].as_bool()
        ),
        (Some(true), Some("$20 / month"), Some(10000.0), Some(true))
    );
    assert_eq!(plan("business")["purchasable"], false);
    assert_eq!(plan("team")["requests_per_hour"], 50);
    assert_eq!(
        v["credit_packs"],
        json!([{"name": "small", "credits": 1000.0, "price_label": "$10"}])
    );
}

#[tokio::test]
async fn a_signed_in_dashboard_reads_the_lists_without_spending_the_guest_limit() {
    let fake = FakeOpenAi::start("p").await;
    let cfg = one_model_config(&fake, "m-2024-01-01");
    let gw = Gateway::start_opts(
        tollgate_bin!(),
        &cfg,
        Opts {
            plans: Some("[plans.guest]\nrequests_per_hour = 2\nrequests_per_day = 2\n".into()),
            ..Opts::default()
        },
    )
    .await;
    let email = unique_email();
    gw.signup(&email).await;
    let cookie = gw.login(&email).await;
    for _ in 0..5 {
        for path in ["/v1/models/pricing", "/v1/models", "/v1/models/changelog"] {
            let r = request(gw.addr, "GET", path, &[("Cookie", &cookie)], b"").await;
            assert_eq!(r.status, 200, "{path}: {}", r.text());
        }
        // The changelog is an announcement: never counted, for anyone.
        assert_eq!(get(gw.addr, "/v1/models/changelog").await.status, 200);
    }
    // A guest's lists still count: two, then 429.
    for _ in 0..2 {
        assert_eq!(get(gw.addr, "/v1/models/pricing").await.status, 200);
    }
    get(gw.addr, "/v1/models/pricing")
        .await
        .error(429, "rate_limit_exceeded");
}
