//! Failover: within the tier on 500/429/refused connections, to the self-hosted provider,
//! 502 when nothing is left, error-first streams, death mid-stream, and health checks that
//! take an endpoint out and bring it back.

use std::time::Duration;

use serde_json::{json, Value};
use tollgate_testkit::*;

/// Three economy models on three providers, a powerful one, and a self-hosted fallback.
async fn setup() -> (Vec<FakeOpenAi>, Gateway) {
    let a = FakeOpenAi::start("a").await;
    let b = FakeOpenAi::start("b").await;
    let p = FakeOpenAi::start("pow").await;
    let local = FakeOpenAi::start("local").await;
    let cfg = format!(
        "{FAST_TIMEOUTS}{}{}{}{}{}{}{}{}",
        provider("pa", &[&a], ""),
        provider("pb", &[&b], ""),
        provider("pp", &[&p], ""),
        provider("plocal", &[&local], "self_hosted = true"),
        model("econ-a", "pa", "economy", ""),
        model("econ-b", "pb", "economy", ""),
        model("pow-1", "pp", "powerful", ""),
        model("local-1", "plocal", "normal", ""),
    );
    let gw = Gateway::start(tollgate_bin!(), &cfg).await;
    (vec![a, b, p, local], gw)
}

fn first_chunk_model(r: &Response) -> Value {
    let c: Value = serde_json::from_str(&r.sse_data()[0]).unwrap();
    c["model"].clone()
}

#[tokio::test]
async fn fails_over_within_the_tier_on_500_and_429() {
    let (f, gw) = setup().await;
    for status in [500, 503, 429] {
        f[0].set_mode(Mode::Status(status));
        let r = gw
            .chat(json!({"model":"econ-a","messages":user("hi")}))
            .await;
        assert_eq!(r.status, 200, "{status}: {}", r.text());
        assert_eq!(r.json()["model"], "econ-b", "after {status}");
        let r = gw
            .chat(json!({"model":"econ-a","messages":user("hi"),"stream":true}))
            .await;
        assert_eq!(first_chunk_model(&r), "econ-b");
    }
    assert!(f[0].chat_count() >= 1, "the named model was tried first");
    assert_eq!(f[2].chat_count(), 0, "another tier is never used");
}

#[tokio::test]
async fn refused_connection_fails_over() {
    let dead = free_port();
    let b = FakeOpenAi::start("b").await;
    let cfg = format!(
        "{FAST_TIMEOUTS}[[providers]]\nname = \"dead\"\nendpoints = [\"http://127.0.0.1:{dead}\"]\n\n{}{}{}",
        provider("pb", &[&b], ""),
        model("econ-a", "dead", "economy", ""),
        model("econ-b", "pb", "economy", ""),
    );
    let gw = Gateway::start(tollgate_bin!(), &cfg).await;
    let r = gw
        .chat(json!({"model":"econ-a","messages":user("hi")}))
        .await;
    assert_eq!(r.json()["model"], "econ-b");
}

#[tokio::test]
async fn falls_back_to_self_hosted_last_then_502() {
    let (f, gw) = setup().await;
    f[0].set_mode(Mode::Status(500));
    f[1].set_mode(Mode::Status(502));
    let r = gw
        .chat(json!({"model":"economy","messages":user("hi")}))
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json()["model"], "local-1");
    let r = gw
        .chat(json!({"model":"econ-b","messages":user("hi"),"stream":true}))
        .await;
    assert_eq!(first_chunk_model(&r), "local-1");

    f[3].set_mode(Mode::Status(500));
    let r = gw
        .chat(json!({"model":"econ-a","messages":user("hi")}))
        .await;
    let v = r.error(502, "upstream_error");
    assert!(
        v["error"]["message"].as_str().unwrap().contains("failed"),
        "{v}"
    );
    let r = gw
        .chat(json!({"model":"econ-a","messages":user("hi"),"stream":true}))
        .await;
    r.error(502, "upstream_error");
    assert!(gw.is_healthy().await);
}

#[tokio::test]
async fn error_as_first_event_fails_over() {
    let (f, gw) = setup().await;
    f[0].set_mode(Mode::ErrorFirst);
    let r = gw
        .chat(json!({"model":"econ-a","messages":user("hi"),"stream":true}))
        .await;
    assert_eq!(r.status, 200);
    assert_eq!(first_chunk_model(&r), "econ-b");
    assert_eq!(r.sse_data().last().unwrap(), "[DONE]");
    assert!(!r.text().contains("overloaded"));
}

#[tokio::test]
async fn death_mid_stream_ends_with_an_error_event_and_no_done() {
    let (f, gw) = setup().await;
    f[0].set_mode(Mode::DieAfter(3));
    let r = gw
        .chat(json!({"model":"econ-a","messages":user("hi"),"stream":true}))
        .await;
    assert_eq!(r.status, 200);
    let data = r.sse_data();
    assert!(!data.iter().any(|d| d == "[DONE]"), "{data:?}");
    let last: Value = serde_json::from_str(data.last().unwrap()).unwrap();
    assert_eq!(last["error"]["type"], "upstream_error");
    assert_eq!(last["error"]["code"], 502);
    // What was delivered came from the first model: no silent switch mid-answer.
    let first: Value = serde_json::from_str(&data[0]).unwrap();
    assert_eq!(first["model"], "econ-a");
    assert_eq!(f[1].chat_count(), 0);
}

