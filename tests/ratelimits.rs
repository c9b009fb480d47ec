//! Rate limits per plan: hourly and daily windows, per-account overrides, guests by IP with
//! and without trusted proxies, the headers, `retry_after`, rejected requests not counted or
//! charged, exactness across two instances sharing Redis, and Redis failure modes with
//! recovery. In-process counters by default; Redis when `TOLLGATE_TEST_REDIS_URL` is set.

use std::time::{Duration, Instant};

use serde_json::json;
use tollgate_testkit::*;

const PLANS: &str = "[plans.free]\nrequests_per_hour = 3\nrequests_per_day = 5\n\n[plans.pro]\nrequests_per_hour = 4\n\n[plans.guest]\nrequests_per_hour = 2\nrequests_per_day = 2\n\n[plans.smb]\nrequests_per_hour = 10\nrequests_per_day = 3\n";

async fn gateway(extra_server: &str, plan: &str) -> (FakeOpenAi, Gateway) {
    let fake = FakeOpenAi::start("p").await;
    let cfg = format!(
        "{FAST_TIMEOUTS}{}{}{}",
        provider("p", &[&fake], ""),
        model("m", "p", "economy", ""),
        model("g", "p", "normal", "guest = true"),
    );
    let gw = Gateway::start_opts(
        tollgate_bin!(),
        &cfg,
        Opts {
            plans: Some(format!("{PLANS}{extra_server}")),
            plan: Some(plan.into()),
            ..Opts::default()
        },
    )
    .await;
    (fake, gw)
}

fn body() -> serde_json::Value {
    json!({"model":"m","messages":user("hi")})
}

fn rl(r: &Response) -> (String, String, String) {
    (
        r.header("x-ratelimit-limit-requests")
            .unwrap_or("-")
            .to_string(),
        r.header("x-ratelimit-remaining-requests")
            .unwrap_or("-")
            .to_string(),
        r.header("x-ratelimit-reset-requests")
            .unwrap_or("-")
            .to_string(),
    )
}

#[tokio::test]
async fn free_plan_hourly_limit_headers_and_retry_after() {
    let (fake, gw) = gateway("", "free").await;
    let before = gw.me(&gw.key).await["credits"].clone();
    for remaining in ["2", "1", "0"] {
        let r = gw.chat(body()).await;
        assert_eq!(r.status, 200, "{}", r.text());
        let (limit, rem, reset) = rl(&r);
        assert_eq!((limit.as_str(), rem.as_str()), ("3", remaining));
        assert!(reset.ends_with('s'), "{reset}");
    }
    let spent = gw.me(&gw.key).await["credits"].clone();
    let r = gw.chat(body()).await;
    let v = r.error(429, "rate_limit_exceeded");
    let retry = v["error"]["retry_after"].as_u64().unwrap();
    assert!(
        (3590..=3600).contains(&retry),
        "an hour minus a moment: {retry}"
    );
    assert_eq!(r.header("retry-after").unwrap(), retry.to_string());
    assert_eq!(rl(&r).0, "3");
    assert_eq!(rl(&r).1, "0");
    // A rejected request costs nothing and writes no usage row.
    assert_eq!(gw.me(&gw.key).await["credits"], spent);
    assert_ne!(before, spent);
    assert_eq!(fake.chat_count(), 3);
    // The limit is per account: another free account is not affected.
    let (uid, key) = gw.signup(&unique_email()).await;
    assert_eq!(gw.chat_as(Some(&key), &body()).await.status, 200);
    let _ = uid;
}

#[tokio::test]
async fn daily_limit_and_rejected_requests_are_not_counted() {
    let (_f, gw) = gateway("", "free").await;
    // free: 3 an hour, 5 a day. Three pass, two are refused by the hour window.
    for _ in 0..3 {
        assert_eq!(gw.chat(body()).await.status, 200);
    }
    for _ in 0..2 {
        gw.chat(body()).await.error(429, "rate_limit_exceeded");
    }
    // Raise this account's hourly limit: if the refused requests had been counted, the day
    // (5) would be used up; they were not, so two more pass, then the day window refuses.
    gw.admin_plan(&gw.user_id, "free", Some(100), None).await;
    tokio::time::sleep(Duration::from_millis(4200)).await; // key cache holds the old plan up to 4 s
    for _ in 0..2 {
        let r = gw.chat(body()).await;
        assert_eq!(r.status, 200, "{}", r.text());
    }
    let r = gw.chat(body()).await;
    let v = r.error(429, "rate_limit_exceeded");
    let retry = v["error"]["retry_after"].as_u64().unwrap();
    assert!(retry > 86_000, "the day window: {retry}");
    assert_eq!(rl(&r).0, "5");
}

