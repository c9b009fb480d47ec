//! A key's own limits and a plan's beyond its hourly and daily windows (issue 29): requests
//! per minute, tokens per minute (counted with an estimate at admission, corrected with the
//! usage at settlement) and requests in flight (a slot per request, given back however it
//! ends: answered, the client gone, or its instance killed). 429 with `Retry-After`, naming
//! the limit. Runs on SQLite, and on Postgres + Redis when set (two instances there).

use std::time::{Duration, Instant};

use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tollgate_testkit::openai::Mode;
use tollgate_testkit::*;

/// `gw`'s API with `key`.
async fn api(gw: &Gateway, method: &str, path: &str, key: &str, body: &Value) -> Response {
    gw.api_as(key, method, path, body).await
}

async fn key_with(gw: &Gateway, settings: Value) -> String {
    let mut body = json!({"name": "agent"});
    body.as_object_mut()
        .unwrap()
        .extend(settings.as_object().unwrap().clone());
    let r = api(gw, "POST", "/api/v1/keys", &gw.key, &body).await;
    assert_eq!(r.status, 201, "{}", r.text());
    assert_eq!(r.json()["requests_per_minute"], body["requests_per_minute"]);
    r.json()["key"].as_str().unwrap().to_owned()
}

async fn chat_at(addr: std::net::SocketAddr, key: &str, stream: bool) -> Response {
    let body = json!({"model": "m", "messages": user("hi"), "max_tokens": 100, "stream": stream});
    let b = serde_json::to_vec(&body).unwrap();
    let auth = format!("Bearer {key}");
    let headers = [
        ("Content-Type", "application/json"),
        ("Authorization", auth.as_str()),
    ];
    request(addr, "POST", "/v1/chat/completions", &headers, &b).await
}

/// Waits, if needed, until a UTC minute has at least `room` left: a per-minute count that
/// the test reads must not start over in the middle.
async fn minute_with_room(room: Duration) {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    let left = 60_000 - now % 60_000;
    if left < room.as_millis() as u64 {
        tokio::time::sleep(Duration::from_millis(left + 50)).await;
    }
}

#[tokio::test]
async fn a_key_limited_to_requests_per_minute_is_refused_with_retry_after() {
    let fake = FakeOpenAi::start("p").await;
    let gw = Gateway::start(tollgate_bin!(), &one_model_config(&fake, "m")).await;
    let key = key_with(&gw, json!({"requests_per_minute": 3})).await;
    for _ in 0..3 {
        assert_eq!(chat_at(gw.addr, &key, false).await.status, 200);
    }
    let r = chat_at(gw.addr, &key, false).await;
    let e = r.error(429, "rate_limit_exceeded");
    assert!(
        e["error"]["message"]
            .as_str()
            .unwrap()
            .contains("3 requests per minute"),
        "{e}"
    );
    let retry: u64 = r.header("retry-after").unwrap().parse().unwrap();
    assert!((1..=60).contains(&retry), "{retry}");
    // The account's other keys are not limited by it.
    assert_eq!(chat_at(gw.addr, &gw.key, false).await.status, 200);
}

