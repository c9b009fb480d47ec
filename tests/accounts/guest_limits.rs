//! Guests (no key) are limited by client address: `X-Forwarded-For` counts only from trusted
//! proxies, and then its right-most untrusted address is the guest. In-process counters by
//! default; Redis when `TOLLGATE_TEST_REDIS_URL` is set.

use serde_json::json;
use tollgate_testkit::*;

#[tokio::test]
async fn guests_are_limited_by_ip_and_spoofed_forwarded_for_changes_nothing() {
    let (_f, gw) = small_plans(tollgate_bin!(), "", "free").await;
    let guest = |xff: &'static str| {
        let addr = gw.addr;
        async move {
            let b = serde_json::to_vec(&json!({"model":"g","messages":user("hi")})).unwrap();
            request(
                addr,
                "POST",
                "/v1/chat/completions",
                &[("X-Forwarded-For", xff)],
                &b,
            )
            .await
        }
    };
    assert_eq!(guest("1.1.1.1").await.status, 200);
    assert_eq!(guest("2.2.2.2").await.status, 200);
    let r = guest("3.3.3.3").await;
    r.error(429, "rate_limit_exceeded");
    // The model lists count for guests too, and not for key holders.
    get(gw.addr, "/v1/models")
        .await
        .error(429, "rate_limit_exceeded");
    let r = request(
        gw.addr,
        "GET",
        "/v1/models",
        &[("Authorization", &format!("Bearer {}", gw.key))],
        b"",
    )
    .await;
    assert_eq!(r.status, 200);
    assert!(r.header("x-ratelimit-limit-requests").is_none());
}

#[tokio::test]
async fn trusted_proxies_make_forwarded_for_the_guest_identity() {
    let fake = FakeOpenAi::start("p").await;
    let cfg = format!(
        "{FAST_TIMEOUTS}{}{}",
        provider("p", &[&fake], ""),
        model("g", "p", "normal", "guest = true")
    );
    // The harness writes [server] itself; trusted_proxies goes in through a reload-free start.
    let gw = Gateway::start_opts(
        tollgate_bin!(),
        &cfg,
        Opts {
            plans: Some(SMALL_PLANS.into()),
            trusted: Some("127.0.0.1/32".into()),
            ..Opts::default()
        },
    )
    .await;
    let call = |xff: &'static str| {
        let addr = gw.addr;
        async move {
            let b = serde_json::to_vec(&json!({"model":"g","messages":user("hi")})).unwrap();
            request(
                addr,
                "POST",
                "/v1/chat/completions",
                &[("X-Forwarded-For", xff)],
                &b,
            )
            .await
            .status
        }
    };
    // Two clients behind the trusted proxy get two buckets.
    assert_eq!(call("9.9.9.1").await, 200);
    assert_eq!(call("9.9.9.1").await, 200);
    assert_eq!(call("9.9.9.1").await, 429);
    assert_eq!(call("9.9.9.2").await, 200);
    // A client prepending a fake address is still counted as itself (right-most untrusted).
    assert_eq!(call("9.9.9.3, 9.9.9.1").await, 429);
}

#[tokio::test]
async fn every_forwarded_for_line_counts_and_ipv6_guests_share_their_64() {
    let fake = FakeOpenAi::start("p").await;
    let cfg = format!(
        "{FAST_TIMEOUTS}{}{}",
        provider("p", &[&fake], ""),
        model("g", "p", "normal", "guest = true")
    );
    let gw = Gateway::start_opts(
        tollgate_bin!(),
        &cfg,
        Opts {
            plans: Some(SMALL_PLANS.into()),
            trusted: Some("127.0.0.1/32".into()),
            ..Opts::default()
        },
    )
    .await;
    let call = |lines: Vec<&'static str>| {
        let addr = gw.addr;
        async move {
            let b = serde_json::to_vec(&json!({"model":"g","messages":user("hi")})).unwrap();
            let headers: Vec<(&str, &str)> =
                lines.iter().map(|l| ("X-Forwarded-For", *l)).collect();
            request(addr, "POST", "/v1/chat/completions", &headers, &b)
                .await
                .status
        }
    };
    // The proxy appends to the last line: a first line the client sent is not the guest.
    assert_eq!(call(vec!["9.9.8.1", "9.9.8.2"]).await, 200);
    assert_eq!(call(vec!["9.9.8.3", "9.9.8.2"]).await, 200);
    assert_eq!(call(vec!["9.9.8.2"]).await, 429);
    assert_eq!(call(vec!["9.9.8.1"]).await, 200, "never counted");
    // Two addresses of one IPv6 /64 are one guest; another /64 is another.
    assert_eq!(call(vec!["2001:db8:1:2::1"]).await, 200);
    assert_eq!(call(vec!["2001:db8:1:2::2"]).await, 200);
    assert_eq!(call(vec!["2001:db8:1:2:ffff::9"]).await, 429);
    assert_eq!(call(vec!["2001:db8:1:3::1"]).await, 200);
}