#[tokio::test]
async fn unhealthy_endpoint_is_skipped_and_used_again_after_recovery() {
    let good = FakeOpenAi::start("good").await;
    let sick = FakeOpenAi::start("sick").await;
    let hc = "health_check = { path = \"/v1/models\", interval_ms = 100, timeout_ms = 500 }";
    let cfg = format!(
        "{FAST_TIMEOUTS}{}{}",
        provider("pool", &[&sick, &good], hc),
        model("m", "pool", "economy", ""),
    );
    let gw = Gateway::start(tollgate_bin!(), &cfg).await;
    sick.set_healthy(false);
    // Wait for the checker to see it.
    let seen = sick.health_checks();
    for _ in 0..100 {
        if sick.health_checks() > seen + 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let before = sick.chat_count();
    for _ in 0..6 {
        assert_eq!(
            gw.chat(json!({"model":"m","messages":user("hi")}))
                .await
                .status,
            200
        );
    }
    assert_eq!(
        sick.chat_count(),
        before,
        "an unhealthy endpoint gets no traffic"
    );
    let metrics = get(gw.metrics_addr, "/metrics").await.text();
    assert!(
        metrics.contains(&format!(
            "tollgate_upstream_healthy{{endpoint=\"{}\",provider=\"pool\"}} 0",
            sick.addr
        )),
        "{metrics}"
    );

    sick.set_healthy(true);
    let mut recovered = false;
    for _ in 0..50 {
        gw.chat(json!({"model":"m","messages":user("hi")})).await;
        if sick.chat_count() > before {
            recovered = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(recovered, "a recovered endpoint is used again");
}

#[tokio::test]
async fn consecutive_failures_eject_an_endpoint_passively() {
    let good = FakeOpenAi::start("good").await;
    let bad = FakeOpenAi::start("bad").await;
    let cfg = format!(
        "{FAST_TIMEOUTS}{}{}",
        provider(
            "pool",
            &[&bad, &good],
            "eject_after_failures = 2\neject_secs = 60"
        ),
        model("m", "pool", "economy", ""),
    );
    let gw = Gateway::start(tollgate_bin!(), &cfg).await;
    bad.set_mode(Mode::Status(500));
    for _ in 0..8 {
        let r = gw.chat(json!({"model":"m","messages":user("hi")})).await;
        assert_eq!(r.status, 200, "the pool's other endpoint answers");
    }
    assert_eq!(
        bad.chat_count(),
        2,
        "ejected after two consecutive failures"
    );
}

#[tokio::test]
async fn a_502_says_which_model_failed_and_how_but_never_where_or_what_the_provider_said() {
    let (f, gw) = setup().await;
    f[0].set_mode(Mode::Status(503));
    f[1].set_mode(Mode::Garbage);
    f[3].set_mode(Mode::Status(500));
    for stream in [false, true] {
        let v = gw
            .chat(json!({"model":"econ-a","messages":user("hi"),"stream":stream}))
            .await
            .error(502, "upstream_error");
        let msg = v["error"]["message"].as_str().unwrap();
        assert!(msg.contains("local-1"), "{msg}");
        for leak in ["127.0.0.1", "says", "overloaded", "html"] {
            assert!(!msg.contains(leak), "{leak} in {msg}");
        }
    }
    // Mid-stream: the error event names the model, not the provider's words.
    f[0].set_mode(Mode::DieAfter(2));
    let r = gw
        .chat(json!({"model":"econ-a","messages":user("hi"),"stream":true}))
        .await;
    let last: Value = serde_json::from_str(r.sse_data().last().unwrap()).unwrap();
    let msg = last["error"]["message"].as_str().unwrap();
    assert!(
        msg.contains("econ-a") && !msg.contains("127.0.0.1"),
        "{msg}"
    );
}

#[tokio::test]
async fn each_endpoint_is_health_checked_with_its_own_host() {
    let a = FakeOpenAi::start("a").await;
    let b = FakeOpenAi::start("b").await;
    let hc = "health_check = { path = \"/v1/models\", interval_ms = 100, timeout_ms = 500 }";
    let cfg = format!(
        "{FAST_TIMEOUTS}{}{}",
        provider("pool", &[&a, &b], hc),
        model("m", "pool", "economy", ""),
    );
    let _gw = Gateway::start(tollgate_bin!(), &cfg).await;
    for _ in 0..100 {
        if a.health_checks() > 0 && b.health_checks() > 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    for fake in [&a, &b] {
        let hosts = fake.health_check_hosts();
        assert!(!hosts.is_empty(), "{} was never checked", fake.addr);
        let own = fake.addr.to_string();
        assert!(
            hosts.iter().all(|h| *h == own),
            "{own} was checked as {hosts:?}"
        );
    }
}
