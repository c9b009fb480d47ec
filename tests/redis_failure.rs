//! Redis failure modes: when the counter store dies, `fail_open` serves (counting in-process)
//! and `fail_closed` answers 503; both recover without a restart when Redis comes back, and a
//! Redis that was never there applies the mode from the start. The limit stays exact across the
//! outage: what Redis admitted before still counts in-process, and what was admitted in-process
//! is counted into Redis when it returns (even empty, after a restart). Uses a `redis-server` of
//! its own.

use std::time::{Duration, Instant};

use tollgate_testkit::books;
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
    let cfg = one_model_config(&fake, "m");
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
    // fail_open serves all along: recovered once its requests stop counting store errors.
    wait_for(|| async {
        let before = store_errors(&open).await;
        open.chat(body()).await.status == 200 && store_errors(&open).await == before
    })
    .await;
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

/// How many members of `key` are within the last hour, in the private Redis on `port`.
async fn zcount(port: u16, key: &str) -> u64 {
    let Ok(client) = ::redis::Client::open(format!("redis://127.0.0.1:{port}/")) else {
        return 0;
    };
    let Ok(mut conn) = client.get_multiplexed_async_connection().await else {
        return 0;
    };
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64);
    ::redis::cmd("ZCOUNT")
        .arg(key)
        .arg(now - 3_600_000)
        .arg("+inf")
        .query_async(&mut conn)
        .await
        .unwrap_or(0)
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

/// What a run of requests got: how many were admitted (200), limited (429) and refused for the
/// store (503). Anything else fails the test.
#[derive(Debug, Default, PartialEq)]
struct Tally {
    ok: u32,
    limited: u32,
    unavailable: u32,
}

/// Request ids answered 200, by key: the books are checked against them at the end.
static SERVED: std::sync::Mutex<Vec<(String, String)>> = std::sync::Mutex::new(Vec::new());

fn served(key: &str) -> Vec<String> {
    let all = SERVED.lock().unwrap();
    all.iter()
        .filter(|(k, _)| k == key)
        .map(|(_, id)| id.clone())
        .collect()
}

async fn tally(gw: &Gateway, key: &str, n: u32) -> Tally {
    let mut t = Tally::default();
    for _ in 0..n {
        let r = gw.chat_as(Some(key), &body()).await;
        match r.status {
            200 => {
                let id = r.header("x-request-id").unwrap().to_string();
                SERVED.lock().unwrap().push((key.to_string(), id));
                t.ok += 1
            }
            429 => {
                r.error(429, "rate_limit_exceeded");
                t.limited += 1;
            }
            503 => {
                r.error(503, "service_unavailable");
                assert!(r.header("retry-after").is_some(), "503 without Retry-After");
                t.unavailable += 1;
            }
            s => panic!("status {s}: {}", r.text()),
        }
    }
    t
}

const CAPPED: &str =
    "[plans.capped]\nrequests_per_hour = 20\n\n[plans.guest]\nrequests_per_hour = 100000\n";

fn capped(url: &str, prefix: &str, storage: &str) -> Opts {
    Opts {
        redis_url: Some(url.to_string()),
        redis_prefix: Some(prefix.to_string()),
        storage: storage.to_string(),
        plans: Some(CAPPED.into()),
        plan: Some("capped".into()),
        ..Opts::default()
    }
}

#[tokio::test]
async fn the_limit_stays_exact_across_a_redis_outage_and_its_recovery() {
    let port = free_port();
    let Some(redis) = PrivateRedis::start(port) else {
        return skip("no redis-server on this machine to kill and restart");
    };
    let fake = FakeOpenAi::start("p").await;
    let cfg = one_model_config(&fake, "m");
    let url = format!("redis://127.0.0.1:{port}/");
    let suffix = free_port();
    let (p_open, p_full, p_closed) = (
        format!("tgopen{suffix}"),
        format!("tgfull{suffix}"),
        format!("tgclosed{suffix}"),
    );
    let closed_mode = "redis_failure_mode = \"fail_closed\"\nredis_timeout_ms = 300";
    // Three accounts of 20 requests an hour, each on an instance of its own.
    let open = Gateway::start_opts(tollgate_bin!(), &cfg, capped(&url, &p_open, "")).await;
    let full = Gateway::start_opts(tollgate_bin!(), &cfg, capped(&url, &p_full, "")).await;
    let closed =
        Gateway::start_opts(tollgate_bin!(), &cfg, capped(&url, &p_closed, closed_mode)).await;
    let mut initial = Vec::new();
    for gw in [&open, &full, &closed] {
        initial.push(books::read(&gw.config_db(), &gw.user_id).await.money);
    }
    // Before the outage, counted in Redis.
    let ok = |n| Tally {
        ok: n,
        ..Tally::default()
    };
    assert_eq!(tally(&open, &open.key, 5).await, ok(5));
    assert_eq!(tally(&full, &full.key, 12).await, ok(12));
    assert_eq!(tally(&closed, &closed.key, 7).await, ok(7));

    redis.kill();
    // fail_open counts in-process, and what Redis admitted before the outage still counts.
    assert_eq!(tally(&open, &open.key, 6).await, ok(6));
    let t = tally(&full, &full.key, 12).await;
    assert_eq!(
        (t.ok, t.limited),
        (8, 4),
        "fail_open during the outage: {t:?}"
    );
    // fail_closed refuses while Redis is away.
    let t = tally(&closed, &closed.key, 3).await;
    assert_eq!(t.unavailable, 3, "fail_closed during the outage: {t:?}");
    assert!(store_errors(&open).await >= 1 && store_errors(&closed).await >= 1);

    // Redis comes back empty, on the same port.
    let _redis = PrivateRedis::start(port).expect("restart redis");
    // fail_open: 5 + 6 were admitted, so exactly 9 more, whether a check still fails while the
    // connection comes back (counted in-process) or reaches Redis.
    let t = tally(&open, &open.key, 15).await;
    assert_eq!((t.ok, t.limited), (9, 6), "fail_open after recovery: {t:?}");
    // Redis itself counts all 20 of each fail_open account, with their times: another
    // instance checking there would refuse too.
    for (gw, prefix) in [(&open, &p_open), (&full, &p_full)] {
        let key = format!("{prefix}:rl:{{acct:{}}}:3600000", gw.user_id);
        wait_for(|| async { zcount(port, &key).await == 20 }).await;
    }
    assert_eq!(tally(&open, &open.key, 3).await.limited, 3);
    assert_eq!(tally(&full, &full.key, 3).await.limited, 3);

    // fail_closed: 503 until Redis answers again, then exactly 20 - 7 more.
    let t0 = Instant::now();
    let first = loop {
        let t = tally(&closed, &closed.key, 1).await;
        if t.unavailable == 0 {
            break t;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(15),
            "fail_closed never recovered"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let t = tally(&closed, &closed.key, 20).await;
    assert_eq!(
        (first.ok + t.ok, t.unavailable),
        (13, 0),
        "fail_closed after recovery: {t:?}"
    );
    // Every account's books balance: each 200 has its usage row, nothing else was charged.
    for (gw, initial) in [&open, &full, &closed].into_iter().zip(initial) {
        books::check(&gw.config_db(), &gw.user_id, initial, &served(&gw.key)).await;
    }
}
