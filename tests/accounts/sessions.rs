//! Logging in: the session cookie, `/me`, logout, and throttled failures per e-mail and per
//! client address. Runs on SQLite, and on Postgres when `TOLLGATE_TEST_DATABASE_URL` is set.

use serde_json::json;
use tollgate_testkit::*;

#[tokio::test]
async fn login_gives_a_session_cookie_that_works_until_logout_and_wrong_passwords_are_throttled() {
    let (_f, gw) = paid_and_free(tollgate_bin!()).await;
    let email = unique_email();
    gw.signup(&email).await;
    let r = post_json(
        gw.addr,
        "/api/v1/auth/login",
        &json!({"email": email, "password": "correct horse battery"}),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text());
    let cookie = r.header("set-cookie").unwrap().to_string();
    for attr in ["tg_session=", "HttpOnly", "SameSite=Strict", "Path=/"] {
        assert!(cookie.contains(attr), "{cookie}");
    }
    assert!(!cookie.contains("Secure"), "served over http: {cookie}");
    let pair = cookie.split(';').next().unwrap().to_string();
    let me = request(gw.addr, "GET", "/api/v1/auth/me", &[("Cookie", &pair)], b"").await;
    assert_eq!(me.status, 200);
    assert_eq!(me.json()["email"], email);
    // A session is not an API key: the chat path does not accept it.
    let chat = request(
        gw.addr,
        "POST",
        "/v1/chat/completions",
        &[("Cookie", &pair)],
        br#"{"model":"paid-2024-01-01","messages":[{"role":"user","content":"x"}]}"#,
    )
    .await;
    chat.error(401, "authentication_error");

    let out = request(
        gw.addr,
        "POST",
        "/api/v1/auth/logout",
        &[("Cookie", &pair)],
        b"",
    )
    .await;
    assert_eq!(out.status, 200);
    request(gw.addr, "GET", "/api/v1/auth/me", &[("Cookie", &pair)], b"")
        .await
        .error(401, "authentication_error");
    // A forged cookie is no session either.
    request(
        gw.addr,
        "GET",
        "/api/v1/auth/me",
        &[("Cookie", "tg_session=forged")],
        b"",
    )
    .await
    .error(401, "authentication_error");

    // Wrong passwords, unknown e-mails, bad bodies.
    let bad = post_json(
        gw.addr,
        "/api/v1/auth/login",
        &json!({"email": email, "password": "wrong password"}),
    )
    .await;
    bad.error(401, "authentication_error");
    post_json(
        gw.addr,
        "/api/v1/auth/login",
        &json!({"email": unique_email(), "password": "whatever1"}),
    )
    .await
    .error(401, "authentication_error");
    post_json(gw.addr, "/api/v1/auth/login", &json!({"email": email}))
        .await
        .error(400, "invalid_request");
    // Five failures for one e-mail: throttled, even with the right password.
    for _ in 0..4 {
        post_json(
            gw.addr,
            "/api/v1/auth/login",
            &json!({"email": email, "password": "wrong password"}),
        )
        .await;
    }
    let r = post_json(
        gw.addr,
        "/api/v1/auth/login",
        &json!({"email": email, "password": "correct horse battery"}),
    )
    .await;
    let v = r.error(429, "rate_limit_exceeded");
    assert!(v["error"]["retry_after"].as_u64().unwrap() >= 1);
    assert!(r.header("retry-after").is_some());
}

