//! Rate limits per plan: hourly and daily windows, per-account overrides, the headers,
//! `retry_after`, rejected requests not counted or charged, and exactness under concurrency
//! (across two instances sharing Redis). In-process counters by default; Redis when
//! `TOLLGATE_TEST_REDIS_URL` is set.

use std::time::Duration;

use serde_json::json;
use tollgate_testkit::*;

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
async fn the_free_plans_hourly_limit_answers_429_with_headers_and_retry_after() {
    let (fake, gw) = small_plans(tollgate_bin!(), "", "free").await;
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
async fn the_daily_limit_applies_and_rejected_requests_are_not_counted() {
    let (_f, gw) = small_plans(tollgate_bin!(), "", "free").await;
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
async fn pro_has_no_daily_cap_and_per_account_overrides_win() {
    let (_f, gw) = small_plans(tollgate_bin!(), "", "pro").await;
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
async fn exactly_the_limit_is_admitted_under_300_concurrent_requests() {
    let fake = FakeOpenAi::start("p").await;
    let cfg = one_model_config(&fake, "m");
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
        Some(one.second(tollgate_bin!(), &cfg).await)
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
