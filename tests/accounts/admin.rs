//! The admin API: credit adjustments and plans per account, behind the admin token, with bad
//! input refused. Runs on SQLite, and on Postgres when `TOLLGATE_TEST_DATABASE_URL` is set.

use tollgate_testkit::*;

#[tokio::test]
async fn the_admin_api_adjusts_credits_and_plans_and_refuses_bad_input() {
    let (_f, gw) = paid_and_free(tollgate_bin!()).await;
    let admin = format!("Bearer {ADMIN_TOKEN}");
    let (uid, key) = gw.signup(&unique_email()).await;
    let path = format!("/api/v1/admin/accounts/{uid}");
    // Without or with a wrong token.
    request(gw.addr, "GET", &path, &[], b"")
        .await
        .error(401, "authentication_error");
    gw.with_auth("GET", &path, "Bearer wrong", b"")
        .await
        .error(401, "authentication_error");
    gw.with_auth("GET", &path, &format!("Bearer {key}"), b"")
        .await
        .error(401, "authentication_error");

    let r = gw
        .with_auth(
            "POST",
            &format!("{path}/credits"),
            &admin,
            br#"{"delta": 12.5, "reason": "goodwill"}"#,
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json()["credits"], 112.5);
    assert_eq!(gw.me(&key).await["credits"], 112.5);
    let r = gw
        .with_auth(
            "POST",
            &format!("{path}/credits"),
            &admin,
            br#"{"delta": -500, "reason": "too much"}"#,
        )
        .await;
    r.error(400, "invalid_request");
    assert_eq!(
        gw.me(&key).await["credits"],
        112.5,
        "a refused adjustment changes nothing"
    );
    for bad in [
        &br#"{"reason":"x"}"#[..],
        br#"{"delta":"5","reason":"x"}"#,
        br#"{"delta":5}"#,
        br#"{"delta":0,"reason":"x"}"#,
        b"nope",
    ] {
        gw.with_auth("POST", &format!("{path}/credits"), &admin, bad)
            .await
            .error(400, "invalid_request");
    }
    gw.with_auth(
        "POST",
        "/api/v1/admin/accounts/usr_nobody/credits",
        &admin,
        br#"{"delta":1,"reason":"x"}"#,
    )
    .await
    .error(404, "not_found");

    let r = gw
        .with_auth(
            "PUT",
            &format!("{path}/plan"),
            &admin,
            br#"{"plan":"business","requests_per_hour":50000}"#,
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    let v = gw.with_auth("GET", &path, &admin, b"").await.json();
    assert_eq!(v["plan"], "business");
    assert_eq!(v["requests_per_hour"], 50000);
    assert!(v["requests_per_day"].is_null());
    assert_eq!(gw.me(&key).await["plan"], "business");
    gw.with_auth(
        "PUT",
        &format!("{path}/plan"),
        &admin,
        br#"{"plan":"platinum"}"#,
    )
    .await
    .error(400, "invalid_request");
    gw.with_auth(
        "PUT",
        &format!("{path}/plan"),
        &admin,
        br#"{"plan":"pro","requests_per_day":-1}"#,
    )
    .await
    .error(400, "invalid_request");
    gw.with_auth(
        "PUT",
        "/api/v1/admin/accounts/usr_nobody/plan",
        &admin,
        br#"{"plan":"pro"}"#,
    )
    .await
    .error(404, "not_found");
    gw.with_auth("GET", "/api/v1/admin/nothing", &admin, b"")
        .await
        .error(404, "not_found");
}

#[tokio::test]
async fn a_plan_added_in_the_config_can_be_assigned_but_guest_cannot() {
    let fake = FakeOpenAi::start("p").await;
    let cfg = format!(
        "{}[plans.team]\nrequests_per_hour = 5\n",
        one_model_config(&fake, "paid-2024-01-01")
    );
    let gw = Gateway::start(tollgate_bin!(), &cfg).await;
    let admin = format!("Bearer {ADMIN_TOKEN}");
    let (uid, key) = gw.signup(&unique_email()).await;
    let path = format!("/api/v1/admin/accounts/{uid}/plan");
    let v = gw
        .with_auth("PUT", &path, &admin, br#"{"plan":"guest"}"#)
        .await
        .error(400, "invalid_request");
    let msg = v["error"]["message"].as_str().unwrap_or_default();
    assert!(msg.contains("team") && !msg.contains("guest"), "{msg}");
    let r = gw
        .with_auth("PUT", &path, &admin, br#"{"plan":"team"}"#)
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(gw.me(&key).await["plan"], "team");
    // The team plan's own limit applies to the account: 5 requests an hour.
    let body = serde_json::json!({"model": "paid-2024-01-01", "messages": user("hi")});
    for _ in 0..5 {
        assert_eq!(gw.chat_as(Some(&key), &body).await.status, 200);
    }
    gw.chat_as(Some(&key), &body)
        .await
        .error(429, "rate_limit_exceeded");
}

#[test]
fn a_short_admin_token_is_refused_at_start() {
    let dir = temp_dir();
    let cfg = dir.join("tollgate.toml");
    std::fs::write(&cfg, "[server]\nlisten = \"127.0.0.1:0\"\n").unwrap();
    let check = |token: &str| {
        std::process::Command::new(tollgate_bin!())
            .args(["check-config", "--config"])
            .arg(&cfg)
            .env("TOLLGATE_ADMIN_TOKEN", token)
            .output()
            .unwrap()
    };
    let out = check("short-token");
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("server.admin_token_env") && err.contains("at least 32"),
        "{err}"
    );
    assert!(check(&"x".repeat(32)).status.success());
}
