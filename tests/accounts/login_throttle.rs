//! The per-e-mail login throttle (`[abuse] login_failures_per_email`): wrong passwords for one
//! e-mail are bounded wherever they come from — many addresses, many concurrent requests, and
//! with Redis many instances — because each attempt is reserved before the password is checked.

use serde_json::json;
use tollgate_testkit::*;

const ABUSE: &str = "[abuse]\nsignups_per_hour = 50\nsignups_per_day = 50\nlogins_per_hour = 1000\nlogins_per_day = 1000\nlogin_failures_per_email = 5\n";

/// The throttle of [`ABUSE`], and 127.0.0.1 a trusted proxy (each guess names its address in
/// `X-Forwarded-For`). Redis is given seconds to answer: a check that times out falls back to
/// this instance's own count (`fail_open`, tested in `tests/redis_failure.rs`), and on a loaded
/// machine 200 concurrent logins can keep an answer past the default 250 ms — this test is
/// about the shared count, not about a slow store.
async fn gateway(cfg: &str) -> Gateway {
    let opts = Opts {
        abuse: Some(ABUSE.into()),
        trusted: Some("127.0.0.1/32".into()),
        storage: "redis_timeout_ms = 5000".into(),
        ..Opts::default()
    };
    Gateway::start_opts(tollgate_bin!(), cfg, opts).await
}

async fn login(addr: std::net::SocketAddr, from: &str, email: &str, password: &str) -> Response {
    let body = serde_json::to_vec(&json!({"email": email, "password": password})).unwrap();
    request(
        addr,
        "POST",
        "/api/v1/auth/login",
        &[
            ("Content-Type", "application/json"),
            ("X-Forwarded-For", from),
        ],
        &body,
    )
    .await
}

async fn sign_up(gw: &Gateway, email: &str) {
    let r = post_json(
        gw.addr,
        "/api/v1/auth/signup",
        &json!({"email": email, "password": "correct horse battery"}),
    )
    .await;
    assert_eq!(r.status, 201, "{}", r.text());
}

#[tokio::test]
async fn two_hundred_concurrent_guesses_from_many_addresses_check_at_most_five_passwords() {
    let fake = FakeOpenAi::start("p").await;
    let cfg = one_model_config(&fake, "paid-2024-01-01");
    let one = gateway(&cfg).await;
    // With Redis a second instance shares the counters, and the guesses are split between them.
    let two = match redis_url() {
        Some(_) => Some(one.second(tollgate_bin!(), &cfg).await),
        None => None,
    };
    let addrs: Vec<_> = std::iter::once(one.addr)
        .chain(two.as_ref().map(|g| g.addr))
        .collect();
    let email = unique_email();
    sign_up(&one, &email).await;
    let tasks: Vec<_> = (0..200)
        .map(|i| {
            let (addr, email) = (addrs[i % addrs.len()], email.clone());
            tokio::spawn(async move {
                let from = format!("198.51.100.{}", i % 250 + 1);
                login(addr, &from, &email, "wrong password").await
            })
        })
        .collect();
    let (mut tried, mut limited) = (0, 0);
    for t in tasks {
        let r = t.await.unwrap();
        match r.status {
            401 => tried += 1,
            429 => {
                let v = r.error(429, "rate_limit_exceeded");
                assert!(v["error"]["message"].as_str().unwrap().contains("e-mail"));
                assert!(r.header("retry-after").is_some());
                limited += 1;
            }
            s => panic!("unexpected {s}: {}", r.text()),
        }
    }
    let mut store_errors = 0.0;
    for gw in std::iter::once(&one).chain(two.as_ref()) {
        store_errors += gw.metric("tollgate_ratelimit_store_errors").await;
    }
    assert_eq!((tried, limited), (5, 195), "store errors: {store_errors}");
    // The e-mail is locked for the window, even with the right password from a fresh address.
    let r = login(addrs[0], "203.0.113.9", &email, "correct horse battery").await;
    r.error(429, "rate_limit_exceeded");
    // Another e-mail is not.
    let other = unique_email();
    sign_up(&one, &other).await;
    let r = login(addrs[0], "203.0.113.9", &other, "correct horse battery").await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert!(one.is_healthy().await);
}

#[tokio::test]
async fn a_successful_login_clears_the_emails_failures() {
    let fake = FakeOpenAi::start("p").await;
    let gw = gateway(&one_model_config(&fake, "paid-2024-01-01")).await;
    let email = unique_email();
    sign_up(&gw, &email).await;
    for _ in 0..4 {
        let r = login(gw.addr, "198.51.100.1", &email, "wrong password").await;
        r.error(401, "authentication_error");
    }
    let r = login(gw.addr, "198.51.100.1", &email, "correct horse battery").await;
    assert_eq!(r.status, 200, "{}", r.text());
    for _ in 0..5 {
        let r = login(gw.addr, "198.51.100.2", &email, "wrong password").await;
        r.error(401, "authentication_error");
    }
    let r = login(gw.addr, "198.51.100.3", &email, "wrong password").await;
    r.error(429, "rate_limit_exceeded");
}