#[tokio::test]
async fn logins_are_limited_per_address_across_e_mails() {
    let fake = FakeOpenAi::start("p").await;
    let cfg = one_model_config(&fake, "paid-2024-01-01");
    let opts = Opts {
        abuse: Some("[abuse]\nlogins_per_hour = 20\n".into()),
        ..Opts::default()
    };
    let gw = Gateway::start_opts(tollgate_bin!(), &cfg, opts).await;
    let email = unique_email();
    gw.signup(&email).await;
    // Garbage bodies on login are clear errors (and count as attempts: four).
    for raw in [&b"{\"email\":"[..], b"[]", b""] {
        request(gw.addr, "POST", "/api/v1/auth/login", &[], raw)
            .await
            .error(400, "invalid_request");
    }
    post_json(
        gw.addr,
        "/api/v1/auth/login",
        &json!({"email": 7, "password": "x"}),
    )
    .await
    .error(400, "invalid_request");
    // Sixteen wrong passwords, each for a different e-mail, from this one client address.
    for _ in 0..16 {
        let r = post_json(
            gw.addr,
            "/api/v1/auth/login",
            &json!({"email": unique_email(), "password": "guessing123"}),
        )
        .await;
        r.error(401, "authentication_error");
    }
    // Now even a right password for an e-mail that never failed is refused from this address.
    let r = post_json(
        gw.addr,
        "/api/v1/auth/login",
        &json!({"email": email, "password": "correct horse battery"}),
    )
    .await;
    r.error(429, "rate_limit_exceeded");
    assert!(gw.is_healthy().await);
}

#[tokio::test]
async fn the_session_cookie_is_secure_when_the_gateway_is_served_over_https() {
    let fake = FakeOpenAi::start("p").await;
    let cfg = one_model_config(&fake, "paid-2024-01-01");
    let gw = Gateway::start_opts(
        tollgate_bin!(),
        &cfg,
        Opts {
            public_url: Some("https://gateway.example.com".into()),
            ..Opts::default()
        },
    )
    .await;
    let email = unique_email();
    gw.signup(&email).await;
    let login = json!({"email": email, "password": "correct horse battery"});
    let r = post_json(gw.addr, "/api/v1/auth/login", &login).await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert!(r.header("set-cookie").unwrap().ends_with("; Secure"));
    let r = post_json(gw.addr, "/api/v1/auth/logout", &json!({})).await;
    assert!(r
        .header("set-cookie")
        .unwrap()
        .contains("Max-Age=0; Secure"));
}

#[tokio::test]
async fn cookie_authenticated_writes_need_json_and_the_gateways_own_origin() {
    let (_f, gw) = paid_and_free(tollgate_bin!()).await;
    let email = unique_email();
    gw.signup(&email).await;
    let login = json!({"email": email, "password": "correct horse battery"});
    let r = post_json(gw.addr, "/api/v1/auth/login", &login).await;
    let pair = r
        .header("set-cookie")
        .unwrap()
        .split(';')
        .next()
        .unwrap()
        .to_string();
    let own = format!("http://{}", gw.addr);
    let body = br#"{"name":"from the dashboard"}"#;
    let write = |headers: Vec<(&'static str, String)>| {
        let (addr, pair) = (gw.addr, pair.clone());
        async move {
            let mut h: Vec<(&str, &str)> = vec![("Cookie", pair.as_str())];
            h.extend(headers.iter().map(|(k, v)| (*k, v.as_str())));
            request(addr, "POST", "/api/v1/keys", &h, body).await
        }
    };
    // What a form on another site can send: no JSON content type.
    write(vec![("Content-Type", "text/plain".into())])
        .await
        .error(400, "invalid_request");
    write(vec![]).await.error(400, "invalid_request");
    // JSON, but from another origin.
    write(vec![
        ("Content-Type", "application/json".into()),
        ("Origin", "https://evil.example".into()),
    ])
    .await
    .error(401, "authentication_error");
    // The dashboard's own requests pass, with or without an Origin.
    for origin in [Some(own.clone()), None] {
        let mut h = vec![("Content-Type", "application/json".to_string())];
        if let Some(o) = origin {
            h.push(("Origin", o));
        }
        assert_eq!(write(h).await.status, 201);
    }
    // Reads and API keys are not affected.
    let me = request(
        gw.addr,
        "GET",
        "/api/v1/auth/me",
        &[("Cookie", &pair), ("Origin", "https://evil.example")],
        b"",
    )
    .await;
    assert_eq!(me.status, 200);
    let r = gw
        .with_auth("POST", "/api/v1/keys", &format!("Bearer {}", gw.key), body)
        .await;
    assert_eq!(r.status, 201, "{}", r.text());
}