#[tokio::test]
async fn pro_has_no_daily_cap_and_overrides_win() {
    let (_f, gw) = gateway("", "pro").await;
    for i in 0..4 {
        let r = gw.chat(body()).await;
        assert_eq!(r.status, 200);
        assert_eq!(rl(&r).0, "4", "only the hourly window: request {i}");
    }
    gw.chat(body()).await.error(429, "rate_limit_exceeded");

    // Business: numbers per account, set by the admin API.
    let (uid, key) = gw.signup(&unique_email()).await;
    gw.admin_plan(&uid, "business", Some(2), None).await;
    for _ in 0..2 {
        assert_eq!(gw.chat_as(Some(&key), &body()).await.status, 200);
    }
    let r = gw.chat_as(Some(&key), &body()).await;
    r.error(429, "rate_limit_exceeded");
    // A per-account override beats the plan (smb's day limit is 3 in this config).
    let (uid, key) = gw.signup(&unique_email()).await;
    gw.admin_plan(&uid, "smb", None, Some(1)).await;
    assert_eq!(gw.chat_as(Some(&key), &body()).await.status, 200);
    let r = gw.chat_as(Some(&key), &body()).await;
    r.error(429, "rate_limit_exceeded");
    assert_eq!(rl(&r).0, "1");
}