#[tokio::test]
async fn tokens_per_minute_count_the_usage_exactly_across_instances() {
    // Each request: 10 + 100 tokens used, estimated at admission as its prompt plus
    // max_tokens (100), corrected to 110 when settled.
    let fake = FakeOpenAi::builder("p")
        .mode(Mode::Usage(10, 100))
        .start()
        .await;
    let cfg = one_model_config(&fake, "m");
    let gw = Gateway::start(tollgate_bin!(), &cfg).await;
    let other = match redis_url() {
        Some(_) => Some(gw.second(tollgate_bin!(), &cfg).await),
        None => None,
    };
    let key = key_with(&gw, json!({"tokens_per_minute": 1050})).await;
    minute_with_room(Duration::from_secs(20)).await;
    let mut served = 0;
    for i in 0..20 {
        let addr = match (&other, i % 2) {
            (Some(o), 1) => o.addr,
            _ => gw.addr,
        };
        let r = chat_at(addr, &key, i % 3 == 0).await;
        if r.status == 429 {
            let e = r.error(429, "rate_limit_exceeded");
            let msg = e["error"]["message"].as_str().unwrap();
            assert!(msg.contains("1050 tokens per minute"), "{msg}");
            assert!(r.header("retry-after").is_some());
            break;
        }
        assert_eq!(r.status, 200, "{}", r.text());
        served += 1;
    }
    // 110 each once settled: after 8 (880 counted) the ninth's estimate (100 and a prompt far
    // below 70) fits in 1050; after 9 (990) the tenth's does not, on whichever instance.
    assert_eq!(served, 9);
    if other.is_none() {
        skip("tokens per minute across two instances need Redis: TOLLGATE_TEST_REDIS_URL is not set (one instance was checked)");
    }
}

