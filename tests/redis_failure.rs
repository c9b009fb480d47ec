//! Redis failure modes: when the counter store dies, `fail_open` serves (counting in-process)
//! and `fail_closed` answers 503; both recover without a restart when Redis comes back, and a
//! Redis that was never there applies the mode from the start. Uses a `redis-server` of its own.

use std::time::{Duration, Instant};

use tollgate_testkit::*;

fn body() -> serde_json::Value {
    serde_json::json!({"model":"m","messages":user("hi")})
}

async fn store_errors(gw: &Gateway) -> u64 {
    let m = get(gw.metrics_addr, "/metrics").await.text();
    m.lines()
        .filter(|l| l.starts_with("tollgate_ratelimit_store_errors_total"))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
        .sum()
}

#[tokio::test]
async fn when_redis_dies_fail_open_serves_fail_closed_refuses_and_both_recover() {
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