#[tokio::test]
async fn guests_are_limited_by_ip_and_spoofed_forwarded_for_changes_nothing() {
    let (_f, gw) = gateway("", "free").await;
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
            plans: Some(PLANS.into()),
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
async fn exactly_the_limit_is_admitted_under_300_concurrent_requests() {
    let fake = FakeOpenAi::start("p").await;
    let cfg = format!(
        "{FAST_TIMEOUTS}{}{}",
        provider("p", &[&fake], ""),
        model("m", "p", "economy", "")
    );
    let one = Gateway::start_opts(
        tollgate_bin!(),
        &cfg,
        Opts {
            plan: Some("free".into()),
            ..Opts::default()
        },
    )
    .await;
    one.admin_plan(&one.user_id, "business", Some(100), None)
        .await;
    // With Redis, a second instance shares the counters; in-process counters are per instance.
    let two = if redis_url().is_some() {
        Some(
            Gateway::start_opts(
                tollgate_bin!(),
                &cfg,
                Opts {
                    database_url: Some(one.config_db()),
                    redis_prefix: one.redis_prefix(),
                    no_account: true,
                    ..Opts::default()
                },
            )
            .await,
        )
    } else {
        None
    };
    let addrs: Vec<_> = std::iter::once(one.addr)
        .chain(two.as_ref().map(|g| g.addr))
        .collect();
    let mut tasks = Vec::new();
    for i in 0..300 {
        let addr = addrs[i % addrs.len()];
        let key = one.key.clone();
        tasks.push(tokio::spawn(async move {
            let b = serde_json::to_vec(&body()).unwrap();
            request(
                addr,
                "POST",
                "/v1/chat/completions",
                &[("Authorization", &format!("Bearer {key}"))],
                &b,
            )
            .await
            .status
        }));
    }
    let mut ok = 0;
    for t in tasks {
        match t.await.unwrap() {
            200 => ok += 1,
            429 => {}
            s => panic!("unexpected {s}"),
        }
    }
    assert_eq!(
        ok,
        100,
        "exactly the limit, across {} instance(s)",
        addrs.len()
    );
    let m = get(one.metrics_addr, "/metrics").await.text();
    assert!(
        m.contains("tollgate_ratelimit_total{decision=\"limited\",plan=\"business\"}"),
        "{m}"
    );
}

async fn store_errors(gw: &Gateway) -> u64 {
    let m = get(gw.metrics_addr, "/metrics").await.text();
    m.lines()
        .filter(|l| l.starts_with("tollgate_ratelimit_store_errors_total"))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
        .sum()
}

#[tokio::test]
async fn redis_failure_modes_and_recovery() {
    let port = free_port();
    let Some(redis) = PrivateRedis::start(port) else {
        return skip("no redis-server on this machine to kill and restart");
    };
    let fake = FakeOpenAi::start("p").await;
    let cfg = format!(
        "{FAST_TIMEOUTS}{}{}",
        provider("p", &[&fake], ""),
        model("m", "p", "economy", "")
    );
    let url = format!("redis://127.0.0.1:{port}/");
    // A free account: limited, so every request goes to the counter store.
    let open = Gateway::start_opts(
        tollgate_bin!(),
        &cfg,
        Opts {
            redis_url: Some(url.clone()),
            plan: Some("free".into()),
            ..Opts::default()
        },
    )
    .await;
    let closed = Gateway::start_opts(
        tollgate_bin!(),
        &cfg,
        Opts {
            redis_url: Some(url.clone()),
            storage: "redis_failure_mode = \"fail_closed\"\nredis_timeout_ms = 300".into(),
            database_url: Some(open.config_db()),
            no_account: true,
            ..Opts::default()
        },
    )
    .await;
    // Both healthy on Redis.
    wait_for(|| async {
        open.chat(body()).await.status == 200
            && closed.chat_as(Some(&open.key), &body()).await.status == 200
    })
    .await;
    assert_eq!(store_errors(&open).await, 0);

    redis.kill();
    // fail_open serves (counting in-process) and counts the failure; fail_closed answers 503.
    let r = open.chat(body()).await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert!(store_errors(&open).await >= 1);
    let r = closed.chat_as(Some(&open.key), &body()).await;
    r.error(503, "service_unavailable");
    assert!(open.is_healthy().await && closed.is_healthy().await);

    // Redis comes back on the same port: both recover without a restart.
    let _redis = PrivateRedis::start(port).expect("restart redis");
    wait_for(|| async { closed.chat_as(Some(&open.key), &body()).await.status == 200 }).await;
    let errors = store_errors(&open).await;
    wait_for(|| async { open.chat(body()).await.status == 200 }).await;
    let settled = store_errors(&open).await;
    for _ in 0..3 {
        assert_eq!(open.chat(body()).await.status, 200);
    }
    assert_eq!(
        store_errors(&open).await,
        settled,
        "no more store errors after recovery"
    );
    assert!(settled >= errors);

    // Pointed at a dead port from the start: the configured mode applies at once.
    let dead = format!("redis://127.0.0.1:{}/", free_port());
    let never = Gateway::start_opts(
        tollgate_bin!(),
        &cfg,
        Opts {
            redis_url: Some(dead),
            storage: "redis_failure_mode = \"fail_closed\"\nredis_timeout_ms = 200".into(),
            database_url: Some(open.config_db()),
            no_account: true,
            ..Opts::default()
        },
    )
    .await;
    never
        .chat_as(Some(&open.key), &body())
        .await
        .error(503, "service_unavailable");
}

async fn wait_for<F, Fut>(f: F)
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let t = Instant::now();
    while !f().await {
        assert!(
            t.elapsed() < Duration::from_secs(15),
            "condition not reached in 15 s"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test]
async fn admission_leases_far_from_the_limit_never_exceed_it() {
    if redis_url().is_none() {
        return skip("admission leases need Redis (TOLLGATE_TEST_REDIS_URL)");
    }
    let fake = FakeOpenAi::start("p").await;
    let cfg = format!(
        "{FAST_TIMEOUTS}{}{}",
        provider("p", &[&fake], ""),
        model("m", "p", "economy", "")
    );
    let storage = "rate_limit_lease = 16".to_string();
    let one = Gateway::start_opts(
        tollgate_bin!(),
        &cfg,
        Opts {
            storage: storage.clone(),
            ..Opts::default()
        },
    )
    .await;
    one.admin_plan(&one.user_id, "business", Some(600), None)
        .await;
    let two = Gateway::start_opts(
        tollgate_bin!(),
        &cfg,
        Opts {
            database_url: Some(one.config_db()),
            redis_prefix: one.redis_prefix(),
            storage,
            no_account: true,
            ..Opts::default()
        },
    )
    .await;
    let send = |addr, key: String| async move {
        let b = serde_json::to_vec(&body()).unwrap();
        request(
            addr,
            "POST",
            "/v1/chat/completions",
            &[("Authorization", &format!("Bearer {key}"))],
            &b,
        )
        .await
    };
    let leased = |text: String| {
        text.lines()
            .find_map(|l| l.strip_prefix("tollgate_ratelimit_leased_total{plan=\"business\"} "))
            .map_or(0, |v| v.trim().parse::<u64>().unwrap())
    };
    // One after another: one Redis round trip admits a request and leases 16 more.
    for _ in 0..40 {
        assert_eq!(send(one.addr, one.key.clone()).await.status, 200);
    }
    let used = leased(get(one.metrics_addr, "/metrics").await.text());
    assert!(used >= 34, "most admissions came from leases: {used}");

    // A burst on both instances: concurrent misses are checked one by one while one of them
    // asks for a lease.
    let mut ok = 40;
    let mut tasks = Vec::new();
    for i in 0..700 {
        let addr = if i % 2 == 0 { one.addr } else { two.addr };
        tasks.push(tokio::spawn(send(addr, one.key.clone())));
    }
    for t in tasks {
        match t.await.unwrap().status {
            200 => ok += 1,
            429 => {}
            s => panic!("unexpected {s}"),
        }
    }
    // Never more than the limit; fewer only by what a lease still holds unused.
    assert!((600 - 2 * 16..=600).contains(&ok), "admitted {ok}");

    // Unused leased admissions go back within about a second; then exactly the limit in all
    // (until both instances refuse: one may refuse while the other still hands out the last
    // admissions it leased).
    tokio::time::sleep(Duration::from_millis(1_600)).await;
    let mut refused_in_a_row = 0;
    for i in 0.. {
        let addr = if i % 2 == 0 { one.addr } else { two.addr };
        let r = send(addr, one.key.clone()).await;
        if r.status == 429 {
            assert_eq!(r.header("x-ratelimit-remaining-requests"), Some("0"));
            refused_in_a_row += 1;
            if refused_in_a_row == 2 {
                break;
            }
            continue;
        }
        refused_in_a_row = 0;
        assert_eq!(r.status, 200);
        ok += 1;
        assert!(ok <= 600, "over the limit");
    }
    assert_eq!(ok, 600, "exactly the limit across both instances");
}
