//! Accounts, keys, sessions and the admin API, with bad input on every endpoint. Runs on
//! SQLite, and on Postgres when `TOLLGATE_TEST_DATABASE_URL` is set.

use std::time::{Duration, Instant};

use serde_json::{json, Value};
use tollgate_testkit::*;

async fn gateway() -> (FakeOpenAi, Gateway) {
    let fake = FakeOpenAi::start("p").await;
    let cfg = format!(
        "{FAST_TIMEOUTS}{}{}{}",
        provider("p", &[&fake], ""),
        model("paid-2024-01-01", "p", "economy", ""),
        model("free-2024-01-01", "p", "normal", "guest = true"),
    );
    let gw = Gateway::start(tollgate_bin!(), &cfg).await;
    (fake, gw)
}

async fn with_auth(gw: &Gateway, method: &str, path: &str, auth: &str, body: &[u8]) -> Response {
    request(
        gw.addr,
        method,
        path,
        &[
            ("Authorization", auth),
            ("Content-Type", "application/json"),
        ],
        body,
    )
    .await
}

#[tokio::test]
async fn signup_gives_100_credits_a_free_plan_and_a_key_shown_once() {
    let (_f, gw) = gateway().await;
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
    let list = with_auth(&gw, "GET", "/api/v1/keys", &format!("Bearer {key}"), b"").await;
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
    let (_f, gw) = gateway().await;
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
async fn login_session_cookie_me_logout_and_throttle() {
    let (_f, gw) = gateway().await;
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
async fn failed_logins_are_throttled_per_ip_across_e_mails() {
    let (_f, gw) = gateway().await;
    let email = unique_email();
    gw.signup(&email).await;
    // Twenty failures, each for a different e-mail, from this one client address.
    for _ in 0..20 {
        let r = post_json(
            gw.addr,
            "/api/v1/auth/login",
            &json!({"email": unique_email(), "password": "guessing123"}),
        )
        .await;
        r.error(401, "authentication_error");
    }
    // Now even a right password for an e-mail that never failed is refused from this IP.
    let r = post_json(
        gw.addr,
        "/api/v1/auth/login",
        &json!({"email": email, "password": "correct horse battery"}),
    )
    .await;
    r.error(429, "rate_limit_exceeded");
    // Garbage bodies on login are clear errors too.
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
    assert!(gw.is_healthy().await);
}

#[tokio::test]
async fn keys_issue_list_revoke_and_auth_errors() {
    let (_f, gw) = gateway().await;
    let auth = format!("Bearer {}", gw.key);
    let r = with_auth(&gw, "POST", "/api/v1/keys", &auth, br#"{"name":"ci"}"#).await;
    assert_eq!(r.status, 201, "{}", r.text());
    let new = r.json();
    let new_key = new["key"].as_str().unwrap().to_string();
    assert_eq!(new["name"], "ci");
    let ok = gw
        .chat_as(
            Some(&new_key),
            &json!({"model":"paid-2024-01-01","messages":user("hi")}),
        )
        .await;
    assert_eq!(ok.status, 200);
    let list = with_auth(&gw, "GET", "/api/v1/keys", &auth, b"")
        .await
        .json();
    assert_eq!(list["data"].as_array().unwrap().len(), 2);

    // Bad input.
    with_auth(&gw, "POST", "/api/v1/keys", &auth, br#"{"name":5}"#)
        .await
        .error(400, "invalid_request");
    with_auth(&gw, "POST", "/api/v1/keys", &auth, b"{nope")
        .await
        .error(400, "invalid_request");
    with_auth(
        &gw,
        "POST",
        "/api/v1/keys",
        &auth,
        format!("{{\"name\":\"{}\"}}", "n".repeat(200)).as_bytes(),
    )
    .await
    .error(400, "invalid_request");
    with_auth(&gw, "DELETE", "/api/v1/keys/key_doesnotexist", &auth, b"")
        .await
        .error(404, "not_found");
    // Someone else's key cannot be revoked.
    let (_, other) = gw.signup(&unique_email()).await;
    let id = new["id"].as_str().unwrap();
    with_auth(
        &gw,
        "DELETE",
        &format!("/api/v1/keys/{id}"),
        &format!("Bearer {other}"),
        b"",
    )
    .await
    .error(404, "not_found");

    let r = with_auth(&gw, "DELETE", &format!("/api/v1/keys/{id}"), &auth, b"").await;
    assert_eq!(r.status, 200);
    let revoked = gw
        .chat_as(
            Some(&new_key),
            &json!({"model":"paid-2024-01-01","messages":user("hi")}),
        )
        .await;
    revoked.error(401, "authentication_error");
    let list = with_auth(&gw, "GET", "/api/v1/keys", &auth, b"")
        .await
        .json();
    let row = list["data"]
        .as_array()
        .unwrap()
        .iter()
        .find(|k| k["id"] == id)
        .unwrap()
        .clone();
    assert_eq!(row["revoked"], true);

    // Malformed, unknown, wrong scheme, missing.
    let body = json!({"model":"paid-2024-01-01","messages":user("hi")});
    for bad in [
        "Bearer nope",
        "Bearer tg_0000000000000000000000000000000000000000",
        "Basic dXNlcjpwYXNz",
        "Bearer ",
    ] {
        let b = serde_json::to_vec(&body).unwrap();
        request(
            gw.addr,
            "POST",
            "/v1/chat/completions",
            &[("Authorization", bad)],
            &b,
        )
        .await
        .error(401, "authentication_error");
    }
    // No key: the guest tier gets guest models only.
    gw.chat_as(None, &body)
        .await
        .error(401, "authentication_error");
    let g = gw
        .chat_as(
            None,
            &json!({"model":"free-2024-01-01","messages":user("hi")}),
        )
        .await;
    assert_eq!(g.status, 200);
    assert!(g.header("x-credits-remaining").is_none());
    let g = gw
        .chat_as(None, &json!({"model":"normal","messages":user("hi")}))
        .await;
    assert_eq!(g.json()["model"], "free-2024-01-01");
    request(gw.addr, "GET", "/api/v1/keys", &[], b"")
        .await
        .error(401, "authentication_error");
    request(gw.addr, "GET", "/api/v1/usage", &[], b"")
        .await
        .error(401, "authentication_error");
}

#[tokio::test]
async fn revoked_key_is_refused_on_a_second_instance_within_5_seconds() {
    let fake = FakeOpenAi::start("p").await;
    let cfg = format!(
        "{FAST_TIMEOUTS}{}{}",
        provider("p", &[&fake], ""),
        model("m", "p", "economy", "")
    );
    let a = Gateway::start(tollgate_bin!(), &cfg).await;
    let shared_db = a.config_db();
    let b = Gateway::start_opts(
        tollgate_bin!(),
        &cfg,
        Opts {
            database_url: Some(shared_db),
            no_account: true,
            ..Opts::default()
        },
    )
    .await;
    let body = json!({"model":"m","messages":user("hi")});
    // B has the key cached as valid.
    assert_eq!(b.chat_as(Some(&a.key), &body).await.status, 200);
    let list = request(
        a.addr,
        "GET",
        "/api/v1/keys",
        &[("Authorization", &format!("Bearer {}", a.key))],
        b"",
    )
    .await
    .json();
    let id = list["data"][0]["id"].as_str().unwrap().to_string();
    let r = request(
        a.addr,
        "DELETE",
        &format!("/api/v1/keys/{id}"),
        &[("Authorization", &format!("Bearer {}", a.key))],
        b"",
    )
    .await;
    assert_eq!(r.status, 200);
    let t = Instant::now();
    assert_eq!(
        a.chat_as(Some(&a.key), &body).await.status,
        401,
        "refused at once where revoked"
    );
    loop {
        if b.chat_as(Some(&a.key), &body).await.status == 401 {
            break;
        }
        assert!(
            t.elapsed() < Duration::from_secs(5),
            "still accepted after 5 s on the other instance"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test]
async fn admin_api_credits_plan_and_bad_input() {
    let (_f, gw) = gateway().await;
    let admin = format!("Bearer {ADMIN_TOKEN}");
    let (uid, key) = gw.signup(&unique_email()).await;
    let path = format!("/api/v1/admin/accounts/{uid}");
    // Without or with a wrong token.
    request(gw.addr, "GET", &path, &[], b"")
        .await
        .error(401, "authentication_error");
    with_auth(&gw, "GET", &path, "Bearer wrong", b"")
        .await
        .error(401, "authentication_error");
    with_auth(&gw, "GET", &path, &format!("Bearer {key}"), b"")
        .await
        .error(401, "authentication_error");

    let r = with_auth(
        &gw,
        "POST",
        &format!("{path}/credits"),
        &admin,
        br#"{"delta": 12.5, "reason": "goodwill"}"#,
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json()["credits"], 112.5);
    assert_eq!(gw.me(&key).await["credits"], 112.5);
    let r = with_auth(
        &gw,
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
        with_auth(&gw, "POST", &format!("{path}/credits"), &admin, bad)
            .await
            .error(400, "invalid_request");
    }
    with_auth(
        &gw,
        "POST",
        "/api/v1/admin/accounts/usr_nobody/credits",
        &admin,
        br#"{"delta":1,"reason":"x"}"#,
    )
    .await
    .error(404, "not_found");

    let r = with_auth(
        &gw,
        "PUT",
        &format!("{path}/plan"),
        &admin,
        br#"{"plan":"business","requests_per_hour":50000}"#,
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text());
    let v = with_auth(&gw, "GET", &path, &admin, b"").await.json();
    assert_eq!(v["plan"], "business");
    assert_eq!(v["requests_per_hour"], 50000);
    assert!(v["requests_per_day"].is_null());
    assert_eq!(gw.me(&key).await["plan"], "business");
    with_auth(
        &gw,
        "PUT",
        &format!("{path}/plan"),
        &admin,
        br#"{"plan":"platinum"}"#,
    )
    .await
    .error(400, "invalid_request");
    with_auth(
        &gw,
        "PUT",
        &format!("{path}/plan"),
        &admin,
        br#"{"plan":"pro","requests_per_day":-1}"#,
    )
    .await
    .error(400, "invalid_request");
    with_auth(
        &gw,
        "PUT",
        "/api/v1/admin/accounts/usr_nobody/plan",
        &admin,
        br#"{"plan":"pro"}"#,
    )
    .await
    .error(404, "not_found");
    with_auth(&gw, "GET", "/api/v1/admin/nothing", &admin, b"")
        .await
        .error(404, "not_found");
}
