//! Signing up: what a new account gets (credits, plan, a key shown once), and bad input that is
//! refused without writing anything. Runs on SQLite, and on Postgres when
//! `TOLLGATE_TEST_DATABASE_URL` is set.

use serde_json::{json, Value};
use tollgate_testkit::*;

#[tokio::test]
async fn signup_gives_100_credits_a_free_plan_and_a_key_shown_once() {
    let (_f, gw) = paid_and_free(tollgate_bin!()).await;
    let email = unique_email();
    let r = post_json(
        gw.addr,
        "/api/v1/auth/signup",
        &json!({"email": format!("  {}  ", email.to_uppercase()), "password": "longenough"}),
    )
    .await;
    assert_eq!(r.status, 201, "{}", r.text());
    let v = r.json();
    assert!(v["user_id"].as_str().unwrap().starts_with("usr_"));
    assert_eq!(v["credits"], 100.0);
    assert_eq!(v["plan"], "free");
    assert_eq!(v["email"], email, "e-mail normalised");
    let key = v["api_key"].as_str().unwrap();
    assert!(key.starts_with("tg_") && key.len() == 43, "{key}");

    let me = gw.me(key).await;
    assert_eq!(me["user_id"], v["user_id"]);
    assert_eq!(me["credits"], 100.0);
    assert_eq!(me["plan"], "free");
    assert_eq!(me["email"], email);

    // The key is never shown again.
    let list = gw
        .with_auth("GET", "/api/v1/keys", &format!("Bearer {key}"), b"")
        .await;
    assert_eq!(list.status, 200);
    assert!(!list.text().contains(key));
    let k = &list.json()["data"][0];
    assert_eq!(k["prefix"], &key[..8]);
    assert_eq!(k["revoked"], false);
    for f in ["id", "name", "created_at", "last_used_at"] {
        assert!(k.get(f).is_some(), "{f}");
    }
    assert!(k.get("key").is_none() && k.get("hash").is_none());
}

#[tokio::test]
async fn signup_rejects_bad_input_and_writes_nothing() {
    let (_f, gw) = paid_and_free(tollgate_bin!()).await;
    let email = unique_email();
    let cases: Vec<(Value, u16, &str)> = vec![
        (json!({"password": "longenough"}), 400, "email:"),
        (json!({"email": email}), 400, "password:"),
        (json!({"email": 5, "password": "longenough"}), 400, "email:"),
        (json!({"email": email, "password": ["x"]}), 400, "password:"),
        (
            json!({"email": "not-an-email", "password": "longenough"}),
            400,
            "email:",
        ),
        (
            json!({"email": "a@b", "password": "longenough"}),
            400,
            "email:",
        ),
        (
            json!({"email": "a b@c.com", "password": "longenough"}),
            400,
            "email:",
        ),
        (
            json!({"email": email, "password": "short"}),
            400,
            "password:",
        ),
    ];
    for (body, status, prefix) in cases {
        let r = post_json(gw.addr, "/api/v1/auth/signup", &body).await;
        let v = r.error(status, "invalid_request");
        assert!(
            v["error"]["message"].as_str().unwrap().starts_with(prefix),
            "{body}: {v}"
        );
    }
    for raw in [&b"{\"email\":"[..], b"[1,2]", b""] {
        let r = request(gw.addr, "POST", "/api/v1/auth/signup", &[], raw).await;
        r.error(400, "invalid_request");
    }
    let big = json!({"email": email, "password": "x".repeat(20_000)});
    post_json(gw.addr, "/api/v1/auth/signup", &big)
        .await
        .error(400, "invalid_request");

    // Nothing was half-written: the e-mail is still free.
    let (_, key) = gw.signup(&email).await;
    assert_eq!(gw.me(&key).await["credits"], 100.0);
    // A taken e-mail (in any case) is 409 and leaves the first account alone.
    let r = post_json(
        gw.addr,
        "/api/v1/auth/signup",
        &json!({"email": email.to_uppercase(), "password": "longenough"}),
    )
    .await;
    r.error(409, "conflict");
    assert_eq!(gw.me(&key).await["credits"], 100.0);
    assert!(gw.is_healthy().await);
}

#[tokio::test]
async fn the_signup_grant_is_the_free_plans_grant_credits() {
    let fake = FakeOpenAi::start("p").await;
    let cfg = format!(
        "{}[plans.free]\ngrant_credits = 25.5\n",
        one_model_config(&fake, "paid-2024-01-01")
    );
    let gw = Gateway::start(tollgate_bin!(), &cfg).await;
    let r = post_json(
        gw.addr,
        "/api/v1/auth/signup",
        &json!({"email": unique_email(), "password": "longenough"}),
    )
    .await;
    assert_eq!(r.status, 201, "{}", r.text());
    assert_eq!(r.json()["credits"], 25.5);
    let key = r.json()["api_key"].as_str().unwrap_or_default().to_string();
    assert_eq!(gw.me(&key).await["credits"], 25.5);
}
