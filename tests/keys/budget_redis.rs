//! A key's budget while its Redis is down (issue 29; README, Failure modes): a budget is money,
//! so a key with one is refused 503 whatever `redis_failure_mode` says, while a key without one
//! is served under `fail_open`; a Redis that comes back empty is seeded again from the ledger's
//! usage rows, so the budget goes on from what was spent.

use std::time::Duration;

use serde_json::json;
use tollgate_testkit::openai::Mode;
use tollgate_testkit::*;

#[tokio::test]
async fn a_budgeted_key_is_refused_while_redis_is_down_and_goes_on_from_what_it_spent() {
    let port = free_port();
    let Some(redis) = PrivateRedis::start(port) else {
        return skip("no redis-server on this machine to kill and restart");
    };
    let fake = FakeOpenAi::builder("p")
        .mode(Mode::Usage(10, 100))
        .start()
        .await;
    let opts = Opts {
        redis_url: Some(format!("redis://127.0.0.1:{port}/")),
        storage: "redis_timeout_ms = 300".into(),
        ..Opts::default()
    };
    let gw = Gateway::start_opts(tollgate_bin!(), &one_model_config(&fake, "m"), opts).await;
    let auth = format!("Bearer {}", gw.key);
    let r = gw
        .with_auth(
            "POST",
            "/api/v1/keys",
            &auth,
            json!({"name": "b", "budget_credits": 10, "budget_period": "month"})
                .to_string()
                .as_bytes(),
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.text());
    let (key, id) = (
        r.json()["key"].as_str().unwrap().to_owned(),
        r.json()["id"].as_str().unwrap().to_owned(),
    );
    let ask = json!({"model": "m", "messages": user("hi"), "max_tokens": 100});
    assert_eq!(gw.chat_as(Some(&key), &ask).await.status, 200);

    redis.kill();
    gw.chat_as(Some(&key), &ask)
        .await
        .error(503, "service_unavailable");
    // The default fail_open: a key without a budget is served.
    assert_eq!(gw.chat_as(Some(&gw.key), &ask).await.status, 200);

    // Back, and empty: seeded from the ledger, the budget counts the charge made before.
    let _redis = PrivateRedis::start(port).expect("restart redis");
    let t = std::time::Instant::now();
    loop {
        let r = gw.chat_as(Some(&key), &ask).await;
        if r.status == 200 {
            break;
        }
        assert!(t.elapsed() < Duration::from_secs(10), "{}", r.text());
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let keys = gw.with_auth("GET", "/api/v1/keys", &auth, b"").await.json();
    let k = keys["data"]
        .as_array()
        .unwrap()
        .iter()
        .find(|k| k["id"] == id.as_str())
        .unwrap()
        .clone();
    assert_eq!(micros(&k["spent_credits"]), 2 * 210_000, "{k}");
    assert!(gw.is_healthy().await);
}
