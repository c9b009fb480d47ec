//! Reserved admissions: far from its limit an instance takes a batch of admissions from Redis at
//! once, yet two instances together never admit more than the limit, and unused leased
//! admissions go back. Needs Redis (`TOLLGATE_TEST_REDIS_URL`).

use std::time::Duration;

use serde_json::json;
use tollgate_testkit::*;

fn body() -> serde_json::Value {
    json!({"model":"m","messages":user("hi")})
}

#[tokio::test]
async fn reserved_admissions_far_from_the_limit_never_exceed_it() {
    if redis_url().is_none() {
        return skip("reserved admissions need Redis (TOLLGATE_TEST_REDIS_URL)");
    }
    let fake = FakeOpenAi::start("p").await;
    // Generous upstream timeouts: a burst of 700 on a loaded 2-core machine may take over a
    // second to connect to the fake, and this test is about admissions, not timeouts (a 502 from
    // a connect timeout failed it once in CI).
    let cfg = format!(
        "[timeouts]\nconnect = 10\nresponse = 20\nstream_chunk = 10\nclient_idle = 20\n{}{}",
        provider("p", &[&fake], ""),
        model("m", "p", "economy", "")
    );
    let storage = "rate_limit_reserve = 16".to_string();
    let one = Gateway::start_opts(
        tollgate_bin!(),
        &cfg,
        Opts {
            storage,
            ..Opts::default()
        },
    )
    .await;
    one.admin_plan(&one.user_id, "business", Some(600), None)
        .await;
    let two = one.second(tollgate_bin!(), &cfg).await;
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