#[tokio::test]
async fn a_plan_limits_tokens_per_minute_and_requests_in_flight_per_account() {
    let fake = FakeOpenAi::builder("p")
        .mode(Mode::Slow(Duration::from_millis(150)))
        .words(6)
        .start()
        .await;
    let opts = Opts {
        plans: Some("[plans.pro]\nrequests_per_hour = 100000\ntokens_per_minute = 100000\nconcurrent_requests = 1\n".into()),
        plan: Some("pro".into()),
        ..Opts::default()
    };
    let gw = Gateway::start_opts(tollgate_bin!(), &one_model_config(&fake, "m"), opts).await;
    let first = {
        let (addr, key) = (gw.addr, gw.key.clone());
        tokio::spawn(async move { chat_at(addr, &key, true).await })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    let r = chat_at(gw.addr, &gw.key, false).await;
    let e = r.error(429, "rate_limit_exceeded");
    assert!(
        e["error"]["message"]
            .as_str()
            .unwrap()
            .contains("the plan's limit of 1 requests in flight"),
        "{e}"
    );
    assert_eq!(first.await.unwrap().status, 200);
    assert_eq!(chat_at(gw.addr, &gw.key, false).await.status, 200);
}

/// Opens a stream and goes away once its first bytes arrived.
async fn vanish(addr: std::net::SocketAddr, key: &str) {
    let body = json!({"model": "m", "messages": user("hi"), "stream": true}).to_string();
    let raw = format!(
        "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {key}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    s.write_all(raw.as_bytes()).await.unwrap();
    let mut buf = [0u8; 512];
    let n = s.read(&mut buf).await.unwrap();
    assert!(String::from_utf8_lossy(&buf[..n]).starts_with("HTTP/1.1 200"));
}

/// Waits until a request with `key` on `addr` is admitted again (its slots given back).
async fn admitted_within(addr: std::net::SocketAddr, key: &str, limit: Duration) -> Duration {
    let t = Instant::now();
    loop {
        let r = chat_at(addr, key, false).await;
        if r.status == 200 {
            return t.elapsed();
        }
        assert_eq!(r.status, 429, "{}", r.text());
        assert!(
            t.elapsed() < limit,
            "the slots were not given back within {limit:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test]
async fn three_in_flight_of_twenty_streams_and_every_slot_comes_back() {
    let fake = FakeOpenAi::builder("p")
        .mode(Mode::Slow(Duration::from_millis(200)))
        .words(8)
        .start()
        .await;
    let cfg = one_model_config(&fake, "m");
    let opts = Opts {
        storage: "in_flight_ttl_secs = 3\n".into(),
        ..Opts::default()
    };
    let gw = Gateway::start_opts(tollgate_bin!(), &cfg, opts).await;
    let key = key_with(&gw, json!({"concurrent_requests": 3})).await;

    // Twenty streams at once: three are served, the others refused while those run.
    let mut tasks = Vec::new();
    for _ in 0..20 {
        let (addr, key) = (gw.addr, key.clone());
        tasks.push(tokio::spawn(async move { chat_at(addr, &key, true).await }));
    }
    let mut statuses = Vec::new();
    for t in tasks {
        let r = t.await.unwrap();
        if r.status == 429 {
            let e = r.error(429, "rate_limit_exceeded");
            assert!(e["error"]["message"]
                .as_str()
                .unwrap()
                .contains("3 requests in flight"));
        }
        statuses.push(r.status);
    }
    assert_eq!(
        statuses.iter().filter(|s| **s == 200).count(),
        3,
        "{statuses:?}"
    );
    assert_eq!(fake.chat_count(), 3);
    // Answered: their slots are back.
    admitted_within(gw.addr, &key, Duration::from_secs(2)).await;

    // Clients that vanish mid-stream give their slots back too.
    for _ in 0..3 {
        vanish(gw.addr, &key).await;
    }
    admitted_within(gw.addr, &key, Duration::from_secs(5)).await;

    // An instance killed with three streams in flight: its slots expire within the TTL.
    if redis_url().is_none() {
        return skip("an instance killed mid-stream needs a second instance sharing Redis: TOLLGATE_TEST_REDIS_URL is not set");
    }
    let other = gw.second(tollgate_bin!(), &cfg).await;
    let before = fake.chat_count();
    let mut streams = Vec::new();
    for _ in 0..3 {
        let (addr, key) = (other.addr, key.clone());
        streams.push(tokio::spawn(async move {
            // A slot of a vanished client above may still be held (until it is noticed, or its
            // TTL): a stream refused for it asks again, as a client told to retry would.
            let until = Instant::now() + Duration::from_secs(8);
            loop {
                let r = chat_at(addr, &key, true).await;
                if r.status != 429 || Instant::now() > until {
                    return r;
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }));
    }
    // All three admitted and streaming (the provider has them), however slowly a loaded machine
    // starts the second instance's first requests: a fixed pause was not always enough in CI.
    let started = Instant::now();
    while fake.chat_count() < before + 3 {
        if started.elapsed() > Duration::from_secs(12) {
            let mut seen = Vec::new();
            for s in streams.iter_mut().filter(|s| s.is_finished()) {
                let r = s.await.unwrap();
                seen.push(format!("{} {}", r.status, r.text()));
            }
            panic!("the three streams never reached the provider: {seen:?}");
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    chat_at(gw.addr, &key, false)
        .await
        .error(429, "rate_limit_exceeded");
    drop(other);
    for s in streams {
        let _ = s.await;
    }
    let waited = admitted_within(gw.addr, &key, Duration::from_secs(8)).await;
    assert!(
        waited >= Duration::from_millis(500),
        "the slots were never held: {waited:?}"
    );
}

#[tokio::test]
async fn a_plans_tokens_per_minute_hold_for_every_key_of_the_account() {
    // 110 tokens a request; the plan allows 250 a minute to the account, whichever key.
    let fake = FakeOpenAi::builder("p")
        .mode(Mode::Usage(10, 100))
        .start()
        .await;
    let opts = Opts {
        plans: Some("[plans.pro]\nrequests_per_hour = 100000\ntokens_per_minute = 250\n".into()),
        plan: Some("pro".into()),
        ..Opts::default()
    };
    let gw = Gateway::start_opts(tollgate_bin!(), &one_model_config(&fake, "m"), opts).await;
    let other = key_with(&gw, json!({})).await;
    minute_with_room(Duration::from_secs(20)).await;
    assert_eq!(chat_at(gw.addr, &gw.key, false).await.status, 200);
    assert_eq!(chat_at(gw.addr, &other, true).await.status, 200);
    let r = chat_at(gw.addr, &other, false).await;
    let e = r.error(429, "rate_limit_exceeded");
    assert!(
        e["error"]["message"]
            .as_str()
            .unwrap()
            .contains("the plan's limit of 250 tokens per minute"),
        "{e}"
    );
    assert!(r.header("retry-after").is_some());
}
